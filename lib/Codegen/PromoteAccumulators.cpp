//===- PromoteAccumulators.cpp - Reduction accumulators into registers ----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A linalg reduction lowered to loops loads its output element, combines,
// and stores it back on every iteration of the reduction loop. LLVM keeps
// such an accumulator in memory unless it can prove the output does not
// alias the inputs, which it cannot for kernel arguments (one buffer may be
// passed twice), so the loop is neither vectorized nor even kept in a
// register. Linalg's semantics settle the question: an op's inputs are
// values it does not write, so within the loop of one linalg op the output
// element is touched only by its own load and store. This pass carries it
// as an scf.for iteration argument instead: one load before the loop, one
// store after it.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace weft {
#define GEN_PASS_DEF_PROMOTEACCUMULATORSPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
/// One accumulator: the loop's load of an element at loop-invariant
/// indices and its store back to the same element.
struct Accumulator {
  memref::LoadOp load;
  memref::StoreOp store;
};

bool sameElement(memref::LoadOp load, memref::StoreOp store) {
  return load.getMemRef() == store.getMemRef() &&
         load.getIndices() == store.getIndices();
}

/// The accumulators of `loop`, or nothing when any write in its body is not
/// one: every store must be a direct child at loop-invariant indices whose
/// element the body loads exactly once before it, and nothing else in the
/// body may write memory or touch those buffers.
std::optional<SmallVector<Accumulator>> findAccumulators(scf::ForOp loop) {
  SmallVector<Accumulator> found;
  Block *body = loop.getBody();
  for (auto store : body->getOps<memref::StoreOp>()) {
    if (!llvm::all_of(store.getIndices(), [&](Value index) {
          return loop.isDefinedOutsideOfLoop(index);
        }) ||
        !loop.isDefinedOutsideOfLoop(store.getMemRef()))
      return std::nullopt;
    memref::LoadOp match;
    for (auto load : body->getOps<memref::LoadOp>()) {
      if (load.getMemRef() != store.getMemRef())
        continue;
      if (match || !sameElement(load, store) ||
          !load->isBeforeInBlock(store))
        return std::nullopt;
      match = load;
    }
    if (!match)
      return std::nullopt;
    found.push_back({match, store});
  }
  if (found.empty())
    return std::nullopt;
  // Nothing else writes, and nothing else reads the accumulated buffers.
  WalkResult walk = body->walk([&](Operation *op) {
    if (llvm::any_of(found, [&](Accumulator acc) {
          return op == acc.load || op == acc.store;
        }))
      return WalkResult::advance();
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      if (llvm::any_of(found, [&](Accumulator acc) {
            return load.getMemRef() == acc.store.getMemRef();
          }))
        return WalkResult::interrupt();
      return WalkResult::advance();
    }
    auto effects = dyn_cast<MemoryEffectOpInterface>(op);
    if (!effects) {
      if (op->hasTrait<OpTrait::HasRecursiveMemoryEffects>())
        return WalkResult::advance();
      return WalkResult::interrupt();
    }
    if (effects.hasEffect<MemoryEffects::Write>() ||
        effects.hasEffect<MemoryEffects::Free>() ||
        effects.hasEffect<MemoryEffects::Allocate>())
      return WalkResult::interrupt();
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return std::nullopt;
  return found;
}

void promote(scf::ForOp loop, ArrayRef<Accumulator> accumulators) {
  IRRewriter rewriter(loop.getContext());
  rewriter.setInsertionPoint(loop);
  SmallVector<Value> inits;
  for (Accumulator acc : accumulators)
    inits.push_back(memref::LoadOp::create(rewriter, acc.load.getLoc(),
                                           acc.load.getMemRef(),
                                           acc.load.getIndices()));
  unsigned first = loop.getNumRegionIterArgs();
  FailureOr<LoopLikeOpInterface> grown = loop.replaceWithAdditionalYields(
      rewriter, inits, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location, ArrayRef<BlockArgument>) {
        SmallVector<Value> yielded;
        for (Accumulator acc : accumulators)
          yielded.push_back(acc.store.getValue());
        return yielded;
      });
  if (failed(grown))
    return;
  auto newLoop = cast<scf::ForOp>(grown->getOperation());
  rewriter.setInsertionPointAfter(newLoop);
  for (auto [i, entry] : llvm::enumerate(accumulators)) {
    Accumulator acc = entry;
    rewriter.replaceOp(acc.load, newLoop.getRegionIterArgs()[first + i]);
    memref::StoreOp::create(rewriter, acc.store.getLoc(),
                            newLoop.getResult(first + i),
                            acc.store.getMemRef(), acc.store.getIndices());
    rewriter.eraseOp(acc.store);
  }
}

struct PromoteAccumulatorsPass
    : public weft::impl::PromoteAccumulatorsPassBase<PromoteAccumulatorsPass> {
  void runOnOperation() override {
    // Innermost loops first: a promoted inner loop's load and store then
    // sit in its parent's body, where the parent may promote them again.
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      if (std::optional<SmallVector<Accumulator>> found =
              findAccumulators(loop))
        promote(loop, *found);
  }
};
} // namespace
