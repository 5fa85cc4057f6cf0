//===- GpuSplitRows.cpp - Row kernels with more, shorter rows -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Kernel fusion tiles a kernel by its root's parallel loops but the
// innermost, which suits a CPU (a few threads, each vectorizing the
// innermost loop). When the root is a per-row result of reductions over a
// further axis (cross-entropy's loss per token, a layer norm's statistics,
// the softmax gradient's row sums), the forall then has few iterations (8
// for a [8, 1024] token grid) and each carries whole matrices: on a GPU, 8
// blocks, each thread reducing a strided row of its own. Every op of such a
// body is parallel along that next axis and touches only its own index of
// it, so the forall can take the axis as one more loop: 8192 rows of one
// reduction each, which --weft-gpu-map-step runs as a block per row with
// coalesced block reductions.
//
// The ops and their arithmetic are unchanged; only which iteration computes
// which element moves. Each output element's reduction runs over the same
// elements as before.
//
//===----------------------------------------------------------------------===//

#include "weft/Target/CUDA/Passes.h"

#include "ViewRoot.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/AffineExpr.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace weft {
#define GEN_PASS_DEF_GPUSPLITROWSPASS
#include "weft/Target/CUDA/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

/// Where one memory operand of a body op meets the new loop: the operand's
/// dimension indexed by it, or none (it reads the same elements in every
/// row: a broadcast).
struct Access {
  OpOperand *operand;
  std::optional<unsigned> dim;
  bool writes;
};

/// A body op's memory accesses, given the loop `loop` of its iteration
/// space that becomes the forall's new loop; nullopt when the op cannot
/// be split along it.
std::optional<SmallVector<Access>> accessesOf(linalg::LinalgOp op,
                                              unsigned loop) {
  SmallVector<Access> accesses;
  for (OpOperand &operand : op->getOpOperands()) {
    if (!isa<MemRefType>(operand.get().getType()))
      continue;
    AffineMap map = op.getMatchingIndexingMap(&operand);
    std::optional<unsigned> dim;
    for (auto [i, e] : llvm::enumerate(map.getResults())) {
      if (auto d = dyn_cast<AffineDimExpr>(e)) {
        if (d.getPosition() == loop) {
          if (dim)
            return std::nullopt;
          dim = i;
        }
      } else if (e.isFunctionOfDim(loop)) {
        return std::nullopt;
      }
    }
    bool writes = op.isDpsInit(&operand);
    if (writes && !dim)
      return std::nullopt; // It reduces over the loop.
    accesses.push_back({&operand, dim, writes});
  }
  return accesses;
}

