//===- Passes.h - Passes of the CUDA target ---------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_CUDA_PASSES_H
#define WEFT_TARGET_CUDA_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace weft {

#define GEN_PASS_DECL
#include "weft/Target/CUDA/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Target/CUDA/Passes.h.inc"

} // namespace weft

#endif // WEFT_TARGET_CUDA_PASSES_H
