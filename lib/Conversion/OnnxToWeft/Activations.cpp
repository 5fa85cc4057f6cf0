//===- Activations.cpp - ONNX activation functions to weft ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Activations weft has no op for are compositions of elementwise ops:
// LeakyRelu, PRelu, Elu, Selu, Celu, ThresholdedRelu, HardSigmoid,
// HardSwish, Softplus, Softsign and Mish; Gelu maps onto weft.gelu.
// Exponentials only ever see non-positive arguments, so an unselected
// branch cannot overflow to inf (whose gradient through weft.where would
// be NaN).
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// The input X and a scalar constant maker for its element type.
struct Unary {
  Value x;
  LegalizeContext *ctx;
  FailureOr<Value> scalar(double v) const {
    return ctx->scalar(elementTypeOf(x), v);
  }
};

FailureOr<Unary> getUnary(LegalizeContext &ctx) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in))
    return failure();
  return Unary{in->front(), &ctx};
}

/// `alpha * (exp(min(x, 0)) - 1)`: the negative branch of Elu and Selu.
FailureOr<Value> expMinusOne(LegalizeContext &ctx, const Unary &u,
                             double alpha) {
  FailureOr<Value> zero = u.scalar(0.0);
  FailureOr<Value> e = make<ExpOp>(ctx, make<MinOp>(ctx, u.x, zero));
  FailureOr<Value> unit = u.scalar(1.0);
  FailureOr<Value> scale = u.scalar(alpha);
  return make<MulOp>(ctx, make<SubOp>(ctx, e, unit), scale);
}

/// `x < 0 ? negative : x`.
LegalizeResult selectNegative(LegalizeContext &ctx, const Unary &u,
                              FailureOr<Value> negative) {
  FailureOr<Value> isNegative =
      makeCmp(ctx, CmpPredicate::lt, u.x, u.scalar(0.0));
  return one(make<WhereOp>(ctx, isNegative, negative, u.x));
}

/// `x >= 0 ? x : alpha * x`.
LegalizeResult legalizeLeakyRelu(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Unary> u = getUnary(ctx);
  double alpha = 0.01;
  if (failed(u) || failed(ctx.getFloat("alpha", alpha)))
    return failure();
  return selectNegative(ctx, *u, make<MulOp>(ctx, u->x, u->scalar(alpha)));
}

/// `x < 0 ? slope * x : x`, the slope broadcasting to X.
LegalizeResult legalizePRelu(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X", "slope"});
  if (failed(in))
    return failure();
  Unary u{(*in)[0], &ctx};
  FailureOr<Value> scaled = make<MulOp>(ctx, u.x, (*in)[1]);
  if (succeeded(scaled) && shapeOf(*scaled) != shapeOf(u.x))
    return ctx.emitError() << "input 1 (slope) of shape "
                           << formatShape(shapeOf((*in)[1]))
                           << " does not broadcast to X of shape "
                           << formatShape(shapeOf(u.x));
  return selectNegative(ctx, u, scaled);
}

LegalizeResult legalizeElu(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Unary> u = getUnary(ctx);
  double alpha = 1.0;
  if (failed(u) || failed(ctx.getFloat("alpha", alpha)))
    return failure();
  return selectNegative(ctx, *u, expMinusOne(ctx, *u, alpha));
}

/// `gamma * (x <= 0 ? alpha * (exp(x) - 1) : x)`.
LegalizeResult legalizeSelu(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Unary> u = getUnary(ctx);
  double alpha = 1.67326319217681884765625, gamma = 1.05070102214813232421875;
  if (failed(u) || failed(ctx.getFloat("alpha", alpha)) ||
      failed(ctx.getFloat("gamma", gamma)))
    return failure();
  LegalizeResult elu = selectNegative(ctx, *u, expMinusOne(ctx, *u, alpha));
  if (failed(elu))
    return failure();
  return one(make<MulOp>(ctx, elu->front(), u->scalar(gamma)));
}

/// `max(0, x) + min(0, alpha * (exp(x / alpha) - 1))`.
LegalizeResult legalizeCelu(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Unary> u = getUnary(ctx);
  double alpha = 1.0;
  if (failed(u) || failed(ctx.getFloat("alpha", alpha)))
    return failure();
  if (alpha == 0.0)
    return ctx.unsupportedAttr("alpha", "0", "non-zero values");
  FailureOr<Value> scaled = make<DivOp>(ctx, u->x, u->scalar(alpha));
  if (failed(scaled))
    return failure();
  Unary s{*scaled, &ctx};
  return selectNegative(ctx, *u, expMinusOne(ctx, s, alpha));
}

