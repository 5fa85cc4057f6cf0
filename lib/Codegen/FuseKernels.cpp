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
//    A widening cast (bf16 to f32) read whole by several fusible ops is
//    cloned for each: reading the narrow tensor again costs less than
//    writing the wide one and reading it back. bf16 logits read as f32 by
//    cross-entropy's forward and backward were a 1.6 GB f32 copy (GPT-2
//    124M, batch 8).
// 2. Upstream elementwise fusion merges single-use elementwise chains.
// 3. Walking the block backwards, each fusible op still at the top level is
//    a kernel root: its parallel dimensions but the innermost are tiled by
//    1 (`scf::tileUsingSCF`) and producers of its fusion group are fused
//    along their slices (`scf::tileAndFuseProducerOfSlice`) when every
//    iteration computes a disjoint slice of them; those used after the
//    kernel are yielded by it.
// 4. Ops that cannot fuse because their maps compute indices (im2col
//    gathers, pooling windows, named pooling and grouped convolution ops)
//    are tiled alone along the parallel loops that every map uses as a
//    plain index, so they run in parallel too.
// 5. A one-dimensional element-wise op, which step 3 does not tile (its
//    only loop is the innermost), absorbs its one-dimensional element-wise
//    producers even where later ops read them too, as extra results: a
//    1-D parameter's AdamW moments are step results and inputs of its
//    update, and were three passes over memory instead of one.
// 6. Each contraction gets its own zero fill right before it, so the BLAS
//    rewrite after bufferization sees `fill; matmul` on one buffer.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/TilingInterfaceImpl.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Transforms/TileUsingInterface.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Dominance.h"
#include "mlir/Transforms/CSE.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallBitVector.h"

#include <deque>
#include <functional>

namespace weft {
#define GEN_PASS_DEF_FUSEKERNELSPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
/// GEMM-like and convolution-like ops: they go to BLAS or kernels of their
/// own and are never fused into or out of. A contraction without an M or N
/// dimension (a row dot product) is an ordinary reduction.
/// A product with M, N and K dimensions: what BLAS runs.
bool isMatmulLike(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  if (!linalgOp || !linalg::isaContractionOpInterface(linalgOp))
    return false;
  FailureOr<linalg::ContractionDimensions> dims =
      linalg::inferContractionDims(linalgOp);
  return succeeded(dims) && !dims->m.empty() && !dims->n.empty() &&
         !dims->k.empty();
}

bool isContractionLike(Operation *op) {
  auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
  return linalgOp &&
         (linalg::isaConvolutionOpInterface(linalgOp) || isMatmulLike(op));
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
  // Windows (d0 + d2) make tiles overlap: pooling-like ops stay whole.
  return linalgOp && isa<TilingInterface>(op) &&
         linalgOp.hasPureTensorSemantics() &&
         linalgOp.hasOnlyProjectedPermutations() && !isContractionLike(op) &&
         hasStaticTensorOperands(op);
}

/// A generic that only widens its one input, element for element (extf).
bool isWideningCast(linalg::GenericOp op) {
  if (op.getNumDpsInputs() != 1 || op.getNumDpsInits() != 1 ||
      op.getNumReductionLoops() != 0 ||
      !llvm::all_of(op.getIndexingMapsArray(),
                    [](AffineMap m) { return m.isIdentity(); }))
    return false;
  Block &body = op.getRegion().front();
  auto ext = dyn_cast<arith::ExtFOp>(&body.front());
  return ext && ext.getIn() == body.getArgument(0) &&
         body.getTerminator()->getOperand(0) == ext.getResult() &&
         std::next(body.begin()) == Block::iterator(body.getTerminator());
}

/// Tile sizes for a root: 1 for every parallel loop but the innermost one,
/// 0 (untiled) for the rest. A lone parallel loop with reductions inside it
/// (a bias gradient: sum over N, H, W for each channel) is tiled too, so its
/// rows run in parallel; one that is the innermost loop stays whole, for
/// the vectorizer. Empty when there is nothing to tile.
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
  if (lastParallel && *lastParallel + 1 < iterators.size() &&
      llvm::all_of(sizes, [](int64_t s) { return s == 0; }))
    sizes[*lastParallel] = 1;
  if (llvm::all_of(sizes, [](int64_t s) { return s == 0; }))
    return {};
  return sizes;
}

