//===- WeftGradientsSelection.cpp - Gradients of cumsum and top_k ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Rounding, arg_max/arg_min and top_k_indices are NotDifferentiable; the
// two ops here pass gradients on.
//
//===----------------------------------------------------------------------===//

#include "WeftGradients.h"

using namespace mlir;
using namespace weft;
using namespace weft::grad;

LogicalResult CumSumOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                      SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // Input j reaches every output i with j <= i (j < i when exclusive), so
  // its adjoint sums the result's adjoint over those i: the same scan run
  // from the other end.
  operandGrads.push_back(CumSumOp::create(
      b, getLoc(), resultGrads[0], getAxis(), getExclusive(), !getReverse()));
  return success();
}

LogicalResult TopKOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // Value p of the result is input[indices[p]], so the input's adjoint is
  // the result's adjoint scattered to the selected positions. With the
  // axis moved last, the scatter is sum_p onehot(indices)[.., p, :] * g[..,
  // p]: selected positions are distinct, so no two p land on one cell.
  Location loc = getLoc();
  RankedTensorType input = getInput().getType();
  int64_t rank = input.getRank(), axis = getAxis();
  SmallVector<int64_t> toLast, fromLast(rank);
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis)
      toLast.push_back(d);
  toLast.push_back(axis);
  for (int64_t d = 0; d < rank; ++d)
    fromLast[toLast[d]] = d;
  auto moveLast = [&](Value v) -> Value {
    if (axis == rank - 1)
      return v;
    return TransposeOp::create(b, loc, v, toLast);
  };
  Value indices = moveLast(
      TopKIndicesOp::create(b, loc, getInput(), axis, getK(), getLargest()));
  Value g = moveLast(resultGrads[0]);
  SmallVector<int64_t> oneHotShape(typeOf(indices).getShape());
  oneHotShape.push_back(input.getDimSize(axis));
  Value oneHot = OneHotOp::create(
      b, loc, RankedTensorType::get(oneHotShape, input.getElementType()),
      indices);
  SmallVector<int64_t> column(typeOf(g).getShape());
  column.push_back(1);
  Value spread = MulOp::create(b, loc, oneHot, reshape(b, loc, g, column));
  Value dx = ReduceSumOp::create(b, loc, spread, ArrayRef<int64_t>{rank - 1},
                                 /*keep_dims=*/false);
  if (axis != rank - 1)
    dx = TransposeOp::create(b, loc, dx, fromLast);
  operandGrads.push_back(dx);
  return success();
}
