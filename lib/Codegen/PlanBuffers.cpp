//===- PlanBuffers.cpp - Place intermediate buffers in one workspace ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The step function allocates every intermediate it needs. Instead of
// malloc per step, all of them become views into one workspace the runtime
// allocates once; buffers whose lifetimes do not overlap share memory, so
// the workspace is the planned peak of intermediates, not their sum.
//
// Lifetimes are intervals over the ops of the function's block. A buffer is
// live from its alloc to the last op that uses it or anything derived from
// it: views, casts and reshapes (memref results of its users), values
// yielded out of regions, and pointers extracted for runtime calls. A use
// inside a loop counts as a use by the whole loop. A buffer allocated in a
// parallel loop's body gets one copy per iteration, since iterations run
// on different threads at once (--weft-chunk-parallel-loops keeps their
// number small).
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Interfaces/DataLayoutInterfaces.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"

#include <algorithm>

namespace weft {
#define GEN_PASS_DEF_PLANBUFFERSPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
constexpr int64_t kAlignment = 64;

int64_t alignTo(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// One buffer to place: its alloc, byte size, alignment and lifetime as
/// indices of the ops of the function's block (both ends inclusive).
/// A buffer allocated inside scf.forall bodies is private to each iteration
/// (iterations run concurrently): it gets `copies` slots of `slotBytes`
/// each, one per iteration of the enclosing foralls together.
struct Buffer {
  memref::AllocOp alloc;
  int64_t bytes = 0, alignment = kAlignment;
  int64_t copies = 1, slotBytes = 0;
  int64_t start = 0, end = 0;
  int64_t offset = -1;
};

/// The scf.forall ops around `op`, outermost first.
SmallVector<scf::ForallOp> enclosingForalls(Operation *op) {
  SmallVector<scf::ForallOp> loops;
  for (auto loop = op->getParentOfType<scf::ForallOp>(); loop;
       loop = loop->getParentOfType<scf::ForallOp>())
    loops.push_back(loop);
  std::reverse(loops.begin(), loops.end());
  return loops;
}

struct PlanBuffersPass
    : public weft::impl::PlanBuffersPassBase<PlanBuffersPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(function);
    if (!fn || fn.isExternal()) {
      module.emitError() << "no function @" << function << " to plan";
      return signalPassFailure();
    }
    if (!fn.getBody().hasOneBlock()) {
      fn.emitError() << "buffer planning needs a single-block function";
      return signalPassFailure();
    }
    std::optional<SymbolTable::UseRange> uses = fn.getSymbolUses(module);
    if (!uses || !uses->empty()) {
      fn.emitError() << "@" << function << " is called from this module; "
                     << "its workspace argument could not be passed";
      return signalPassFailure();
    }
    Block &block = fn.getBody().front();
    DataLayout layout = DataLayout::closest(fn);

    llvm::DenseMap<Operation *, int64_t> position;
    for (auto [i, op] : llvm::enumerate(block))
      position[&op] = i;

    std::vector<Buffer> buffers;
    SmallVector<memref::DeallocOp> deallocs;
    WalkResult walk = fn.walk([&](memref::AllocOp alloc) {
      MemRefType type = alloc.getType();
      if (!type.hasStaticShape()) {
        alloc.emitError() << "cannot plan a buffer of dynamic shape " << type
                          << ": the step must be statically shaped";
        return WalkResult::interrupt();
      }
      if (!type.getLayout().isIdentity()) {
        alloc.emitError() << "cannot plan a buffer with layout " << type;
        return WalkResult::interrupt();
      }
      Buffer buffer;
      buffer.alloc = alloc;
      buffer.bytes = type.getNumElements() *
                     layout.getTypeSize(type.getElementType()).getFixedValue();
      if (std::optional<uint64_t> align = alloc.getAlignment())
        buffer.alignment = std::max<int64_t>(kAlignment, *align);
      for (scf::ForallOp loop : enclosingForalls(alloc)) {
        ArrayRef<int64_t> upper = loop.getStaticUpperBound();
        if (llvm::any_of(loop.getStaticLowerBound(),
                         [](int64_t v) { return v != 0; }) ||
            llvm::any_of(loop.getStaticStep(),
                         [](int64_t v) { return v != 1; }) ||
            llvm::any_of(upper, ShapedType::isDynamic)) {
          alloc.emitError() << "cannot give each iteration of a parallel "
                               "loop its own copy of this buffer: the loop's "
                               "bounds are not static from 0 in steps of 1";
          return WalkResult::interrupt();
        }
        for (int64_t count : upper)
          buffer.copies *= count;
      }
      buffer.slotBytes = alignTo(buffer.bytes, buffer.alignment);
      if (buffer.copies > 1)
        buffer.bytes = buffer.slotBytes * buffer.copies;
      if (failed(computeLifetime(alloc, block, position, buffer, deallocs)))
        return WalkResult::interrupt();
      buffers.push_back(buffer);
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return signalPassFailure();

    int64_t workspace = place(buffers);
    int64_t argBytes = 0;
    for (Type type : fn.getArgumentTypes())
      if (auto memref = dyn_cast<MemRefType>(type);
          memref && memref.hasStaticShape())
        argBytes += memref.getNumElements() *
                    layout.getTypeSize(memref.getElementType()).getFixedValue();

    MLIRContext *ctx = &getContext();
    auto wsType = MemRefType::get({workspace}, IntegerType::get(ctx, 8));
    NamedAttribute marker(StringAttr::get(ctx, weft::WeftDialect::kWorkspaceAttrName),
                          UnitAttr::get(ctx));
    if (failed(fn.insertArgument(fn.getNumArguments(), wsType,
                                 DictionaryAttr::get(ctx, {marker}),
                                 fn.getLoc())))
      return signalPassFailure();
    Value ws = fn.getArgument(fn.getNumArguments() - 1);
    for (memref::DeallocOp dealloc : deallocs)
      dealloc->erase();
    for (Buffer &buffer : buffers) {
      OpBuilder builder(buffer.alloc);
      Location loc = buffer.alloc.getLoc();
      Value offset =
          arith::ConstantIndexOp::create(builder, loc, buffer.offset);
      if (buffer.copies > 1)
        offset = arith::AddIOp::create(
            builder, loc, offset,
            arith::MulIOp::create(
                builder, loc, iterationIndex(builder, buffer.alloc),
                arith::ConstantIndexOp::create(builder, loc,
                                               buffer.slotBytes)));
      Value view = memref::ViewOp::create(builder, loc, buffer.alloc.getType(),
                                          ws, offset, ValueRange{});
      buffer.alloc.replaceAllUsesWith(view);
      buffer.alloc->erase();
    }
    Builder b(ctx);
    module->setAttr(weft::WeftDialect::kWorkspaceBytesAttrName, b.getI64IntegerAttr(workspace));
    module->setAttr(weft::WeftDialect::kPeakBytesAttrName,
                    b.getI64IntegerAttr(workspace + argBytes));
  }

  /// The row-major index of the current iteration over all scf.forall ops
  /// around `alloc`, outermost first.
  static Value iterationIndex(OpBuilder &builder, memref::AllocOp alloc) {
    Location loc = alloc.getLoc();
    Value index;
    for (scf::ForallOp loop : enclosingForalls(alloc)) {
      for (auto [iv, count] :
           llvm::zip(loop.getInductionVars(), loop.getStaticUpperBound())) {
        index = index ? arith::AddIOp::create(
                            builder, loc,
                            arith::MulIOp::create(
                                builder, loc, index,
                                arith::ConstantIndexOp::create(builder, loc,
                                                               count)),
                            iv)
                      : iv;
      }
    }
    return index;
  }

  /// Sets `buffer.start`/`end` from the alloc and every use of it or of a
  /// value derived from it. Deallocs end nothing (they are erased).
  static LogicalResult
  computeLifetime(memref::AllocOp alloc, Block &block,
                  const llvm::DenseMap<Operation *, int64_t> &position,
                  Buffer &buffer,
                  SmallVectorImpl<memref::DeallocOp> &deallocs) {
    Operation *top = block.findAncestorOpInBlock(*alloc);
    buffer.start = buffer.end = position.lookup(top);
    llvm::SetVector<Value> aliases;
    aliases.insert(alloc.getResult());
    // A worklist, not recursion: alias chains can be long.
    for (size_t i = 0; i < aliases.size(); ++i) {
      Value value = aliases[i];
      bool derivedPointer = !isa<MemRefType>(value.getType());
      for (OpOperand &use : value.getUses()) {
        Operation *user = use.getOwner();
        if (auto dealloc = dyn_cast<memref::DeallocOp>(user)) {
          deallocs.push_back(dealloc);
          continue;
        }
        if (isa<func::ReturnOp>(user) && user->getBlock() == &block)
          return alloc.emitError()
                 << "buffer escapes @"
                 << alloc->getParentOfType<func::FuncOp>().getName()
                 << " through its return; run buffer-results-to-out-params "
                    "first";
        Operation *userTop = block.findAncestorOpInBlock(*user);
        if (!userTop)
          continue;
        buffer.end = std::max(buffer.end, position.lookup(userTop));
        // Values derived from the buffer: memref results (views, casts,
        // region results), and anything computed from an extracted pointer.
        for (Value result : user->getResults())
          if (derivedPointer || isa<MemRefType>(result.getType()) ||
              isa<memref::ExtractAlignedPointerAsIndexOp>(user))
            aliases.insert(result);
        if (user->hasTrait<OpTrait::IsTerminator>() && user != &block.back())
          for (Value result : user->getParentOp()->getResults())
            if (isa<MemRefType>(result.getType()))
              aliases.insert(result);
      }
    }
    return success();
  }

  /// Assigns offsets, largest buffer first, each at the lowest aligned
  /// offset that no placed buffer with an overlapping lifetime occupies.
  /// Returns the workspace size.
  static int64_t place(std::vector<Buffer> &buffers) {
    std::vector<size_t> order(buffers.size());
    for (size_t i = 0; i < order.size(); ++i)
      order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return buffers[a].bytes > buffers[b].bytes;
    });
    std::vector<size_t> placed;
    int64_t workspace = 0;
    for (size_t index : order) {
      Buffer &buffer = buffers[index];
      SmallVector<std::pair<int64_t, int64_t>> busy; // [offset, end)
      for (size_t other : placed) {
        const Buffer &o = buffers[other];
        if (o.start <= buffer.end && buffer.start <= o.end)
          busy.push_back({o.offset, o.offset + o.bytes});
      }
      llvm::sort(busy);
      int64_t offset = 0;
      for (auto [begin, end] : busy) {
        if (alignTo(offset, buffer.alignment) + buffer.bytes <= begin)
          break;
        offset = std::max(offset, end);
      }
      buffer.offset = alignTo(offset, buffer.alignment);
      placed.push_back(index);
      workspace = std::max(workspace, buffer.offset + buffer.bytes);
    }
    return alignTo(workspace, kAlignment);
  }
};
} // namespace