/// `x > alpha ? x : 0`.
LegalizeResult legalizeThresholdedRelu(LegalizeContext &ctx, OnnxNodeOp,
                                       ValueRange) {
  FailureOr<Unary> u = getUnary(ctx);
  double alpha = 1.0;
  if (failed(u) || failed(ctx.getFloat("alpha", alpha)))
    return failure();
  FailureOr<Value> above =
      makeCmp(ctx, CmpPredicate::gt, u->x, u->scalar(alpha));
  return one(make<WhereOp>(ctx, above, u->x, u->scalar(0.0)));
}

/// `max(0, min(1, alpha * x + beta))`.
FailureOr<Value> hardSigmoid(LegalizeContext &ctx, const Unary &u, double alpha,
                             double beta) {
  FailureOr<Value> scaled = make<MulOp>(ctx, u.x, u.scalar(alpha));
  FailureOr<Value> linear = make<AddOp>(ctx, scaled, u.scalar(beta));
  FailureOr<Value> capped = make<MinOp>(ctx, linear, u.scalar(1.0));
  return make<MaxOp>(ctx, capped, u.scalar(0.0));
}

LegalizeResult legalizeHardSigmoid(LegalizeContext &ctx, OnnxNodeOp,
                                   ValueRange) {
  FailureOr<Unary> u = getUnary(ctx);
  double alpha = 0.2, beta = 0.5;
  if (failed(u) || failed(ctx.getFloat("alpha", alpha)) ||
      failed(ctx.getFloat("beta", beta)))
    return failure();
  return one(hardSigmoid(ctx, *u, alpha, beta));
}

/// `x * HardSigmoid(x)` with alpha 1/6 and beta 1/2.
LegalizeResult legalizeHardSwish(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Unary> u = getUnary(ctx);
  if (failed(u))
    return failure();
  return one(make<MulOp>(ctx, u->x, hardSigmoid(ctx, *u, 1.0 / 6.0, 0.5)));
}

/// `log(1 + exp(x))` computed as `max(x, 0) + log(1 + exp(-|x|))`, which
/// never overflows.
FailureOr<Value> softplus(LegalizeContext &ctx, const Unary &u) {
  FailureOr<Value> tail =
      make<ExpOp>(ctx, make<NegOp>(ctx, make<AbsOp>(ctx, u.x)));
  FailureOr<Value> log1p =
      make<LogOp>(ctx, make<AddOp>(ctx, tail, u.scalar(1.0)));
  return make<AddOp>(ctx, make<ReluOp>(ctx, u.x), log1p);
}

LegalizeResult legalizeSoftplus(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Unary> u = getUnary(ctx);
  if (failed(u))
    return failure();
  return one(softplus(ctx, *u));
}

/// `x / (1 + |x|)`.
LegalizeResult legalizeSoftsign(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Unary> u = getUnary(ctx);
  if (failed(u))
    return failure();
  FailureOr<Value> magnitude = make<AbsOp>(ctx, u->x);
  FailureOr<Value> denominator = make<AddOp>(ctx, magnitude, u->scalar(1.0));
  return one(make<DivOp>(ctx, u->x, denominator));
}

/// `x * tanh(softplus(x))`.
LegalizeResult legalizeMish(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Unary> u = getUnary(ctx);
  if (failed(u))
    return failure();
  return one(make<MulOp>(ctx, u->x, make<TanhOp>(ctx, softplus(ctx, *u))));
}

LegalizeResult legalizeGelu(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  std::string approximate = "none";
  if (failed(in) || failed(ctx.getString("approximate", approximate)))
    return failure();
  GeluApproximation kind;
  if (approximate == "none")
    kind = GeluApproximation::None;
  else if (approximate == "tanh")
    kind = GeluApproximation::Tanh;
  else
    return ctx.unsupportedAttr("approximate", "'" + approximate + "'",
                               "'none', 'tanh'");
  return one(ctx.create<GeluOp>(
      *in,
      {ctx.builder.getNamedAttr(
          "approximate", GeluApproximationAttr::get(ctx.getContext(), kind))}));
}

} // namespace

void weft::onnxtoweft::populateActivationLegalizers(
    LegalizerRegistry &registry) {
  registry.add("LeakyRelu", 6, kMaxOpset, legalizeLeakyRelu);
  registry.add("PRelu", 7, kMaxOpset, legalizePRelu);
  registry.add("Elu", 6, kMaxOpset, legalizeElu);
  registry.add("Selu", 6, kMaxOpset, legalizeSelu);
  registry.add("Celu", 12, kMaxOpset, legalizeCelu);
  registry.add("ThresholdedRelu", 10, kMaxOpset, legalizeThresholdedRelu);
  registry.add("HardSigmoid", 6, kMaxOpset, legalizeHardSigmoid);
  registry.add("HardSwish", 14, kMaxOpset, legalizeHardSwish);
  registry.add("Softplus", 1, kMaxOpset, legalizeSoftplus);
  registry.add("Softsign", 1, kMaxOpset, legalizeSoftsign);
  registry.add("Mish", 18, kMaxOpset, legalizeMish);
  registry.add("Gelu", 20, kMaxOpset, legalizeGelu);
}
