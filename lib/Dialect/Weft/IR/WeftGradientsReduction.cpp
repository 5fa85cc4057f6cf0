//===- WeftGradientsReduction.cpp - Gradients of reductions and losses ----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Softmax, log-softmax, layer norm, reduce_sum/mean/max and the losses.
// Rules reuse forward results where the closed form allows (softmax's and
// log-softmax's outputs); layer norm recomputes its normalized input from
// the forward input, since the op does not expose mean and variance.
//
//===----------------------------------------------------------------------===//

#include "WeftGradients.h"

using namespace mlir;
using namespace weft;
using namespace weft::grad;

namespace {

/// Product of `shape` at `axes`.
int64_t countOf(ArrayRef<int64_t> shape, ArrayRef<int64_t> axes) {
  int64_t count = 1;
  for (int64_t axis : axes)
    count *= shape[axis];
  return count;
}

/// 1 / count, or 0 for empty reductions (whose gradients have no elements).
double reciprocal(int64_t count) {
  return count == 0 ? 0.0 : 1.0 / static_cast<double>(count);
}

} // namespace

LogicalResult SoftmaxOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // dx = y * (g - sum(g * y)) along the axis.
  Location loc = getLoc();
  Value g = resultGrads[0], y = getResult();
  int64_t axis = static_cast<int64_t>(getAxis());
  Value dot = ReduceSumOp::create(b, loc, MulOp::create(b, loc, g, y),
                                  ArrayRef<int64_t>{axis}, /*keep_dims=*/true);
  operandGrads.push_back(
      MulOp::create(b, loc, y, SubOp::create(b, loc, g, dot)));
  return success();
}

LogicalResult
LogSoftmaxOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // dx = g - softmax(x) * sum(g) along the axis, with softmax = exp(y).
  Location loc = getLoc();
  Value g = resultGrads[0];
  int64_t axis = static_cast<int64_t>(getAxis());
  Value sum = ReduceSumOp::create(b, loc, g, ArrayRef<int64_t>{axis},
                                  /*keep_dims=*/true);
  Value p = ExpOp::create(b, loc, getResult());
  operandGrads.push_back(
      SubOp::create(b, loc, g, MulOp::create(b, loc, p, sum)));
  return success();
}

LogicalResult LayerNormOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  Value g = resultGrads[0], x = getInput();
  int64_t rank = getType().getRank(), axis = static_cast<int64_t>(getAxis());
  auto normalized = llvm::to_vector(llvm::seq<int64_t>(axis, rank));
  auto batch = llvm::to_vector(llvm::seq<int64_t>(0, axis));
  auto mean = [&](Value v) -> Value {
    return ReduceMeanOp::create(b, loc, v, normalized, /*keep_dims=*/true);
  };
  // Recompute xhat = (x - mean) * rstd as the forward op does (biased
  // variance, epsilon inside the square root).
  Value centred = SubOp::create(b, loc, x, mean(x));
  Value variance = mean(MulOp::create(b, loc, centred, centred));
  Value epsilon = scalar(b, loc, getType().getElementType(),
                         getEpsilon().convertToDouble());
  Value rstd =
      RsqrtOp::create(b, loc, AddOp::create(b, loc, variance, epsilon));
  Value xhat = MulOp::create(b, loc, centred, rstd);

  // dx = rstd * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
  Value dxhat = MulOp::create(b, loc, g, getScale());
  Value projected =
      MulOp::create(b, loc, xhat, mean(MulOp::create(b, loc, dxhat, xhat)));
  Value dx = SubOp::create(b, loc, SubOp::create(b, loc, dxhat, mean(dxhat)),
                           projected);
  operandGrads.push_back(MulOp::create(b, loc, rstd, dx));

  // Scale and bias are shared by every normalized row.
  auto sumRows = [&](Value v) -> Value {
    if (batch.empty())
      return v;
    return ReduceSumOp::create(b, loc, v, batch, /*keep_dims=*/false);
  };
  operandGrads.push_back(sumRows(MulOp::create(b, loc, g, xhat)));
  operandGrads.push_back(sumRows(g));
  return success();
}

LogicalResult ReduceSumOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  operandGrads.push_back(
      unreduce(b, getLoc(), resultGrads[0], getInput().getType(), getAxes()));
  return success();
}

LogicalResult
ReduceMeanOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  RankedTensorType input = getInput().getType();
  Value spread = unreduce(b, loc, resultGrads[0], input, getAxes());
  operandGrads.push_back(
      scale(b, loc, spread, reciprocal(countOf(input.getShape(), getAxes()))));
  return success();
}

LogicalResult ReduceMaxOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                         SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // As torch.amax: the gradient is split evenly among the maxima of each
  // reduced slice.
  Location loc = getLoc();
  Value x = getInput();
  RankedTensorType input = getInput().getType();
  SmallVector<int64_t> kept = keptShape(input.getShape(), getAxes());
  Value isMax = CmpOp::create(b, loc, CmpPredicate::eq, x,
                              reshape(b, loc, getResult(), kept));
  Value mask = CastOp::create(b, loc, input, isMax);
  Value count =
      ReduceSumOp::create(b, loc, mask, getAxes(), /*keep_dims=*/true);
  Value share =
      DivOp::create(b, loc, reshape(b, loc, resultGrads[0], kept), count);
  operandGrads.push_back(MulOp::create(b, loc, mask, share));
  return success();
}

LogicalResult
CrossEntropyOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                              SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // d mean_p(logsumexp(z_p) - z_p[label_p]) / dz = (softmax(z) - onehot) / P.
  Location loc = getLoc();
  RankedTensorType logits = getLogits().getType();
  Value p = SoftmaxOp::create(b, loc, getLogits(), logits.getRank() - 1);
  Value onehot = OneHotOp::create(b, loc, logits, getLabels());
  Value perPosition = scale(b, loc, resultGrads[0],
                            reciprocal(getLabels().getType().getNumElements()));
  operandGrads.push_back(
      MulOp::create(b, loc, SubOp::create(b, loc, p, onehot), perPosition));
  operandGrads.push_back(Value());
  return success();
}

LogicalResult MseOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // d mean((p - t)^2) = 2 (p - t) / n, with the opposite sign for t.
  Location loc = getLoc();
  Value diff = SubOp::create(b, loc, getPrediction(), getTarget());
  Value dp = scale(b, loc, MulOp::create(b, loc, diff, resultGrads[0]),
                   2 * reciprocal(getPrediction().getType().getNumElements()));
  operandGrads.push_back(dp);
  operandGrads.push_back(NegOp::create(b, loc, dp));
  return success();
}
