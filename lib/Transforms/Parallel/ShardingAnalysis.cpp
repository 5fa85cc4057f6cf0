//===- ShardingAnalysis.cpp - Shardings of a step's values ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Shardings only ever gain splits (a dimension's axis list grows at its
// minor end, partial axes are added), so the sweeps reach a fixed point.
// The first forward sweep runs from the arguments, so a value produced as a
// partial sum is recorded as one before any consumer asks for a split
// layout of it; consumers' wishes for partial values go to `resolved`.
//
//===----------------------------------------------------------------------===//

#include "ShardingAnalysis.h"
#include "weft/Dialect/Weft/IR/TrainStep.h"

using namespace mlir;
using namespace weft;

namespace {
unsigned rankOf(Value v) {
  if (auto t = dyn_cast<RankedTensorType>(v.getType()))
    return t.getRank();
  return 0;
}

bool isPrefix(ArrayRef<StringAttr> a, ArrayRef<StringAttr> b) {
  return a.size() <= b.size() && a == b.take_front(a.size());
}

/// Whether `s` uses no axis twice.
bool isValid(const TensorSharding &s) {
  SmallVector<StringAttr> seen;
  auto add = [&](ArrayRef<StringAttr> axes) {
    for (StringAttr a : axes) {
      if (llvm::is_contained(seen, a))
        return false;
      seen.push_back(a);
    }
    return true;
  };
  for (const AxisList &axes : s.dims)
    if (!add(axes))
      return false;
  return add(s.partial);
}
} // namespace

std::optional<ShardingRule> weft::getRule(Operation *op) {
  if (auto iface = dyn_cast<ShardingRuleOpInterface>(op))
    return iface.getShardingRule();
  return std::nullopt;
}

ShardingAnalysis::ShardingAnalysis(func::FuncOp fn, MeshAttr mesh)
    : fn(fn), mesh(mesh) {}

