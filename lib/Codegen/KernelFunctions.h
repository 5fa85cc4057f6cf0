//===- KernelFunctions.h - Kernels outlined as functions ---*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_CODEGEN_KERNELFUNCTIONS_H
#define WEFT_LIB_CODEGEN_KERNELFUNCTIONS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"

namespace weft {

/// A function just outlined from a kernel (--weft-outline-kernels) or from
/// merged kernels' rows (--weft-merge-sibling-kernels): added to `symbols`,
/// private and never inlined back, and taking bare pointers when every
/// buffer it takes is plain (static, identity layout): a strided view
/// needs the full memref descriptor.
void finishKernelFunction(mlir::func::FuncOp function,
                          mlir::SymbolTable &symbols);

/// Equal functions among `functions` (same signature and body, whatever
/// their names) become the first of them: calls inside `scope` to the
/// others call it instead, and the others are erased from `symbols`. The
/// layers of a model repeat, so outlined kernels (and merged kernels' row
/// functions) repeat too, and LLVM then compiles each body once.
void deduplicateFunctions(mlir::Operation *scope,
                          llvm::ArrayRef<mlir::func::FuncOp> functions,
                          mlir::SymbolTable &symbols);

} // namespace weft

#endif // WEFT_LIB_CODEGEN_KERNELFUNCTIONS_H
