//===- WeftGradientsLinalg.cpp - Gradients of matmul, conv and pooling ----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Matmul adjoints are matmuls again (the transpose flags absorb every
// transpose, so no weft.transpose is built); convolution and pooling
// adjoints are the dedicated backward ops, which later stages map onto
// library kernels (cuDNN's backward-data / backward-filter).
//
//===----------------------------------------------------------------------===//

#include "WeftGradients.h"

using namespace mlir;
using namespace weft;
using namespace weft::grad;

LogicalResult MatMulOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  Value g = resultGrads[0], lhs = getLhs(), rhs = getRhs();
  bool ta = getTransposeLhs(), tb = getTransposeRhs();
  // With L = op(lhs) and R = op(rhs): dL = g R^T and dR = L^T g. Solving
  // for the stored operands folds each op() into a transpose flag.
  Value dl = ta ? MatMulOp::create(b, loc, rhs, g, tb, /*transpose_rhs=*/true)
                : MatMulOp::create(b, loc, g, rhs, false, !tb);
  Value dr = tb ? MatMulOp::create(b, loc, g, lhs, /*transpose_lhs=*/true, ta)
                : MatMulOp::create(b, loc, lhs, g, !ta, false);
  // Both carry the full broadcast batch; sum it back over broadcast axes.
  operandGrads.push_back(reduceToShape(b, loc, dl, typeOf(lhs)));
  operandGrads.push_back(reduceToShape(b, loc, dr, typeOf(rhs)));
  return success();
}

LogicalResult Conv2DOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  Value g = resultGrads[0];
  operandGrads.push_back(Conv2DBackwardInputOp::create(
      b, loc, getInput().getType(), g, getFilter(), getStridesAttr(),
      getPaddingAttr(), getDilationsAttr(), getGroupsAttr()));
  operandGrads.push_back(Conv2DBackwardFilterOp::create(
      b, loc, getFilter().getType(), g, getInput(), getStridesAttr(),
      getPaddingAttr(), getDilationsAttr(), getGroupsAttr()));
  if (getBias())
    operandGrads.push_back(ReduceSumOp::create(b, loc, g, {0, 2, 3}));
  return success();
}

LogicalResult MaxPool2DOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  operandGrads.push_back(MaxPool2DGradOp::create(
      b, getLoc(), resultGrads[0], getInput(), getKernelAttr(),
      getStridesAttr(), getPaddingAttr()));
  return success();
}

LogicalResult AvgPool2DOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  operandGrads.push_back(AvgPool2DGradOp::create(
      b, getLoc(), getInput().getType(), resultGrads[0], getKernelAttr(),
      getStridesAttr(), getPaddingAttr(), getCountIncludePadAttr()));
  return success();
}

LogicalResult
GlobalAvgPoolOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  RankedTensorType input = getInput().getType();
  int64_t cells = 1;
  for (int64_t size : input.getShape().drop_front(2))
    cells *= size;
  Value spread = broadcastTo(b, loc, resultGrads[0], input.getShape());
  operandGrads.push_back(scale(
      b, loc, spread, cells == 0 ? 0.0 : 1.0 / static_cast<double>(cells)));
  return success();
}
