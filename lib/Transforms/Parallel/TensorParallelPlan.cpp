//===- TensorParallelPlan.cpp - Megatron layouts from propagation ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Each candidate layout is judged by propagating it through a copy of the
// forward function and counting what the partitioner would have to move:
// gathers of split values, slices of whole activations (a split the input
// did not arrive with: a row-parallel weight on a whole input), reductions
// of partial sums, and slices of parameters (a whole bias added to a split
// activation). The forward pass decides: the backward pass mirrors it
// (Megatron's f and g operators are each other's adjoints).
//
//===----------------------------------------------------------------------===//

#include "weft/Transforms/Parallel/TensorParallelPlan.h"
#include "ShardingAnalysis.h"
#include "weft/Dialect/Weft/IR/TrainStep.h"

using namespace mlir;
using namespace weft;

namespace {
/// Elements the partitioner would move or slice, by kind.
struct Traffic {
  int64_t gathers = 0, activationSlices = 0, reductions = 0, paramSlices = 0;
};

int64_t numElements(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type ? type.getNumElements() : 0;
}

bool isPrefix(ArrayRef<StringAttr> a, ArrayRef<StringAttr> b) {
  return a.size() <= b.size() && a == b.take_front(a.size());
}

class Planner {
public:
  Planner(func::FuncOp fn, StringAttr tp, int64_t size)
      : fn(fn), tp(tp), size(size),
        mesh(MeshAttr::get(fn.getContext(), {tp}, {size})) {
    for (BlockArgument arg : fn.getArguments())
      if (getArgName(fn, arg.getArgNumber(), contract::Role::Param))
        fromParams.insert(arg);
    fn.walk([&](Operation *op) {
      if (op->getNumOperands() > 0 &&
          llvm::all_of(op->getOperands(),
                       [&](Value v) { return fromParams.contains(v); }))
        for (Value result : op->getResults())
          fromParams.insert(result);
    });
  }

  TensorParallelLayouts run(const llvm::StringMap<TensorSharding> &given,
                            bool automatic) {
    for (BlockArgument arg : fn.getArguments())
      if (StringAttr name =
              getArgName(fn, arg.getArgNumber(), contract::Role::Param)) {
        auto it = given.find(name.getValue());
        if (it != given.end())
          layouts[arg.getArgNumber()] = it->second;
      }
    if (automatic) {
      for (BlockArgument weight : weightsInOrder())
        if (!layouts.count(weight.getArgNumber()))
          placeWeight(weight);
      for (BlockArgument arg : fn.getArguments())
        if (fromParams.contains(arg) && !layouts.count(arg.getArgNumber()))
          placeFollower(arg);
    }
    TensorParallelLayouts out;
    for (auto &[i, s] : layouts)
      if (!s.isReplicated())
        out.params[getArgName(fn, i, contract::Role::Param).getValue()] = s;
    writeLayouts();
    ShardingAnalysis analysis(fn, mesh);
    if (failed(analysis.seed(/*recorded=*/false)))
      return out;
    analysis.run();
    fn.walk([&](SliceOp slice) {
      std::string key = sliceKey(fn, slice);
      TensorSharding s = analysis.get(slice.getResult()).withoutPartial();
      if (!key.empty() && !s.isReplicated())
        out.slices[key] = s;
    });
    return out;
  }

private:
  /// Parameters that matmuls and convolutions read (through transposes,
  /// reshapes, casts and slices: a fused projection held as a view is read
  /// part by part), in the order of their first such use.
  SmallVector<BlockArgument> weightsInOrder() {
    SmallVector<BlockArgument> weights;
    fn.walk([&](Operation *op) {
      if (!isa<MatMulOp, Conv2DOp>(op))
        return;
      for (Value operand : op->getOperands()) {
        while (Operation *def = operand.getDefiningOp()) {
          if (!isa<TransposeOp, ReshapeOp, CastOp, SliceOp>(def))
            break;
          operand = def->getOperand(0);
        }
        auto arg = dyn_cast<BlockArgument>(operand);
        if (arg && fromParams.contains(arg) && !llvm::is_contained(weights, arg))
          weights.push_back(arg);
      }
    });
    return weights;
  }

  /// Single-dimension splits of `arg` over tp that divide.
  SmallVector<TensorSharding> candidates(BlockArgument arg) {
    auto type = cast<RankedTensorType>(arg.getType());
    SmallVector<TensorSharding> out;
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.getDimSize(d) >= size && type.getDimSize(d) % size == 0) {
        TensorSharding s = TensorSharding::replicated(type.getRank());
        s.dims[d] = {tp};
        out.push_back(s);
      }
    return out;
  }

  void placeWeight(BlockArgument weight) {
    Traffic base = measure();
    std::optional<TensorSharding> best;
    int64_t bestReductions = 0;
    for (const TensorSharding &s : candidates(weight)) {
      layouts[weight.getArgNumber()] = s;
      Traffic t = measure();
      if (t.gathers > base.gathers ||
          t.activationSlices > base.activationSlices)
        continue;
      if (!best || t.reductions < bestReductions) {
        best = s;
        bestReductions = t.reductions;
      }
    }
    layouts.erase(weight.getArgNumber());
    if (best)
      layouts[weight.getArgNumber()] = *best;
  }

