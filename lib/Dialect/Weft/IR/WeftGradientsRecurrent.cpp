//===- WeftGradientsRecurrent.cpp - Gradients of lstm and gru -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Backpropagation through time is split in two: the loop that must run
// step by step (the adjoints of h and c flow from step t to step t - 1) is
// weft.lstm_grad / weft.gru_grad, and everything that sums over steps is
// ordinary weft ops after it. The recurrence's adjoint is
// sum_t dA_t^T h_{t-1}, one [gates*H, T*B] x [T*B, H] matmul over the
// per-step pre-activation adjoints and the previous hidden states, so it
// is a GEMM, shards like one (a sum over the batch under data
// parallelism), and the loop carries only [B, H] states.
//
// A forward op marked `recompute` stores no gates; its adjoint op gets the
// input gates instead (and, for the GRU, the recurrent bias) and recomputes
// each step's gates inside its loop. Where the input gates are the input
// projection, the adjoint gets a copy of it built right before it, so the
// forward's input gates die at the forward op too.
//
//===----------------------------------------------------------------------===//

#include "WeftGradients.h"

#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace weft;
using namespace weft::grad;

namespace {

/// Marks the ops a recomputing adjoint runs again.
constexpr llvm::StringLiteral kRecomputedAttrName = "weft.recomputed";

/// Bytes of a ranked tensor.
double bytesOf(Value v) {
  RankedTensorType type = typeOf(v);
  return static_cast<double>(type.getNumElements()) *
         type.getElementTypeBitWidth() / 8;
}

/// h_{t-1} for every step t, [T, B, H]: `h0` then the hidden states
/// shifted by one step in the direction the loop ran.
Value previousHidden(OpBuilder &b, Location loc, Value hidden, Value h0,
                     bool reverse) {
  RankedTensorType type = typeOf(hidden);
  int64_t t = type.getDimSize(0), batch = type.getDimSize(1),
          h = type.getDimSize(2);
  Value first = reshape(b, loc, h0, {1, batch, h});
  if (t == 1)
    return first;
  SmallVector<int64_t> strides = {1, 1, 1};
  SmallVector<int64_t> starts = {reverse ? 1 : 0, 0, 0},
                       limits = {reverse ? t : t - 1, batch, h};
  Value shifted = SliceOp::create(b, loc, hidden, starts, limits, strides);
  SmallVector<Value> parts = reverse ? SmallVector<Value>{shifted, first}
                                     : SmallVector<Value>{first, shifted};
  return ConcatOp::create(b, loc, parts, 0);
}

/// sum_t dA_t^T h_{t-1}: the adjoint of a `[gates*H, H]` recurrence from
/// the per-step adjoints of `h @ recurrence^T`, `[T, B, gates*H]`.
Value recurrenceGrad(OpBuilder &b, Location loc, Value preGrad, Value prev) {
  RankedTensorType g = typeOf(preGrad), p = typeOf(prev);
  int64_t rows = g.getDimSize(0) * g.getDimSize(1);
  return MatMulOp::create(b, loc,
                          reshape(b, loc, preGrad, {rows, g.getDimSize(2)}),
                          reshape(b, loc, prev, {rows, p.getDimSize(2)}),
                          /*transpose_lhs=*/true, /*transpose_rhs=*/false);
}

/// Ops a recomputing adjoint may run again to rebuild the input gates:
/// cheap next to the recurrence and free of side effects.
bool isRecomputable(Operation *op) {
  return isa<MatMulOp, AddOp, ReshapeOp, TransposeOp, BroadcastOp>(op) &&
         op->getNumResults() == 1;
}

/// The input gates of a `recompute` forward op, computed again at `b`'s
/// insertion point when they come from a chain of recomputable ops (the
/// input projection x @ w_ih^T + b) whose leaves are each smaller than the
/// gates: the leaves stay alive until the backward instead of the gates
/// (and mostly do anyway: x for the projection's weight gradient, w_ih and
/// b as parameters). Otherwise the forward's input gates themselves.
///
/// The copies carry `kRecomputedAttrName`: CSE merges only ops with equal
/// attributes, so the canonicalize + CSE runs after autodiff (train and
/// parallel pipelines) cannot fold them back into the forward's ops, which
/// would keep the gates alive again.
Value recomputedInputGates(OpBuilder &b, Operation *forward, Value gates) {
  constexpr unsigned kMaxChainOps = 16;
  Operation *root = gates.getDefiningOp();
  // The copies read the chain's leaves where the adjoint is built: the
  // forward's block, after them.
  if (!root || !isRecomputable(root) ||
      root->getBlock() != forward->getBlock() ||
      b.getInsertionBlock() != forward->getBlock())
    return gates;
  // The chain, found without recursion: ops of the forward's block whose
  // results are at least as large as the gates; smaller operands are leaves.
  double gateBytes = bytesOf(gates);
  llvm::SetVector<Operation *> chain;
  SmallVector<Operation *> worklist = {root};
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!chain.insert(op))
      continue;
    if (chain.size() > kMaxChainOps)
      return gates;
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && isRecomputable(def) && def->getBlock() == root->getBlock() &&
          bytesOf(operand) >= gateBytes)
        worklist.push_back(def);
      else if (bytesOf(operand) >= gateBytes)
        return gates;
    }
  }
  SmallVector<Operation *> ordered(chain.begin(), chain.end());
  llvm::sort(ordered,
             [](Operation *x, Operation *y) { return x->isBeforeInBlock(y); });
  IRMapping mapping;
  for (Operation *op : ordered) {
    Operation *copy = b.clone(*op, mapping);
    copy->setAttr(kRecomputedAttrName, b.getUnitAttr());
  }
  return mapping.lookup(gates);
}

