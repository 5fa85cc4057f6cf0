//===- MergeSiblingKernels.cpp - Independent kernels in one parallel loop -===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The optimizer update of a GPT is a kernel per parameter, plus the
// gradient-norm reductions and their scalars. Each kernel is an
// OpenMP parallel region of its own (or a serial loop on the main thread),
// so the update forks and joins the team once per kernel and most of them
// are too small to keep two threads busy. Nothing orders them but the
// buffers they share: the kernels of one "level" of that dependence order
// can run as one loop.
//
// Why here, on buffers before --weft-chunk-parallel-loops: on tensors the
// kernels are scf.foralls with shared outputs, and merging them would mean
// rebuilding their destination-passing results; after buffer planning two
// buffers may share workspace bytes, so independence could no longer be
// read from the IR (a kernel's input may be the next one's output slot).
// Before planning, every buffer is its own memref.alloc or function
// argument, and --weft-plan-buffers then sees the merged loop use all of
// its buffers at once. Merging sibling outlined kernels instead would have
// the same problem and would need a calling convention for a kernel that
// calls kernels.
//
// Why levels of the dependence order and not only runs of independent
// neighbours: a kernel often reads what the one right before it wrote (the
// gradient norm's squares, then its sum), so runs of neighbours would stop
// at every such pair; levels put all squares in one loop and all sums in
// the next.
//
// A reduction's accumulator init (the copy of a zero into a gradient
// norm's f64 sum) runs in the reduction's row: as kernels of their own,
// the inits of a level of reductions were a level, and a loop, before it.
//
// A kernel with row scratch (an update with clipping keeps the clipped
// gradient's row, which both moments read) merges too: the scratch is
// allocated once per iteration of the merged loop, outside it, since an
// iteration's rows run one after another on one thread.
//
// Why a call per kernel in the merged loop instead of its body inline: the
// layers' updates are the same code on other buffers, and as separate
// kernels --weft-outline-kernels compiled each once. Inlined into one loop
// they were compiled once per parameter, which doubled the bench GPT's
// LLVM time; the calls keep one function per distinct body, at the cost of
// one call per kernel per iteration (64 per kernel and step). For the same
// reason a level of more than `max-kernels` kernels becomes several loops.
//
// Merged kernels keep their own row loops and bodies; only which thread
// runs a row changes, and no row of a level reads what another row of the
// level writes. Losses are bit for bit those without the pass
// (test/e2e/exe/merge-sibling-kernels.test).
//
//===----------------------------------------------------------------------===//

#include "KernelFunctions.h"

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"


