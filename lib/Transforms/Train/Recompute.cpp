//===- Recompute.cpp - Recompute activations in the backward -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Trades stored activations for recomputation in the gradient function
// --weft-autodiff builds: forward ops are grouped (layers, or attention
// cores), a group keeps only the values that cross its border, and the
// backward reads clones of the group's forward made just before the
// backward first needs them.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Train/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/ADT/StringExtras.h"

#include <climits>
#include <map>

namespace weft {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "weft/Transforms/Train/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// Marks a clone the backward reads instead of a kept forward value. The
/// same name as the recurrent adjoints' recomputed input projection
/// (WeftGradientsRecurrent.cpp), which --weft-lower-to-linalg carries over.
constexpr llvm::StringLiteral kRecomputedAttrName = "weft.recomputed";

/// The layer a parameter name belongs to: up to its first numeric part
/// (`h.3.attn.c_attn.weight` -> `h.3`), or, with `numbered` false, its
/// module (`fc1.weight` -> `fc1`). Empty: none.
StringRef layerOfName(StringRef name, bool numbered) {
  if (StringRef layer = getLayerPrefix(name); !layer.empty())
    return layer;
  SmallVector<StringRef> parts;
  name.split(parts, '.');
  if (numbered || parts.size() < 2)
    return {};
  return name.take_front(name.size() - parts.back().size() - 1);
}

/// The parameter or buffer name of a block argument, if it has one.
StringRef weightName(func::FuncOp fn, Value v) {
  auto arg = dyn_cast<BlockArgument>(v);
  if (!arg || arg.getOwner() != &fn.getBody().front())
    return {};
  for (StringRef attr :
       {WeftDialect::kParamAttrName, WeftDialect::kBufferAttrName})
    if (auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr))
      return name.getValue();
  return {};
}

/// An op the backward may run again: no side effects, no regions.
bool isClonable(Operation *op) {
  return op->getNumRegions() == 0 && isMemoryEffectFree(op) &&
         op->getNumResults() > 0;
}

struct RecomputePass : public weft::impl::RecomputePassBase<RecomputePass> {
  using Base::Base;

  void runOnOperation() override;

private:
  /// Layer index of every forward op (-1: none, the prologue and
  /// epilogue), layers in order of first use in `names`.
  void findLayers(func::FuncOp fn, ArrayRef<Operation *> forward,
                  DenseMap<Operation *, int> &layer,
                  SmallVectorImpl<std::string> &names);
  /// The ops of each attention core, as groups.
  void findAttentionCores(ArrayRef<Operation *> forward,
                          const DenseSet<Operation *> &isForward,
                          DenseMap<Operation *, int> &group);
};

void RecomputePass::findLayers(func::FuncOp fn, ArrayRef<Operation *> forward,
                               DenseMap<Operation *, int> &layer,
                               SmallVectorImpl<std::string> &names) {
  bool numbered = llvm::any_of(fn.getArguments(), [&](BlockArgument arg) {
    return !layerOfName(weightName(fn, arg), /*numbered=*/true).empty();
  });
  // The layers in order of first use, and where the last one's own
  // weights are last read.
  llvm::StringMap<int> index;
  DenseMap<Operation *, unsigned> position;
  for (Operation *op : forward) {
    position[op] = position.size();
    for (Value operand : op->getOperands()) {
      StringRef key = layerOfName(weightName(fn, operand), numbered);
      if (!key.empty() && index.try_emplace(key, int(names.size())).second)
        names.push_back(key.str());
    }
  }
  const int epilogue = int(names.size());
  unsigned lastLayerUse = 0;
  for (Operation *op : forward)
    for (Value operand : op->getOperands()) {
      StringRef key = layerOfName(weightName(fn, operand), numbered);
      if (!key.empty() && index.lookup(key) == epilogue - 1)
        lastLayerUse = position.lookup(op);
    }

  // Forward, as the planner's ModelStats: an op is in the latest layer its
  // operands and numbered weights come from. Weights without a layer (an
  // importer's folded `onnx::MatMul_305`) do not place an op, except past
  // the last layer's own weights, where reading one (the final norm, the
  // head) opens the epilogue, which is no layer.
  DenseSet<Operation *> readsWeights;
  for (Operation *op : forward) {
    int own = -1;
    bool unlayered = false;
    for (Value operand : op->getOperands()) {
      StringRef name = weightName(fn, operand);
      if (name.empty()) {
        if (Operation *def = operand.getDefiningOp())
          own = std::max(own, layer.lookup(def));
        continue;
      }
      readsWeights.insert(op);
      StringRef key = layerOfName(name, numbered);
      if (key.empty())
        unlayered = true;
      else
        own = std::max(own, index.lookup(key));
    }
    if (unlayered && own == epilogue - 1 && position.lookup(op) > lastLayerUse)
      own = epilogue;
    layer[op] = own;
  }
  // Backward: an op that reads no weights and feeds only later layers (the
  // start of a decomposed norm of the previous layer's output) joins the
  // earliest of them, so a layer's input is the residual stream itself.
  for (Operation *op : llvm::reverse(forward)) {
    int own = layer.lookup(op);
    if (own < 0 || own >= epilogue || readsWeights.contains(op) ||
        llvm::any_of(op->getOperands(), [&](Value v) {
          Operation *def = v.getDefiningOp();
          return def && readsWeights.contains(def);
        }))
      continue;
    int earliest = INT_MAX;
    for (Operation *user : op->getUsers()) {
      auto it = layer.find(user);
      if (it == layer.end()) // the backward
        continue;
      if (it->second <= own) {
        earliest = INT_MAX;
        break;
      }
      earliest = std::min(earliest, it->second);
    }
    if (earliest != INT_MAX && earliest < epilogue)
      layer[op] = earliest;
  }
  // The epilogue is in no layer.
  for (auto &[op, l] : layer)
    if (l == epilogue)
      l = -1;
}

