//===- ReassociateReductions.cpp - Let LLVM vectorize float reductions ----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A float sum in strict order is a chain of dependent adds: LLVM's loop
// vectorizer keeps it scalar unless the add may be reassociated. Softmax,
// layer norm, cross-entropy and bias gradients are such sums over a row,
// and they dominate the kernels' time. Marking only the combining op of a
// reduction `reassoc` lets the vectorizer keep several partial sums (the
// order every BLAS and PyTorch's vectorized kernels use too); the
// element-wise math of the kernel keeps its strict semantics. The order
// stays fixed for a given CPU, so runs repeat bit for bit.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace weft {
#define GEN_PASS_DEF_REASSOCIATEREDUCTIONSPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
struct ReassociateReductionsPass
    : public weft::impl::ReassociateReductionsPassBase<
          ReassociateReductionsPass> {
  void runOnOperation() override {
    getOperation()->walk([](linalg::GenericOp op) {
      if (op.getNumReductionLoops() == 0)
        return;
      auto yield = cast<linalg::YieldOp>(op.getBody()->getTerminator());
      for (auto [value, out] :
           llvm::zip(yield.getValues(), op.getRegionOutputArgs())) {
        Operation *combiner = value.getDefiningOp();
        if (!isa_and_nonnull<arith::AddFOp, arith::MulFOp>(combiner) ||
            !llvm::is_contained(combiner->getOperands(), out))
          continue;
        auto fastmath = cast<arith::ArithFastMathInterface>(combiner);
        fastmath->setAttr(
            fastmath.getFastMathAttrName(),
            arith::FastMathFlagsAttr::get(
                op.getContext(), fastmath.getFastMathFlagsAttr().getValue() |
                                     arith::FastMathFlags::reassoc));
      }
    });
  }
};
} // namespace
