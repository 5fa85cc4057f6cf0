//===- PartsAsCompiled.cpp - Which tp parts weftc keeps whole -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The search prices Megatron's tensor-parallel pattern part by part; weftc
// compiles what its own tensor-parallel plan (propagation) splits. Asking
// that plan which parts it leaves whole keeps the two in step, for weftc's
// --emit=plan and for weft-plan alike.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Planner/ModelStats.h"
#include "weft/Planner/Search.h"
#include "weft/Transforms/Parallel/TensorParallelPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;

namespace weft {
namespace planner {

int partsCheckTp(const ClusterSpec &spec, const SearchOptions &options) {
  // The parts are decided at the smallest tp the search may pick; a larger
  // one only splits less (the parts' divisors say where).
  if (options.tp)
    return options.tp;
  int64_t devices =
      options.devices ? options.devices : spec.nodes * spec.devicesPerNode;
  for (int64_t d = 2; d <= devices; ++d)
    if (devices % d == 0)
      return int(d);
  return 0;
}

void markPartsWeftcKeepsWhole(ModuleOp module, int tp, ModelStats &stats) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (tp < 2 || !forward || forward.isExternal())
    return;
  // planTensorParallel propagates the whole step once per candidate split
  // of each weight: 25-30 us per parameter and op on this host (1.4 s for
  // GPT-2 124M's 148 x 364), so a larger model keeps the pattern's parts.
  constexpr int64_t kMaxWork = 60000;
  int64_t params = 0, ops = 0;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    params += bool(getArgName(forward, i, contract::Role::Param));
  forward.walk([&](Operation *) { ++ops; });
  if (params * ops > kMaxWork)
    return;
  TensorParallelLayouts layouts =
      planTensorParallel(forward, StringAttr::get(module.getContext(), "tp"),
                         tp, {}, /*automatic=*/true);
  auto split = [&](const std::string &param) {
    if (layouts.params.count(param))
      return true;
    // A fused projection stays whole while its slices split.
    for (const auto &slice : layouts.slices)
      if (llvm::StringRef(slice.getKey()).starts_with(param + " "))
        return true;
    return false;
  };
  for (TpPart &part : stats.tpParts)
    part.keptWhole = llvm::none_of(part.params, split);
  stats.tpSplitsNothing = layouts.params.empty() && layouts.slices.empty();
}

} // namespace planner
} // namespace weft
