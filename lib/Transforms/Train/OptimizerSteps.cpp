//===- OptimizerSteps.cpp - The steps of a training step ------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "OptimizerSteps.h"

#include "weft/Dialect/Weft/IR/TrainStep.h"

#include "llvm/ADT/StringMap.h"

#include <cmath>

using namespace mlir;
using namespace weft;
using namespace weft::train;

//===----------------------------------------------------------------------===//
// Emitter
//===----------------------------------------------------------------------===//

Value Emitter::c(double v, FloatType type) {
  if (!type)
    type = b.getF32Type();
  auto tensorType = RankedTensorType::get({}, type);
  return ConstantOp::create(
      b, loc, DenseElementsAttr::get(tensorType, b.getFloatAttr(type, v)));
}

Value Emitter::i64(int64_t v) {
  return ConstantOp::create(
      b, loc,
      DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                             b.getI64IntegerAttr(v).getValue()));
}

Value Emitter::convert(Value x, Type type) {
  auto t = cast<RankedTensorType>(x.getType());
  return CastOp::create(b, loc, t.clone(type), x);
}

Value Emitter::add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
Value Emitter::sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
Value Emitter::mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
Value Emitter::div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
Value Emitter::min(Value x, Value y) { return MinOp::create(b, loc, x, y); }
Value Emitter::max(Value x, Value y) { return MaxOp::create(b, loc, x, y); }
Value Emitter::sqrt(Value x) { return SqrtOp::create(b, loc, x); }
Value Emitter::pow(Value x, Value y) { return PowOp::create(b, loc, x, y); }
Value Emitter::cos(Value x) { return CosOp::create(b, loc, x); }

Value Emitter::sumAll(Value x) {
  auto t = cast<RankedTensorType>(x.getType());
  auto axes = llvm::to_vector(llvm::seq<int64_t>(0, t.getRank()));
  return ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr(axes),
                             b.getBoolAttr(false));
}

Value Emitter::less(Value x, Value y) {
  return CmpOp::create(b, loc, CmpPredicate::lt, x, y);
}

Value Emitter::select(Value cond, Value x, Value y) {
  return WhereOp::create(b, loc, cond, x, y);
}

//===----------------------------------------------------------------------===//
// Hyperparameters and configuration
//===----------------------------------------------------------------------===//

void Hyperparameters::materialize(Emitter &e, ValueRange args) {
  FloatType f32 = e.builder().getF32Type(), f64 = e.builder().getF64Type();
  for (auto [i, entry] : llvm::enumerate(entries)) {
    entry.f64 = args.empty() ? e.c(entry.value, f64) : args[i];
    entry.f32 = args.empty() ? e.c(entry.value) : e.convert(entry.f64, f32);
  }
}

const Hyperparameters::Entry &
Hyperparameters::lookup(StringRef name) const {
  for (const Entry &entry : entries)
    if (entry.name == name)
      return entry;
  llvm_unreachable("hyperparameter not registered");
}

std::string OptimizerConfig::check() const {
  if (optimizer != "sgd" && optimizer != "adamw")
    return "unknown optimizer '" + optimizer + "'; expected sgd or adamw";
  if (schedule != "constant" && schedule != "warmup" && schedule != "cosine")
    return "unknown learning-rate schedule '" + schedule +
           "'; expected constant, warmup or cosine";
  if (momentum < 0 || (nesterov && momentum <= 0))
    return "momentum must be >= 0, and > 0 with nesterov";
  if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1)
    return "adamw betas must lie in [0, 1)";
  if (eps <= 0)
    return "eps must be > 0";
  if (clipNorm < 0)
    return "clip-norm must be >= 0 (0 disables clipping)";
  if (accumSteps < 1)
    return "accum-steps must be >= 1";
  if (schedule != "constant" && warmupSteps < 0)
    return "warmup-steps must be >= 0";
  if (schedule == "cosine" && totalSteps <= warmupSteps)
    return "the cosine schedule needs total-steps > warmup-steps";
  if (minLrRatio < 0 || minLrRatio > 1)
    return "min-lr-ratio must lie in [0, 1]";
  return "";
}

