//===- Shape.cpp - ONNX shape ops to weft ---------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Ops that compute or change shapes: Shape, Size, Reshape, Flatten,
// Squeeze, Unsqueeze, Expand, Tile, ConstantOfShape and Range. Shapes are
// static, so Shape and Size are constants at once, and every shape-like
// input must be a constant by the time its consumer is legalized.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/CheckedArithmetic.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// Range builds its result as a constant; bigger ones are a mistake.
constexpr int64_t kMaxRangeElements = int64_t(1) << 24;

FailureOr<Value> i64Constant(LegalizeContext &ctx, ArrayRef<int64_t> shape,
                             ArrayRef<int64_t> values) {
  auto type = RankedTensorType::get(shape, ctx.builder.getI64Type());
  return ctx.constant(DenseElementsAttr::get(type, values));
}

LegalizeResult legalizeShape(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data"});
  if (failed(in))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(in->front());
  int64_t rank = shape.size(), start = 0, end = rank;
  if (failed(ctx.getInt("start", start)) || failed(ctx.getInt("end", end)))
    return failure();
  auto clamp = [&](int64_t i) {
    return std::clamp<int64_t>(i < 0 ? i + rank : i, 0, rank);
  };
  start = clamp(start);
  end = std::max(start, clamp(end));
  ArrayRef<int64_t> dims = shape.slice(start, end - start);
  return one(i64Constant(ctx, {static_cast<int64_t>(dims.size())}, dims));
}

LegalizeResult legalizeSize(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data"});
  if (failed(in))
    return failure();
  return one(i64Constant(ctx, {}, {product(shapeOf(in->front()))}));
}

/// A 0 copies the input's size at that position (unless allowzero), one -1
/// takes whatever size keeps the element count.
LegalizeResult legalizeReshape(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data"});
  int64_t allowZero = 0;
  if (failed(in) || failed(ctx.getInt("allowzero", allowZero)))
    return failure();
  FailureOr<SmallVector<int64_t>> requested = ctx.getConstInts(1, "shape");
  if (failed(requested))
    return failure();
  Value x = in->front();
  ArrayRef<int64_t> inShape = shapeOf(x);
  SmallVector<int64_t> shape;
  std::optional<size_t> inferred;
  for (auto [i, d] : llvm::enumerate(*requested)) {
    if (d == 0 && allowZero == 0) {
      if (i >= inShape.size())
        return ctx.emitError()
               << "shape " << formatList(*requested) << " copies dimension "
               << i << " (a 0), but the input " << formatShape(inShape)
               << " has rank " << inShape.size();
      shape.push_back(inShape[i]);
    } else if (d == -1 && !inferred) {
      inferred = i;
      shape.push_back(1);
    } else if (d < 0) {
      return ctx.emitError() << "shape " << formatList(*requested)
                             << " may hold one -1 and no other negative size";
    } else {
      shape.push_back(d);
    }
  }
  int64_t total = product(inShape), known = product(shape);
  if (inferred) {
    if (known == 0 || total % known != 0)
      return ctx.emitError() << "cannot reshape " << formatShape(inShape)
                             << " to " << formatList(*requested);
    shape[*inferred] = total / known;
  } else if (known != total) {
    return ctx.emitError() << "cannot reshape " << formatShape(inShape) << " ("
                           << total << " elements) to "
                           << formatList(*requested);
  }
  return one(ctx.reshape(x, shape));
}

LegalizeResult legalizeFlatten(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  int64_t axis = 1;
  if (failed(in) || failed(ctx.getInt("axis", axis)))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(in->front());
  int64_t rank = shape.size();
  // Flatten's axis may equal the rank (everything goes to the outer size).
  if (axis < -rank || axis > rank)
    return ctx.emitError() << "axis " << axis << " is out of range for rank "
                           << rank << " (expected " << -rank
                           << " <= axis <= " << rank << ")";
  if (axis < 0)
    axis += rank;
  return one(ctx.reshape(in->front(), {product(shape.take_front(axis)),
                                       product(shape.drop_front(axis))}));
}

/// Axes of Squeeze and Unsqueeze: an attribute before opset 13, an input
/// from 13 on.
LogicalResult getAxes(LegalizeContext &ctx, SmallVectorImpl<int64_t> &axes,
                      bool &present) {
  if (ctx.opset < 13) {
    present = ctx.hasAttr("axes");
    return ctx.getInts("axes", axes);
  }
  present = ctx.hasInput(1);
  if (!present)
    return success();
  FailureOr<SmallVector<int64_t>> given = ctx.getConstInts(1, "axes");
  if (failed(given))
    return failure();
  axes.assign(given->begin(), given->end());
  return success();
}

