//===- WeftAttentionOps.cpp - attention and its adjoint -------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Shape inference, planner costs and sharding rules of weft.attention and
// weft.attention_grad. Both are shaped by the leading (batch, head) axes
// and T, S, D, Dv, read off query, key and value; inference names the
// operand and both shapes when one disagrees. The log-sum-exp of a bf16
// or f16 attention is f32 (see the op description).
//
//===----------------------------------------------------------------------===//

#include "WeftShapeUtils.h"

using namespace mlir;
using namespace weft;
using weft::detail::expectShape;
using weft::detail::getRanked;

namespace {

/// The sizes of an attention: leading axes, queries T, keys S, the
/// query/key width D and the value width Dv.
struct AttentionSizes {
  SmallVector<int64_t> lead;
  int64_t t = 0, s = 0, d = 0, dv = 0;
  Type elementType;

  SmallVector<int64_t> shape(ArrayRef<int64_t> tail) const {
    SmallVector<int64_t> result(lead);
    result.append(tail.begin(), tail.end());
    return result;
  }
  double heads() const {
    double n = 1;
    for (int64_t x : lead)
      n *= double(x);
    return n;
  }
};

FailureOr<AttentionSizes> readSizes(std::optional<Location> loc, Value query,
                                    Value key, Value value) {
  RankedTensorType q = getRanked(loc, query, "query");
  RankedTensorType k = getRanked(loc, key, "key");
  RankedTensorType v = getRanked(loc, value, "value");
  if (!q || !k || !v)
    return failure();
  if (q.getRank() < 2)
    return emitOptionalError(loc, "query must be [..., T, D], got ",
                             formatShape(q.getShape()));
  int64_t rank = q.getRank();
  AttentionSizes s;
  s.lead.assign(q.getShape().begin(), q.getShape().end() - 2);
  s.t = q.getDimSize(rank - 2);
  s.d = q.getDimSize(rank - 1);
  s.elementType = q.getElementType();
  if (k.getRank() != rank || k.getShape().take_front(rank - 2) != ArrayRef<int64_t>(s.lead) ||
      k.getDimSize(rank - 1) != s.d)
    return emitOptionalError(
        loc, "key must be [", formatShape(s.lead), ", S, ", s.d,
        "] to match query ", formatShape(q.getShape()), ", got ",
        formatShape(k.getShape()));
  s.s = k.getDimSize(rank - 2);
  if (v.getRank() != rank || v.getShape().take_front(rank - 2) != ArrayRef<int64_t>(s.lead) ||
      v.getDimSize(rank - 2) != s.s)
    return emitOptionalError(
        loc, "value must be [", formatShape(s.lead), ", ", s.s,
        ", Dv] to match key ", formatShape(k.getShape()), ", got ",
        formatShape(v.getShape()));
  s.dv = v.getDimSize(rank - 1);
  if (s.s < 1)
    return emitOptionalError(loc, "attention needs at least one key, got key ",
                             formatShape(k.getShape()));
  return s;
}

/// The log-sum-exp's element type for a query of `elementType`: at least
/// f32, since each recomputed probability is exp(s - logsumexp). (Not a
/// float: ODS rejects the op after inference, which runs first.)
Type logsumexpElementType(Type elementType) {
  auto f = dyn_cast<FloatType>(elementType);
  if (f && f.getWidth() < 32)
    return Float32Type::get(f.getContext());
  return elementType;
}

/// Score elements one (batch, head) computes: a causal mask skips the
/// upper triangle (for T = S, T (T + 1) / 2 of T^2).
double scoreCount(const AttentionSizes &s, bool causal) {
  double all = double(s.t) * double(s.s);
  if (!causal)
    return all;
  // Row i sees keys 0..min(i, S - 1).
  double seen = 0;
  int64_t full = std::min(s.t, s.s);
  seen += double(full) * double(full + 1) / 2;
  if (s.t > s.s)
    seen += double(s.t - s.s) * double(s.s);
  return seen;
}

AttentionSizes sizesOf(Value query, Value key, Value value) {
  return *readSizes(std::nullopt, query, key, value);
}

/// Every leading axis is a parallel factor shared by all operands and
/// results; T, S and the feature axes stay whole (the softmax runs over S,
/// the scores contract D, and a causal mask needs global row indices).
ShardingRule leadingAxesRule(Operation *op, ArrayRef<int64_t> lead) {
  ShardingRule rule;
  SmallVector<int64_t> factors;
  for (int64_t size : lead)
    factors.push_back(rule.addFactor(size));
  auto layout = [&](Value v) {
    ShardingRule::ValueFactors dims(cast<RankedTensorType>(v.getType()).getRank());
    for (auto [i, f] : llvm::enumerate(factors))
      dims[i] = {f};
    return dims;
  };
  for (Value operand : op->getOperands())
    rule.operands.push_back(layout(operand));
  for (Value result : op->getResults())
    rule.results.push_back(layout(result));
  return rule;
}

} // namespace