SmallVector<NamedAttribute> OptimizerConfig::describe(Builder &b) const {
  return {b.getNamedAttr("optimizer", b.getStringAttr(optimizer)),
          b.getNamedAttr("momentum", b.getF64FloatAttr(momentum)),
          b.getNamedAttr("nesterov", b.getBoolAttr(nesterov)),
          b.getNamedAttr("weight_decay", b.getF64FloatAttr(weightDecay())),
          b.getNamedAttr("beta1", b.getF64FloatAttr(beta1)),
          b.getNamedAttr("beta2", b.getF64FloatAttr(beta2)),
          b.getNamedAttr("eps", b.getF64FloatAttr(eps)),
          b.getNamedAttr("clip_norm", b.getF64FloatAttr(clipNorm)),
          b.getNamedAttr("accum_steps", b.getI64IntegerAttr(accumSteps)),
          b.getNamedAttr("lr_schedule", b.getStringAttr(schedule)),
          b.getNamedAttr("warmup_steps", b.getI64IntegerAttr(warmupSteps)),
          b.getNamedAttr("total_steps", b.getI64IntegerAttr(totalSteps)),
          b.getNamedAttr("min_lr_ratio", b.getF64FloatAttr(minLrRatio))};
}

//===----------------------------------------------------------------------===//
// Gradients
//===----------------------------------------------------------------------===//

StepGradients train::accumulateGradients(Emitter &e, func::FuncOp gradFn,
                                         const GradientInputs &inputs,
                                         int64_t accumSteps) {
  OpBuilder &b = e.builder();
  Location loc = e.location();
  unsigned numParams = 0;
  for (unsigned i = 0, n = gradFn.getNumArguments(); i < n; ++i)
    numParams += getArgName(gradFn, i, contract::Role::Param) ? 1 : 0;

  // Buffers the forward updates: their next values follow the gradients in
  // @loss_grad's results, and each micro-batch sees the values the
  // previous one left.
  SmallVector<std::pair<StringAttr, unsigned>> bufferResults;
  for (unsigned r = 1 + numParams, n = gradFn.getNumResults(); r < n; ++r)
    if (StringAttr name = getResultName(gradFn, r, contract::Role::Buffer))
      bufferResults.push_back({name, r});
  llvm::StringMap<Value> bufferValues;

  StepGradients out;
  out.grads.resize(numParams);
  for (int64_t k = 0; k < accumSteps; ++k) {
    SmallVector<Value> operands(inputs.operands);
    for (unsigned i = 0, n = operands.size(); i < n; ++i) {
      if (!operands[i])
        continue;
      if (StringAttr name = getArgName(gradFn, i, contract::Role::Buffer))
        if (Value updated = bufferValues.lookup(name.getValue()))
          operands[i] = updated;
      if (accumSteps > 1 && inputs.isBatch[i]) {
        auto type = cast<RankedTensorType>(operands[i].getType());
        int64_t micro = type.getDimSize(0) / accumSteps;
        SmallVector<int64_t> starts(type.getRank(), 0),
            limits(type.getShape()), strides(type.getRank(), 1);
        starts[0] = k * micro;
        limits[0] = (k + 1) * micro;
        operands[i] = SliceOp::create(b, loc, operands[i],
                                      b.getDenseI64ArrayAttr(starts),
                                      b.getDenseI64ArrayAttr(limits),
                                      b.getDenseI64ArrayAttr(strides));
      }
    }
    if (inputs.rngArg)
      operands[*inputs.rngArg] = e.add(
          e.mul(inputs.seed, e.i64(int64_t(1) << 32)),
          e.add(e.mul(inputs.step, e.i64(accumSteps)), e.i64(k)));
    auto call = func::CallOp::create(b, loc, gradFn, operands);
    for (auto [name, r] : bufferResults)
      bufferValues[name.getValue()] = call.getResult(r);
    out.loss = k ? e.add(out.loss, call.getResult(0)) : call.getResult(0);
    for (unsigned p = 0; p < numParams; ++p)
      out.grads[p] = k ? e.add(out.grads[p], call.getResult(p + 1))
                       : call.getResult(p + 1);
  }
  if (accumSteps > 1) {
    Value scale = e.c(1.0 / double(accumSteps));
    out.loss = e.mul(out.loss, scale);
    for (Value &g : out.grads)
      g = e.mul(g, scale);
  }
  for (auto [name, r] : bufferResults)
    out.buffers.push_back({name, bufferValues.lookup(name.getValue())});
  return out;
}

