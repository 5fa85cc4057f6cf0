//===- AssignStages.cpp - Cut the forward pass into pipeline stages -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/ModelLayers.h"
#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Pipeline/Passes.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallPtrSet.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace weft {
#define GEN_PASS_DEF_ASSIGNSTAGESPASS
#include "weft/Transforms/Pipeline/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
/// FLOPs of one run of `op`: the op's own CostOpInterface when it has
/// one; else a matrix product or convolution counts its multiply-adds
/// and any other op one per result element, which is what balancing
/// stages needs (the products dominate).
double flopsOf(Operation *op) {
  if (auto cost = dyn_cast<CostOpInterface>(op))
    return cost.getFlops();
  auto elements = [](Value v) {
    auto t = dyn_cast<RankedTensorType>(v.getType());
    return t && t.hasStaticShape() ? double(t.getNumElements()) : 0.0;
  };
  if (auto matmul = dyn_cast<MatMulOp>(op)) {
    auto lhs = cast<RankedTensorType>(matmul.getLhs().getType());
    int64_t k = lhs.getDimSize(lhs.getRank() - (matmul.getTransposeLhs() ? 2 : 1));
    return 2.0 * elements(matmul.getResult()) * double(k);
  }
  if (auto conv = dyn_cast<Conv2DOp>(op)) {
    auto filter = cast<RankedTensorType>(conv.getFilter().getType());
    return 2.0 * elements(conv.getResult()) *
           double(filter.getNumElements() / filter.getDimSize(0));
  }
  double n = 0;
  for (Value result : op->getResults())
    n += elements(result);
  return n;
}

/// `name` is `prefix` or lies under it (`h.2` covers `h.2.attn.weight`, not
/// `h.20.attn.weight`).
bool underPrefix(StringRef name, StringRef prefix) {
  return name == prefix ||
         (name.starts_with(prefix) && name.size() > prefix.size() &&
          name[prefix.size()] == '.');
}

struct AssignStagesPass
    : public weft::impl::AssignStagesPassBase<AssignStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (module.lookupSymbol<func::FuncOp>("train_step")) {
      module.emitError("pipeline stages are cut on the model's @forward, "
                       "before the training step is built; this module is "
                       "already a step: compile the model (.onnx or a "
                       "weft module with @forward) instead");
      return signalPassFailure();
    }
    if (!forward || forward.isExternal()) {
      module.emitError("pipeline stages need the model's @forward");
      return signalPassFailure();
    }
    int64_t numStages = stages ? stages : int64_t(cuts.size()) + 1;
    if (numStages < 1) {
      module.emitError() << "pipeline stages must be at least 1, not "
                         << numStages;
      return signalPassFailure();
    }
    if (!blocksPerStage.empty() && !cuts.empty()) {
      module.emitError("give the stages' cuts or their layers per stage, "
                       "not both");
      return signalPassFailure();
    }
    if (!cuts.empty() && int64_t(cuts.size()) != numStages - 1) {
      module.emitError() << numStages << " pipeline stages need "
                         << numStages - 1 << " cuts, but " << cuts.size()
                         << " are given";
      return signalPassFailure();
    }
    collect(forward);
    SmallVector<size_t> starts;
    if (failed(!blocksPerStage.empty() ? blockCuts(forward, numStages, starts)
               : cuts.empty() ? balancedCuts(forward, numStages, starts)
                              : givenCuts(forward, starts)))
      return signalPassFailure();
    tag(forward, starts);
  }