namespace weft {
#define GEN_PASS_DEF_MERGESIBLINGKERNELSPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
/// A kernel that may join a merged loop: its rows (the trip counts of its
/// forall, or none for an op that runs whole as one row) and the buffers
/// it reads and writes, each named by its allocation or argument.
struct Kernel {
  Operation *op;
  SmallVector<int64_t> counts;
  int64_t rows = 1;
  llvm::SmallSetVector<Value, 8> reads, writes;
  int64_t level = 0;
  /// Row scratch: static allocations in the forall's body (a clipped
  /// gradient's row, read by both AdamW moments).
  SmallVector<memref::AllocOp> scratch;
  /// The fill or copy right before a one-row kernel that initializes its
  /// accumulator (a gradient norm's f64 sum): run in the kernel's row.
  Operation *init = nullptr;
};

/// Whether `init`, a fill or copy, only initializes the accumulator of
/// `kernel`, a one-row linalg op right after it: it writes one buffer,
/// which the kernel reads and writes.
bool initializes(const Kernel &init, const Kernel &kernel) {
  if (!isa<linalg::FillOp, memref::CopyOp>(init.op) || init.init ||
      !isa<linalg::LinalgOp>(kernel.op) || kernel.init)
    return false;
  if (init.writes.size() != 1)
    return false;
  Value buffer = init.writes.front();
  return kernel.reads.contains(buffer) && kernel.writes.contains(buffer);
}

/// Bytes of one copy of `alloc`, rounded up to the 64-byte alignment
/// bufferization gives allocations.
int64_t slotBytes(memref::AllocOp alloc) {
  MemRefType type = alloc.getType();
  int64_t bits = type.getNumElements() * type.getElementTypeBitWidth();
  return llvm::alignTo(llvm::divideCeil(bits, 8), 64);
}

/// The buffer `value` views: the allocation, argument or global behind its
/// chain of views; a null Value for anything else (a call's result), which
/// could alias any buffer.
Value bufferOf(Value value) {
  while (auto view = value.getDefiningOp<ViewLikeOpInterface>())
    value = view.getViewSource();
  if (isa<BlockArgument>(value) ||
      value.getDefiningOp<memref::AllocOp>() ||
      value.getDefiningOp<memref::GetGlobalOp>())
    return value;
  return Value();
}

/// Fills `kernel`'s reads and writes from the memory effects of its ops;
/// false when one is unknown, touches no buffer or one of unknown origin,
/// or writes a global (the step's globals are constants; another view of
/// one would not be recognized). Buffers allocated inside the kernel are
/// its own.
bool collectAccesses(Kernel &kernel) {
  Operation *root = kernel.op;
  WalkResult result = root->walk([&](Operation *op) {
    // A linalg op has both its operands' effects and its payload's; the
    // walk visits the payload ops too.
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects)
      return op->hasTrait<OpTrait::HasRecursiveMemoryEffects>()
                 ? WalkResult::advance()
                 : WalkResult::interrupt();
    SmallVector<MemoryEffects::EffectInstance> instances;
    effects.getEffects(instances);
    for (const MemoryEffects::EffectInstance &effect : instances) {
      Value value = effect.getValue();
      if (!value)
        return WalkResult::interrupt();
      Value buffer = bufferOf(value);
      if (!buffer)
        return WalkResult::interrupt();
      if (root->isAncestor(buffer.getParentBlock()->getParentOp()))
        continue;
      if (isa<MemoryEffects::Read>(effect.getEffect()))
        kernel.reads.insert(buffer);
      else if (isa<MemoryEffects::Write>(effect.getEffect()) &&
               !buffer.getDefiningOp<memref::GetGlobalOp>())
        kernel.writes.insert(buffer);
      else
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return !result.wasInterrupted();
}

/// `op` as a kernel that may be merged, or nothing. A forall qualifies
/// with static bounds from 0 in steps of 1, no outputs, no mapping, and no
/// allocation in its body but static ones of identity layout directly in
/// it: per-row scratch, which the merged loop gives each of its
/// iterations (a thread runs one iteration's rows one after another).
std::optional<Kernel> asKernel(Operation *op, int64_t chunks,
                               int64_t scratchBudget) {
  Kernel kernel{op};
  if (auto loop = dyn_cast<scf::ForallOp>(op)) {
    if (!loop.getOutputs().empty() || loop.getMapping())
      return std::nullopt;
    for (auto [lb, ub, step] :
         llvm::zip(loop.getStaticLowerBound(), loop.getStaticUpperBound(),
                   loop.getStaticStep())) {
      if (lb != 0 || step != 1 || ShapedType::isDynamic(ub))
        return std::nullopt;
      kernel.counts.push_back(ub);
      kernel.rows *= ub;
    }
    Block *body = loop.getBody();
    if (kernel.rows == 0 ||
        body->walk([&](Operation *inner) {
              auto alloc = dyn_cast<memref::AllocOp>(inner);
              if (alloc && alloc->getBlock() == body &&
                  alloc.getType().hasStaticShape() &&
                  alloc.getType().getLayout().isIdentity() &&
                  alloc.getType().getMemorySpace() == nullptr &&
                  alloc.getType().getElementType().isIntOrFloat() &&
                  alloc.getAlignment().value_or(64) <= 64) {
                kernel.scratch.push_back(alloc);
                return WalkResult::advance();
              }
              return isa<memref::AllocOp, memref::AllocaOp, memref::DeallocOp>(
                         inner)
                         ? WalkResult::interrupt()
                         : WalkResult::advance();
            })
            .wasInterrupted())
      return std::nullopt;
    // As --weft-chunk-parallel-loops bounds a kernel's scratch copies.
    int64_t scratch = 0;
    for (memref::AllocOp alloc : kernel.scratch)
      scratch += slotBytes(alloc);
    if (scratch * std::min(chunks, kernel.rows) > scratchBudget)
      return std::nullopt;
  } else if (auto linalgOp = dyn_cast<linalg::LinalgOp>(op)) {
    if (!linalgOp.hasPureBufferSemantics())
      return std::nullopt;
  } else if (!isa<memref::CopyOp>(op)) {
    return std::nullopt;
  }
  if (!collectAccesses(kernel))
    return std::nullopt;
  return kernel;
}

/// Ops a run of kernels may hold besides kernels: they stay where they
/// are, and kernels move past them.
bool isMovable(Operation &op) {
  return isa<memref::AllocOp>(op) || isMemoryEffectFree(&op);
}

struct MergeSiblingKernelsPass
    : public weft::impl::MergeSiblingKernelsPassBase<MergeSiblingKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    if (maxKernels < 2) {
      getOperation().emitError() << "--weft-merge-sibling-kernels: "
                                    "max-kernels must be at least 2 (got "
                                 << int64_t(maxKernels) << ")";
      return signalPassFailure();
    }
    if (chunks < 1) {
      getOperation().emitError() << "--weft-merge-sibling-kernels: chunks "
                                    "must be at least 1 (got "
                                 << int64_t(chunks) << ")";
      return signalPassFailure();
    }
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    for (auto fn : llvm::to_vector(module.getOps<func::FuncOp>())) {
      if (fn.isExternal())
        continue;
      function = fn;
      merged = 0;
      rowFunctions.clear();
      for (Block &block : fn.getBody()) {
        std::vector<Kernel> run;
        for (Operation &op : llvm::make_early_inc_range(block)) {
          if (std::optional<Kernel> kernel =
                  asKernel(&op, chunks, scratchBudget)) {
            // An accumulator's init joins its kernel: otherwise the inits
            // of a level of reductions are a level, and a loop, of their
            // own.
            if (!run.empty() && initializes(run.back(), *kernel)) {
              kernel->init = run.back().op;
              kernel->reads.insert(run.back().reads.begin(),
                                   run.back().reads.end());
              run.pop_back();
            }
            run.push_back(std::move(*kernel));
            continue;
          }
          if (isMovable(op))
            continue;
          if (failed(mergeRun(run, symbols)))
            return signalPassFailure();
          run.clear();
        }
        if (failed(mergeRun(run, symbols)))
          return signalPassFailure();
      }
      weft::deduplicateFunctions(function, rowFunctions, symbols);
    }
  }

  /// Levels the kernels of a run by the buffers they share, then merges
  /// each level's kernels into one loop.
  LogicalResult mergeRun(MutableArrayRef<Kernel> run, SymbolTable &symbols) {
    if (run.size() < 2)
      return success();
    llvm::DenseMap<Value, int64_t> lastRead, lastWrite;
    int64_t levels = 0;
    for (Kernel &kernel : run) {
      int64_t level = 0;
      auto after = [&](const llvm::DenseMap<Value, int64_t> &last,
                       Value buffer) {
        auto it = last.find(buffer);
        if (it != last.end())
          level = std::max(level, it->second + 1);
      };
      for (Value buffer : kernel.reads)
        after(lastWrite, buffer);
      for (Value buffer : kernel.writes) {
        after(lastWrite, buffer);
        after(lastRead, buffer);
      }
      for (Value buffer : kernel.reads)
        lastRead[buffer] = std::max(lastRead.lookup(buffer), level);
      for (Value buffer : kernel.writes)
        lastWrite[buffer] = std::max(lastWrite.lookup(buffer), level);
      kernel.level = level;
      levels = std::max(levels, level + 1);
    }

    // Each level lands where its last kernel was, or right after the
    // previous level when that is later: kernels only move down, past
    // allocations, pure ops and kernels they share no written buffer with.
    Operation *previous = nullptr;
    for (int64_t level = 0; level < levels; ++level) {
      SmallVector<Kernel *> members;
      for (Kernel &kernel : run)
        if (kernel.level == level)
          members.push_back(&kernel);
      Operation *last = members.back()->op;
      bool behind = previous && last->isBeforeInBlock(previous);
      if (members.size() == 1) {
        if (behind)
          moveKernelBefore(*members.back(), previous->getNextNode());
        previous = last;
        continue;
      }
      // At most `maxKernels` kernels a loop: LLVM's time on a function
      // grows faster than its size, and the OpenMP region of a loop
      // captures every buffer of its kernels.
      OpBuilder b(last->getContext());
      if (behind)
        b.setInsertionPointAfter(previous);
      else
        b.setInsertionPoint(last);
      // Groups of equal size (within one), in order.
      size_t groups = llvm::divideCeil(members.size(), size_t(maxKernels));
      for (size_t g = 0, begin = 0; g < groups; ++g) {
        size_t size = members.size() / groups + (g < members.size() % groups);
        ArrayRef<Kernel *> group = ArrayRef(members).slice(begin, size);
        begin += size;
        if (group.size() == 1) {
          Operation *op = group.front()->op;
          if (b.getInsertionPoint() != op->getIterator())
            moveKernelBefore(*group.front(), &*b.getInsertionPoint());
          previous = op;
        } else {
          FailureOr<Operation *> loop = merge(b, group, symbols);
          if (failed(loop))
            return failure();
          previous = *loop;
        }
        b.setInsertionPointAfter(previous);
      }
    }
    return success();
  }

  /// Moves `kernel` (its init first) before `next`.
  static void moveKernelBefore(const Kernel &kernel, Operation *next) {
    kernel.op->moveBefore(next);
    if (kernel.init)
      kernel.init->moveBefore(kernel.op);
  }

  /// One forall over min(chunks, rows) iterations running every member's
  /// rows, dealt round-robin across the members in order. Each member's
  /// share of an iteration is a call: kernels of the same shape (the
  /// layers' parameters) share one function, as outlined kernels do.
  FailureOr<Operation *> merge(OpBuilder &b, ArrayRef<Kernel *> members,
                               SymbolTable &symbols) {
    int64_t rows = 0;
    for (Kernel *kernel : members)
      rows += kernel->rows;
    int64_t width = std::min<int64_t>(chunks, rows);
    Location loc = b.getFusedLoc(llvm::map_to_vector(
        members, [](Kernel *kernel) { return kernel->op->getLoc(); }));
    // Each member's row scratch, once per iteration of the merged loop:
    // bytes that iteration c views at c times the slot's size.
    SmallVector<Value> scratchBytes;
    for (Kernel *kernel : members)
      for (memref::AllocOp alloc : kernel->scratch)
        scratchBytes.push_back(memref::AllocOp::create(
            b, alloc.getLoc(),
            MemRefType::get({width * slotBytes(alloc)}, b.getI8Type()),
            b.getI64IntegerAttr(64)));
    size_t nextScratch = 0;
    auto loop = scf::ForallOp::create(
        b, loc, ArrayRef<OpFoldResult>{b.getIndexAttr(width)}, ValueRange{},
        std::nullopt);
    loop->setAttr(weft::WeftDialect::kKernelAttrName,
                  b.getStringAttr("siblings_" + std::to_string(merged++)));
    b.setInsertionPointToStart(loop.getBody());
    Value chunk = loop.getInductionVar(0);
    int64_t offset = 0;
    for (Kernel *kernel : members) {
      // Row r of this member runs in iteration (r * stride + offset) mod
      // width. A member with fewer rows than the loop has iterations is
      // spread over all of them (stride > 1): OpenMP hands each thread a
      // contiguous block of iterations, and a member's rows packed into
      // one block (a bias gradient's 32 heavy rows next to 32 light ones)
      // would all run on one thread while the others wait.
      int64_t shift = (width - offset % width) % width;
      int64_t stride =
          kernel->rows > 1 && kernel->rows < width ? width / kernel->rows : 1;
      Value first = chunk;
      if (shift != 0)
        first = arith::RemUIOp::create(
            b, loc,
            arith::AddIOp::create(
                b, loc, chunk, arith::ConstantIndexOp::create(b, loc, shift)),
            arith::ConstantIndexOp::create(b, loc, width));
      if (stride > 1) {
        // Iteration d (counted from the member's first) runs row d / stride
        // where stride divides d; elsewhere none (a first row past the end).
        Value step = arith::ConstantIndexOp::create(b, loc, stride);
        Value onRow =
            arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                  arith::RemUIOp::create(b, loc, first, step),
                                  arith::ConstantIndexOp::create(b, loc, 0));
        first = arith::SelectOp::create(
            b, loc, onRow, arith::DivUIOp::create(b, loc, first, step),
            arith::ConstantIndexOp::create(b, loc, kernel->rows));
      }
      // The member's rows of this iteration, outlined below. An op that is
      // not a forall is one row, run under an scf.if and not as a loop of
      // at most one trip: --weft-promote-accumulators would load and
      // store back a 0-d accumulator around such a loop in every
      // iteration, racing with the one that runs the op.
      OpBuilder inner(b.getContext());
      inner.setInsertionPoint(b.getInsertionBlock(), b.getInsertionPoint());
      if (kernel->rows == 1) {
        Value mine = arith::CmpIOp::create(
            inner, loc, arith::CmpIPredicate::eq, first,
            arith::ConstantIndexOp::create(inner, loc, 0));
        auto guard = scf::IfOp::create(inner, loc, mine, /*withElse=*/false);
        inner.setInsertionPoint(guard.thenBlock()->getTerminator());
      }
      auto region = scf::ExecuteRegionOp::create(inner, loc, TypeRange{});
      inner.createBlock(&region.getRegion());
      scf::YieldOp::create(inner, loc);
      inner.setInsertionPointToStart(&region.getRegion().front());
      IRMapping scratch;
      for (memref::AllocOp alloc : kernel->scratch) {
        Value shift = arith::MulIOp::create(
            inner, loc, chunk,
            arith::ConstantIndexOp::create(inner, loc, slotBytes(alloc)));
        scratch.map(alloc.getResult(),
                    memref::ViewOp::create(
                        inner, alloc.getLoc(), alloc.getType(),
                        scratchBytes[nextScratch++], shift, ValueRange{}));
      }
      if (kernel->rows == 1) {
        cloneRow(inner, *kernel, Value(), scratch);
      } else {
        auto rowLoop = scf::ForOp::create(
            inner, loc, first,
            arith::ConstantIndexOp::create(inner, loc, kernel->rows),
            arith::ConstantIndexOp::create(inner, loc, width));
        inner.setInsertionPoint(rowLoop.getBody()->getTerminator());
        cloneRow(inner, *kernel, rowLoop.getInductionVar(), scratch);
      }
      if (failed(outline(region, symbols)))
        return failure();
      offset += kernel->rows;
      kernel->op->erase();
      if (kernel->init)
        kernel->init->erase();
    }
    return loop.getOperation();
  }

