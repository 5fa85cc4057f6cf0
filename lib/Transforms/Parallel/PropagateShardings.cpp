//===- PropagateShardings.cpp - A sharding for every value ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "ShardingAnalysis.h"
#include "weft/Transforms/Parallel/Passes.h"

namespace weft {
#define GEN_PASS_DEF_PROPAGATESHARDINGSPASS
#include "weft/Transforms/Parallel/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct PropagateShardingsPass
    : public weft::impl::PropagateShardingsPassBase<PropagateShardingsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!mesh || !fn) {
      module.emitError() << "--weft-propagate-shardings needs a module with "
                         << kMeshAttrName << " and a function @" << entry
                         << " (run --weft-apply-mesh first)";
      return signalPassFailure();
    }
    ShardingAnalysis analysis(fn, mesh);
    if (failed(analysis.seed(/*recorded=*/false)))
      return signalPassFailure();
    analysis.run();
    MLIRContext *context = &getContext();
    fn.walk([&](Operation *op) {
      if (op->getNumResults() == 0 || isa<ShardAsOp>(op) ||
          !llvm::all_of(op->getResultTypes(), llvm::IsaPred<RankedTensorType>))
        return;
      SmallVector<Attribute> attrs;
      for (Value result : op->getResults())
        attrs.push_back(analysis.get(result).toAttr(context));
      op->setAttr(kShardingsAttrName, ArrayAttr::get(context, attrs));
    });
  }
};
} // namespace
