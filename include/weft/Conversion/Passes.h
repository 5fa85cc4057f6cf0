//===- Passes.h - Conversions into the weft dialect -------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_CONVERSION_PASSES_H
#define WEFT_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace weft {

#define GEN_PASS_DECL
#include "weft/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Conversion/Passes.h.inc"

} // namespace weft

#endif // WEFT_CONVERSION_PASSES_H
