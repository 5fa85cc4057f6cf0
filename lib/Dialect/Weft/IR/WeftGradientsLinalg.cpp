//===- WeftGradientsLinalg.cpp - Gradients of matmul, conv and pooling ----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Matmul adjoints are matmuls again (the transpose flags absorb every
// transpose, so no weft.transpose is built); convolution and pooling
// adjoints are the dedicated backward ops, which later stages map onto
// library kernels (cuDNN's backward-data / backward-filter). Those backward
// ops are linear in each operand, so their own adjoints are convolutions
// and pools again; they matter because ConvTranspose legalizes to
// conv2d_backward_input. (max_pool2d_grad has no rule: it is never in a
// forward pass, and --weft-autodiff names it should one reach the loss.)
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

// With conv(x, w) the forward convolution, backward_input(g, w) = J_x^T g
// and backward_filter(g, x) = J_w^T g, so for all x, w, g:
//   <backward_input(g, w), x> = <g, conv(x, w)> = <backward_filter(g, x), w>.
// Each backward op's adjoints follow by reading that identity the other way.

LogicalResult
Conv2DBackwardInputOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // y = backward_input(g, w): <y, dy> = <g, conv(dy, w)>, so
  // d g = conv(dy, w) and d w = backward_filter(g, dy).
  Location loc = getLoc();
  Value dy = resultGrads[0];
  operandGrads.push_back(Conv2DOp::create(
      b, loc, getGrad().getType(), dy, getFilter(), /*bias=*/Value(),
      getStridesAttr(), getPaddingAttr(), getDilationsAttr(), getGroupsAttr()));
  operandGrads.push_back(Conv2DBackwardFilterOp::create(
      b, loc, getFilter().getType(), getGrad(), dy, getStridesAttr(),
      getPaddingAttr(), getDilationsAttr(), getGroupsAttr()));
  return success();
}

LogicalResult
Conv2DBackwardFilterOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // y = backward_filter(g, x): <y, dy> = <g, conv(x, dy)>, so
  // d g = conv(x, dy) and d x = backward_input(g, dy).
  Location loc = getLoc();
  Value dy = resultGrads[0];
  operandGrads.push_back(Conv2DOp::create(
      b, loc, getGrad().getType(), getInput(), dy, /*bias=*/Value(),
      getStridesAttr(), getPaddingAttr(), getDilationsAttr(), getGroupsAttr()));
  operandGrads.push_back(Conv2DBackwardInputOp::create(
      b, loc, getInput().getType(), getGrad(), dy, getStridesAttr(),
      getPaddingAttr(), getDilationsAttr(), getGroupsAttr()));
  return success();
}

LogicalResult
AvgPool2DGradOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                               SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // avg_pool2d_grad is the transpose of the linear map avg_pool2d, so its
  // own adjoint is avg_pool2d with the same attributes.
  operandGrads.push_back(AvgPool2DOp::create(
      b, getLoc(), getGrad().getType(), resultGrads[0], getKernelAttr(),
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
