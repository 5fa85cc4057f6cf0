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

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_ATTACHLOSSPASS
#include "weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct AttachLossPass : public weft::impl::AttachLossPassBase<AttachLossPass> {
  using AttachLossPassBase::AttachLossPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (kind != "cross-entropy" && kind != "mse" && kind != "none") {
      module.emitError() << "unknown loss '" << kind
                         << "'; expected cross-entropy, mse or none";
      return signalPassFailure();
    }
    auto forward = module.lookupSymbol<func::FuncOp>(function);
    if (!forward || forward.isExternal()) {
      module.emitError() << "no function @" << function
                         << " to attach a loss to";
      return signalPassFailure();
    }
    if (module.lookupSymbol(lossFunction)) {
      forward.emitError() << "the module already has a @" << lossFunction
                          << " function";
      return signalPassFailure();
    }
    if (forward.getNumResults() == 0) {
      forward.emitError() << "@" << function
                          << " returns nothing: no output to take a loss of";
      return signalPassFailure();
    }

    OpBuilder builder(module.getContext());
    builder.setInsertionPointAfter(forward);
    auto loss = cast<func::FuncOp>(builder.clone(*forward));
    loss.setSymName(lossFunction);
    auto ret = cast<func::ReturnOp>(loss.getBody().front().getTerminator());
    Value output = ret.getOperand(0);
    auto outType = dyn_cast<RankedTensorType>(output.getType());
    if (!outType || !isa<FloatType>(outType.getElementType())) {
      forward.emitError() << "the model's output " << output.getType()
                          << " is not a float tensor";
      return signalPassFailure();
    }

    builder.setInsertionPoint(ret);
    Location loc = ret.getLoc();
    // Losses are computed in f32 whatever precision the model runs in.
    auto f32 = builder.getF32Type();
    auto toF32 = [&](Value v) -> Value {
      auto t = cast<RankedTensorType>(v.getType());
      if (t.getElementType() == f32)
        return v;
      return CastOp::create(builder, loc, t.clone(f32), v);
    };

    Value value;
    if (kind == "none") {
      if (outType.getRank() != 0) {
        forward.emitError() << "--loss none needs a model whose first output "
                               "is a scalar loss; output 0 is "
                            << outType;
        return signalPassFailure();
      }
      value = toF32(output);
    } else {
      Type labelType;
      if (kind == "cross-entropy") {
        if (outType.getRank() < 1) {
          forward.emitError() << "cross-entropy needs an output with a class "
                                 "axis; output 0 is "
                              << outType;
          return signalPassFailure();
        }
        labelType = RankedTensorType::get(outType.getShape().drop_back(),
                                          builder.getI64Type());
      } else {
        labelType = outType.clone(f32);
      }
      unsigned index = loss.getNumArguments();
      if (failed(loss.insertArgument(
              index, labelType,
              builder.getDictionaryAttr(builder.getNamedAttr(
                  WeftDialect::kInputAttrName, builder.getStringAttr(labels))),
              loc))) {
        loss.emitError() << "could not add the labels argument";
        return signalPassFailure();
      }
      Value labelArg = loss.getArgument(index);
      if (kind == "cross-entropy")
        value = CrossEntropyOp::create(builder, loc, toF32(output), labelArg);
      else
        value = MseOp::create(builder, loc, toF32(output), labelArg);
    }
    func::ReturnOp::create(builder, loc, value);
    ret.erase();
    loss.setFunctionType(builder.getFunctionType(
        loss.getArgumentTypes(), TypeRange{value.getType()}));
    loss.setAllResultAttrs(ArrayRef<DictionaryAttr>{builder.getDictionaryAttr(
        builder.getNamedAttr("weft.output", builder.getStringAttr("loss")))});
  }
};
} // namespace
