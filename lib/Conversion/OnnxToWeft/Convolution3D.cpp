//===- Convolution3D.cpp - ONNX 3-D Conv, MaxPool, AveragePool to weft ----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// 3-D windows (NCDHW) are composed from weft's 2-D window ops rather than
// given ops of their own, so the evaluator, the lowering, the gradients and
// the sharding rules of conv2d and the 2-D pools carry over unchanged:
//  - Conv: out = sum over depth taps kd of conv2d(depth slice kd of the
//    input, filter slice kd), the depth slices strided and dilated as the
//    depth window is, every output depth a conv2d batch element
//    ([N, Do, C, H, W] -> [N * Do, C, H, W]);
//  - MaxPool: a 2-D max pool of every depth plane, then the maximum over
//    the depth window, ties going to the first depth (as PyTorch's first
//    maximum in window order);
//  - AveragePool: a 2-D average of every depth plane, then the average over
//    the depth window; a box's divisor is the product of its per-axis
//    divisors, with or without padding counted.
// Depth padding is materialized (zeros, or -inf for max); ceil_mode is not
// supported for 3-D pools.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "llvm/ADT/STLExtras.h"

#include <limits>

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// Per-axis attributes of a 3-D window, ONNX order (depth, height, width).
struct Window3D {
  SmallVector<int64_t> kernel, strides = {1, 1, 1}, dilations = {1, 1, 1};
  /// [d0, h0, w0, d1, h1, w1], as ONNX's pads.
  SmallVector<int64_t> pads = {0, 0, 0, 0, 0, 0};
  int64_t outDepth = 0;

  /// conv2d/pool padding `[top, left, bottom, right]` of the H, W axes.
  SmallVector<int64_t> planePadding() const {
    return {pads[1], pads[2], pads[4], pads[5]};
  }
};

LogicalResult getInts3(LegalizeContext &ctx, StringRef name,
                       SmallVectorImpl<int64_t> &value, size_t count,
                       bool positive) {
  if (!ctx.hasAttr(name))
    return success();
  SmallVector<int64_t> given;
  if (failed(ctx.getInts(name, given)))
    return failure();
  if (given.size() != count)
    return ctx.emitError() << "attribute '" << name << "' must have " << count
                           << " entries for a 3-D window, got " << given.size();
  if (llvm::any_of(given, [&](int64_t v) { return positive ? v < 1 : v < 0; }))
    return ctx.emitError() << "attribute '" << name
                           << "' = " << formatList(given) << " must be "
                           << (positive ? "positive" : "non-negative");
  value.assign(given.begin(), given.end());
  return success();
}

/// Reads strides, dilations and pads (or auto_pad) for `kernel` over the
/// spatial shape `spatial`, and the output depth.
FailureOr<Window3D> getWindow(LegalizeContext &ctx, ArrayRef<int64_t> spatial,
                              ArrayRef<int64_t> kernel) {
  Window3D w;
  w.kernel.assign(kernel.begin(), kernel.end());
  std::string autoPad = "NOTSET";
  if (failed(getInts3(ctx, "strides", w.strides, 3, true)) ||
      failed(getInts3(ctx, "dilations", w.dilations, 3, true)) ||
      failed(getInts3(ctx, "pads", w.pads, 6, false)) ||
      failed(ctx.getString("auto_pad", autoPad)))
    return failure();
  if (autoPad == "VALID") {
    w.pads.assign(6, 0);
  } else if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
    for (int d = 0; d < 3; ++d) {
      int64_t out = (spatial[d] + w.strides[d] - 1) / w.strides[d];
      int64_t span = w.dilations[d] * (w.kernel[d] - 1) + 1;
      int64_t total =
          std::max<int64_t>(0, (out - 1) * w.strides[d] + span - spatial[d]);
      int64_t small = total / 2, big = total - small;
      w.pads[d] = autoPad == "SAME_UPPER" ? small : big;
      w.pads[d + 3] = autoPad == "SAME_UPPER" ? big : small;
    }
  } else if (autoPad != "NOTSET") {
    return ctx.unsupportedAttr("auto_pad", "'" + autoPad + "'",
                               "NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  }
  int64_t padded = spatial[0] + w.pads[0] + w.pads[3];
  int64_t span = w.dilations[0] * (w.kernel[0] - 1) + 1;
  if (padded < span)
    return ctx.emitError() << "the depth window (" << span
                           << " cells) does not fit the padded depth ("
                           << padded << ")";
  w.outDepth = (padded - span) / w.strides[0] + 1;
  return w;
}

/// Pads axis 2 of an NCDHW tensor by the window's depth pads with `value`.
FailureOr<Value> padDepth(LegalizeContext &ctx, Value x, const Window3D &w,
                          double value) {
  if (w.pads[0] == 0 && w.pads[3] == 0)
    return x;
  return ctx.create<PadOp>({x}, {ctx.arrayAttr("low", {0, 0, w.pads[0], 0, 0}),
                                 ctx.arrayAttr("high", {0, 0, w.pads[3], 0, 0}),
                                 ctx.arrayAttr("interior", {0, 0, 0, 0, 0}),
                                 ctx.f64Attr("value", value)});
}

/// Depth tap `kd` of every output depth: along `axis` of `x`, the cells
/// `kd * dilation + od * stride` for od < outDepth.
FailureOr<Value> depthTap(LegalizeContext &ctx, Value x, int64_t axis,
                          const Window3D &w, int64_t kd) {
  ArrayRef<int64_t> shape = shapeOf(x);
  SmallVector<int64_t> starts(shape.size(), 0), limits(shape),
      strides(shape.size(), 1);
  starts[axis] = kd * w.dilations[0];
  limits[axis] = starts[axis] + (w.outDepth - 1) * w.strides[0] + 1;
  strides[axis] = w.strides[0];
  return ctx.create<SliceOp>({x}, {ctx.arrayAttr("starts", starts),
                                   ctx.arrayAttr("limits", limits),
                                   ctx.arrayAttr("strides", strides)});
}

} // namespace

