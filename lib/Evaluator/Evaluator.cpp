//===- Evaluator.cpp - Reference evaluation of weft functions -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Walks a function's block op by op, handing each op to the family that
// knows it (OpsElementwise.cpp, OpsReduction.cpp, OpsLinalg.cpp,
// OpsDataMovement.cpp). Calls run on an explicit frame stack, so neither deep
// call chains nor long functions grow the native stack, and values are freed
// after their last use so a long training step does not keep every
// activation alive.
//
// weft.send and weft.recv are evaluated here too, not by a family: they
// need the rank's context (who this rank is, the mailbox), which a single
// op's evaluation does not have.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorInternal.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"

using namespace mlir;
using namespace weft;
using namespace weft::eval;
using namespace weft::eval::detail;

namespace {

/// Whether `t` is a well-formed value of `type`: same shape and element type,
/// and storage of the right size, so op loops can index it blindly.
bool matchesType(const Tensor &t, Type type) {
  auto ranked = dyn_cast<RankedTensorType>(type);
  if (!ranked || !t.elementType || t.elementType != ranked.getElementType() ||
      ArrayRef<int64_t>(t.shape) != ranked.getShape())
    return false;
  size_t n = static_cast<size_t>(t.numElements());
  return t.isFloat() ? t.fp.size() == n : t.ints.size() == n;
}


/// "tensor<4x8xf32>" for a diagnostic, where a Type would be quoted.
std::string typeText(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

/// Checks `values` against `types` and reports the first mismatch on `op`.
LogicalResult checkValues(Operation *op, StringRef what,
                          ArrayRef<Tensor> values, TypeRange types) {
  if (values.size() != types.size())
    return op->emitError("expected ")
           << types.size() << " " << what << "s, got " << values.size();
  for (auto [i, value, type] : llvm::enumerate(values, types))
    if (!matchesType(value, type))
      return op->emitError()
             << what << " #" << i << " has type " << type
             << " but the evaluator was given " << describeValue(value);
  return success();
}

/// One function activation on the explicit call stack.
struct Frame {
  func::FuncOp fn;
  Block::iterator next;
  /// Live values; each is dropped when its last use has consumed it.
  llvm::DenseMap<Value, Tensor> values;
  /// Uses not yet consumed, per live value.
  llvm::DenseMap<Value, unsigned> remainingUses;
  /// The func.call in the caller frame that this frame's results bind to.
  Operation *caller = nullptr;

  void bind(Value v, Tensor t) {
    unsigned uses = static_cast<unsigned>(
        std::distance(v.getUses().begin(), v.getUses().end()));
    if (uses == 0)
      return;
    values[v] = std::move(t);
    remainingUses[v] = uses;
  }

  /// The value of `v` for one use: moved out at its last use, copied before.
  Tensor take(Value v) {
    auto it = remainingUses.find(v);
    assert(it != remainingUses.end() && "value used before definition");
    if (--it->second > 0)
      return values[v];
    remainingUses.erase(it);
    Tensor t = std::move(values[v]);
    values.erase(v);
    return t;
  }
};

/// Starts a frame for `fn` after checking that it can be evaluated on `args`.
/// `site` is where errors about the arguments are reported.
FailureOr<Frame> enterFunction(func::FuncOp fn, SmallVector<Tensor> args,
                               Operation *site) {
  if (fn.isExternal())
    return site->emitError("function '")
           << fn.getSymName() << "' has no body to evaluate";
  if (!fn.getBody().hasOneBlock())
    return fn.emitError("the evaluator needs a single-block function");
  if (failed(checkValues(site, "argument", args, fn.getArgumentTypes())))
    return failure();
  Frame frame;
  frame.fn = fn;
  Block &body = fn.getBody().front();
  frame.next = body.begin();
  for (auto [arg, value] : llvm::zip_equal(body.getArguments(), args))
    frame.bind(arg, std::move(value));
  return frame;
}

/// The error for a weft.send or weft.recv evaluated without a rank context.
LogicalResult needsRanks(Operation *op) {
  auto fn = op->getParentOfType<func::FuncOp>();
  InFlightDiagnostic diag =
      op->emitError("'") << op->getName() << "' passes a tensor between ranks";
  if (fn)
    diag << ": @" << fn.getSymName() << " is one rank's part of the step";
  diag << "; evaluate every rank's function together (weft-eval --ranks N "
          "--rank-fn PATTERN, or evaluateFunction with a RankContext)";
  return diag;
}

/// The rank that `peer` on `axes` names, seen from `op`'s module. The
/// evaluator runs one rank per coordinate of a single axis, so peer and
/// rank are the same number; a mesh with more ranks than that axis has
/// needs the collectives the evaluator does not have.
FailureOr<int64_t> peerRank(Operation *op, ArrayAttr axes, int64_t peer,
                            const RankContext &ctx) {
  if (axes.size() != 1)
    return op->emitError("rank ")
           << ctx.rank << ": the evaluator passes messages along one mesh "
           << "axis, not the group of axes " << axes;
  auto module = op->getParentOfType<ModuleOp>();
  auto mesh = module
                  ? module->getAttrOfType<MeshAttr>(WeftDialect::kMeshAttrName)
                  : MeshAttr();
  StringRef axis = cast<StringAttr>(axes[0]).getValue();
  if (mesh && mesh.getNumDevices() != mesh.getAxisSize(axis))
    return op->emitError("rank ")
           << ctx.rank << ": the evaluator runs one rank per coordinate of \""
           << axis << "\", but the mesh " << mesh << " has "
           << mesh.getNumDevices() << " ranks; only meshes whose other axes "
           << "have size 1 can be evaluated";
  if (peer == ctx.rank)
    return op->emitError("rank ")
           << ctx.rank << ": peer " << peer << " is this rank itself";
  return peer;
}

/// Sends `value` as `send` says, from rank `ctx.rank`.
LogicalResult evaluateSend(SendOp send, Tensor value, const RankContext &ctx) {
  FailureOr<int64_t> to = peerRank(send, send.getAxes(), send.getPeer(), ctx);
  if (failed(to))
    return failure();
  std::string error;
  if (succeeded(ctx.mailbox->send(ctx.rank, *to, send.getTag(),
                                  std::move(value), error)))
    return success();
  return send.emitError("rank ")
         << ctx.rank << ": weft.send of " << typeText(send.getInput().getType())
         << " to rank " << *to << " with tag " << send.getTag() << ": "
         << error;
}

/// Receives `recv`'s tensor on rank `ctx.rank`. Fails without a diagnostic
/// when the run was stopped.
FailureOr<Tensor> evaluateRecv(RecvOp recv, const RankContext &ctx) {
  FailureOr<int64_t> from = peerRank(recv, recv.getAxes(), recv.getPeer(), ctx);
  if (failed(from))
    return failure();
  auto describeRecv = [&](InFlightDiagnostic diag) {
    return std::move(diag << ctx.rank << ": weft.recv of "
                          << typeText(recv.getType()) << " from rank " << *from
                          << " with tag " << recv.getTag());
  };
  Tensor tensor;
  std::string error;
  switch (ctx.mailbox->recv(ctx.rank, *from, recv.getTag(), ctx.recvTimeout,
                            tensor, error)) {
  case Mailbox::RecvStatus::Stopped:
    return failure();
  case Mailbox::RecvStatus::Failed:
    return describeRecv(recv.emitError("rank ")) << ": " << error;
  case Mailbox::RecvStatus::Received:
    break;
  }
  if (!matchesType(tensor, recv.getType()))
    return describeRecv(recv.emitError("rank "))
           << ": rank " << *from << " sent " << describeValue(tensor)
           << "; the two ranks disagree on the message's type";
  return tensor;
}

/// Evaluates `fn` on `args`, as rank `ctx` when it is given.
FailureOr<SmallVector<Tensor>> evaluate(func::FuncOp fn, ArrayRef<Tensor> args,
                                        const RankContext *ctx) {
  FailureOr<Frame> entry =
      enterFunction(fn, SmallVector<Tensor>(args.begin(), args.end()), fn);
  if (failed(entry))
    return failure();
  std::vector<Frame> stack;
  stack.push_back(std::move(*entry));

  while (true) {
    Frame &frame = stack.back();
    if (frame.next == frame.fn.getBody().front().end())
      return frame.fn.emitError("function body does not end in func.return");
    Operation *op = &*frame.next++;
    // Another rank failed: it reports; this one just stops.
    if (ctx && ctx->mailbox->stopped())
      return failure();

    // weft.onnx.none only feeds weft.onnx.node, which reports the real
    // problem (the function was not legalized).
    if (isa<OnnxNoneOp>(op))
      continue;

    SmallVector<Tensor> operands;
    operands.reserve(op->getNumOperands());
    for (Value v : op->getOperands()) {
      if (!frame.remainingUses.count(v))
        return op->emitError("operand is not a value the evaluator computed");
      operands.push_back(frame.take(v));
    }

    if (isa<func::ReturnOp>(op)) {
      if (failed(
              checkValues(op, "result", operands, frame.fn.getResultTypes())))
        return failure();
      Operation *caller = frame.caller;
      stack.pop_back();
      if (stack.empty()) {
        std::string error;
        if (ctx && failed(ctx->mailbox->finish(ctx->rank, error)))
          return op->emitError("rank ") << ctx->rank << " " << error;
        return operands;
      }
      for (auto [v, t] : llvm::zip_equal(caller->getResults(), operands))
        stack.back().bind(v, std::move(t));
      continue;
    }

    if (auto call = dyn_cast<func::CallOp>(op)) {
      auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
          op, call.getCalleeAttr());
      if (!callee)
        return op->emitError("cannot find the called function '")
               << call.getCallee() << "'";
      if (stack.size() >= kMaxCallDepth)
        return op->emitError("calls nest deeper than ")
               << kMaxCallDepth << " (is '" << call.getCallee()
               << "' recursive?)";
      if (call->getNumResults() != callee.getNumResults())
        return op->emitError("call and callee disagree on the result count");
      FailureOr<Frame> callFrame =
          enterFunction(callee, std::move(operands), op);
      if (failed(callFrame))
        return failure();
      callFrame->caller = op;
      // `frame` dangles once the stack grows; it is not used past here.
      stack.push_back(std::move(*callFrame));
      continue;
    }

    if (auto send = dyn_cast<SendOp>(op)) {
      if (!ctx)
        return needsRanks(op);
      if (failed(evaluateSend(send, std::move(operands.front()), *ctx)))
        return failure();
      continue;
    }
    if (auto recv = dyn_cast<RecvOp>(op)) {
      if (!ctx)
        return needsRanks(op);
      FailureOr<Tensor> tensor = evaluateRecv(recv, *ctx);
      if (failed(tensor))
        return failure();
      frame.bind(recv.getResult(), std::move(*tensor));
      continue;
    }

    FailureOr<SmallVector<Tensor>> results = evaluateOp(op, operands);
    if (failed(results))
      return failure();
    for (auto [v, t] : llvm::zip_equal(op->getResults(), *results))
      frame.bind(v, std::move(t));
  }
}

} // namespace

