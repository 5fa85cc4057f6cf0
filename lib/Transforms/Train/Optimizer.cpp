//===- Optimizer.cpp - Build the training step around the gradients -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Builds @train_step(params, state, batch, step, lr) -> (params', state',
// loss, lr_t, grad_norm) from @loss_grad: owns the signature (through
// TrainStep.h's helpers) and wires together the steps of OptimizerSteps.h.
// The update rules follow torch.optim (1.13, single-tensor path) operation
// for operation so the numbers match it.
//
//===----------------------------------------------------------------------===//

#include "OptimizerSteps.h"

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Train/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

#include <optional>

namespace weft {
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "weft/Transforms/Train/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

struct OptimizerPass : public weft::impl::OptimizerPassBase<OptimizerPass> {
  using OptimizerPassBase::OptimizerPassBase;

  void runOnOperation() override;

private:
  train::OptimizerConfig config() const;
  LogicalResult classifyArguments(func::FuncOp gradFn,
                                  SmallVectorImpl<unsigned> &paramArgs,
                                  SmallVectorImpl<unsigned> &batchArgs,
                                  SmallVectorImpl<unsigned> &otherArgs);
};

train::OptimizerConfig OptimizerPass::config() const {
  train::OptimizerConfig c;
  c.optimizer = optimizer;
  c.momentum = momentum;
  c.nesterov = nesterov;
  c.weightDecayOption = weightDecay;
  c.beta1 = beta1;
  c.beta2 = beta2;
  c.eps = eps;
  c.clipNorm = clipNorm;
  c.accumSteps = accumSteps;
  c.schedule = schedule;
  c.warmupSteps = warmupSteps;
  c.totalSteps = totalSteps;
  c.minLrRatio = minLrRatio;
  c.runtimeHyperparameters = runtimeHyperparameters;
  return c;
}

/// Splits @loss_grad's arguments into parameters, batch inputs and the rest
/// (buffers, the random stream), and checks that the function has the
/// shape --weft-autodiff gives it: (loss: tensor<f32>, one gradient per
/// parameter, typed and tagged like it, next values of buffers).
LogicalResult
OptimizerPass::classifyArguments(func::FuncOp gradFn,
                                 SmallVectorImpl<unsigned> &paramArgs,
                                 SmallVectorImpl<unsigned> &batchArgs,
                                 SmallVectorImpl<unsigned> &otherArgs) {
  using contract::Role;
  for (unsigned i = 0, e = gradFn.getNumArguments(); i < e; ++i) {
    Type type = gradFn.getArgumentTypes()[i];
    if (!isa<RankedTensorType>(type))
      return gradFn.emitError() << "argument #" << i << " has type " << type
                                << "; the training step needs ranked tensors";
    if (Attribute attr = gradFn.getArgAttr(i, WeftDialect::kParamAttrName)) {
      if (!isa<StringAttr>(attr) ||
          cast<RankedTensorType>(type).getElementType() !=
              Float32Type::get(type.getContext()))
        return gradFn.emitError()
               << "parameter argument #" << i << " must be an f32 tensor "
               << "named by a string (f32 master weights), got " << type
               << " named " << attr;
      paramArgs.push_back(i);
    } else if (StringAttr name = getArgName(gradFn, i, Role::Input)) {
      // The random stream is computed by the step, not read from data; the
      // step's other own inputs cannot come from the model.
      if (name.getValue() == contract::kRngInput)
        otherArgs.push_back(i);
      else if (contract::isStepOwnedInput(name.getValue()))
        return gradFn.emitError() << "input '" << name.getValue()
                                  << "' clashes with the training step's own '"
                                  << name.getValue() << "' input";
      else
        batchArgs.push_back(i);
    } else {
      otherArgs.push_back(i);
    }
  }
  if (paramArgs.empty())
    return gradFn.emitError()
           << "no argument has a '" << WeftDialect::kParamAttrName
           << "' attribute: nothing to train";
  unsigned numBufferResults = 0;
  for (unsigned r = paramArgs.size() + 1; r < gradFn.getNumResults(); ++r) {
    StringAttr name = getResultName(gradFn, r, Role::Buffer);
    std::optional<unsigned> arg;
    for (unsigned i : otherArgs)
      if (name && getArgName(gradFn, i, Role::Buffer) == name)
        arg = i;
    if (!name || !arg ||
        gradFn.getArgumentTypes()[*arg] != gradFn.getResultTypes()[r])
      break;
    ++numBufferResults;
  }
  if (gradFn.getNumResults() != paramArgs.size() + 1 + numBufferResults)
    return gradFn.emitError()
           << "expected (loss, one gradient per parameter, next values of "
              "buffers) results, got "
           << gradFn.getNumResults() << " results for " << paramArgs.size()
           << " parameters (a buffer result needs a weft.buffer argument of "
              "the same name and type)";
  auto lossType =
      RankedTensorType::get({}, Float32Type::get(gradFn.getContext()));
  if (gradFn.getResultTypes()[0] != lossType)
    return gradFn.emitError() << "result 0 must be the loss, a tensor<f32>; "
                                 "got "
                              << gradFn.getResultTypes()[0];
  for (auto [k, i] : llvm::enumerate(paramArgs)) {
    StringAttr param = getArgName(gradFn, i, Role::Param);
    StringAttr grad = getResultName(gradFn, k + 1, Role::Grad);
    if (gradFn.getResultTypes()[k + 1] != gradFn.getArgumentTypes()[i] ||
        grad != param)
      return gradFn.emitError()
             << "result " << k + 1 << " must be the gradient of parameter '"
             << param.getValue() << "' (" << gradFn.getArgumentTypes()[i]
             << ", weft.grad = \"" << param.getValue() << "\")";
  }
  return success();
}

void OptimizerPass::runOnOperation() {
  using contract::Role;
  ModuleOp module = getOperation();
  const train::OptimizerConfig cfg = config();
  if (std::string error = cfg.check(); !error.empty()) {
    module.emitError() << error;
    return signalPassFailure();
  }
  auto gradFn = module.lookupSymbol<func::FuncOp>(gradFunction);
  if (!gradFn) {
    module.emitError() << "no @" << gradFunction
                       << " function; run --weft-autodiff first";
    return signalPassFailure();
  }
  if (Operation *existing = module.lookupSymbol(stepFunction)) {
    existing->emitError() << "the module already has a @" << stepFunction
                          << " function";
    return signalPassFailure();
  }
  OpBuilder b(module.getContext());
  Location loc = gradFn.getLoc();

  SmallVector<unsigned> paramArgs, batchArgs, otherArgs;
  if (failed(classifyArguments(gradFn, paramArgs, batchArgs, otherArgs)))
    return signalPassFailure();
  // Dropout's random stream is computed by the step from the run's seed
  // input, not passed in.
  std::optional<unsigned> rngArg;
  for (unsigned i : otherArgs)
    if (StringAttr name = getArgName(gradFn, i, Role::Input);
        name && name.getValue() == contract::kRngInput)
      rngArg = i;
  if (rngArg)
    llvm::erase(otherArgs, *rngArg);
  std::unique_ptr<train::UpdateRule> rule = train::createUpdateRule(cfg);
  SmallVector<std::string> stateKinds = rule->stateKinds();

  // The signature (weft/Formats/StepContract.h): params, optimizer state,
  // batch inputs and buffers, seed, step, lr, hp.*. Each slot's position is
  // recorded as it is added.
  SignatureBuilder args;
  SmallVector<unsigned> paramSlots;
  SmallVector<SmallVector<unsigned>> stateSlots(stateKinds.size());
  for (unsigned i : paramArgs)
    paramSlots.push_back(
        args.add(gradFn.getArgumentTypes()[i], gradFn.getArgAttrDict(i)));
  for (auto [k, kind] : llvm::enumerate(stateKinds))
    for (unsigned i : paramArgs) {
      // State shaped like a parameter held as a view is held the same way.
      NamedAttrList attrs(getSlotAttrs(
          b, Role::State,
          contract::stateName(kind,
                              getArgName(gradFn, i, Role::Param).getValue())));
      if (Attribute stored =
              gradFn.getArgAttr(i, WeftDialect::kStoredShapeAttrName))
        attrs.set(WeftDialect::kStoredShapeAttrName, stored);
      stateSlots[k].push_back(args.add(gradFn.getArgumentTypes()[i],
                                       attrs.getDictionary(b.getContext())));
    }
  llvm::DenseMap<unsigned, unsigned> dataSlots;
  for (unsigned i : llvm::concat<unsigned>(batchArgs, otherArgs)) {
    auto type = cast<RankedTensorType>(gradFn.getArgumentTypes()[i]);
    if (cfg.accumSteps > 1 && llvm::is_contained(batchArgs, i)) {
      if (type.getRank() == 0) {
        gradFn.emitError() << "gradient accumulation splits batch inputs "
                              "along axis 0, but input "
                           << i << " is a scalar";
        return signalPassFailure();
      }
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= cfg.accumSteps;
      type = type.clone(shape);
    }
    dataSlots[i] = args.add(type, gradFn.getArgAttrDict(i));
  }
  auto i64Type = RankedTensorType::get({}, b.getI64Type());
  std::optional<unsigned> seedSlot;
  if (rngArg)
    seedSlot = args.add(b, i64Type, Role::Input, contract::kSeedInput);
  unsigned stepSlot = args.add(b, i64Type, Role::Input, contract::kStepInput);
  unsigned lrSlot = args.add(b, RankedTensorType::get({}, b.getF32Type()),
                             Role::Input, contract::kLrInput);

  train::Hyperparameters hp;
  rule->addHyperparameters(hp);
  if (cfg.clipNorm > 0)
    hp.add("clip_norm", cfg.clipNorm);
  if (cfg.schedule != "constant")
    hp.add("warmup_steps", double(cfg.warmupSteps));
  if (cfg.schedule == "cosine") {
    hp.add("total_steps", double(cfg.totalSteps));
    hp.add("min_lr_ratio", cfg.minLrRatio);
  }
  SmallVector<NamedAttribute> defaults;
  SmallVector<unsigned> hpSlots;
  for (const train::Hyperparameters::Entry &entry : hp.getEntries()) {
    defaults.push_back(
        b.getNamedAttr(entry.name, b.getF64FloatAttr(entry.value)));
    if (cfg.runtimeHyperparameters)
      hpSlots.push_back(args.add(b, RankedTensorType::get({}, b.getF64Type()),
                                 Role::Input,
                                 std::string(contract::kHyperPrefix) +
                                     entry.name));
  }
  // Recorded for the executable's --help and checkpoints, and for a model
  // JSON written later from this IR.
  module->setAttr(WeftDialect::kHyperparametersAttrName,
                  b.getDictionaryAttr(defaults));
  recordTrainConfig(module, cfg.describe(b));

  b.setInsertionPointAfter(gradFn);
  auto fn = func::FuncOp::create(b, loc, stepFunction,
                                 b.getFunctionType(args.getTypes(), {}));
  fn.setAllArgAttrs(args.getAttrs());
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  train::Emitter e(b, loc);
  auto arg = [&](unsigned slot) -> Value { return body->getArgument(slot); };
  Value step = arg(stepSlot), lr = arg(lrSlot);
  SmallVector<Value> hpArgs;
  for (unsigned slot : hpSlots)
    hpArgs.push_back(arg(slot));
  hp.materialize(e, hpArgs);

  // 1. Gradients, averaged over the micro-batches.
  train::GradientInputs inputs;
  inputs.operands.resize(gradFn.getNumArguments());
  inputs.isBatch.assign(gradFn.getNumArguments(), false);
  for (auto [p, i] : llvm::enumerate(paramArgs))
    inputs.operands[i] = arg(paramSlots[p]);
  for (auto [i, slot] : dataSlots)
    inputs.operands[i] = arg(slot);
  for (unsigned i : batchArgs)
    inputs.isBatch[i] = true;
  inputs.rngArg = rngArg;
  if (seedSlot)
    inputs.seed = arg(*seedSlot);
  inputs.step = step;
  train::StepGradients grads =
      train::accumulateGradients(e, gradFn, inputs, cfg.accumSteps);

  // 2. The global gradient norm before clipping (the runtime stops, or
  // skips the step, when it is not finite), then clipping.
  Value gradNorm = e.sqrt(train::gradientSquares(e, grads.grads));
  if (cfg.clipNorm > 0)
    train::clipGradients(e, grads.grads, gradNorm, hp.f32("clip_norm"));

  // 3. The learning rate of this step.
  Value lrT = lr;
  if (cfg.schedule != "constant")
    lrT = train::scheduleLearningRate(e, cfg, hp, lr,
                                      e.convert(step, b.getF32Type()));

  // 4. The update.
  rule->prepare(e, hp, lrT, step);
  SmallVector<Value> newParams;
  SmallVector<SmallVector<Value>> newState(stateKinds.size());
  for (size_t p = 0; p < paramArgs.size(); ++p) {
    SmallVector<Value> state;
    for (size_t k = 0; k < stateKinds.size(); ++k)
      state.push_back(arg(stateSlots[k][p]));
    newParams.push_back(
        rule->update(e, hp, lrT, arg(paramSlots[p]), grads.grads[p], state));
    for (size_t k = 0; k < stateKinds.size(); ++k)
      newState[k].push_back(state[k]);
  }

  // Results: next params, next state, next buffers, loss, lr_t, grad_norm.
  SignatureBuilder results;
  SmallVector<Value> values;
  auto result = [&](Value v, DictionaryAttr attrs) {
    values.push_back(v);
    results.add(v.getType(), attrs);
  };
  for (auto [p, v] : llvm::enumerate(newParams))
    result(v, args.getAttrs()[paramSlots[p]]);
  for (auto [k, kindValues] : llvm::enumerate(newState))
    for (auto [p, v] : llvm::enumerate(kindValues))
      result(v, args.getAttrs()[stateSlots[k][p]]);
  for (auto [name, v] : grads.buffers)
    result(v, getSlotAttrs(b, Role::Buffer, name.getValue()));
  result(grads.loss, getSlotAttrs(b, Role::Output, contract::kLossOutput));
  result(lrT, getSlotAttrs(b, Role::Output, contract::kLrOutput));
  result(gradNorm, getSlotAttrs(b, Role::Output, contract::kGradNormOutput));
  func::ReturnOp::create(b, loc, values);
  fn.setFunctionType(b.getFunctionType(args.getTypes(), results.getTypes()));
  fn.setAllResultAttrs(results.getAttrs());
}
} // namespace
