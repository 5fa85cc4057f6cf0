//===- WeftDialect.h - The weft dialect ---------------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_WEFTDIALECT_H
#define WEFT_DIALECT_WEFT_IR_WEFTDIALECT_H

#include "mlir/IR/Dialect.h"
#include "weft/Formats/StepContract.h"

#include "weft/Dialect/Weft/IR/WeftDialect.h.inc"

#endif // WEFT_DIALECT_WEFT_IR_WEFTDIALECT_H
