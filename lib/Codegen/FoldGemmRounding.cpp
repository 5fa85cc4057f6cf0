//===- FoldGemmRounding.cpp - A bf16 product rounded by its GEMM ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Under --precision bf16 a product sums in f32 into an f32 result, and an
// elementwise op rounds it to bf16 (MatMul.cpp: the evaluator rounds each
// dot product once). Where that rounding is the product's only use (an
// attention's scores, its probabilities times V), the f32 result is a
// whole extra tensor written and read once more: on a GPU the scores' f32
// copy and its rounding pass were 7 ms of GPT-2 124M's 98 ms step. The
// runtime's weft_rt_sbgemm_bf16 sums in f32 and rounds C once, which is
// the same number; so the product takes the bf16 result directly.
//
// The product with a bf16 init is a promise that --weft-linalg-to-blas
// makes it that call (a linalg loop nest would sum in bf16), which that
// pass checks.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace weft {
#define GEN_PASS_DEF_FOLDGEMMROUNDINGPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// `op` is `out = truncf(in)` from f32 to bf16 on identical shapes.
bool isRounding(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      !op.hasPureTensorSemantics() ||
      op.getNumParallelLoops() != op.getNumLoops() ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return false;
  auto in = dyn_cast<RankedTensorType>(op.getDpsInputs()[0].getType());
  auto out = dyn_cast<RankedTensorType>(op.getDpsInits()[0].getType());
  if (!in || !out || !in.getElementType().isF32() ||
      !out.getElementType().isBF16() || in.getShape() != out.getShape())
    return false;
  Block &body = op.getRegion().front();
  if (body.getOperations().size() != 2)
    return false;
  auto trunc = dyn_cast<arith::TruncFOp>(body.front());
  return trunc && trunc.getIn() == body.getArgument(0) &&
         body.getTerminator()->getOperand(0) == trunc.getResult();
}

struct FoldRoundingIntoGemm : OpRewritePattern<linalg::GenericOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(linalg::GenericOp op,
                                PatternRewriter &rewriter) const override {
    if (!isRounding(op))
      return failure();
    Value product = op.getDpsInputs()[0];
    Operation *gemm = product.getDefiningOp();
    if (!gemm || !isa<linalg::MatmulOp, linalg::BatchMatmulOp>(gemm) ||
        !product.hasOneUse())
      return failure();
    auto contraction = cast<linalg::LinalgOp>(gemm);
    for (Value input : contraction.getDpsInputs())
      if (!cast<ShapedType>(input.getType()).getElementType().isBF16())
        return failure();
    auto fill = contraction.getDpsInits()[0].getDefiningOp<linalg::FillOp>();
    if (!fill || !matchPattern(fill.getInputs()[0], m_AnyZeroFloat()))
      return failure();
    Location loc = op.getLoc();
    Value init = op.getDpsInits()[0];
    auto type = cast<RankedTensorType>(init.getType());
    Value zero = arith::ConstantOp::create(
        rewriter, loc, rewriter.getZeroAttr(type.getElementType()));
    Value zeroed = linalg::FillOp::create(rewriter, loc, zero, init).result();
    SmallVector<NamedAttribute> attrs;
    if (Attribute maps = gemm->getAttr("indexing_maps"))
      attrs.push_back(rewriter.getNamedAttr("indexing_maps", maps));
    Operation *rounded;
    if (isa<linalg::MatmulOp>(gemm))
      rounded = linalg::MatmulOp::create(rewriter, loc, TypeRange{type},
                                         contraction.getDpsInputs(),
                                         ValueRange{zeroed}, attrs);
    else
      rounded = linalg::BatchMatmulOp::create(rewriter, loc, TypeRange{type},
                                              contraction.getDpsInputs(),
                                              ValueRange{zeroed}, attrs);
    rewriter.replaceOp(op, rounded->getResults());
    rewriter.eraseOp(gemm);
    return success();
  }
};

struct FoldGemmRoundingPass
    : weft::impl::FoldGemmRoundingPassBase<FoldGemmRoundingPass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FoldRoundingIntoGemm>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
