//===- LowerCopies.cpp - Strided memref.copy to linalg.copy ---------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The memref-to-LLVM lowering turns a copy between non-contiguous buffers
// into a call of `memrefCopy` from MLIR's C runner library. Generated
// executables link only the Weft runtime, so such copies become loops here.
//
// A tile computed in place is written back onto itself: bufferization of a
// tiled kernel leaves `copy(subview(B, o), subview(B, o))` with two equal
// subviews, which CSE would have merged but is not run on buffers (it would
// merge the per-GEMM zero fills). Such copies move no data and are erased
// here: in a transformer step they were one in six copies, each a full pass
// over an activation.
//
// A copy out of a splat constant (the zeros a gather's gradient scatters
// into) becomes a fill: the copy would read the constant from the
// executable, whose read-only data then holds it in full (154 MB of zeros
// for GPT-2's embedding gradient once the copy sits in a kernel where LLVM
// no longer sees its source).
//
// A step's result buffer written by one copy at its end, out of a buffer
// the step allocated, is that buffer: the allocation is replaced by the
// result. Bufferization returns each new parameter and moment in a buffer
// of its own, and --buffer-results-to-out-params copies it into the
// out-parameter after the update (its hoisting of such allocations needs
// memref's AllocationOpInterface model, and would erase an allocation
// returned twice while another return still uses it). Those copies were a
// second pass over the optimizer's memory; now the update writes the
// results. Sound because an out-parameter aliases no other buffer of the
// step (ModelABI.h: results never alias args, and each is a buffer of its
// own): the values the allocation held before its final one, written to
// the result instead, are seen by nobody.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Utils/MemRefUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "llvm/ADT/DenseSet.h"

