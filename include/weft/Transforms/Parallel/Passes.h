//===- Passes.h - Parallelization passes ------------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TRANSFORMS_PARALLEL_PASSES_H
#define WEFT_TRANSFORMS_PARALLEL_PASSES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace weft {

#define GEN_PASS_DECL
#include "weft/Transforms/Parallel/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Transforms/Parallel/Passes.h.inc"

} // namespace weft

#endif // WEFT_TRANSFORMS_PARALLEL_PASSES_H
