//===- Utils.cpp - Helpers shared by the weft -> linalg patterns ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/ReshapeOpsUtils.h"

using namespace mlir;
using namespace weft;
using namespace weft::lowering;

//===----------------------------------------------------------------------===//
// Scalars
//===----------------------------------------------------------------------===//

Type lowering::computeType(Type elementType) {
  if (isa<BFloat16Type, Float16Type>(elementType))
    return Float32Type::get(elementType.getContext());
  return elementType;
}

Value lowering::toCompute(OpBuilder &b, Location loc, Value v) {
  Type wide = computeType(v.getType());
  if (wide == v.getType())
    return v;
  return arith::ExtFOp::create(b, loc, wide, v);
}

Value lowering::fromCompute(OpBuilder &b, Location loc, Value v,
                            Type elementType) {
  if (v.getType() == elementType)
    return v;
  return arith::TruncFOp::create(b, loc, elementType, v);
}

Value lowering::scalarConstant(OpBuilder &b, Location loc, Type type,
                               double value) {
  if (auto ft = dyn_cast<FloatType>(type))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(ft, value));
  if (type.isIndex())
    return indexConstant(b, loc, static_cast<int64_t>(value));
  auto it = cast<IntegerType>(type);
  if (it.getWidth() == 1)
    return arith::ConstantOp::create(b, loc, b.getBoolAttr(value != 0));
  return arith::ConstantOp::create(
      b, loc, b.getIntegerAttr(it, static_cast<int64_t>(value)));
}

Value lowering::indexConstant(OpBuilder &b, Location loc, int64_t value) {
  return arith::ConstantIndexOp::create(b, loc, value);
}

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

Value lowering::emptyTensor(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                            Type elementType) {
  return tensor::EmptyOp::create(b, loc, shape, elementType);
}

Value lowering::filledTensor(OpBuilder &b, Location loc,
                             ArrayRef<int64_t> shape, Type elementType,
                             double value) {
  Value init = emptyTensor(b, loc, shape, elementType);
  Value scalar = scalarConstant(b, loc, elementType, value);
  return linalg::FillOp::create(b, loc, ValueRange{scalar}, ValueRange{init})
      .getResult(0);
}

Value lowering::reshapeTo(OpBuilder &b, Location loc, Value v,
                          ArrayRef<int64_t> shape) {
  auto type = cast<RankedTensorType>(v.getType());
  if (type.getShape() == shape)
    return v;
  auto target = RankedTensorType::get(shape, type.getElementType());
  // A rank-0 side reassociates nothing: every other axis has size 1.
  if (target.getRank() == 0)
    return tensor::CollapseShapeOp::create(b, loc, target, v,
                                           ArrayRef<ReassociationIndices>{});
  if (type.getRank() == 0)
    return tensor::ExpandShapeOp::create(b, loc, target, v,
                                         ArrayRef<ReassociationIndices>{});
  if (type.getRank() > target.getRank()) {
    if (auto groups =
            getReassociationIndicesForCollapse(type.getShape(), shape))
      return tensor::CollapseShapeOp::create(b, loc, target, v, *groups);
  } else if (type.getRank() < target.getRank()) {
    if (auto groups =
            getReassociationIndicesForCollapse(shape, type.getShape()))
      return tensor::ExpandShapeOp::create(b, loc, target, v, *groups);
  }
  // No single reshape relates the shapes: go through 1-D.
  Value flat = v;
  if (type.getRank() != 1) {
    ReassociationIndices all =
        llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
    flat = tensor::CollapseShapeOp::create(
        b, loc,
        RankedTensorType::get({type.getNumElements()}, type.getElementType()),
        v, ArrayRef<ReassociationIndices>{all});
  }
  if (target.getRank() == 1)
    return flat;
  ReassociationIndices all =
      llvm::to_vector(llvm::seq<int64_t>(0, target.getRank()));
  return tensor::ExpandShapeOp::create(b, loc, target, flat,
                                       ArrayRef<ReassociationIndices>{all});
}