LogicalResult ShardingAnalysis::seed(bool recorded) {
  for (BlockArgument arg : fn.getArguments()) {
    if (auto attr = fn.getArgAttrOfType<ShardingAttr>(arg.getArgNumber(),
                                                      kShardingAttrName))
      shardings[arg] = TensorSharding::fromAttr(attr);
    fixed.insert(arg);
    if (getArgName(fn, arg.getArgNumber(), contract::Role::Param) ||
        getArgName(fn, arg.getArgNumber(), contract::Role::State))
      decided.insert(arg);
  }
  WalkResult result = fn.walk([&](Operation *op) -> WalkResult {
    if (auto as = dyn_cast<ShardAsOp>(op)) {
      shardings[as.getResult()] = TensorSharding::fromAttr(as.getSharding());
      fixed.insert(as.getResult());
      return WalkResult::advance();
    }
    if (!recorded)
      return WalkResult::advance();
    auto attr = op->getAttrOfType<ArrayAttr>(kShardingsAttrName);
    if (!attr)
      return WalkResult::advance();
    if (attr.size() != op->getNumResults()) {
      op->emitOpError() << "has " << attr.size() << " " << kShardingsAttrName
                        << " for " << op->getNumResults() << " results";
      return WalkResult::interrupt();
    }
    for (auto [value, s] : llvm::zip_equal(op->getResults(), attr)) {
      shardings[value] = TensorSharding::fromAttr(cast<ShardingAttr>(s));
      fixed.insert(value);
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}

TensorSharding ShardingAnalysis::get(Value v) const {
  auto it = shardings.find(v);
  return it != shardings.end() ? it->second
                               : TensorSharding::replicated(rankOf(v));
}

TensorSharding ShardingAnalysis::effective(Value v) const {
  TensorSharding s = get(v);
  if (!s.isPartial())
    return s;
  auto it = resolved.find(v);
  return it != resolved.end() ? it->second : s.withoutPartial();
}

SmallVector<AxisList>
ShardingAnalysis::factorAxes(Operation *op, const ShardingRule &rule) const {
  SmallVector<AxisList> axes(rule.factors.size());
  SmallVector<StringAttr> used;
  // A factor that is the minor part of a merged dimension of any of the
  // op's values (a reshape [T*B, C] -> [T, B, C]'s b) cannot be split: that
  // value would hold it whole while the others hold a block, and the local
  // op would not compute its block (the reshape would meet a whole [T*B]
  // and a result of B/n). Such a result is computed whole and sliced.
  SmallVector<bool> minor(rule.factors.size(), false);
  for (const auto *values : {&rule.operands, &rule.results})
    for (const ShardingRule::ValueFactors &dims : *values)
      for (const auto &factors : dims)
        for (size_t k = 1; k < factors.size(); ++k)
          minor[factors[k]] = true;
  auto offer = [&](const ShardingRule::ValueFactors &dims,
                   const TensorSharding &s) {
    for (size_t d = 0; d < dims.size() && d < s.dims.size(); ++d) {
      const AxisList &split = s.dims[d];
      if (split.empty() || dims[d].empty())
        continue;
      int64_t f = dims[d].front();
      const ShardingRule::Factor &factor = rule.factors[f];
      if (factor.kind == ShardingRule::Kind::Whole || !axes[f].empty() ||
          minor[f])
        continue;
      if (llvm::any_of(split,
                       [&](StringAttr a) { return llvm::is_contained(used, a); }))
        continue;
      if (factor.size % axesSize(mesh, split) != 0)
        continue;
      axes[f] = split;
      llvm::append_range(used, split);
    }
  };
  for (auto [i, dims] : llvm::enumerate(rule.operands))
    if (decided.contains(op->getOperand(i)))
      offer(dims, effective(op->getOperand(i)));
  for (auto [r, dims] : llvm::enumerate(rule.results))
    offer(dims, get(op->getResult(r)));
  for (auto [i, dims] : llvm::enumerate(rule.operands))
    if (!decided.contains(op->getOperand(i)))
      offer(dims, effective(op->getOperand(i)));
  return axes;
}

TensorSharding
ShardingAnalysis::project(const ShardingRule::ValueFactors &dims,
                          ArrayRef<AxisList> factorAxes) const {
  TensorSharding s = TensorSharding::replicated(dims.size());
  for (auto [d, factors] : llvm::enumerate(dims)) {
    if (factors.empty())
      continue;
    // Only the major factor of a merged dimension may be split: a split
    // minor factor is not a block layout of the dimension.
    bool minorSplit = llvm::any_of(llvm::drop_begin(factors), [&](int64_t f) {
      return !factorAxes[f].empty();
    });
    if (!minorSplit)
      s.dims[d] = factorAxes[factors.front()];
  }
  return s;
}

TensorSharding ShardingAnalysis::resultSharding(Operation *op,
                                                const ShardingRule &rule,
                                                ArrayRef<AxisList> factorAxes,
                                                unsigned result) const {
  TensorSharding s = project(rule.results[result], factorAxes);
  for (auto [f, factor] : llvm::enumerate(rule.factors))
    if ((factor.kind == ShardingRule::Kind::Sum ||
         factor.kind == ShardingRule::Kind::Mean) &&
        !factorAxes[f].empty())
      llvm::append_range(s.partial, factorAxes[f]);
  // A sum pending in every operand stays pending in the result, unless
  // an operand is resolved anyway for another user: then its sum is
  // taken once, and this op reads the resolved value. A scalar addend
  // without a pending sum joins one as its share (each rank adds 1/n of
  // it), so a sum of scalars (a gradient norm over split and whole
  // parameters) is reduced once, not once per split term.
  auto onlyLinearUsers = [](Value v) {
    return llvm::all_of(v.getUsers(), [](Operation *user) {
      std::optional<ShardingRule> rule = getRule(user);
      return rule && rule->additive;
    });
  };
  if (rule.additive && op->getNumOperands() > 0) {
    SmallVector<Value> pending;
    for (Value operand : op->getOperands())
      if (get(operand).isPartial())
        pending.push_back(operand);
    bool scalarsJoin = isa<AddOp, SubOp>(op) && s.rank() == 0;
    if (!pending.empty() &&
        (pending.size() == op->getNumOperands() || scalarsJoin) &&
        llvm::all_of(pending, onlyLinearUsers)) {
      // Pending in every such operand: they reduce the other axes first.
      AxisList shared = get(pending.front()).partial;
      for (Value operand : llvm::drop_begin(pending))
        llvm::erase_if(shared, [&](StringAttr a) {
          return !llvm::is_contained(get(operand).partial, a);
        });
      for (StringAttr a : shared)
        if (!s.usesAxis(a))
          s.partial.push_back(a);
    }
  }
  return s;
}

bool ShardingAnalysis::refine(Value v, const TensorSharding &proposal,
                              llvm::DenseMap<Value, TensorSharding> &map) {
  auto it = map.find(v);
  TensorSharding old = it != map.end()      ? it->second
                       : &map == &resolved ? get(v).withoutPartial()
                                           : get(v);
  if (proposal == old || proposal.rank() != old.rank() || !isValid(proposal))
    return false;
  for (auto [o, p] : llvm::zip_equal(old.dims, proposal.dims))
    if (!isPrefix(o, p))
      return false;
  for (StringAttr a : old.partial)
    if (!llvm::is_contained(proposal.partial, a))
      return false;
  map[v] = proposal;
  return true;
}

/// Whether `v` may be split because a consumer wants it: integers (token
/// ids, labels) are split only as their producers compute them, since a
/// consumer that needs them whole again could not gather them (collectives
/// carry floats); a consumer that wants them split slices them locally.
static bool carriesFloats(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

bool ShardingAnalysis::update(Operation *op) {
  if (auto as = dyn_cast<ShardAsOp>(op)) {
    // A constraint on a pending sum says how to resolve it (ZeRO-2's
    // gradients are reduce-scattered, not all-reduced and sliced). On
    // another value it is a wish its producer may follow (sequence
    // parallelism's split residual stream is asked for where layer norms
    // read it, and the adds before compute on the split).
    TensorSharding want =
        TensorSharding::fromAttr(as.getSharding()).withoutPartial();
    if (get(as.getInput()).isPartial())
      return refine(as.getInput(), want, resolved);
    if (fixed.contains(as.getInput()) || as->hasAttr(kRematerializeAttrName))
      return false;
    return refine(as.getInput(), want, shardings);
  }
  bool changed = false;
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
      auto attr = fn.getResultAttrOfType<ShardingAttr>(i, kShardingAttrName);
      if (!attr)
        continue;
      TensorSharding want = TensorSharding::fromAttr(attr).withoutPartial();
      if (get(value).isPartial())
        changed |= refine(value, want, resolved);
      else if (!fixed.contains(value))
        changed |= refine(value, want, shardings);
    }
    return changed;
  }
  std::optional<ShardingRule> rule = getRule(op);
  if (!rule)
    return false;
  SmallVector<AxisList> axes = factorAxes(op, *rule);
  for (unsigned r = 0; r < op->getNumResults(); ++r) {
    Value result = op->getResult(r);
    if (!fixed.contains(result) && isa<RankedTensorType>(result.getType()))
      changed |= refine(result, resultSharding(op, *rule, axes, r), shardings);
  }
  TensorSharding produced = op->getNumResults() == 1
                               ? resultSharding(op, *rule, axes, 0)
                               : TensorSharding();
  for (auto [i, operand] : llvm::enumerate(op->getOperands())) {
    if (!isa<RankedTensorType>(operand.getType()))
      continue;
    TensorSharding want = project(rule->operands[i], axes);
    if (get(operand).isPartial()) {
      if (keptPartial(*rule, op->getNumResults(), get(operand), want,
                      produced)
              .empty())
        changed |= refine(operand, want, resolved);
    } else if (!fixed.contains(operand) && carriesFloats(operand)) {
      changed |= refine(operand, want, shardings);
    }
  }
  return changed;
}

void ShardingAnalysis::run() {
  SmallVector<Operation *> ops;
  fn.walk([&](Operation *op) { ops.push_back(op); });
  for (Operation *op : ops)
    if (auto as = dyn_cast<ShardAsOp>(op))
      if (auto prefer = as->getAttrOfType<ShardingAttr>(kPreferAttrName)) {
        if (!fixed.contains(as.getInput()))
          refine(as.getInput(), TensorSharding::fromAttr(prefer), shardings);
        decided.insert(as.getResult());
        // Back to the ops that compute it (a weight gradient is often a
        // transpose of a batched matmul summed over the batch; a tied
        // weight's, the sum of its uses' gradients).
        SmallVector<Operation *> work{as.getInput().getDefiningOp()};
        while (!work.empty()) {
          Operation *def = work.pop_back_val();
          if (!def || !isa<TransposeOp, ReshapeOp, CastOp, ReduceSumOp, AddOp>(def))
            continue;
          update(def);
          for (Value operand : def->getOperands())
            work.push_back(operand.getDefiningOp());
        }
      }
  for (Operation *op : ops) {
    bool fromDecided = op->getNumOperands() > 0;
    for (Value operand : op->getOperands())
      fromDecided &= decided.contains(operand);
    if (fromDecided)
      for (Value result : op->getResults())
        decided.insert(result);
  }
  // Each round adds at least one split somewhere; a step has finitely many.
  for (int round = 0; round < 64; ++round) {
    bool changed = false;
    for (Operation *op : ops)
      changed |= update(op);
    for (Operation *op : llvm::reverse(ops))
      changed |= update(op);
    if (!changed)
      return;
  }
}
