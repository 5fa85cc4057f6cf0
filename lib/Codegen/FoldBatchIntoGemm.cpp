//===- FoldBatchIntoGemm.cpp - Batch axes of matmuls into GEMM rows -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A batch of GEMMs that share a 2-D side is one GEMM over the batch's rows
// stacked. Autodiff writes a linear layer's weight gradient as a batched
// a^T g followed by a sum over the batch; that materializes a [B, K, N]
// tensor and reduces it in a kernel of its own. Stacking the rows instead
// contracts B*M rows in one GEMM:
//
//   sum_b a[b]^T g[b] = (a as [B*M, K])^T (g as [B*M, N])
//
// Row-major, [B.., M, K] as [B*M, K] is the same buffer, so the reshapes
// lower to collapse/expand views and cost nothing.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_FOLDBATCHINTOGEMMPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {

/// A statically shaped tensor of rank >= 3, or null.
RankedTensorType batchedType(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape() || type.getRank() < 3)
    return {};
  return type;
}

/// `v` ([B.., M, C]) as [prod(B) * M, C].
Value stackRows(PatternRewriter &rewriter, Location loc, Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  int64_t cols = type.getShape().back();
  return ReshapeOp::create(
      rewriter, loc, type.clone({type.getNumElements() / cols, cols}), v);
}

/// reduce_sum over all batch axes of matmul(a, g, transpose_lhs) with a:
/// [B.., M, K], g: [B.., M, N] -> matmul([B*M, K], [B*M, N],
/// transpose_lhs), in f32. With either operand's contraction on its last
/// axis the batch would have to interleave with that axis: no contiguous
/// collapse.
struct FoldBatchedWeightGradient : OpRewritePattern<ReduceSumOp> {
  FoldBatchedWeightGradient(MLIRContext *ctx, bool narrow)
      : OpRewritePattern(ctx), narrow(narrow) {}
  bool narrow;

  LogicalResult matchAndRewrite(ReduceSumOp sum,
                                PatternRewriter &rewriter) const override {
    auto matmul = sum.getInput().getDefiningOp<MatMulOp>();
    if (!matmul || !matmul->hasOneUse())
      return rewriter.notifyMatchFailure(sum, "input is no single-use matmul");
    if (!matmul.getTransposeLhs() || matmul.getTransposeRhs())
      return rewriter.notifyMatchFailure(sum, "rows are not contracted");
    RankedTensorType lhs = batchedType(matmul.getLhs());
    RankedTensorType rhs = batchedType(matmul.getRhs());
    if (!lhs || !rhs || lhs.getRank() != rhs.getRank())
      return rewriter.notifyMatchFailure(sum, "operands are not batched alike");
    // A narrower type rounds each batch's product before the sum; one GEMM
    // rounds once, off the reference by that type's precision (`narrow`).
    Type element = matmul.getType().getElementType();
    if (!element.isF32() && !(narrow && isa<FloatType>(element)))
      return rewriter.notifyMatchFailure(sum, "not f32");
    int64_t batchRank = lhs.getRank() - 2;
    // Same batch and same M: nothing broadcasts.
    if (lhs.getShape().drop_back() != rhs.getShape().drop_back())
      return rewriter.notifyMatchFailure(sum, "batch or rows differ");
    ArrayRef<int64_t> axes = sum.getAxes();
    if (int64_t(axes.size()) != batchRank ||
        llvm::any_of(llvm::enumerate(axes),
                     [](auto axis) { return int64_t(axis.index()) != axis.value(); }))
      return rewriter.notifyMatchFailure(sum, "not a sum over the batch");

    Location loc = matmul.getLoc();
    Value product = MatMulOp::create(
        rewriter, loc, stackRows(rewriter, loc, matmul.getLhs()),
        stackRows(rewriter, loc, matmul.getRhs()), /*transpose_lhs=*/true,
        /*transpose_rhs=*/false);
    if (product.getType() != sum.getType()) // keep_dims: leading ones
      product = ReshapeOp::create(rewriter, sum.getLoc(), sum.getType(),
                                  product);
    rewriter.replaceOp(sum, product);
    rewriter.eraseOp(matmul);
    return success();
  }
};

/// matmul(x, w) with x: [B.., M, K] not transposed and w 2-D ->
/// reshape(matmul([B*M, K], w), [B.., M, N]).
struct FoldBatchIntoRows : OpRewritePattern<MatMulOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(MatMulOp matmul,
                                PatternRewriter &rewriter) const override {
    auto rhs = dyn_cast<RankedTensorType>(matmul.getRhs().getType());
    if (matmul.getTransposeLhs() || !batchedType(matmul.getLhs()) || !rhs ||
        rhs.getRank() != 2 || !rhs.hasStaticShape())
      return rewriter.notifyMatchFailure(matmul, "not a batch times a matrix");
    Location loc = matmul.getLoc();
    Value product = MatMulOp::create(
        rewriter, loc, stackRows(rewriter, loc, matmul.getLhs()),
        matmul.getRhs(), /*transpose_lhs=*/false, matmul.getTransposeRhs());
    rewriter.replaceOpWithNewOp<ReshapeOp>(matmul, matmul.getType(), product);
    return success();
  }
};

struct FoldBatchIntoGemmPass
    : public weft::impl::FoldBatchIntoGemmPassBase<FoldBatchIntoGemmPass> {
  using Base::Base;

  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldBatchedWeightGradient>(&getContext(), narrow);
    patterns.add<FoldBatchIntoRows>(&getContext());
    // Folding merges the reshapes of a stacked product read stacked again.
    GreedyRewriteConfig config;
    config.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Disabled);
    // Each rewrite removes a batched matmul, so this converges; were it
    // cut short, what was rewritten is still correct.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns), config);
  }
};

} // namespace
