//===- Autodiff.cpp - Reverse-mode differentiation of a loss --------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// --weft-autodiff: clones the loss function into `<name>_grad` and appends
// the backward sweep. Two linear scans find the active ops (reached from a
// parameter and reaching the loss), then one reverse scan asks each active
// op's GradientOpInterface rule for its operand adjoints. All scans walk the
// block in order, never the use-def graph, so a deep model cannot exhaust
// the stack; maps are keyed by Value for lookup only, never iterated, so the
// output does not depend on hash order.
//
// No parameter is left untrained silently: an active op without a gradient
// rule is an error naming the op and a parameter behind it; a parameter
// that truly gets no gradient (it does not reach the loss, or only through
// ops marked NotDifferentiable) is reported and becomes a buffer of the
// gradient function, so the optimizer neither updates nor decays it, as
// torch.optim skips a parameter whose .grad is None.
//
//===----------------------------------------------------------------------===//

#include "GradientFlow.h"
#include "weft/Transforms/Train/Passes.h"

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"

namespace weft {
#define GEN_PASS_DEF_AUTODIFFPASS
#include "weft/Transforms/Train/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// Whether `op` reads a value of `set`, as an operand or from inside one of
/// its regions.
bool readsAny(Operation *op, const llvm::DenseSet<Value> &set) {
  auto reads = [&](Operation *user) {
    return llvm::any_of(user->getOperands(),
                        [&](Value v) { return set.contains(v); });
  };
  if (reads(op))
    return true;
  if (op->getNumRegions() == 0)
    return false;
  return op
      ->walk([&](Operation *nested) {
        return reads(nested) ? WalkResult::interrupt() : WalkResult::advance();
      })
      .wasInterrupted();
}

/// The ops of `body` on a path from a parameter to `loss`, in block order,
/// and the values that need an adjoint (`varied`: reached from a parameter
/// through ops that pass gradients). `origin` maps each varied value to the
/// index in `params` of one parameter it was computed from, for messages.
void findActiveOps(Block &body, ArrayRef<BlockArgument> params, Value loss,
                   SmallVectorImpl<Operation *> &active,
                   llvm::DenseSet<Value> &varied,
                   llvm::DenseMap<Value, unsigned> &origin) {
  for (auto [k, param] : llvm::enumerate(params))
    if (isDifferentiableType(param.getType())) {
      varied.insert(param);
      origin[param] = k;
    }
  SmallVector<Operation *> reached;
  for (Operation &op : body.without_terminator()) {
    if (!passesGradients(&op) || !readsAny(&op, varied))
      continue;
    reached.push_back(&op);
    // The first varied operand names the parameter behind the results.
    unsigned from = 0;
    for (Value operand : op.getOperands())
      if (varied.contains(operand)) {
        from = origin.lookup(operand);
        break;
      }
    for (Value result : op.getResults())
      if (isDifferentiableType(result.getType())) {
        varied.insert(result);
        origin[result] = from;
      }
  }
  // Reverse scan: an op is active when one of its varied results is
  // useful; its varied operands then become useful in turn.
  llvm::DenseSet<Value> useful;
  if (varied.contains(loss))
    useful.insert(loss);
  for (Operation *op : llvm::reverse(reached)) {
    if (llvm::none_of(op->getResults(),
                      [&](Value r) { return useful.contains(r); }))
      continue;
    active.push_back(op);
    for (Value operand : op->getOperands())
      if (varied.contains(operand))
        useful.insert(operand);
  }
  std::reverse(active.begin(), active.end());
}

/// Gives each op inserted while it listens a `weft.stage` (when it has
/// one to give).
struct StageTagger : OpBuilder::Listener {
  explicit StageTagger(Attribute stage) : stage(stage) {}
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint) override {
    if (stage && !op->hasAttr(WeftDialect::kStageAttrName))
      op->setAttr(WeftDialect::kStageAttrName, stage);
  }
  Attribute stage;
};