Value lowering::padTensor(OpBuilder &b, Location loc, Value v,
                          ArrayRef<int64_t> low, ArrayRef<int64_t> high,
                          ArrayRef<int64_t> interior, double value) {
  auto type = cast<RankedTensorType>(v.getType());
  Type elementType = type.getElementType();
  int64_t rank = type.getRank();
  bool simple = llvm::all_of(interior, [](int64_t i) { return i == 0; }) &&
                llvm::all_of(low, [](int64_t l) { return l >= 0; }) &&
                llvm::all_of(high, [](int64_t h) { return h >= 0; });
  if (simple) {
    if (llvm::all_of(low, [](int64_t l) { return l == 0; }) &&
        llvm::all_of(high, [](int64_t h) { return h == 0; }))
      return v;
    SmallVector<int64_t> shape;
    SmallVector<OpFoldResult> lo, hi;
    for (int64_t d = 0; d < rank; ++d) {
      shape.push_back(type.getDimSize(d) + low[d] + high[d]);
      lo.push_back(b.getIndexAttr(low[d]));
      hi.push_back(b.getIndexAttr(high[d]));
    }
    Value padValue = scalarConstant(b, loc, elementType, value);
    return tensor::PadOp::create(
        b, loc, RankedTensorType::get(shape, elementType), v, lo, hi, padValue);
  }
  // Input element i lands at max(low, 0) + i * (interior + 1) of a tensor
  // padded by the non-negative parts; negative parts are cropped after.
  SmallVector<int64_t> full;
  SmallVector<OpFoldResult> offsets, sizes, strides, cropOffsets, cropSizes,
      unitStrides;
  bool crop = false;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t n = type.getDimSize(d);
    int64_t spread = n == 0 ? 0 : (n - 1) * (interior[d] + 1) + 1;
    full.push_back(std::max<int64_t>(low[d], 0) + spread +
                   std::max<int64_t>(high[d], 0));
    offsets.push_back(b.getIndexAttr(std::max<int64_t>(low[d], 0)));
    sizes.push_back(b.getIndexAttr(n));
    strides.push_back(b.getIndexAttr(interior[d] + 1));
    crop |= low[d] < 0 || high[d] < 0;
    cropOffsets.push_back(b.getIndexAttr(std::max<int64_t>(-low[d], 0)));
    cropSizes.push_back(b.getIndexAttr(low[d] + spread + high[d]));
    unitStrides.push_back(b.getIndexAttr(1));
  }
  Value filled = filledTensor(b, loc, full, elementType, value);
  Value result =
      tensor::InsertSliceOp::create(b, loc, v, filled, offsets, sizes, strides);
  if (!crop)
    return result;
  return tensor::ExtractSliceOp::create(b, loc, result, cropOffsets, cropSizes,
                                        unitStrides);
}

Value lowering::padSpatial(OpBuilder &b, Location loc, Value v,
                           ArrayRef<int64_t> padding, double value) {
  return padTensor(b, loc, v, {0, 0, padding[0], padding[1]},
                   {0, 0, padding[2], padding[3]}, {0, 0, 0, 0}, value);
}

Value lowering::mapTensor(OpBuilder &b, Location loc, Value v, Type elementType,
                          function_ref<Value(OpBuilder &, Location, Value)> f) {
  auto type = cast<RankedTensorType>(v.getType());
  auto resultType = RankedTensorType::get(type.getShape(), elementType);
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  return buildParallel(
      b, loc, resultType, v, id,
      [&](OpBuilder &nb, Location nl, ValueRange args) -> SmallVector<Value> {
        return {f(nb, nl, args[0])};
      });
}

Value lowering::roundTensor(OpBuilder &b, Location loc, Value v,
                            Type elementType) {
  if (cast<RankedTensorType>(v.getType()).getElementType() == elementType)
    return v;
  return mapTensor(b, loc, v, elementType,
                   [&](OpBuilder &nb, Location nl, Value x) {
                     return fromCompute(nb, nl, x, elementType);
                   });
}

//===----------------------------------------------------------------------===//
// linalg.generic builders
//===----------------------------------------------------------------------===//

