//===- Selection.cpp - ONNX rounding, CumSum, ArgMax/ArgMin, TopK to weft -===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Each maps onto one weft op, TopK onto two: weft.top_k for the values
// (differentiable) and weft.top_k_indices for the indices, so that both
// stay single-result ops; the indices one folds away when unused.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

template <typename OpTy>
LegalizeResult legalizeRounding(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in))
    return failure();
  return one(ctx.create<OpTy>(*in));
}

/// CumSum's axis is a constant scalar input.
LegalizeResult legalizeCumSum(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<TypedValue<RankedTensorType>> x = ctx.getTensor(0, "x");
  if (failed(x))
    return failure();
  FailureOr<SmallVector<int64_t>> axisValues = ctx.getConstInts(1, "axis");
  if (failed(axisValues))
    return failure();
  if (axisValues->size() != 1)
    return ctx.emitError() << "input 1 (axis) must hold one value, got "
                           << formatList(*axisValues);
  int64_t exclusive = 0, reverse = 0;
  if (failed(ctx.getInt("exclusive", exclusive)) ||
      failed(ctx.getInt("reverse", reverse)))
    return failure();
  FailureOr<int64_t> axis =
      ctx.normalizeAxis(axisValues->front(), shapeOf(*x).size());
  if (failed(axis))
    return failure();
  return one(ctx.create<CumSumOp>({*x}, {ctx.i64Attr("axis", *axis),
                                         ctx.boolAttr("exclusive", exclusive),
                                         ctx.boolAttr("reverse", reverse)}));
}

template <typename OpTy>
LegalizeResult legalizeArgReduce(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<TypedValue<RankedTensorType>> x = ctx.getTensor(0, "data");
  if (failed(x))
    return failure();
  int64_t axis = 0, keepDims = 1, selectLast = 0;
  if (failed(ctx.getInt("axis", axis)) ||
      failed(ctx.getInt("keepdims", keepDims)) ||
      failed(ctx.getInt("select_last_index", selectLast)))
    return failure();
  FailureOr<int64_t> normalized = ctx.normalizeAxis(axis, shapeOf(*x).size());
  if (failed(normalized))
    return failure();
  return one(ctx.create<OpTy>(
      {*x}, {ctx.i64Attr("axis", *normalized),
             ctx.boolAttr("keep_dims", keepDims != 0),
             ctx.boolAttr("select_last_index", selectLast != 0)}));
}

/// K is an attribute before opset 10 and a constant input from then on;
/// `largest` and `sorted` appear at 11. Results always come sorted, which
/// `sorted = 0` (any order) allows.
LegalizeResult legalizeTopK(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<TypedValue<RankedTensorType>> x = ctx.getTensor(0, "X");
  if (failed(x))
    return failure();
  int64_t k = 0, axis = -1, largest = 1;
  if (ctx.opset < 10) {
    if (!ctx.hasAttr("k"))
      return ctx.emitError() << "attribute 'k' is required before opset 10";
    if (failed(ctx.getInt("k", k)))
      return failure();
  } else {
    FailureOr<SmallVector<int64_t>> given = ctx.getConstInts(1, "K");
    if (failed(given))
      return failure();
    if (given->size() != 1)
      return ctx.emitError()
             << "input 1 (K) must hold one value, got " << formatList(*given);
    k = given->front();
  }
  if (failed(ctx.getInt("axis", axis)) ||
      failed(ctx.getInt("largest", largest)))
    return failure();
  FailureOr<int64_t> normalized = ctx.normalizeAxis(axis, shapeOf(*x).size());
  if (failed(normalized))
    return failure();
  SmallVector<NamedAttribute> attrs = {ctx.i64Attr("axis", *normalized),
                                       ctx.i64Attr("k", k),
                                       ctx.boolAttr("largest", largest != 0)};
  FailureOr<Value> values = ctx.create<TopKOp>({*x}, attrs);
  if (failed(values))
    return failure();
  FailureOr<Value> indices = ctx.create<TopKIndicesOp>({*x}, attrs);
  if (failed(indices))
    return failure();
  return SmallVector<Value>{*values, *indices};
}

} // namespace

void weft::onnxtoweft::populateSelectionLegalizers(
    LegalizerRegistry &registry) {
  registry.add("Floor", 6, kMaxOpset, legalizeRounding<FloorOp>);
  registry.add("Ceil", 6, kMaxOpset, legalizeRounding<CeilOp>);
  registry.add("Round", 11, kMaxOpset, legalizeRounding<RoundOp>);
  registry.add("CumSum", 11, kMaxOpset, legalizeCumSum);
  registry.add("ArgMax", 1, kMaxOpset, legalizeArgReduce<ArgMaxOp>);
  registry.add("ArgMin", 1, kMaxOpset, legalizeArgReduce<ArgMinOp>);
  registry.add("TopK", 1, kMaxOpset, legalizeTopK);
}
