//===- Convolution.cpp - ONNX Conv, ConvTranspose and pooling to weft -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Conv, ConvTranspose, MaxPool and AveragePool map onto weft's NCHW window
// ops (3-D ones are composed from them in Convolution3D.cpp). 1-D windows (NCL input) become 2-D ones with a unit height; ONNX's
// auto_pad is resolved into explicit padding, and ceil_mode into extra
// padding at the end that no window counts.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <type_traits>

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// A window op's input seen as NCHW: 1-D inputs (NCL) get a unit height.
/// Attributes are read per spatial axis of the original input and lifted
/// the same way, so the rest of a legalizer only deals with 2-D windows.
struct Window {
  Value x;                   // The NCHW input.
  int64_t spatialRank;       // 1 or 2.
  ArrayRef<int64_t> spatial; // H, W of the NCHW input.
};

FailureOr<Window> liftInput(LegalizeContext &ctx, Value x, StringRef what) {
  ArrayRef<int64_t> shape = shapeOf(x);
  if (shape.size() == 4)
    return Window{x, 2, shapeOf(x).drop_front(2)};
  if (shape.size() != 3)
    return ctx.emitError() << "only 1-D and 2-D " << what
                           << " (input of rank 3 or 4) are supported, got "
                              "input 0 (X) of shape "
                           << formatShape(shape) << " (rank " << shape.size()
                           << ")";
  FailureOr<Value> lifted = ctx.reshape(x, {shape[0], shape[1], 1, shape[2]});
  if (failed(lifted))
    return failure();
  return Window{*lifted, 1, shapeOf(*lifted).drop_front(2)};
}

/// Drops the unit height of a lifted 1-D result again.
LegalizeResult unliftResult(LegalizeContext &ctx, const Window &w,
                            FailureOr<Value> y) {
  if (failed(y) || w.spatialRank == 2)
    return one(y);
  ArrayRef<int64_t> shape = shapeOf(*y);
  return one(ctx.reshape(*y, {shape[0], shape[1], shape[3]}));
}

/// Reads a per-spatial-axis attribute (strides, dilations, kernel_shape,
/// output_padding) into its 2-D form, leaving the 2-D default in `value`
/// when absent. Window sizes and steps must be positive: later arithmetic
/// divides by them.
LogicalResult getSpatialInts(LegalizeContext &ctx, const Window &w,
                             StringRef name, SmallVectorImpl<int64_t> &value,
                             bool positive = true) {
  if (!ctx.hasAttr(name))
    return success();
  SmallVector<int64_t> given;
  if (failed(ctx.getInts(name, given)))
    return failure();
  if (static_cast<int64_t>(given.size()) != w.spatialRank)
    return ctx.emitError() << "attribute '" << name << "' must have "
                           << w.spatialRank << " entries for a "
                           << w.spatialRank << "-D window, got "
                           << given.size();
  if (llvm::any_of(given, [&](int64_t v) { return positive ? v < 1 : v < 0; }))
    return ctx.emitError() << "attribute '" << name
                           << "' = " << formatList(given) << " must be "
                           << (positive ? "positive" : "non-negative");
  if (w.spatialRank == 1)
    given.insert(given.begin(), positive ? 1 : 0);
  value.assign(given.begin(), given.end());
  return success();
}

/// `pads` as `[top, left, bottom, right]`, from ONNX's [begins..., ends...].
LogicalResult getPads(LegalizeContext &ctx, const Window &w,
                      SmallVectorImpl<int64_t> &pads) {
  pads.assign({0, 0, 0, 0});
  if (!ctx.hasAttr("pads"))
    return success();
  SmallVector<int64_t> given;
  if (failed(ctx.getInts("pads", given)))
    return failure();
  if (static_cast<int64_t>(given.size()) != 2 * w.spatialRank ||
      llvm::any_of(given, [](int64_t p) { return p < 0; }))
    return ctx.emitError() << "attribute 'pads' = " << formatList(given)
                           << " must hold " << 2 * w.spatialRank
                           << " non-negative entries";
  if (w.spatialRank == 1)
    pads.assign({0, given[0], 0, given[1]});
  else
    pads.assign(given.begin(), given.end());
  return success();
}

