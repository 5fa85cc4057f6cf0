//===- Diagnostics.cpp - How Weft's tools print errors --------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Support/Diagnostics.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Location.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace {
void printLocation(raw_ostream &os, Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc)) {
    os << file.getFilename().getValue();
    if (file.getLine() != 0)
      os << ":" << file.getLine() << ":" << file.getColumn();
    os << ": ";
    return;
  }
  if (auto name = dyn_cast<NameLoc>(loc)) {
    printLocation(os, name.getChildLoc());
    return;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc)) {
    if (!fused.getLocations().empty())
      printLocation(os, fused.getLocations().front());
    return;
  }
  if (auto callSite = dyn_cast<CallSiteLoc>(loc))
    printLocation(os, callSite.getCaller());
}

StringRef severityName(DiagnosticSeverity severity) {
  switch (severity) {
  case DiagnosticSeverity::Error:
    return "error";
  case DiagnosticSeverity::Warning:
    return "warning";
  case DiagnosticSeverity::Note:
    return "note";
  case DiagnosticSeverity::Remark:
    return "remark";
  }
  return "error";
}
} // namespace

weft::ToolDiagnosticHandler::ToolDiagnosticHandler(MLIRContext *context,
                                                   StringRef tool)
    : ScopedDiagnosticHandler(context) {
  std::string prefix = tool.str();
  setHandler([prefix](Diagnostic &diag) {
    raw_ostream &os = llvm::errs();
    auto print = [&](Diagnostic &d) {
      os << prefix << ": ";
      printLocation(os, d.getLocation());
      os << severityName(d.getSeverity()) << ": " << d << "\n";
    };
    print(diag);
    for (Diagnostic &note : diag.getNotes())
      print(note);
    return success();
  });
}
