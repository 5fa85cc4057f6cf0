//===- Optimizer.cpp - Build the training step around the gradients -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Builds @train_step(params, state, batch, step, lr) -> (params', state',
// loss, lr_t) from @loss_grad. The update rules follow torch.optim (1.13,
// single-tensor path) operation for operation so the numbers match it.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"

#include <cmath>
#include <optional>

namespace weft {
#define GEN_PASS_DEF_OPTIMIZERPASS
#include "weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// Scalar f32 arithmetic on 0-d tensors and elementwise arithmetic with
/// broadcasting; keeps the update rules below readable.
class Emitter {
public:
  Emitter(OpBuilder &b, Location loc) : b(b), loc(loc) {}
  /// A 0-d constant, f32 unless `type` says otherwise.
  Value c(double v, FloatType type = {}) {
    if (!type)
      type = b.getF32Type();
    auto tensorType = RankedTensorType::get({}, type);
    return ConstantOp::create(
        b, loc, DenseElementsAttr::get(tensorType, b.getFloatAttr(type, v)));
  }
  /// `x` with element type `type`.
  Value convert(Value x, Type type) {
    auto t = cast<RankedTensorType>(x.getType());
    return CastOp::create(b, loc, t.clone(type), x);
  }
  Value add(Value x, Value y) { return AddOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return SubOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return MulOp::create(b, loc, x, y); }
  Value div(Value x, Value y) { return DivOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return MinOp::create(b, loc, x, y); }
  Value max(Value x, Value y) { return MaxOp::create(b, loc, x, y); }
  Value sqrt(Value x) { return SqrtOp::create(b, loc, x); }
  Value pow(Value x, Value y) { return PowOp::create(b, loc, x, y); }
  Value cos(Value x) { return CosOp::create(b, loc, x); }
  Value sumAll(Value x) {
    auto t = cast<RankedTensorType>(x.getType());
    auto axes = llvm::to_vector(llvm::seq<int64_t>(0, t.getRank()));
    return ReduceSumOp::create(b, loc, x, b.getDenseI64ArrayAttr(axes),
                               b.getBoolAttr(false));
  }
  Value less(Value x, Value y) {
    return CmpOp::create(b, loc, CmpPredicate::lt, x, y);
  }
  Value select(Value cond, Value x, Value y) {
    return WhereOp::create(b, loc, cond, x, y);
  }

private:
  OpBuilder &b;
  Location loc;
};

/// Optimizer and schedule hyperparameters: constants by default, or, with
/// `runtime-hyperparameters`, trailing 0-d f64 inputs `hp.<name>` so the
/// executable can change them without recompiling. f64 like Python floats
/// in torch.optim, rounded to f32 where they meet tensors.
class Hyperparameters {
public:
  struct Entry {
    std::string name;
    double value;
    Value f64, f32;
  };

  void add(StringRef name, double value) {
    entries.push_back({name.str(), value, {}, {}});
  }
  ArrayRef<Entry> getEntries() const { return entries; }
  /// Binds the entries to the trailing arguments `args`, or to constants.
  void materialize(Emitter &e, FloatType f32, FloatType f64,
                   ValueRange args) {
    for (auto [i, entry] : llvm::enumerate(entries)) {
      entry.f64 = args.empty() ? e.c(entry.value, f64) : args[i];
      entry.f32 = args.empty() ? e.c(entry.value) : e.convert(entry.f64, f32);
    }
  }
  Value f32(StringRef name) const { return lookup(name).f32; }
  Value f64(StringRef name) const { return lookup(name).f64; }

private:
  const Entry &lookup(StringRef name) const {
    for (const Entry &entry : entries)
      if (entry.name == name)
        return entry;
    llvm_unreachable("hyperparameter not registered");
  }
  SmallVector<Entry> entries;
};

struct OptimizerPass : public weft::impl::OptimizerPassBase<OptimizerPass> {
  using OptimizerPassBase::OptimizerPassBase;