FailureOr<SmallVector<Tensor>> eval::evaluateOp(Operation *op,
                                                ArrayRef<Tensor> operands) {
  if (auto node = dyn_cast<OnnxNodeOp>(op))
    return op->emitError("op 'weft.onnx.node' (ONNX ")
           << node.getOpType()
           << ") is not legalized; run --weft-legalize-onnx first";
  if (isa<SendOp, RecvOp>(op))
    return needsRanks(op);
  if (failed(checkValues(op, "operand", operands, op->getOperandTypes())))
    return failure();
  if (auto call = dyn_cast<func::CallOp>(op)) {
    auto callee = SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(
        op, call.getCalleeAttr());
    if (!callee)
      return op->emitError("cannot find the called function '")
             << call.getCallee() << "'";
    return evaluateFunction(callee, operands);
  }
  if (std::optional<SmallVector<Tensor>> results =
          evaluateRecurrentOp(op, operands))
    return std::move(*results);
  if (std::optional<SmallVector<Tensor>> results =
          evaluateAttentionOp(op, operands))
    return std::move(*results);
  bool known =
      op->getDialect() && isa<WeftDialect>(op->getDialect()) &&
      op->getNumResults() == 1 && op->getNumRegions() == 0 &&
      isa<RankedTensorType>(op->getResult(0).getType()) &&
      cast<RankedTensorType>(op->getResult(0).getType()).hasStaticShape();
  if (known) {
    Tensor result = resultFor(op);
    std::optional<LogicalResult> status;
    for (auto family :
         {evaluateElementwiseOp, evaluateReductionOp, evaluateLinalgOp,
          evaluateDataMovementOp, evaluateGradientOp,
          evaluateSelectionOp}) {
      status = family(op, operands, result);
      if (status)
        break;
    }
    if (status) {
      if (failed(*status))
        return failure();
      SmallVector<Tensor> results;
      results.push_back(std::move(result));
      return results;
    }
  }
  return op->emitError("op '")
         << op->getName() << "' is not supported by the reference evaluator";
}

FailureOr<SmallVector<Tensor>> eval::evaluateFunction(func::FuncOp fn,
                                                      ArrayRef<Tensor> args) {
  return evaluate(fn, args, nullptr);
}

FailureOr<SmallVector<Tensor>> eval::evaluateFunction(func::FuncOp fn,
                                                      ArrayRef<Tensor> args,
                                                      const RankContext &ctx) {
  if (!ctx.mailbox)
    return fn.emitError("rank ")
           << ctx.rank << ": the rank context has no mailbox";
  return evaluate(fn, args, &ctx);
}
