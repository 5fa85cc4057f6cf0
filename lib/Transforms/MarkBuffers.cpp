//===- MarkBuffers.cpp - Freeze parameters no gradient can reach ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// ONNX does not tell parameters from buffers: a float causal mask stored as
// an initializer looks like a weight. A parameter whose every path to the
// outputs crosses a non-differentiable op (a comparison, an index) has a
// structurally zero gradient; training it would only let weight decay
// corrupt it, so it becomes a buffer.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseSet.h"

namespace weft {
#define GEN_PASS_DEF_MARKBUFFERSPASS
#include "weft/Transforms/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
bool isFloatTensor(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && isa<FloatType>(type.getElementType());
}

struct MarkBuffersPass : public weft::impl::MarkBuffersPassBase<MarkBuffersPass> {
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp fn) {
      if (fn.isExternal() || !fn.getBody().hasOneBlock())
        return;
      Block &block = fn.getBody().front();
      // Values whose gradient can be non-zero, found by one reverse sweep:
      // SSA order guarantees every user is visited before its operands.
      llvm::DenseSet<Value> reaches;
      for (Value v : block.getTerminator()->getOperands())
        if (isFloatTensor(v))
          reaches.insert(v);
      for (Operation &op : llvm::reverse(block.without_terminator())) {
        if (!isa<GradientOpInterface>(op) ||
            llvm::none_of(op.getResults(),
                          [&](Value r) { return reaches.contains(r); }))
          continue;
        for (Value operand : op.getOperands())
          if (isFloatTensor(operand))
            reaches.insert(operand);
      }
      for (BlockArgument arg : block.getArguments()) {
        auto name = fn.getArgAttrOfType<StringAttr>(
            arg.getArgNumber(), WeftDialect::kParamAttrName);
        if (!name || reaches.contains(arg))
          continue;
        fn.removeArgAttr(arg.getArgNumber(), WeftDialect::kParamAttrName);
        fn.setArgAttr(arg.getArgNumber(), WeftDialect::kBufferAttrName, name);
      }
    });
  }
};
} // namespace
