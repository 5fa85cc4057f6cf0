//===- Recurrent.cpp - Lowering lstm, gru and their adjoints --------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Each recurrence becomes one scf.for over time on tensors, whatever T. The
// loop carries only tensors it updates in place: `[T + 1, B, H]` state
// histories (the initial state in one row, a step reads its state from one
// row and writes the next) and the `[T, ...]` results, which each step
// fills with tensor.insert_slice; the gates' generic writes straight into
// slices of them. A step is a zero-filled linalg.matmul of the state by
// the recurrence, which --weft-linalg-to-blas turns into a GEMM call inside
// the loop, and one multi-output linalg.generic for the gates. The input
// projection is not here: the legalizer makes it one matmul over all steps
// before the loop.
//
// The adjoints run the same loop from the other end, carrying adjoint
// histories the same way. The states before each step (h_{t-1}, c_{t-1})
// are built once before the loop as the stored states shifted by one step
// with the initial state at the start, so the body only slices.
//
// With `recompute` the forward loop stores no gates, and the adjoint's loop
// recomputes a step's gates before using them: the same zero-filled GEMM of
// the stored previous hidden state by recurrence^T as the forward step, and
// the same scalar arithmetic inside the adjoint's generic, so the gates
// match the stored ones bit for bit in f32. The adjoint's loop carries the
// input gates as the tensor it writes the input-gate adjoints into (each
// step reads its row before overwriting it), so where the input gates die
// there, bufferization reuses their buffer.
//
// A recomputing adjoint's input gates are usually the forward's input
// projection built again right before it by the gradient rule. Those ops
// equal the forward's, so the CSE that runs on the lowered step (weftc's
// code generation) would merge them back, or merge their fresh
// destinations, which bufferization then makes one buffer: either way the
// forward's gates would stay allocated until the adjoint. So the
// destinations of their lowering become bufferization.alloc_tensor, which
// CSE never merges (it declares no memory effects) and which one-shot
// bufferization makes an allocation, as it does a tensor.empty; and an
// elementwise generic there (the bias add) writes into its same-shaped
// input (the projection's product) instead of a destination of its own,
// since elementwise fusion swaps a destination its body does not read for
// a tensor.empty, which CSE would merge. The arithmetic is the forward's.
//
// bf16/f16 compute in f32 inside the generics and the matmul accumulates
// in f32, as everywhere in this lowering; the states carried between steps
// are rounded to the element type, as the stored results are.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

using namespace mlir;
using namespace weft;
using namespace weft::lowering;

namespace {

/// Builds the body of one time loop: slices at a dynamic step index and
/// the scalar arithmetic of the gates, all in the op's compute type.
struct StepBuilder {
  OpBuilder &b;
  Location loc;
  Type elementType, acc;
  int64_t batch, hidden;

