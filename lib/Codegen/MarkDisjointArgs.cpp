//===- MarkDisjointArgs.cpp - llvm.noalias on kernels' disjoint buffers ---===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// An outlined kernel receives its buffers as separate pointers, and LLVM
// must assume any two of them overlap: an im2col gather or a transpose,
// fully unrolled over a short row, then stays one scalar load and store per
// element, since no store may move past the next load. The planner knows
// better: workspace buffers live at fixed byte ranges, and the workspace is
// an allocation of its own. This pass follows every call path from the
// step to each kernel, tracks each buffer argument to a root (the
// workspace, the step's other arguments, an allocation) and a byte range,
// and marks an argument `llvm.noalias` when, on every path, its range
// overlaps no other buffer argument's.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/BufferPlace.h"
#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/ViewLikeInterface.h"

#include "llvm/ADT/DenseMap.h"

namespace weft {
#define GEN_PASS_DEF_MARKDISJOINTARGSPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {

using Place = weft::BufferPlace;
constexpr int64_t kExternal = Place::kExternal, kWorkspace = Place::kWorkspace;

/// Bytes of a statically shaped memref, or -1.
int64_t staticBytes(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  if (!memref || !memref.hasStaticShape() ||
      !memref.getElementType().isIntOrFloat())
    return -1;
  return memref.getNumElements() * ((memref.getElementTypeBitWidth() + 7) / 8);
}

struct MarkDisjointArgsPass
    : weft::impl::MarkDisjointArgsPassBase<MarkDisjointArgsPass> {
  using Base::Base;

  /// Call paths followed before giving up (a safe answer: nothing marked).
  static constexpr size_t kMaxContexts = 100000;

  DenseMap<Operation *, int64_t> allocationRoots;
  int64_t nextRoot = kWorkspace + 1;
  DenseMap<func::FuncOp, SmallVector<SmallVector<Place>>> contexts;
  size_t contextCount = 0;
  bool gaveUp = false;

  Place placeOf(Value v, ArrayRef<Place> args, func::FuncOp fn) {
    if (auto arg = dyn_cast<BlockArgument>(v)) {
      if (arg.getOwner() == &fn.getBody().front())
        return args[arg.getArgNumber()];
      return {};
    }
    Operation *op = v.getDefiningOp();
    if (auto view = dyn_cast<memref::ViewOp>(op)) {
      Place p = placeOf(view.getSource(), args, fn);
      APInt shift;
      if (p.offset >= 0 &&
          matchPattern(view.getByteShift(), m_ConstantInt(&shift))) {
        p.offset += shift.getSExtValue();
        p.size = staticBytes(view.getType());
      } else {
        p.offset = p.size = -1;
      }
      return p;
    }
    // Other views (subviews, reshapes, casts) stay within their source's
    // range.
    if (auto view = dyn_cast<ViewLikeOpInterface>(op))
      return placeOf(view.getViewSource(), args, fn);
    if (isa<memref::AllocOp, memref::AllocaOp, memref::GetGlobalOp>(op)) {
      auto [it, inserted] = allocationRoots.try_emplace(op, nextRoot);
      if (inserted)
        ++nextRoot;
      return {it->second, 0, staticBytes(v.getType())};
    }
    return {};
  }

  void follow(func::FuncOp fn, SmallVector<Place> args, SymbolTable &symbols) {
    if (gaveUp || ++contextCount > kMaxContexts) {
      gaveUp = true;
      return;
    }
    fn.walk([&](func::CallOp call) {
      auto callee = symbols.lookup<func::FuncOp>(call.getCallee());
      if (!callee || callee.isExternal())
        return;
      SmallVector<Place> places;
      for (Value operand : call.getOperands())
        places.push_back(placeOf(operand, args, fn));
      follow(callee, places, symbols);
    });
    contexts[fn].push_back(std::move(args));
  }

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SymbolTable symbols(module);
    auto entry = symbols.lookup<func::FuncOp>(function);
    if (!entry || entry.isExternal())
      return;
    SmallVector<Place> places;
    for (BlockArgument arg : entry.getArguments()) {
      if (entry.getArgAttr(arg.getArgNumber(), "weft.workspace"))
        places.push_back({kWorkspace, 0, staticBytes(arg.getType())});
      else
        places.push_back({kExternal, -1, -1});
    }
    follow(entry, places, symbols);
    if (gaveUp)
      return;

    UnitAttr unit = UnitAttr::get(&getContext());
    for (auto &[fn, paths] : contexts) {
      if (fn == entry)
        continue;
      for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i) {
        if (!isa<MemRefType>(fn.getArgument(i).getType()))
          continue;
        bool disjoint = llvm::all_of(paths, [&](ArrayRef<Place> path) {
          for (unsigned j = 0; j < e; ++j)
            if (j != i && isa<MemRefType>(fn.getArgument(j).getType()) &&
                !path[i].disjointFrom(path[j]))
              return false;
          return true;
        });
        if (disjoint) {
          fn.setArgAttr(i, "llvm.noalias", unit);
          ++numMarked;
        }
      }
    }
  }
};

} // namespace
