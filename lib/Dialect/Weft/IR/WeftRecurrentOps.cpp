//===- WeftRecurrentOps.cpp - lstm, gru and their adjoints ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Shape inference and planner costs of the recurrences. Every op here is
// shaped by three sizes, T (steps), B (batch) and H (hidden), read off
// `input_gates` and `recurrence`; inference checks every other operand
// against them and names the operand and both shapes when one disagrees.
//
//===----------------------------------------------------------------------===//

#include "WeftShapeUtils.h"

using namespace mlir;
using namespace weft;
using weft::detail::expectShape;
using weft::detail::getRanked;

namespace {

/// T, B and H of a recurrence with `gates` gate blocks, from its
/// `[T, B, gates*H]` input gates and `[gates*H, H]` recurrence.
struct RecurrenceSizes {
  int64_t t = 0, b = 0, h = 0;
  Type elementType;
};

FailureOr<RecurrenceSizes> readSizes(std::optional<Location> loc,
                                     Value inputGates, Value recurrence,
                                     int64_t gates, StringRef gatesName) {
  RankedTensorType x = getRanked(loc, inputGates, gatesName);
  RankedTensorType r = getRanked(loc, recurrence, "recurrence");
  if (!x || !r)
    return failure();
  if (r.getRank() != 2 || r.getDimSize(0) != gates * r.getDimSize(1))
    return emitOptionalError(loc, "recurrence must be [", gates, "H, H], got ",
                             formatShape(r.getShape()));
  RecurrenceSizes s{0, 0, r.getDimSize(1), x.getElementType()};
  if (x.getRank() != 3 || x.getDimSize(2) != gates * s.h)
    return emitOptionalError(loc, gatesName, " must be [T, B, ", gates * s.h,
                             "] for H = ", s.h, ", got ",
                             formatShape(x.getShape()));
  s.t = x.getDimSize(0);
  s.b = x.getDimSize(1);
  if (s.t < 1)
    return emitOptionalError(loc, "the sequence is empty: ", gatesName, " is ",
                             formatShape(x.getShape()));
  return s;
}

/// 2 B H (gates H) per step for `h @ recurrence^T`, plus `pointwise`
/// operations per hidden unit.
double recurrenceFlops(Value inputGates, Value recurrence, double pointwise) {
  auto x = cast<RankedTensorType>(inputGates.getType());
  double t = x.getDimSize(0), b = x.getDimSize(1);
  double rows = cast<RankedTensorType>(recurrence.getType()).getDimSize(0);
  double h = cast<RankedTensorType>(recurrence.getType()).getDimSize(1);
  return t * b * (2 * rows * h + pointwise * h);
}

} // namespace

LogicalResult LstmOp::inferReturnTypes(MLIRContext *,
                                       std::optional<Location> loc,
                                       Adaptor adaptor,
                                       SmallVectorImpl<Type> &inferred) {
  FailureOr<RecurrenceSizes> s = readSizes(
      loc, adaptor.getInputGates(), adaptor.getRecurrence(), 4, "input_gates");
  if (failed(s) ||
      failed(expectShape(loc, adaptor.getH0(), "h0", {s->b, s->h})) ||
      failed(expectShape(loc, adaptor.getC0(), "c0", {s->b, s->h})))
    return failure();
  auto state = RankedTensorType::get({s->t, s->b, s->h}, s->elementType);
  inferred.push_back(state);
  inferred.push_back(state);
  if (!adaptor.getRecompute())
    inferred.push_back(
        RankedTensorType::get({s->t, s->b, 4 * s->h}, s->elementType));
  return success();
}

LogicalResult GruOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> loc,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &inferred) {
  FailureOr<RecurrenceSizes> s = readSizes(
      loc, adaptor.getInputGates(), adaptor.getRecurrence(), 3, "input_gates");
  if (failed(s) ||
      failed(expectShape(loc, adaptor.getRecurrenceBias(), "recurrence_bias",
                         {3 * s->h})) ||
      failed(expectShape(loc, adaptor.getH0(), "h0", {s->b, s->h})))
    return failure();
  inferred.push_back(RankedTensorType::get({s->t, s->b, s->h}, s->elementType));
  if (!adaptor.getRecompute())
    inferred.push_back(
        RankedTensorType::get({s->t, s->b, 4 * s->h}, s->elementType));
  return success();
}

