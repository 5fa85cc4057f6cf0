//===- GpuMergeModules.cpp - All kernels in one gpu.module ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// --gpu-kernel-outlining makes a gpu.module per launch; a GPT step has a
// few hundred. Compiling each to a fatbin of its own would run ptxas and
// fatbinary that many times and load as many modules at startup, so the
// kernels move into one module.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/CUDA/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace weft {
#define GEN_PASS_DEF_GPUMERGEMODULESPASS
#include "weft/Target/CUDA/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

struct GpuMergeModulesPass
    : weft::impl::GpuMergeModulesPassBase<GpuMergeModulesPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<gpu::GPUModuleOp> kernels(module.getOps<gpu::GPUModuleOp>());
    if (kernels.empty())
      return;
    OpBuilder b(kernels.front());
    auto merged =
        gpu::GPUModuleOp::create(b, kernels.front().getLoc(), "weft_kernels");
    llvm::StringMap<Operation *> mergedSymbols;
    llvm::StringSet<> usedNames;
    // kernel module name -> its kernel's new name in the merged module.
    llvm::StringMap<StringAttr> renamed;
    for (gpu::GPUModuleOp kernel : kernels) {
      for (Operation &op :
           llvm::make_early_inc_range(kernel.getBody()->getOperations())) {
        auto symbol = dyn_cast<SymbolOpInterface>(op);
        if (!symbol) {
          op.emitError("--weft-gpu-merge-modules: unexpected op in a kernel "
                       "module");
          return signalPassFailure();
        }
        if (auto func = dyn_cast<gpu::GPUFuncOp>(op); func && func.isKernel()) {
          // Module names are unique; the kernels inside are not. PTX
          // names are [A-Za-z0-9_$]: the driver looks kernels up by the
          // name the host code holds, so it must survive NVPTX unchanged.
          std::string name = kernel.getName().str();
          for (char &c : name)
            if (!llvm::isAlnum(c) && c != '_')
              c = '_';
          std::string unique = name;
          for (int i = 0; usedNames.contains(unique); ++i)
            unique = name + "_" + std::to_string(i);
          usedNames.insert(unique);
          func.setName(unique);
          renamed[kernel.getName()] = func.getNameAttr();
          op.moveBefore(merged.getBody(), merged.getBody()->end());
          continue;
        }
        // A constant or declaration several kernels read: once.
        if (Operation *existing = mergedSymbols.lookup(symbol.getName())) {
          if (!OperationEquivalence::isEquivalentTo(
                  existing, &op, OperationEquivalence::ignoreValueEquivalence,
                  nullptr, OperationEquivalence::IgnoreLocations)) {
            op.emitError("--weft-gpu-merge-modules: two kernels define ")
                << symbol.getName() << " differently";
            return signalPassFailure();
          }
          continue;
        }
        mergedSymbols[symbol.getName()] = &op;
        op.moveBefore(merged.getBody(), merged.getBody()->end());
      }
    }
    WalkResult result = module.walk([&](gpu::LaunchFuncOp launch) {
      StringAttr root = launch.getKernelModuleName();
      auto it = renamed.find(root.getValue());
      if (it == renamed.end()) {
        launch.emitError("--weft-gpu-merge-modules: no kernel module ") << root;
        return WalkResult::interrupt();
      }
      launch.setKernelAttr(SymbolRefAttr::get(
          merged.getNameAttr(), {FlatSymbolRefAttr::get(it->second)}));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      return signalPassFailure();
    for (gpu::GPUModuleOp kernel : kernels)
      kernel.erase();
  }
};

} // namespace
