//===- Reduction.cpp - ONNX Reduce* ops to weft ---------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// ReduceSum, ReduceMean and ReduceMax map onto weft's reductions; the rest
// of the family is composed from them (ReduceMin, ReduceL1, ReduceL2,
// ReduceSumSquare, ReduceLogSum, ReduceLogSumExp) or, for ReduceProd, from
// a tree of slices and multiplications. Each op moved `axes` from an
// attribute to an input at its own opset.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// What a Reduce* node asks for: sorted, normalized axes (empty with
/// `noop_with_empty_axes`, where the node is the identity) and keepdims.
struct Reduction {
  Value x;
  SmallVector<int64_t> axes;
  bool keepDims;
  bool isNoop() const { return axes.empty(); }
  /// The result shape of reducing `axes` of X.
  SmallVector<int64_t> resultShape() const {
    SmallVector<int64_t> shape;
    for (auto [i, d] : llvm::enumerate(shapeOf(x))) {
      bool reduced = llvm::is_contained(axes, static_cast<int64_t>(i));
      if (!reduced)
        shape.push_back(d);
      else if (keepDims)
        shape.push_back(1);
    }
    return shape;
  }
};

/// `axes` is an attribute before `axesInputOpset` and an optional input
/// from then on, where `noop_with_empty_axes` also appears. No axes means
/// all axes (or the identity with noop).
FailureOr<Reduction> getReduction(LegalizeContext &ctx,
                                  int64_t axesInputOpset) {
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
  if (axes.empty() && noop == 0)
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  for (int64_t &axis : axes) {
    FailureOr<int64_t> a = ctx.normalizeAxis(axis, rank, "axes entry");
    if (failed(a))
      return failure();
    axis = *a;
  }
  llvm::sort(axes);
  axes.erase(llvm::unique(axes), axes.end());
  return Reduction{x, axes, keepDims != 0};
}

/// `OpTy` over the reduction's axes applied to `v` (X or an elementwise
/// function of it); the identity for a noop reduction.
template <typename OpTy>
FailureOr<Value> reduce(LegalizeContext &ctx, const Reduction &r,
                        FailureOr<Value> v, bool keepDims) {
  if (failed(v) || r.isNoop())
    return v;
  return ctx.create<OpTy>({*v}, {ctx.arrayAttr("axes", r.axes),
                                 ctx.boolAttr("keep_dims", keepDims)});
}

/// Reduce{Mean,Sum,Max}: one weft op.
template <typename OpTy, int64_t axesInputOpset>
LegalizeResult legalizeDirect(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Reduction> r = getReduction(ctx, axesInputOpset);
  if (failed(r))
    return failure();
  return one(reduce<OpTy>(ctx, *r, r->x, r->keepDims));
}

/// `-max(-x)`.
LegalizeResult legalizeReduceMin(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Reduction> r = getReduction(ctx, 18);
  if (failed(r))
    return failure();
  FailureOr<Value> negated = make<NegOp>(ctx, r->x);
  return one(
      make<NegOp>(ctx, reduce<ReduceMaxOp>(ctx, *r, negated, r->keepDims)));
}

/// ReduceL1, ReduceL2, ReduceSumSquare and ReduceLogSum: a sum between an
/// elementwise function before (|x|, x^2) and after (sqrt, log).
enum class SumKind { L1, L2, SumSquare, LogSum };

template <SumKind kind>
LegalizeResult legalizeSumOf(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<Reduction> r = getReduction(ctx, 18);
  if (failed(r))
    return failure();
  Value x = r->x;
  FailureOr<Value> terms = x;
  if (kind == SumKind::L1)
    terms = make<AbsOp>(ctx, x);
  else if (kind == SumKind::L2 || kind == SumKind::SumSquare)
    terms = make<MulOp>(ctx, x, x);
  FailureOr<Value> sum = reduce<ReduceSumOp>(ctx, *r, terms, r->keepDims);
  if (kind == SumKind::L2)
    return one(make<SqrtOp>(ctx, sum));
  if (kind == SumKind::LogSum)
    return one(make<LogOp>(ctx, sum));
  return one(sum);
}

/// `log(sum(exp(x - m))) + m` with `m = max(x)`, so exp never overflows.
LegalizeResult legalizeReduceLogSumExp(LegalizeContext &ctx, OnnxNodeOp,
                                       ValueRange) {
  FailureOr<Reduction> r = getReduction(ctx, 18);
  if (failed(r))
    return failure();
  if (r->isNoop())
    return SmallVector<Value>{r->x};
  FailureOr<Value> m = reduce<ReduceMaxOp>(ctx, *r, r->x, /*keepDims=*/true);
  FailureOr<Value> shifted = make<ExpOp>(ctx, make<SubOp>(ctx, r->x, m));
  FailureOr<Value> sum = reduce<ReduceSumOp>(ctx, *r, shifted, r->keepDims);
  if (failed(m) || failed(sum))
    return failure();
  FailureOr<Value> offset = ctx.reshape(*m, shapeOf(*sum));
  return one(make<AddOp>(ctx, make<LogOp>(ctx, sum), offset));
}

