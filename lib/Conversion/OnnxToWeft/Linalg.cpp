//===- Linalg.cpp - ONNX Gemm, MatMul, Conv and pooling to weft -----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Gemm and MatMul become weft.matmul (with transposes, scales and bias);
// 2-D Conv and pools map onto weft's NCHW window ops, with ONNX's auto_pad
// resolved into explicit padding.
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

/// `alpha * A' B' + beta * C` with optional transposes. The scale
/// multiplications are only built when they are not 1.
LegalizeResult legalizeGemm(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"A", "B"});
  double alpha = 1.0, beta = 1.0;
  int64_t transA = 0, transB = 0;
  if (failed(in) || failed(ctx.getFloat("alpha", alpha)) ||
      failed(ctx.getFloat("beta", beta)) ||
      failed(ctx.getInt("transA", transA)) ||
      failed(ctx.getInt("transB", transB)))
    return failure();
  Value a = (*in)[0], b = (*in)[1];
  if (shapeOf(a).size() != 2 || shapeOf(b).size() != 2)
    return ctx.emitError() << "inputs A and B must be 2-D, got "
                           << formatShape(shapeOf(a)) << " and "
                           << formatShape(shapeOf(b));
  FailureOr<Value> y = ctx.create<MatMulOp>(
      {a, b}, {ctx.boolAttr("transpose_lhs", transA != 0),
               ctx.boolAttr("transpose_rhs", transB != 0)});
  if (failed(y))
    return failure();
  Type element = elementTypeOf(*y);
  if (alpha != 1.0) {
    FailureOr<Value> scale = ctx.scalar(element, alpha);
    if (failed(scale) || failed(y = ctx.create<MulOp>({*y, *scale})))
      return failure();
  }
  if (!ctx.hasInput(2) || beta == 0.0)
    return SmallVector<Value>{*y};

  FailureOr<TypedValue<RankedTensorType>> c = ctx.getTensor(2, "C");
  if (failed(c))
    return failure();
  ArrayRef<int64_t> resultShape = shapeOf(*y);
  std::optional<SmallVector<int64_t>> broadcast =
      broadcastShapes(shapeOf(*c), resultShape);
  if (!broadcast || ArrayRef<int64_t>(*broadcast) != resultShape)
    return ctx.emitError() << "input 2 (C) of shape "
                           << formatShape(shapeOf(*c))
                           << " does not broadcast to the result shape "
                           << formatShape(resultShape);
  Value bias = *c;
  if (beta != 1.0) {
    FailureOr<Value> scale = ctx.scalar(element, beta);
    FailureOr<Value> scaled;
    if (failed(scale) || failed(scaled = ctx.create<MulOp>({bias, *scale})))
      return failure();
    bias = *scaled;
  }
  return one(ctx.create<AddOp>({*y, bias}));
}

/// numpy matmul: a 1-D operand becomes a matrix for the product and its
/// axis is dropped from the result; batch axes broadcast in weft.matmul.
LegalizeResult legalizeMatMul(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"A", "B"});
  if (failed(in))
    return failure();
  Value a = (*in)[0], b = (*in)[1];
  size_t rankA = shapeOf(a).size(), rankB = shapeOf(b).size();
  if (rankA == 0 || rankB == 0)
    return ctx.emitError() << "inputs must have rank >= 1, got "
                           << formatShape(shapeOf(a)) << " and "
                           << formatShape(shapeOf(b));
  FailureOr<Value> lhs =
      rankA == 1 ? ctx.reshape(a, {1, shapeOf(a)[0]}) : FailureOr<Value>(a);
  FailureOr<Value> rhs =
      rankB == 1 ? ctx.reshape(b, {shapeOf(b)[0], 1}) : FailureOr<Value>(b);
  if (failed(lhs) || failed(rhs))
    return failure();
  FailureOr<Value> y = ctx.create<MatMulOp>({*lhs, *rhs});
  if (failed(y) || (rankA > 1 && rankB > 1))
    return one(y);
  // The product is [..., M, N]; drop N for a 1-D B, then M for a 1-D A.
  SmallVector<int64_t> shape(shapeOf(*y));
  if (rankB == 1)
    shape.pop_back();
  if (rankA == 1)
    shape.erase(shape.end() - (rankB == 1 ? 1 : 2));
  return one(ctx.reshape(*y, shape));
}