/// Splits `forall`'s rows along the next axis when every op of its body
/// allows it (see the file comment). Returns whether it did.
bool splitRows(scf::ForallOp forall, int64_t rowsBelow, int64_t maxRows,
               int64_t minRowWork) {
  if (!forall.getOutputs().empty() || forall.getMapping() ||
      !forall.isNormalized())
    return false;
  std::optional<SmallVector<int64_t>> bounds =
      getConstantIntValues(forall.getMixedUpperBound());
  if (!bounds)
    return false;
  int64_t rows = 1;
  for (int64_t b : *bounds)
    rows *= b;
  if (rowsBelow != 0 && rows >= rowsBelow)
    return false;
  unsigned lead = bounds->size();

  // Every op's accesses along the new axis; the axis is the output's
  // dimension right after the forall's (each output has a unit dimension
  // per forall loop in front: the tile).
  struct Split {
    Operation *op;
    SmallVector<Access> accesses;
  };
  SmallVector<Split> splits;
  int64_t extent = -1, widest = 1;
  bool reduces = false;
  auto outputAxis = [&](Value out) -> bool {
    auto type = dyn_cast<MemRefType>(out.getType());
    if (!type || !type.hasStaticShape() || type.getRank() <= int64_t(lead))
      return false;
    for (unsigned i = 0; i < lead; ++i)
      if (type.getDimSize(i) != 1)
        return false;
    int64_t e = type.getDimSize(lead);
    if (extent != -1 && e != extent)
      return false;
    extent = e;
    return true;
  };
  for (Operation &op : forall.getBody()->without_terminator()) {
    if (auto copy = dyn_cast<memref::CopyOp>(op)) {
      if (!outputAxis(copy.getTarget()) ||
          cast<MemRefType>(copy.getSource().getType()).getShape() !=
              cast<MemRefType>(copy.getTarget().getType()).getShape())
        return false;
      widest = std::max(
          widest,
          cast<MemRefType>(copy.getTarget().getType()).getNumElements());
      splits.push_back({&op,
                        {{&op.getOpOperand(0), lead, false},
                         {&op.getOpOperand(1), lead, true}}});
      continue;
    }
    if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
      if (!linalgOp.hasPureBufferSemantics() || linalgOp.getNumDpsInits() == 0)
        return false;
      AffineMap outMap =
          linalgOp.getMatchingIndexingMap(linalgOp.getDpsInitOperand(0));
      if (!outputAxis(linalgOp.getDpsInitOperand(0)->get()) ||
          outMap.getNumResults() <= lead)
        return false;
      auto d = dyn_cast<AffineDimExpr>(outMap.getResult(lead));
      if (!d || linalgOp.getIteratorTypesArray()[d.getPosition()] !=
                    utils::IteratorType::parallel)
        return false;
      unsigned loop = d.getPosition();
      // linalg.index of the loop would read 0 once it is split off.
      bool readsIndex = false;
      linalgOp->walk(
          [&](linalg::IndexOp index) { readsIndex |= index.getDim() == loop; });
      if (readsIndex)
        return false;
      std::optional<SmallVector<Access>> accesses = accessesOf(linalgOp, loop);
      if (!accesses)
        return false;
      for (Value out : linalgOp.getDpsInits())
        if (!outputAxis(out))
          return false;
      int64_t work = 1;
      for (int64_t r : linalgOp.getStaticLoopRanges())
        work *= r;
      widest = std::max(widest, work);
      reduces |= linalgOp.getNumReductionLoops() > 0;
      splits.push_back({&op, std::move(*accesses)});
      continue;
    }
    if (op.getNumRegions() || !isMemoryEffectFree(&op))
      return false;
  }
  // Only kernels --weft-gpu-map-step runs as a block per row, and only when
  // a row keeps enough work for a block.
  if (extent <= 1 || (!reduces && splits.size() <= 1) ||
      rows * extent > maxRows || widest / extent < minRowWork)
    return false;

  // A buffer written in the body must be read and written only at the
  // row's own index: otherwise one row reads what another writes. Buffers
  // are told apart by the value they view: the outliner passes each value
  // once, and the buffer planner gives intermediates live in one loop
  // disjoint memory.
  DenseSet<Value> written;
  for (const Split &s : splits)
    for (const Access &a : s.accesses)
      if (a.writes)
        written.insert(weft::cuda::viewRoot(a.operand->get()));
  for (const Split &s : splits)
    for (const Access &a : s.accesses)
      if (written.contains(weft::cuda::viewRoot(a.operand->get())) &&
          a.dim != lead)
        return false;

  OpBuilder b(forall);
  Location loc = forall.getLoc();
  SmallVector<OpFoldResult> ubs = forall.getMixedUpperBound();
  ubs.push_back(b.getIndexAttr(extent));
  auto split = scf::ForallOp::create(b, loc, ubs, ValueRange{}, std::nullopt);
  b.setInsertionPointToStart(split.getBody());
  IRMapping map;
  map.map(forall.getInductionVars(),
          ArrayRef<Value>(split.getInductionVars()).take_front(lead));
  Value row = split.getInductionVars().back();
  DenseMap<Operation *, const Split *> byOp;
  for (const Split &s : splits)
    byOp[s.op] = &s;
  for (Operation &op : forall.getBody()->without_terminator()) {
    Operation *clone = b.clone(op, map);
    const Split *s = byOp.lookup(&op);
    if (!s)
      continue;
    for (const Access &a : s->accesses) {
      if (!a.dim)
        continue;
      OpOperand &operand = clone->getOpOperand(a.operand->getOperandNumber());
      auto type = cast<MemRefType>(operand.get().getType());
      b.setInsertionPoint(clone);
      SmallVector<OpFoldResult> offsets(type.getRank(), b.getIndexAttr(0));
      SmallVector<OpFoldResult> sizes,
          strides(type.getRank(), b.getIndexAttr(1));
      for (int64_t size : type.getShape())
        sizes.push_back(b.getIndexAttr(size));
      offsets[*a.dim] = row;
      sizes[*a.dim] = b.getIndexAttr(1);
      operand.set(memref::SubViewOp::create(b, loc, operand.get(), offsets,
                                            sizes, strides));
    }
    b.setInsertionPointAfter(clone);
  }
  forall.erase();
  return true;
}

struct GpuSplitRowsPass : weft::impl::GpuSplitRowsPassBase<GpuSplitRowsPass> {
  using Base::Base;

  void runOnOperation() override {
    getOperation().walk([&](func::FuncOp f) {
      if (!f.getBody().hasOneBlock())
        return;
      for (auto forall : llvm::make_early_inc_range(
               f.getBody().front().getOps<scf::ForallOp>()))
        splitRows(forall, rowsBelow, maxRows, minRowWork);
    });
  }
};

} // namespace
