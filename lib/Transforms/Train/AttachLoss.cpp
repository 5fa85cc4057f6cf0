//===- AttachLoss.cpp - Turn a forward model into a loss function ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// @forward(params, inputs) -> output becomes @loss(params, inputs, labels)
// -> scalar. The forward function stays, for inference and evaluation.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Train/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_ATTACHLOSSPASS
#include "weft/Transforms/Train/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct AttachLossPass : public weft::impl::AttachLossPassBase<AttachLossPass> {
  using AttachLossPassBase::AttachLossPassBase;

  void runOnOperation() override;

private:
  /// Checks the options and @forward's output; reports why a loss cannot be
  /// attached. Runs before anything is cloned, so a failure adds nothing.
  LogicalResult check(ModuleOp module, func::FuncOp &forward);
};

LogicalResult AttachLossPass::check(ModuleOp module, func::FuncOp &forward) {
  if (kind != "cross-entropy" && kind != "mse" && kind != "none")
    return module.emitError() << "unknown loss '" << kind
                              << "'; expected cross-entropy, mse or none";
  forward = module.lookupSymbol<func::FuncOp>(function);
  if (!forward || forward.isExternal())
    return module.emitError()
           << "no function @" << function << " to attach a loss to";
  if (Operation *existing = module.lookupSymbol(lossFunction))
    return existing->emitError()
           << "the module already has a @" << lossFunction << " function";
  if (forward.getNumResults() == 0)
    return forward.emitError()
           << "@" << function
           << " returns nothing: no output to take a loss of";
  Type output = forward.getResultTypes().front();
  auto outType = dyn_cast<RankedTensorType>(output);
  if (!outType || !isa<FloatType>(outType.getElementType()))
    return forward.emitError()
           << "the model's output " << output << " is not a float tensor";
  if (kind == "none") {
    if (outType.getRank() != 0)
      return forward.emitError()
             << "loss kind 'none' needs a model whose first output is a "
                "scalar loss; output 0 is "
             << outType;
    return success();
  }
  if (kind == "cross-entropy" && outType.getRank() < 1)
    return forward.emitError() << "cross-entropy needs an output with a class "
                                  "axis; output 0 is "
                               << outType;
  for (unsigned i = 0, e = forward.getNumArguments(); i < e; ++i) {
    auto name =
        forward.getArgAttrOfType<StringAttr>(i, WeftDialect::kInputAttrName);
    if (name && name.getValue() == labels)
      return forward.emitError()
             << "@" << function << " already has an input named '" << labels
             << "' (argument #" << i << "); name the labels differently";
  }
  return success();
}

void AttachLossPass::runOnOperation() {
  ModuleOp module = getOperation();
  func::FuncOp forward;
  if (failed(check(module, forward)))
    return signalPassFailure();

  OpBuilder builder(module.getContext());
  builder.setInsertionPointAfter(forward);
  auto loss = cast<func::FuncOp>(builder.clone(*forward));
  loss.setSymName(lossFunction);
  auto ret = cast<func::ReturnOp>(loss.getBody().front().getTerminator());
  Value output = ret.getOperand(0);
  auto outType = cast<RankedTensorType>(output.getType());

  builder.setInsertionPoint(ret);
  Location loc = ret.getLoc();
  // Losses are computed in f32 whatever precision the model runs in.
  auto f32 = builder.getF32Type();
  Value logits = output;
  if (outType.getElementType() != f32)
    logits = CastOp::create(builder, loc, outType.clone(f32), output);

  Value value = logits;
  if (kind != "none") {
    Type labelType = kind == "cross-entropy"
                         ? RankedTensorType::get(outType.getShape().drop_back(),
                                                 builder.getI64Type())
                         : outType.clone(f32);
    unsigned index = loss.getNumArguments();
    if (failed(loss.insertArgument(
            index, labelType,
            getSlotAttrs(builder, contract::Role::Input, labels),
            loc))) {
      loss.emitError() << "could not add the labels argument";
      return signalPassFailure();
    }
    Value labelArg = loss.getArgument(index);
    if (kind == "cross-entropy")
      value = CrossEntropyOp::create(builder, loc, logits, labelArg);
    else
      value = MseOp::create(builder, loc, logits, labelArg);
  }
  // Running statistics a train-mode forward updates travel with the loss.
  SmallVector<Value> results{value};
  SmallVector<DictionaryAttr> resultAttrs{getSlotAttrs(
      builder, contract::Role::Output, contract::kLossOutput)};
  for (unsigned r = 1, e = ret.getNumOperands(); r < e; ++r)
    if (loss.getResultAttr(r, WeftDialect::kBufferAttrName)) {
      results.push_back(ret.getOperand(r));
      resultAttrs.push_back(loss.getResultAttrDict(r));
    }
  func::ReturnOp::create(builder, loc, results);
  ret.erase();
  loss.setFunctionType(builder.getFunctionType(
      loss.getArgumentTypes(), ValueRange(results).getTypes()));
  loss.setAllResultAttrs(resultAttrs);
  recordTrainConfig(module,
                    builder.getNamedAttr("loss", builder.getStringAttr(kind)));
}
} // namespace