/// The given adjoint, or zeros of `like`'s type where the result does not
/// reach the loss.
Value orZeros(OpBuilder &b, Location loc, Value grad, Value like) {
  return grad ? grad : splat(b, loc, typeOf(like), 0.0);
}

} // namespace

LogicalResult LstmOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (resultGrads.size() > 2 && resultGrads[2])
    return emitOpError("the saved gates of weft.lstm are an internal result "
                       "for its gradient and carry no adjoint of their own");
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  auto grads = LstmGradOp::create(
      b, loc, orZeros(b, loc, resultGrads[0], getHidden()),
      orZeros(b, loc, resultGrads[1], getCell()), getRecurrence(), getH0(),
      getC0(), getHidden(), getCell(),
      getRecompute() ? recomputedInputGates(b, *this, getInputGates())
                     : getGates(),
      getReverse(), getRecompute());
  Value prev = previousHidden(b, loc, getHidden(), getH0(), getReverse());
  operandGrads.push_back(grads.getInputGatesGrad());
  operandGrads.push_back(
      recurrenceGrad(b, loc, grads.getInputGatesGrad(), prev));
  operandGrads.push_back(grads.getH0Grad());
  operandGrads.push_back(grads.getC0Grad());
  return success();
}

LogicalResult GruOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (resultGrads.size() > 1 && resultGrads[1])
    return emitOpError("the saved gates of weft.gru are an internal result "
                       "for its gradient and carry no adjoint of their own");
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  bool recompute = getRecompute();
  auto grads = GruGradOp::create(
      b, loc, resultGrads[0], getRecurrence(), getH0(), getHidden(),
      recompute ? recomputedInputGates(b, *this, getInputGates()) : getGates(),
      recompute ? getRecurrenceBias() : Value(), getReverse(), recompute);
  Value prev = previousHidden(b, loc, getHidden(), getH0(), getReverse());
  Value dp = grads.getRecurrentGrad();
  operandGrads.push_back(grads.getInputGatesGrad());
  operandGrads.push_back(recurrenceGrad(b, loc, dp, prev));
  operandGrads.push_back(ReduceSumOp::create(b, loc, dp, {0, 1}));
  operandGrads.push_back(grads.getH0Grad());
  return success();
}