/// Slice [start, start + size) of the last axis of `v`.
FailureOr<Value> sliceLast(LegalizeContext &ctx, Value v, int64_t start,
                           int64_t size) {
  ArrayRef<int64_t> shape = shapeOf(v);
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
      strides(shape.size(), 1);
  starts.back() = start;
  limits.back() = start + size;
  return ctx.create<SliceOp>({v}, {ctx.arrayAttr("starts", starts),
                                   ctx.arrayAttr("limits", limits),
                                   ctx.arrayAttr("strides", strides)});
}

/// The product over the reduced axes, moved last and flattened to K
/// entries, as log2(K) rounds of multiplying the two halves (the odd entry
/// out of a round is multiplied in at the end). Exact, for floats and
/// integers, and differentiable where exp(sum(log)) is not.
LegalizeResult legalizeReduceProd(LegalizeContext &ctx, OnnxNodeOp,
                                  ValueRange) {
  FailureOr<Reduction> r = getReduction(ctx, 18);
  if (failed(r))
    return failure();
  if (r->isNoop())
    return SmallVector<Value>{r->x};
  Value x = r->x;
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  SmallVector<int64_t> perm, flat;
  for (int64_t i = 0; i < rank; ++i)
    if (!llvm::is_contained(r->axes, i)) {
      perm.push_back(i);
      flat.push_back(shape[i]);
    }
  int64_t count = 1;
  for (int64_t axis : r->axes) {
    perm.push_back(axis);
    count *= shape[axis];
  }
  flat.push_back(count);
  auto resultType = RankedTensorType::get(r->resultShape(), elementTypeOf(x));
  if (count == 0) {
    FailureOr<Value> unit = ctx.scalar(elementTypeOf(x), 1.0);
    if (failed(unit))
      return failure();
    return one(ctx.create<BroadcastOp>({*unit}, {}, resultType));
  }
  FailureOr<Value> v = x;
  if (!llvm::equal(perm, llvm::seq<int64_t>(0, rank)))
    v = ctx.create<TransposeOp>({x}, {ctx.arrayAttr("permutation", perm)});
  if (succeeded(v))
    v = ctx.reshape(*v, flat);
  SmallVector<Value> leftovers;
  for (int64_t k = count; k > 1 && succeeded(v); k /= 2) {
    if (k % 2 != 0) {
      FailureOr<Value> odd = sliceLast(ctx, *v, k - 1, 1);
      if (failed(odd))
        return failure();
      leftovers.push_back(*odd);
    }
    FailureOr<Value> low = sliceLast(ctx, *v, 0, k / 2);
    FailureOr<Value> high = sliceLast(ctx, *v, k / 2, k / 2);
    v = make<MulOp>(ctx, low, high);
  }
  for (Value odd : leftovers)
    v = make<MulOp>(ctx, v, odd);
  if (failed(v))
    return failure();
  return one(ctx.reshape(*v, resultType.getShape()));
}

} // namespace

void weft::onnxtoweft::populateReductionLegalizers(
    LegalizerRegistry &registry) {
  registry.add("ReduceMean", 1, kMaxOpset, legalizeDirect<ReduceMeanOp, 18>);
  registry.add("ReduceMax", 1, kMaxOpset, legalizeDirect<ReduceMaxOp, 18>);
  registry.add("ReduceSum", 1, kMaxOpset, legalizeDirect<ReduceSumOp, 13>);
  registry.add("ReduceMin", 1, kMaxOpset, legalizeReduceMin);
  registry.add("ReduceL1", 1, kMaxOpset, legalizeSumOf<SumKind::L1>);
  registry.add("ReduceL2", 1, kMaxOpset, legalizeSumOf<SumKind::L2>);
  registry.add("ReduceSumSquare", 1, kMaxOpset,
               legalizeSumOf<SumKind::SumSquare>);
  registry.add("ReduceLogSum", 1, kMaxOpset, legalizeSumOf<SumKind::LogSum>);
  registry.add("ReduceLogSumExp", 1, kMaxOpset, legalizeReduceLogSumExp);
  registry.add("ReduceProd", 1, kMaxOpset, legalizeReduceProd);
}
