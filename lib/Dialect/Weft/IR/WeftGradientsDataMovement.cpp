//===- WeftGradientsDataMovement.cpp - Gradients of data movement ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Each op that moves elements has an adjoint that moves them back: gather
// scatters (accumulating repeated indices) and scatter_add gathers, slice
// pads with zeros and pad slices, concat slices, transpose inverts its
// permutation, broadcast sums. (ONNX Pad's reflect, edge and wrap modes are
// gathers of constant indices, so their adjoint scatter_add sums the
// gradients of all copies of a cell back into it.)
//
//===----------------------------------------------------------------------===//

#include "WeftGradients.h"

using namespace mlir;
using namespace weft;
using namespace weft::grad;

LogicalResult GatherOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  Value zeros = splat(b, loc, getInput().getType(), 0.0);
  operandGrads.push_back(ScatterAddOp::create(b, loc, zeros, getIndices(),
                                              resultGrads[0], getAxisAttr()));
  operandGrads.push_back(Value());
  return success();
}

LogicalResult
ScatterAddOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // result = input + S(updates) with S linear: d input = g and
  // d updates = S^T g, which reads the rows S wrote, a gather.
  Value g = resultGrads[0];
  operandGrads.push_back(g);
  operandGrads.push_back(Value());
  operandGrads.push_back(
      GatherOp::create(b, getLoc(), g, getIndices(), getAxisAttr()));
  return success();
}

LogicalResult ReshapeOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  operandGrads.push_back(
      reshape(b, getLoc(), resultGrads[0], getInput().getType().getShape()));
  return success();
}

LogicalResult BroadcastOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  operandGrads.push_back(
      reduceToShape(b, getLoc(), resultGrads[0], getInput().getType()));
  return success();
}

LogicalResult TransposeOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  ArrayRef<int64_t> perm = getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = static_cast<int64_t>(i);
  operandGrads.push_back(
      TransposeOp::create(b, getLoc(), resultGrads[0], inverse));
  return success();
}

LogicalResult SliceOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  RankedTensorType input = getInput().getType();
  ArrayRef<int64_t> out = getType().getShape();
  // An empty slice read nothing: its input gets a zero gradient.
  if (llvm::is_contained(out, 0)) {
    operandGrads.push_back(splat(b, loc, input, 0.0));
    return success();
  }
  // Put every element back where it was read: `start` zeros before, stride-1
  // zeros between, and zeros up to the input size after the last element.
  ArrayRef<int64_t> starts = getStarts(), strides = getStrides();
  SmallVector<int64_t> low, high, interior;
  for (int64_t d = 0, e = input.getRank(); d < e; ++d) {
    int64_t last = starts[d] + (out[d] - 1) * strides[d];
    low.push_back(starts[d]);
    interior.push_back(strides[d] - 1);
    high.push_back(input.getDimSize(d) - last - 1);
  }
  operandGrads.push_back(PadOp::create(b, loc, resultGrads[0], low, high,
                                       interior, llvm::APFloat(0.0)));
  return success();
}

LogicalResult ConcatOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  Value g = resultGrads[0];
  ArrayRef<int64_t> shape = getType().getShape();
  int64_t axis = static_cast<int64_t>(getAxis());
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
      strides(shape.size(), 1);
  int64_t offset = 0;
  for (Value input : getInputs()) {
    int64_t size = typeOf(input).getDimSize(axis);
    starts[axis] = offset;
    limits[axis] = offset + size;
    offset += size;
    operandGrads.push_back(SliceOp::create(b, loc, g, starts, limits, strides));
  }
  return success();
}

LogicalResult PadOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  RankedTensorType input = getInput().getType();
  // The padding value is an attribute, so only the input's own cells carry
  // gradient: read them back out of `g`, from `low` on, `interior + 1`
  // apart. An empty input got nothing.
  if (llvm::is_contained(input.getShape(), 0)) {
    operandGrads.push_back(splat(b, loc, input, 0.0));
    return success();
  }
  ArrayRef<int64_t> low = getLow(), interior = getInterior();
  SmallVector<int64_t> limits, strides;
  for (int64_t d = 0, e = input.getRank(); d < e; ++d) {
    strides.push_back(interior[d] + 1);
    limits.push_back(low[d] + (input.getDimSize(d) - 1) * strides.back() + 1);
  }
  operandGrads.push_back(
      SliceOp::create(b, loc, resultGrads[0], low, limits, strides));
  return success();
}