/// Builds the adjoints of every active op's varied operands at `builder`'s
/// insertion point, seeding `adjoint[loss]`. Reports the first op without a
/// usable gradient rule, naming the parameter `paramOf` gives for it.
LogicalResult
buildBackward(OpBuilder &builder, ArrayRef<Operation *> active,
              const llvm::DenseSet<Value> &varied, Value loss,
              llvm::function_ref<StringRef(Operation *)> paramOf,
              llvm::DenseMap<Value, Value> &adjoint) {
  auto lossType = cast<RankedTensorType>(loss.getType());
  adjoint[loss] = ConstantOp::create(
      builder, loss.getLoc(),
      DenseElementsAttr::get(lossType,
                             FloatAttr::get(lossType.getElementType(), 1.0)));

  for (Operation *op : llvm::reverse(active)) {
    SmallVector<Value> resultGrads;
    for (Value result : op->getResults())
      resultGrads.push_back(adjoint.lookup(result));
    if (llvm::all_of(resultGrads, [](Value g) { return !g; }))
      continue;

    auto rule = dyn_cast<GradientOpInterface>(op);
    if (!rule)
      return op->emitError("op '")
             << op->getName()
             << "' has no gradient rule, but it lies on the path from "
                "parameter '"
             << paramOf(op)
             << "' to the loss: Weft cannot train this model as it is (a "
                "missing rule is a compiler gap; to train without that "
                "parameter, freeze it with --freeze)";
    // Under pipeline parallelism the backward ops of a forward op run on
    // its stage (--weft-assign-stages tagged it).
    StageTagger tagger(op->getAttr(WeftDialect::kStageAttrName));
    OpBuilder::Listener *previous = builder.getListener();
    builder.setListener(&tagger);
    auto restore = llvm::make_scope_exit([&] { builder.setListener(previous); });
    SmallVector<Value> operandGrads;
    if (failed(rule.buildGradient(builder, resultGrads, operandGrads)))
      return op->emitError("the gradient rule of op '")
             << op->getName() << "' failed";
    if (operandGrads.size() != op->getNumOperands())
      return op->emitError("the gradient rule of op '")
             << op->getName() << "' built " << operandGrads.size()
             << " adjoints for " << op->getNumOperands() << " operands";

    for (auto [operand, grad] : llvm::zip(op->getOperands(), operandGrads)) {
      if (!grad || !varied.contains(operand))
        continue;
      if (grad.getType() != operand.getType())
        return op->emitError("the gradient rule of op '")
               << op->getName() << "' built an adjoint of type "
               << grad.getType() << " for an operand of type "
               << operand.getType();
      // Fan-out: every use of a value contributes to its adjoint.
      Value &sum = adjoint[operand];
      sum = sum ? Value(AddOp::create(builder, op->getLoc(), sum, grad)) : grad;
    }
  }
  return success();
}

/// The `weft.param` arguments of the loss function, in argument order.
struct Parameters {
  SmallVector<unsigned> argNumbers;
  SmallVector<StringAttr> names;
};

struct AutodiffPass : weft::impl::AutodiffPassBase<AutodiffPass> {
  using AutodiffPassBase::AutodiffPassBase;

  void runOnOperation() override;

private:
  /// Checks that `fn` can be differentiated and collects its parameters
  /// (argument numbers and names); reports why not.
  LogicalResult checkLossFunction(func::FuncOp fn, Parameters &params);
  /// Fills the body of `gradFn` (a clone of the loss function) with the
  /// backward sweep and returns the loss and the gradients of `params`.
  LogicalResult differentiate(func::FuncOp gradFn, const Parameters &params);
};

LogicalResult AutodiffPass::checkLossFunction(func::FuncOp fn,
                                              Parameters &params) {
  if (fn.isExternal() || !fn.getBody().hasOneBlock() ||
      !isa<func::ReturnOp>(fn.getBody().front().back()))
    return fn.emitError("function '")
           << fn.getSymName()
           << "' must be a single block ending in func.return to be "
              "differentiated";
  if (fn.getNumResults() == 0)
    return fn.emitError("function '")
           << fn.getSymName() << "' must return the loss as result 0";
  Type lossType = fn.getResultTypes().front();
  auto ranked = dyn_cast<RankedTensorType>(lossType);
  if (!ranked || ranked.getRank() != 0 ||
      !isa<FloatType>(ranked.getElementType()))
    return fn.emitError("the loss (result 0 of '")
           << fn.getSymName() << "') must be a 0-d float tensor, got "
           << lossType;
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
    Attribute attr = fn.getArgAttr(i, WeftDialect::kParamAttrName);
    if (!attr)
      continue;
    auto name = dyn_cast<StringAttr>(attr);
    if (!name)
      return fn.emitError("argument #")
             << i << ": '" << WeftDialect::kParamAttrName
             << "' must be a string naming the parameter, got " << attr;
    // The gradient of a parameter that does not reach the loss is a zero
    // constant, which needs a static shape.
    auto type = dyn_cast<RankedTensorType>(fn.getArgumentTypes()[i]);
    if (!type || !type.hasStaticShape() ||
        !isa<FloatType, IntegerType>(type.getElementType()))
      return fn.emitError("parameter '")
             << name.getValue()
             << "' must be a statically shaped tensor of floats or integers, "
                "got "
             << fn.getArgumentTypes()[i];
    params.argNumbers.push_back(i);
    params.names.push_back(name);
  }
  if (params.argNumbers.empty())
    return fn.emitError("model has no parameters: nothing to train (no "
                        "argument of '")
           << fn.getSymName() << "' has a '" << WeftDialect::kParamAttrName
           << "' attribute)";
  return success();
}