  void runOnOperation() override;

private:
  LogicalResult checkOptions(ModuleOp module);
  LogicalResult classifyArguments(func::FuncOp gradFn,
                                  SmallVectorImpl<unsigned> &paramArgs,
                                  SmallVectorImpl<unsigned> &batchArgs,
                                  SmallVectorImpl<unsigned> &otherArgs);
  Value buildSchedule(Emitter &e, const Hyperparameters &hp, Value lr,
                      Value stepF);
};

LogicalResult OptimizerPass::checkOptions(ModuleOp module) {
  auto fail = [&](const Twine &msg) {
    module.emitError() << msg;
    return failure();
  };
  if (optimizer != "sgd" && optimizer != "adamw")
    return fail("unknown optimizer '" + optimizer + "'; expected sgd or adamw");
  if (schedule != "constant" && schedule != "warmup" && schedule != "cosine")
    return fail("unknown learning-rate schedule '" + schedule +
                "'; expected constant, warmup or cosine");
  if (momentum < 0 || (nesterov && momentum <= 0))
    return fail("momentum must be >= 0, and > 0 with nesterov");
  if (beta1 < 0 || beta1 >= 1 || beta2 < 0 || beta2 >= 1)
    return fail("adamw betas must lie in [0, 1)");
  if (eps <= 0)
    return fail("eps must be > 0");
  if (clipNorm < 0)
    return fail("clip-norm must be >= 0 (0 disables clipping)");
  if (accumSteps < 1)
    return fail("accum-steps must be >= 1");
  if (schedule != "constant" && warmupSteps < 0)
    return fail("warmup-steps must be >= 0");
  if (schedule == "cosine" && totalSteps <= warmupSteps)
    return fail("the cosine schedule needs total-steps > warmup-steps");
  if (minLrRatio < 0 || minLrRatio > 1)
    return fail("min-lr-ratio must lie in [0, 1]");
  return success();
}

/// Splits @loss_grad's arguments into parameters, batch inputs and the rest
/// (buffers), and checks that the function has the shape --weft-autodiff
/// gives it: (loss: tensor<f32>, one gradient per parameter, typed and
/// tagged like it).
LogicalResult
OptimizerPass::classifyArguments(func::FuncOp gradFn,
                                 SmallVectorImpl<unsigned> &paramArgs,
                                 SmallVectorImpl<unsigned> &batchArgs,
                                 SmallVectorImpl<unsigned> &otherArgs) {
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
    } else if (auto name = gradFn.getArgAttrOfType<StringAttr>(
                   i, WeftDialect::kInputAttrName)) {
      if (name.getValue() == "step" || name.getValue() == "lr" ||
          name.getValue() == WeftDialect::kSeedInputName)
        return gradFn.emitError() << "input '" << name.getValue()
                                  << "' clashes with the training step's own '"
                                  << name.getValue() << "' input";
      // The random stream is computed by the step, not read from data.
      if (name.getValue() == WeftDialect::kRngInputName)
        otherArgs.push_back(i);
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
    auto name = gradFn.getResultAttrOfType<StringAttr>(
        r, WeftDialect::kBufferAttrName);
    std::optional<unsigned> arg;
    for (unsigned i : otherArgs)
      if (gradFn.getArgAttr(i, WeftDialect::kBufferAttrName) == name)
        arg = i;
    if (!name || !arg || gradFn.getArgumentTypes()[*arg] !=
                             gradFn.getResultTypes()[r])
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
    auto param =
        gradFn.getArgAttrOfType<StringAttr>(i, WeftDialect::kParamAttrName);
    auto grad = gradFn.getResultAttrOfType<StringAttr>(k + 1, "weft.grad");
    if (gradFn.getResultTypes()[k + 1] != gradFn.getArgumentTypes()[i] ||
        grad != param)
      return gradFn.emitError()
             << "result " << k + 1 << " must be the gradient of parameter '"
             << param.getValue() << "' (" << gradFn.getArgumentTypes()[i]
             << ", weft.grad = \"" << param.getValue() << "\")";
  }
  return success();
}

