//===- DataMovement.cpp - ONNX slicing, joining and gathering to weft -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Transpose, Slice, Concat, Split, Gather, Trilu and Pad.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"

#include <algorithm>
#include <cstdint>
#include <numeric>

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// Trilu materializes its mask as a constant; bigger ones are a mistake.
constexpr int64_t kMaxTriluMaskElements = int64_t(1) << 26;

LegalizeResult legalizeTranspose(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data"});
  if (failed(in))
    return failure();
  int64_t rank = shapeOf(in->front()).size();
  SmallVector<int64_t> perm(llvm::reverse(llvm::seq<int64_t>(0, rank)));
  if (failed(ctx.getInts("perm", perm)))
    return failure();
  return one(
      ctx.create<TransposeOp>(*in, {ctx.arrayAttr("permutation", perm)}));
}

/// Slice: starts/ends/axes/steps are inputs from opset 10, attributes
/// before. Bounds clamp as in ONNX (INT64_MAX means "to the end"). Positive
/// steps become one weft.slice; a negative step on an axis becomes a gather
/// of the explicit index list, since weft has no reverse.
LegalizeResult legalizeSlice(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data"});
  if (failed(in))
    return failure();
  Value x = in->front();
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  SmallVector<int64_t> starts, ends, axes, steps;
  StringRef names[4] = {"starts", "ends", "axes", "steps"};
  SmallVectorImpl<int64_t> *lists[4] = {&starts, &ends, &axes, &steps};
  for (int i = 0; i < 4; ++i) {
    if (ctx.opset < 10) {
      if (i < 3 && failed(ctx.getInts(names[i], *lists[i])))
        return failure();
      continue;
    }
    if (!ctx.hasInput(i + 1) && i >= 2)
      continue;
    FailureOr<SmallVector<int64_t>> v = ctx.getConstInts(i + 1, names[i]);
    if (failed(v))
      return failure();
    lists[i]->assign(v->begin(), v->end());
  }
  if (!ctx.hasAttr("axes") && !ctx.hasInput(3))
    axes = llvm::to_vector(llvm::seq<int64_t>(0, starts.size()));
  if (steps.empty())
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size())
    return ctx.emitError() << "starts, ends, axes and steps must have the "
                              "same length";

  SmallVector<int64_t> begin(rank, 0), limit(shape), stride(rank, 1);
  SmallVector<std::pair<int64_t, SmallVector<int64_t>>> reversed;
  llvm::SmallBitVector seen(rank);
  for (size_t k = 0; k < starts.size(); ++k) {
    FailureOr<int64_t> axis = ctx.normalizeAxis(axes[k], rank, "axes entry");
    if (failed(axis))
      return failure();
    if (seen.test(*axis))
      return ctx.emitError() << "axis " << *axis << " is sliced twice";
    seen.set(*axis);
    int64_t dim = shape[*axis], step = steps[k];
    int64_t s = starts[k] < 0 ? starts[k] + dim : starts[k];
    int64_t e = ends[k] < 0 ? ends[k] + dim : ends[k];
    if (step == 0)
      return ctx.emitError() << "steps must not be 0";
    if (step > 0) {
      begin[*axis] = std::clamp<int64_t>(s, 0, dim);
      limit[*axis] = std::max(begin[*axis], std::clamp<int64_t>(e, 0, dim));
      stride[*axis] = step;
      continue;
    }
    SmallVector<int64_t> indices;
    for (int64_t i = dim == 0 ? -1 : std::clamp<int64_t>(s, 0, dim - 1),
                 last = std::clamp<int64_t>(e, -1, dim - 1);
         i > last; i += step)
      indices.push_back(i);
    reversed.push_back({*axis, std::move(indices)});
  }
  // PyTorch exports full-range slices such as `mask[:, :, :T, :T]`.
  bool identity = llvm::all_of(begin, [](int64_t b) { return b == 0; }) &&
                  ArrayRef<int64_t>(limit) == shape &&
                  llvm::all_of(stride, [](int64_t s) { return s == 1; });
  FailureOr<Value> result =
      identity ? FailureOr<Value>(x)
               : ctx.create<SliceOp>({x}, {ctx.arrayAttr("starts", begin),
                                           ctx.arrayAttr("limits", limit),
                                           ctx.arrayAttr("strides", stride)});
  for (auto &[axis, indices] : reversed) {
    if (failed(result))
      return failure();
    auto type = RankedTensorType::get({static_cast<int64_t>(indices.size())},
                                      ctx.builder.getI64Type());
    FailureOr<Value> index =
        ctx.constant(DenseElementsAttr::get(type, ArrayRef<int64_t>(indices)));
    if (failed(index))
      return failure();
    result =
        ctx.create<GatherOp>({*result, *index}, {ctx.i64Attr("axis", axis)});
  }
  return one(result);
}