  /// `v[t, :, col : col + cols]` as a [B, cols] tensor.
  Value step(Value v, Value t, int64_t col, int64_t cols) {
    SmallVector<OpFoldResult> offsets = {t, b.getIndexAttr(0),
                                         b.getIndexAttr(col)};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(batch),
                                       b.getIndexAttr(cols)};
    SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
    auto type = RankedTensorType::get(
        {batch, cols}, cast<RankedTensorType>(v.getType()).getElementType());
    return tensor::ExtractSliceOp::create(b, loc, type, v, offsets, sizes,
                                          strides);
  }
  /// Gate block `g` (H columns) of step `t`.
  Value gate(Value v, Value t, int64_t g) {
    return step(v, t, g * hidden, hidden);
  }
  /// Columns `[col, col + cols)` of a [B, N] tensor.
  Value columns(Value v, int64_t col, int64_t cols) {
    SmallVector<OpFoldResult> offsets = {b.getIndexAttr(0),
                                         b.getIndexAttr(col)};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(batch),
                                       b.getIndexAttr(cols)};
    SmallVector<OpFoldResult> strides(2, b.getIndexAttr(1));
    auto type = RankedTensorType::get(
        {batch, cols}, cast<RankedTensorType>(v.getType()).getElementType());
    return tensor::ExtractSliceOp::create(b, loc, type, v, offsets, sizes,
                                          strides);
  }
  /// `dest[t, :, col : col + H] = v` for a [B, H] value.
  Value insert(Value v, Value dest, Value t, int64_t col) {
    int64_t cols = cast<RankedTensorType>(v.getType()).getDimSize(1);
    SmallVector<OpFoldResult> offsets = {t, b.getIndexAttr(0),
                                         b.getIndexAttr(col)};
    SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(batch),
                                       b.getIndexAttr(cols)};
    SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
    return tensor::InsertSliceOp::create(b, loc, v, dest, offsets, sizes,
                                         strides);
  }
  /// `lhs @ rhs` of 2-D tensors into a fresh zero-filled accumulator, the
  /// form --weft-linalg-to-blas turns into a GEMM call.
  Value matmul(Value lhs, Value rhs) {
    int64_t m = cast<RankedTensorType>(lhs.getType()).getDimSize(0);
    int64_t n = cast<RankedTensorType>(rhs.getType()).getDimSize(1);
    Value init = filledTensor(b, loc, {m, n}, acc, 0.0);
    return linalg::MatmulOp::create(b, loc, TypeRange{init.getType()},
                                    ValueRange{lhs, rhs}, ValueRange{init})
        .getResult(0);
  }
  /// A [B, H]-shaped all-parallel generic writing into `outputs` (slices of
  /// the tensors the loop carries, so the results land in place); `body`
  /// gets compute-type inputs and returns compute-type outputs, rounded
  /// here.
  SmallVector<Value> pointwise(
      ValueRange inputs, ValueRange outputs,
      function_ref<SmallVector<Value>(OpBuilder &, Location, ArrayRef<Value>)>
          body) {
    MLIRContext *ctx = b.getContext();
    AffineMap id = AffineMap::getMultiDimIdentityMap(2, ctx);
    AffineMap row = AffineMap::get(2, 0, {getAffineDimExpr(1, ctx)}, ctx);
    SmallVector<AffineMap> maps;
    for (Value v : inputs)
      maps.push_back(cast<RankedTensorType>(v.getType()).getRank() == 1 ? row
                                                                        : id);
    SmallVector<Type> types;
    for (Value v : outputs) {
      types.push_back(v.getType());
      maps.push_back(id);
    }
    SmallVector<utils::IteratorType> parallel(2, utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        b, loc, types, inputs, outputs, maps, parallel,
        [&](OpBuilder &nb, Location nl, ValueRange args) {
          SmallVector<Value> in;
          for (Value v : args.take_front(inputs.size()))
            in.push_back(toCompute(nb, nl, v));
          SmallVector<Value> results;
          for (Value v : body(nb, nl, in))
            results.push_back(fromCompute(nb, nl, v, elementType));
          linalg::YieldOp::create(nb, nl, results);
        });
    return SmallVector<Value>(generic.getResults());
  }
};

/// Scalar arithmetic in the compute type.
struct Scalars {
  OpBuilder &b;
  Location loc;
  Type type;
  Value one() { return scalarConstant(b, loc, type, 1.0); }
  Value add(Value x, Value y) { return arith::AddFOp::create(b, loc, x, y); }
  Value sub(Value x, Value y) { return arith::SubFOp::create(b, loc, x, y); }
  Value mul(Value x, Value y) { return arith::MulFOp::create(b, loc, x, y); }
  Value tanh(Value x) { return math::TanhOp::create(b, loc, x); }
  Value sigmoid(Value x) {
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::DivFOp::create(b, loc, one(), add(one(), e));
  }
  /// y (1 - y): the derivative of a sigmoid whose value is y.
  Value dsigmoid(Value y) { return mul(y, sub(one(), y)); }
  /// 1 - y^2: the derivative of a tanh whose value is y.
  Value dtanh(Value y) { return sub(one(), mul(y, y)); }
};

/// The time index of loop iteration `s`: `s`, or `T - 1 - s` when the loop
/// runs from the end.
Value timeIndex(OpBuilder &b, Location loc, Value s, int64_t t, bool fromEnd) {
  if (!fromEnd)
    return s;
  return arith::SubIOp::create(b, loc, indexConstant(b, loc, t - 1), s);
}

Value plusOne(OpBuilder &b, Location loc, Value i) {
  return arith::AddIOp::create(b, loc, i, indexConstant(b, loc, 1));
}

/// `count` steps of a `[steps, B, N]` tensor from step `first`.
Value steps(OpBuilder &b, Location loc, Value v, int64_t first, int64_t count) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<OpFoldResult> offsets = {b.getIndexAttr(first), b.getIndexAttr(0),
                                       b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(count),
                                     b.getIndexAttr(type.getDimSize(1)),
                                     b.getIndexAttr(type.getDimSize(2))};
  SmallVector<OpFoldResult> unit(3, b.getIndexAttr(1));
  return tensor::ExtractSliceOp::create(
      b, loc,
      RankedTensorType::get({count, type.getDimSize(1), type.getDimSize(2)},
                            type.getElementType()),
      v, offsets, sizes, unit);
}

