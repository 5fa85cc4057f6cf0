//===- Resample.cpp - ONNX Resize, DepthToSpace, SpaceToDepth to weft -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Resize with static sizes is separable: every resized axis maps each
// output index to fixed input indices. Nearest mode is one weft.gather of
// constant indices per axis; linear mode gathers the two neighbours and
// blends them with constant weights (bilinear is linear along H, then W).
// Gathers keep the result differentiable, with scatter_add as adjoint.
// DepthToSpace and SpaceToDepth (PixelShuffle) are reshape, transpose,
// reshape.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

constexpr StringLiteral kTransforms[] = {"half_pixel", "pytorch_half_pixel",
                                         "align_corners", "asymmetric"};
constexpr StringLiteral kNearestModes[] = {
    "round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};

/// How output index `i` maps back to an input coordinate on one axis.
struct AxisMap {
  std::string transform;
  int64_t in, out;
  double scale;

  double coordinate(int64_t i) const {
    double x = static_cast<double>(i);
    if (transform == "asymmetric")
      return x / scale;
    if (transform == "align_corners")
      return out == 1 ? 0.0 : x * (in - 1) / static_cast<double>(out - 1);
    if (transform == "pytorch_half_pixel" && out == 1)
      return 0.0;
    return (x + 0.5) / scale - 0.5; // half_pixel, pytorch_half_pixel
  }
};

int64_t roundNearest(double x, StringRef mode) {
  if (mode == "floor")
    return static_cast<int64_t>(std::floor(x));
  if (mode == "ceil")
    return static_cast<int64_t>(std::ceil(x));
  if (mode == "round_prefer_ceil")
    return static_cast<int64_t>(std::floor(x + 0.5));
  return static_cast<int64_t>(std::ceil(x - 0.5)); // round_prefer_floor
}

FailureOr<Value> indexConstant(LegalizeContext &ctx, ArrayRef<int64_t> v) {
  auto type = RankedTensorType::get({static_cast<int64_t>(v.size())},
                                    ctx.builder.getI64Type());
  return ctx.constant(DenseElementsAttr::get(type, v));
}

FailureOr<Value> gather(LegalizeContext &ctx, Value x, ArrayRef<int64_t> index,
                        int64_t axis) {
  FailureOr<Value> indices = indexConstant(ctx, index);
  if (failed(indices))
    return failure();
  return ctx.create<GatherOp>({x, *indices}, {ctx.i64Attr("axis", axis)});
}

/// Linear interpolation along `axis`: `lo + (hi - lo) * w`.
FailureOr<Value> interpolate(LegalizeContext &ctx, Value x, const AxisMap &m,
                             int64_t axis) {
  SmallVector<int64_t> lo, hi;
  SmallVector<double> weights;
  for (int64_t i = 0; i < m.out; ++i) {
    double c = std::clamp(m.coordinate(i), 0.0, static_cast<double>(m.in - 1));
    int64_t i0 = static_cast<int64_t>(std::floor(c));
    lo.push_back(i0);
    hi.push_back(std::min(i0 + 1, m.in - 1));
    weights.push_back(c - static_cast<double>(i0));
  }
  FailureOr<Value> low = gather(ctx, x, lo, axis);
  if (failed(low) || llvm::all_of(weights, [](double w) { return w == 0; }))
    return low;
  auto floatType = dyn_cast<FloatType>(elementTypeOf(x));
  if (!floatType)
    return ctx.emitError() << "linear mode needs a float input, got "
                           << elementTypeOf(x);
  SmallVector<int64_t> weightShape(shapeOf(x).size(), 1);
  weightShape[axis] = m.out;
  SmallVector<Attribute> weightAttrs;
  for (double w : weights)
    weightAttrs.push_back(FloatAttr::get(floatType, w));
  FailureOr<Value> weight = ctx.constant(DenseElementsAttr::get(
      RankedTensorType::get(weightShape, floatType), weightAttrs));
  FailureOr<Value> high = gather(ctx, x, hi, axis);
  return make<AddOp>(ctx, low,
                     make<MulOp>(ctx, make<SubOp>(ctx, high, low), weight));
}

/// Resize (opset 11 on): sizes come from the `sizes` input or from
/// `floor(in * scale)`; both must be constants.
LegalizeResult legalizeResize(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  std::string mode = "nearest", transform = "half_pixel",
              nearestMode = "round_prefer_floor", aspect = "stretch";
  int64_t antialias = 0;
  SmallVector<int64_t> axes;
  if (failed(in) || failed(ctx.getString("mode", mode)) ||
      failed(ctx.getString("coordinate_transformation_mode", transform)) ||
      failed(ctx.getString("nearest_mode", nearestMode)) ||
      failed(ctx.getString("keep_aspect_ratio_policy", aspect)) ||
      failed(ctx.getInt("antialias", antialias)) ||
      failed(ctx.getInts("axes", axes)))
    return failure();
  if (mode != "nearest" && mode != "linear")
    return ctx.unsupportedAttr("mode", "'" + mode + "'", "'nearest', 'linear'");
  if (!llvm::is_contained(kTransforms, transform))
    return ctx.unsupportedAttr("coordinate_transformation_mode",
                               "'" + transform + "'",
                               "'half_pixel', 'pytorch_half_pixel', "
                               "'align_corners', 'asymmetric'");
  if (!llvm::is_contained(kNearestModes, nearestMode))
    return ctx.unsupportedAttr("nearest_mode", "'" + nearestMode + "'",
                               "'round_prefer_floor', 'round_prefer_ceil', "
                               "'floor', 'ceil'");
  if (antialias != 0)
    return ctx.unsupportedAttr("antialias", std::to_string(antialias), "0");
  if (aspect != "stretch")
    return ctx.unsupportedAttr("keep_aspect_ratio_policy", "'" + aspect + "'",
                               "'stretch'");

  Value x = in->front();
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  if (axes.empty())
    axes = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  for (int64_t &axis : axes) {
    FailureOr<int64_t> a = ctx.normalizeAxis(axis, rank, "axes entry");
    if (failed(a))
      return failure();
    axis = *a;
  }
  ElementsAttr scalesAttr = ctx.matchConstant(2);
  bool haveScales = ctx.hasInput(2) && !(scalesAttr && scalesAttr.empty());
  bool haveSizes = ctx.hasInput(3);
  if (haveScales == haveSizes)
    return ctx.emitError() << "needs exactly one of input 2 (scales) and "
                              "input 3 (sizes)";
  SmallVector<int64_t> sizes;
  SmallVector<double> scales;
  if (haveSizes) {
    FailureOr<SmallVector<int64_t>> given = ctx.getConstInts(3, "sizes");
    if (failed(given))
      return failure();
    sizes = *given;
  } else {
    FailureOr<ElementsAttr> given = ctx.getConstant(2, "scales");
    if (failed(given))
      return failure();
    FailureOr<SmallVector<double>> values = getFloatValues(*given);
    if (failed(values))
      return ctx.emitError()
             << "input 2 (scales) must hold floats, got " << given->getType();
    scales = *values;
  }
  size_t count = haveSizes ? sizes.size() : scales.size();
  if (count != axes.size())
    return ctx.emitError() << "input " << (haveSizes ? 3 : 2) << " ("
                           << (haveSizes ? "sizes" : "scales") << ") has "
                           << count << " entries for " << axes.size()
                           << " axes";

  FailureOr<Value> result = x;
  for (auto [k, axis] : llvm::enumerate(axes)) {
    AxisMap m{transform, shape[axis], 0, 0.0};
    if (haveSizes) {
      m.out = sizes[k];
      m.scale = static_cast<double>(m.out) / static_cast<double>(m.in);
    } else {
      m.scale = scales[k];
      m.out = static_cast<int64_t>(std::floor(m.in * m.scale));
    }
    if (m.out < 1 || m.in < 1 || !(m.scale > 0))
      return ctx.emitError() << "cannot resize axis " << axis << " of size "
                             << m.in << " to " << m.out;
    if (m.out == m.in && m.scale == 1.0)
      continue;
    if (mode == "linear") {
      result = interpolate(ctx, *result, m, axis);
    } else {
      SmallVector<int64_t> index;
      for (int64_t i = 0; i < m.out; ++i)
        index.push_back(std::clamp<int64_t>(
            roundNearest(m.coordinate(i), nearestMode), 0, m.in - 1));
      result = gather(ctx, *result, index, axis);
    }
    if (failed(result))
      return failure();
  }
  return one(result);
}

/// Reshape to `spread`, permute, reshape to `result`.
LegalizeResult shuffle(LegalizeContext &ctx, Value x, ArrayRef<int64_t> spread,
                       ArrayRef<int64_t> permutation,
                       ArrayRef<int64_t> result) {
  FailureOr<Value> v = ctx.reshape(x, spread);
  if (failed(v))
    return failure();
  v = ctx.create<TransposeOp>({*v},
                              {ctx.arrayAttr("permutation", permutation)});
  if (failed(v))
    return failure();
  return one(ctx.reshape(*v, result));
}

/// The NCHW input and `blocksize` of DepthToSpace and SpaceToDepth.
FailureOr<std::pair<Value, int64_t>> getBlocks(LegalizeContext &ctx) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  int64_t block = 0;
  if (failed(in) || failed(ctx.getInt("blocksize", block)))
    return failure();
  if (!ctx.hasAttr("blocksize") || block < 1)
    return ctx.emitError() << "attribute 'blocksize' must be given and >= 1";
  if (shapeOf(in->front()).size() != 4)
    return ctx.emitError() << "input must be NCHW (rank 4), got "
                           << formatShape(shapeOf(in->front()));
  return std::make_pair(in->front(), block);
}