LegalizeResult legalizeConcat(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getVariadicTensors();
  if (failed(in))
    return failure();
  if (!ctx.hasAttr("axis"))
    return ctx.emitError() << "attribute 'axis' is required";
  int64_t axis = 0;
  if (failed(ctx.getInt("axis", axis)))
    return failure();
  FailureOr<int64_t> a = ctx.normalizeAxis(axis, shapeOf(in->front()).size());
  if (failed(a))
    return failure();
  return one(ctx.create<ConcatOp>(*in, {ctx.i64Attr("axis", *a)}));
}

/// Split into the node's outputs: sizes from the `split` attribute (before
/// 13) or input (from 13); without them equal parts, the last one smaller
/// when the axis does not divide (opset 18's num_outputs rule).
LegalizeResult legalizeSplit(LegalizeContext &ctx, OnnxNodeOp node,
                             ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  int64_t axis = 0;
  if (failed(in) || failed(ctx.getInt("axis", axis)))
    return failure();
  Value x = in->front();
  ArrayRef<int64_t> shape = shapeOf(x);
  FailureOr<int64_t> a = ctx.normalizeAxis(axis, shape.size());
  if (failed(a))
    return failure();
  int64_t dim = shape[*a], parts = node.getNumResults();
  SmallVector<int64_t> sizes;
  if (ctx.opset < 13) {
    if (failed(ctx.getInts("split", sizes)))
      return failure();
  } else if (ctx.hasInput(1)) {
    FailureOr<SmallVector<int64_t>> given = ctx.getConstInts(1, "split");
    if (failed(given))
      return failure();
    sizes = *given;
  }
  if (sizes.empty() && parts > 0) {
    int64_t chunk = (dim + parts - 1) / parts;
    if (ctx.opset < 18 && dim % parts != 0)
      return ctx.emitError()
             << "axis " << *a << " of size " << dim << " does not split into "
             << parts << " equal parts";
    for (int64_t i = 0; i < parts; ++i)
      sizes.push_back(std::clamp<int64_t>(dim - i * chunk, 0, chunk));
  }
  if (static_cast<int64_t>(sizes.size()) != parts ||
      llvm::any_of(sizes, [](int64_t s) { return s < 0; }) ||
      std::accumulate(sizes.begin(), sizes.end(), int64_t(0)) != dim)
    return ctx.emitError() << "cannot split axis " << *a << " of size " << dim
                           << " into " << parts << " outputs of sizes "
                           << formatList(sizes);
  SmallVector<Value> results;
  SmallVector<int64_t> begin(shape.size(), 0), limit(shape),
      stride(shape.size(), 1);
  int64_t offset = 0;
  for (int64_t size : sizes) {
    begin[*a] = offset;
    limit[*a] = offset += size;
    FailureOr<Value> part = ctx.create<SliceOp>(
        {x}, {ctx.arrayAttr("starts", begin), ctx.arrayAttr("limits", limit),
              ctx.arrayAttr("strides", stride)});
    if (failed(part))
      return failure();
    results.push_back(*part);
  }
  return results;
}

LegalizeResult legalizeGather(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data", "indices"});
  int64_t axis = 0;
  if (failed(in) || failed(ctx.getInt("axis", axis)))
    return failure();
  FailureOr<int64_t> a = ctx.normalizeAxis(axis, shapeOf((*in)[0]).size());
  if (failed(a))
    return failure();
  return one(ctx.create<GatherOp>(*in, {ctx.i64Attr("axis", *a)}));
}

