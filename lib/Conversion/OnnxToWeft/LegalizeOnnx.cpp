//===- LegalizeOnnx.cpp - Rewrite generic ONNX nodes into weft ops --------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The driver of --weft-legalize-onnx. Nodes are rewritten in program order,
// not by a greedy pattern driver: a node's legalizer needs the inferred
// types of its inputs, and shape-like inputs must already be folded to
// constants when their consumer is reached.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "weft/Conversion/Passes.h"
#include "weft/Evaluator/Evaluator.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include <limits>

namespace weft {
#define GEN_PASS_DEF_LEGALIZEONNXPASS
#include "weft/Conversion/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// Ops whose results hold more elements than this stay unevaluated: folding
/// exists for shape arithmetic and masks, not to precompute activations.
constexpr int64_t kMaxFoldResultElements = int64_t(1) << 20;
/// Operands bigger than this are not decoded for evaluation either.
constexpr int64_t kMaxFoldOperandElements = int64_t(1) << 22;

int64_t numElements(Type type) {
  auto t = dyn_cast<RankedTensorType>(type);
  return t && t.hasStaticShape() ? t.getNumElements()
                                 : std::numeric_limits<int64_t>::max();
}

/// Replaces the results of `op` by `values` (constants materialized from
/// attributes) and erases it.
void replaceFolded(OpBuilder &builder, Operation *op,
                   ArrayRef<OpFoldResult> values) {
  builder.setInsertionPoint(op);
  for (auto [result, folded] : llvm::zip(op->getResults(), values)) {
    Value replacement = dyn_cast<Value>(folded);
    if (!replacement)
      replacement = ConstantOp::create(
          builder, op->getLoc(), cast<ElementsAttr>(cast<Attribute>(folded)));
    result.replaceAllUsesWith(replacement);
  }
  op->erase();
}

/// Whether every folded value can replace the corresponding result: same
/// type, and attributes are elements a weft.constant can hold.
bool isUsableFold(Operation *op, ArrayRef<OpFoldResult> values) {
  if (values.size() != op->getNumResults())
    return false;
  for (auto [result, folded] : llvm::zip(op->getResults(), values)) {
    if (auto v = dyn_cast<Value>(folded)) {
      if (v == result || v.getType() != result.getType())
        return false;
      continue;
    }
    auto attr = dyn_cast<ElementsAttr>(cast<Attribute>(folded));
    if (!attr || attr.getType() != result.getType())
      return false;
  }
  return true;
}

/// Folds the ops a legalizer built: first with the ops' own folders (which
/// also remove identities such as a reshape to the same type), then, when
/// all operands are constants and the results are small, by evaluating the
/// op. Ops are visited in creation order, so chains fold completely. An op
/// the evaluator cannot handle simply stays; a consumer that needs its value
/// at compile time reports that.
void foldCreated(OpBuilder &builder, ArrayRef<Operation *> ops) {
  for (Operation *op : ops) {
    if (isa<ConstantOp>(op))
      continue;
    SmallVector<Attribute> operandValues;
    bool allConstant = true;
    for (Value operand : op->getOperands()) {
      Attribute value;
      if (!matchPattern(operand, m_Constant(&value)))
        allConstant = false;
      operandValues.push_back(value);
    }
    SmallVector<OpFoldResult> folded;
    if (succeeded(op->fold(operandValues, folded))) {
      if (isUsableFold(op, folded)) {
        replaceFolded(builder, op, folded);
        continue;
      }
      // Folded in place (e.g. reshape of reshape): operands changed.
      allConstant = llvm::all_of(op->getOperands(), [](Value v) {
        return matchPattern(v, m_Constant());
      });
    }
    if (!allConstant || op->getNumOperands() == 0)
      continue;
    if (llvm::any_of(op->getResultTypes(), [](Type t) {
          return numElements(t) > kMaxFoldResultElements;
        }))
      continue;
    SmallVector<eval::Tensor> args;
    for (Value operand : op->getOperands()) {
      ElementsAttr value;
      std::string error;
      FailureOr<eval::Tensor> arg = failure();
      if (!matchPattern(operand, m_Constant(&value)) ||
          numElements(value.getType()) > kMaxFoldOperandElements ||
          failed(arg = eval::Tensor::tryFromAttr(value, error)))
        break;
      args.push_back(std::move(*arg));
    }
    if (args.size() != op->getNumOperands())
      continue;
    FailureOr<SmallVector<eval::Tensor>> results;
    {
      // Failing to fold is not an error; the evaluator's diagnostics would
      // only confuse.
      ScopedDiagnosticHandler silence(op->getContext(),
                                      [](Diagnostic &) { return success(); });
      results = eval::evaluateOp(op, args);
    }
    if (failed(results))
      continue;
    SmallVector<OpFoldResult> values;
    for (const eval::Tensor &t : *results)
      values.push_back(Attribute(t.toAttr()));
    if (isUsableFold(op, values))
      replaceFolded(builder, op, values);
  }
}

struct LegalizeOnnxPass
    : public weft::impl::LegalizeOnnxPassBase<LegalizeOnnxPass> {
  using LegalizeOnnxPassBase::LegalizeOnnxPassBase;

  LogicalResult initialize(MLIRContext *) override {
    registry = LegalizerRegistry();
    populateActivationLegalizers(registry);
    populateElementwiseLegalizers(registry);
    populateLinalgLegalizers(registry);
    populateConvolutionLegalizers(registry);
    populateNormalizationLegalizers(registry);
    populateReductionLegalizers(registry);
    populateResampleLegalizers(registry);
    populateShapeLegalizers(registry);
    populateDataMovementLegalizers(registry);
    populateWhereLegalizers(registry);
    populateSelectionLegalizers(registry);
    populateEinsumLegalizers(registry);
    populateRecurrentLegalizers(registry);
    return success();
  }

  void runOnOperation() override {
    bool ok = true;
    for (auto fn : getOperation().getOps<func::FuncOp>())
      if (!fn.isExternal())
        ok &= succeeded(legalizeFunction(fn));
    if (!ok)
      signalPassFailure();
  }

  LogicalResult legalizeFunction(func::FuncOp fn);
  LogicalResult legalizeNode(OnnxNodeOp node);

  LegalizerRegistry registry;
};

LogicalResult LegalizeOnnxPass::legalizeNode(OnnxNodeOp node) {
  StringRef opType = node.getOpType();
  // getOpset() reads the I64Attr as unsigned; opsets are compared signed.
  int64_t opset = node.getOpsetAttr().getInt();
  const LegalizeFn *fn = registry.lookup(opType, opset);
  if (!fn) {
    if (!registry.contains(opType))
      return node.emitError()
             << "unsupported ONNX op '" << opType << "' (node '"
             << node.getName() << "', opset " << opset
             << "); supported ops: " << registry.describeOpTypes();
    return node.emitError()
           << "ONNX op '" << opType << "' (node '" << node.getName()
           << "') at opset " << opset << " is not supported; supported opsets: "
           << registry.describeRanges(opType);
  }

  OpBuilder builder(node);
  LegalizeContext ctx(builder, node);
  ctx.training = training;
  FailureOr<SmallVector<Value>> results = (*fn)(ctx, node, node.getInputs());
  if (failed(results))
    return failure();
  // ONNX may omit trailing outputs; values for them are simply dropped.
  results->truncate(std::min<size_t>(results->size(), node.getNumResults()));
  for (unsigned i = results->size(), e = node.getNumResults(); i < e; ++i)
    if (!node.getResult(i).use_empty())
      return ctx.emitError()
             << "output " << i << " is used, but weft supports only the first "
             << results->size() << " output(s) of " << node.getOpType();
  for (auto [result, value] : llvm::zip(node.getResults(), *results))
    result.replaceAllUsesWith(value);
  node.erase();
  foldCreated(builder, ctx.created);
  return success();
}

LogicalResult LegalizeOnnxPass::legalizeFunction(func::FuncOp fn) {
  SmallVector<OnnxNodeOp> nodes;
  fn.walk<WalkOrder::PreOrder>([&](OnnxNodeOp node) { nodes.push_back(node); });
  for (OnnxNodeOp node : nodes)
    if (failed(legalizeNode(node)))
      return failure();

  // Shape arithmetic folded to constants leaves its inputs dead. Visiting
  // each block backwards erases whole dead chains in one sweep.
  for (Block &block : fn.getBody())
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(block)))
      if (isa_and_nonnull<WeftDialect>(op.getDialect()) &&
          isOpTriviallyDead(&op))
        op.erase();

  for (Block &block : fn.getBody()) {
    if (auto ret = dyn_cast_or_null<func::ReturnOp>(
            block.mightHaveTerminator() ? block.getTerminator() : nullptr)) {
      fn.setFunctionType(FunctionType::get(
          fn.getContext(), fn.getArgumentTypes(), ret.getOperandTypes()));
      break;
    }
  }
  return success();
}

} // namespace
