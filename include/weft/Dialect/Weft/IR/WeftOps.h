//===- WeftOps.h - weft dialect operations ------------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTOPS_H
#define WEFT_DIALECT_WEFT_IR_WEFTOPS_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"

#include <limits>

#include "weft/Dialect/Weft/IR/WeftEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "weft/Dialect/Weft/IR/WeftAttrs.h.inc"

#include "weft/Dialect/Weft/IR/WeftInterfaces.h.inc"

#define GET_OP_CLASSES
#include "weft/Dialect/Weft/IR/WeftOps.h.inc"

namespace weft {

/// Numpy broadcast of two shapes; std::nullopt when they do not broadcast.
std::optional<llvm::SmallVector<int64_t>>
broadcastShapes(llvm::ArrayRef<int64_t> lhs, llvm::ArrayRef<int64_t> rhs);

/// "4x16x32" (or "scalar" for rank 0): how shapes appear in diagnostics.
std::string formatShape(llvm::ArrayRef<int64_t> shape);

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_WEFTOPS_H