LogicalResult AutodiffPass::differentiate(func::FuncOp gradFn,
                                          const Parameters &params) {
  MLIRContext *context = gradFn.getContext();
  Block &body = gradFn.getBody().front();
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  Value loss = ret.getOperand(0);
  SmallVector<BlockArgument> paramArgs;
  for (unsigned i : params.argNumbers)
    paramArgs.push_back(body.getArgument(i));

  SmallVector<Operation *> active;
  llvm::DenseSet<Value> varied;
  llvm::DenseMap<Value, unsigned> origin;
  findActiveOps(body, paramArgs, loss, active, varied, origin);
  auto paramOf = [&](Operation *op) -> StringRef {
    for (Value result : op->getResults())
      if (auto it = origin.find(result); it != origin.end())
        return params.names[it->second].getValue();
    return "?";
  };
  OpBuilder builder(ret);
  llvm::DenseMap<Value, Value> adjoint;
  if (failed(buildBackward(builder, active, varied, loss, paramOf, adjoint)))
    return failure();

  SmallVector<Value> results{loss};
  SmallVector<DictionaryAttr> resultAttrs{gradFn.getResultAttrDict(0)};
  for (auto [param, name] : llvm::zip(paramArgs, params.names)) {
    Value grad = adjoint.lookup(param);
    if (!grad) {
      // No gradient at all (not a zero one): say so, and leave the
      // parameter to the optimizer as a buffer, as torch.optim does.
      gradFn.emitWarning("parameter '")
          << name.getValue() << "' gets no gradient: "
          << explainNoGradient(body, param, loss, "the loss") << "; "
          << untrainedParameterNote();
      setArgSlot(gradFn, param.getArgNumber(), contract::Role::Buffer,
                 name.getValue());
      continue;
    }
    results.push_back(grad);
    resultAttrs.push_back(
        getSlotAttrs(builder, contract::Role::Grad, name.getValue()));
  }
  if (results.size() == 1)
    return gradFn.emitError("no parameter gets a gradient from the loss of '")
           << functionName << "': nothing to train";
  // Buffers' next values (BatchNorm running statistics) follow the
  // gradients unchanged.
  for (unsigned r = 1, e = ret.getNumOperands(); r < e; ++r)
    if (gradFn.getResultAttr(r, WeftDialect::kBufferAttrName)) {
      results.push_back(ret.getOperand(r));
      resultAttrs.push_back(gradFn.getResultAttrDict(r));
    }
  func::ReturnOp::create(builder, ret.getLoc(), results);
  ret.erase();

  gradFn.setFunctionType(FunctionType::get(context, gradFn.getArgumentTypes(),
                                           ValueRange(results).getTypes()));
  for (DictionaryAttr &attrs : resultAttrs)
    if (!attrs)
      attrs = DictionaryAttr::get(context);
  gradFn.setAllResultAttrs(resultAttrs);

  // Drop what neither the loss nor a gradient uses: forward ops of other
  // results and adjoints of operands that need none. Walking backwards
  // frees a whole dead chain in one pass.
  for (Operation *op = body.getTerminator()->getPrevNode(); op;) {
    Operation *previous = op->getPrevNode();
    if (isOpTriviallyDead(op))
      op->erase();
    op = previous;
  }
  return success();
}

void AutodiffPass::runOnOperation() {
  ModuleOp module = getOperation();
  SymbolTable symbols(module);
  auto fn = symbols.lookup<func::FuncOp>(functionName);
  if (!fn) {
    module.emitError("function '") << functionName << "' not found";
    return signalPassFailure();
  }
  Parameters params;
  if (failed(checkLossFunction(fn, params)))
    return signalPassFailure();
  std::string gradName = functionName + "_grad";
  if (Operation *existing = symbols.lookup(gradName)) {
    existing->emitError("cannot create the gradient function: symbol '")
        << gradName << "' already exists";
    return signalPassFailure();
  }

  // Built detached, inserted only once complete, so a failure leaves the
  // module as it was.
  func::FuncOp gradFn = fn.clone();
  gradFn.setSymName(gradName);
  if (failed(differentiate(gradFn, params))) {
    gradFn.erase();
    return signalPassFailure();
  }
  symbols.insert(gradFn, std::next(Block::iterator(fn)));
}

} // namespace