/// Padding from `pads` or `auto_pad`. SAME_* pads so that
/// `out = ceil(in / stride)`, the odd cell going at the end (UPPER) or the
/// beginning (LOWER).
FailureOr<SmallVector<int64_t>>
resolvePads(LegalizeContext &ctx, const Window &w, ArrayRef<int64_t> kernel,
            ArrayRef<int64_t> strides, ArrayRef<int64_t> dilations,
            bool allowSame = true) {
  std::string autoPad = "NOTSET";
  SmallVector<int64_t> pads;
  if (failed(ctx.getString("auto_pad", autoPad)) ||
      failed(getPads(ctx, w, pads)))
    return failure();
  if (autoPad == "NOTSET")
    return pads;
  if (autoPad == "VALID")
    return SmallVector<int64_t>{0, 0, 0, 0};
  if (!allowSame || (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER"))
    return ctx.unsupportedAttr(
        "auto_pad", "'" + autoPad + "'",
        allowSame ? "NOTSET, VALID, SAME_UPPER, SAME_LOWER" : "NOTSET, VALID");
  for (int d = 0; d < 2; ++d) {
    int64_t in = w.spatial[d];
    int64_t out = (in + strides[d] - 1) / strides[d];
    int64_t span = dilations[d] * (kernel[d] - 1) + 1;
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + span - in);
    int64_t small = total / 2, big = total - small;
    pads[d] = autoPad == "SAME_UPPER" ? small : big;
    pads[d + 2] = autoPad == "SAME_UPPER" ? big : small;
  }
  return pads;
}

/// The filter of a lifted window op: [O, I, K] gains a unit height too.
FailureOr<Value> liftFilter(LegalizeContext &ctx, const Window &w, Value f) {
  ArrayRef<int64_t> shape = shapeOf(f);
  if (static_cast<int64_t>(shape.size()) != w.spatialRank + 2)
    return ctx.emitError() << "input 1 (W) must have rank " << w.spatialRank + 2
                           << " like X, got " << formatShape(shape);
  if (w.spatialRank == 2)
    return f;
  return ctx.reshape(f, {shape[0], shape[1], 1, shape[2]});
}

/// Attributes shared by Conv and ConvTranspose.
struct ConvAttrs {
  SmallVector<int64_t> kernel, strides = {1, 1}, dilations = {1, 1};
  int64_t group = 1;
};

FailureOr<ConvAttrs> getConvAttrs(LegalizeContext &ctx, const Window &w,
                                  Value filter) {
  ConvAttrs a;
  a.kernel.assign(shapeOf(filter).drop_front(2).begin(),
                  shapeOf(filter).drop_front(2).end());
  SmallVector<int64_t> declared = a.kernel;
  if (failed(getSpatialInts(ctx, w, "kernel_shape", declared)) ||
      failed(getSpatialInts(ctx, w, "strides", a.strides)) ||
      failed(getSpatialInts(ctx, w, "dilations", a.dilations)) ||
      failed(ctx.getInt("group", a.group)))
    return failure();
  if (declared != a.kernel)
    return ctx.emitError() << "attribute 'kernel_shape' ("
                           << formatShape(declared)
                           << ") does not match the filter's spatial shape ("
                           << formatShape(a.kernel) << ")";
  return a;
}

LegalizeResult legalizeConv(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X", "W"});
  if (failed(in))
    return failure();
  if (shapeOf((*in)[0]).size() == 5)
    return legalizeConv3D(ctx);
  FailureOr<Window> w = liftInput(ctx, (*in)[0], "convolutions");
  if (failed(w))
    return failure();
  FailureOr<Value> filter = liftFilter(ctx, *w, (*in)[1]);
  if (failed(filter))
    return failure();
  FailureOr<ConvAttrs> a = getConvAttrs(ctx, *w, *filter);
  if (failed(a))
    return failure();
  FailureOr<SmallVector<int64_t>> pads =
      resolvePads(ctx, *w, a->kernel, a->strides, a->dilations);
  if (failed(pads))
    return failure();
  SmallVector<Value> operands = {w->x, *filter};
  if (ctx.hasInput(2)) {
    FailureOr<TypedValue<RankedTensorType>> bias = ctx.getTensor(2, "B");
    if (failed(bias))
      return failure();
    operands.push_back(*bias);
  }
  return unliftResult(
      ctx, *w,
      ctx.create<Conv2DOp>(operands, {ctx.arrayAttr("strides", a->strides),
                                      ctx.arrayAttr("padding", *pads),
                                      ctx.arrayAttr("dilations", a->dilations),
                                      ctx.i64Attr("groups", a->group)}));
}

/// ConvTranspose is the adjoint of a convolution with the same attributes:
/// weft.conv2d_backward_input of X by W [C_in, C_out / group, kH, kW], to
/// `stride * (in - 1) + output_padding + span - pads` cells per axis.
LegalizeResult legalizeConvTranspose(LegalizeContext &ctx, OnnxNodeOp,
                                     ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X", "W"});
  if (failed(in))
    return failure();
  FailureOr<Window> w = liftInput(ctx, (*in)[0], "transposed convolutions");
  if (failed(w))
    return failure();
  FailureOr<Value> filter = liftFilter(ctx, *w, (*in)[1]);
  if (failed(filter))
    return failure();
  FailureOr<ConvAttrs> a = getConvAttrs(ctx, *w, *filter);
  SmallVector<int64_t> outputPadding = {0, 0};
  if (failed(a) ||
      failed(getSpatialInts(ctx, *w, "output_padding", outputPadding,
                            /*positive=*/false)))
    return failure();
  if (ctx.hasAttr("output_shape"))
    return ctx.emitError() << "attribute 'output_shape' is not supported; "
                              "give 'pads' and 'output_padding' instead";
  FailureOr<SmallVector<int64_t>> pads = resolvePads(
      ctx, *w, a->kernel, a->strides, a->dilations, /*allowSame=*/false);
  if (failed(pads))
    return failure();
  ArrayRef<int64_t> xShape = shapeOf(w->x), fShape = shapeOf(*filter);
  if (xShape[1] != fShape[0])
    return ctx.emitError() << "input 0 (X) has " << xShape[1]
                           << " channels, but W of shape "
                           << formatShape(fShape) << " expects " << fShape[0];
  SmallVector<int64_t> shape = {xShape[0], fShape[1] * a->group};
  for (int d = 0; d < 2; ++d)
    shape.push_back(a->strides[d] * (xShape[d + 2] - 1) + outputPadding[d] +
                    a->dilations[d] * (a->kernel[d] - 1) + 1 - (*pads)[d] -
                    (*pads)[d + 2]);
  if (llvm::any_of(shape, [](int64_t d) { return d < 1; }))
    return ctx.emitError() << "pads " << formatList(*pads)
                           << " leave no output (" << formatShape(shape) << ")";
  FailureOr<Value> y = ctx.create<Conv2DBackwardInputOp>(
      {w->x, *filter},
      {ctx.arrayAttr("strides", a->strides), ctx.arrayAttr("padding", *pads),
       ctx.arrayAttr("dilations", a->dilations),
       ctx.i64Attr("groups", a->group)},
      RankedTensorType::get(shape, elementTypeOf(w->x)));
  if (succeeded(y) && ctx.hasInput(2)) {
    FailureOr<TypedValue<RankedTensorType>> bias = ctx.getTensor(2, "B");
    if (failed(bias))
      return failure();
    if (shapeOf(*bias) != ArrayRef<int64_t>{shape[1]})
      return ctx.emitError() << "input 2 (B) must have shape " << shape[1]
                             << ", got " << formatShape(shapeOf(*bias));
    y = make<AddOp>(ctx, y, ctx.reshape(*bias, {shape[1], 1, 1}));
  }
  return unliftResult(ctx, *w, y);
}

/// MaxPool and AveragePool. With ceil_mode the output size rounds up, as
/// in PyTorch (a last window must start inside the input or its leading
/// padding); the overhang becomes extra trailing padding that never wins a
/// max and is never counted in an average.
template <typename OpTy>
LegalizeResult legalizePool(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  constexpr bool isAvg = std::is_same_v<OpTy, AvgPool2DOp>;
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in))
    return failure();
  if (shapeOf(in->front()).size() == 5)
    return legalizePool3D(ctx, /*isMax=*/!isAvg);
  FailureOr<Window> w = liftInput(ctx, in->front(), "pooling");
  if (failed(w))
    return failure();
  SmallVector<int64_t> kernel, strides = {1, 1}, dilations = {1, 1};
  int64_t ceilMode = 0, storageOrder = 0, countIncludePad = 0;
  if (!ctx.hasAttr("kernel_shape"))
    return ctx.emitError() << "attribute 'kernel_shape' is required";
  if (failed(getSpatialInts(ctx, *w, "kernel_shape", kernel)) ||
      failed(getSpatialInts(ctx, *w, "strides", strides)) ||
      failed(getSpatialInts(ctx, *w, "dilations", dilations)) ||
      failed(ctx.getInt("ceil_mode", ceilMode)) ||
      failed(ctx.getInt("storage_order", storageOrder)) ||
      failed(ctx.getInt("count_include_pad", countIncludePad)))
    return failure();
  if (dilations != SmallVector<int64_t>{1, 1})
    return ctx.unsupportedAttr("dilations", formatList(dilations), "all 1");
  if (storageOrder != 0)
    return ctx.unsupportedAttr("storage_order", std::to_string(storageOrder),
                               "0 (row major)");
  FailureOr<SmallVector<int64_t>> pads =
      resolvePads(ctx, *w, kernel, strides, dilations);
  if (failed(pads))
    return failure();
  SmallVector<int64_t> padding = *pads;
  bool overhang = false;
  for (int d = 0; ceilMode != 0 && d < 2; ++d) {
    int64_t padded = w->spatial[d] + padding[d] + padding[d + 2];
    if (padded < kernel[d])
      break; // weft's verifier reports the window that does not fit.
    int64_t out = (padded - kernel[d] + strides[d] - 1) / strides[d] + 1;
    if ((out - 1) * strides[d] >= w->spatial[d] + padding[d])
      --out;
    int64_t extra = (out - 1) * strides[d] + kernel[d] - padded;
    if (extra > 0) {
      padding[d + 2] += extra;
      overhang = true;
    }
  }
  Value x = w->x;
  // Counted padding plus an uncounted overhang: materialize the counted
  // zeros, then count only cells of the padded input.
  if (isAvg && overhang && countIncludePad != 0 &&
      llvm::any_of(*pads, [](int64_t p) { return p > 0; })) {
    FailureOr<Value> padded = ctx.create<PadOp>(
        {x},
        {ctx.arrayAttr("low", {0, 0, (*pads)[0], (*pads)[1]}),
         ctx.arrayAttr("high", {0, 0, (*pads)[2], (*pads)[3]}),
         ctx.arrayAttr("interior", {0, 0, 0, 0}), ctx.f64Attr("value", 0.0)});
    if (failed(padded))
      return failure();
    x = *padded;
    for (int d = 0; d < 4; ++d)
      padding[d] -= (*pads)[d];
  }
  SmallVector<NamedAttribute> attrs = {ctx.arrayAttr("kernel", kernel),
                                       ctx.arrayAttr("strides", strides),
                                       ctx.arrayAttr("padding", padding)};
  if constexpr (isAvg)
    attrs.push_back(
        ctx.boolAttr("count_include_pad", countIncludePad != 0 && !overhang));
  return unliftResult(ctx, *w, ctx.create<OpTy>({x}, attrs));
}