Value train::gradientSquares(Emitter &e, ArrayRef<Value> grads) {
  Value total;
  for (Value g : grads) {
    Value squares = e.sumAll(e.mul(g, g));
    total = total ? e.add(total, squares) : squares;
  }
  return total;
}

void train::clipGradients(Emitter &e, MutableArrayRef<Value> grads, Value norm,
                          Value maxNorm) {
  Value coef = e.min(e.div(maxNorm, e.add(norm, e.c(1e-6))), e.c(1.0));
  for (Value &g : grads)
    g = e.mul(g, coef);
}

//===----------------------------------------------------------------------===//
// Schedule
//===----------------------------------------------------------------------===//

///   warmup: min(1, (s + 1) / W)
///   cosine: (s + 1) / W while s < W, then
///           r + (1 - r) (1 + cos(pi min(1, (s - W) / (T - W)))) / 2.
Value train::scheduleLearningRate(Emitter &e, const OptimizerConfig &config,
                                  const Hyperparameters &hp, Value lr,
                                  Value stepF) {
  if (config.schedule == "constant")
    return lr;
  Value warmup = hp.f32("warmup_steps");
  Value warm = e.c(1.0);
  // (s + 1) / 0 is +inf, so min(1, .) also covers a warmup set to 0 at run
  // time.
  if (config.warmupSteps > 0 || config.runtimeHyperparameters)
    warm = e.min(e.div(e.add(stepF, e.c(1.0)), warmup), e.c(1.0));
  if (config.schedule == "warmup")
    return e.mul(lr, warm);
  // max(T - W, 1) keeps a run-time T == W from dividing zero by zero.
  Value span = e.max(e.sub(hp.f32("total_steps"), warmup), e.c(1.0));
  Value progress = e.min(e.div(e.sub(stepF, warmup), span), e.c(1.0));
  Value ratio = hp.f32("min_lr_ratio");
  Value cosine =
      e.add(ratio, e.mul(e.mul(e.sub(e.c(1.0), ratio), e.c(0.5)),
                         e.add(e.c(1.0), e.cos(e.mul(e.c(M_PI), progress)))));
  Value factor = e.select(e.less(stepF, warmup), warm, cosine);
  return e.mul(lr, factor);
}

//===----------------------------------------------------------------------===//
// Update rules
//===----------------------------------------------------------------------===//

UpdateRule::~UpdateRule() = default;

namespace {
/// SGD with momentum, Nesterov and L2 weight decay added to the gradient.
class Sgd : public UpdateRule {
public:
  explicit Sgd(const OptimizerConfig &config) : config(config) {}

