//===- Evaluator.h - Reference evaluator for the weft dialect ---*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The oracle every later stage is checked against: a direct, unoptimized
// interpreter of weft ops. Floats are computed in double and each op's
// result is rounded to its element type (f32, bf16, f16; f64 stays exact),
// so the evaluator has the element type's semantics with float64
// accumulation inside every op.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_EVALUATOR_EVALUATOR_H
#define WEFT_EVALUATOR_EVALUATOR_H

#include "weft/Formats/HostArray.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace weft {
namespace eval {

/// A value during evaluation. Float element types keep their elements in
/// `fp` (already rounded to the element type); integer and i1 element types
/// keep them in `ints`, so 64-bit indices are exact.
struct Tensor {
  mlir::Type elementType;
  llvm::SmallVector<int64_t> shape;
  std::vector<double> fp;
  std::vector<int64_t> ints;

  bool isFloat() const { return mlir::isa<mlir::FloatType>(elementType); }
  int64_t numElements() const;
  mlir::RankedTensorType getType() const;

  /// Zero-filled tensor of `type`.
  static Tensor zeros(mlir::RankedTensorType type);
  /// Decodes a constant (dense or dense resource elements). The attribute
  /// must be decodable (see tryFromAttr); anything else is a fatal error.
  static Tensor fromAttr(mlir::ElementsAttr attr);
  /// Decodes a constant, or explains in `error` why it cannot (a dense
  /// resource whose blob was elided, a dynamic shape, an unsupported element
  /// type). A probe, not a diagnostic: folders ask it of every constant and
  /// most callers only want to know whether it can; the few that report
  /// put the explanation into their own diagnostic.
  static mlir::FailureOr<Tensor> tryFromAttr(mlir::ElementsAttr attr,
                                             std::string &error);
  /// Encodes as a DenseElementsAttr of getType().
  mlir::DenseElementsAttr toAttr() const;
  /// Converts a host array to `type`: the shape must match exactly; the
  /// element type may differ only by a lossless-enough conversion (any float
  /// to any float, any integer to any integer). Errors, at `loc`, name
  /// `what`.
  static mlir::FailureOr<Tensor> fromHostArray(const rt::HostArray &array,
                                               mlir::RankedTensorType type,
                                               llvm::StringRef what,
                                               mlir::Location loc);
  /// Converts to a host array of the same element type (f64 stays f64).
  rt::HostArray toHostArray() const;
};

/// Rounds `v` to the nearest value of `type`, ties to even, straight from
/// the double (no double rounding through f32), and widens it back. Values
/// beyond the largest finite value become infinities; NaN stays NaN.
double roundToFloat(mlir::FloatType type, double v);

/// Wraps `v` to the two's-complement range of `type` (i32 results wrap like
/// int32_t arithmetic); i1 keeps the low bit, so it is 0 or 1.
int64_t wrapToInteger(mlir::IntegerType type, int64_t v);

/// Evaluates a single weft op on operand values. On failure (an op the
/// evaluator does not know, an index out of range at run time) emits an
/// error on `op` and returns failure.
mlir::FailureOr<llvm::SmallVector<Tensor>>
evaluateOp(mlir::Operation *op, llvm::ArrayRef<Tensor> operands);

/// How deeply `func.call`s may nest: deeper is reported as an error (most
/// likely a recursive program) instead of growing without bound.
constexpr unsigned kMaxCallDepth = 256;

/// Evaluates `fn` (a single-block func.func of weft ops ending in
/// func.return) on `args`, which must match the function's argument types.
/// `func.call`s to functions of the same module are evaluated too, on an
/// explicit frame stack rather than by native recursion.
mlir::FailureOr<llvm::SmallVector<Tensor>>
evaluateFunction(mlir::func::FuncOp fn, llvm::ArrayRef<Tensor> args);

} // namespace eval
} // namespace weft

#endif // WEFT_EVALUATOR_EVALUATOR_H