void RecomputePass::findAttentionCores(ArrayRef<Operation *> forward,
                                       const DenseSet<Operation *> &isForward,
                                       DenseMap<Operation *, int> &group) {
  int cores = 0;
  for (Operation *op : forward) {
    auto softmax = dyn_cast<SoftmaxOp>(op);
    if (!softmax)
      continue;
    // Back from the softmax through the scaling and masking, along the
    // operand shaped like the scores, to a matmul of two activations (a
    // softmax over anything else is no attention core).
    SmallVector<Operation *> core = {op};
    auto scoresType = softmax.getType();
    Value v = softmax->getOperand(0);
    MatMulOp scores;
    while (Operation *def = v.getDefiningOp()) {
      if (!isForward.contains(def))
        break;
      if (auto mm = dyn_cast<MatMulOp>(def)) {
        if (mm.getLhs().getDefiningOp() && mm.getRhs().getDefiningOp())
          scores = mm;
        break;
      }
      // Scaling, masking (weft.where, weft.causal_mask), bias: ops shaped
      // like the scores.
      if (def->getNumResults() != 1 ||
          def->getResult(0).getType() != scoresType || !isClonable(def))
        break;
      core.push_back(def);
      auto next = llvm::find_if(def->getOperands(), [&](Value o) {
        return o.getType() == scoresType;
      });
      if (next == def->operand_end())
        break;
      v = *next;
    }
    if (!scores)
      continue;
    core.push_back(scores);
    // Forward: an optional dropout, then the product with V.
    Operation *probs = op;
    SmallVector<Operation *> forwardUsers;
    llvm::copy_if(probs->getUsers(), std::back_inserter(forwardUsers),
                  [&](Operation *user) { return isForward.contains(user); });
    if (forwardUsers.size() == 1 && isa<DropoutOp>(forwardUsers.front())) {
      probs = forwardUsers.front();
      core.push_back(probs);
    }
    for (Operation *user : probs->getUsers())
      if (isa<MatMulOp>(user) && isForward.contains(user))
        core.push_back(user);
    for (Operation *member : core)
      group[member] = cores;
    ++cores;
  }
}

