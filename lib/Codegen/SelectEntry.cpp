//===- SelectEntry.cpp - Keep the step function as the only entry ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Code generation compiles one function with a fixed C ABI. Everything else
// in the module is either inlined into it or dead; making it private lets
// `--symbol-dce` remove it. The entry's arguments belong to the runtime, so
// bufferization must not write into them.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"
#include "weft/Dialect/Weft/IR/TrainStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinTypes.h"

namespace weft {
#define GEN_PASS_DEF_SELECTENTRYPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
/// Why `type` cannot cross the step function's C ABI, or "" when it can.
std::string abiProblem(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor)
    return "is not a ranked tensor";
  if (!tensor.hasStaticShape())
    return "has a dynamic shape";
  if (!tensor.getElementType().isIntOrFloat())
    return "has an element type that is not an integer or float";
  return "";
}

struct SelectEntryPass
    : public weft::impl::SelectEntryPassBase<SelectEntryPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto entryFn = module.lookupSymbol<func::FuncOp>(entry);
    if (!entryFn || entryFn.isExternal()) {
      module.emitError() << "no function @" << entry << " with a body to "
                         << "compile";
      return signalPassFailure();
    }
    FunctionType type = entryFn.getFunctionType();
    for (auto [i, argType] : llvm::enumerate(type.getInputs())) {
      // The runtime context is a pointer, not a buffer.
      if (weft::isContextArg(entryFn, i))
        continue;
      std::string problem = abiProblem(argType);
      if (!problem.empty()) {
        entryFn.emitError() << "argument " << i << " of @" << entry << " ("
                            << argType << ") " << problem;
        return signalPassFailure();
      }
      entryFn.setArgAttr(i, "bufferization.writable",
                         BoolAttr::get(&getContext(), false));
    }
    for (auto [i, resultType] : llvm::enumerate(type.getResults())) {
      std::string problem = abiProblem(resultType);
      if (!problem.empty()) {
        entryFn.emitError() << "result " << i << " of @" << entry << " ("
                            << resultType << ") " << problem;
        return signalPassFailure();
      }
    }
    // The C wrapper passes one pointer per buffer.
    entryFn->setAttr("llvm.bareptr", UnitAttr::get(&getContext()));
    for (auto fn : module.getOps<func::FuncOp>())
      if (fn != entryFn && !fn.isExternal())
        fn.setPrivate();
  }
};
} // namespace