  /// The body of `kernel` for its row `row` (row-major over its forall's
  /// indices; none: its only row), or the whole op when it is not a forall.
  /// `mapping` holds the views that replace its row scratch.
  static void cloneRow(OpBuilder &b, const Kernel &kernel, Value row,
                       IRMapping &mapping) {
    auto loop = dyn_cast<scf::ForallOp>(kernel.op);
    if (!loop) {
      if (kernel.init)
        b.clone(*kernel.init);
      b.clone(*kernel.op)->removeAttr(weft::WeftDialect::kKernelAttrName);
      return;
    }
    Location loc = loop.getLoc();
    if (!row)
      row = arith::ConstantIndexOp::create(b, loc, 0);
    for (int64_t d = int64_t(kernel.counts.size()) - 1; d >= 0; --d) {
      Value iv = loop.getInductionVar(d);
      if (d == 0) {
        mapping.map(iv, row);
        break;
      }
      Value extent = arith::ConstantIndexOp::create(b, loc, kernel.counts[d]);
      mapping.map(iv, arith::RemUIOp::create(b, loc, row, extent));
      row = arith::DivUIOp::create(b, loc, row, extent);
    }
    for (Operation &op : loop.getBody()->without_terminator())
      if (!isa<memref::AllocOp>(op) || !mapping.contains(op.getResult(0)))
        b.clone(op, mapping);
  }

