//===- DeduplicateFunctions.h - One function per distinct body --*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_CODEGEN_DEDUPLICATEFUNCTIONS_H
#define WEFT_LIB_CODEGEN_DEDUPLICATEFUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace weft {

/// Equal functions among `functions` (same signature and body, whatever
/// their names) become the first of them: calls inside `scope` to the
/// others call it instead, and the others are erased from `symbols`. The
/// layers of a model repeat, so outlined kernels (and merged kernels' row
/// functions) repeat too, and LLVM then compiles each body once.
void deduplicateFunctions(mlir::Operation *scope,
                          llvm::ArrayRef<mlir::func::FuncOp> functions,
                          mlir::SymbolTable &symbols);

} // namespace weft

#endif // WEFT_LIB_CODEGEN_DEDUPLICATEFUNCTIONS_H