LogicalResult LstmGradOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> loc,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &inferred) {
  // The stored gates and the recomputing op's input gates are both
  // [T, B, 4H].
  FailureOr<RecurrenceSizes> s =
      readSizes(loc, adaptor.getGates(), adaptor.getRecurrence(), 4,
                adaptor.getRecompute() ? "input_gates" : "gates");
  if (failed(s))
    return failure();
  SmallVector<int64_t> state = {s->t, s->b, s->h}, h0 = {s->b, s->h};
  if (failed(expectShape(loc, adaptor.getHiddenGrad(), "hidden_grad", state)) ||
      failed(expectShape(loc, adaptor.getCellGrad(), "cell_grad", state)) ||
      failed(expectShape(loc, adaptor.getHidden(), "hidden", state)) ||
      failed(expectShape(loc, adaptor.getCell(), "cell", state)) ||
      failed(expectShape(loc, adaptor.getH0(), "h0", h0)) ||
      failed(expectShape(loc, adaptor.getC0(), "c0", h0)))
    return failure();
  inferred.push_back(
      RankedTensorType::get({s->t, s->b, 4 * s->h}, s->elementType));
  inferred.push_back(RankedTensorType::get(h0, s->elementType));
  inferred.push_back(RankedTensorType::get(h0, s->elementType));
  return success();
}

LogicalResult GruGradOp::inferReturnTypes(MLIRContext *,
                                          std::optional<Location> loc,
                                          Adaptor adaptor,
                                          SmallVectorImpl<Type> &inferred) {
  RankedTensorType g = getRanked(loc, adaptor.getGates(), "gates");
  RankedTensorType r = getRanked(loc, adaptor.getRecurrence(), "recurrence");
  if (!g || !r)
    return failure();
  if (r.getRank() != 2 || r.getDimSize(0) != 3 * r.getDimSize(1))
    return emitOptionalError(loc, "recurrence must be [3H, H], got ",
                             formatShape(r.getShape()));
  int64_t h = r.getDimSize(1);
  // Stored: z, r, n, p_n; recomputing: the input gates z, r, n.
  bool recompute = adaptor.getRecompute();
  int64_t blocks = recompute ? 3 : 4;
  StringRef name = recompute ? "input_gates" : "gates";
  if (g.getRank() != 3 || g.getDimSize(2) != blocks * h || g.getDimSize(0) < 1)
    return emitOptionalError(loc, name, " must be [T, B, ", blocks * h,
                             "] for H = ", h, ", got ",
                             formatShape(g.getShape()));
  if (recompute != static_cast<bool>(adaptor.getRecurrenceBias()))
    return emitOptionalError(
        loc, recompute ? "a recomputing gru_grad needs the recurrence_bias"
                       : "recurrence_bias is an operand only with recompute");
  if (recompute && failed(expectShape(loc, adaptor.getRecurrenceBias(),
                                      "recurrence_bias", {3 * h})))
    return failure();
  int64_t t = g.getDimSize(0), b = g.getDimSize(1);
  SmallVector<int64_t> state = {t, b, h};
  if (failed(expectShape(loc, adaptor.getHiddenGrad(), "hidden_grad", state)) ||
      failed(expectShape(loc, adaptor.getHidden(), "hidden", state)) ||
      failed(expectShape(loc, adaptor.getH0(), "h0", {b, h})))
    return failure();
  auto gates = RankedTensorType::get({t, b, 3 * h}, g.getElementType());
  inferred.push_back(gates);
  inferred.push_back(gates);
  inferred.push_back(RankedTensorType::get({b, h}, g.getElementType()));
  return success();
}

// Pointwise counts per hidden unit and step, as the lowering's loop bodies
// do them (a sigmoid or tanh counted as one operation).
double LstmOp::getFlops() {
  return recurrenceFlops(getInputGates(), getRecurrence(), 4 + 4 + 5);
}
double GruOp::getFlops() {
  return recurrenceFlops(getInputGates(), getRecurrence(), 3 + 3 + 3 + 4);
}
// Backward: `da @ recurrence` per step and about twice the forward's
// pointwise work; recomputing adds the forward's step.
double LstmGradOp::getFlops() {
  return recurrenceFlops(getGates(), getRecurrence(), 26) +
         (getRecompute() ? recurrenceFlops(getGates(), getRecurrence(), 13)
                         : 0);
}
double GruGradOp::getFlops() {
  return recurrenceFlops(getHiddenGrad(), getRecurrence(), 24) +
         (getRecompute() ? recurrenceFlops(getHiddenGrad(), getRecurrence(), 13)
                         : 0);
}
