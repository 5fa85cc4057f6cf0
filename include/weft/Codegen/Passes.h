//===- Passes.h - Code-generation passes ------------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_CODEGEN_PASSES_H
#define WEFT_CODEGEN_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"

namespace weft {

#define GEN_PASS_DECL
#include "weft/Codegen/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Codegen/Passes.h.inc"

} // namespace weft

#endif // WEFT_CODEGEN_PASSES_H
