//===- Normalization.cpp - ONNX softmax, layer norm, reductions to weft ---===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Softmax and LogSoftmax (both opset semantics), LayerNormalization, and the
// Reduce* family, whose axes moved from an attribute to an input at a
// different opset for each op.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// Softmax and LogSoftmax. From opset 13 they work along one axis (default
/// -1). Before, the input is seen as a matrix [prod(dims[:axis]),
/// prod(dims[axis:])] (default axis 1) normalized along its rows, which
/// differs from one-axis softmax unless axis is the last one.
template <typename OpTy>
LegalizeResult legalizeSoftmax(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  int64_t axis = ctx.opset >= 13 ? -1 : 1;
  if (failed(in) || failed(ctx.getInt("axis", axis)))
    return failure();
  Value x = in->front();
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  FailureOr<int64_t> a = ctx.normalizeAxis(axis, rank);
  if (failed(a))
    return failure();
  if (ctx.opset >= 13 || *a == rank - 1)
    return one(ctx.create<OpTy>({x}, {ctx.i64Attr("axis", *a)}));
  FailureOr<Value> flat = ctx.reshape(
      x, {product(shape.take_front(*a)), product(shape.drop_front(*a))});
  if (failed(flat))
    return failure();
  FailureOr<Value> normalized =
      ctx.create<OpTy>({*flat}, {ctx.i64Attr("axis", 1)});
  if (failed(normalized))
    return failure();
  return one(ctx.reshape(*normalized, shape));
}

/// Scale or bias of a layer norm, broadcast to the normalized shape when
/// ONNX's broadcasting allows a smaller one.
FailureOr<Value> fitToNormalized(LegalizeContext &ctx, Value v,
                                 ArrayRef<int64_t> normalized, StringRef what) {
  if (shapeOf(v) == normalized)
    return v;
  std::optional<SmallVector<int64_t>> b =
      broadcastShapes(shapeOf(v), normalized);
  if (!b || ArrayRef<int64_t>(*b) != normalized)
    return ctx.emitError() << what << " of shape " << formatShape(shapeOf(v))
                           << " does not broadcast to the normalized shape "
                           << formatShape(normalized);
  return ctx.create<BroadcastOp>(
      {v}, {}, RankedTensorType::get(normalized, elementTypeOf(v)));
}

/// LayerNormalization (opset 17). Only output 0 is supported; Mean and
/// InvStdDev are training-time byproducts weft recomputes itself.
LegalizeResult legalizeLayerNorm(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X", "Scale"});
  int64_t axis = -1;
  double epsilon = 1e-5;
  if (failed(in) || failed(ctx.getInt("axis", axis)) ||
      failed(ctx.getFloat("epsilon", epsilon)))
    return failure();
  Value x = (*in)[0];
  FailureOr<int64_t> a = ctx.normalizeAxis(axis, shapeOf(x).size());
  if (failed(a))
    return failure();
  if (epsilon <= 0)
    return ctx.unsupportedAttr("epsilon", std::to_string(epsilon),
                               "values > 0");
  ArrayRef<int64_t> normalized = shapeOf(x).drop_front(*a);
  FailureOr<Value> scale =
      fitToNormalized(ctx, (*in)[1], normalized, "input 1 (Scale)");
  if (failed(scale))
    return failure();
  FailureOr<Value> bias;
  if (ctx.hasInput(2)) {
    FailureOr<TypedValue<RankedTensorType>> b = ctx.getTensor(2, "B");
    if (failed(b))
      return failure();
    bias = fitToNormalized(ctx, *b, normalized, "input 2 (B)");
  } else {
    auto type = RankedTensorType::get(normalized, elementTypeOf(x));
    bias = ctx.constant(DenseElementsAttr::get(
        type, ctx.builder.getZeroAttr(elementTypeOf(x))));
  }
  if (failed(bias))
    return failure();
  return one(ctx.create<LayerNormOp>(
      {x, *scale, *bias},
      {ctx.i64Attr("axis", *a), ctx.f64Attr("epsilon", epsilon)}));
}

/// ReduceMean/Sum/Max. `axes` is an attribute before `axesInputOpset` and
/// an optional input from then on, where `noop_with_empty_axes` also
/// appears. No axes means all axes (or the identity with noop).
template <typename OpTy, int64_t axesInputOpset>
LegalizeResult legalizeReduce(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data"});
  int64_t keepDims = 1, noop = 0;
  if (failed(in) || failed(ctx.getInt("keepdims", keepDims)))
    return failure();
  Value x = in->front();
  int64_t rank = shapeOf(x).size();
  SmallVector<int64_t> axes;
  if (ctx.opset >= axesInputOpset) {
    if (failed(ctx.getInt("noop_with_empty_axes", noop)))
      return failure();
    if (ctx.hasInput(1)) {
      FailureOr<SmallVector<int64_t>> given = ctx.getConstInts(1, "axes");
      if (failed(given))
        return failure();
      axes = *given;
    }
  } else if (failed(ctx.getInts("axes", axes))) {
    return failure();
  }
  if (axes.empty()) {
    if (noop != 0)
      return SmallVector<Value>{x};
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  }
  for (int64_t &axis : axes) {
    FailureOr<int64_t> a = ctx.normalizeAxis(axis, rank, "axes entry");
    if (failed(a))
      return failure();
    axis = *a;
  }
  llvm::sort(axes);
  axes.erase(llvm::unique(axes), axes.end());
  return one(ctx.create<OpTy>({x}, {ctx.arrayAttr("axes", axes),
                                    ctx.boolAttr("keep_dims", keepDims != 0)}));
}

} // namespace

void weft::onnxtoweft::populateNormalizationLegalizers(
    LegalizerRegistry &registry) {
  registry.add("Softmax", 1, kMaxOpset, legalizeSoftmax<SoftmaxOp>);
  registry.add("LogSoftmax", 1, kMaxOpset, legalizeSoftmax<LogSoftmaxOp>);
  registry.add("LayerNormalization", 17, kMaxOpset, legalizeLayerNorm);
  registry.add("ReduceMean", 1, kMaxOpset, legalizeReduce<ReduceMeanOp, 18>);
  registry.add("ReduceMax", 1, kMaxOpset, legalizeReduce<ReduceMaxOp, 18>);
  registry.add("ReduceSum", 1, kMaxOpset, legalizeReduce<ReduceSumOp, 13>);
}