/// A `[T + 1, B, H]` state history holding `initial` at row `row`. The
/// loops carry only such tensors, each step reading its state from one row
/// and writing the next state into the neighbouring one: every value the
/// loop yields is then its iteration argument updated in place, as one-shot
/// bufferization requires of scf.for, and the rows other than `row` are
/// the per-step states the op returns.
Value stateHistory(OpBuilder &b, Location loc, Value initial, int64_t t,
                   int64_t row) {
  auto type = cast<RankedTensorType>(initial.getType());
  int64_t batch = type.getDimSize(0), h = type.getDimSize(1);
  Value history = emptyTensor(b, loc, {t + 1, batch, h}, type.getElementType());
  SmallVector<OpFoldResult> offsets = {b.getIndexAttr(row), b.getIndexAttr(0),
                                       b.getIndexAttr(0)};
  SmallVector<OpFoldResult> sizes = {b.getIndexAttr(1), b.getIndexAttr(batch),
                                     b.getIndexAttr(h)};
  SmallVector<OpFoldResult> unit(3, b.getIndexAttr(1));
  return tensor::InsertSliceOp::create(b, loc, initial, history, offsets, sizes,
                                       unit);
}

/// `[T, B, H]` states before each step: `initial` ([B, H]) at the first
/// step of the direction, the stored `states` shifted by one elsewhere.
Value previousStates(OpBuilder &b, Location loc, Value states, Value initial,
                     bool reverse) {
  auto type = cast<RankedTensorType>(states.getType());
  int64_t t = type.getDimSize(0), batch = type.getDimSize(1),
          h = type.getDimSize(2);
  Value result = emptyTensor(b, loc, type.getShape(), type.getElementType());
  SmallVector<OpFoldResult> unit(3, b.getIndexAttr(1));
  auto at = [&](int64_t step) {
    return SmallVector<OpFoldResult>{b.getIndexAttr(step), b.getIndexAttr(0),
                                     b.getIndexAttr(0)};
  };
  auto sizes = [&](int64_t count) {
    return SmallVector<OpFoldResult>{b.getIndexAttr(count),
                                     b.getIndexAttr(batch), b.getIndexAttr(h)};
  };
  result = tensor::InsertSliceOp::create(
      b, loc, initial, result, at(reverse ? t - 1 : 0), sizes(1), unit);
  if (t == 1)
    return result;
  Value shifted = steps(b, loc, states, reverse ? 1 : 0, t - 1);
  return tensor::InsertSliceOp::create(b, loc, shifted, result,
                                       at(reverse ? 0 : 1), sizes(t - 1), unit);
}

/// `recurrence^T`, [H, gates*H], transposed once before the loop so each
/// step's `h @ recurrence^T` is a plain GEMM.
Value transposed(OpBuilder &b, Location loc, Value r) {
  auto type = cast<RankedTensorType>(r.getType());
  Value init = emptyTensor(b, loc, {type.getDimSize(1), type.getDimSize(0)},
                           type.getElementType());
  return linalg::TransposeOp::create(b, loc, r, init, ArrayRef<int64_t>{1, 0})
      .getResult()[0];
}

/// The three [H] blocks of a GRU's `[3H]` recurrent bias.
SmallVector<Value> biasBlocks(OpBuilder &b, Location loc, Value bias,
                              int64_t h) {
  SmallVector<Value> blocks;
  for (int64_t g = 0; g < 3; ++g)
    blocks.push_back(tensor::ExtractSliceOp::create(
        b, loc, bias, ArrayRef<OpFoldResult>{b.getIndexAttr(g * h)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(h)},
        ArrayRef<OpFoldResult>{b.getIndexAttr(1)}));
  return blocks;
}

/// An scf.for over `t` steps carrying `inits`; `body(s, iterArgs)` returns
/// the values to yield.
scf::ForOp timeLoop(
    OpBuilder &b, Location loc, int64_t t, ValueRange inits,
    function_ref<SmallVector<Value>(OpBuilder &, Location, Value, ValueRange)>
        body) {
  return scf::ForOp::create(
      b, loc, indexConstant(b, loc, 0), indexConstant(b, loc, t),
      indexConstant(b, loc, 1), inits,
      [&](OpBuilder &nb, Location nl, Value s, ValueRange args) {
        scf::YieldOp::create(nb, nl, body(nb, nl, s, args));
      });
}

struct Shape {
  int64_t t, batch, hidden;
  Type elementType;
  static Shape of(Value hiddenLike) {
    auto type = cast<RankedTensorType>(hiddenLike.getType());
    return {type.getDimSize(0), type.getDimSize(1), type.getDimSize(2),
            type.getElementType()};
  }
  StepBuilder steps(OpBuilder &b, Location loc) const {
    return {b, loc, elementType, computeType(elementType), batch, hidden};
  }
};