/// Trilu as `where(mask, x, 0)` with a constant mask over the last two axes:
/// weft has no triangle op, and a constant input folds the whole thing.
LegalizeResult legalizeTrilu(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  int64_t upper = 1, k = 0;
  if (failed(in) || failed(ctx.getInt("upper", upper)))
    return failure();
  if (ctx.hasInput(1)) {
    FailureOr<SmallVector<int64_t>> given = ctx.getConstInts(1, "k");
    if (failed(given))
      return failure();
    if (given->size() != 1)
      return ctx.emitError() << "input 1 (k) must hold one value";
    k = given->front();
  }
  Value x = in->front();
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.size() < 2)
    return ctx.emitError() << "input must have rank >= 2, got "
                           << formatShape(shape);
  int64_t rows = shape[shape.size() - 2], cols = shape.back();
  if (rows * cols > kMaxTriluMaskElements)
    return ctx.emitError() << "a " << rows << "x" << cols
                           << " triangle mask is too large to build at "
                              "compile time";
  SmallVector<bool> mask;
  mask.reserve(rows * cols);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      mask.push_back(upper != 0 ? j - i >= k : j - i <= k);
  auto maskType = RankedTensorType::get({rows, cols}, ctx.builder.getI1Type());
  FailureOr<Value> maskValue =
      ctx.constant(DenseElementsAttr::get(maskType, ArrayRef<bool>(mask)));
  FailureOr<Value> zero = ctx.scalar(elementTypeOf(x), 0);
  if (failed(maskValue) || failed(zero))
    return failure();
  return one(ctx.create<WhereOp>({*maskValue, x, *zero}));
}

/// Pads axis `axis` of `x` by `low` and `high` copies of its cells in
/// reflect, edge or wrap mode, as a gather of the index list that mode
/// reads: reflect mirrors without repeating the border cell, edge repeats
/// it, wrap continues from the other end.
FailureOr<Value> padByGather(LegalizeContext &ctx, Value x, int64_t axis,
                             int64_t low, int64_t high, StringRef mode) {
  int64_t n = shapeOf(x)[axis];
  int64_t limit = mode == "reflect" ? n - 1 : mode == "wrap" ? n : INT64_MAX;
  if (n == 0 || low > limit || high > limit)
    return ctx.emitError() << "cannot pad axis " << axis << " of size " << n
                           << " by " << low << " and " << high << " in " << mode
                           << " mode";
  SmallVector<int64_t> indices;
  for (int64_t i = -low; i < n + high; ++i) {
    if (mode == "edge")
      indices.push_back(std::clamp<int64_t>(i, 0, n - 1));
    else if (mode == "wrap")
      indices.push_back((i + n) % n);
    else
      indices.push_back(i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i);
  }
  auto type = RankedTensorType::get({static_cast<int64_t>(indices.size())},
                                    ctx.builder.getI64Type());
  FailureOr<Value> index =
      ctx.constant(DenseElementsAttr::get(type, ArrayRef<int64_t>(indices)));
  if (failed(index))
    return failure();
  return ctx.create<GatherOp>({x, *index}, {ctx.i64Attr("axis", axis)});
}