/// lr_t for the 0-based step s (warmup and cosine schedules), as
/// torch.optim.lr_scheduler.LambdaLR with
///   warmup: min(1, (s + 1) / W)
///   cosine: (s + 1) / W while s < W, then
///           r + (1 - r) (1 + cos(pi min(1, (s - W) / (T - W)))) / 2.
Value OptimizerPass::buildSchedule(Emitter &e, const Hyperparameters &hp,
                                   Value lr, Value stepF) {
  Value warmup = hp.f32("warmup_steps");
  Value warm = e.c(1.0);
  // (s + 1) / 0 is +inf, so min(1, .) also covers a warmup set to 0 at run
  // time.
  if (warmupSteps > 0 || runtimeHyperparameters)
    warm = e.min(e.div(e.add(stepF, e.c(1.0)), warmup), e.c(1.0));
  if (schedule == "warmup")
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

void OptimizerPass::runOnOperation() {
  ModuleOp module = getOperation();
  if (failed(checkOptions(module)))
    return signalPassFailure();
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
  MLIRContext *ctx = module.getContext();
  OpBuilder b(ctx);
  Location loc = gradFn.getLoc();
  double weightDecayValue =
      weightDecay >= 0 ? weightDecay : (optimizer == "adamw" ? 0.01 : 0.0);

  SmallVector<unsigned> paramArgs, batchArgs, otherArgs;
  if (failed(classifyArguments(gradFn, paramArgs, batchArgs, otherArgs)))
    return signalPassFailure();
  // Dropout's random stream is computed by the step from the run's seed
  // input, not passed in.
  std::optional<unsigned> rngArg;
  for (unsigned i : otherArgs)
    if (auto name = gradFn.getArgAttrOfType<StringAttr>(
            i, WeftDialect::kInputAttrName);
        name && name.getValue() == WeftDialect::kRngInputName)
      rngArg = i;
  if (rngArg)
    llvm::erase(otherArgs, *rngArg);
  auto paramName = [&](unsigned i) {
    return gradFn.getArgAttrOfType<StringAttr>(i, WeftDialect::kParamAttrName)
        .getValue();
  };

  // Signature: params, optimizer state, batch (and buffers), step, lr.
  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  auto named = [&](StringRef key, const Twine &name) {
    return b.getDictionaryAttr(
        b.getNamedAttr(key, b.getStringAttr(name.str())));
  };
  SmallVector<std::string> stateKinds;
  if (optimizer == "sgd" && momentum > 0)
    stateKinds.push_back("momentum_buffer");
  if (optimizer == "adamw")
    stateKinds = {"exp_avg", "exp_avg_sq"};
  for (unsigned i : paramArgs) {
    argTypes.push_back(gradFn.getArgumentTypes()[i]);
    argAttrs.push_back(gradFn.getArgAttrDict(i));
  }
  for (const std::string &kind : stateKinds)
    for (unsigned i : paramArgs) {
      argTypes.push_back(gradFn.getArgumentTypes()[i]);
      argAttrs.push_back(named("weft.state", kind + "." + paramName(i)));
    }
  for (unsigned i : llvm::concat<unsigned>(batchArgs, otherArgs)) {
    auto type = cast<RankedTensorType>(gradFn.getArgumentTypes()[i]);
    if (accumSteps > 1 && llvm::is_contained(batchArgs, i)) {
      if (type.getRank() == 0) {
        gradFn.emitError() << "gradient accumulation splits batch inputs "
                              "along axis 0, but input "
                           << i << " is a scalar";
        return signalPassFailure();
      }
      SmallVector<int64_t> shape(type.getShape());
      shape[0] *= accumSteps;
      type = type.clone(shape);
    }
    argTypes.push_back(type);
    argAttrs.push_back(gradFn.getArgAttrDict(i));
  }
  if (rngArg) {
    argTypes.push_back(RankedTensorType::get({}, b.getI64Type()));
    argAttrs.push_back(
        named(WeftDialect::kInputAttrName, WeftDialect::kSeedInputName));
  }
  argTypes.push_back(RankedTensorType::get({}, b.getI64Type()));
  argAttrs.push_back(named(WeftDialect::kInputAttrName, "step"));
  argTypes.push_back(RankedTensorType::get({}, b.getF32Type()));
  argAttrs.push_back(named(WeftDialect::kInputAttrName, "lr"));

  Hyperparameters hp;
  if (optimizer == "sgd") {
    if (momentum > 0)
      hp.add("momentum", momentum);
  } else {
    hp.add("beta1", beta1);
    hp.add("beta2", beta2);
    hp.add("eps", eps);
  }
  // Weight decay is part of the update only when compiled in (AdamW's
  // default is 0.01, SGD's 0): an executable then offers --weight-decay
  // exactly when it applies it.
  bool hasWeightDecay = weightDecayValue != 0;
  if (hasWeightDecay)
    hp.add("weight_decay", weightDecayValue);
  if (clipNorm > 0)
    hp.add("clip_norm", clipNorm);
  if (schedule != "constant")
    hp.add("warmup_steps", double(warmupSteps));
  if (schedule == "cosine") {
    hp.add("total_steps", double(totalSteps));
    hp.add("min_lr_ratio", minLrRatio);
  }
  SmallVector<NamedAttribute> defaults;
  for (const Hyperparameters::Entry &entry : hp.getEntries()) {
    defaults.push_back(
        b.getNamedAttr(entry.name, b.getF64FloatAttr(entry.value)));
    if (!runtimeHyperparameters)
      continue;
    argTypes.push_back(RankedTensorType::get({}, b.getF64Type()));
    argAttrs.push_back(named(WeftDialect::kInputAttrName, "hp." + entry.name));
  }
  // Recorded for the executable's --help and checkpoints.
  module->setAttr("weft.hyperparameters", b.getDictionaryAttr(defaults));

  b.setInsertionPointAfter(gradFn);
  auto fn = func::FuncOp::create(b, loc, stepFunction,
                                 b.getFunctionType(argTypes, {}));
  fn.setAllArgAttrs(argAttrs);
  Block *body = fn.addEntryBlock();
  b.setInsertionPointToStart(body);
  Emitter e(b, loc);

  size_t numParams = paramArgs.size();
  auto param = [&](size_t p) { return body->getArgument(p); };
  auto state = [&](size_t k, size_t p) {
    return body->getArgument(numParams * (1 + k) + p);
  };
  size_t batchBase = numParams * (1 + stateKinds.size());
  size_t numHyper = runtimeHyperparameters ? hp.getEntries().size() : 0;
  size_t stepIndex = body->getNumArguments() - numHyper - 2;
  Value step = body->getArgument(stepIndex);
  Value lr = body->getArgument(stepIndex + 1);
  hp.materialize(e, b.getF32Type(), b.getF64Type(),
                 body->getArguments().take_back(numHyper));

  // Gradients, averaged over micro-batches as loss / K per backward does.
  SmallVector<Value> grads(numParams);
  Value loss;
  // Buffers the forward updates (BatchNorm running statistics): their
  // next values follow the gradients in @loss_grad's results, and each
  // micro-batch sees the values the previous one left, as in PyTorch.
  llvm::StringMap<Value> bufferValues;
  SmallVector<std::pair<StringAttr, unsigned>> bufferResults;
  for (unsigned r = 1 + numParams, e = gradFn.getNumResults(); r < e; ++r)
    if (auto name = gradFn.getResultAttrOfType<StringAttr>(
            r, WeftDialect::kBufferAttrName))
      bufferResults.push_back({name, r});
  for (int64_t k = 0; k < accumSteps; ++k) {
    SmallVector<Value> operands(gradFn.getNumArguments());
    for (auto [p, i] : llvm::enumerate(paramArgs))
      operands[i] = param(p);
    for (auto [j, i] :
         llvm::enumerate(llvm::concat<unsigned>(batchArgs, otherArgs))) {
      Value v = body->getArgument(batchBase + j);
      if (auto name = gradFn.getArgAttrOfType<StringAttr>(
              i, WeftDialect::kBufferAttrName))
        if (Value updated = bufferValues.lookup(name.getValue()))
          v = updated;
      if (accumSteps > 1 && llvm::is_contained(batchArgs, i)) {
        auto type = cast<RankedTensorType>(v.getType());
        int64_t micro = type.getDimSize(0) / accumSteps;
        SmallVector<int64_t> starts(type.getRank(), 0), limits(type.getShape()),
            strides(type.getRank(), 1);
        starts[0] = k * micro;
        limits[0] = (k + 1) * micro;
        v = SliceOp::create(b, loc, v, b.getDenseI64ArrayAttr(starts),
                            b.getDenseI64ArrayAttr(limits),
                            b.getDenseI64ArrayAttr(strides));
      }
      operands[i] = v;
    }
    // Each micro-batch of each step draws its own masks:
    // rng = seed * 2^32 + step * K + k (wrapping), hashed per op.
    if (rngArg) {
      auto i64 = [&](int64_t c) -> Value {
        return ConstantOp::create(
            b, loc,
            DenseElementsAttr::get(RankedTensorType::get({}, b.getI64Type()),
                                   b.getI64IntegerAttr(c).getValue()));
      };
      Value seed = body->getArgument(stepIndex - 1);
      operands[*rngArg] = AddOp::create(
          b, loc, MulOp::create(b, loc, seed, i64(int64_t(1) << 32)),
          AddOp::create(b, loc, MulOp::create(b, loc, step, i64(accumSteps)),
                        i64(k)));
    }
    auto call = func::CallOp::create(b, loc, gradFn, operands);
    for (auto [name, r] : bufferResults)
      bufferValues[name.getValue()] = call.getResult(r);
    loss = k ? e.add(loss, call.getResult(0)) : call.getResult(0);
    for (size_t p = 0; p < numParams; ++p)
      grads[p] =
          k ? e.add(grads[p], call.getResult(p + 1)) : call.getResult(p + 1);
  }
  if (accumSteps > 1) {
    Value scale = e.c(1.0 / double(accumSteps));
    loss = e.mul(loss, scale);
    for (Value &g : grads)
      g = e.mul(g, scale);
  }

  // The global gradient norm, before clipping: the runtime stops (or
  // skips the step) when it is not finite.
  Value total;
  for (Value g : grads) {
    Value squares = e.sumAll(e.mul(g, g));
    total = total ? e.add(total, squares) : squares;
  }
  Value gradNorm = e.sqrt(total);
  // torch.nn.utils.clip_grad_norm_: scale by min(1, max / (norm + 1e-6)).
  if (clipNorm > 0) {
    Value coef =
        e.min(e.div(hp.f32("clip_norm"), e.add(gradNorm, e.c(1e-6))),
              e.c(1.0));
    for (Value &g : grads)
      g = e.mul(g, coef);
  }

  Value lrT = lr;
  if (schedule != "constant")
    lrT = buildSchedule(e, hp, lr, e.convert(step, b.getF32Type()));

  // AdamW's step size lr_t / (1 - beta1^t) and sqrt(1 - beta2^t), t = step
  // + 1. torch.optim computes them in Python floats (f64) and rounds them
  // to f32 where they meet the tensors; in f32, 1 - 0.999^t would lose most
  // of its digits to cancellation (5e-5 relative at t = 1).
  Value stepSize, bc2Sqrt, oneMinusBeta1, oneMinusBeta2;
  if (optimizer == "adamw") {
    FloatType f64 = b.getF64Type();
    Value t = e.add(e.convert(step, f64), e.c(1.0, f64));
    Value bc1 = e.sub(e.c(1.0, f64), e.pow(hp.f64("beta1"), t));
    Value bc2 = e.sub(e.c(1.0, f64), e.pow(hp.f64("beta2"), t));
    stepSize = e.convert(e.div(e.convert(lrT, f64), bc1), b.getF32Type());
    bc2Sqrt = e.convert(e.sqrt(bc2), b.getF32Type());
    // torch passes 1 - beta as a Python float, rounded once to f32.
    oneMinusBeta1 =
        e.convert(e.sub(e.c(1.0, f64), hp.f64("beta1")), b.getF32Type());
    oneMinusBeta2 =
        e.convert(e.sub(e.c(1.0, f64), hp.f64("beta2")), b.getF32Type());
  }

  SmallVector<Value> newParams, newState(numParams * stateKinds.size());
  for (size_t p = 0; p < numParams; ++p) {
    Value w = param(p), g = grads[p];
    if (optimizer == "sgd") {
      if (hasWeightDecay)
        g = e.add(g, e.mul(hp.f32("weight_decay"), w));
      if (momentum > 0) {
        // The buffer starts at zero, so step 0 gives buf = g as PyTorch's
        // clone does (no dampening).
        Value mu = hp.f32("momentum");
        Value buf = e.add(e.mul(mu, state(0, p)), g);
        newState[p] = buf;
        g = nesterov ? e.add(g, e.mul(mu, buf)) : buf;
      }
      newParams.push_back(e.sub(w, e.mul(lrT, g)));
      continue;
    }
    if (hasWeightDecay)
      w = e.mul(w, e.sub(e.c(1.0), e.mul(lrT, hp.f32("weight_decay"))));
    Value beta1Value = hp.f32("beta1"), beta2Value = hp.f32("beta2");
    Value m = e.add(e.mul(beta1Value, state(0, p)),
                    e.mul(oneMinusBeta1, g));
    Value v = e.add(e.mul(beta2Value, state(1, p)),
                    e.mul(oneMinusBeta2, e.mul(g, g)));
    Value denom = e.add(e.div(e.sqrt(v), bc2Sqrt), hp.f32("eps"));
    newParams.push_back(e.sub(w, e.mul(stepSize, e.div(m, denom))));
    newState[p] = m;
    newState[numParams + p] = v;
  }

  SmallVector<Value> results(newParams);
  llvm::append_range(results, newState);
  for (auto [name, r] : bufferResults)
    results.push_back(bufferValues.lookup(name.getValue()));
  results.push_back(loss);
  results.push_back(lrT);
  results.push_back(gradNorm);
  func::ReturnOp::create(b, loc, results);
  fn.setFunctionType(
      b.getFunctionType(argTypes, ValueRange(results).getTypes()));
  SmallVector<DictionaryAttr> resultAttrs;
  for (size_t i = 0; i < numParams; ++i)
    resultAttrs.push_back(argAttrs[i]);
  for (size_t i = 0; i < newState.size(); ++i)
    resultAttrs.push_back(argAttrs[numParams + i]);
  for (auto [name, r] : bufferResults)
    resultAttrs.push_back(gradFn.getResultAttrDict(r));
  resultAttrs.push_back(named("weft.output", "loss"));
  resultAttrs.push_back(named("weft.output", "lr"));
  resultAttrs.push_back(named("weft.output", "grad_norm"));
  fn.setAllResultAttrs(resultAttrs);
}
} // namespace