/// Rows of a state history a step reads and writes. Forward, step t reads
/// row t and writes row t + 1 (row 0 holds the initial state); reversed,
/// it reads row t + 1 and writes row t (row T holds it).
struct Rows {
  Value read, write;
  static Rows at(OpBuilder &b, Location loc, Value t, bool reverse) {
    Value next = plusOne(b, loc, t);
    return reverse ? Rows{next, t} : Rows{t, next};
  }
};

/// Whether `value` is a linalg op's result that only one op reads, maybe
/// through reshapes each read once: a tensor an elementwise op may overwrite.
bool isFreshSingleUse(Value value) {
  while (value.hasOneUse()) {
    Operation *def = value.getDefiningOp();
    if (isa_and_nonnull<linalg::LinalgOp>(def))
      return true;
    if (!isa_and_nonnull<tensor::ExpandShapeOp, tensor::CollapseShapeOp>(def))
      return false;
    value = def->getOperand(0);
  }
  return false;
}

/// `generic`, an elementwise op with one result that does not read its
/// destination, again with the destination replaced by one of its inputs of
/// the same type and indexing that nothing else reads (the input gates'
/// bias add writes into the projection's product). The body reads that
/// input through the destination's argument: the same arithmetic, written
/// in place, one gates-sized tensor fewer.
Operation *writeIntoInput(ConversionPatternRewriter &rewriter,
                          linalg::GenericOp generic) {
  if (generic.getNumDpsInits() != 1 || generic.getNumResults() != 1 ||
      generic.getNumParallelLoops() != generic.getNumLoops())
    return nullptr;
  OpOperand *init = generic.getDpsInitOperand(0);
  Block *body = generic.getBody();
  if (!generic.getMatchingBlockArgument(init).use_empty())
    return nullptr;
  AffineMap initMap = generic.getMatchingIndexingMap(init);
  OpOperand *tied = nullptr;
  for (OpOperand *input : generic.getDpsInputOperands()) {
    if (input->get().getType() == init->get().getType() &&
        isFreshSingleUse(input->get()) &&
        generic.getMatchingIndexingMap(input) == initMap) {
      tied = input;
      break;
    }
  }
  if (!tied)
    return nullptr;
  SmallVector<Value> inputs;
  SmallVector<AffineMap> maps;
  for (OpOperand *input : generic.getDpsInputOperands())
    if (input != tied) {
      inputs.push_back(input->get());
      maps.push_back(generic.getMatchingIndexingMap(input));
    }
  maps.push_back(initMap);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(generic);
  auto inPlace = linalg::GenericOp::create(
      rewriter, generic.getLoc(), generic.getResultTypes(), inputs,
      ValueRange{tied->get()}, maps, generic.getIteratorTypesArray(),
      [&](OpBuilder &b, Location loc, ValueRange args) {
        IRMapping mapping;
        unsigned next = 0;
        for (OpOperand *input : generic.getDpsInputOperands())
          mapping.map(generic.getMatchingBlockArgument(input),
                      input == tied ? args.back() : args[next++]);
        for (Operation &op : body->without_terminator())
          b.clone(op, mapping);
        SmallVector<Value> yielded;
        for (Value v : body->getTerminator()->getOperands())
          yielded.push_back(mapping.lookupOrDefault(v));
        linalg::YieldOp::create(b, loc, yielded);
      });
  rewriter.replaceOp(generic, inPlace->getResults());
  return inPlace;
}

/// Gives the ops computing `gates` after the `forward` op (the input
/// projection the gradient rule rebuilt for a recomputing adjoint, now
/// lowered) destinations of their own: each tensor.empty among them becomes
/// a bufferization.alloc_tensor, so CSE cannot merge them with the forward's
/// projection. Ops before `forward` (the forward's projection, the leaves'
/// producers) are left alone. Returns the gates as now computed.
Value keepRecomputedApart(ConversionPatternRewriter &rewriter, Value gates,
                          Operation *forward) {
  Operation *root = gates.getDefiningOp();
  if (!forward || !root || root->getBlock() != forward->getBlock() ||
      !forward->isBeforeInBlock(root))
    return gates;
  Block *block = forward->getBlock();
  // The lowered recomputation: walked without recursion, ops of the block
  // after the forward op, and what their regions use from above.
  llvm::SetVector<Operation *> seen;
  SmallVector<tensor::EmptyOp> empties;
  SmallVector<Operation *> worklist = {root};
  auto push = [&](Value v) {
    Operation *def = v.getDefiningOp();
    if (def && def->getBlock() == block && forward->isBeforeInBlock(def))
      worklist.push_back(def);
  };
  while (!worklist.empty()) {
    Operation *op = worklist.pop_back_val();
    if (!seen.insert(op))
      continue;
    if (auto empty = dyn_cast<tensor::EmptyOp>(op))
      empties.push_back(empty);
    for (Value operand : op->getOperands())
      push(operand);
    op->walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (!op->isProperAncestor(operand.getParentBlock()->getParentOp()))
          push(operand);
    });
  }
  llvm::SmallPtrSet<Operation *, 4> rewritten;
  for (Operation *op : seen) {
    auto generic = dyn_cast<linalg::GenericOp>(op);
    Operation *inPlace = generic ? writeIntoInput(rewriter, generic) : nullptr;
    if (!inPlace)
      continue;
    rewritten.insert(op);
    if (op == root)
      gates = inPlace->getResult(0);
  }
  for (tensor::EmptyOp empty : empties) {
    // Only read by replaced generics: dead once the conversion ends.
    if (llvm::all_of(empty->getUsers(),
                     [&](Operation *user) { return rewritten.contains(user); }))
      continue;
    OpBuilder::InsertionGuard guard(rewriter);
    rewriter.setInsertionPoint(empty);
    rewriter.replaceOpWithNewOp<bufferization::AllocTensorOp>(
        empty, empty.getType(), empty.getDynamicSizes());
  }
  return gates;
}