/// Tile sizes for an op that cannot fuse because its maps compute indices
/// (an im2col gather, a pooling window or its gradient): 1 for each
/// parallel loop, but the innermost, that every map uses only as a plain
/// index, so tiles never overlap and the iterations run in parallel without
/// producers fused in. Empty when no loop qualifies.
///
/// Tiling hands linalg every loop's range, tiled or not, and linalg slices
/// an operand along a computed index from its value at the first and last
/// iteration: exact only where the index never decreases as a loop
/// advances. So every computed index must be monotone (sums of loops times
/// positive constants, floordivs of those by positive constants; terms in
/// loops of one iteration, such as a pooling gradient's `- i` over a 1 x 1
/// window, are constants), or the op stays whole.
SmallVector<int64_t> windowedTileSizes(linalg::LinalgOp op) {
  SmallVector<utils::IteratorType> iterators = op.getIteratorTypesArray();
  SmallVector<int64_t> ranges = op.getStaticLoopRanges();
  SmallVector<int64_t> sizes(iterators.size(), 0);
  llvm::SmallBitVector compound(iterators.size());
  auto isConstantOverLoops = [&](AffineExpr e) {
    bool constant = true;
    e.walk([&](AffineExpr sub) {
      if (auto dim = dyn_cast<AffineDimExpr>(sub))
        constant &= ranges[dim.getPosition()] == 1;
    });
    return constant;
  };
  std::function<bool(AffineExpr)> isMonotone = [&](AffineExpr e) {
    if (isa<AffineDimExpr>(e) || isConstantOverLoops(e))
      return true;
    auto bin = dyn_cast<AffineBinaryOpExpr>(e);
    if (!bin)
      return false;
    auto factor = dyn_cast<AffineConstantExpr>(bin.getRHS());
    switch (bin.getKind()) {
    case AffineExprKind::Add:
      return isMonotone(bin.getLHS()) && isMonotone(bin.getRHS());
    case AffineExprKind::Mul:
    case AffineExprKind::FloorDiv:
      return factor && factor.getValue() > 0 && isMonotone(bin.getLHS());
    default:
      return false;
    }
  };
  for (AffineMap map : op.getIndexingMapsArray())
    for (AffineExpr result : map.getResults()) {
      if (isa<AffineDimExpr, AffineConstantExpr>(result))
        continue;
      if (!isMonotone(result))
        return {};
      result.walk([&](AffineExpr e) {
        if (auto dim = dyn_cast<AffineDimExpr>(e))
          compound.set(dim.getPosition());
      });
    }
  for (unsigned i = 0; i + 1 < iterators.size(); ++i)
    if (iterators[i] == utils::IteratorType::parallel && !compound.test(i))
      sizes[i] = 1;
  if (llvm::all_of(sizes, [](int64_t s) { return s == 0; }))
    return {};
  return sizes;
}

/// Upper bound on the producers fused into one kernel: a guard against
/// pathological graphs, far above what a layer norm backward needs.
constexpr size_t kMaxFusedPerKernel = 256;

/// Whether two offsets, sizes or strides are the same: one value, equal
/// constants, or one affine map applied to the same operands.
bool sameIndex(OpFoldResult a, OpFoldResult b) {
  if (isEqualConstantIntOrValue(a, b))
    return true;
  auto va = dyn_cast<Value>(a), vb = dyn_cast<Value>(b);
  if (!va || !vb)
    return false;
  auto applyA = va.getDefiningOp<affine::AffineApplyOp>();
  auto applyB = vb.getDefiningOp<affine::AffineApplyOp>();
  return applyA && applyB && applyA.getAffineMap() == applyB.getAffineMap() &&
         applyA.getOperands() == applyB.getOperands();
}

bool sameSlice(tensor::ExtractSliceOp a, tensor::ExtractSliceOp b) {
  auto same = [](ArrayRef<OpFoldResult> x, ArrayRef<OpFoldResult> y) {
    return x.size() == y.size() && llvm::all_of(llvm::zip(x, y), [](auto pair) {
             return sameIndex(std::get<0>(pair), std::get<1>(pair));
           });
  };
  return a.getResultType() == b.getResultType() &&
         same(a.getMixedOffsets(), b.getMixedOffsets()) &&
         same(a.getMixedSizes(), b.getMixedSizes()) &&
         same(a.getMixedStrides(), b.getMixedStrides());
}

