//===- ModelLayers.cpp - The layers of a model's @forward -----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/ModelLayers.h"
#include "weft/Dialect/Weft/IR/TrainStep.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace weft;

llvm::DenseSet<Operation *> weft::findWeightOps(func::FuncOp forward) {
  llvm::DenseSet<Operation *> weightOps;
  auto isWeight = [&](Value v) {
    if (auto arg = dyn_cast<BlockArgument>(v))
      return getArgName(forward, arg.getArgNumber(), contract::Role::Param) ||
             getArgName(forward, arg.getArgNumber(), contract::Role::Buffer);
    Operation *def = v.getDefiningOp();
    return def &&
           (def->hasTrait<OpTrait::ConstantLike>() || weightOps.contains(def));
  };
  for (Operation &op : forward.front().without_terminator())
    if (!op.hasTrait<OpTrait::ConstantLike>() && op.getNumRegions() == 0 &&
        op.getNumResults() != 0 && op.getNumOperands() != 0 &&
        isMemoryEffectFree(&op) && llvm::all_of(op.getOperands(), isWeight))
      weightOps.insert(&op);
  return weightOps;
}

size_t weft::lastReader(Value v, size_t made,
                        const llvm::DenseMap<Operation *, size_t> &position,
                        size_t end) {
  size_t last = made;
  for (Operation *user : v.getUsers())
    if (auto it = position.find(user); it != position.end())
      last = std::max(last, it->second);
    else if (isa<func::ReturnOp>(user))
      last = end;
  return last;
}

namespace {
/// The module a parameter belongs to: its name up to the last dot.
StringRef moduleOf(StringRef name) {
  size_t dot = name.rfind('.');
  return dot == StringRef::npos || dot == 0 ? StringRef()
                                            : name.take_front(dot);
}

} // namespace

std::vector<int64_t>
weft::liveNonFloatValues(ArrayRef<Operation *> ops,
                         const llvm::DenseMap<Operation *, size_t> &position) {
  std::vector<int64_t> live(ops.size() + 2, 0);
  for (auto [i, op] : llvm::enumerate(ops))
    for (Value result : op->getResults()) {
      // Unranked too: the importer's ONNX nodes, before shapes are known.
      auto tensor = dyn_cast<TensorType>(result.getType());
      if (tensor && isa<FloatType>(tensor.getElementType()))
        continue;
      size_t last = lastReader(result, i, position, ops.size());
      if (last > i) {
        ++live[i + 1];
        --live[last + 1];
      }
    }
  for (size_t i = 1; i < live.size(); ++i)
    live[i] += live[i - 1];
  live.pop_back();
  return live;
}

ModelLayers weft::getModelLayers(func::FuncOp forward) {
  if (forward.isExternal())
    return getModelLayers(forward, {});
  return getModelLayers(forward, findWeightOps(forward));
}

ModelLayers weft::getModelLayers(func::FuncOp forward,
                                 const llvm::DenseSet<Operation *> &weightOps) {
  ModelLayers out;
  out.ofArg.assign(forward.getNumArguments(), -1);
  if (forward.isExternal())
    return out;
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (StringAttr name = getArgName(forward, i, contract::Role::Param))
      out.numbered |= !getLayerPrefix(name.getValue()).empty();
  auto keyOf = [&](StringRef name) {
    return out.numbered ? getLayerPrefix(name) : moduleOf(name);
  };

  // The ops that compute, in order (constants and views of weights run
  // wherever they are read), and the parameters each reads, through views.
  llvm::DenseMap<Value, llvm::SmallVector<unsigned, 2>> rootsOf;
  // The arguments `op` reads, directly or through views of weights.
  auto argsRead = [&](Operation *op) {
    llvm::SmallVector<unsigned, 4> roots;
    for (Value v : op->getOperands()) {
      if (auto arg = dyn_cast<BlockArgument>(v))
        roots.push_back(arg.getArgNumber());
      else if (auto it = rootsOf.find(v); it != rootsOf.end())
        roots.append(it->second.begin(), it->second.end());
    }
    return roots;
  };
  llvm::SmallVector<Operation *> ops;
  llvm::DenseMap<Operation *, size_t> position;
  for (Operation &op : forward.front().without_terminator()) {
    if (op.hasTrait<OpTrait::ConstantLike>())
      continue;
    if (weightOps.contains(&op)) {
      llvm::SmallVector<unsigned, 4> roots = argsRead(&op);
      for (Value r : op.getResults())
        rootsOf[r].assign(roots.begin(), roots.end());
      continue;
    }
    position[&op] = ops.size();
    ops.push_back(&op);
  }
  const std::vector<int64_t> liveInts = liveNonFloatValues(ops, position);

  llvm::StringMap<int> layerOfKey;
  for (auto [i, op] : llvm::enumerate(ops)) {
    int opened = -1;
    for (unsigned a : argsRead(op)) {
      StringAttr name = getArgName(forward, a, contract::Role::Param);
      StringRef key = name ? keyOf(name.getValue()) : StringRef();
      if (key.empty() || layerOfKey.count(key))
        continue;
      if (opened < 0) {
        if (out.names.empty() || liveInts[i] == 0) {
          opened = int(out.names.size());
          out.names.emplace_back();
        } else {
          opened = int(out.names.size()) - 1;
        }
      }
      layerOfKey[key] = opened;
      out.names[size_t(opened)].push_back(key.str());
    }
  }
  for (unsigned i = 0; i < forward.getNumArguments(); ++i)
    if (StringAttr name = getArgName(forward, i, contract::Role::Param))
      if (auto it = layerOfKey.find(keyOf(name.getValue()));
          it != layerOfKey.end())
        out.ofArg[i] = it->second;
  return out;
}