LogicalResult AttentionOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> loc,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &inferred) {
  FailureOr<AttentionSizes> s = readSizes(loc, adaptor.getQuery(),
                                          adaptor.getKey(), adaptor.getValue());
  if (failed(s))
    return failure();
  inferred.push_back(RankedTensorType::get(s->shape({s->t, s->dv}),
                                           s->elementType));
  inferred.push_back(RankedTensorType::get(
      s->shape({s->t}), logsumexpElementType(s->elementType)));
  return success();
}

LogicalResult AttentionGradOp::inferReturnTypes(
    MLIRContext *, std::optional<Location> loc, Adaptor adaptor,
    SmallVectorImpl<Type> &inferred) {
  FailureOr<AttentionSizes> s = readSizes(loc, adaptor.getQuery(),
                                          adaptor.getKey(), adaptor.getValue());
  if (failed(s) ||
      failed(expectShape(loc, adaptor.getResult(), "result",
                         s->shape({s->t, s->dv}))) ||
      failed(expectShape(loc, adaptor.getResultGrad(), "result_grad",
                         s->shape({s->t, s->dv}))) ||
      failed(expectShape(loc, adaptor.getLogsumexp(), "logsumexp",
                         s->shape({s->t}))))
    return failure();
  Type lse =
      cast<RankedTensorType>(adaptor.getLogsumexp().getType()).getElementType();
  if (lse != logsumexpElementType(s->elementType))
    return emitOptionalError(loc, "logsumexp must be ",
                             logsumexpElementType(s->elementType),
                             " for a query of ", s->elementType, ", got ", lse);
  inferred.push_back(adaptor.getQuery().getType());
  inferred.push_back(adaptor.getKey().getType());
  inferred.push_back(adaptor.getValue().getType());
  return success();
}

// Two products per seen score (q k^T, p v) and about five pointwise
// operations (scale, max, exp, sum, rescale).
double AttentionOp::getFlops() {
  AttentionSizes s = sizesOf(getQuery(), getKey(), getValue());
  return s.heads() * scoreCount(s, getCausal()) *
         (2.0 * s.d + 2.0 * s.dv + 5.0);
}

// The backward recomputes q k^T and adds d0 v^T, ds k, ds^T q and p^T dO.
double AttentionGradOp::getFlops() {
  AttentionSizes s = sizesOf(getQuery(), getKey(), getValue());
  return s.heads() * scoreCount(s, getCausal()) *
         (6.0 * s.d + 4.0 * s.dv + 8.0);
}

ShardingRule AttentionOp::getShardingRule() {
  return leadingAxesRule(*this, sizesOf(getQuery(), getKey(), getValue()).lead);
}

ShardingRule AttentionGradOp::getShardingRule() {
  return leadingAxesRule(*this, sizesOf(getQuery(), getKey(), getValue()).lead);
}
