//===- OptimizerSteps.h - The steps of a training step ----------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// --weft-optimizer builds @train_step from four steps with seams between
// them, because the parallel passes each cut in at one of them:
//
//   accumulateGradients   micro-batches -> mean loss and gradients
//                         (a pipeline schedule will own this loop)
//   gradientSquares       per-parameter sums of squares -> global norm
//   clipGradients         (clipping across ranks all-reduces the sum of
//                         squares between these two)
//   scheduleLearningRate  lr, step -> lr_t
//   UpdateRule::update    parameter, gradient, state -> next values
//                         (ZeRO reduce-scatters gradients before it and
//                         all-gathers parameters after it)
//
// Each step is a function of values, not of argument positions; the pass
// (Optimizer.cpp) owns the signature and wires the steps together.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_TRANSFORMS_TRAIN_OPTIMIZERSTEPS_H
#define WEFT_LIB_TRANSFORMS_TRAIN_OPTIMIZERSTEPS_H

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <memory>
#include <optional>
#include <string>

namespace weft {
namespace train {

/// Scalar f32 arithmetic on 0-d tensors and elementwise arithmetic with
/// broadcasting; keeps the update rules readable.
class Emitter {
public:
  Emitter(mlir::OpBuilder &b, mlir::Location loc) : b(b), loc(loc) {}
  mlir::OpBuilder &builder() { return b; }
  mlir::Location location() const { return loc; }
  /// A 0-d constant, f32 unless `type` says otherwise.
  mlir::Value c(double v, mlir::FloatType type = {});
  /// A 0-d i64 constant.
  mlir::Value i64(int64_t v);
  /// `x` with element type `type`.
  mlir::Value convert(mlir::Value x, mlir::Type type);
  mlir::Value add(mlir::Value x, mlir::Value y);
  mlir::Value sub(mlir::Value x, mlir::Value y);
  mlir::Value mul(mlir::Value x, mlir::Value y);
  mlir::Value div(mlir::Value x, mlir::Value y);
  mlir::Value min(mlir::Value x, mlir::Value y);
  mlir::Value max(mlir::Value x, mlir::Value y);
  mlir::Value sqrt(mlir::Value x);
  mlir::Value pow(mlir::Value x, mlir::Value y);
  mlir::Value cos(mlir::Value x);
  mlir::Value sumAll(mlir::Value x);
  mlir::Value less(mlir::Value x, mlir::Value y);
  mlir::Value select(mlir::Value cond, mlir::Value x, mlir::Value y);

private:
  mlir::OpBuilder &b;
  mlir::Location loc;
};

/// Optimizer and schedule hyperparameters: constants by default, or, with
/// `runtime-hyperparameters`, 0-d f64 inputs `hp.<name>` so the executable
/// can change them without recompiling. f64 like Python floats in
/// torch.optim, rounded to f32 where they meet tensors.
class Hyperparameters {
public:
  struct Entry {
    std::string name;
    double value;
    mlir::Value f64, f32;
  };

  void add(llvm::StringRef name, double value) {
    entries.push_back({name.str(), value, {}, {}});
  }
  llvm::ArrayRef<Entry> getEntries() const { return entries; }
  /// Binds the entries, in order, to `args` (one per entry), or to
  /// constants when `args` is empty.
  void materialize(Emitter &e, mlir::ValueRange args);
  mlir::Value f32(llvm::StringRef name) const { return lookup(name).f32; }
  mlir::Value f64(llvm::StringRef name) const { return lookup(name).f64; }

private:
  const Entry &lookup(llvm::StringRef name) const;
  llvm::SmallVector<Entry> entries;
};

/// The options of --weft-optimizer, checked, with PyTorch's defaults
/// resolved. The one place that knows them.
struct OptimizerConfig {
  std::string optimizer = "adamw";
  double momentum = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool nesterov = false;
  /// < 0: the optimizer's default (see weightDecay()).
  double weightDecayOption = -1;
  double clipNorm = 0;
  int64_t accumSteps = 1;
  std::string schedule = "constant";
  int64_t warmupSteps = 0, totalSteps = 0;
  double minLrRatio = 0;
  bool runtimeHyperparameters = false;

