//===- RuntimeCalls.h - Generated code calling the runtime -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Lowerings that hand buffers to the runtime's C functions (collectives,
// the attention kernels) declare those functions and pass each buffer as a
// plain pointer; these are the two steps they share.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_RUNTIMECALLS_H
#define WEFT_DIALECT_WEFT_IR_RUNTIMECALLS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

namespace weft {

/// The module's private declaration of runtime function `name` of `type`,
/// created with `b` at the module's start when missing; null after an
/// error on `user` when the module declares `name` with another type.
mlir::func::FuncOp getOrDeclareRuntimeFunction(mlir::OpBuilder &b,
                                               mlir::ModuleOp module,
                                               mlir::Operation *user,
                                               llvm::StringRef name,
                                               mlir::FunctionType type);

/// An `!llvm.ptr` to the first element of `memref` (identity layout): how
/// a buffer reaches a C function.
mlir::Value pointerToBuffer(mlir::OpBuilder &b, mlir::Location loc,
                            mlir::Value memref);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_RUNTIMECALLS_H