void RecomputePass::runOnOperation() {
  ModuleOp module = getOperation();
  if (mode != "none" && mode != "selective" && mode != "full") {
    emitError(module.getLoc()) << "--weft-recompute: mode must be none, "
                                  "selective or full, got '"
                               << mode << "'";
    return signalPassFailure();
  }
  if (mode == "none")
    return;
  auto fn = module.lookupSymbol<func::FuncOp>(functionName);
  if (!fn || fn.isExternal() || !fn.getBody().hasOneBlock()) {
    emitError(module.getLoc())
        << "--weft-recompute: no single-block function @" << functionName
        << " (the gradient function; run after --weft-autodiff, or name it "
           "with function=)";
    return signalPassFailure();
  }
  Block &block = fn.getBody().front();
  Operation *terminator = block.getTerminator();
  if (terminator->getNumOperands() == 0)
    return;

  // The forward: everything the loss depends on, in program order.
  DenseSet<Operation *> isForward;
  SmallVector<Operation *> worklist;
  if (Operation *def = terminator->getOperand(0).getDefiningOp())
    worklist.push_back(def);
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (op->getBlock() != &block || !isForward.insert(op).second)
      continue;
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp())
        worklist.push_back(def);
  }
  SmallVector<Operation *> forward;
  DenseMap<Operation *, unsigned> position;
  unsigned counter = 0;
  for (Operation &op : block) {
    position[&op] = counter++;
    if (isForward.contains(&op))
      forward.push_back(&op);
  }

  DenseMap<Operation *, int> layer;
  SmallVector<std::string> layerNames;
  findLayers(fn, forward, layer, layerNames);
  // Which layers recompute.
  llvm::SmallBitVector chosen(layerNames.size(), layers.empty());
  for (const std::string &name : layers) {
    auto it = llvm::find(layerNames, name);
    if (it == layerNames.end()) {
      emitError(fn.getLoc())
          << "--weft-recompute: layers names '" << name
          << "', which is no layer of @" << functionName << " (its layers: "
          << (layerNames.empty() ? std::string("none")
                                 : llvm::join(layerNames, ", "))
          << ")";
      return signalPassFailure();
    }
    chosen.set(it - layerNames.begin());
  }
  auto inChosenLayer = [&](Operation *op) {
    int l = layer.lookup(op);
    return l >= 0 && chosen.test(l);
  };

  DenseMap<Operation *, int> group;
  if (mode == "full") {
    for (Operation *op : forward)
      if (inChosenLayer(op))
        group[op] = layer.lookup(op);
  } else {
    findAttentionCores(forward, isForward, group);
    // A core belongs to its softmax's layer.
    DenseMap<int, bool> keepCore;
    for (Operation *op : forward)
      if (isa<SoftmaxOp>(op) && group.count(op))
        keepCore[group.lookup(op)] = inChosenLayer(op);
    for (Operation *op : forward)
      if (auto it = group.find(op);
          it != group.end() && !keepCore.lookup(it->second))
        group.erase(it);
  }

  // Under a pipeline a group stops at each stage cut: what crosses a cut is
  // sent to the next stage, which holds it until its backward anyway, and
  // a clone there would be backward work of one stage feeding another's,
  // which runs before it. (Without stages this only renumbers the groups.)
  std::map<std::pair<int, int64_t>, int> split;
  for (Operation *op : forward) {
    auto it = group.find(op);
    if (it == group.end())
      continue;
    auto stage = op->getAttrOfType<IntegerAttr>(WeftDialect::kStageAttrName);
    std::pair<int, int64_t> key(it->second, stage ? stage.getInt() : -1);
    it->second = split.try_emplace(key, int(split.size())).first->second;
  }

  // A value is recomputed when every forward op reading it is in its
  // producer's group (nothing outside needs it) and nothing but backward
  // ops of this block read it otherwise.
  auto recomputed = [&](Value v) {
    Operation *def = v.getDefiningOp();
    auto it = def ? group.find(def) : group.end();
    if (it == group.end() || !isClonable(def))
      return false;
    return llvm::all_of(v.getUsers(), [&](Operation *user) {
      if (user->getBlock() != &block || user == terminator)
        return false;
      if (!isForward.contains(user))
        return true;
      auto g = group.find(user);
      return g != group.end() && g->second == it->second;
    });
  };

  // Per group: the recomputed values the backward reads, and its first
  // backward op reading one.
  struct Need {
    llvm::SetVector<Value> values;
    Operation *first = nullptr;
  };
  llvm::MapVector<int, Need> needs;
  for (Operation &op : block) {
    if (isForward.contains(&op))
      continue;
    for (Value operand : op.getOperands()) {
      if (!recomputed(operand))
        continue;
      Need &need = needs[group.lookup(operand.getDefiningOp())];
      need.values.insert(operand);
      if (!need.first)
        need.first = &op;
    }
  }

  for (auto &[id, need] : needs) {
    // The ops making the needed values, back to kept values.
    llvm::SetVector<Operation *> ops;
    SmallVector<Value> pending(need.values.begin(), need.values.end());
    while (!pending.empty()) {
      Value v = pending.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!ops.insert(def))
        continue;
      for (Value operand : def->getOperands())
        if (recomputed(operand))
          pending.push_back(operand);
    }
    SmallVector<Operation *> ordered(ops.begin(), ops.end());
    llvm::sort(ordered, [&](Operation *a, Operation *b) {
      return position.lookup(a) < position.lookup(b);
    });
    // The clones read kept values where the backward first needs them; a
    // forward op placed after that (hand-written IR) leaves the group
    // stored rather than break dominance.
    unsigned at = position.lookup(need.first);
    if (llvm::any_of(ordered, [&](Operation *op) {
          return llvm::any_of(op->getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return def && !ops.contains(def) && position.lookup(def) >= at;
          });
        }))
      continue;
    OpBuilder b(need.first);
    IRMapping mapping;
    DenseSet<Operation *> clones;
    for (Operation *op : ordered) {
      Operation *copy = b.clone(*op, mapping);
      copy->setAttr(kRecomputedAttrName, b.getUnitAttr());
      clones.insert(copy);
    }
    for (Value v : need.values)
      v.replaceUsesWithIf(mapping.lookup(v), [&](OpOperand &use) {
        Operation *user = use.getOwner();
        return !isForward.contains(user) && !clones.contains(user);
      });
  }
}

} // namespace