private:
  /// The ops that compute (constants and weight-only ops excluded: each
  /// stage makes its own), in program order, with their FLOPs.
  void collect(func::FuncOp forward) {
    // Views of weights (a tied embedding's transpose for the head) run in
    // the stage of each reader, like constants, so a parameter, not a value
    // derived from it, is what two distant stages share (and a tied
    // parameter's gradient is summed between them), instead of a copy sent
    // per micro-batch.
    weightOps = findWeightOps(forward);
    for (Operation &op : forward.front().without_terminator()) {
      if (isa<ConstantOp>(op) || weightOps.contains(&op))
        continue;
      ops.push_back(&op);
      flops.push_back(flopsOf(&op));
    }
    index.clear();
    for (auto [i, op] : llvm::enumerate(ops))
      index[op] = i;
    // crossing[i]: bytes of the values made before op i and read at or
    // after it: what a cut before op i sends on.
    crossing.assign(ops.size() + 1, 0.0);
    SmallVector<double> delta(ops.size() + 2, 0.0);
    // intCrossing[i]: values that are not float tensors live across the
    // cut before op i (top-k's indices on their way to a gather): stages
    // send only float tensors, so no automatic cut falls there.
    intCrossing = liveNonFloatValues(ops, index);
    for (auto [i, op] : llvm::enumerate(ops))
      for (Value result : op->getResults()) {
        size_t last = lastReader(result, i, index, ops.size());
        // Live across the cuts before ops i+1 .. last.
        if (last > i) {
          delta[i + 1] += double(staticTensorBytes(result.getType()));
          delta[last + 1] -= double(staticTensorBytes(result.getType()));
        }
      }
    double running = 0;
    for (size_t i = 0; i <= ops.size(); ++i) {
      running += delta[i];
      crossing[i] = running;
    }
  }

  /// Cuts that balance FLOPs, and among those within 10 % of the best
  /// balance, send the fewest bytes (they fall between layers, where only
  /// the residual stream is live, rather than inside one).
  LogicalResult balancedCuts(func::FuncOp forward, int64_t numStages,
                             SmallVector<size_t> &starts) {
    size_t n = ops.size();
    if (int64_t(n) < numStages)
      return forward.emitError()
             << numStages << " pipeline stages need " << numStages - 1
             << " cuts, but the forward pass has only " << n
             << " ops: choose at most " << n << " stages";
    // prefix[i]: FLOPs of ops [0, i).
    SmallVector<double> prefix(n + 1, 0.0);
    for (size_t i = 0; i < n; ++i)
      prefix[i + 1] = prefix[i] + flops[i];
    auto span = [&](size_t i, size_t j) { return prefix[j] - prefix[i]; };
    constexpr double kInf = std::numeric_limits<double>::infinity();
    size_t p = size_t(numStages);
    // First the best balance: the least largest stage, stage k ending
    // before op j.
    std::vector<std::vector<double>> most(p, std::vector<double>(n + 1, kInf));
    for (size_t j = 1; j <= n; ++j)
      most[0][j] = span(0, j);
    for (size_t k = 1; k < p; ++k)
      for (size_t j = k + 1; j <= n; ++j)
        for (size_t i = k; i < j; ++i)
          most[k][j] = std::min(most[k][j], std::max(most[k - 1][i], span(i, j)));
    double bound = most[p - 1][n] * 1.1;
    // Then the fewest bytes sent with no stage above the bound and, if
    // possible, none below half the average (a stage of one bias add would
    // send little but idle its rank); among equal bytes, the better
    // balance.
    using Score = std::pair<double, double>; // bytes sent, largest stage
    std::vector<std::vector<Score>> best;
    std::vector<std::vector<size_t>> from;
    auto solve = [&](double floor, double ceiling, bool floatCutsOnly) {
      best.assign(p, std::vector<Score>(n + 1, {kInf, kInf}));
      from.assign(p, std::vector<size_t>(n + 1, 0));
      auto fits = [&](size_t i, size_t j) {
        return span(i, j) <= ceiling && span(i, j) >= floor;
      };
      for (size_t j = 1; j <= n; ++j)
        if (fits(0, j))
          best[0][j] = {0, span(0, j)};
      for (size_t k = 1; k < p; ++k)
        for (size_t j = k + 1; j <= n; ++j)
          for (size_t i = k; i < j; ++i) {
            if (best[k - 1][i].first == kInf || !fits(i, j) ||
                (floatCutsOnly && intCrossing[i] > 0))
              continue;
            Score score{best[k - 1][i].first + crossing[i],
                        std::max(best[k - 1][i].second, span(i, j))};
            if (score < best[k][j]) {
              best[k][j] = score;
              from[k][j] = i;
            }
          }
      return best[p - 1][n].first != kInf;
    };
    // Cuts that send floats only, balanced if they can be, else as they
    // can; where there are none the stages still split, and the step's
    // split names the value that cannot cross.
    double floor = 0.5 * prefix[n] / double(p);
    if (!solve(floor, bound, true) && !solve(0, bound, true) &&
        !solve(0, kInf, true) && !solve(floor, bound, false))
      solve(0, bound, false);
    starts.assign(p, 0);
    size_t j = n;
    for (size_t k = p - 1; k >= 1; --k) {
      j = from[k][j];
      starts[k] = j;
    }
    return success();
  }

  /// Cuts before the first layer (getModelLayers) of each stage after the
  /// first.
  LogicalResult blockCuts(func::FuncOp forward, int64_t numStages,
                          SmallVector<size_t> &starts) {
    ModelLayers layers = getModelLayers(forward, weightOps);
    int64_t total = 0;
    for (int64_t b : blocksPerStage)
      total += b;
    if (int64_t(blocksPerStage.size()) != numStages ||
        total != int64_t(layers.size()) ||
        llvm::any_of(blocksPerStage, [](int64_t b) { return b < 1; }))
      return forward.emitError()
             << "the plan's blocks_per_stage (" << blocksPerStage.size()
             << " stages, " << total << " layers) does not fit this model ("
             << numStages << " stages, " << layers.size()
             << " layers): compile the plan with the model it was made for";
    starts = {0};
    int64_t next = 0;
    for (int64_t s = 0; s + 1 < numStages; ++s) {
      next += blocksPerStage[size_t(s)];
      int layer = int(next);
      std::optional<size_t> first =
          firstReader(forward, [&](unsigned arg, StringRef) {
            return layers.ofArg[arg] == layer;
          });
      if (!first || *first <= starts.back())
        return forward.emitError()
               << "the plan's stage " << s + 1 << " starts at layer '"
               << layers.names[size_t(layer)].front()
               << "', whose first op is not after the previous stage's: the "
                  "model's layers do not run in the order of their numbers; "
                  "give --stage-cuts by hand";
      starts.push_back(*first);
    }
    return success();
  }

  /// The first computing op that reads a parameter `matches` names.
  template <typename Matches>
  std::optional<size_t> firstReader(func::FuncOp forward, Matches matches) {
    std::optional<size_t> first;
    for (BlockArgument arg : forward.getArguments()) {
      StringAttr name =
          getArgName(forward, arg.getArgNumber(), contract::Role::Param);
      if (!name || !matches(arg.getArgNumber(), name.getValue()))
        continue;
      // Through weight-only ops (a transpose) to the ops computing.
      SmallVector<Operation *> users(arg.getUsers().begin(),
                                     arg.getUsers().end());
      while (!users.empty()) {
        Operation *user = users.pop_back_val();
        if (weightOps.contains(user))
          users.append(user->getUsers().begin(), user->getUsers().end());
        else if (auto it = index.find(user); it != index.end())
          first = first ? std::min(*first, it->second) : it->second;
      }
    }
    return first;
  }

  /// Each cut starts its stage at the first op reading a parameter under
  /// the cut's name.
  LogicalResult givenCuts(func::FuncOp forward, SmallVector<size_t> &starts) {
    starts = {0};
    for (const std::string &cut : cuts) {
      std::optional<size_t> first =
          firstReader(forward, [&](unsigned, StringRef name) {
            return underPrefix(name, cut);
          });
      if (!first)
        return forward.emitError()
               << "--stage-cuts '" << cut
               << "': no parameter of the model is named so or lies under "
                  "it; name the first parameter of each stage, or a prefix "
                  "of it such as a layer ('h.2'): weftc --emit=weft lists "
                  "them";
      if (*first <= starts.back())
        return forward.emitError()
               << "--stage-cuts '" << cut
               << "': its first op is not after the previous cut's; give "
                  "the cuts in the order the forward pass reaches them";
      starts.push_back(*first);
    }
    return success();
  }

  void tag(func::FuncOp forward, ArrayRef<size_t> starts) {
    MLIRContext *context = &getContext();
    Builder b(context);
    int64_t numStages = int64_t(starts.size());
    auto stageOf = [&](size_t i) {
      return int64_t(std::upper_bound(starts.begin(), starts.end(), i) -
                     starts.begin()) -
             1;
    };
    SmallVector<double> stageFlops(size_t(numStages), 0.0);
    SmallVector<int64_t> stageOps(size_t(numStages), 0);
    for (auto [i, op] : llvm::enumerate(ops)) {
      int64_t s = stageOf(i);
      op->setAttr(kStageAttrName, b.getI64IntegerAttr(s));
      stageFlops[size_t(s)] += flops[i];
      ++stageOps[size_t(s)];
    }
    // A constant runs where its first reader does. A weight-only op runs
    // in every stage that reads it, one copy each: readers come after
    // their operands, so walking backwards stages every reader first.
    SmallVector<Operation *> body;
    for (Operation &op : forward.front().without_terminator())
      body.push_back(&op);
    auto readerStage = [&](Operation *user) -> std::optional<int64_t> {
      if (auto it = index.find(user); it != index.end())
        return stageOf(it->second);
      if (auto s = user->getAttrOfType<IntegerAttr>(kStageAttrName))
        return s.getInt();
      return std::nullopt;
    };
    for (Operation *op : llvm::reverse(body)) {
      if (isa<ConstantOp>(op)) {
        int64_t s = 0;
        for (Operation *user : op->getUsers())
          if (auto it = index.find(user); it != index.end()) {
            s = stageOf(it->second);
            break;
          }
        op->setAttr(kStageAttrName, b.getI64IntegerAttr(s));
        continue;
      }
      if (!weightOps.contains(op))
        continue;
      std::map<int64_t, SmallVector<OpOperand *>> byStage;
      for (Value result : op->getResults())
        for (OpOperand &use : result.getUses())
          if (std::optional<int64_t> s = readerStage(use.getOwner()))
            byStage[*s].push_back(&use);
      if (byStage.empty()) {
        op->setAttr(kStageAttrName, b.getI64IntegerAttr(0));
        continue;
      }
      op->setAttr(kStageAttrName, b.getI64IntegerAttr(byStage.begin()->first));
      for (auto &[s, uses] : llvm::drop_begin(byStage)) {
        // Just before its first reader, so that the stage's ops stay in
        // one run of the program.
        Operation *first = uses.front()->getOwner();
        for (OpOperand *use : uses)
          if (use->getOwner()->isBeforeInBlock(first))
            first = use->getOwner();
        OpBuilder builder(first);
        Operation *copy = builder.clone(*op);
        copy->setAttr(kStageAttrName, b.getI64IntegerAttr(s));
        for (OpOperand *use : uses)
          use->set(copy->getResult(
              cast<OpResult>(use->get()).getResultNumber()));
      }
    }
    SmallVector<int64_t> stageParams(size_t(numStages), 0);
    for (BlockArgument arg : forward.getArguments()) {
      SmallVector<int64_t> readers;
      for (Operation *user : arg.getUsers())
        if (std::optional<int64_t> s = readerStage(user))
          readers.push_back(*s);
      llvm::sort(readers);
      readers.erase(std::unique(readers.begin(), readers.end()),
                    readers.end());
      if (readers.empty())
        continue;
      forward.setArgAttr(arg.getArgNumber(), kStagesAttrName,
                         b.getDenseI64ArrayAttr(readers));
      if (getArgName(forward, arg.getArgNumber(), contract::Role::Param))
        for (int64_t s : readers)
          stageParams[size_t(s)] +=
              cast<RankedTensorType>(arg.getType()).getNumElements();
    }
    SmallVector<Attribute> summary;
    for (int64_t s = 0; s < numStages; ++s) {
      double sent = s + 1 < numStages ? crossing[starts[size_t(s) + 1]] : 0;
      summary.push_back(b.getDictionaryAttr({
          b.getNamedAttr("ops", b.getI64IntegerAttr(stageOps[size_t(s)])),
          b.getNamedAttr("flops", b.getI64IntegerAttr(int64_t(stageFlops[size_t(s)]))),
          b.getNamedAttr("params",
                         b.getI64IntegerAttr(stageParams[size_t(s)])),
          b.getNamedAttr("bytes_sent", b.getI64IntegerAttr(int64_t(sent))),
      }));
    }
    getOperation()->setAttr(kPipelineStagesAttrName, b.getArrayAttr(summary));
  }

  SmallVector<Operation *> ops;
  SmallVector<double> flops, crossing;
  std::vector<int64_t> intCrossing;
  llvm::DenseMap<Operation *, size_t> index;
  llvm::DenseSet<Operation *> weightOps;
};
} // namespace
