//===- KernelFunctions.cpp - Kernels outlined as functions ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "KernelFunctions.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/Support/raw_ostream.h"

#include <map>
#include <string>

using namespace mlir;

void weft::finishKernelFunction(func::FuncOp function, SymbolTable &symbols) {
  symbols.insert(function);
  function.setPrivate();
  UnitAttr unit = UnitAttr::get(function.getContext());
  function->setAttr("no_inline", unit);
  auto isPlain = [](Type type) {
    auto memref = dyn_cast<MemRefType>(type);
    return !memref ||
           (memref.hasStaticShape() && memref.getLayout().isIdentity());
  };
  if (llvm::all_of(function.getArgumentTypes(), isPlain))
    function->setAttr("llvm.bareptr", unit);
}

void weft::deduplicateFunctions(Operation *scope,
                                ArrayRef<func::FuncOp> functions,
                                SymbolTable &symbols) {
  // A function's printed form under a common name is its identity: the
  // generic form with local value numbering compares bodies exactly.
  std::map<std::string, func::FuncOp> seen;
  llvm::DenseMap<StringAttr, func::FuncOp> replacement;
  for (func::FuncOp function : functions) {
    std::string key;
    llvm::raw_string_ostream os(key);
    StringAttr name = function.getSymNameAttr();
    function.setSymName("function");
    function->print(os, OpPrintingFlags().useLocalScope().printGenericOpForm());
    function.setSymNameAttr(name);
    auto [it, inserted] = seen.try_emplace(std::move(key), function);
    if (!inserted)
      replacement[name] = it->second;
  }
  if (replacement.empty())
    return;
  scope->walk([&](func::CallOp call) {
    if (func::FuncOp target =
            replacement.lookup(call.getCalleeAttr().getAttr()))
      call.setCallee(target.getSymName());
  });
  for (func::FuncOp function : functions)
    if (replacement.count(function.getSymNameAttr()))
      symbols.erase(function);
}
