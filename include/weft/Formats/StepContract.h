//===- StepContract.h - The training step's signature, by role --*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Every argument and result of a training step has a role (a parameter, an
// optimizer state tensor, a batch input, ...) and a name. The compiler
// writes them as IR attributes (`weft.param = "fc.weight"`), the descriptor
// as kind strings ("param") and the runtime reads them back; the
// partitioner, the stage splitter and ZeRO will rewrite them. This header is
// the one vocabulary they share. It knows no MLIR (the runtime includes it);
// weft/Dialect/Weft/IR/TrainStep.h reads and writes it on functions.
//
// The step the optimizer builds is
//
//   @train_step(param..., state..., input... (batch, buffers), seed?, step,
//               lr, hp.*...) -> (param'..., state'..., buffer'..., loss, lr,
//                                grad_norm)
//
// but no reader may rely on that order: they look slots up by role and name.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_FORMATS_STEPCONTRACT_H
#define WEFT_FORMATS_STEPCONTRACT_H

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace weft {
namespace contract {

/// What an argument or result of a step function is.
enum class Role {
  /// A trainable tensor, named as in PyTorch's state_dict ("fc.weight").
  Param,
  /// Optimizer state of one parameter ("exp_avg.fc.weight").
  State,
  /// A tensor loaded with the weights but not trained (a PyTorch buffer).
  Buffer,
  /// Data fed per step: batch inputs and the step's own scalars (`step`,
  /// `lr`, `seed`, `hp.<name>`).
  Input,
  /// A gradient result of @loss_grad, named like its parameter.
  Grad,
  /// A named result that is not a next value (`loss`, `lr`, `grad_norm`).
  Output,
};

inline constexpr Role kAllRoles[] = {Role::Param, Role::State, Role::Buffer,
                                     Role::Input, Role::Grad,  Role::Output};

/// The role's kind string in the ABI ("param") and, prefixed with "weft.",
/// its IR attribute.
inline constexpr const char *roleName(Role role) {
  switch (role) {
  case Role::Param:
    return "param";
  case Role::State:
    return "state";
  case Role::Buffer:
    return "buffer";
  case Role::Input:
    return "input";
  case Role::Grad:
    return "grad";
  case Role::Output:
    return "output";
  }
  return "";
}

inline std::optional<Role> parseRole(std::string_view kind) {
  for (Role role : kAllRoles)
    if (kind == roleName(role))
      return role;
  return std::nullopt;
}

// IR attribute names of the roles.
inline constexpr char kParamAttr[] = "weft.param";
inline constexpr char kStateAttr[] = "weft.state";
inline constexpr char kBufferAttr[] = "weft.buffer";
inline constexpr char kInputAttr[] = "weft.input";
inline constexpr char kGradAttr[] = "weft.grad";
inline constexpr char kOutputAttr[] = "weft.output";

inline constexpr const char *roleAttrName(Role role) {
  switch (role) {
  case Role::Param:
    return kParamAttr;
  case Role::State:
    return kStateAttr;
  case Role::Buffer:
    return kBufferAttr;
  case Role::Input:
    return kInputAttr;
  case Role::Grad:
    return kGradAttr;
  case Role::Output:
    return kOutputAttr;
  }
  return "";
}

// Inputs the step owns (not data): the 0-based step (i64), the base
// learning rate (f32), the run's seed (i64, models with dropout), and the
// run-time hyperparameters `hp.<name>` (f64).
inline constexpr char kStepInput[] = "step";
inline constexpr char kLrInput[] = "lr";
inline constexpr char kSeedInput[] = "seed";
inline constexpr char kHyperPrefix[] = "hp.";
/// The forward's random-stream input (weft.dropout's seed), computed by the
/// step from `seed` and `step`; never an input of the step itself.
inline constexpr char kRngInput[] = "rng";

// Outputs of the step: the loss averaged over micro-batches, the learning
// rate the schedule applied, the global gradient norm before clipping.
inline constexpr char kLossOutput[] = "loss";
inline constexpr char kLrOutput[] = "lr";
inline constexpr char kGradNormOutput[] = "grad_norm";

/// Optimizer state names: "<kind>.<param>", e.g. "exp_avg.fc.weight".
inline std::string stateName(std::string_view kind, std::string_view param) {
  return std::string(kind) + "." + std::string(param);
}

/// True for inputs the step owns rather than data read from files.
inline bool isStepOwnedInput(std::string_view name) {
  return name == kStepInput || name == kLrInput || name == kSeedInput ||
         name == kRngInput ||
         name.substr(0, sizeof(kHyperPrefix) - 1) == kHyperPrefix;
}

/// One argument or result.
struct Slot {
  Role role = Role::Input;
  std::string name;
};

/// A step function's arguments and results by role. Lookups return an
/// index into `args` / `results`, or -1.
struct StepSignature {
  std::vector<Slot> args, results;

  int findArg(Role role, std::string_view name) const {
    return find(args, role, name);
  }
  int findResult(Role role, std::string_view name) const {
    return find(results, role, name);
  }
  /// Indices of the arguments with `role`, in order.
  std::vector<int> argsWith(Role role) const { return with(args, role); }
  std::vector<int> resultsWith(Role role) const { return with(results, role); }
  /// Batch inputs: inputs that are not the step's own scalars.
  std::vector<int> batchArgs() const {
    std::vector<int> out;
    for (int i = 0, e = int(args.size()); i < e; ++i)
      if (args[i].role == Role::Input && !isStepOwnedInput(args[i].name))
        out.push_back(i);
    return out;
  }
  /// The result carrying the next value of argument `arg` (a parameter,
  /// state, or a buffer the step updates), or -1.
  int nextValueOf(int arg) const {
    const Slot &slot = args[arg];
    if (slot.role != Role::Param && slot.role != Role::State &&
        slot.role != Role::Buffer)
      return -1;
    return findResult(slot.role, slot.name);
  }

private:
  static int find(const std::vector<Slot> &slots, Role role,
                  std::string_view name) {
    for (int i = 0, e = int(slots.size()); i < e; ++i)
      if (slots[i].role == role && slots[i].name == name)
        return i;
    return -1;
  }
  static std::vector<int> with(const std::vector<Slot> &slots, Role role) {
    std::vector<int> out;
    for (int i = 0, e = int(slots.size()); i < e; ++i)
      if (slots[i].role == role)
        out.push_back(i);
    return out;
  }
};

} // namespace contract
} // namespace weft

#endif // WEFT_FORMATS_STEPCONTRACT_H