  void placeFollower(BlockArgument arg) {
    Traffic base = measure();
    std::optional<TensorSharding> best;
    int64_t bestSlices = base.paramSlices;
    for (const TensorSharding &s : candidates(arg)) {
      layouts[arg.getArgNumber()] = s;
      Traffic t = measure();
      if (t.gathers > base.gathers ||
          t.activationSlices > base.activationSlices ||
          t.reductions > base.reductions || t.paramSlices >= bestSlices)
        continue;
      best = s;
      bestSlices = t.paramSlices;
    }
    layouts.erase(arg.getArgNumber());
    if (best)
      layouts[arg.getArgNumber()] = *best;
  }

  /// The layouts chosen so far, on the copy's arguments, where the
  /// analysis reads them.
  void writeLayouts() {
    MLIRContext *context = fn.getContext();
    for (BlockArgument arg : fn.getArguments()) {
      auto type = cast<RankedTensorType>(arg.getType());
      auto it = layouts.find(arg.getArgNumber());
      TensorSharding s = it != layouts.end()
                             ? it->second
                             : TensorSharding::replicated(type.getRank());
      fn.setArgAttr(arg.getArgNumber(), kShardingAttrName, s.toAttr(context));
    }
  }

  /// What the partitioner would move under the layouts chosen so far.
  Traffic measure() {
    writeLayouts();
    ShardingAnalysis analysis(fn, mesh);
    if (failed(analysis.seed(/*recorded=*/false)))
      return Traffic{INT64_MAX / 4, 0, 0, 0};
    analysis.run();
    Traffic t;
    // What the partitioner holds of `v`: what its producer computes (the
    // analysis may have asked for more splits, which a slice then makes).
    auto produced = [&](Value v) {
      auto result = dyn_cast<OpResult>(v);
      if (!result)
        return analysis.get(v);
      Operation *def = result.getOwner();
      std::optional<ShardingRule> rule = getRule(def);
      if (!rule)
        return TensorSharding::replicated(
            cast<RankedTensorType>(v.getType()).getRank());
      return analysis.resultSharding(def, *rule, analysis.factorAxes(def, *rule),
                                     result.getResultNumber());
    };
    auto use = [&](Value v, const TensorSharding &want, bool keepsPartial) {
      TensorSharding have = produced(v);
      int64_t n = numElements(v);
      if (have.isPartial() && !keepsPartial) {
        t.reductions += n;
        have = have.withoutPartial();
      }
      for (auto [h, w] : llvm::zip(have.dims, want.dims)) {
        if (!isPrefix(h, w))
          t.gathers += n;
        else if (h.size() < w.size())
          (fromParams.contains(v) ? t.paramSlices : t.activationSlices) += n;
      }
    };
    fn.walk([&](Operation *op) {
      // The forward pass's results go to the loss, which takes any split
      // (its positions are means, its classes combined across ranks).
      if (isa<func::ReturnOp>(op))
        return;
      std::optional<ShardingRule> rule = getRule(op);
      if (!rule) {
        for (Value v : op->getOperands())
          if (auto type = dyn_cast<RankedTensorType>(v.getType()))
            use(v, TensorSharding::replicated(type.getRank()),
                /*keepsPartial=*/false);
        return;
      }
      SmallVector<AxisList> axes = analysis.factorAxes(op, *rule);
      TensorSharding result =
          op->getNumResults() == 1
              ? analysis.resultSharding(op, *rule, axes, 0)
              : TensorSharding();
      for (auto [i, v] : llvm::enumerate(op->getOperands())) {
        if (!isa<RankedTensorType>(v.getType()))
          continue;
        TensorSharding want = analysis.project(rule->operands[i], axes);
        use(v, want,
            !keptPartial(*rule, op->getNumResults(), produced(v), want,
                         result)
                 .empty());
      }
    });
    return t;
  }

  func::FuncOp fn;
  StringAttr tp;
  int64_t size;
  MeshAttr mesh;
  llvm::DenseSet<Value> fromParams;
  std::map<unsigned, TensorSharding> layouts;
};
} // namespace

std::string weft::sliceKey(func::FuncOp fn, Operation *op) {
  auto slice = dyn_cast<SliceOp>(op);
  if (!slice)
    return "";
  Value source = slice.getInput();
  std::string chain;
  while (Operation *def = source.getDefiningOp()) {
    if (!isa<TransposeOp, ReshapeOp, CastOp>(def))
      return "";
    chain += def->getName().getStringRef().str() + " ";
    source = def->getOperand(0);
  }
  auto arg = dyn_cast<BlockArgument>(source);
  StringAttr name =
      arg ? getArgName(fn, arg.getArgNumber(), contract::Role::Param)
          : StringAttr();
  if (!name)
    return "";
  std::string key;
  llvm::raw_string_ostream os(key);
  os << name.getValue() << " " << chain << slice.getInput().getType() << " [";
  llvm::interleaveComma(slice.getStarts(), os);
  os << "] [";
  llvm::interleaveComma(slice.getLimits(), os);
  os << "]";
  return key;
}

TensorParallelLayouts weft::planTensorParallel(func::FuncOp forward, StringAttr tpAxis, int64_t size,
                         const llvm::StringMap<TensorSharding> &given,
                         bool automatic) {
  // The candidates' layouts are written on a copy's arguments.
  auto copy = cast<func::FuncOp>(forward->clone());
  TensorParallelLayouts plan =
      Planner(copy, tpAxis, size).run(given, automatic);
  copy->erase();
  return plan;
}
