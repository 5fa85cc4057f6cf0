//===- SplitStages.cpp - The pieces of work a pipeline schedule runs ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Pipeline/Passes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

#include <set>

namespace weft {
#define GEN_PASS_DEF_SPLITSTAGESPASS
#include "weft/Transforms/Pipeline/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
/// One piece: a stage's forward or backward work, its ops in program
/// order, what it reads from outside and what others read of it.
struct Piece {
  int64_t stage = 0;
  bool forward = true;
  /// "forward", "backward", or with split-backward "input_grad" and
  /// "weight_grad".
  std::string phase = "forward";
  SmallVector<Operation *> ops;
  llvm::SetVector<Value> inputs, outputs;
};

/// Splits each stage's backward piece into the part the gradient sent
/// down to the previous stage needs (input gradient: what the next
/// piece in the pipeline waits for) and the rest (weight gradients), which
/// a zero-bubble schedule defers into the bubbles. The pieces become
/// F0..FN-1, then IN-1, WN-1, .., I0, W0.
void splitIntoInputAndWeightGradients(SmallVector<Piece> &pieces,
                                      llvm::DenseMap<Operation *, size_t> &pieceOf,
                                      int64_t numStages) {
  SmallVector<Piece> split(pieces.begin(), pieces.begin() + numStages);
  for (int64_t s = numStages - 1; s >= 0; --s) {
    Piece &backward = pieces[size_t(2 * numStages - 1 - s)];
    llvm::DenseSet<Operation *> inputGrad;
    SmallVector<Operation *> worklist;
    for (Operation *op : backward.ops)
      for (Value result : op->getResults())
        for (Operation *user : result.getUsers()) {
          auto it = pieceOf.find(user);
          if (it != pieceOf.end() && !pieces[it->second].forward &&
              pieces[it->second].stage < s)
            worklist.push_back(op);
        }
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!inputGrad.insert(op).second)
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && pieceOf.lookup(def) == pieceOf.lookup(op) &&
            pieceOf.count(def))
          worklist.push_back(def);
    }
    Piece input, weight;
    input.stage = weight.stage = s;
    input.forward = weight.forward = false;
    input.phase = "input_grad";
    weight.phase = "weight_grad";
    for (Operation *op : backward.ops)
      (inputGrad.contains(op) ? input : weight).ops.push_back(op);
    split.push_back(std::move(input));
    split.push_back(std::move(weight));
  }
  pieces = std::move(split);
  pieceOf.clear();
  for (auto [i, piece] : llvm::enumerate(pieces))
    for (Operation *op : piece.ops)
      pieceOf[op] = i;
}