/// The input gates, with their bias add rewritten to write into the
/// projection's product when it can (writeIntoInput).
Value gatesWrittenInPlace(ConversionPatternRewriter &rewriter, Value gates) {
  if (auto biasAdd = gates.getDefiningOp<linalg::GenericOp>())
    if (Operation *inPlace = writeIntoInput(rewriter, biasAdd))
      return inPlace->getResult(0);
  return gates;
}

struct LstmLowering : OpConversionPattern<LstmOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LstmOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Shape s = Shape::of(op.getHidden());
    int64_t h = s.hidden;
    bool reverse = op.getReverse();
    Value rt = transposed(rewriter, loc, adaptor.getRecurrence());
    Value x = gatesWrittenInPlace(rewriter, adaptor.getInputGates());
    bool recompute = op.getRecompute();
    int64_t initialRow = reverse ? s.t : 0;
    SmallVector<Value> inits = {
        stateHistory(rewriter, loc, adaptor.getH0(), s.t, initialRow),
        stateHistory(rewriter, loc, adaptor.getC0(), s.t, initialRow)};
    if (!recompute)
      inits.push_back(
          emptyTensor(rewriter, loc, {s.t, s.batch, 4 * h}, s.elementType));
    scf::ForOp loop =
        timeLoop(rewriter, loc, s.t, inits,
                 [&](OpBuilder &b, Location l, Value iv,
                     ValueRange args) -> SmallVector<Value> {
                   StepBuilder st = s.steps(b, l);
                   Value t = timeIndex(b, l, iv, s.t, reverse);
                   Rows rows = Rows::at(b, l, t, reverse);
                   Value a = st.matmul(st.gate(args[0], rows.read, 0), rt);
                   SmallVector<Value> in;
                   for (int64_t g = 0; g < 4; ++g)
                     in.push_back(st.gate(x, t, g));
                   for (int64_t g = 0; g < 4; ++g)
                     in.push_back(st.columns(a, g * h, h));
                   in.push_back(st.gate(args[1], rows.read, 0));
                   SmallVector<Value> outs = {st.gate(args[0], rows.write, 0),
                                              st.gate(args[1], rows.write, 0)};
                   for (int64_t g = 0; !recompute && g < 4; ++g)
                     outs.push_back(st.gate(args[2], t, g));
                   // ONNX gate order: i, o, f, c.
                   SmallVector<Value> out = st.pointwise(
                       in, outs,
                       [&](OpBuilder &nb, Location nl,
                           ArrayRef<Value> v) -> SmallVector<Value> {
                         Scalars m{nb, nl, v[0].getType()};
                         Value i = m.sigmoid(m.add(v[0], v[4]));
                         Value o = m.sigmoid(m.add(v[1], v[5]));
                         Value f = m.sigmoid(m.add(v[2], v[6]));
                         Value g = m.tanh(m.add(v[3], v[7]));
                         Value c = m.add(m.mul(f, v[8]), m.mul(i, g));
                         Value hNew = m.mul(o, m.tanh(c));
                         if (recompute)
                           return {hNew, c};
                         return {hNew, c, i, o, f, g};
                       });
                   SmallVector<Value> yield = {
                       st.insert(out[0], args[0], rows.write, 0),
                       st.insert(out[1], args[1], rows.write, 0)};
                   if (recompute)
                     return yield;
                   Value gates = args[2];
                   for (int64_t g = 0; g < 4; ++g)
                     gates = st.insert(out[2 + g], gates, t, g * h);
                   yield.push_back(gates);
                   return yield;
                 });
    int64_t first = reverse ? 0 : 1;
    SmallVector<Value> results = {
        steps(rewriter, loc, loop.getResult(0), first, s.t),
        steps(rewriter, loc, loop.getResult(1), first, s.t)};
    if (!recompute)
      results.push_back(loop.getResult(2));
    rewriter.replaceOp(op, results);
    return success();
  }
};

