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

/// `text` with control characters and bytes that are not valid UTF-8 as
/// \xNN: names in messages come from model files, which may be damaged,
/// and must not reach a terminal raw.
std::string escapeForTerminal(StringRef text) {
  std::string out;
  out.reserve(text.size());
  auto hex = [&](unsigned char c) {
    static const char digits[] = "0123456789abcdef";
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 15];
  };
  for (size_t i = 0; i < text.size();) {
    unsigned char c = text[i];
    if (c == '\n' || c == '\t' || (c >= 0x20 && c < 0x7f)) {
      out += char(c);
      ++i;
      continue;
    }
    // A well-formed multi-byte UTF-8 sequence passes through whole.
    size_t len = c >= 0xf0 && c < 0xf5   ? 4
                 : c >= 0xe0 && c < 0xf0 ? 3
                 : c >= 0xc2 && c < 0xe0 ? 2
                                         : 0;
    bool ok = len && i + len <= text.size();
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(text[i + k]) & 0xc0) == 0x80;
    if (ok) {
      out.append(text.data() + i, len);
      i += len;
      continue;
    }
    hex(c);
    ++i;
  }
  return out;
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
      std::string line;
      llvm::raw_string_ostream text(line);
      text << prefix << ": ";
      printLocation(text, d.getLocation());
      text << severityName(d.getSeverity()) << ": " << d;
      os << escapeForTerminal(line) << "\n";
    };
    print(diag);
    for (Diagnostic &note : diag.getNotes())
      print(note);
    return success();
  });
}
