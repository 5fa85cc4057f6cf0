//===- Lowerings.h - weft -> linalg patterns and shared helpers -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Internal to --weft-lower-to-linalg: each op family adds its conversion
// patterns from its own file; the helpers here build the linalg.generic
// nests, reshapes and scalar arithmetic the families share.
//
// Numerics follow the reference evaluator: floats are computed in their own
// type except bf16 and f16, which are computed in f32 inside the region and
// rounded once on the way out ("compute wide, round to the element type");
// reductions and matmuls accumulate in that compute type.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_CONVERSION_WEFTTOLINALG_LOWERINGS_H
#define WEFT_LIB_CONVERSION_WEFTTOLINALG_LOWERINGS_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Transforms/DialectConversion.h"

namespace weft {
namespace lowering {

/// Builds the scalar body of a linalg.generic from its block arguments
/// (inputs, then outputs) and returns the values to yield.
using BodyFn = llvm::function_ref<llvm::SmallVector<mlir::Value>(
    mlir::OpBuilder &, mlir::Location, mlir::ValueRange)>;

//===----------------------------------------------------------------------===//
// Scalars
//===----------------------------------------------------------------------===//

/// The type arithmetic on `elementType` happens in: f32 for bf16 and f16,
/// the type itself otherwise.
mlir::Type computeType(mlir::Type elementType);

/// Extends a bf16/f16 scalar to f32; other values pass through.
mlir::Value toCompute(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v);

/// Rounds a compute-type scalar to `elementType` (truncf when narrower).
mlir::Value fromCompute(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                        mlir::Type elementType);

/// A scalar float or integer constant of `type`; floats are rounded to the
/// type to nearest even.
mlir::Value scalarConstant(mlir::OpBuilder &b, mlir::Location loc,
                           mlir::Type type, double value);

/// An `index` constant.
mlir::Value indexConstant(mlir::OpBuilder &b, mlir::Location loc,
                          int64_t value);

/// Converts one scalar with weft.cast's semantics (see Cast.cpp).
mlir::Value castScalar(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                       mlir::Type to);

//===----------------------------------------------------------------------===//
// Tensors
//===----------------------------------------------------------------------===//

/// `tensor.empty` of a static shape.
mlir::Value emptyTensor(mlir::OpBuilder &b, mlir::Location loc,
                        llvm::ArrayRef<int64_t> shape, mlir::Type elementType);

/// A tensor of `shape` filled with `value` (linalg.fill of tensor.empty).
mlir::Value filledTensor(mlir::OpBuilder &b, mlir::Location loc,
                         llvm::ArrayRef<int64_t> shape, mlir::Type elementType,
                         double value);

/// Same elements in `shape`: one collapse_shape or expand_shape when the
/// shapes are related by one, else a collapse to 1-D and an expand.
mlir::Value reshapeTo(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                      llvm::ArrayRef<int64_t> shape);

/// Pads `v` with `value`: `low[d]` cells first, `interior[d]` between
/// consecutive elements, `high[d]` last. Negative low/high crop instead.
/// tensor.pad when there is no interior padding and nothing to crop, else a
/// filled tensor with a strided tensor.insert_slice.
mlir::Value padTensor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                      llvm::ArrayRef<int64_t> low, llvm::ArrayRef<int64_t> high,
                      llvm::ArrayRef<int64_t> interior, double value);

/// Pads the spatial axes of an NCHW tensor with `value` by `padding` =
/// [top, left, bottom, right] (padTensor on the last two axes).
mlir::Value padSpatial(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                       llvm::ArrayRef<int64_t> padding, double value);

/// Applies `f` to every element of a tensor of compute-type or other
/// scalars, producing a tensor of `elementType` with the same shape.
mlir::Value
mapTensor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
          mlir::Type elementType,
          llvm::function_ref<mlir::Value(mlir::OpBuilder &, mlir::Location,
                                         mlir::Value)>
              f);

/// Rounds a tensor of compute-type accumulators to `elementType` (an
/// elementwise truncf); returns `v` when the types already agree.
mlir::Value roundTensor(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v,
                        mlir::Type elementType);

//===----------------------------------------------------------------------===//
// linalg.generic builders
//===----------------------------------------------------------------------===//

/// Map reading a tensor of `sourceShape` inside a loop nest over
/// `resultShape` with numpy broadcasting: shapes aligned from the right,
/// size-1 axes that stretch read at index 0.
mlir::AffineMap broadcastMap(mlir::MLIRContext *ctx,
                             llvm::ArrayRef<int64_t> sourceShape,
                             llvm::ArrayRef<int64_t> resultShape);

/// Map over `rank` loops that keeps only the loops not in `dropped`.
mlir::AffineMap projectionMap(mlir::MLIRContext *ctx, unsigned rank,
                              llvm::ArrayRef<int64_t> dropped);

/// All-parallel linalg.generic producing one tensor of `resultType` from
/// `inputs` read through `maps` (one per input). `body` gets the input
/// scalars (and the unused output scalar last) and returns the result.
mlir::Value buildParallel(mlir::OpBuilder &b, mlir::Location loc,
                          mlir::RankedTensorType resultType,
                          mlir::ValueRange inputs,
                          llvm::ArrayRef<mlir::AffineMap> maps, BodyFn body);

/// buildParallel with numpy broadcasting maps for every input.
mlir::Value buildElementwise(mlir::OpBuilder &b, mlir::Location loc,
                             mlir::RankedTensorType resultType,
                             mlir::ValueRange inputs, BodyFn body);

/// A linalg.generic over the loops of `loopShape` that reduces the loops in
/// `axes` (sorted) into accumulators of the kept loops. `inputs` are read
/// through `inputMaps`; accumulator `i` has element type `accTypes[i]` and
/// starts at `inits[i]`. `body` gets the input scalars then the accumulators
/// and returns the new accumulators.
llvm::SmallVector<mlir::Value>
buildReduction(mlir::OpBuilder &b, mlir::Location loc,
               llvm::ArrayRef<int64_t> loopShape, llvm::ArrayRef<int64_t> axes,
               mlir::ValueRange inputs,
               llvm::ArrayRef<mlir::AffineMap> inputMaps,
               llvm::ArrayRef<mlir::Type> accTypes,
               llvm::ArrayRef<double> inits, BodyFn body);

/// `loopShape` without the axes in `axes` (sorted).
llvm::SmallVector<int64_t> keptShape(llvm::ArrayRef<int64_t> loopShape,
                                     llvm::ArrayRef<int64_t> axes);

//===----------------------------------------------------------------------===//
// Pattern registration, one function per op family
//===----------------------------------------------------------------------===//

void populateElementwisePatterns(mlir::RewritePatternSet &patterns);
void populateCastPatterns(mlir::RewritePatternSet &patterns);
void populateReductionPatterns(mlir::RewritePatternSet &patterns);
void populateMatMulPatterns(mlir::RewritePatternSet &patterns);
void populateConvolutionPatterns(mlir::RewritePatternSet &patterns);
void populatePoolingPatterns(mlir::RewritePatternSet &patterns);
void populateDataMovementPatterns(mlir::RewritePatternSet &patterns);
void populateSelectionPatterns(mlir::RewritePatternSet &patterns);
void populateRecurrentPatterns(mlir::RewritePatternSet &patterns);
void populateAttentionPatterns(mlir::RewritePatternSet &patterns);

} // namespace lowering
} // namespace weft

#endif // WEFT_LIB_CONVERSION_WEFTTOLINALG_LOWERINGS_H
