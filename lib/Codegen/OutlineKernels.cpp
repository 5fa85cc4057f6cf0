//===- OutlineKernels.cpp - One function per loop nest of the step --------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A GPT-2 step is thousands of loop nests. As one LLVM function it costs
// minutes of optimization (several of LLVM's function passes grow faster
// than linearly); as one function per loop nest it costs seconds. The same
// split is what a GPU target needs: each kernel a function to launch.
//
//===----------------------------------------------------------------------===//

#include "KernelFunctions.h"

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Codegen/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/SCF/Utils/Utils.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Transforms/RegionUtils.h"


namespace weft {
#define GEN_PASS_DEF_OUTLINEKERNELSPASS
#include "weft/Codegen/Passes.h.inc"
} // namespace weft

using namespace mlir;

namespace {
/// Loop nests worth a function: anything with a loop inside. Ops with
/// results (an scf.for carrying a scalar) stay inline.
bool isKernel(Operation &op) {
  return op.getNumResults() == 0 &&
         (isa<linalg::LinalgOp>(op) ||
          isa<scf::ForallOp, scf::ForOp, scf::WhileOp, scf::ParallelOp>(op));
}

struct OutlineKernelsPass
    : public weft::impl::OutlineKernelsPassBase<OutlineKernelsPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(function);
    if (!fn || fn.isExternal() || !fn.getBody().hasOneBlock())
      return;
    SmallVector<Operation *> kernels;
    for (Operation &op : fn.getBody().front().without_terminator())
      if (isKernel(op))
        kernels.push_back(&op);

    SymbolTable symbols(module);
    IRRewriter rewriter(&getContext());
    unsigned next = 0;
    SmallVector<func::FuncOp> outlined;
    for (Operation *kernel : kernels) {
      auto tag = kernel->getAttrOfType<StringAttr>(weft::WeftDialect::kKernelAttrName);
      std::string name =
          function + "." + (tag ? tag.str() : "kernel_" + std::to_string(next));
      ++next;
      while (symbols.lookup(name))
        name += "_";
      FailureOr<func::FuncOp> fn = outline(rewriter, kernel, name, symbols);
      if (failed(fn))
        return signalPassFailure();
      outlined.push_back(*fn);
    }
    weft::deduplicateFunctions(fn, outlined, symbols);
  }

  /// Wraps `kernel` in an scf.execute_region, clones the constants it uses
  /// into it, outlines the region and replaces it by the call.
  FailureOr<func::FuncOp> outline(RewriterBase &rewriter, Operation *kernel,
                                  StringRef name, SymbolTable &symbols) {
    Location loc = kernel->getLoc();
    rewriter.setInsertionPoint(kernel);
    auto region = scf::ExecuteRegionOp::create(rewriter, loc, TypeRange{});
    Block *body = rewriter.createBlock(&region.getRegion());
    auto yield = scf::YieldOp::create(rewriter, loc);
    rewriter.moveOpBefore(kernel, yield);

    SetVector<Value> captured;
    getUsedValuesDefinedAbove(region.getRegion(), captured);
    rewriter.setInsertionPointToStart(body);
    for (Value value : captured) {
      Operation *def = value.getDefiningOp();
      if (!def || !matchPattern(value, m_Constant()))
        continue;
      Value copy = rewriter.clone(*def)->getResult(0);
      rewriter.replaceUsesWithIf(value, copy, [&](OpOperand &use) {
        return region->isProperAncestor(use.getOwner());
      });
    }

    func::CallOp call;
    FailureOr<func::FuncOp> outlined = outlineSingleBlockRegion(
        rewriter, loc, region.getRegion(), name, &call);
    if (failed(outlined)) {
      kernel->emitError("could not outline this loop nest");
      return failure();
    }
    weft::finishKernelFunction(*outlined, symbols);
    // The function is the kernel now: the tag moves to it, so that the
    // kernels of different layers compare equal.
    outlined->walk([&](Operation *op) {
      if (op->removeAttr(weft::WeftDialect::kKernelAttrName))
        (*outlined)->setAttr(weft::WeftDialect::kKernelAttrName, rewriter.getUnitAttr());
    });
    call->moveBefore(region);
    rewriter.eraseOp(region);
    return *outlined;
  }
};
} // namespace
