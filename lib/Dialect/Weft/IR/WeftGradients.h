//===- WeftGradients.h - Helpers shared by the gradient rules ---*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The reverse-mode rules of the weft ops live in WeftGradients*.cpp, one file
// per op family. They share the broadcast reduction, the small constants and
// the shape plumbing declared here. Not installed: passes drive the rules
// through weft::GradientOpInterface only.
//
// Conventions of every rule: it builds at the builder's insertion point with
// the op's location; it pushes exactly one entry per operand, null where no
// gradient flows (integer and i1 operands, masks, indices); a rule that
// cannot build its adjoint reports why on the op before failing.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_DIALECT_WEFT_IR_WEFTGRADIENTS_H
#define WEFT_LIB_DIALECT_WEFT_IR_WEFTGRADIENTS_H

#include "weft/Dialect/Weft/IR/Builders.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

namespace weft {

/// The adjoint of an implicit numpy broadcast: sums `grad` over the leading
/// axes `target` lacks and over the axes where `target` has size 1 but
/// `grad` does not, then reshapes to `target`. Returns `grad` unchanged when
/// the shapes already agree.
mlir::Value reduceToShape(mlir::OpBuilder &builder, mlir::Location loc,
                          mlir::Value grad, mlir::RankedTensorType target);

namespace grad {

/// The ranked tensor type of `value`.
mlir::RankedTensorType typeOf(mlir::Value value);

/// Handles the case every rule shares: when the result gradient is null or
/// the result is not differentiable, fills `operandGrads` with nulls for all
/// operands of `op` and returns true.
bool noGradientFlows(mlir::Operation *op, mlir::ValueRange resultGrads,
                     llvm::SmallVectorImpl<mlir::Value> &operandGrads);

/// `grad` for operands that carry gradients, null for the others.
mlir::Value ifDifferentiable(mlir::Value operand, mlir::Value grad);

/// `value` reshaped to `shape` (no op when the shape is unchanged).
mlir::Value reshape(mlir::OpBuilder &builder, mlir::Location loc,
                    mlir::Value value, llvm::ArrayRef<int64_t> shape);

/// `value` broadcast to `shape` (no op when the shape is unchanged).
mlir::Value broadcastTo(mlir::OpBuilder &builder, mlir::Location loc,
                        mlir::Value value, llvm::ArrayRef<int64_t> shape);

/// `shape` with each of `axes` set to 1: the keep_dims shape of a reduction.
llvm::SmallVector<int64_t> keptShape(llvm::ArrayRef<int64_t> shape,
                                     llvm::ArrayRef<int64_t> axes);

/// The adjoint of a reduction over `axes` of a `input`-typed value: `grad`
/// (shaped like the reduction result, with or without kept axes) reshaped to
/// the kept shape and broadcast back over `input`'s shape.
mlir::Value unreduce(mlir::OpBuilder &builder, mlir::Location loc,
                     mlir::Value grad, mlir::RankedTensorType input,
                     llvm::ArrayRef<int64_t> axes);

} // namespace grad
} // namespace weft

#endif // WEFT_LIB_DIALECT_WEFT_IR_WEFTGRADIENTS_H