AffineMap lowering::broadcastMap(MLIRContext *ctx,
                                 ArrayRef<int64_t> sourceShape,
                                 ArrayRef<int64_t> resultShape) {
  unsigned lead = resultShape.size() - sourceShape.size();
  SmallVector<AffineExpr> exprs;
  for (auto [i, size] : llvm::enumerate(sourceShape)) {
    if (size == 1 && resultShape[lead + i] != 1)
      exprs.push_back(getAffineConstantExpr(0, ctx));
    else
      exprs.push_back(getAffineDimExpr(lead + i, ctx));
  }
  return AffineMap::get(resultShape.size(), 0, exprs, ctx);
}

AffineMap lowering::projectionMap(MLIRContext *ctx, unsigned rank,
                                  ArrayRef<int64_t> dropped) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d = 0; d < rank; ++d)
    if (!llvm::is_contained(dropped, static_cast<int64_t>(d)))
      exprs.push_back(getAffineDimExpr(d, ctx));
  return AffineMap::get(rank, 0, exprs, ctx);
}

SmallVector<int64_t> lowering::keptShape(ArrayRef<int64_t> loopShape,
                                         ArrayRef<int64_t> axes) {
  SmallVector<int64_t> kept;
  for (auto [d, size] : llvm::enumerate(loopShape))
    if (!llvm::is_contained(axes, static_cast<int64_t>(d)))
      kept.push_back(size);
  return kept;
}

/// Creates the generic and its body, yielding what `body` returns.
static linalg::GenericOp
createGeneric(OpBuilder &b, Location loc, TypeRange resultTypes,
              ValueRange inputs, ValueRange outputs, ArrayRef<AffineMap> maps,
              ArrayRef<utils::IteratorType> iterators, BodyFn body) {
  return linalg::GenericOp::create(
      b, loc, resultTypes, inputs, outputs, maps, iterators,
      [&](OpBuilder &nb, Location nl, ValueRange args) {
        SmallVector<Value> results = body(nb, nl, args);
        linalg::YieldOp::create(nb, nl, results);
      });
}

Value lowering::buildParallel(OpBuilder &b, Location loc,
                              RankedTensorType resultType, ValueRange inputs,
                              ArrayRef<AffineMap> maps, BodyFn body) {
  Value init =
      emptyTensor(b, loc, resultType.getShape(), resultType.getElementType());
  SmallVector<AffineMap> all(maps);
  all.push_back(b.getMultiDimIdentityMap(resultType.getRank()));
  SmallVector<utils::IteratorType> iterators(resultType.getRank(),
                                             utils::IteratorType::parallel);
  return createGeneric(b, loc, resultType, inputs, init, all, iterators, body)
      .getResult(0);
}

Value lowering::buildElementwise(OpBuilder &b, Location loc,
                                 RankedTensorType resultType, ValueRange inputs,
                                 BodyFn body) {
  SmallVector<AffineMap> maps;
  for (Value input : inputs)
    maps.push_back(broadcastMap(
        b.getContext(), cast<RankedTensorType>(input.getType()).getShape(),
        resultType.getShape()));
  return buildParallel(b, loc, resultType, inputs, maps, body);
}

SmallVector<Value> lowering::buildReduction(
    OpBuilder &b, Location loc, ArrayRef<int64_t> loopShape,
    ArrayRef<int64_t> axes, ValueRange inputs, ArrayRef<AffineMap> inputMaps,
    ArrayRef<Type> accTypes, ArrayRef<double> inits, BodyFn body) {
  unsigned rank = loopShape.size();
  SmallVector<int64_t> kept = keptShape(loopShape, axes);
  AffineMap outMap = projectionMap(b.getContext(), rank, axes);
  SmallVector<Value> outputs;
  SmallVector<Type> resultTypes;
  SmallVector<AffineMap> maps(inputMaps);
  for (auto [type, init] : llvm::zip_equal(accTypes, inits)) {
    outputs.push_back(filledTensor(b, loc, kept, type, init));
    resultTypes.push_back(RankedTensorType::get(kept, type));
    maps.push_back(outMap);
  }
  SmallVector<utils::IteratorType> iterators(rank,
                                             utils::IteratorType::parallel);
  for (int64_t axis : axes)
    iterators[axis] = utils::IteratorType::reduction;
  linalg::GenericOp op = createGeneric(b, loc, resultTypes, inputs, outputs,
                                       maps, iterators, body);
  return SmallVector<Value>(op.getResults());
}