LegalizeResult legalizeSqueeze(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data"});
  SmallVector<int64_t> axes;
  bool present = false;
  if (failed(in) || failed(getAxes(ctx, axes, present)))
    return failure();
  ArrayRef<int64_t> shape = shapeOf(in->front());
  int64_t rank = shape.size();
  llvm::SmallBitVector squeezed(rank, !present);
  for (int64_t axis : axes) {
    FailureOr<int64_t> a = ctx.normalizeAxis(axis, rank, "axes entry");
    if (failed(a))
      return failure();
    if (shape[*a] != 1)
      return ctx.emitError()
             << "cannot squeeze axis " << axis << " of size " << shape[*a]
             << " (input shape " << formatShape(shape) << ")";
    squeezed.set(*a);
  }
  SmallVector<int64_t> result;
  for (int64_t i = 0; i < rank; ++i)
    if (!squeezed.test(i) || shape[i] != 1)
      result.push_back(shape[i]);
  return one(ctx.reshape(in->front(), result));
}

LegalizeResult legalizeUnsqueeze(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data"});
  SmallVector<int64_t> axes;
  bool present = false;
  if (failed(in) || failed(getAxes(ctx, axes, present)))
    return failure();
  if (!present)
    return ctx.emitError() << "needs axes";
  ArrayRef<int64_t> shape = shapeOf(in->front());
  int64_t outRank = shape.size() + axes.size();
  llvm::SmallBitVector inserted(outRank);
  for (int64_t axis : axes) {
    FailureOr<int64_t> a = ctx.normalizeAxis(axis, outRank, "axes entry");
    if (failed(a))
      return failure();
    if (inserted.test(*a))
      return ctx.emitError()
             << "axes " << formatList(axes) << " name an output axis twice";
    inserted.set(*a);
  }
  SmallVector<int64_t> result;
  const int64_t *next = shape.begin();
  for (int64_t i = 0; i < outRank; ++i)
    result.push_back(inserted.test(i) ? 1 : *next++);
  return one(ctx.reshape(in->front(), result));
}