/// Pad. Pads come as `[begin..., end...]` over `axes` (all axes unless
/// given, opset 18); negative pads crop, which becomes a slice after
/// padding the non-negative parts. Constant mode is weft.pad, the others
/// gathers.
LegalizeResult legalizePad(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data"});
  std::string mode = "constant";
  if (failed(in) || failed(ctx.getString("mode", mode)))
    return failure();
  if (mode != "constant" && mode != "reflect" && mode != "edge" &&
      (mode != "wrap" || ctx.opset < 19))
    return ctx.unsupportedAttr("mode", "'" + mode + "'",
                               "'constant', 'reflect', 'edge', 'wrap' (from "
                               "opset 19)");
  Value x = in->front();
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  SmallVector<int64_t> pads, axes;
  double value = 0;
  if (ctx.opset < 11) {
    if (failed(ctx.getInts("pads", pads)) ||
        failed(ctx.getFloat("value", value)))
      return failure();
  } else {
    FailureOr<SmallVector<int64_t>> given = ctx.getConstInts(1, "pads");
    if (failed(given))
      return failure();
    pads = *given;
    if (ctx.hasInput(2)) {
      FailureOr<ElementsAttr> fill = ctx.getConstant(2, "constant_value");
      if (failed(fill))
        return failure();
      FailureOr<SmallVector<double>> values = getFloatValues(*fill);
      if (failed(values) || values->size() != 1)
        return ctx.emitError() << "input 2 (constant_value) must be a float "
                                  "scalar, got "
                               << fill->getType();
      value = values->front();
    }
    if (ctx.hasInput(3)) {
      FailureOr<SmallVector<int64_t>> givenAxes = ctx.getConstInts(3, "axes");
      if (failed(givenAxes))
        return failure();
      axes = *givenAxes;
    }
  }
  if (axes.empty())
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  if (pads.size() != 2 * axes.size())
    return ctx.emitError() << "pads " << formatList(pads) << " must have "
                           << 2 * axes.size() << " entries";
  SmallVector<int64_t> low(rank, 0), high(rank, 0), interior(rank, 0);
  SmallVector<int64_t> cropLow(rank, 0), cropHigh(rank, 0);
  for (auto [k, axis] : llvm::enumerate(axes)) {
    FailureOr<int64_t> a = ctx.normalizeAxis(axis, rank, "axes entry");
    if (failed(a))
      return failure();
    int64_t begin = pads[k], end = pads[k + axes.size()];
    low[*a] = std::max<int64_t>(begin, 0);
    high[*a] = std::max<int64_t>(end, 0);
    cropLow[*a] = std::max<int64_t>(-begin, 0);
    cropHigh[*a] = std::max<int64_t>(-end, 0);
  }
  FailureOr<Value> padded = x;
  if (mode != "constant") {
    for (int64_t d = 0; d < rank && succeeded(padded); ++d)
      if (low[d] > 0 || high[d] > 0)
        padded = padByGather(ctx, *padded, d, low[d], high[d], mode);
  } else if (llvm::any_of(low, [](int64_t p) { return p > 0; }) ||
             llvm::any_of(high, [](int64_t p) { return p > 0; })) {
    padded = ctx.create<PadOp>({x}, {ctx.arrayAttr("low", low),
                                     ctx.arrayAttr("high", high),
                                     ctx.arrayAttr("interior", interior),
                                     ctx.f64Attr("value", value)});
  }
  if (failed(padded) ||
      (llvm::all_of(cropLow, [](int64_t c) { return c == 0; }) &&
       llvm::all_of(cropHigh, [](int64_t c) { return c == 0; })))
    return one(padded);
  SmallVector<int64_t> limits(shapeOf(*padded)), strides(rank, 1);
  for (int64_t d = 0; d < rank; ++d) {
    limits[d] -= cropHigh[d];
    if (limits[d] < cropLow[d])
      return ctx.emitError() << "pads " << formatList(pads) << " crop axis "
                             << d << " below size 0";
  }
  return one(
      ctx.create<SliceOp>({*padded}, {ctx.arrayAttr("starts", cropLow),
                                      ctx.arrayAttr("limits", limits),
                                      ctx.arrayAttr("strides", strides)}));
}

} // namespace

void weft::onnxtoweft::populateDataMovementLegalizers(
    LegalizerRegistry &registry) {
  registry.add("Transpose", 1, kMaxOpset, legalizeTranspose);
  registry.add("Slice", 1, kMaxOpset, legalizeSlice);
  registry.add("Concat", 4, kMaxOpset, legalizeConcat);
  registry.add("Split", 2, kMaxOpset, legalizeSplit);
  registry.add("Gather", 1, kMaxOpset, legalizeGather);
  registry.add("Trilu", 14, kMaxOpset, legalizeTrilu);
  registry.add("Pad", 2, kMaxOpset, legalizePad);
}