/// Reads a per-spatial-axis attribute (strides, dilations, kernel_shape,
/// pads), leaving `value` as given when absent. Window sizes and steps must
/// be positive: later arithmetic divides by them.
LogicalResult getSpatialInts(LegalizeContext &ctx, StringRef name,
                             SmallVectorImpl<int64_t> &value, size_t count,
                             bool positive = true) {
  if (failed(ctx.getInts(name, value)))
    return failure();
  if (value.size() != count)
    return ctx.emitError() << "attribute '" << name << "' must have " << count
                           << " entries for a 2-D window, got " << value.size();
  if (positive && llvm::any_of(value, [](int64_t v) { return v < 1; }))
    return ctx.emitError() << "attribute '" << name
                           << "' = " << formatList(value)
                           << " must be positive";
  return success();
}

/// Padding `[top, left, bottom, right]` from `pads` or `auto_pad`. SAME_*
/// pads so that `out = ceil(in / stride)`, the odd cell going at the end
/// (UPPER) or the beginning (LOWER).
FailureOr<SmallVector<int64_t>> resolvePads(LegalizeContext &ctx,
                                            ArrayRef<int64_t> in,
                                            ArrayRef<int64_t> kernel,
                                            ArrayRef<int64_t> strides,
                                            ArrayRef<int64_t> dilations) {
  std::string autoPad = "NOTSET";
  SmallVector<int64_t> pads = {0, 0, 0, 0};
  if (failed(ctx.getString("auto_pad", autoPad)) ||
      failed(getSpatialInts(ctx, "pads", pads, 4, /*positive=*/false)))
    return failure();
  if (autoPad == "NOTSET")
    return pads;
  if (autoPad == "VALID")
    return SmallVector<int64_t>{0, 0, 0, 0};
  if (autoPad != "SAME_UPPER" && autoPad != "SAME_LOWER")
    return ctx.unsupportedAttr("auto_pad", "'" + autoPad + "'",
                               "NOTSET, VALID, SAME_UPPER, SAME_LOWER");
  for (int d = 0; d < 2; ++d) {
    int64_t out = (in[d] + strides[d] - 1) / strides[d];
    int64_t span = dilations[d] * (kernel[d] - 1) + 1;
    int64_t total = std::max<int64_t>(0, (out - 1) * strides[d] + span - in[d]);
    int64_t small = total / 2, big = total - small;
    pads[d] = autoPad == "SAME_UPPER" ? small : big;
    pads[d + 2] = autoPad == "SAME_UPPER" ? big : small;
  }
  return pads;
}

/// Reports a non-4-D input: weft has only 2-D (NCHW) windows.
LogicalResult checkNCHW(LegalizeContext &ctx, Value x, StringRef what) {
  size_t rank = shapeOf(x).size();
  if (rank == 4)
    return success();
  return ctx.emitError() << "only 2-D " << what
                         << " (NCHW input of rank 4) is supported, got input "
                            "0 (X) of shape "
                         << formatShape(shapeOf(x)) << " (rank " << rank << ")";
}

LegalizeResult legalizeConv(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X", "W"});
  if (failed(in) || failed(checkNCHW(ctx, (*in)[0], "convolution")))
    return failure();
  Value x = (*in)[0], w = (*in)[1];
  if (shapeOf(w).size() != 4)
    return ctx.emitError() << "input 1 (W) must be OIHW (rank 4), got "
                           << formatShape(shapeOf(w));
  SmallVector<int64_t> kernel(shapeOf(w).drop_front(2));
  SmallVector<int64_t> declared = kernel, strides = {1, 1}, dilations = {1, 1};
  int64_t group = 1;
  if (failed(getSpatialInts(ctx, "kernel_shape", declared, 2)) ||
      failed(getSpatialInts(ctx, "strides", strides, 2)) ||
      failed(getSpatialInts(ctx, "dilations", dilations, 2)) ||
      failed(ctx.getInt("group", group)))
    return failure();
  if (declared != kernel)
    return ctx.emitError() << "attribute 'kernel_shape' ("
                           << formatShape(declared)
                           << ") does not match the filter's spatial shape ("
                           << formatShape(kernel) << ")";
  FailureOr<SmallVector<int64_t>> pads =
      resolvePads(ctx, shapeOf(x).drop_front(2), kernel, strides, dilations);
  if (failed(pads))
    return failure();
  SmallVector<Value> operands = {x, w};
  if (ctx.hasInput(2)) {
    FailureOr<TypedValue<RankedTensorType>> bias = ctx.getTensor(2, "B");
    if (failed(bias))
      return failure();
    operands.push_back(*bias);
  }
  return one(ctx.create<Conv2DOp>(
      operands,
      {ctx.arrayAttr("strides", strides), ctx.arrayAttr("padding", *pads),
       ctx.arrayAttr("dilations", dilations), ctx.i64Attr("groups", group)}));
}