LegalizeResult legalizeGlobalAveragePool(LegalizeContext &ctx, OnnxNodeOp,
                                         ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in))
    return failure();
  return one(ctx.create<GlobalAvgPoolOp>(*in));
}

/// The maximum over all spatial axes, keeping them as size 1.
LegalizeResult legalizeGlobalMaxPool(LegalizeContext &ctx, OnnxNodeOp,
                                     ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in))
    return failure();
  int64_t rank = shapeOf(in->front()).size();
  if (rank < 3)
    return ctx.emitError() << "input 0 (X) must have rank >= 3 (N, C, "
                              "spatial...), got "
                           << formatShape(shapeOf(in->front()));
  return one(ctx.create<ReduceMaxOp>(
      *in, {ctx.arrayAttr("axes", llvm::to_vector(llvm::seq<int64_t>(2, rank))),
            ctx.boolAttr("keep_dims", true)}));
}

} // namespace

void weft::onnxtoweft::populateConvolutionLegalizers(
    LegalizerRegistry &registry) {
  registry.add("Conv", 1, kMaxOpset, legalizeConv);
  registry.add("ConvTranspose", 1, kMaxOpset, legalizeConvTranspose);
  registry.add("MaxPool", 1, kMaxOpset, legalizePool<MaxPool2DOp>);
  registry.add("AveragePool", 1, kMaxOpset, legalizePool<AvgPool2DOp>);
  registry.add("GlobalAveragePool", 1, kMaxOpset, legalizeGlobalAveragePool);
  registry.add("GlobalMaxPool", 1, kMaxOpset, legalizeGlobalMaxPool);
}