/// The adjoint of the state before the whole sequence: the row of an
/// adjoint history the loop wrote last.
Value firstState(OpBuilder &b, Location loc, Value history, bool reverse) {
  int64_t t = cast<RankedTensorType>(history.getType()).getDimSize(0) - 1;
  auto type = cast<RankedTensorType>(history.getType());
  Value row = steps(b, loc, history, reverse ? t : 0, 1);
  return reshapeTo(b, loc, row, {type.getDimSize(1), type.getDimSize(2)});
}

struct LstmGradLowering : OpConversionPattern<LstmGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LstmGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Shape s = Shape::of(op.getHidden());
    int64_t h = s.hidden;
    bool reverse = op.getReverse();
    bool recompute = op.getRecompute();
    Value r = adaptor.getRecurrence();
    Value cell = adaptor.getCell(), gates = adaptor.getGates();
    Value dy = adaptor.getHiddenGrad(), dcell = adaptor.getCellGrad();
    if (recompute)
      gates =
          keepRecomputedApart(rewriter, gates, op.getHidden().getDefiningOp());
    Value cPrev = previousStates(rewriter, loc, cell, adaptor.getC0(), reverse);
    // Recomputing: recurrence^T and h_{t-1} as the forward loop used them.
    Value rt, hPrev;
    if (recompute) {
      rt = transposed(rewriter, loc, r);
      hPrev = previousStates(rewriter, loc, adaptor.getHidden(),
                             adaptor.getH0(), reverse);
    }
    // Adjoint histories run the other way: the adjoint reaching step t is
    // in the row the forward step wrote, the one it passes back in the row
    // the forward step read.
    Value zeros = filledTensor(rewriter, loc, {s.batch, h}, s.elementType, 0.0);
    int64_t lastRow = reverse ? 0 : s.t;
    SmallVector<Value> inits = {
        stateHistory(rewriter, loc, zeros, s.t, lastRow),
        stateHistory(rewriter, loc, zeros, s.t, lastRow),
        recompute
            ? gates
            : emptyTensor(rewriter, loc, {s.t, s.batch, 4 * h}, s.elementType)};
    scf::ForOp loop = timeLoop(
        rewriter, loc, s.t, inits,
        [&](OpBuilder &b, Location l, Value iv,
            ValueRange args) -> SmallVector<Value> {
          StepBuilder st = s.steps(b, l);
          // The forward loop's last step is this loop's first.
          Value t = timeIndex(b, l, iv, s.t, !reverse);
          Rows rows = Rows::at(b, l, t, reverse);
          SmallVector<Value> in = {st.gate(dy, t, 0), st.gate(dcell, t, 0),
                                   st.gate(args[0], rows.write, 0),
                                   st.gate(args[1], rows.write, 0)};
          // Recomputing, the input gates are read from the tensor the loop
          // overwrites with their adjoints, before this step writes its row.
          for (int64_t g = 0; g < 4; ++g)
            in.push_back(st.gate(recompute ? args[2] : gates, t, g));
          in.push_back(st.gate(cell, t, 0));
          in.push_back(st.gate(cPrev, t, 0));
          if (recompute) {
            Value a = st.matmul(st.gate(hPrev, t, 0), rt);
            for (int64_t g = 0; g < 4; ++g)
              in.push_back(st.columns(a, g * h, h));
          }
          SmallVector<Value> outs;
          for (int64_t g = 0; g < 4; ++g)
            outs.push_back(st.gate(args[2], t, g));
          outs.push_back(st.gate(args[1], rows.read, 0));
          SmallVector<Value> out = st.pointwise(
              in, outs,
              [&](OpBuilder &nb, Location nl,
                  ArrayRef<Value> v) -> SmallVector<Value> {
                Scalars m{nb, nl, v[0].getType()};
                Value i = v[4], o = v[5], f = v[6], g = v[7];
                if (recompute) {
                  // As the forward step: v[4..7] are the input gates.
                  i = m.sigmoid(m.add(v[4], v[10]));
                  o = m.sigmoid(m.add(v[5], v[11]));
                  f = m.sigmoid(m.add(v[6], v[12]));
                  g = m.tanh(m.add(v[7], v[13]));
                }
                Value tc = m.tanh(v[8]);
                Value dh = m.add(v[0], v[2]);
                Value dc =
                    m.add(m.add(v[3], v[1]), m.mul(m.mul(dh, o), m.dtanh(tc)));
                return {m.mul(m.mul(dc, g), m.dsigmoid(i)),
                        m.mul(m.mul(dh, tc), m.dsigmoid(o)),
                        m.mul(m.mul(dc, v[9]), m.dsigmoid(f)),
                        m.mul(m.mul(dc, i), m.dtanh(g)), m.mul(dc, f)};
              });
          Value dGates = args[2];
          for (int64_t g = 0; g < 4; ++g)
            dGates = st.insert(out[g], dGates, t, g * h);
          Value dh = roundTensor(
              b, l, st.matmul(st.step(dGates, t, 0, 4 * h), r), s.elementType);
          return {st.insert(dh, args[0], rows.read, 0),
                  st.insert(out[4], args[1], rows.read, 0), dGates};
        });
    rewriter.replaceOp(op,
                       {loop.getResult(2),
                        firstState(rewriter, loc, loop.getResult(0), reverse),
                        firstState(rewriter, loc, loop.getResult(1), reverse)});
    return success();
  }
};

