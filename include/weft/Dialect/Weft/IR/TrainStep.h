//===- TrainStep.h - The step contract on func.func -------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Reads and writes the roles of weft/Formats/StepContract.h as argument and
// result attributes (`{weft.param = "fc.weight"}`). Every pass that builds
// or rewrites a step (autodiff, the optimizer steps, the partitioner), the
// descriptor and the tools go through these, never through raw attribute
// strings or argument positions.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DIALECT_WEFT_IR_TRAINSTEP_H
#define WEFT_DIALECT_WEFT_IR_TRAINSTEP_H

#include "weft/Formats/StepContract.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"

#include <optional>

namespace weft {

/// The role of argument `i` of `fn` and its name, if it has one.
std::optional<contract::Slot> getArgSlot(mlir::func::FuncOp fn, unsigned i);
/// The role of result `i` of `fn` and its name, if it has one.
std::optional<contract::Slot> getResultSlot(mlir::func::FuncOp fn, unsigned i);

/// The name of argument `i` if it has `role`, else a null attribute.
mlir::StringAttr getArgName(mlir::func::FuncOp fn, unsigned i,
                            contract::Role role);
mlir::StringAttr getResultName(mlir::func::FuncOp fn, unsigned i,
                               contract::Role role);

/// Gives argument / result `i` the role `role` named `name`, dropping any
/// other role it had (a parameter that becomes a buffer, say).
void setArgSlot(mlir::func::FuncOp fn, unsigned i, contract::Role role,
                llvm::StringRef name);
void setResultSlot(mlir::func::FuncOp fn, unsigned i, contract::Role role,
                   llvm::StringRef name);

/// `{weft.<role> = "name"}`, for functions built from scratch.
mlir::DictionaryAttr getSlotAttrs(mlir::Builder &b, contract::Role role,
                                  llvm::StringRef name);

/// Whether argument `i` of `fn` is the runtime context a step that
/// communicates takes (`weft.context`, --weft-lower-collectives): no slot.
bool isContextArg(mlir::func::FuncOp fn, unsigned i);

/// Every argument and result of `fn` by role, skipping the context argument
/// (so `args` follows the arguments after it). An argument without a role is
/// an input named "arg<i>", a result without one an output "result<i>"
/// (what the runtime will call them). Fails, with an error on `fn`, when a
/// slot carries two roles or a role whose value is not a string.
mlir::FailureOr<contract::StepSignature>
readStepSignature(mlir::func::FuncOp fn);

/// The layer a parameter's name numbers: its first dot-separated part that
/// is a number (3 for "h.3.attn.c_attn.weight", none for "wte.weight"), as
/// PyTorch's state_dict and weft-modelgen name repeated blocks. The planner
/// counts blocks by it and pipeline stages are cut between them.
std::optional<int64_t> getLayerNumber(llvm::StringRef paramName);

/// The layer's name: the parameter's name up to and including the part
/// getLayerNumber reads ("h.3" for "h.3.attn.c_attn.weight"; empty when it
/// numbers none), as --recompute-layers names layers.
llvm::StringRef getLayerPrefix(llvm::StringRef paramName);

/// Merges `entries` into the module's `weft.train_config` dictionary: each
/// training pass records the options it was built with, so an executable
/// compiled later from the IR describes how it trains.
void recordTrainConfig(mlir::ModuleOp module,
                       llvm::ArrayRef<mlir::NamedAttribute> entries);

/// Appends arguments or results one slot at a time and remembers where each
/// went, so the function's builder never computes positions.
class SignatureBuilder {
public:
  /// Adds a slot; returns its index.
  unsigned add(mlir::Type type, mlir::DictionaryAttr attrs) {
    types.push_back(type);
    this->attrs.push_back(attrs);
    return types.size() - 1;
  }
  unsigned add(mlir::Builder &b, mlir::Type type, contract::Role role,
               llvm::StringRef name) {
    return add(type, getSlotAttrs(b, role, name));
  }
  llvm::ArrayRef<mlir::Type> getTypes() const { return types; }
  llvm::ArrayRef<mlir::DictionaryAttr> getAttrs() const { return attrs; }
  size_t size() const { return types.size(); }

private:
  llvm::SmallVector<mlir::Type> types;
  llvm::SmallVector<mlir::DictionaryAttr> attrs;
};

} // namespace weft

#endif // WEFT_DIALECT_WEFT_IR_TRAINSTEP_H