/// MaxPool and AveragePool: attributes shared by both, checked against what
/// weft's pools support.
template <typename OpTy>
LegalizeResult legalizePool(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in) || failed(checkNCHW(ctx, in->front(), "pooling")))
    return failure();
  Value x = in->front();
  SmallVector<int64_t> kernel, strides = {1, 1}, dilations = {1, 1};
  int64_t ceilMode = 0, storageOrder = 0, countIncludePad = 0;
  if (!ctx.hasAttr("kernel_shape"))
    return ctx.emitError() << "attribute 'kernel_shape' is required";
  if (failed(getSpatialInts(ctx, "kernel_shape", kernel, 2)) ||
      failed(getSpatialInts(ctx, "strides", strides, 2)) ||
      failed(getSpatialInts(ctx, "dilations", dilations, 2)) ||
      failed(ctx.getInt("ceil_mode", ceilMode)) ||
      failed(ctx.getInt("storage_order", storageOrder)) ||
      failed(ctx.getInt("count_include_pad", countIncludePad)))
    return failure();
  if (dilations != SmallVector<int64_t>{1, 1})
    return ctx.unsupportedAttr("dilations", formatShape(dilations), "1x1");
  if (storageOrder != 0)
    return ctx.unsupportedAttr("storage_order", std::to_string(storageOrder),
                               "0 (row major)");
  ArrayRef<int64_t> spatial = shapeOf(x).drop_front(2);
  FailureOr<SmallVector<int64_t>> pads =
      resolvePads(ctx, spatial, kernel, strides, dilations);
  if (failed(pads))
    return failure();
  // ceil_mode only matters when the last window would hang over the edge;
  // weft's pools round down, so accept it exactly when that never happens.
  for (int d = 0; ceilMode != 0 && d < 2; ++d) {
    int64_t extent = spatial[d] + (*pads)[d] + (*pads)[d + 2] - kernel[d];
    if (extent >= 0 && extent % strides[d] != 0)
      return ctx.emitError()
             << "attribute 'ceil_mode' = 1 is not supported here: it changes "
                "the output size of spatial axis "
             << d
             << " (supported: 0, or 1 when the windows tile the input "
                "exactly)";
  }
  SmallVector<NamedAttribute> attrs = {ctx.arrayAttr("kernel", kernel),
                                       ctx.arrayAttr("strides", strides),
                                       ctx.arrayAttr("padding", *pads)};
  if constexpr (std::is_same_v<OpTy, AvgPool2DOp>)
    attrs.push_back(ctx.boolAttr("count_include_pad", countIncludePad != 0));
  return one(ctx.create<OpTy>({x}, attrs));
}

LegalizeResult legalizeGlobalAveragePool(LegalizeContext &ctx, OnnxNodeOp,
                                         ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in))
    return failure();
  return one(ctx.create<GlobalAvgPoolOp>(*in));
}

} // namespace

void weft::onnxtoweft::populateLinalgLegalizers(LegalizerRegistry &registry) {
  registry.add("Gemm", 7, kMaxOpset, legalizeGemm);
  registry.add("MatMul", 1, kMaxOpset, legalizeMatMul);
  registry.add("Conv", 1, kMaxOpset, legalizeConv);
  registry.add("MaxPool", 1, kMaxOpset, legalizePool<MaxPool2DOp>);
  registry.add("AveragePool", 1, kMaxOpset, legalizePool<AvgPool2DOp>);
  registry.add("GlobalAveragePool", 1, kMaxOpset, legalizeGlobalAveragePool);
}
