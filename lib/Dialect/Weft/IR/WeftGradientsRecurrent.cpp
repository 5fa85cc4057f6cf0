//===- WeftGradientsRecurrent.cpp - Gradients of lstm and gru -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Backpropagation through time is split in two: the loop that must run
// step by step (the adjoints of h and c flow from step t to step t - 1) is
// weft.lstm_grad / weft.gru_grad, and everything that sums over steps is
// ordinary weft ops after it. The recurrence's adjoint is
// sum_t dA_t^T h_{t-1}, one [gates*H, T*B] x [T*B, H] matmul over the
// per-step pre-activation adjoints and the previous hidden states, so it
// is a GEMM, shards like one (a sum over the batch under data
// parallelism), and the loop carries only [B, H] states.
//
// A forward op marked `recompute` stores no gates; its adjoint op gets the
// input gates instead (and, for the GRU, the recurrent bias) and recomputes
// each step's gates inside its loop.
//
//===----------------------------------------------------------------------===//

#include "WeftGradients.h"

using namespace mlir;
using namespace weft;
using namespace weft::grad;

namespace {

/// h_{t-1} for every step t, [T, B, H]: `h0` then the hidden states
/// shifted by one step in the direction the loop ran.
Value previousHidden(OpBuilder &b, Location loc, Value hidden, Value h0,
                     bool reverse) {
  RankedTensorType type = typeOf(hidden);
  int64_t t = type.getDimSize(0), batch = type.getDimSize(1),
          h = type.getDimSize(2);
  Value first = reshape(b, loc, h0, {1, batch, h});
  if (t == 1)
    return first;
  SmallVector<int64_t> strides = {1, 1, 1};
  SmallVector<int64_t> starts = {reverse ? 1 : 0, 0, 0},
                       limits = {reverse ? t : t - 1, batch, h};
  Value shifted = SliceOp::create(b, loc, hidden, starts, limits, strides);
  SmallVector<Value> parts = reverse ? SmallVector<Value>{shifted, first}
                                     : SmallVector<Value>{first, shifted};
  return ConcatOp::create(b, loc, parts, 0);
}

/// sum_t dA_t^T h_{t-1}: the adjoint of a `[gates*H, H]` recurrence from
/// the per-step adjoints of `h @ recurrence^T`, `[T, B, gates*H]`.
Value recurrenceGrad(OpBuilder &b, Location loc, Value preGrad, Value prev) {
  RankedTensorType g = typeOf(preGrad), p = typeOf(prev);
  int64_t rows = g.getDimSize(0) * g.getDimSize(1);
  return MatMulOp::create(b, loc,
                          reshape(b, loc, preGrad, {rows, g.getDimSize(2)}),
                          reshape(b, loc, prev, {rows, p.getDimSize(2)}),
                          /*transpose_lhs=*/true, /*transpose_rhs=*/false);
}

/// The given adjoint, or zeros of `like`'s type where the result does not
/// reach the loss.
Value orZeros(OpBuilder &b, Location loc, Value grad, Value like) {
  return grad ? grad : splat(b, loc, typeOf(like), 0.0);
}

} // namespace

LogicalResult LstmOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (resultGrads.size() > 2 && resultGrads[2])
    return emitOpError("the saved gates of weft.lstm are an internal result "
                       "for its gradient and carry no adjoint of their own");
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  auto grads = LstmGradOp::create(
      b, loc, orZeros(b, loc, resultGrads[0], getHidden()),
      orZeros(b, loc, resultGrads[1], getCell()), getRecurrence(), getH0(),
      getC0(), getHidden(), getCell(),
      getRecompute() ? getInputGates() : getGates(), getReverse(),
      getRecompute());
  Value prev = previousHidden(b, loc, getHidden(), getH0(), getReverse());
  operandGrads.push_back(grads.getInputGatesGrad());
  operandGrads.push_back(
      recurrenceGrad(b, loc, grads.getInputGatesGrad(), prev));
  operandGrads.push_back(grads.getH0Grad());
  operandGrads.push_back(grads.getC0Grad());
  return success();
}

LogicalResult GruOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (resultGrads.size() > 1 && resultGrads[1])
    return emitOpError("the saved gates of weft.gru are an internal result "
                       "for its gradient and carry no adjoint of their own");
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  bool recompute = getRecompute();
  auto grads = GruGradOp::create(
      b, loc, resultGrads[0], getRecurrence(), getH0(), getHidden(),
      recompute ? getInputGates() : getGates(),
      recompute ? getRecurrenceBias() : Value(), getReverse(), recompute);
  Value prev = previousHidden(b, loc, getHidden(), getH0(), getReverse());
  Value dp = grads.getRecurrentGrad();
  operandGrads.push_back(grads.getInputGatesGrad());
  operandGrads.push_back(recurrenceGrad(b, loc, dp, prev));
  operandGrads.push_back(ReduceSumOp::create(b, loc, dp, {0, 1}));
  operandGrads.push_back(grads.getH0Grad());
  return success();
}