  /// torch.optim's defaults: 0.01 for AdamW, 0 for SGD.
  double weightDecay() const {
    return weightDecayOption >= 0 ? weightDecayOption
                                  : (optimizer == "adamw" ? 0.01 : 0.0);
  }
  /// An error message when an option is out of range, else empty.
  std::string check() const;
  /// The entries of the module's `weft.train_config` this config sets.
  llvm::SmallVector<mlir::NamedAttribute>
  describe(mlir::Builder &b) const;
};

/// What one step's forward and backward passes produced, averaged over its
/// micro-batches as `loss / K` per backward does.
struct StepGradients {
  mlir::Value loss;
  /// One per parameter, in @loss_grad's parameter order.
  llvm::SmallVector<mlir::Value> grads;
  /// Next values of the buffers the forward updates (BatchNorm's running
  /// statistics), by name, after the last micro-batch.
  llvm::SmallVector<std::pair<mlir::StringAttr, mlir::Value>> buffers;
};

/// How the step's values feed @loss_grad.
struct GradientInputs {
  /// One value per @loss_grad argument; batch inputs hold all K
  /// micro-batches along axis 0, the random-stream argument is null.
  llvm::SmallVector<mlir::Value> operands;
  /// Which @loss_grad arguments are batch inputs.
  llvm::SmallVector<bool> isBatch;
  /// @loss_grad's random-stream argument, and the step's seed.
  std::optional<unsigned> rngArg;
  mlir::Value seed;
  mlir::Value step;
};

/// Calls @loss_grad once per micro-batch (slices of the batch inputs along
/// axis 0), chaining updated buffers from one micro-batch to the next as
/// PyTorch does, and returns the mean loss and gradients. Each micro-batch
/// draws its own dropout masks: rng = seed * 2^32 + step * K + k.
StepGradients accumulateGradients(Emitter &e, mlir::func::FuncOp gradFn,
                                  const GradientInputs &inputs,
                                  int64_t accumSteps);

/// sum(g * g) over every gradient: the partial sum a sharded step
/// all-reduces before taking the root.
mlir::Value gradientSquares(Emitter &e, llvm::ArrayRef<mlir::Value> grads);

/// torch.nn.utils.clip_grad_norm_: scales every gradient by
/// min(1, maxNorm / (norm + 1e-6)).
void clipGradients(Emitter &e, llvm::MutableArrayRef<mlir::Value> grads,
                   mlir::Value norm, mlir::Value maxNorm);

/// lr_t for the 0-based step (f32), as torch.optim.lr_scheduler.LambdaLR
/// with the warmup and cosine factors of docs/training.md.
mlir::Value scheduleLearningRate(Emitter &e, const OptimizerConfig &config,
                                 const Hyperparameters &hp, mlir::Value lr,
                                 mlir::Value stepF);

/// One optimizer's update, operation for operation as torch.optim 1.13's
/// single-tensor path.
class UpdateRule {
public:
  virtual ~UpdateRule();
  /// State tensors per parameter ("exp_avg", ...), zero at step 0.
  virtual llvm::SmallVector<std::string> stateKinds() const = 0;
  /// Registers the hyperparameters the rule reads, in a fixed order.
  virtual void addHyperparameters(Hyperparameters &hp) const = 0;
  /// Per-step scalars shared by every parameter (AdamW's bias
  /// corrections), emitted once before the updates.
  virtual void prepare(Emitter &e, const Hyperparameters &hp, mlir::Value lrT,
                       mlir::Value step) {}
  /// The next value of parameter `w` with gradient `g`; `state` holds its
  /// state tensors (stateKinds() order) and receives their next values.
  virtual mlir::Value update(Emitter &e, const Hyperparameters &hp,
                             mlir::Value lrT, mlir::Value w, mlir::Value g,
                             llvm::MutableArrayRef<mlir::Value> state) = 0;
};

/// The rule `config.optimizer` names (sgd or adamw).
std::unique_ptr<UpdateRule> createUpdateRule(const OptimizerConfig &config);

} // namespace train
} // namespace weft

#endif // WEFT_LIB_TRANSFORMS_TRAIN_OPTIMIZERSTEPS_H