/// Expand broadcasts both ways: `shape` may also be smaller than the input.
LegalizeResult legalizeExpand(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  if (failed(in))
    return failure();
  FailureOr<SmallVector<int64_t>> shape = ctx.getConstInts(1, "shape");
  if (failed(shape))
    return failure();
  Value x = in->front();
  std::optional<SmallVector<int64_t>> result =
      broadcastShapes(shapeOf(x), *shape);
  if (!result || llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
    return ctx.emitError() << "input shape " << formatShape(shapeOf(x))
                           << " does not broadcast with shape "
                           << formatList(*shape);
  return one(ctx.create<BroadcastOp>(
      {x}, {}, RankedTensorType::get(*result, elementTypeOf(x))));
}

/// Tile as a broadcast: [d0, d1] -> [1, d0, 1, d1] -> [r0, d0, r1, d1] ->
/// [r0 * d0, r1 * d1], which repeats whole copies along each axis.
LegalizeResult legalizeTile(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  if (failed(in))
    return failure();
  FailureOr<SmallVector<int64_t>> repeats = ctx.getConstInts(1, "repeats");
  if (failed(repeats))
    return failure();
  Value x = in->front();
  ArrayRef<int64_t> shape = shapeOf(x);
  if (repeats->size() != shape.size() ||
      llvm::any_of(*repeats, [](int64_t r) { return r < 0; }))
    return ctx.emitError() << "repeats " << formatList(*repeats)
                           << " must hold one non-negative count per axis of "
                           << formatShape(shape);
  if (llvm::all_of(*repeats, [](int64_t r) { return r == 1; }))
    return SmallVector<Value>{x};
  SmallVector<int64_t> spread, stretched, result;
  for (auto [d, r] : llvm::zip(shape, *repeats)) {
    spread.append({1, d});
    stretched.append({r, d});
    result.push_back(r * d);
  }
  FailureOr<Value> v = ctx.reshape(x, spread);
  if (failed(v) ||
      failed(v = ctx.create<BroadcastOp>(
                 {*v}, {}, RankedTensorType::get(stretched, elementTypeOf(x)))))
    return failure();
  return one(ctx.reshape(*v, result));
}

LegalizeResult legalizeConstantOfShape(LegalizeContext &ctx, OnnxNodeOp,
                                       ValueRange) {
  FailureOr<SmallVector<int64_t>> shape = ctx.getConstInts(0, "input");
  if (failed(shape))
    return failure();
  if (llvm::any_of(*shape, [](int64_t d) { return d < 0; }))
    return ctx.emitError() << "shape " << formatList(*shape)
                           << " has a negative size";
  Attribute element = ctx.builder.getF32FloatAttr(0);
  if (Attribute attr = ctx.getAttr("value")) {
    auto value = dyn_cast<DenseElementsAttr>(attr);
    if (!value || value.getNumElements() != 1)
      return ctx.emitError() << "attribute 'value' must be a one-element "
                                "tensor, got "
                             << attr;
    element = *value.value_begin<Attribute>();
  }
  Type elementType = cast<TypedAttr>(element).getType();
  return one(ctx.constant(DenseElementsAttr::get(
      RankedTensorType::get(*shape, elementType), element)));
}

/// Range of constant scalars is a constant: weft has no range op, and
/// PyTorch's arange over a static length is always constant.
LegalizeResult legalizeRange(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  StringRef names[3] = {"start", "limit", "delta"};
  ElementsAttr values[3];
  for (int i = 0; i < 3; ++i) {
    FailureOr<ElementsAttr> v = ctx.getConstant(i, names[i]);
    if (failed(v))
      return failure();
    if (v->getNumElements() != 1 ||
        (i > 0 && v->getElementType() != values[0].getElementType()))
      return ctx.emitError() << "inputs must be scalars of one element type";
    values[i] = *v;
  }
  Type element = values[0].getElementType();
  auto tooLarge = [&](double count) {
    return ctx.emitError() << "a range of " << count
                           << " elements is too large to build at compile "
                              "time (at most "
                           << kMaxRangeElements << ")";
  };
  if (auto intType = dyn_cast<IntegerType>(element);
      intType && !intType.isInteger(1)) {
    int64_t v[3];
    for (int i = 0; i < 3; ++i) {
      FailureOr<SmallVector<int64_t>> ints = getIntValues(values[i]);
      if (failed(ints))
        return ctx.emitError() << "input " << i << " (" << names[i]
                               << ") is a constant whose encoding cannot be "
                                  "read";
      v[i] = ints->front();
    }
    int64_t start = v[0], limit = v[1], delta = v[2];
    if (delta == 0)
      return ctx.emitError() << "input 2 (delta) must not be zero";
    // ceil((limit - start) / delta) without overflowing on extreme bounds.
    std::optional<int64_t> span = llvm::checkedSub(limit, start);
    if (!span)
      return tooLarge(std::fabs(
          (static_cast<double>(limit) - static_cast<double>(start)) / delta));
    int64_t count = *span / delta;
    if (*span % delta != 0 && (*span < 0) == (delta < 0))
      ++count;
    count = std::max<int64_t>(count, 0);
    if (count > kMaxRangeElements)
      return tooLarge(static_cast<double>(count));
    SmallVector<APInt> elements;
    for (int64_t i = 0; i < count; ++i)
      elements.push_back(APInt(intType.getWidth(), start + i * delta, true));
    return one(ctx.constant(DenseElementsAttr::get(
        RankedTensorType::get({count}, element), elements)));
  }
  auto floatType = dyn_cast<FloatType>(element);
  if (!floatType)
    return ctx.emitError() << "inputs must be integers or floats, got "
                           << element;
  double v[3];
  for (int i = 0; i < 3; ++i) {
    FailureOr<SmallVector<double>> floats = getFloatValues(values[i]);
    if (failed(floats))
      return ctx.emitError() << "input " << i << " (" << names[i]
                             << ") is a constant whose encoding cannot be "
                                "read";
    v[i] = floats->front();
  }
  double start = v[0], limit = v[1], delta = v[2];
  if (delta == 0)
    return ctx.emitError() << "input 2 (delta) must not be zero";
  double steps = std::max(0.0, std::ceil((limit - start) / delta));
  if (!std::isfinite(steps))
    return ctx.emitError() << "inputs must be finite";
  if (steps > static_cast<double>(kMaxRangeElements))
    return tooLarge(steps);
  int64_t count = static_cast<int64_t>(steps);
  SmallVector<Attribute> elements;
  for (int64_t i = 0; i < count; ++i)
    elements.push_back(FloatAttr::get(floatType, start + i * delta));
  return one(ctx.constant(DenseElementsAttr::get(
      RankedTensorType::get({count}, element), elements)));
}

} // namespace

void weft::onnxtoweft::populateShapeLegalizers(LegalizerRegistry &registry) {
  registry.add("Shape", 1, kMaxOpset, legalizeShape);
  registry.add("Size", 1, kMaxOpset, legalizeSize);
  registry.add("Reshape", 5, kMaxOpset, legalizeReshape);
  registry.add("Flatten", 1, kMaxOpset, legalizeFlatten);
  registry.add("Squeeze", 1, kMaxOpset, legalizeSqueeze);
  registry.add("Unsqueeze", 1, kMaxOpset, legalizeUnsqueeze);
  registry.add("Expand", 8, kMaxOpset, legalizeExpand);
  registry.add("Tile", 6, kMaxOpset, legalizeTile);
  registry.add("ConstantOfShape", 9, kMaxOpset, legalizeConstantOfShape);
  registry.add("Range", 11, kMaxOpset, legalizeRange);
}
