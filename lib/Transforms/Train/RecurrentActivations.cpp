//===- RecurrentActivations.cpp - Store or recompute recurrent gates ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Marks weft.lstm / weft.gru ops `recompute` (no stored gates; their
// adjoints recompute them) by mode or, in `auto`, by the size of the gates
// they would store. Runs on the forward model, before --weft-autodiff
// builds the adjoints.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Train/Passes.h"

#include "mlir/IR/Builders.h"

namespace weft {
#define GEN_PASS_DEF_RECURRENTACTIVATIONSPASS
#include "weft/Transforms/Train/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// Bytes of a ranked tensor of a float type.
double bytesOf(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  return static_cast<double>(type.getNumElements()) *
         type.getElementTypeBitWidth() / 8;
}

/// `op` again with `recompute` set and without its gates result, which
/// nothing uses.
template <typename OpT> void markRecompute(OpT op) {
  OpBuilder b(op);
  NamedAttrList attrs(op->getAttrs());
  attrs.set(op.getRecomputeAttrName(), b.getUnitAttr());
  // The result types are inferred again, now without the gates.
  auto marked = OpT::create(b, op.getLoc(), op->getOperands(), attrs);
  for (auto [old, now] : llvm::zip(op->getResults(), marked->getResults()))
    old.replaceAllUsesWith(now);
  op->erase();
}

struct RecurrentActivationsPass
    : public weft::impl::RecurrentActivationsPassBase<
          RecurrentActivationsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (mode != "store" && mode != "recompute" && mode != "auto") {
      emitError(getOperation().getLoc())
          << "--weft-recurrent-activations: mode must be store, recompute or "
             "auto, got '"
          << mode << "'";
      return signalPassFailure();
    }
    if (thresholdMB < 0) {
      emitError(getOperation().getLoc())
          << "--weft-recurrent-activations: threshold-mb must be >= 0, got "
          << thresholdMB;
      return signalPassFailure();
    }
    if (mode == "store")
      return;
    double threshold = thresholdMB * 1024 * 1024;
    auto recompute = [&](auto op) {
      Value gates = op.getGates();
      return gates && gates.use_empty() &&
             (mode == "recompute" || bytesOf(gates) > threshold);
    };
    // Collected first: marking replaces the op.
    SmallVector<Operation *> marked;
    getOperation().walk([&](Operation *op) {
      if (auto lstm = dyn_cast<LstmOp>(op); lstm && recompute(lstm))
        marked.push_back(op);
      if (auto gru = dyn_cast<GruOp>(op); gru && recompute(gru))
        marked.push_back(op);
    });
    for (Operation *op : marked) {
      if (auto lstm = dyn_cast<LstmOp>(op))
        markRecompute(lstm);
      else
        markRecompute(cast<GruOp>(op));
    }
  }
};

} // namespace