struct GruLowering : OpConversionPattern<GruOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GruOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Shape s = Shape::of(op.getHidden());
    int64_t h = s.hidden;
    bool reverse = op.getReverse();
    Value rt = transposed(rewriter, loc, adaptor.getRecurrence());
    bool recompute = op.getRecompute();
    Value x = gatesWrittenInPlace(rewriter, adaptor.getInputGates());
    SmallVector<Value> biases =
        biasBlocks(rewriter, loc, adaptor.getRecurrenceBias(), h);
    SmallVector<Value> inits = {
        stateHistory(rewriter, loc, adaptor.getH0(), s.t, reverse ? s.t : 0)};
    if (!recompute)
      inits.push_back(
          emptyTensor(rewriter, loc, {s.t, s.batch, 4 * h}, s.elementType));
    scf::ForOp loop =
        timeLoop(rewriter, loc, s.t, inits,
                 [&](OpBuilder &b, Location l, Value iv,
                     ValueRange args) -> SmallVector<Value> {
                   StepBuilder st = s.steps(b, l);
                   Value t = timeIndex(b, l, iv, s.t, reverse);
                   Rows rows = Rows::at(b, l, t, reverse);
                   Value hPrev = st.gate(args[0], rows.read, 0);
                   Value p = st.matmul(hPrev, rt);
                   SmallVector<Value> in;
                   for (int64_t g = 0; g < 3; ++g)
                     in.push_back(st.gate(x, t, g));
                   for (int64_t g = 0; g < 3; ++g)
                     in.push_back(st.columns(p, g * h, h));
                   in.append(biases.begin(), biases.end());
                   in.push_back(hPrev);
                   SmallVector<Value> outs = {st.gate(args[0], rows.write, 0)};
                   for (int64_t g = 0; !recompute && g < 4; ++g)
                     outs.push_back(st.gate(args[1], t, g));
                   // ONNX gate order: z, r, n (h in ONNX's names).
                   SmallVector<Value> out = st.pointwise(
                       in, outs,
                       [&](OpBuilder &nb, Location nl,
                           ArrayRef<Value> v) -> SmallVector<Value> {
                         Scalars m{nb, nl, v[0].getType()};
                         Value z = m.sigmoid(m.add(v[0], m.add(v[3], v[6])));
                         Value r = m.sigmoid(m.add(v[1], m.add(v[4], v[7])));
                         Value pn = m.add(v[5], v[8]);
                         Value n = m.tanh(m.add(v[2], m.mul(r, pn)));
                         Value hNew =
                             m.add(m.mul(m.sub(m.one(), z), n), m.mul(z, v[9]));
                         if (recompute)
                           return {hNew};
                         return {hNew, z, r, n, pn};
                       });
                   Value hs = st.insert(out[0], args[0], rows.write, 0);
                   if (recompute)
                     return {hs};
                   Value gates = args[1];
                   for (int64_t g = 0; g < 4; ++g)
                     gates = st.insert(out[1 + g], gates, t, g * h);
                   return {hs, gates};
                 });
    SmallVector<Value> results = {
        steps(rewriter, loc, loop.getResult(0), reverse ? 0 : 1, s.t)};
    if (!recompute)
      results.push_back(loop.getResult(1));
    rewriter.replaceOp(op, results);
    return success();
  }
};

