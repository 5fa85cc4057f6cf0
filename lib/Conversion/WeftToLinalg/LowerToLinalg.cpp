//===- LowerToLinalg.cpp - weft -> linalg, tensor, arith, math, scf -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The driver of --weft-lower-to-linalg: a partial dialect conversion with
// every weft op illegal and the upstream dialects the patterns build legal,
// so an op without a pattern (or one whose pattern declines an unsupported
// case) fails the pass with an error naming it.
// Tensor types do not change, so no type converter is needed; the patterns
// live in one file per op family.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "weft/Conversion/Passes.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Transforms/DialectConversion.h"

namespace weft {
#define GEN_PASS_DEF_LOWERTOLINALGPASS
#include "weft/Conversion/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// The mark --weft-recompute (and a recomputing recurrent adjoint) puts on
/// ops the backward runs again.
constexpr llvm::StringLiteral kRecomputedAttrName = "weft.recomputed";

/// Passes `weft.recomputed` on from a weft op to the ops its pattern built:
/// otherwise the CSE after lowering would find a recomputed op equal to the
/// forward's and fold the recomputation away. The conversion reports its
/// replacements once it has succeeded; the ops built for a marked op are
/// those its results come from, back to the results of other converted ops
/// or to ops that existed before.
struct RecomputedMarks : public RewriterBase::Listener {
  DenseSet<Operation *> marked, existing;
  DenseSet<Value> replacements;
  SmallVector<Value> roots;

  void notifyOperationReplaced(Operation *op, ValueRange values) override {
    replacements.insert(values.begin(), values.end());
    if (marked.contains(op))
      roots.append(values.begin(), values.end());
  }

  void mark(MLIRContext *ctx) {
    SmallVector<Value> pending(roots);
    DenseSet<Operation *> seen;
    auto unit = UnitAttr::get(ctx);
    while (!pending.empty()) {
      Value v = pending.pop_back_val();
      Operation *def = v.getDefiningOp();
      if (!def || existing.contains(def) || !seen.insert(def).second)
        continue;
      def->setAttr(kRecomputedAttrName, unit);
      for (Value operand : def->getOperands())
        if (!replacements.contains(operand))
          pending.push_back(operand);
    }
  }
};

struct LowerToLinalgPass
    : public weft::impl::LowerToLinalgPassBase<LowerToLinalgPass> {
  void runOnOperation() override {
    MLIRContext *ctx = &getContext();
    ConversionTarget target(*ctx);
    target.addIllegalDialect<WeftDialect>();
    target.addLegalDialect<arith::ArithDialect, linalg::LinalgDialect,
                           math::MathDialect, scf::SCFDialect,
                           tensor::TensorDialect>();
    // The recomputing recurrent adjoints' input projection (Recurrent.cpp).
    target.addLegalOp<bufferization::AllocTensorOp>();
    // The attention kernels' calls on buffers (Attention.cpp).
    target.addLegalOp<bufferization::ToBufferOp, bufferization::ToTensorOp,
                      memref::AllocOp, memref::ExtractAlignedPointerAsIndexOp,
                      func::CallOp, func::FuncOp, LLVM::IntToPtrOp>();

    RewritePatternSet patterns(ctx);
    lowering::populateElementwisePatterns(patterns);
    lowering::populateCastPatterns(patterns);
    lowering::populateReductionPatterns(patterns);
    lowering::populateMatMulPatterns(patterns);
    lowering::populateConvolutionPatterns(patterns);
    lowering::populatePoolingPatterns(patterns);
    lowering::populateDataMovementPatterns(patterns);
    lowering::populateSelectionPatterns(patterns);
    lowering::populateRecurrentPatterns(patterns);
    lowering::populateAttentionPatterns(patterns);

    RecomputedMarks marks;
    getOperation()->walk([&](Operation *op) {
      marks.existing.insert(op);
      if (op->hasAttr(kRecomputedAttrName))
        marks.marked.insert(op);
    });
    ConversionConfig config;
    if (!marks.marked.empty())
      config.listener = &marks;
    if (failed(applyPartialConversion(getOperation(), target,
                                      std::move(patterns), config)))
      return signalPassFailure();
    marks.mark(ctx);
  }
};

} // namespace