LegalizeResult weft::onnxtoweft::legalizeConv3D(LegalizeContext &ctx) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X", "W"});
  if (failed(in))
    return failure();
  Value x = (*in)[0], filter = (*in)[1];
  ArrayRef<int64_t> xs = shapeOf(x), fs = shapeOf(filter);
  if (fs.size() != 5)
    return ctx.emitError() << "input 1 (W) must have rank 5 like X, got "
                           << formatShape(fs);
  int64_t group = 1;
  SmallVector<int64_t> declared(fs.drop_front(2));
  if (failed(ctx.getInt("group", group)) ||
      failed(getInts3(ctx, "kernel_shape", declared, 3, true)))
    return failure();
  if (ArrayRef<int64_t>(declared) != fs.drop_front(2))
    return ctx.emitError() << "attribute 'kernel_shape' ("
                           << formatShape(declared)
                           << ") does not match the filter's spatial shape ("
                           << formatShape(fs.drop_front(2)) << ")";
  FailureOr<Window3D> w = getWindow(ctx, xs.drop_front(2), fs.drop_front(2));
  if (failed(w))
    return failure();
  std::optional<Value> bias;
  if (ctx.hasInput(2)) {
    FailureOr<TypedValue<RankedTensorType>> b = ctx.getTensor(2, "B");
    if (failed(b))
      return failure();
    bias = *b;
  }
  // [N, C, D', H, W] -> [N, D', C, H, W]: a depth tap is then a slice along
  // axis 1 that reshapes into conv2d's batch.
  FailureOr<Value> padded = padDepth(ctx, x, *w, 0.0);
  if (failed(padded))
    return failure();
  FailureOr<Value> moved = ctx.create<TransposeOp>(
      {*padded}, {ctx.arrayAttr("permutation", {0, 2, 1, 3, 4})});
  if (failed(moved))
    return failure();
  int64_t n = xs[0], c = xs[1], h = xs[3], wd = xs[4];
  int64_t o = fs[0], i = fs[1], kh = fs[3], kw = fs[4];
  SmallVector<NamedAttribute> attrs = {
      ctx.arrayAttr("strides", {w->strides[1], w->strides[2]}),
      ctx.arrayAttr("padding", w->planePadding()),
      ctx.arrayAttr("dilations", {w->dilations[1], w->dilations[2]}),
      ctx.i64Attr("groups", group)};
  FailureOr<Value> sum;
  for (int64_t kd = 0; kd < fs[2]; ++kd) {
    FailureOr<Value> tap = depthTap(ctx, *moved, 1, *w, kd);
    if (failed(tap))
      return failure();
    FailureOr<Value> plane = ctx.reshape(*tap, {n * w->outDepth, c, h, wd});
    FailureOr<Value> taps = ctx.create<SliceOp>(
        {filter}, {ctx.arrayAttr("starts", {0, 0, kd, 0, 0}),
                   ctx.arrayAttr("limits", {o, i, kd + 1, kh, kw}),
                   ctx.arrayAttr("strides", {1, 1, 1, 1, 1})});
    if (failed(plane) || failed(taps))
      return failure();
    FailureOr<Value> taps2d = ctx.reshape(*taps, {o, i, kh, kw});
    if (failed(taps2d))
      return failure();
    SmallVector<Value> operands = {*plane, *taps2d};
    // The bias joins the first tap's conv2d.
    if (kd == 0 && bias)
      operands.push_back(*bias);
    FailureOr<Value> y = ctx.create<Conv2DOp>(operands, attrs);
    if (failed(y))
      return failure();
    sum = kd == 0 ? y : make<AddOp>(ctx, *sum, *y);
    if (failed(sum))
      return failure();
  }
  ArrayRef<int64_t> ys = shapeOf(*sum);
  FailureOr<Value> split = ctx.reshape(*sum, {n, w->outDepth, o, ys[2], ys[3]});
  if (failed(split))
    return failure();
  return one(ctx.create<TransposeOp>(
      {*split}, {ctx.arrayAttr("permutation", {0, 2, 1, 3, 4})}));
}