  /// Replaces `region` by a call of a new private function holding its
  /// body, the constants it uses cloned in (so that equal bodies compare
  /// equal), as --weft-outline-kernels does.
  LogicalResult outline(scf::ExecuteRegionOp region, SymbolTable &symbols) {
    IRRewriter rewriter(region.getContext());
    SetVector<Value> captured;
    getUsedValuesDefinedAbove(region.getRegion(), captured);
    rewriter.setInsertionPointToStart(&region.getRegion().front());
    for (Value value : captured) {
      Operation *def = value.getDefiningOp();
      if (!def || !matchPattern(value, m_Constant()))
        continue;
      Value copy = rewriter.clone(*def)->getResult(0);
      rewriter.replaceUsesWithIf(value, copy, [&](OpOperand &use) {
        return region->isProperAncestor(use.getOwner());
      });
    }
    std::string name = function.getName().str() + ".rows_" +
                       std::to_string(rowFunctions.size());
    while (symbols.lookup(name))
      name += "_";
    func::CallOp call;
    FailureOr<func::FuncOp> rows = outlineSingleBlockRegion(
        rewriter, region.getLoc(), region.getRegion(), name, &call);
    if (failed(rows))
      return region.emitError("could not outline this kernel's rows");
    weft::finishKernelFunction(*rows, symbols);
    call->moveBefore(region);
    rewriter.eraseOp(region);
    rowFunctions.push_back(*rows);
    return success();
  }

  func::FuncOp function;
  SmallVector<func::FuncOp> rowFunctions;
  unsigned merged = 0;
};
} // namespace
