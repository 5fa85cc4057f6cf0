//===- MarkBuffers.cpp - Freeze parameters no gradient can reach ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// ONNX does not tell parameters from buffers: a float causal mask stored as
// an initializer looks like a weight. A parameter whose every path to the
// outputs crosses an op marked NotDifferentiable (a comparison) or an
// integer value has a structurally zero gradient; training it would only
// let weight decay corrupt it, so it becomes a buffer, with a warning that
// names it and why. An op merely lacking a gradient rule does not count:
// the parameter stays trainable and --weft-autodiff reports the op, so a
// missing rule never freezes a weight silently.
//
//===----------------------------------------------------------------------===//

#include "GradientFlow.h"

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Train/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace weft {
#define GEN_PASS_DEF_MARKBUFFERSPASS
#include "weft/Transforms/Train/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
struct MarkBuffersPass : public weft::impl::MarkBuffersPassBase<MarkBuffersPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp fn) {
      if (fn.isExternal() || !fn.getBody().hasOneBlock())
        return;
      Block &block = fn.getBody().front();
      // Values whose gradient can be non-zero, found by one reverse sweep:
      // SSA order guarantees every user is visited before its operands.
      llvm::DenseSet<Value> reaches;
      ValueRange results = block.getTerminator()->getOperands();
      for (Value v : results)
        if (isDifferentiableType(v.getType()))
          reaches.insert(v);
      for (Operation &op : llvm::reverse(block.without_terminator())) {
        if (!passesGradients(&op) ||
            llvm::none_of(op.getResults(),
                          [&](Value r) { return reaches.contains(r); }))
          continue;
        for (Value operand : op.getOperands())
          if (isDifferentiableType(operand.getType()))
            reaches.insert(operand);
      }
      std::string what =
          ("the results of '" + fn.getSymName() + "'").str();
      for (BlockArgument arg : block.getArguments()) {
        auto name = fn.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), WeftDialect::kParamAttrName);
        if (!name || reaches.contains(arg))
          continue;
        fn.emitWarning("parameter '")
            << name.getValue() << "' gets no gradient: "
            << explainNoGradient(block, arg, results, what) << "; "
            << untrainedParameterNote();
        setArgSlot(fn, arg.getArgNumber(), contract::Role::Buffer,
                   name.getValue());
      }
    });
  }
};
} // namespace