  SmallVector<std::string> stateKinds() const override {
    if (config.momentum > 0)
      return {"momentum_buffer"};
    return {};
  }
  void addHyperparameters(Hyperparameters &hp) const override {
    if (config.momentum > 0)
      hp.add("momentum", config.momentum);
    // Weight decay is part of the update only when compiled in: an
    // executable then offers --weight-decay exactly when it applies it.
    if (config.weightDecay() != 0)
      hp.add("weight_decay", config.weightDecay());
  }
  Value update(Emitter &e, const Hyperparameters &hp, Value lrT, Value w,
               Value g, MutableArrayRef<Value> state) override {
    if (config.weightDecay() != 0)
      g = e.add(g, e.mul(hp.f32("weight_decay"), w));
    if (config.momentum > 0) {
      // The buffer starts at zero, so step 0 gives buf = g as PyTorch's
      // clone does (no dampening).
      Value mu = hp.f32("momentum");
      Value buf = e.add(e.mul(mu, state[0]), g);
      state[0] = buf;
      g = config.nesterov ? e.add(g, e.mul(mu, buf)) : buf;
    }
    return e.sub(w, e.mul(lrT, g));
  }

private:
  OptimizerConfig config;
};

/// AdamW: decoupled weight decay, bias correction, eps outside the root.
class AdamW : public UpdateRule {
public:
  explicit AdamW(const OptimizerConfig &config) : config(config) {}

  SmallVector<std::string> stateKinds() const override {
    return {"exp_avg", "exp_avg_sq"};
  }
  void addHyperparameters(Hyperparameters &hp) const override {
    hp.add("beta1", config.beta1);
    hp.add("beta2", config.beta2);
    hp.add("eps", config.eps);
    if (config.weightDecay() != 0)
      hp.add("weight_decay", config.weightDecay());
  }
  /// lr_t / (1 - beta1^t) and sqrt(1 - beta2^t), t = step + 1. torch.optim
  /// computes them in Python floats (f64) and rounds them to f32 where they
  /// meet the tensors; in f32, 1 - 0.999^t would lose most of its digits to
  /// cancellation (5e-5 relative at t = 1).
  void prepare(Emitter &e, const Hyperparameters &hp, Value lrT,
               Value step) override {
    FloatType f32 = e.builder().getF32Type(), f64 = e.builder().getF64Type();
    Value t = e.add(e.convert(step, f64), e.c(1.0, f64));
    Value bc1 = e.sub(e.c(1.0, f64), e.pow(hp.f64("beta1"), t));
    Value bc2 = e.sub(e.c(1.0, f64), e.pow(hp.f64("beta2"), t));
    stepSize = e.convert(e.div(e.convert(lrT, f64), bc1), f32);
    bc2Sqrt = e.convert(e.sqrt(bc2), f32);
    // torch passes 1 - beta as a Python float, rounded once to f32.
    oneMinusBeta1 = e.convert(e.sub(e.c(1.0, f64), hp.f64("beta1")), f32);
    oneMinusBeta2 = e.convert(e.sub(e.c(1.0, f64), hp.f64("beta2")), f32);
  }
  Value update(Emitter &e, const Hyperparameters &hp, Value lrT, Value w,
               Value g, MutableArrayRef<Value> state) override {
    if (config.weightDecay() != 0)
      w = e.mul(w, e.sub(e.c(1.0), e.mul(lrT, hp.f32("weight_decay"))));
    Value m = e.add(e.mul(hp.f32("beta1"), state[0]), e.mul(oneMinusBeta1, g));
    Value v = e.add(e.mul(hp.f32("beta2"), state[1]),
                    e.mul(oneMinusBeta2, e.mul(g, g)));
    Value denom = e.add(e.div(e.sqrt(v), bc2Sqrt), hp.f32("eps"));
    state[0] = m;
    state[1] = v;
    return e.sub(w, e.mul(stepSize, e.div(m, denom)));
  }

private:
  OptimizerConfig config;
  Value stepSize, bc2Sqrt, oneMinusBeta1, oneMinusBeta2;
};
} // namespace

std::unique_ptr<UpdateRule>
train::createUpdateRule(const OptimizerConfig &config) {
  if (config.optimizer == "sgd")
    return std::make_unique<Sgd>(config);
  return std::make_unique<AdamW>(config);
}