struct GruGradLowering : OpConversionPattern<GruGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GruGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Shape s = Shape::of(op.getHidden());
    int64_t h = s.hidden;
    bool reverse = op.getReverse();
    bool recompute = op.getRecompute();
    Value r = adaptor.getRecurrence(), gates = adaptor.getGates();
    Value dy = adaptor.getHiddenGrad();
    if (recompute)
      gates =
          keepRecomputedApart(rewriter, gates, op.getHidden().getDefiningOp());
    Value hPrev = previousStates(rewriter, loc, adaptor.getHidden(),
                                 adaptor.getH0(), reverse);
    // Recomputing: recurrence^T and the bias blocks as the forward loop
    // used them; `gates` holds the input gates.
    Value rt;
    SmallVector<Value> biases;
    if (recompute) {
      rt = transposed(rewriter, loc, r);
      biases = biasBlocks(rewriter, loc, adaptor.getRecurrenceBias(), h);
    }
    Value zeros = filledTensor(rewriter, loc, {s.batch, h}, s.elementType, 0.0);
    SmallVector<Value> inits = {
        stateHistory(rewriter, loc, zeros, s.t, reverse ? 0 : s.t),
        recompute
            ? gates
            : emptyTensor(rewriter, loc, {s.t, s.batch, 3 * h}, s.elementType),
        emptyTensor(rewriter, loc, {s.t, s.batch, 3 * h}, s.elementType)};
    scf::ForOp loop = timeLoop(
        rewriter, loc, s.t, inits,
        [&](OpBuilder &b, Location l, Value iv,
            ValueRange args) -> SmallVector<Value> {
          StepBuilder st = s.steps(b, l);
          Value t = timeIndex(b, l, iv, s.t, !reverse);
          Rows rows = Rows::at(b, l, t, reverse);
          Value hBefore = st.gate(hPrev, t, 0);
          SmallVector<Value> in = {st.gate(dy, t, 0),
                                   st.gate(args[0], rows.write, 0), hBefore};
          if (recompute) {
            // The input gates, read from the tensor the loop overwrites
            // with their adjoints before this step writes its row.
            Value p = st.matmul(hBefore, rt);
            for (int64_t g = 0; g < 3; ++g)
              in.push_back(st.gate(args[1], t, g));
            for (int64_t g = 0; g < 3; ++g)
              in.push_back(st.columns(p, g * h, h));
            in.append(biases.begin(), biases.end());
          } else {
            for (int64_t g = 0; g < 4; ++g)
              in.push_back(st.gate(gates, t, g));
          }
          SmallVector<Value> outs;
          for (int64_t g = 0; g < 3; ++g)
            outs.push_back(st.gate(args[1], t, g));
          outs.push_back(st.gate(args[2], t, 2));
          outs.push_back(emptyTensor(b, l, {s.batch, h}, s.elementType));
          SmallVector<Value> out = st.pointwise(
              in, outs,
              [&](OpBuilder &nb, Location nl,
                  ArrayRef<Value> v) -> SmallVector<Value> {
                Scalars m{nb, nl, v[0].getType()};
                Value z, rg, n, pn;
                if (recompute) {
                  // As the forward step: x at v[3..5], p at v[6..8], the
                  // bias at v[9..11].
                  z = m.sigmoid(m.add(v[3], m.add(v[6], v[9])));
                  rg = m.sigmoid(m.add(v[4], m.add(v[7], v[10])));
                  pn = m.add(v[8], v[11]);
                  n = m.tanh(m.add(v[5], m.mul(rg, pn)));
                } else {
                  z = v[3];
                  rg = v[4];
                  n = v[5];
                  pn = v[6];
                }
                Value dh = m.add(v[0], v[1]);
                Value dan = m.mul(m.mul(dh, m.sub(m.one(), z)), m.dtanh(n));
                Value daz = m.mul(m.mul(dh, m.sub(v[2], n)), m.dsigmoid(z));
                Value dar = m.mul(m.mul(dan, pn), m.dsigmoid(rg));
                return {daz, dar, dan, m.mul(dan, rg), m.mul(dh, z)};
              });
          Value dx = args[1], dp = args[2];
          for (int64_t g = 0; g < 3; ++g) {
            dx = st.insert(out[g], dx, t, g * h);
            dp = st.insert(out[g == 2 ? 3 : g], dp, t, g * h);
          }
          Value back = st.matmul(st.step(dp, t, 0, 3 * h), r);
          // h_{t-1} reaches the loss through z's blend and through p.
          Value dh =
              st.pointwise({out[4], back}, {st.gate(args[0], rows.read, 0)},
                           [&](OpBuilder &nb, Location nl,
                               ArrayRef<Value> v) -> SmallVector<Value> {
                             return {arith::AddFOp::create(nb, nl, v[0], v[1])};
                           })[0];
          return {st.insert(dh, args[0], rows.read, 0), dx, dp};
        });
    rewriter.replaceOp(op,
                       {loop.getResult(1), loop.getResult(2),
                        firstState(rewriter, loc, loop.getResult(0), reverse)});
    return success();
  }
};

} // namespace

void lowering::populateRecurrentPatterns(RewritePatternSet &patterns) {
  patterns.add<LstmLowering, LstmGradLowering, GruLowering, GruGradLowering>(
      patterns.getContext());
}