struct SplitStagesPass
    : public weft::impl::SplitStagesPassBase<SplitStagesPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto fn = module.lookupSymbol<func::FuncOp>(function);
    if (!fn || fn.isExternal() || !fn.getBody().hasOneBlock()) {
      module.emitError() << "--weft-split-stages: no function @" << function
                         << " with a body of one block to split";
      return signalPassFailure();
    }
    Block &body = fn.front();
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    if (ret.getNumOperands() == 0) {
      fn.emitError("--weft-split-stages: the function returns no loss");
      return signalPassFailure();
    }

    // The forward work: what the loss (result 0) depends on.
    llvm::DenseSet<Operation *> forwardOps;
    SmallVector<Operation *> worklist;
    if (Operation *def = ret.getOperand(0).getDefiningOp())
      worklist.push_back(def);
    while (!worklist.empty()) {
      Operation *op = worklist.pop_back_val();
      if (!forwardOps.insert(op).second)
        continue;
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp())
          worklist.push_back(def);
    }

    int64_t numStages = 1;
    for (Operation &op : body.without_terminator())
      if (auto s = op.getAttrOfType<IntegerAttr>(kStageAttrName))
        numStages = std::max(numStages, s.getInt() + 1);
    // Pieces in the order a one-micro-batch schedule runs them.
    SmallVector<Piece> pieces(size_t(2 * numStages));
    auto indexOf = [&](int64_t stage, bool forward) {
      return size_t(forward ? stage : 2 * numStages - 1 - stage);
    };
    for (int64_t s = 0; s < numStages; ++s) {
      pieces[indexOf(s, true)].stage = s;
      pieces[indexOf(s, false)].stage = s;
      pieces[indexOf(s, false)].forward = false;
    }
    // A tied parameter's gradient sums shares from several stages (GPT-2's
    // head and embedding): its sum stays outside the pieces, so each stage
    // returns its share rather than passing it down stage by stage.
    auto stageOf = [&](Operation *op) {
      auto s = op->getAttrOfType<IntegerAttr>(kStageAttrName);
      return s ? s.getInt() : numStages - 1;
    };
    llvm::SetVector<Operation *> kept;
    for (Value grad : ret.getOperands().drop_front()) {
      SmallVector<Operation *> chain;
      std::set<int64_t> stages;
      SmallVector<Value> stack{grad};
      while (!stack.empty()) {
        Value v = stack.pop_back_val();
        Operation *def = v.getDefiningOp();
        if (!def || isa<ConstantOp>(def))
          continue;
        if (isa<AddOp>(def) && v.hasOneUse()) {
          chain.push_back(def);
          stack.push_back(def->getOperand(0));
          stack.push_back(def->getOperand(1));
          continue;
        }
        stages.insert(stageOf(def));
      }
      if (stages.size() >= 2)
        kept.insert(chain.begin(), chain.end());
    }

    llvm::DenseMap<Operation *, size_t> pieceOf;
    for (Operation &op : body.without_terminator()) {
      if (isa<ConstantOp>(op) || kept.contains(&op))
        continue;
      auto s = op.getAttrOfType<IntegerAttr>(kStageAttrName);
      int64_t stage = s ? s.getInt() : numStages - 1;
      size_t i = indexOf(stage, forwardOps.contains(&op));
      pieces[i].ops.push_back(&op);
      pieceOf[&op] = i;
    }

    for (Piece &piece : pieces)
      if (!piece.forward)
        piece.phase = "backward";
    if (splitBackward)
      splitIntoInputAndWeightGradients(pieces, pieceOf, numStages);

    // What crosses between pieces, checked against the order.
    for (auto [i, piece] : llvm::enumerate(pieces))
      for (Operation *op : piece.ops)
        for (Value operand : op->getOperands()) {
          Operation *def = operand.getDefiningOp();
          if (def && isa<ConstantOp>(def))
            continue;
          if (!def) {
            piece.inputs.insert(operand);
            continue;
          }
          size_t from = pieceOf.lookup(def);
          if (from == i)
            continue;
          if (from > i) {
            auto describe = [&](Operation *o, size_t p) {
              return pieces[p].phase + " work of stage " +
                     std::to_string(pieces[p].stage);
            };
            InFlightDiagnostic diag =
                op->emitError("--weft-split-stages: this op (")
                << describe(op, i) << ") reads a value that '"
                << def->getName() << "' ("
                << describe(def, from)
                << ") makes later in the pipeline's order (forward 0..N-1, "
                   "then backward N-1..0); the stages given to these ops "
                   "cannot be pipelined";
            diag.attachNote(def->getLoc()) << "the value is made here";
            return signalPassFailure();
          }
          piece.inputs.insert(operand);
          pieces[from].outputs.insert(operand);
        }
    auto readOutside = [&](Value v) {
      if (Operation *def = v.getDefiningOp();
          def && !isa<ConstantOp>(def) && !kept.contains(def))
        pieces[pieceOf.lookup(def)].outputs.insert(v);
    };
    for (Value v : ret.getOperands())
      readOutside(v);
    for (Operation *op : kept)
      for (Value v : op->getOperands())
        readOutside(v);

    // Each piece as a function; @function calls them in order.
    OpBuilder b(module.getContext());
    b.setInsertionPoint(fn);
    IRMapping outer;
    SmallVector<func::FuncOp> made;
    for (Piece &piece : pieces) {
      if (piece.ops.empty())
        continue;
      // Outputs in program order, so the signature does not depend on the
      // order the uses were visited in.
      SmallVector<Value> outputs(piece.outputs.begin(), piece.outputs.end());
      llvm::sort(outputs, [](Value a, Value c) {
        Operation *x = a.getDefiningOp(), *y = c.getDefiningOp();
        if (x != y)
          return x->isBeforeInBlock(y);
        return cast<OpResult>(a).getResultNumber() <
               cast<OpResult>(c).getResultNumber();
      });
      std::string name =
          function + "." + piece.phase + std::to_string(piece.stage);
      SmallVector<Type> inTypes, outTypes;
      for (Value v : piece.inputs)
        inTypes.push_back(v.getType());
      for (Value v : outputs)
        outTypes.push_back(v.getType());
      auto pieceFn = func::FuncOp::create(b, fn.getLoc(), name,
                                          b.getFunctionType(inTypes, outTypes));
      pieceFn.setPrivate();
      pieceFn->setAttr(kStageAttrName, b.getI64IntegerAttr(piece.stage));
      pieceFn->setAttr("weft.phase",
                       b.getStringAttr(piece.phase));
      // A parameter or input keeps its role and name on the piece.
      for (auto [i, v] : llvm::enumerate(piece.inputs))
        if (auto arg = dyn_cast<BlockArgument>(v))
          pieceFn.setArgAttrs(i, fn.getArgAttrDict(arg.getArgNumber()));
      Block *entry = pieceFn.addEntryBlock();
      OpBuilder inner = OpBuilder::atBlockBegin(entry);
      IRMapping map;
      for (auto [v, arg] : llvm::zip(piece.inputs, entry->getArguments()))
        map.map(v, arg);
      for (Operation *op : piece.ops) {
        for (Value operand : op->getOperands())
          if (auto c = operand.getDefiningOp<ConstantOp>();
              c && !map.contains(operand))
            inner.clone(*c, map)->removeAttr(kStageAttrName);
        Operation *copy = inner.clone(*op, map);
        copy->removeAttr(kStageAttrName);
      }
      SmallVector<Value> results;
      for (Value v : outputs)
        results.push_back(map.lookup(v));
      func::ReturnOp::create(inner, fn.getLoc(), results);
      made.push_back(pieceFn);

      // The call, in @function, in pipeline order.
      OpBuilder call = OpBuilder::atBlockTerminator(&body);
      SmallVector<Value> args;
      for (Value v : piece.inputs)
        args.push_back(outer.lookupOrDefault(v));
      auto callOp = func::CallOp::create(call, fn.getLoc(), pieceFn, args);
      for (auto [v, r] : llvm::zip(outputs, callOp.getResults()))
        outer.map(v, r);
    }
    // The sums kept outside follow the calls, in program order; the return
    // reads their and the calls' results; constants it returns stay.
    llvm::SmallVector<Operation *> sums(kept.begin(), kept.end());
    llvm::sort(sums, [](Operation *a, Operation *c) {
      return a->isBeforeInBlock(c);
    });
    for (Operation *op : sums) {
      op->moveBefore(ret);
      op->removeAttr(kStageAttrName);
      for (OpOperand &operand : op->getOpOperands())
        operand.set(outer.lookupOrDefault(operand.get()));
    }
    for (OpOperand &operand : ret->getOpOperands())
      operand.set(outer.lookupOrDefault(operand.get()));
    for (Piece &piece : llvm::reverse(pieces))
      for (Operation *op : llvm::reverse(piece.ops))
        op->erase();
    for (Operation &op : llvm::make_early_inc_range(body.without_terminator()))
      if (isa<ConstantOp>(op) && op.use_empty())
        op.erase();
  }
};
} // namespace
