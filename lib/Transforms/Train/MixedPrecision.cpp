//===- MixedPrecision.cpp - bf16 compute with f32 master weights ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Every weft op's float results take the element type of its float
// operands, so narrowing is a forward walk: cast f32 arguments at entry,
// retype f32 results in place, and cast what the function returns back.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Train/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

#include <map>

namespace weft {
#define GEN_PASS_DEF_MIXEDPRECISIONPASS
#include "weft/Transforms/Train/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
bool isF32Tensor(Type t) {
  auto rt = dyn_cast<RankedTensorType>(t);
  return rt && rt.getElementType().isF32();
}

RankedTensorType toBF16(Type t) {
  auto rt = cast<RankedTensorType>(t);
  return rt.clone(BFloat16Type::get(t.getContext()));
}

struct MixedPrecisionPass
    : public weft::impl::MixedPrecisionPassBase<MixedPrecisionPass> {
  using MixedPrecisionPassBase::MixedPrecisionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(function);
    if (!fn || fn.isExternal()) {
      module.emitError() << "no function @" << function
                         << " to convert to bf16";
      return signalPassFailure();
    }
    Block &body = fn.getBody().front();
    OpBuilder b(fn.getContext());
    b.setInsertionPointToStart(&body);

    // One cast per f32 argument, shared by all its uses -- of one pipeline
    // stage: a parameter two stages read (a tied embedding and head) is
    // narrowed in each, as --weft-assign-stages copies weight-only ops, so
    // the stages share the parameter rather than a value one of them makes.
    StringRef stageAttr = WeftDialect::kStageAttrName;
    for (BlockArgument arg : body.getArguments()) {
      if (!isF32Tensor(arg.getType()) || arg.use_empty())
        continue;
      std::map<int64_t, SmallVector<OpOperand *>> byStage;
      for (OpOperand &use : arg.getUses()) {
        auto stage = use.getOwner()->getAttrOfType<IntegerAttr>(stageAttr);
        byStage[stage ? stage.getInt() : -1].push_back(&use);
      }
      for (auto &[stage, uses] : byStage) {
        auto narrow =
            CastOp::create(b, arg.getLoc(), toBF16(arg.getType()), arg);
        if (stage >= 0)
          narrow->setAttr(stageAttr, b.getI64IntegerAttr(stage));
        for (OpOperand *use : uses)
          use->set(narrow);
      }
    }

    for (Operation &op : llvm::make_early_inc_range(body)) {
      if (auto ret = dyn_cast<func::ReturnOp>(op)) {
        b.setInsertionPoint(ret);
        for (OpOperand &operand : ret->getOpOperands()) {
          Type expected = fn.getResultTypes()[operand.getOperandNumber()];
          if (operand.get().getType() != expected)
            operand.set(
                CastOp::create(b, ret.getLoc(), expected, operand.get()));
        }
        continue;
      }
      if (auto cst = dyn_cast<ConstantOp>(op)) {
        if (!isF32Tensor(cst.getType()))
          continue;
        auto dense = dyn_cast<DenseFPElementsAttr>(cst.getValue());
        if (!dense) {
          // Other encodings (dense resources) stay as they are, narrowed by
          // a cast.
          b.setInsertionPointAfter(cst);
          Value narrow =
              CastOp::create(b, cst.getLoc(), toBF16(cst.getType()), cst);
          cst.getResult().replaceAllUsesExcept(narrow, narrow.getDefiningOp());
          continue;
        }
        auto bf16 = BFloat16Type::get(fn.getContext());
        cst.setValueAttr(dense.mapValues(bf16, [](const APFloat &v) {
          APFloat narrow = v;
          bool lost;
          narrow.convert(APFloat::BFloat(), APFloat::rmNearestTiesToEven,
                         &lost);
          return narrow.bitcastToAPInt();
        }));
        cst.getResult().setType(toBF16(cst.getType()));
        continue;
      }
      // Casts the model itself performs (e.g. int -> f32) now produce bf16.
      for (OpResult result : op.getResults())
        if (isF32Tensor(result.getType()))
          result.setType(toBF16(result.getType()));
    }
    if (failed(verify(fn))) {
      fn.emitError() << "could not run @" << function << " in bf16";
      return signalPassFailure();
    }
    recordTrainConfig(module,
                      b.getNamedAttr("precision", b.getStringAttr("bf16")));
  }
};
} // namespace
