//===- FuseKernels.cpp - One loop nest per elementwise/reduction chain ----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Without fusion every linalg op is one pass over memory: a softmax reads
// and writes its row four times, a layer norm six. This pass groups such
// chains into one `scf.forall` over rows whose body computes a row of every
// op in the chain, so intermediates live in tiles the size of a row.
//
// 1. Named ops (except fills, contractions, convolutions) are generalized
//    and aggregated ops (linalg.softmax) decomposed, so one mechanism fuses
//    everything.
// 2. Upstream elementwise fusion merges single-use elementwise chains.
// 3. Walking the block backwards, each fusible op still at the top level is
//    a kernel root: its parallel dimensions but the innermost are tiled by
//    1 and producers are fused by `tileConsumerAndFuseProducersUsingSCF`
//    when every iteration computes a disjoint slice of them.
// 4. Each contraction gets its own zero fill right before it, so the BLAS
//    rewrite after bufferization sees `fill; matmul` on one buffer.
//
//===----------------------------------------------------------------------===//

#include "weft/Transforms/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseSet.h"

namespace weft {
#define GEN_PASS_DEF_FUSEKERNELSPASS
#include "weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
constexpr llvm::StringLiteral kKernelAttrName = "weft.kernel";

/// GEMM-like and convolution-like ops: they go to BLAS or kernels of their
/// own and are never fused into or out of. A contraction without an M or N
/// dimension (a row dot product) is an ordinary reduction.
bool isContractionLike(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp)
    return false;
  if (linalg::isaConvolutionOpInterface(linalgOp))
    return true;
  if (!linalg::isaContractionOpInterface(linalgOp))
    return false;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(linalgOp);
  return succeeded(dims) && !dims->m.empty() && !dims->n.empty() &&
         !dims->k.empty();
}

bool hasStaticTensorOperands(Operation *op) {
  auto isStatic = [](Type t) {
    auto shaped = dyn_cast<ShapedType>(t);
    return !shaped || shaped.hasStaticShape();
  };
  return llvm::all_of(op->getOperandTypes(), isStatic) &&
         llvm::all_of(op->getResultTypes(), isStatic);
}

/// Ops that can take part in a fused kernel.
bool isFusible(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp && linalgOp.hasPureTensorSemantics() &&
         !isContractionLike(op) && hasStaticTensorOperands(op);
}

/// Tile sizes for a root: 1 for every parallel loop but the innermost one,
/// 0 (untiled) for the rest. Empty when there is nothing to tile.
SmallVector<int64_t> rootTileSizes(linalg::LinalgOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> sizes(iterators.size(), 0);
  std::optional<unsigned> lastParallel;
  for (auto [i, it] : llvm::enumerate(iterators))
    if (it == utils::IteratorType::parallel) {
      if (lastParallel)
        sizes[*lastParallel] = 1;
      lastParallel = i;
    }
  if (llvm::all_of(sizes, [](int64_t s) { return s == 0; }))
    return {};
  return sizes;
}

/// Records erased ops so the backward walk skips roots fused elsewhere.
struct ErasedOps : public RewriterBase::Listener {
  llvm::DenseSet<Operation *> erased;
  void notifyOperationErased(Operation *op) override { erased.insert(op); }
};

