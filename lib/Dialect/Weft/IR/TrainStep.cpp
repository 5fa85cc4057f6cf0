//===- TrainStep.cpp - The step contract on func.func ---------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"

using namespace mlir;
using namespace weft;
using contract::Role;

namespace {
/// The one role in `attrs`, if any; failure when there are two or when its
/// value is not a string.
FailureOr<std::optional<contract::Slot>> slotOf(DictionaryAttr attrs) {
  std::optional<contract::Slot> slot;
  if (!attrs)
    return slot;
  for (Role role : contract::kAllRoles) {
    Attribute value = attrs.get(contract::roleAttrName(role));
    if (!value)
      continue;
    auto name = dyn_cast<StringAttr>(value);
    if (!name || slot)
      return failure();
    slot = contract::Slot{role, name.str()};
  }
  return slot;
}

void setSlot(func::FuncOp fn, unsigned i, Role role, StringRef name,
             bool result) {
  MLIRContext *ctx = fn.getContext();
  for (Role other : contract::kAllRoles) {
    auto key = StringAttr::get(ctx, contract::roleAttrName(other));
    if (result)
      fn.removeResultAttr(i, key);
    else
      fn.removeArgAttr(i, key);
  }
  auto key = StringAttr::get(ctx, contract::roleAttrName(role));
  auto value = StringAttr::get(ctx, name);
  if (result)
    fn.setResultAttr(i, key, value);
  else
    fn.setArgAttr(i, key, value);
}
} // namespace

std::optional<contract::Slot> weft::getArgSlot(func::FuncOp fn, unsigned i) {
  FailureOr<std::optional<contract::Slot>> slot = slotOf(fn.getArgAttrDict(i));
  return succeeded(slot) ? *slot : std::nullopt;
}

std::optional<contract::Slot> weft::getResultSlot(func::FuncOp fn,
                                                  unsigned i) {
  FailureOr<std::optional<contract::Slot>> slot =
      slotOf(fn.getResultAttrDict(i));
  return succeeded(slot) ? *slot : std::nullopt;
}

StringAttr weft::getArgName(func::FuncOp fn, unsigned i, Role role) {
  return fn.getArgAttrOfType<StringAttr>(i, contract::roleAttrName(role));
}

StringAttr weft::getResultName(func::FuncOp fn, unsigned i, Role role) {
  return fn.getResultAttrOfType<StringAttr>(i, contract::roleAttrName(role));
}

void weft::setArgSlot(func::FuncOp fn, unsigned i, Role role, StringRef name) {
  setSlot(fn, i, role, name, /*result=*/false);
}

void weft::setResultSlot(func::FuncOp fn, unsigned i, Role role,
                         StringRef name) {
  setSlot(fn, i, role, name, /*result=*/true);
}

DictionaryAttr weft::getSlotAttrs(Builder &b, Role role, StringRef name) {
  return b.getDictionaryAttr(
      b.getNamedAttr(contract::roleAttrName(role), b.getStringAttr(name)));
}

bool weft::isContextArg(func::FuncOp fn, unsigned i) {
  return fn.getArgAttr(i, WeftDialect::kContextAttrName) != nullptr;
}

FailureOr<contract::StepSignature> weft::readStepSignature(func::FuncOp fn) {
  contract::StepSignature signature;
  auto read = [&](DictionaryAttr attrs, bool result, unsigned i,
                  std::vector<contract::Slot> &out) -> LogicalResult {
    FailureOr<std::optional<contract::Slot>> slot = slotOf(attrs);
    if (failed(slot))
      return fn.emitError() << (result ? "result #" : "argument #") << i
                            << " of @" << fn.getSymName()
                            << " needs exactly one role attribute with a "
                               "string name (weft.param, weft.state, "
                               "weft.buffer, weft.input, weft.grad or "
                               "weft.output), got "
                            << attrs;
    if (*slot)
      out.push_back(std::move(**slot));
    else if (result)
      out.push_back({Role::Output, "result" + std::to_string(i)});
    else
      out.push_back({Role::Input, "arg" + std::to_string(i)});
    return success();
  };
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (!isContextArg(fn, i) &&
        failed(read(fn.getArgAttrDict(i), false, i, signature.args)))
      return failure();
  for (unsigned i = 0, e = fn.getNumResults(); i < e; ++i)
    if (failed(read(fn.getResultAttrDict(i), true, i, signature.results)))
      return failure();
  return signature;
}

void weft::recordTrainConfig(ModuleOp module,
                             ArrayRef<NamedAttribute> entries) {
  NamedAttrList merged;
  if (auto existing = module->getAttrOfType<DictionaryAttr>(
          WeftDialect::kTrainConfigAttrName))
    merged.append(existing.getValue());
  for (NamedAttribute entry : entries)
    merged.set(entry.getName(), entry.getValue());
  module->setAttr(WeftDialect::kTrainConfigAttrName,
                  merged.getDictionary(module.getContext()));
}

llvm::StringRef weft::getLayerPrefix(llvm::StringRef paramName) {
  llvm::SmallVector<llvm::StringRef> parts;
  paramName.split(parts, '.');
  size_t end = 0;
  for (llvm::StringRef p : parts) {
    end += p.size();
    int64_t n;
    if (!p.empty() && !p.getAsInteger(10, n))
      return paramName.take_front(end);
    ++end;
  }
  return {};
}

std::optional<int64_t> weft::getLayerNumber(llvm::StringRef paramName) {
  llvm::StringRef layer = getLayerPrefix(paramName);
  int64_t n;
  if (layer.empty() || layer.rsplit('.').second.getAsInteger(10, n))
    return std::nullopt;
  return n;
}
