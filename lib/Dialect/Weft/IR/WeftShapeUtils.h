//===- WeftShapeUtils.h - Shape checks shared by weft ops -------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Shape inference helpers used by both the forward ops (WeftOps.cpp) and the
// backward ops that invert them (WeftBackwardOps.cpp), so that an adjoint is
// checked with exactly the window arithmetic of its forward op. Not
// installed: nothing outside lib/Dialect/Weft/IR includes it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_DIALECT_WEFT_IR_WEFTSHAPEUTILS_H
#define WEFT_LIB_DIALECT_WEFT_IR_WEFTSHAPEUTILS_H

#include "weft/Dialect/Weft/IR/WeftOps.h"

namespace weft {
namespace detail {

/// The type of `v` as a ranked tensor, or null after an error at `loc` that
/// names the operand `what`. Operand types are checked by ODS constraints
/// only after inference may already have run (builders, parsers), so
/// inference re-checks rankedness.
mlir::RankedTensorType getRanked(std::optional<mlir::Location> loc,
                                 mlir::Value v, llvm::StringRef what);

/// Whether `v` is a ranked tensor of shape `expected`; else failure after an
/// error at `loc` naming the operand `what` and both shapes.
mlir::LogicalResult expectShape(std::optional<mlir::Location> loc,
                                mlir::Value v, llvm::StringRef what,
                                llvm::ArrayRef<int64_t> expected);

/// The shape of gathering `indices` from an `input`-shaped tensor along
/// `axis` (which must be in range): input[:axis] + indices + input[axis+1:].
llvm::SmallVector<int64_t> gatherShape(llvm::ArrayRef<int64_t> input,
                                       llvm::ArrayRef<int64_t> indices,
                                       int64_t axis);

/// Checks the per-axis parameters of a 2-D window (conv or pool) over the
/// spatial sizes `in` and appends the spatial output sizes to `out`.
/// `padding` is `[top, left, bottom, right]`. With `checkWindow` the window
/// sizes are checked too (two sizes >= 1) and the diagnostics name them;
/// forward ops leave that off, having checked their window already.
mlir::LogicalResult
inferWindow(std::optional<mlir::Location> loc, llvm::ArrayRef<int64_t> in,
            llvm::ArrayRef<int64_t> window, llvm::ArrayRef<int64_t> strides,
            llvm::ArrayRef<int64_t> padding, llvm::ArrayRef<int64_t> dilations,
            llvm::SmallVectorImpl<int64_t> &out, bool checkWindow = false);

/// The NCHW shape of pooling an NCHW `input` by a `kernel` window, appended
/// to `out`: checks that each padding is smaller than the kernel, then
/// infers the window with dilations 1 (see inferWindow for `checkWindow`).
mlir::LogicalResult
inferPoolShape(std::optional<mlir::Location> loc, llvm::ArrayRef<int64_t> input,
               llvm::ArrayRef<int64_t> kernel, llvm::ArrayRef<int64_t> strides,
               llvm::ArrayRef<int64_t> padding,
               llvm::SmallVectorImpl<int64_t> &out, bool checkWindow = false);

} // namespace detail
} // namespace weft

#endif // WEFT_LIB_DIALECT_WEFT_IR_WEFTSHAPEUTILS_H