namespace weft {
#define GEN_PASS_DEF_LOWERCOPIESPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
/// Whether `a` and `b` name the same elements: one value, or subviews with
/// equal offsets, sizes and strides of the same elements.
bool sameView(Value a, Value b) {
  if (a == b)
    return true;
  auto viewA = a.getDefiningOp<memref::SubViewOp>();
  auto viewB = b.getDefiningOp<memref::SubViewOp>();
  return viewA && viewB && viewA.getType() == viewB.getType() &&
         viewA.getStaticOffsets() == viewB.getStaticOffsets() &&
         viewA.getStaticSizes() == viewB.getStaticSizes() &&
         viewA.getStaticStrides() == viewB.getStaticStrides() &&
         viewA.getOffsets() == viewB.getOffsets() &&
         viewA.getSizes() == viewB.getSizes() &&
         viewA.getStrides() == viewB.getStrides() &&
         sameView(viewA.getSource(), viewB.getSource());
}

/// The splat value of a constant global `v` reads, or null.
TypedAttr splatOfConstantGlobal(Value v) {
  auto get = v.getDefiningOp<memref::GetGlobalOp>();
  if (!get)
    return {};
  auto global = SymbolTable::lookupNearestSymbolFrom<memref::GlobalOp>(
      get, get.getNameAttr());
  if (!global || !global.getConstant())
    return {};
  auto init = dyn_cast_or_null<SplatElementsAttr>(global.getConstantInitValue());
  if (!init)
    return {};
  return dyn_cast<TypedAttr>(init.getSplatValue<Attribute>());
}

bool isContiguous(Type type) {
  auto memref = dyn_cast<MemRefType>(type);
  return memref && memref::isStaticShapeAndContiguousRowMajor(memref);
}

/// Whether an op after `copy` in its block may write `buffer`: a user of
/// the buffer, of a view of it, of a buffer an op returns for it or of a
/// pointer taken from it (the BLAS calls' operands), other than a copy out
/// of it.
bool writtenAfter(Value buffer, memref::CopyOp copy) {
  Block *block = copy->getBlock();
  SmallVector<Value> worklist = {buffer};
  llvm::DenseSet<Value> derived = {buffer};
  while (!worklist.empty()) {
    Value value = worklist.pop_back_val();
    for (OpOperand &use : value.getUses()) {
      Operation *user = use.getOwner();
      // Buffers an op returns may alias its operands (a loop carrying the
      // buffer): they are followed too, and so is whatever pure ops
      // compute from the buffer (a pointer to it).
      bool pure = isa<ViewLikeOpInterface>(user) || isMemoryEffectFree(user);
      for (Value result : user->getResults())
        if ((pure || isa<BaseMemRefType>(result.getType())) &&
            derived.insert(result).second)
          worklist.push_back(result);
      if (pure)
        continue;
      Operation *top = block->findAncestorOpInBlock(*user);
      if (!top)
        return true;
      if (top == copy || top->isBeforeInBlock(copy))
        continue;
      auto later = dyn_cast<memref::CopyOp>(user);
      if (!later || later.getSource() != value)
        return true;
    }
  }
  return false;
}

/// Replaces each allocation whose final value is copied into an argument
/// that nothing else touches (an out-parameter) by that argument.
void forwardIntoOutParams(func::FuncOp fn) {
  if (fn.isExternal())
    return;
  Block &entry = fn.front();
  for (BlockArgument arg : entry.getArguments()) {
    if (!arg.hasOneUse())
      continue;
    auto copy = dyn_cast<memref::CopyOp>(*arg.getUsers().begin());
    if (!copy || copy.getTarget() != arg || copy->getBlock() != &entry)
      continue;
    auto alloc = copy.getSource().getDefiningOp<memref::AllocOp>();
    if (!alloc || alloc->getBlock() != &entry ||
        alloc.getType() != arg.getType() || writtenAfter(alloc, copy))
      continue;
    copy->erase();
    alloc.getResult().replaceAllUsesWith(arg);
    alloc->erase();
  }
}

struct LowerCopiesPass
    : public weft::impl::LowerCopiesPassBase<LowerCopiesPass> {
  void runOnOperation() override {
    forwardIntoOutParams(getOperation());

    SmallVector<Operation *> selfCopies;
    getOperation().walk([&](Operation *op) {
      if (auto copy = dyn_cast<memref::CopyOp>(op)) {
        if (sameView(copy.getSource(), copy.getTarget()))
          selfCopies.push_back(op);
      } else if (auto copy = dyn_cast<linalg::CopyOp>(op)) {
        if (copy.hasPureBufferSemantics() &&
            sameView(copy.getInputs()[0], copy.getOutputs()[0]))
          selfCopies.push_back(op);
      }
    });
    for (Operation *op : selfCopies)
      op->erase();

    SmallVector<memref::CopyOp> fromSplats;
    getOperation().walk([&](memref::CopyOp copy) {
      if (splatOfConstantGlobal(copy.getSource()))
        fromSplats.push_back(copy);
    });
    for (memref::CopyOp copy : fromSplats) {
      OpBuilder builder(copy);
      Value value = arith::ConstantOp::create(
          builder, copy.getLoc(), splatOfConstantGlobal(copy.getSource()));
      linalg::FillOp::create(builder, copy.getLoc(), value, copy.getTarget());
      copy->erase();
    }

    SmallVector<memref::CopyOp> copies;
    getOperation().walk([&](memref::CopyOp copy) {
      if (!isContiguous(copy.getSource().getType()) ||
          !isContiguous(copy.getTarget().getType()))
        copies.push_back(copy);
    });
    for (memref::CopyOp copy : copies) {
      if (!isa<MemRefType>(copy.getSource().getType()) ||
          !isa<MemRefType>(copy.getTarget().getType()))
        continue; // Unranked: nothing generated code could do better.
      OpBuilder builder(copy);
      linalg::CopyOp::create(builder, copy.getLoc(), copy.getSource(),
                             copy.getTarget());
      copy->erase();
    }
  }
};
} // namespace
