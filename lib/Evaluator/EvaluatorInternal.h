//===- EvaluatorInternal.h - Helpers shared by op evaluators ----*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The evaluator is split by op family (elementwise, reductions, linear
// algebra and windows, data movement); this header holds the index
// arithmetic they share and the per-family entry points Evaluator.cpp
// dispatches to. Not installed: nothing outside lib/Evaluator includes it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_EVALUATOR_EVALUATORINTERNAL_H
#define WEFT_LIB_EVALUATOR_EVALUATORINTERNAL_H

#include "weft/Evaluator/Evaluator.h"

#include "mlir/IR/Operation.h"

#include <cmath>
#include <optional>

namespace weft {
namespace eval {
namespace detail {

/// Product of `shape` (1 for rank 0).
int64_t product(llvm::ArrayRef<int64_t> shape);

/// Row-major strides of `shape`.
llvm::SmallVector<int64_t> stridesOf(llvm::ArrayRef<int64_t> shape);

/// For every element of `shape` in row-major order, the flat source offset
/// `base + sum_d index[d] * strides[d]`. Transpose, slice, broadcast and
/// reductions are all this with different strides, so the odometer that
/// walks the indices is written once.
std::vector<int64_t> stridedOffsets(llvm::ArrayRef<int64_t> shape,
                                    llvm::ArrayRef<int64_t> strides,
                                    int64_t base = 0);

/// A tensor seen as [outer, size, inner] around one axis: element (o, k, i)
/// is at `(o * size + k) * inner + i`.
struct AxisView {
  int64_t outer, size, inner;
  AxisView(llvm::ArrayRef<int64_t> shape, int64_t axis)
      : outer(product(shape.take_front(axis))), size(shape[axis]),
        inner(product(shape.drop_front(axis + 1))) {}
};

/// Source offsets of `source` (right-aligned against `result`, size-1 axes
/// stretched) for every element of `result`.
std::vector<int64_t> broadcastOffsets(llvm::ArrayRef<int64_t> result,
                                      llvm::ArrayRef<int64_t> source);

/// A tensor of `type` whose element `i` is `source`'s element `offsets[i]`.
Tensor takeElements(const Tensor &source, mlir::RankedTensorType type,
                    llvm::ArrayRef<int64_t> offsets);

/// Rounds `v` to a binary format with `mantissaBits` stored mantissa bits,
/// smallest normal exponent `minExponent` and largest finite value
/// `maxFinite`, ties to even.
double roundNarrow(double v, int mantissaBits, int minExponent,
                   double maxFinite);

/// Rounds doubles to one element type. Element loops call it per element, so
/// the type dispatch happens once, in the constructor.
class Rounder {
public:
  explicit Rounder(mlir::Type elementType);
  double operator()(double v) const {
    switch (kind) {
    case Kind::F64:
      return v;
    case Kind::F32:
      return static_cast<double>(static_cast<float>(v));
    case Kind::BF16:
      return roundNarrow(v, 7, -126, 0x1.fep+127);
    case Kind::F16:
      return roundNarrow(v, 10, -14, 0x1.ffcp+15);
    case Kind::Other:
      return roundToFloat(type, v);
    }
    return v;
  }

private:
  enum class Kind { F64, F32, BF16, F16, Other };
  Kind kind = Kind::F64;
  mlir::FloatType type;
};

/// Wraps int64 results to one integer element type, hoisting the width test
/// out of element loops like Rounder.
class Wrapper {
public:
  explicit Wrapper(mlir::Type elementType);
  int64_t operator()(int64_t v) const {
    return width >= 64 ? v : wrapToInteger(type, v);
  }

private:
  mlir::IntegerType type;
  unsigned width = 64;
};

/// The sticky-NaN maximum of PyTorch's max, amax and max_pool2d.
inline double nanMax(double acc, double x) {
  return (std::isnan(x) || x > acc) ? x : acc;
}

/// The zero-filled result tensor for result `index` of `op`.
Tensor resultFor(mlir::Operation *op, unsigned index = 0);

/// Each family evaluates the ops it knows into `result` and returns
/// std::nullopt for any other op, so Evaluator.cpp can try them in turn.
/// A failure has already been reported on the op.
std::optional<mlir::LogicalResult>
evaluateElementwiseOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                      Tensor &result);
std::optional<mlir::LogicalResult>
evaluateReductionOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                    Tensor &result);
std::optional<mlir::LogicalResult>
evaluateLinalgOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                 Tensor &result);
std::optional<mlir::LogicalResult>
evaluateDataMovementOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                       Tensor &result);
std::optional<mlir::LogicalResult>
evaluateGradientOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands,
                   Tensor &result);

} // namespace detail
} // namespace eval
} // namespace weft

#endif // WEFT_LIB_EVALUATOR_EVALUATORINTERNAL_H