/// The untiled value a slice inside a kernel reads, looking through the
/// loops' shared outputs to their initial values.
OpResult producerOf(tensor::ExtractSliceOp slice) {
  Value value = slice.getSource();
  while (auto arg = dyn_cast<BlockArgument>(value)) {
    auto forall = dyn_cast<scf::ForallOp>(arg.getOwner()->getParentOp());
    if (!forall)
      return nullptr;
    OpOperand *init = forall.getTiedOpOperand(arg);
    if (!init)
      return nullptr;
    value = init->get();
  }
  return dyn_cast<OpResult>(value);
}

/// Records erased ops so the backward walk skips roots fused elsewhere.
struct ErasedOps : public RewriterBase::Listener {
  llvm::DenseSet<Operation *> erased;
  void notifyOperationErased(Operation *op) override { erased.insert(op); }
};

struct FuseKernelsPass
    : public weft::impl::FuseKernelsPassBase<FuseKernelsPass> {
  /// Tiling needs linalg's TilingInterface models, whichever tool runs us.
  void getDependentDialects(DialectRegistry &registry) const override {
    Base::getDependentDialects(registry);
    linalg::registerTilingInterfaceExternalModels(registry);
  }

  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (fn.isExternal() || !fn.getBody().hasOneBlock())
      return;
    if (failed(prepare(fn)) || failed(fuseElementwise(fn)))
      return signalPassFailure();
    if (failed(formKernels(fn)) || failed(fuseIntoUntiledConsumers(fn)))
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
    cloneWideningCasts(rewriter, fn);
    return success();
  }

  /// Gives each fusible op that reads a widening cast's whole result, in
  /// its own loop order, a clone of the cast, so that the cast fuses into
  /// it instead of being written out for all of them; an element read
  /// alone (tensor.extract: cross-entropy's logit at the label) reads the
  /// narrow tensor and widens that element. Other readers (a GEMM, the
  /// step's results) keep the original.
  void cloneWideningCasts(IRRewriter &rewriter, func::FuncOp fn) {
    SmallVector<linalg::GenericOp> casts;
    fn.walk([&](linalg::GenericOp op) {
      if (isWideningCast(op) &&
          (!op->hasOneUse() || isa<tensor::ExtractOp>(*op->user_begin())))
        casts.push_back(op);
    });
    for (linalg::GenericOp cast : casts) {
      Value narrow = cast.getDpsInputOperand(0)->get();
      Value wide = cast->getResult(0);
      Type wideType =
          llvm::cast<RankedTensorType>(wide.getType()).getElementType();
      for (OpOperand &use : llvm::make_early_inc_range(wide.getUses())) {
        auto extract = dyn_cast<tensor::ExtractOp>(use.getOwner());
        if (!extract || extract.getTensor() != wide)
          continue;
        rewriter.setInsertionPoint(extract);
        Value element = tensor::ExtractOp::create(rewriter, extract.getLoc(),
                                                  narrow, extract.getIndices());
        rewriter.replaceOp(extract,
                           arith::ExtFOp::create(rewriter, extract.getLoc(),
                                                 wideType, element));
      }
      SmallVector<OpOperand *> readers;
      for (OpOperand &use : cast->getResult(0).getUses()) {
        auto reader = dyn_cast<linalg::LinalgOp>(use.getOwner());
        if (reader && isFusible(reader) && reader.isDpsInput(&use) &&
            reader.getMatchingIndexingMap(&use).isIdentity())
          readers.push_back(&use);
      }
      for (OpOperand *use : readers) {
        rewriter.setInsertionPointAfter(cast);
        Operation *clone = rewriter.clone(*cast);
        rewriter.modifyOpInPlace(use->getOwner(),
                                 [&] { use->set(clone->getResult(0)); });
      }
      if (cast->use_empty())
        rewriter.eraseOp(cast);
    }
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
      if (failed(formKernel(rewriter, block, linalgOp, sizes)))
        return failure();
    }
    // Windowed ops left at the top level become parallel loops of their
    // own (no fusion: their tiles read overlapping slices).
    ops.clear();
    for (Operation &op : block.without_terminator())
      ops.push_back(&op);
    // Pooling and grouped convolutions (named ops with windows; groups-free
    // convolutions are im2col + GEMM by now) are windowed ops too: they ran
    // on one thread while the others waited. Products stay whole for BLAS.
    for (Operation *op : ops) {
      auto linalgOp = dyn_cast<linalg::LinalgOp>(op);
      if (!linalgOp || isFusible(op) || isMatmulLike(op) ||
          isa<linalg::FillOp>(op) || !isa<TilingInterface>(op) ||
          !linalgOp.hasPureTensorSemantics() || !hasStaticTensorOperands(op))
        continue;
      SmallVector<int64_t> sizes = windowedTileSizes(linalgOp);
      if (sizes.empty())
        continue;
      scf::SCFTilingOptions tiling;
      tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
      tiling.setTileSizes(getAsIndexOpFoldResult(ctx, sizes));
      rewriter.setInsertionPoint(op);
      FailureOr<scf::SCFTilingResult> tiled =
          scf::tileUsingSCF(rewriter, cast<TilingInterface>(op), tiling);
      if (failed(tiled))
        return op->emitError("could not tile this op into a parallel kernel");
      if (!tiled->loops.empty())
        rewriter.replaceOp(op, tiled->replacements);
    }
    return success();
  }

  /// Fuses into each top-level element-wise op of one loop (untiled by
  /// formKernels) its element-wise producers of one loop, also those that
  /// later ops read: they become results of the fused op, so nothing is
  /// computed twice. A producer read by another op before the consumer
  /// stays whole, since the fused op would not dominate that use.
  LogicalResult fuseIntoUntiledConsumers(func::FuncOp fn) {
    Block &block = fn.getBody().front();
    auto isVectorMap = [&](Operation *op) {
      auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
      return generic && generic->getBlock() == &block &&
             generic.getNumLoops() == 1 && generic.getNumParallelLoops() == 1 &&
             generic.hasPureTensorSemantics() && hasStaticTensorOperands(op);
    };
    IRRewriter rewriter(&getContext());
    SmallVector<Operation *> consumers;
    for (Operation &op : block.without_terminator())
      if (isVectorMap(&op))
        consumers.push_back(&op);
    for (Operation *consumer : consumers) {
      bool changed = true;
      while (changed) {
        changed = false;
        for (OpOperand &operand : consumer->getOpOperands()) {
          Operation *producer = operand.get().getDefiningOp();
          if (!isVectorMap(producer) ||
              !linalg::areElementwiseOpsFusable(&operand))
            continue;
          bool usedBefore = llvm::any_of(producer->getUsers(), [&](auto *u) {
            Operation *user = block.findAncestorOpInBlock(*u);
            return user != consumer &&
                   (!user || user->isBeforeInBlock(consumer));
          });
          if (usedBefore)
            continue;
          rewriter.setInsertionPoint(consumer);
          FailureOr<linalg::ElementwiseOpFusionResult> fused =
              linalg::fuseElementwiseOps(rewriter, &operand);
          if (failed(fused))
            continue;
          for (auto [original, replacement] : fused->replacements)
            rewriter.replaceUsesWithIf(
                original, replacement, [&](OpOperand &use) {
                  return use.getOwner() != fused->fusedOp;
                });
          // The consumer's uses were replaced along with the producer's.
          rewriter.eraseOp(consumer);
          if (producer->use_empty())
            rewriter.eraseOp(producer);
          consumer = fused->fusedOp;
          changed = true;
          break;
        }
      }
    }
    return success();
  }

  /// Tiles `root` and fuses its producers into the loop, breadth first.
  /// A producer sliced the same way twice (a softmax's exp feeds both the
  /// sum and the division) is computed once per iteration.
  LogicalResult formKernel(RewriterBase &rewriter, Block &block,
                           linalg::LinalgOp root, ArrayRef<int64_t> sizes) {
    MLIRContext *ctx = root.getContext();
    int64_t tripCount = 1;
    for (auto [size, bound] : llvm::zip(sizes, root.getStaticLoopRanges()))
      if (size)
        tripCount *= bound;

    llvm::SetVector<Operation *> group = fusionGroup(root, block);

    scf::SCFTilingOptions tiling;
    tiling.setLoopType(scf::SCFTilingOptions::LoopType::ForallOp);
    tiling.setTileSizes(getAsIndexOpFoldResult(ctx, sizes));
    rewriter.setInsertionPoint(root);
    FailureOr<scf::SCFTilingResult> tiled = scf::tileUsingSCF(
        rewriter, cast<TilingInterface>(root.getOperation()), tiling);
    if (failed(tiled))
      return root.emitError("could not tile this op into a fused kernel");
    if (tiled->loops.empty())
      return success();
    rewriter.replaceOp(root, tiled->replacements);
    SmallVector<LoopLikeOpInterface> loops = tiled->loops;
    auto loop = [&]() -> Operation * { return loops.front(); };

    struct Fused {
      OpResult producer;
      tensor::ExtractSliceOp slice;
      Value tile;
    };
    SmallVector<Fused> fused;
    SmallVector<Operation *> producers;
    std::deque<tensor::ExtractSliceOp> worklist;
    for (Operation *slice : tiled->generatedSlices)
      if (auto s = dyn_cast<tensor::ExtractSliceOp>(slice))
        worklist.push_back(s);
    SmallVector<Operation *> deadSlices;
    while (!worklist.empty() && fused.size() < kMaxFusedPerKernel) {
      tensor::ExtractSliceOp slice = worklist.front();
      worklist.pop_front();
      OpResult producer = producerOf(slice);
      if (!producer || !group.contains(producer.getOwner()) ||
          !shouldFuse(slice, producer, block, tripCount))
        continue;
      // Reuse a tile of the same slice computed earlier in the body.
      auto same = llvm::find_if(fused, [&](Fused &f) {
        Operation *tileOp = f.tile.getDefiningOp();
        return f.producer == producer && sameSlice(f.slice, slice) && tileOp &&
               tileOp->getBlock() == slice->getBlock() &&
               tileOp->isBeforeInBlock(slice);
      });
      if (same != fused.end()) {
        rewriter.replaceAllUsesWith(slice.getResult(), same->tile);
        deadSlices.push_back(slice);
        continue;
      }
      Operation *producerOp = producer.getOwner();
      bool usedAfter = llvm::any_of(producerOp->getUsers(), [&](Operation *u) {
        Operation *user = block.findAncestorOpInBlock(*u);
        return user && loop()->isBeforeInBlock(user);
      });
      std::optional<scf::SCFFuseProducerOfSliceResult> result =
          scf::tileAndFuseProducerOfSlice(rewriter, slice, loops);
      if (!result)
        continue;
      deadSlices.push_back(slice);
      fused.push_back({producer, slice, result->tiledAndFusedProducer});
      bool firstTime = !llvm::is_contained(producers, producerOp);
      if (firstTime)
        producers.push_back(producerOp);
      for (Operation *s : result->generatedSlices)
        if (auto next = dyn_cast<tensor::ExtractSliceOp>(s))
          worklist.push_back(next);
      // Ops after the kernel read the producer from the loop's results
      // instead of recomputing it.
      if (!usedAfter || !firstTime)
        continue;
      unsigned numResults = producerOp->getNumResults();
      FailureOr<SmallVector<Operation *>> newSlices =
          scf::yieldReplacementForFusedProducer(rewriter, slice, *result,
                                                loops);
      if (failed(newSlices))
        continue;
      for (Operation *s : *newSlices)
        if (auto next = dyn_cast<tensor::ExtractSliceOp>(s))
          worklist.push_back(next);
      ValueRange yielded = loop()->getResults().take_back(numResults);
      for (auto [original, replacement] :
           llvm::zip(producerOp->getResults(), yielded))
        rewriter.replaceUsesWithIf(original, replacement, [&](OpOperand &use) {
          Operation *user = block.findAncestorOpInBlock(*use.getOwner());
          return user && loop()->isBeforeInBlock(user);
        });
    }
    loop()->setAttr(weft::WeftDialect::kKernelAttrName, UnitAttr::get(ctx));
    // The slices fused along still read the original producers.
    eraseDead(rewriter, deadSlices);
    eraseDead(rewriter, producers);
    return success();
  }

  /// The producers `root` may absorb: fusible ops it reaches through
  /// fusible ops, minus those that ops outside the group read before the
  /// root (they must exist in full anyway; fusing them would compute them
  /// twice). Uses after the root are fine: the kernel yields the value.
  /// Without this rule the last layer norm of a transformer would pull in
  /// the whole residual stream.
  static llvm::SetVector<Operation *> fusionGroup(linalg::LinalgOp root,
                                                  Block &block) {
    llvm::SetVector<Operation *> group;
    SmallVector<Operation *> worklist = {root};
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      for (Value operand : op->getOperands()) {
        Operation *def = operand.getDefiningOp();
        if (def && def->getBlock() == &block && isFusible(def) &&
            !group.contains(def) && !delaysALargerInput(def, root, block)) {
          group.insert(def);
          worklist.push_back(def);
        }
      }
    }
    bool changed = true;
    while (changed) {
      changed = false;
      SmallVector<Operation *> leaving;
      for (Operation *op : group)
        for (Operation *u : op->getUsers()) {
          Operation *user = block.findAncestorOpInBlock(*u);
          if (user && user != root && !group.contains(user) &&
              !root->isBeforeInBlock(user)) {
            leaving.push_back(op);
            break;
          }
        }
      for (Operation *op : leaving)
        group.remove(op);
      changed = !leaving.empty();
    }
    return group;
  }

  /// Whether fusing `producer` into `root`'s kernel would keep one of its
  /// inputs alive longer, and that input is larger than what `producer`
  /// makes of it: `producer` reduces a tensor that nothing but it reads,
  /// and other ops lie between it and `root`. Fused, the reduction would
  /// run at `root`, and the input would live until then instead of the
  /// smaller result. The case: in bf16 a weight gradient is a per-sample
  /// product summed over the batch (--weft-fold-batch-into-gemm stacks the
  /// batch into one GEMM in f32 only, to round as the reference does);
  /// fused into the optimizer's update at the step's end, the sum kept
  /// each layer's per-sample products ([B, K, N] in f32) alive across the
  /// rest of the backward.
  static bool delaysALargerInput(Operation *producer, linalg::LinalgOp root,
                                 Block &block) {
    auto op = dyn_cast<linalg::LinalgOp>(producer);
    if (!op || op.getNumReductionLoops() == 0 || op->getNumResults() != 1)
      return false;
    auto resultType = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!resultType || !resultType.hasStaticShape())
      return false;
    // An input larger than the result that only the reduction reads (the
    // cheap test first: most reductions read what others read too).
    bool diesHere = llvm::any_of(op.getDpsInputOperands(), [&](OpOperand *in) {
      auto type = dyn_cast<RankedTensorType>(in->get().getType());
      return type && type.hasStaticShape() &&
             type.getNumElements() > resultType.getNumElements() &&
             llvm::all_of(in->get().getUsers(), [&](Operation *u) {
               return block.findAncestorOpInBlock(*u) == producer;
             });
    });
    if (!diesHere)
      return false;
    // Work between it and root other than its own chain to root (ops that
    // read it, directly or not) and destinations: else nothing is delayed.
    llvm::DenseSet<Operation *> chain = {producer};
    for (Operation *between = producer->getNextNode();
         between && between != root.getOperation();
         between = between->getNextNode()) {
      if (isa<tensor::EmptyOp, linalg::FillOp, arith::ConstantOp>(between))
        continue;
      if (llvm::none_of(between->getOperands(), [&](Value v) {
            return chain.contains(v.getDefiningOp());
          }))
        return true;
      chain.insert(between);
    }
    return false;
  }

  /// Fuse `producer` along `slice` only when it is fusible and the
  /// iterations partition it: a slice every iteration shares (a broadcast
  /// operand) would be recomputed by each and could not be yielded.
  static bool shouldFuse(tensor::ExtractSliceOp slice, OpResult producer,
                         Block &block, int64_t tripCount) {
    Operation *producerOp = producer.getOwner();
    if (!isFusible(producerOp) || producerOp->getBlock() != &block)
      return false;
    RankedTensorType sliceType = slice.getResultType();
    auto fullType = cast<RankedTensorType>(producer.getType());
    return sliceType.hasStaticShape() &&
           sliceType.getNumElements() * tripCount == fullType.getNumElements();
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
  /// A fill outside the contraction's block (hoisted out of a loop, as the
  /// recurrences' per-step products' fills are, being loop-invariant) is
  /// cloned in: otherwise bufferization copies the filled buffer in every
  /// iteration and the product accumulates into it, which is no GEMM call.
  void giveContractionsOwnFills(func::FuncOp fn) {
    IRRewriter rewriter(&getContext());
    fn.walk([&](linalg::LinalgOp op) {
      if (!isContractionLike(op) || !op.hasPureTensorSemantics())
        return;
      for (OpOperand &init : op.getDpsInitsMutable()) {
        auto fill = init.get().getDefiningOp<linalg::FillOp>();
        if (!fill)
          continue;
        if (fill->getBlock() == op->getBlock() && fill->hasOneUse()) {
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
      if (!op->hasAttr(weft::WeftDialect::kKernelAttrName))
        return;
      op->setAttr(
          weft::WeftDialect::kKernelAttrName,
          StringAttr::get(&getContext(), "fused_" + std::to_string(next++)));
    });
  }
};
} // namespace