/// Moves blocks of channels into b x b spatial blocks: channel
/// `(i * b + j) * C' + c` (DCR) or `(c * b + i) * b + j` (CRD, PyTorch's
/// PixelShuffle) lands at row `h * b + i`, column `w * b + j`.
LegalizeResult legalizeDepthToSpace(LegalizeContext &ctx, OnnxNodeOp,
                                    ValueRange) {
  FailureOr<std::pair<Value, int64_t>> in = getBlocks(ctx);
  std::string mode = "DCR";
  if (failed(in) || failed(ctx.getString("mode", mode)))
    return failure();
  auto [x, b] = *in;
  ArrayRef<int64_t> s = shapeOf(x);
  int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (c % (b * b) != 0)
    return ctx.emitError() << c << " channels do not split into " << b << "x"
                           << b << " blocks";
  SmallVector<int64_t> result = {n, c / (b * b), h * b, w * b};
  if (mode == "DCR")
    return shuffle(ctx, x, {n, b, b, c / (b * b), h, w}, {0, 3, 4, 1, 5, 2},
                   result);
  if (mode == "CRD")
    return shuffle(ctx, x, {n, c / (b * b), b, b, h, w}, {0, 1, 4, 2, 5, 3},
                   result);
  return ctx.unsupportedAttr("mode", "'" + mode + "'", "'DCR', 'CRD'");
}

/// The inverse of DepthToSpace in DCR mode.
LegalizeResult legalizeSpaceToDepth(LegalizeContext &ctx, OnnxNodeOp,
                                    ValueRange) {
  FailureOr<std::pair<Value, int64_t>> in = getBlocks(ctx);
  if (failed(in))
    return failure();
  auto [x, b] = *in;
  ArrayRef<int64_t> s = shapeOf(x);
  int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  if (h % b != 0 || w % b != 0)
    return ctx.emitError() << "spatial size " << h << "x" << w
                           << " does not split into " << b << "x" << b
                           << " blocks";
  return shuffle(ctx, x, {n, c, h / b, b, w / b, b}, {0, 3, 5, 1, 2, 4},
                 {n, c * b * b, h / b, w / b});
}

} // namespace

void weft::onnxtoweft::populateResampleLegalizers(LegalizerRegistry &registry) {
  registry.add("Resize", 11, kMaxOpset, legalizeResize);
  registry.add("DepthToSpace", 1, kMaxOpset, legalizeDepthToSpace);
  registry.add("SpaceToDepth", 1, kMaxOpset, legalizeSpaceToDepth);
}