LegalizeResult weft::onnxtoweft::legalizePool3D(LegalizeContext &ctx,
                                                bool isMax) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in))
    return failure();
  Value x = in->front();
  ArrayRef<int64_t> xs = shapeOf(x);
  SmallVector<int64_t> kernel;
  int64_t ceilMode = 0, storageOrder = 0, countIncludePad = 0;
  if (!ctx.hasAttr("kernel_shape"))
    return ctx.emitError() << "attribute 'kernel_shape' is required";
  if (failed(getInts3(ctx, "kernel_shape", kernel, 3, true)) ||
      failed(ctx.getInt("ceil_mode", ceilMode)) ||
      failed(ctx.getInt("storage_order", storageOrder)) ||
      failed(ctx.getInt("count_include_pad", countIncludePad)))
    return failure();
  if (ceilMode != 0)
    return ctx.unsupportedAttr("ceil_mode", std::to_string(ceilMode),
                               "0 for 3-D pooling");
  if (storageOrder != 0)
    return ctx.unsupportedAttr("storage_order", std::to_string(storageOrder),
                               "0 (row major)");
  FailureOr<Window3D> w = getWindow(ctx, xs.drop_front(2), kernel);
  if (failed(w))
    return failure();
  if (w->dilations != SmallVector<int64_t>{1, 1, 1})
    return ctx.unsupportedAttr("dilations", formatList(w->dilations), "all 1");
  for (int d = 0; d < 3; ++d)
    if (w->pads[d] >= kernel[d] || w->pads[d + 3] >= kernel[d])
      return ctx.emitError()
             << "pads " << formatList(w->pads)
             << " must be smaller than the kernel " << formatList(kernel);

  // Every depth plane pooled in H and W: [N, C * D, H, W].
  int64_t n = xs[0], c = xs[1], d = xs[2];
  FailureOr<Value> planes = ctx.reshape(x, {n, c * d, xs[3], xs[4]});
  if (failed(planes))
    return failure();
  SmallVector<NamedAttribute> attrs = {
      ctx.arrayAttr("kernel", {kernel[1], kernel[2]}),
      ctx.arrayAttr("strides", {w->strides[1], w->strides[2]}),
      ctx.arrayAttr("padding", w->planePadding())};
  if (!isMax)
    attrs.push_back(ctx.boolAttr("count_include_pad", countIncludePad != 0));
  FailureOr<Value> pooled = isMax ? ctx.create<MaxPool2DOp>({*planes}, attrs)
                                  : ctx.create<AvgPool2DOp>({*planes}, attrs);
  if (failed(pooled))
    return failure();
  ArrayRef<int64_t> ps = shapeOf(*pooled);
  FailureOr<Value> volume = ctx.reshape(*pooled, {n, c, d, ps[2], ps[3]});
  if (failed(volume))
    return failure();

  // Then the depth window over the pooled planes.
  FailureOr<Value> padded = padDepth(
      ctx, *volume, *w, isMax ? -std::numeric_limits<double>::infinity() : 0.0);
  if (failed(padded))
    return failure();
  FailureOr<Value> acc;
  for (int64_t kd = 0; kd < kernel[0]; ++kd) {
    FailureOr<Value> tap = depthTap(ctx, *padded, 2, *w, kd);
    if (failed(tap))
      return failure();
    if (kd == 0) {
      acc = tap;
      continue;
    }
    if (isMax) {
      // `acc >= tap` keeps the earlier depth on ties, and where's gradient
      // follows the choice, so the first maximum gets the gradient.
      FailureOr<Value> keep = makeCmp(ctx, CmpPredicate::ge, *acc, *tap);
      acc = make<WhereOp>(ctx, keep, *acc, *tap);
    } else {
      acc = make<AddOp>(ctx, *acc, *tap);
    }
    if (failed(acc))
      return failure();
  }
  if (isMax)
    return one(acc);

  Type elementType = elementTypeOf(x);
  if (countIncludePad != 0) {
    FailureOr<Value> depth =
        ctx.scalar(elementType, static_cast<double>(kernel[0]));
    if (failed(depth))
      return failure();
    return one(make<DivOp>(ctx, *acc, *depth));
  }
  // Without padding counted, each output depth divides by the real depth
  // cells under its window.
  SmallVector<Attribute> counts;
  for (int64_t od = 0; od < w->outDepth; ++od) {
    int64_t first = od * w->strides[0] - w->pads[0];
    int64_t real = std::min(first + kernel[0], d) - std::max<int64_t>(first, 0);
    counts.push_back(FloatAttr::get(elementType, static_cast<double>(real)));
  }
  auto countType = RankedTensorType::get({w->outDepth, 1, 1}, elementType);
  FailureOr<Value> divisor =
      ctx.constant(DenseElementsAttr::get(countType, counts));
  if (failed(divisor))
    return failure();
  return one(make<DivOp>(ctx, *acc, *divisor));
}
