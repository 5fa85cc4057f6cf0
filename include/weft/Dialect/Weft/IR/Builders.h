//===- Builders.h - Small weft op builders shared by passes -----*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Constants and scalings that autodiff, the optimizer and the partitioner
// all build (defined in lib/Dialect/Weft/IR/WeftGradientsUtils.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_BUILDERS_H
#define WEFT_DIALECT_WEFT_IR_BUILDERS_H

#include "weft/Dialect/Weft/IR/WeftOps.h"

namespace weft {
namespace grad {

/// A rank-0 constant; binary ops broadcast it against any shape.
mlir::Value scalar(mlir::OpBuilder &builder, mlir::Location loc,
                   mlir::Type elementType, double value);

/// A splat constant of `type` (cheap in the IR whatever its size).
mlir::Value splat(mlir::OpBuilder &builder, mlir::Location loc,
                  mlir::RankedTensorType type, double value);

/// `value * factor` with `factor` a rank-0 constant.
mlir::Value scale(mlir::OpBuilder &builder, mlir::Location loc,
                  mlir::Value value, double factor);

} // namespace grad
} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_BUILDERS_H
