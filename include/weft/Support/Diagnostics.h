//===- Diagnostics.h - How Weft's tools print errors --------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_SUPPORT_DIAGNOSTICS_H
#define WEFT_SUPPORT_DIAGNOSTICS_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"

namespace weft {

/// Prints diagnostics as `tool: FILE[:LINE:COL]: error: message`. Imported
/// models have no line numbers (their locations are `node name (file:0:0)`),
/// so "0:0" positions are dropped rather than shown as if they meant
/// something; node names already appear in the messages.
class ToolDiagnosticHandler : public mlir::ScopedDiagnosticHandler {
public:
  ToolDiagnosticHandler(mlir::MLIRContext *context, llvm::StringRef tool);
};

} // namespace weft

#endif // WEFT_SUPPORT_DIAGNOSTICS_H
