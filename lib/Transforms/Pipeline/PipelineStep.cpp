//===- PipelineStep.cpp - One training step per pipeline rank -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The pieces --weft-split-stages cut are the units a schedule orders; the
// optimizer's @train_step runs them once per micro-batch and updates the
// parameters. Each rank's step keeps the pieces of its stages, in its
// schedule's order, and the rest of the step ("glue": the slices of the
// batch per micro-batch, the sums of gradients, the optimizer) wherever
// its results are needed, so a tied parameter is updated the same way on
// every stage that holds it. Values cross ranks at the schedule's sends
// and receives (an activation and what a stage's backward reads of the
// previous stage's forward; a gradient); what glue on another rank reads
// of a piece crosses once the schedule is done, in one global order that
// every rank walks, so those transfers cannot deadlock either.
//
// A stage's last micro-batch completes each of its gradient sums. Those
// last additions run inside that micro-batch's backward piece (a copy of
// it that takes the running sums and returns the finished ones), each
// right after its gradient: once the step is laid out over dp, the
// reduction of a gradient (an all-reduce, or ZeRO's reduce-scatter) is
// placed right after its sum, so it starts while the piece still computes
// the gradients of the stage's earlier layers, and the optimizer after
// the schedule waits for it. The sums are the same additions in the same
// order, so the numbers do not change.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Transforms/Pipeline/Passes.h"
#include "weft/Transforms/Pipeline/Schedule.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallSet.h"

#include <map>
#include <set>

namespace weft {
#define GEN_PASS_DEF_PIPELINESTEPPASS
#include "weft/Transforms/Pipeline/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;
namespace pl = weft::pipeline;

namespace {
constexpr llvm::StringLiteral kMicroBatchAttrName = "weft.micro_batch";

/// The most bytes of values `fn` holds at once between its ops (its
/// arguments aside): on a pipeline rank, mostly the activations its
/// forward pieces keep for their backward pieces, so it grows with the
/// micro-batches in flight (all of them under GPipe, at most the stage
/// count under 1F1B).
int64_t peakLiveBytes(func::FuncOp fn) {
  Block &body = fn.front();
  llvm::DenseMap<Operation *, size_t> position;
  for (auto [i, op] : llvm::enumerate(body))
    position[&op] = i;
  SmallVector<int64_t> freed(body.getOperations().size() + 1, 0);
  int64_t live = 0, peak = 0;
  for (auto [i, op] : llvm::enumerate(body)) {
    live -= freed[i];
    for (Value v : op.getResults()) {
      int64_t bytes = staticTensorBytes(v.getType());
      if (!bytes)
        continue;
      size_t last = i;
      for (Operation *user : v.getUsers())
        last = std::max(last, position.lookup(user));
      live += bytes;
      // Freed once its last reader has run.
      freed[last + 1] += bytes;
    }
    peak = std::max(peak, live);
  }
  return peak;
}
constexpr llvm::StringLiteral kPhaseAttrName = "weft.phase";

/// What a piece computes: a stage's forward, its whole backward, or, with
/// the backward split (zero-bubble), its input- and weight-gradient parts.
enum Phase { Forward, Backward, InputGrad, WeightGrad };

/// A piece run on one micro-batch: (model stage, phase, micro-batch).
using PieceKey = std::tuple<int64_t, int, int64_t>;

/// A micro-batch's gradient added to the running sum of the earlier
/// micro-batches' (`sum = add(running, gradient)`, the optimizer's
/// accumulation): the piece result, the addition, and its other operand.
struct Accumulation {
  unsigned result;
  Operation *add;
  Value running;
};

/// A value one rank sends another.
struct Transfer {
  Value value;
  int64_t from, to, tag;
  /// For errors: "the activation of micro-batch 3 from stage 0".
  std::string what;
};

struct PipelineStepPass
    : public weft::impl::PipelineStepPassBase<PipelineStepPass> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(run()))
      signalPassFailure();
  }