struct FuseKernelsPass : public weft::impl::FuseKernelsPassBase<FuseKernelsPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal() || !fn.getBody().hasOneBlock())
      return;
    if (failed(prepare(fn)) || failed(fuseElementwise(fn)))
      return signalPassFailure();
    if (failed(formKernels(fn)))
      return signalPassFailure();
    IRRewriter rewriter(&getContext());
    DominanceInfo dominance;
    eliminateCommonSubExpressions(rewriter, dominance, fn);
    giveContractionsOwnFills(fn);
    numberKernels(fn);
  }

  /// Generalizes named elementwise/reduction ops and decomposes aggregated
  /// ones, so that the fusion below sees generics only.
  LogicalResult prepare(func::FuncOp fn) {
    IRRewriter rewriter(&getContext());
    SmallVector<Operation *> aggregated, named;
    fn.walk([&](Operation *op) {
      if (isa<linalg::AggregatedOpInterface>(op) && !isa<linalg::LinalgOp>(op))
        aggregated.push_back(op);
    });
    for (Operation *op : aggregated) {
      rewriter.setInsertionPoint(op);
      FailureOr<SmallVector<Value>> values =
          cast<linalg::AggregatedOpInterface>(op).decomposeOperation(rewriter);
      if (failed(values))
        continue; // Still correct as a single op.
      rewriter.replaceOp(op, *values);
    }
    fn.walk([&](linalg::LinalgOp op) {
      if (isa<linalg::GenericOp, linalg::FillOp>(op) || isContractionLike(op))
        return;
      named.push_back(op);
    });
    for (Operation *op : named) {
      rewriter.setInsertionPoint(op);
      (void)linalg::generalizeNamedOp(rewriter, cast<linalg::LinalgOp>(op));
    }
    return success();
  }

  LogicalResult fuseElementwise(func::FuncOp fn) {
    RewritePatternSet patterns(&getContext());
    linalg::populateElementwiseOpsFusionPatterns(
        patterns, [](OpOperand *operand) {
          Operation *producer = operand->get().getDefiningOp();
          return producer && producer->hasOneUse() &&
                 !isContractionLike(producer) &&
                 !isContractionLike(operand->getOwner());
        });
    return applyPatternsGreedily(fn, std::move(patterns));
  }

  LogicalResult formKernels(func::FuncOp fn) {
    MLIRContext *ctx = &getContext();
    Block &block = fn.getBody().front();
    ErasedOps erasedOps;
    IRRewriter rewriter(ctx, &erasedOps);

    RewritePatternSet cleanup(ctx);
    tensor::ExtractSliceOp::getCanonicalizationPatterns(cleanup, ctx);
    tensor::populateMergeConsecutiveInsertExtractSlicePatterns(cleanup);
    tensor::populateBubbleUpExtractSliceOpPatterns(cleanup);
    tensor::populateFoldTensorEmptyPatterns(cleanup);
    FrozenRewritePatternSet frozenCleanup(std::move(cleanup));

    SmallVector<Operation *> ops;
    for (Operation &op : block.without_terminator())
      ops.push_back(&op);
    for (Operation *op : llvm::reverse(ops)) {
      if (erasedOps.erased.contains(op) || !isFusible(op) ||
          isa<linalg::FillOp>(op))
        continue;
      auto linalgOp = cast<linalg::LinalgOp>(op);
      SmallVector<int64_t> sizes = rootTileSizes(linalgOp);
      if (sizes.empty())
        continue;
      int64_t tripCount = 1;
      SmallVector<int64_t> bounds = linalgOp.getStaticLoopRanges();
      for (auto [size, bound] : llvm::zip(sizes, bounds))
        if (size)
          tripCount *= bound;

      scf::SCFTilingOptions tiling;
      tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
      tiling.setTileSizes(getAsIndexOpFoldResult(ctx, sizes));
      scf::SCFTileAndFuseOptions options;
      options.setTilingOptions(tiling);
      options.cleanupPatterns = frozenCleanup;
      options.setFusionControlFn(
          [&](tensor::ExtractSliceOp slice, OpResult producer,
              bool) -> std::optional<scf::SCFTileAndFuseOptions::ControlFnResult> {
            Operation *producerOp = producer.getOwner();
            if (!isFusible(producerOp) || producerOp->getBlock() != &block)
              return std::nullopt;
            // Fuse only when the iterations partition the producer: a slice
            // every iteration shares (a broadcast operand) would be
            // recomputed on each and could not be yielded.
            RankedTensorType sliceType = slice.getResultType();
            auto fullType = cast<RankedTensorType>(producer.getType());
            if (!sliceType.hasStaticShape() ||
                sliceType.getNumElements() * tripCount !=
                    fullType.getNumElements())
              return std::nullopt;
            // Yield it when ops after the kernel use it too. (The loop nest
            // sits right after the root; its own uses do not count.)
            Operation *loop = block.findAncestorOpInBlock(*slice);
            scf::SCFTileAndFuseOptions::ControlFnResult result;
            result.yieldProducerReplacement =
                llvm::any_of(producer.getUses(), [&](OpOperand &use) {
                  Operation *user = block.findAncestorOpInBlock(*use.getOwner());
                  return user && user != op && user != loop &&
                         op->isBeforeInBlock(user);
                });
            return result;
          });

      rewriter.setInsertionPoint(op);
      FailureOr<scf::SCFTileAndFuseResult> fused =
          scf::tileConsumerAndFuseProducersUsingSCF(
              rewriter, cast<TilingInterface>(op), options);
      if (failed(fused))
        return op->emitError("could not tile this op into a fused kernel");
      if (fused->loops.empty())
        continue;
      Operation *loop = fused->loops.front();
      loop->setAttr(kKernelAttrName, UnitAttr::get(ctx));

      // Uses after the loop read its results; uses before it belong to ops
      // that are fused later or keep their own copy of the producer.
      SmallVector<Operation *> originals = {op};
      llvm::append_range(originals, fused->fusedProducers);
      for (Operation *original : originals)
        for (Value result : original->getResults()) {
          Value replacement = fused->replacements.lookup(result);
          if (!replacement)
            continue;
          rewriter.replaceUsesWithIf(result, replacement, [&](OpOperand &use) {
            Operation *user = block.findAncestorOpInBlock(*use.getOwner());
            return user && loop->isBeforeInBlock(user);
          });
        }
      // Fusion leaves the slices it fused along dead inside the loop; they
      // still use the original producers.
      SmallVector<Operation *> slices;
      loop->walk([&](tensor::ExtractSliceOp slice) {
        slices.push_back(slice);
      });
      eraseDead(rewriter, slices);
      eraseDead(rewriter, originals);
    }
    return success();
  }

  /// Erases the ops in `candidates` that no longer have uses, repeatedly,
  /// since a dead consumer may have kept its producer alive.
  static void eraseDead(RewriterBase &rewriter,
                        ArrayRef<Operation *> candidates) {
    llvm::DenseSet<Operation *> erased;
    bool changed = true;
    while (changed) {
      changed = false;
      for (Operation *op : llvm::reverse(candidates)) {
        if (erased.contains(op) || !op->use_empty())
          continue;
        erased.insert(op);
        rewriter.eraseOp(op);
        changed = true;
      }
    }
  }

  /// Every contraction writes its own freshly filled init right after the
  /// fill, which is what `--weft-linalg-to-blas` needs after bufferization.
  void giveContractionsOwnFills(func::FuncOp fn) {
    IRRewriter rewriter(&getContext());
    fn.walk([&](linalg::LinalgOp op) {
      if (!isContractionLike(op) || !op.hasPureTensorSemantics())
        return;
      for (OpOperand &init : op.getDpsInitsMutable()) {
        auto fill = init.get().getDefiningOp<linalg::FillOp>();
        if (!fill || fill->getBlock() != op->getBlock())
          continue;
        if (fill->hasOneUse()) {
          fill->moveBefore(op);
          continue;
        }
        rewriter.setInsertionPoint(op);
        init.set(rewriter.clone(*fill)->getResult(0));
      }
    });
  }

  /// Names kernels "fused_N" in program order, whatever order they were
  /// formed in.
  void numberKernels(func::FuncOp fn) {
    unsigned next = 0;
    fn.walk<WalkOrder::PreOrder>([&](Operation *op) {
      if (!op->hasAttr(kKernelAttrName))
        return;
      op->setAttr(kKernelAttrName,
                  StringAttr::get(&getContext(),
                                  "fused_" + std::to_string(next++)));
    });
  }
};
} // namespace