private:
  LogicalResult run() {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>("train_step");
    if (!step || step.isExternal())
      return module.emitError("--weft-pipeline-step needs the optimizer's "
                              "@train_step");
    pl::ScheduleKind kind;
    if (pl::Status s = pl::parseScheduleKind(schedule, kind); !s.ok())
      return module.emitError() << "--schedule: " << s.message;
    numStages = ranks * virtualStages;

    // The step with the gradient function's calls replaced by its body,
    // so each piece call is one (stage, phase, micro-batch).
    work = cast<func::FuncOp>(step->clone());
    work.setName("train_step.pipeline_work");
    module.push_back(work);
    auto cleanup = llvm::make_scope_exit([&] { work.erase(); });
    if (failed(inlineGradientCalls()) || failed(findPieces()))
      return failure();
    computeAnchors();
    if (regroupMixedSums())
      computeAnchors();
    if (failed(classify()))
      return failure();
    findAccumulations();
    if (kind == pl::ScheduleKind::ZeroBubble && !splitBackward)
      return module.emitError(
          "--schedule zero-bubble runs each stage's backward as an input-"
          "gradient and a weight-gradient piece: cut them with "
          "--weft-split-stages{split-backward=true}");

    pl::Schedule sched;
    if (pl::Status s = pl::buildSchedule(kind, int(ranks), int(microBatches),
                                         int(virtualStages), sched);
        !s.ok())
      return module.emitError() << "--schedule " << std::string(schedule) << ": "
                                << s.message;
    if (pl::Status s = pl::verifySchedule(sched); !s.ok())
      return module.emitError() << "the " << std::string(schedule)
                                << " schedule is unsound: " << s.message;
    if (failed(planTransfers()))
      return failure();
    OpBuilder b(module.getContext());
    b.setInsertionPointAfter(step);
    for (int64_t r = 0; r < ranks; ++r)
      if (failed(buildRank(b, sched, r)))
        return failure();
    // The rank steps' sends and receives run over the pp axis.
    if (!module->hasAttr(WeftDialect::kMeshAttrName))
      module->setAttr(WeftDialect::kMeshAttrName,
                      MeshAttr::get(module.getContext(),
                                    {b.getStringAttr("pp")}, {ranks}));
    // The schedule was verified; this checks what was built from it.
    return verifyPipelineTransfers(module);
  }

  int64_t rankOf(int64_t stage) const { return stage % ranks; }

  LogicalResult inlineGradientCalls() {
    SmallVector<func::CallOp> calls;
    work.walk([&](func::CallOp call) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      if (callee && !callee->hasAttr(kStageAttrName) &&
          llvm::any_of(callee.getOps<func::CallOp>(), [&](func::CallOp inner) {
            auto piece = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
                inner, inner.getCalleeAttr());
            return piece && piece->hasAttr(kStageAttrName);
          }))
        calls.push_back(call);
    });
    if (calls.empty())
      return work.emitError("@train_step calls no gradient function cut into "
                            "pipeline pieces: run --weft-split-stages first");
    microBatches = int64_t(calls.size());
    for (auto [k, call] : llvm::enumerate(calls)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          call, call.getCalleeAttr());
      OpBuilder b(call);
      IRMapping map;
      for (auto [arg, operand] :
           llvm::zip(callee.getArguments(), call.getOperands()))
        map.map(arg, operand);
      for (Operation &op : callee.front().without_terminator()) {
        Operation *copy = b.clone(op, map);
        if (isa<func::CallOp>(copy))
          copy->setAttr(kMicroBatchAttrName, b.getI64IntegerAttr(int64_t(k)));
      }
      for (auto [result, value] :
           llvm::zip(call.getResults(),
                     callee.front().getTerminator()->getOperands()))
        result.replaceAllUsesWith(map.lookupOrDefault(value));
      call.erase();
    }
    return success();
  }

  /// The one rank whose pieces `v` is computed from (computeAnchors):
  /// kNone if none (it reads only arguments and constants), kMixed if
  /// several.
  int64_t anchorOfValue(Value v) const { return byPiece(v, anchorOf); }

  /// `v`'s rank if a piece computes it, else what `glue` says of its
  /// defining op; kNone for an argument.
  int64_t byPiece(Value v,
                  const llvm::DenseMap<Operation *, int64_t> &glue) const {
    Operation *def = v.getDefiningOp();
    if (!def)
      return kNone;
    if (auto piece = pieceOf.find(def); piece != pieceOf.end())
      return rankOf(std::get<0>(piece->second));
    return glue.lookup(def);
  }

  /// A tied parameter's gradient is a sum over micro-batches of sums over
  /// stages, (a0 + b0) + (a1 + b1) + ...: as written, every share crosses
  /// to every rank holding the parameter, one tensor per micro-batch (the
  /// bench GPT's 8 MB embedding gradient, 8 micro-batches: 128 MB a step
  /// between two ranks). Summed as (a0 + a1 + ...) + (b0 + b1 + ...), each
  /// rank's part is its own glue, and one tensor crosses per rank. So for
  /// any sum whose terms come from several ranks: the squared gradient
  /// norm, a sum over parameters in argument order, crossed one scalar per
  /// parameter (43 messages a step on the bench GPT at pp=2), and now one
  /// per rank. The additions are reassociated, so the sum may differ from
  /// the 1-rank step's in the last bits; every rank still adds the parts in
  /// one order (by rank), so the ranks holding a parameter keep equal
  /// values.
  /// Whether it changed anything.
  bool regroupMixedSums() {
    bool changed = false;
    Block &body = work.front();
    auto sameTypeAdd = [](Operation *op, Type type) {
      return isa_and_nonnull<AddOp>(op) && op->getResult(0).getType() == type &&
             op->getOperand(0).getType() == type &&
             op->getOperand(1).getType() == type;
    };
    SmallVector<Operation *> roots;
    for (Operation &op : body.without_terminator()) {
      Type type = op.getNumResults() == 1 ? op.getResult(0).getType() : Type();
      if (!sameTypeAdd(&op, type))
        continue;
      bool inner = op.hasOneUse() && sameTypeAdd(*op.user_begin(), type);
      if (!inner)
        roots.push_back(&op);
    }
    for (Operation *root : roots) {
      Type type = root->getResult(0).getType();
      // The tree's leaves left to right, and its additions.
      SmallVector<Value> leaves;
      SmallVector<Operation *> adds;
      std::function<void(Value)> walk = [&](Value v) {
        Operation *def = v.getDefiningOp();
        if (def && (def == root || (v.hasOneUse() && sameTypeAdd(def, type)))) {
          adds.push_back(def);
          walk(def->getOperand(0));
          walk(def->getOperand(1));
          return;
        }
        leaves.push_back(v);
      };
      walk(root->getResult(0));
      // By the rank whose pieces each leaf comes from (kNone, kMixed: a
      // tied gradient's total, are groups of their own).
      std::map<int64_t, SmallVector<Value>> byRank;
      for (Value leaf : leaves)
        byRank[anchorOfValue(leaf)].push_back(leaf);
      if (byRank.size() < 2 || llvm::none_of(byRank, [](auto &kv) {
            return kv.first >= 0 && kv.second.size() >= 2;
          }))
        continue;
      OpBuilder b(root);
      Value total;
      for (auto &[rank, values] : byRank) {
        Value part = values.front();
        for (Value v : ArrayRef<Value>(values).drop_front())
          part = AddOp::create(b, root->getLoc(), part, v);
        total =
            total ? Value(AddOp::create(b, root->getLoc(), total, part)) : part;
      }
      root->getResult(0).replaceAllUsesWith(total);
      // Parents before children: each is unused once its reader is gone.
      for (Operation *add : adds)
        add->erase();
      changed = true;
    }
    return changed;
  }

  /// Finds the piece calls: (stage, phase, micro-batch) of each.
  LogicalResult findPieces() {
    Block &body = work.front();
    for (Operation &op : body.without_terminator()) {
      auto call = dyn_cast<func::CallOp>(op);
      auto callee = call ? SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
                               call, call.getCalleeAttr())
                         : func::FuncOp();
      if (!callee || !callee->hasAttr(kStageAttrName))
        continue;
      int64_t stage = callee->getAttrOfType<IntegerAttr>(kStageAttrName).getInt();
      StringRef phaseName =
          callee->getAttrOfType<StringAttr>(kPhaseAttrName).getValue();
      int forward = phaseName == "forward"       ? Forward
                    : phaseName == "input_grad"  ? InputGrad
                    : phaseName == "weight_grad" ? WeightGrad
                                                 : Backward;
      splitBackward |= forward == InputGrad || forward == WeightGrad;
      int64_t mb = call->getAttrOfType<IntegerAttr>(kMicroBatchAttrName).getInt();
      if (stage >= numStages)
        return work.emitError()
               << "the model is cut into more stages (" << stage + 1
               << ") than " << int64_t(ranks) << " pipeline ranks x " << int64_t(virtualStages)
               << " virtual stages";
      pieces[{stage, forward, mb}] = call;
      pieceOf[call] = {stage, forward, mb};
    }
    if (int64_t(pieces.size()) > 0) {
      int64_t cut = 0;
      for (auto &[key, call] : pieces)
        cut = std::max(cut, std::get<0>(key) + 1);
      if (cut != numStages)
        return work.emitError()
               << "the model is cut into " << cut << " stages, but "
               << int64_t(ranks) << " pipeline ranks x " << int64_t(virtualStages)
               << " virtual stages run " << numStages
               << ": cut it into as many (--stage-cuts, or let weftc choose)";
    }
    return success();
  }

  /// Glue computed from one rank's pieces alone (the sum of a stage's
  /// gradients, its norm) runs on that rank, which sends the result to
  /// the others that need it: one tensor, not one per micro-batch. Glue
  /// mixing ranks' pieces (a tied gradient's total) runs on every rank that
  /// needs it, from the pieces' values. Each glue op's anchor, in program
  /// order.
  /// A reduction of mixed glue (a tied gradient's total squared and summed
  /// for the gradient norm) runs on the lowest rank whose pieces feed it,
  /// which sends the small result on: computed on every rank that needs
  /// it, each would first receive the whole tied gradient (on the bench
  /// GPT at pp=4, 8 MiB more to each middle rank a step).
  void computeAnchors() {
    anchorOf.clear();
    llvm::DenseMap<Operation *, int64_t> lowestSource;
    auto elements = [](Value v) -> int64_t {
      auto type = dyn_cast<RankedTensorType>(v.getType());
      return type && type.hasStaticShape() ? type.getNumElements() : -1;
    };
    for (Operation &op : work.front().without_terminator()) {
      if (pieceOf.count(&op))
        continue;
      int64_t anchor = kNone, lowest = kNone;
      bool reducesMixed = false;
      for (Value operand : op.getOperands()) {
        int64_t source = byPiece(operand, lowestSource);
        if (source >= 0 && (lowest < 0 || source < lowest))
          lowest = source;
        int64_t from = anchorOfValue(operand);
        if (from == kMixed && op.getNumResults() == 1 &&
            elements(op.getResult(0)) >= 0 &&
            elements(op.getResult(0)) < elements(operand))
          reducesMixed = true;
        if (from == kNone || from == anchor)
          continue;
        anchor = anchor == kNone && from != kMixed ? from : kMixed;
      }
      lowestSource[&op] = lowest;
      anchorOf[&op] = anchor == kMixed && reducesMixed ? lowest : anchor;
    }
  }

  /// The ranks that need each glue op, and what crosses after the
  /// schedule.
  LogicalResult classify() {
    Block &body = work.front();
    // The ranks that hold each parameter (and buffer: BatchNorm's running
    // statistics): those of the stages reading it.
    llvm::StringMap<std::set<int64_t>> paramRanks;
    for (unsigned i = 0; i < work.getNumArguments(); ++i) {
      StringAttr name = getArgName(work, i, contract::Role::Param);
      if (!name)
        name = getArgName(work, i, contract::Role::Buffer);
      auto stages = work.getArgAttrOfType<DenseI64ArrayAttr>(i, kStagesAttrName);
      if (!name || !stages)
        continue;
      for (int64_t s : stages.asArrayRef())
        paramRanks[name.getValue()].insert(rankOf(s));
    }
    int64_t lastRank = rankOf(numStages - 1);
    auto ret = cast<func::ReturnOp>(body.getTerminator());
    std::set<int64_t> everyRank;
    for (int64_t r = 0; r < ranks; ++r)
      everyRank.insert(r);
    for (unsigned i = 0; i < ret.getNumOperands(); ++i) {
      // The step's outputs (the loss, the gradient norm, the learning
      // rate) come back on every rank, so each rank's runtime sees the
      // same loss and stops on the same non-finite step.
      std::set<int64_t> where = getResultSlot(work, i) &&
                                        getResultSlot(work, i)->role ==
                                            contract::Role::Output
                                    ? everyRank
                                    : std::set<int64_t>{lastRank};
      StringAttr name;
      for (contract::Role role : {contract::Role::Param, contract::Role::State,
                                  contract::Role::Buffer})
        if (auto attr = work.getResultAttrOfType<StringAttr>(
                i, contract::roleAttrName(role)))
          name = attr;
      if (name) {
        // An optimizer state ("exp_avg.fc.weight") lives with its parameter.
        StringRef param = name.getValue();
        while (!paramRanks.count(param) && param.contains('.'))
          param = param.split('.').second;
        if (auto it = paramRanks.find(param); it != paramRanks.end())
          where = it->second;
      }
      slotRanks.push_back(where);
    }
    for (Operation &op : llvm::reverse(body.without_terminator())) {
      if (pieceOf.count(&op))
        continue;
      std::set<int64_t> need;
      for (Value result : op.getResults())
        for (OpOperand &use : result.getUses()) {
          Operation *user = use.getOwner();
          if (isa<func::ReturnOp>(user))
            need.insert(slotRanks[use.getOperandNumber()].begin(),
                        slotRanks[use.getOperandNumber()].end());
          else if (auto it = pieceOf.find(user); it != pieceOf.end())
            need.insert(rankOf(std::get<0>(it->second)));
          else
            need.insert(glueRanks[user].begin(), glueRanks[user].end());
        }
      int64_t anchor = anchorOf.lookup(&op);
      if (anchor < 0) {
        glueRanks[&op] = std::move(need);
        continue;
      }
      glueRanks[&op] = {anchor};
      for (int64_t to : need)
        if (to != anchor)
          sentGlue.push_back({&op, to});
    }
    // In program order, so every rank walks the transfers the same way.
    llvm::sort(sentGlue, [](const auto &a, const auto &b) {
      if (a.first != b.first)
        return a.first->isBeforeInBlock(b.first);
      return a.second < b.second;
    });
    return success();
  }

  /// The additions that finish a stage's gradient sums: the last micro-
  /// batch's gradient (of a backward piece; nothing else reads it) added
  /// to the running sum of the earlier ones, by glue on the piece's rank.
  /// buildRank moves them into that piece.
  void findAccumulations() {
    for (auto &[key, call] : pieces) {
      auto [stage, phase, mb] = key;
      if (phase == Forward || mb != microBatches - 1)
        continue;
      for (OpResult grad : call->getResults()) {
        if (!grad.hasOneUse())
          continue;
        auto add = dyn_cast<AddOp>(*grad.getUsers().begin());
        if (!add || anchorOf.lookup(add) != rankOf(stage))
          continue;
        Value running = add->getOperand(add->getOperand(0) == grad ? 1 : 0);
        if (running.getDefiningOp() == call.getOperation() ||
            running.getType() != grad.getType() ||
            add.getType() != grad.getType())
          continue;
        accumulations[call].push_back(
            {unsigned(grad.getResultNumber()), add, running});
      }
    }
  }

  /// `call`'s callee with `sums` moved in: it also takes their running
  /// sums (after its own arguments, in order) and returns the finished
  /// sums in place of those gradients, each added right after the
  /// gradient is computed. Made once per callee and set of sums.
  func::FuncOp accumulatingCallee(func::CallOp call,
                                  ArrayRef<Accumulation> sums) {
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        call, call.getCalleeAttr());
    std::string key = callee.getName().str();
    for (const Accumulation &a : sums)
      key += "," + std::to_string(a.result);
    if (auto it = accumulatingCallees.find(key);
        it != accumulatingCallees.end())
      return it->second;
    auto copy = cast<func::FuncOp>(callee->clone());
    copy.setName((callee.getName() + ".accumulate").str());
    SymbolTable(getOperation()).insert(copy, std::next(callee->getIterator()));
    Block &entry = copy.front();
    auto ret = cast<func::ReturnOp>(entry.getTerminator());
    for (const Accumulation &a : sums) {
      unsigned index = copy.getNumArguments();
      if (failed(copy.insertArgument(index, a.running.getType(),
                                     DictionaryAttr(), a.add->getLoc())))
        llvm_unreachable("appending an argument cannot fail");
      Value grad = ret.getOperand(a.result);
      OpBuilder b(copy.getContext());
      if (Operation *def = grad.getDefiningOp())
        b.setInsertionPointAfter(def);
      else
        b.setInsertionPointToStart(&entry);
      IRMapping map;
      map.map(a.running, copy.getArgument(index));
      map.map(call.getResult(a.result), grad);
      ret.setOperand(a.result, b.clone(*a.add, map)->getResult(0));
    }
    accumulatingCallees[key] = copy;
    return copy;
  }

  /// Every value a piece makes that another rank reads, with its tag and
  /// when it travels.
  LogicalResult planTransfers() {
    int64_t tag = 0;
    Block &body = work.front();
    for (Operation &op : body.without_terminator()) {
      auto it = pieceOf.find(&op);
      if (it == pieceOf.end())
        continue;
      auto [stage, phase, mb] = it->second;
      bool forward = phase == Forward;
      int64_t from = rankOf(stage);
      for (Value v : op.getResults()) {
        std::set<int64_t> scheduled, after;
        // Stages a value is relayed into on its way to a stage further
        // on (or back): each hop rides the schedule's message between
        // neighbouring stages, so it cannot deadlock either.
        std::set<int64_t> relayed;
        for (OpOperand &use : v.getUses()) {
          Operation *user = use.getOwner();
          if (auto p = pieceOf.find(user); p != pieceOf.end()) {
            int64_t userStage = std::get<0>(p->second);
            int64_t to = rankOf(userStage);
            if (to == from)
              continue;
            bool backwardUser = std::get<1>(p->second) != Forward;
            bool sendsBack = (phase == Backward || phase == InputGrad) &&
                             backwardUser;
            // A residual that skips stages (more stages than the model
            // has room for): through every stage between.
            if ((forward && userStage > stage + 1) ||
                (sendsBack && userStage < stage - 1)) {
              int64_t step = forward ? 1 : -1;
              for (int64_t u = stage; u != userStage; u += step) {
                if (!relayed.insert(u + step).second)
                  continue;
                PieceKey key{u, phase, mb};
                messages[{key, rankOf(u + step)}].push_back(
                    {v, rankOf(u), rankOf(u + step), tag++,
                     (forward ? "an activation of micro-batch "
                              : "a gradient of micro-batch ") +
                         std::to_string(mb) + " from stage " +
                         std::to_string(stage) + ", relayed by stage " +
                         std::to_string(u)});
              }
              continue;
            }
            // The schedule's messages: a forward piece's outputs to the
            // next stage (for its forward and backward pieces), a backward
            // piece's to the previous stage.
            bool next = forward && userStage == stage + 1;
            bool previous = sendsBack && userStage == stage - 1;
            auto name = [](int ph) {
              return ph == Forward      ? "forward"
                     : ph == Backward   ? "backward"
                     : ph == InputGrad  ? "input-gradient"
                                        : "weight-gradient";
            };
            if (!next && !previous)
              return user->emitError()
                     << "the " << name(std::get<1>(p->second))
                     << " piece of stage " << userStage
                     << " reads a value of the " << name(phase)
                     << " piece of stage " << stage
                     << ", which no pipeline message carries (only a "
                        "stage's outputs to the next stage and its input "
                        "gradients to the previous one do; values are not "
                        "relayed through the stages between): cut the model "
                        "into fewer stages (pp x virtual stages), or give "
                        "--stage-cuts where no value skips a stage";
            scheduled.insert(to);
          } else if (isa<func::ReturnOp>(user)) {
            for (int64_t to : slotRanks[use.getOperandNumber()])
              if (to != from)
                after.insert(to);
          } else {
            for (int64_t to : glueRanks[user])
              if (to != from)
                after.insert(to);
          }
        }
        // A relay's first hop is the neighbour's message already.
        for (int64_t next : {stage + 1, stage - 1})
          if (relayed.count(next))
            scheduled.erase(rankOf(next));
        if (!scheduled.empty() || !after.empty() || !relayed.empty())
          if (!isa<FloatType>(
                  cast<RankedTensorType>(v.getType()).getElementType()))
            return op.emitError()
                   << "a value of type " << v.getType()
                   << " crosses pipeline ranks, but only float tensors are "
                      "sent between them";
        std::string what =
            (forward ? "an activation of micro-batch "
                     : "a gradient of micro-batch ") +
            std::to_string(mb) + " from stage " + std::to_string(stage);
        for (int64_t to : scheduled)
          messages[{it->second, to}].push_back({v, from, to, tag++, what});
        for (int64_t to : after)
          late.push_back({v, from, to, tag++, what + ", after the schedule"});
      }
    }
    for (auto [op, to] : sentGlue)
      for (Value v : op->getResults()) {
        if (!isa<FloatType>(cast<RankedTensorType>(v.getType()).getElementType()))
          return op->emitError()
                 << "a value of type " << v.getType()
                 << " crosses pipeline ranks, but only float tensors are "
                    "sent between them";
        late.push_back({v, anchorOf.lookup(op), to, tag++,
                        "a result of rank " +
                            std::to_string(anchorOf.lookup(op)) +
                            "'s optimizer step, after the schedule"});
      }
    return success();
  }

  LogicalResult buildRank(OpBuilder &b, const pl::Schedule &sched, int64_t r) {
    MLIRContext *context = b.getContext();
    auto fn = func::FuncOp::create(
        b, work.getLoc(), ("train_step.rank" + Twine(r)).str(),
        b.getFunctionType(work.getArgumentTypes(), {}));
    b.setInsertionPointAfter(fn);
    fn.setAllArgAttrs(work.getAllArgAttrs());
    Block *entry = fn.addEntryBlock();
    OpBuilder body = OpBuilder::atBlockBegin(entry);
    IRMapping map;
    for (auto [from, to] : llvm::zip(work.getArguments(), entry->getArguments()))
      map.map(from, to);
    Location loc = work.getLoc();
    auto axes = body.getStrArrayAttr({"pp"});

    // Glue is copied on first use; a piece's value is there once computed
    // or received.
    std::function<LogicalResult(Value)> materialize =
        [&](Value v) -> LogicalResult {
      if (map.contains(v))
        return success();
      Operation *def = v.getDefiningOp();
      if (!def || pieceOf.count(def))
        return work.emitError()
               << "pipeline rank " << r
               << " needs a value it neither computes nor receives";
      for (Value operand : def->getOperands())
        if (failed(materialize(operand)))
          return failure();
      body.clone(*def, map);
      return success();
    };
    auto send = [&](const Transfer &t) -> LogicalResult {
      if (failed(materialize(t.value)))
        return failure();
      auto op = SendOp::create(body, loc, map.lookup(t.value), axes,
                               body.getI64IntegerAttr(t.to),
                               body.getI64IntegerAttr(t.tag));
      op->setAttr(kMessageAttrName, body.getStringAttr(t.what));
      return success();
    };
    auto recv = [&](const Transfer &t) {
      auto op = RecvOp::create(body, loc, t.value.getType(), axes,
                               body.getI64IntegerAttr(t.from),
                               body.getI64IntegerAttr(t.tag));
      op->setAttr(kMessageAttrName, body.getStringAttr(t.what));
      map.map(t.value, op.getResult());
    };
    // Glue that reads what pieces make runs as soon as its operands are
    // there: a micro-batch's gradients join the running sum right after
    // its backward piece instead of staying alive until the step's end.
    // Other glue (a micro-batch's slice of the batch) waits for its first
    // reader, so it is not held from the start.
    SmallVector<Operation *> glue;
    llvm::DenseSet<Operation *> eager;
    for (Operation &op : work.front().without_terminator()) {
      if (pieceOf.count(&op) || !glueRanks.lookup(&op).count(r))
        continue;
      if (llvm::any_of(op.getOperands(), [&](Value v) {
            Operation *def = v.getDefiningOp();
            return def && (pieceOf.count(def) || eager.contains(def));
          })) {
        eager.insert(&op);
        glue.push_back(&op);
      }
    }
    auto runReadyGlue = [&] {
      for (Operation *op : glue)
        if (!map.contains(op->getResult(0)) &&
            llvm::all_of(op->getOperands(),
                         [&](Value v) { return map.contains(v); }))
          body.clone(*op, map);
    };
    runReadyGlue();
    SmallVector<Attribute> timeline;
    for (const pl::Action &a : sched.perRank[size_t(r)]) {
      int64_t stage = sched.modelStage(a);
      int64_t mb = a.microBatch;
      timeline.push_back(body.getStringAttr(pl::describe(sched, a)));
      auto run = [&](int phase) -> LogicalResult {
        auto it = pieces.find({stage, phase, mb});
        if (it == pieces.end())
          return success();
        func::CallOp call = it->second;
        for (Value operand : call.getOperands())
          if (failed(materialize(operand)))
            return failure();
        // The running sums are there unless the schedule ran this
        // micro-batch before an earlier one; then the sums stay glue.
        auto sums = accumulations.find(call);
        if (sums == accumulations.end() ||
            !llvm::all_of(sums->second, [&](const Accumulation &a) {
              return map.contains(a.running);
            })) {
          body.clone(*call, map);
          return success();
        }
        SmallVector<Value> operands;
        for (Value operand : call.getOperands())
          operands.push_back(map.lookup(operand));
        for (const Accumulation &a : sums->second)
          operands.push_back(map.lookup(a.running));
        auto fused = func::CallOp::create(
            body, call.getLoc(), accumulatingCallee(call, sums->second),
            operands);
        for (NamedAttribute attr : call->getDiscardableAttrs())
          fused->setAttr(attr.getName(), attr.getValue());
        // A moved sum's gradient has no other reader; the sum is the
        // result in its place.
        llvm::SmallSet<unsigned, 8> moved;
        for (const Accumulation &a : sums->second) {
          moved.insert(a.result);
          map.map(a.add->getResult(0), fused.getResult(a.result));
        }
        for (OpResult result : call->getResults())
          if (!moved.count(result.getResultNumber()))
            map.map(result, fused.getResult(result.getResultNumber()));
        return success();
      };
      LogicalResult ran = success();
      switch (a.kind) {
      case pl::Action::Forward:
        ran = run(Forward);
        break;
      case pl::Action::Backward:
        // A split backward runs as its two parts back to back.
        ran = splitBackward ? success(succeeded(run(InputGrad)) &&
                                      succeeded(run(WeightGrad)))
                            : run(Backward);
        break;
      case pl::Action::InputGrad:
        ran = run(InputGrad);
        break;
      case pl::Action::WeightGrad:
        ran = run(WeightGrad);
        break;
      case pl::Action::SendActivation:
      case pl::Action::SendGrad: {
        int phase = a.kind == pl::Action::SendActivation
                        ? Forward
                        : (splitBackward ? InputGrad : Backward);
        for (const Transfer &t : messages[{{stage, phase, mb}, a.peer}])
          if (failed(send(t)))
            return failure();
        break;
      }
      case pl::Action::RecvActivation:
      case pl::Action::RecvGrad: {
        bool forward = a.kind == pl::Action::RecvActivation;
        int64_t from = forward ? stage - 1 : stage + 1;
        int phase =
            forward ? Forward : (splitBackward ? InputGrad : Backward);
        for (const Transfer &t : messages[{{from, phase, mb}, r}])
          recv(t);
        break;
      }
      }
      if (failed(ran))
        return failure();
      runReadyGlue();
    }
    // What glue on other ranks reads, in one order every rank walks; but
    // first every send that needs nothing received after the schedule.
    // A send waits for nothing (the runtime's sender thread carries it),
    // so a swap, the tied gradient's shares, travels both ways at once
    // rather than one way after the other (on a slow link, twice as
    // long).
    llvm::DenseSet<Value> receivedLate;
    for (const Transfer &t : late)
      if (t.to == r)
        receivedLate.insert(t.value);
    llvm::DenseMap<Value, bool> waits;
    std::function<bool(Value)> needsLateValue = [&](Value v) -> bool {
      if (map.contains(v))
        return false;
      if (receivedLate.contains(v))
        return true;
      if (auto it = waits.find(v); it != waits.end())
        return it->second;
      Operation *def = v.getDefiningOp();
      bool needs = def && !pieceOf.count(def) &&
                   llvm::any_of(def->getOperands(), needsLateValue);
      waits[v] = needs;
      return needs;
    };
    llvm::DenseSet<int64_t> sentEarly;
    for (const Transfer &t : late)
      if (t.from == r && !needsLateValue(t.value)) {
        if (failed(send(t)))
          return failure();
        sentEarly.insert(t.tag);
      }
    for (const Transfer &t : late) {
      if (t.from == r && !sentEarly.contains(t.tag) && failed(send(t)))
        return failure();
      if (t.to == r)
        recv(t);
    }
    SmallVector<Value> results;
    SmallVector<Type> resultTypes;
    SmallVector<DictionaryAttr> resultAttrs;
    auto ret = cast<func::ReturnOp>(work.front().getTerminator());
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (!slotRanks[i].count(r))
        continue;
      if (failed(materialize(v)))
        return failure();
      results.push_back(map.lookup(v));
      resultTypes.push_back(v.getType());
      resultAttrs.push_back(work.getResultAttrDict(unsigned(i)));
    }
    func::ReturnOp::create(body, loc, results);
    fn.setType(FunctionType::get(context, entry->getArgumentTypes(),
                                 resultTypes));
    for (auto [i, attrs] : llvm::enumerate(resultAttrs))
      if (attrs)
        fn.setResultAttrs(unsigned(i), attrs);
    // Only what the rank reads stays an argument, and the inputs every
    // step takes by contract (the runtime passes them to every rank). A
    // parameter or buffer no rank reads (a mask buffer the step compares as
    // its exported value) stays on rank 0, so that checkpoints keep it.
    llvm::BitVector unused(fn.getNumArguments());
    for (BlockArgument arg : fn.getArguments()) {
      unsigned i = arg.getArgNumber();
      StringAttr input = getArgName(fn, i, contract::Role::Input);
      bool contractInput = input && (input.getValue() == contract::kStepInput ||
                                     input.getValue() == contract::kLrInput);
      bool keptState = r == 0 && work.getArgument(i).use_empty() &&
                       (getArgName(fn, i, contract::Role::Param) ||
                        getArgName(fn, i, contract::Role::Buffer));
      if (arg.use_empty() && !contractInput && !keptState)
        unused.set(i);
    }
    if (failed(fn.eraseArguments(unused)))
      return failure();
    fn->setAttr("weft.pipeline_rank", b.getI64IntegerAttr(r));
    fn->setAttr("weft.peak_live_bytes", b.getI64IntegerAttr(peakLiveBytes(fn)));
    fn->setAttr("weft.schedule", b.getArrayAttr(timeline));
    return success();
  }

  int64_t numStages = 1, microBatches = 1;
  /// Anchors that are no single rank.
  static constexpr int64_t kNone = -1, kMixed = -2;
  /// Whether the backward pieces come as input- and weight-gradient parts.
  bool splitBackward = false;
  func::FuncOp work;
  std::map<PieceKey, func::CallOp> pieces;
  llvm::DenseMap<Operation *, PieceKey> pieceOf;
  llvm::DenseMap<Operation *, std::set<int64_t>> glueRanks;
  /// The one rank whose pieces a glue op's values come from; -1: none
  /// (it reads only arguments), -2: several.
  llvm::DenseMap<Operation *, int64_t> anchorOf;
  /// Glue results the rank computing them sends to another that needs
  /// them, after the schedule.
  SmallVector<std::pair<Operation *, int64_t>> sentGlue;
  SmallVector<std::set<int64_t>> slotRanks;
  /// The schedule's messages: what a piece sends to a rank.
  std::map<std::pair<PieceKey, int64_t>, SmallVector<Transfer>> messages;
  /// Transfers after the schedule, in tag order.
  SmallVector<Transfer> late;
  /// The gradient sums each last-micro-batch backward piece finishes.
  llvm::DenseMap<Operation *, SmallVector<Accumulation>> accumulations;
  /// Callees with their sums moved in, by callee name and moved results.
  std::map<std::string, func::FuncOp> accumulatingCallees;
};
} // namespace
