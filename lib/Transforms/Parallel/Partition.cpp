//===- Partition.cpp - The per-rank step ----------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Ops are rewritten in place, in program order: each op's operands are
// first brought to the layouts its rule needs (the reshards), then its
// results take their local types. A reshard of a value is made once and
// shared by every use that needs that layout, placed right after the value
// is computed so that a gradient's reduction can start as soon as the
// backward pass produced it; a ZeRO-3 parameter's gather is the exception,
// made again just before each use so the whole parameter is not kept alive
// from the forward pass to the backward pass.
//
//===----------------------------------------------------------------------===//

#include "CombineShards.h"
#include "weft/Dialect/Weft/IR/Builders.h"
#include "ShardingAnalysis.h"
#include "weft/Transforms/Parallel/Passes.h"

#include "llvm/ADT/MapVector.h"

namespace weft {
#define GEN_PASS_DEF_PARTITIONPASS
#include "weft/Transforms/Parallel/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;

namespace {
class Partitioner {
public:
  Partitioner(func::FuncOp fn, ShardingAnalysis &analysis)
      : fn(fn), analysis(analysis), mesh(analysis.getMesh()),
        context(fn.getContext()) {}

  LogicalResult run() {
    // Rules read shapes, so every op's plan is made on the global program,
    // before any type changes.
    SmallVector<Operation *> ops;
    for (Operation &op : fn.front()) {
      ops.push_back(&op);
      if (std::optional<ShardingRule> rule = getRule(&op)) {
        Plan &plan = plans[&op];
        plan.axes = analysis.factorAxes(&op, *rule);
        for (unsigned r = 0; r < op.getNumResults(); ++r)
          plan.results.push_back(
              analysis.resultSharding(&op, *rule, plan.axes, r));
        plan.rule = std::move(*rule);
      }
    }
    if (failed(localizeArguments()))
      return failure();
    for (Operation *op : ops) {
      LogicalResult result =
          isa<ShardAsOp>(op)         ? partitionShardAs(cast<ShardAsOp>(op))
          : isa<func::ReturnOp>(op) ? partitionReturn(cast<func::ReturnOp>(op))
                                     : partitionOp(op);
      if (failed(result))
        return failure();
    }
    fn.walk([](Operation *op) { op->removeAttr(kShardingsAttrName); });
    for (Operation *op : superseded)
      if (op->use_empty())
        op->erase();
    return success();
  }

private:
  TensorSharding layoutOf(Value v) const {
    auto it = layouts.find(v);
    return it != layouts.end() ? it->second : analysis.get(v);
  }

  LogicalResult localizeArguments() {
    for (BlockArgument arg : fn.getArguments()) {
      auto type = cast<RankedTensorType>(arg.getType());
      FailureOr<RankedTensorType> local =
          localType(type, analysis.get(arg), [&] {
            return fn.emitError() << "argument " << arg.getArgNumber()
                                  << " of @" << fn.getName();
          });
      if (failed(local))
        return failure();
      arg.setType(*local);
    }
    return success();
  }

  FailureOr<RankedTensorType>
  localType(RankedTensorType global, const TensorSharding &s,
            function_ref<InFlightDiagnostic()> emitError) {
    std::string why;
    FailureOr<SmallVector<int64_t>> shape =
        localShape(mesh, global.getShape(), s, &why);
    if (failed(shape)) {
      emitError() << " (" << global << ") cannot be laid out as "
                  << s.toAttr(context) << " on " << mesh << ": " << why;
      return failure();
    }
    return RankedTensorType::get(*shape, global.getElementType());
  }

  /// The global type of a local value with layout `s`.
  RankedTensorType globalType(Value v, const TensorSharding &s) {
    auto type = cast<RankedTensorType>(v.getType());
    SmallVector<int64_t> shape(type.getShape());
    for (auto [d, axes] : llvm::enumerate(s.dims))
      shape[d] *= axesSize(mesh, axes);
    return RankedTensorType::get(shape, type.getElementType());
  }

  /// `v` (local, laid out as `from`) laid out as `to`, built at `b`.
  FailureOr<Value> reshard(OpBuilder &b, Location loc, Value v,
                           TensorSharding from, const TensorSharding &to) {
    auto type = cast<RankedTensorType>(v.getType());
    Type element = type.getElementType();
    {
      RankedTensorType global = globalType(v, from);
      std::string why;
      if (failed(localShape(mesh, global.getShape(), to, &why)))
        return emitError(loc) << "a " << global << " cannot be laid out as "
                              << to.toAttr(context) << " on " << mesh << ": "
                              << why;
    }
    auto axisAttr = [&](StringAttr a) {
      return ArrayAttr::get(context, {a});
    };
    auto resized = [&](Value x, int64_t dim, int64_t num, int64_t den) {
      auto t = cast<RankedTensorType>(x.getType());
      SmallVector<int64_t> shape(t.getShape());
      shape[dim] = shape[dim] * num / den;
      return RankedTensorType::get(shape, t.getElementType());
    };
    bool communicates = from.partial != to.partial;
    for (auto [fromAxes, toAxes] : llvm::zip_equal(from.dims, to.dims))
      communicates |= !isPrefixOf(fromAxes, toAxes);
    // Collectives carry f32; other floats travel as f32.
    bool widen = communicates && !element.isF32();
    if (communicates && !isa<FloatType>(element))
      return emitError(loc) << "a " << type << " laid out as "
                            << from.toAttr(context)
                            << " would need communication to become "
                            << to.toAttr(context)
                            << ", and collectives carry floats only";
    // A sum pending in the target too stays pending: gathers and slices
    // of its terms are the terms of the gathered or sliced sum.
    for (StringAttr a : to.partial)
      if (!llvm::is_contained(from.partial, a))
        return emitError(loc) << "no reshard makes a value partial";
    Value cur = v;
    if (widen)
      cur = CastOp::create(
          b, loc, RankedTensorType::get(type.getShape(), b.getF32Type()), cur);
    for (StringAttr a : AxisList(from.partial)) {
      if (llvm::is_contained(to.partial, a))
        continue;
      std::optional<int64_t> scatterDim;
      for (auto [d, axes] : llvm::enumerate(to.dims)) {
        AxisList &have = from.dims[d];
        if (have.size() < axes.size() && isPrefixOf(have, axes) &&
            axes[have.size()] == a) {
          scatterDim = d;
          break;
        }
      }
      if (scatterDim) {
        int64_t n = mesh.getAxisSize(a.getValue());
        cur = ReduceScatterOp::create(b, loc, resized(cur, *scatterDim, 1, n),
                                      cur, axisAttr(a),
                                      b.getI64IntegerAttr(*scatterDim));
        from.dims[*scatterDim].push_back(a);
      } else {
        cur = AllReduceOp::create(b, loc, cur.getType(), cur, axisAttr(a));
      }
    }
    from.partial = to.partial;
    for (auto [d, axes] : llvm::enumerate(from.dims)) {
      while (!isPrefixOf(axes, to.dims[d])) {
        StringAttr a = axes.pop_back_val();
        int64_t n = mesh.getAxisSize(a.getValue());
        // A split over `a` that moves to another dimension: one all-to-all
        // instead of gathering the whole dimension and slicing the other.
        if (std::optional<size_t> e = movedSplit(from.dims, to.dims, d, a)) {
          RankedTensorType t = resized(cur, *e, 1, n);
          SmallVector<int64_t> shape(t.getShape());
          shape[d] *= n;
          cur = AllToAllOp::create(
              b, loc, RankedTensorType::get(shape, t.getElementType()), cur,
              axisAttr(a), b.getI64IntegerAttr(*e), b.getI64IntegerAttr(d));
          from.dims[*e].push_back(a);
          continue;
        }
        cur = AllGatherOp::create(b, loc, resized(cur, d, n, 1), cur,
                                  axisAttr(a), b.getI64IntegerAttr(d));
      }
    }
    if (widen)
      cur = CastOp::create(
          b, loc,
          RankedTensorType::get(cast<RankedTensorType>(cur.getType()).getShape(),
                                element),
          cur);
    for (auto [d, axes] : llvm::enumerate(from.dims)) {
      for (size_t k = axes.size(); k < to.dims[d].size(); ++k) {
        StringAttr a = to.dims[d][k];
        int64_t n = mesh.getAxisSize(a.getValue());
        auto t = cast<RankedTensorType>(cur.getType());
        if (t.getDimSize(d) % n != 0)
          return emitError(loc)
                 << "dimension " << d << " of " << globalType(v, layoutOf(v))
                 << " does not divide by " << n << " ranks of '"
                 << a.getValue() << "'";
        cur = ShardSliceOp::create(b, loc, resized(cur, d, 1, n), cur,
                                   axisAttr(a), b.getI64IntegerAttr(d));
      }
    }
    return cur;
  }

  static bool isPrefixOf(ArrayRef<StringAttr> a, ArrayRef<StringAttr> b) {
    return a.size() <= b.size() && a == b.take_front(a.size());
  }

  /// The dimension other than `d` whose next split is `a`, the minor split
  /// `d` drops: its splits so far are a prefix of those `want` has, and
  /// `a` comes next. An all-to-all over `a` then moves the split: rank i
  /// of `a`'s group sends block j of that dimension to rank j and puts
  /// the blocks it receives side by side along `d`, so it holds the whole
  /// of `d` (within the splits before `a`) and block i of the other
  /// dimension, as a gather along `d` and a slice would leave it.
  static std::optional<size_t> movedSplit(ArrayRef<AxisList> have,
                                          ArrayRef<AxisList> want, size_t d,
                                          StringAttr a) {
    for (size_t e = 0; e < have.size(); ++e)
      if (e != d && isPrefixOf(have[e], want[e]) &&
          want[e].size() > have[e].size() && want[e][have[e].size()] == a)
        return e;
    return std::nullopt;
  }

  /// The per-rank value standing for `v` (a shard_as result, or a mean
  /// once scaled, is another value).
  Value localOf(Value v) const {
    Value local = current.lookup(v);
    return local ? local : v;
  }

  /// `v` as the op `user` needs it: `want`.
  FailureOr<Value> reshardForUse(Operation *user, Value v,
                                 const TensorSharding &want) {
    auto remat = rematerialized.find(v);
    if (remat != rematerialized.end()) {
      OpBuilder b(user);
      Value source = remat->second;
      return reshard(b, user->getLoc(), localOf(source), layoutOf(source),
                     want);
    }
    TensorSharding have = layoutOf(v);
    if (have == want)
      return localOf(v);
    auto key = std::make_pair(v, Attribute(want.toAttr(context)));
    if (Value cached = reshards.lookup(key))
      return cached;
    OpBuilder b(context);
    setInsertionAfterLatest(b, v);
    // A pending sum is resolved once, into the layout its users want most;
    // other layouts are made from that one.
    if (have.isPartial() && !want.isPartial()) {
      TensorSharding target = analysis.effective(v);
      if (want != target) {
        FailureOr<Value> resolved = reshardForUse(user, v, target);
        if (failed(resolved))
          return failure();
        setInsertionAfterLatest(b, v);
        FailureOr<Value> out = reshard(b, v.getLoc(), *resolved, target, want);
        if (succeeded(out))
          record(v, key, *out);
        return out;
      }
    }
    FailureOr<Value> out = reshard(b, v.getLoc(), localOf(v), have, want);
    if (succeeded(out))
      record(v, key, *out);
    return out;
  }

  /// Reshards of one value follow each other, right after it is computed,
  /// so each may use the ones made before.
  void setInsertionAfterLatest(OpBuilder &b, Value v) {
    auto it = lastReshard.find(v);
    if (it != lastReshard.end())
      b.setInsertionPointAfter(it->second);
    else if (Operation *def = localOf(v).getDefiningOp())
      b.setInsertionPointAfter(def);
    else
      b.setInsertionPointToStart(&fn.front());
  }
  void record(Value v, std::pair<Value, Attribute> key, Value out) {
    reshards[key] = out;
    if (Operation *op = out.getDefiningOp())
      if (!lastReshard.count(v) || lastReshard[v]->isBeforeInBlock(op))
        lastReshard[v] = op;
  }

  LogicalResult partitionShardAs(ShardAsOp op) {
    TensorSharding target = TensorSharding::fromAttr(op.getSharding());
    Value input = op.getInput();
    pendingErase.push_back(op);
    if (op->hasAttr(kRematerializeAttrName)) {
      // Every use gathers again, just before it.
      rematerialized[op.getResult()] = input;
      return success();
    }
    FailureOr<Value> local = reshardForUse(op, input, target);
    if (failed(local))
      return failure();
    current[op.getResult()] = *local;
    layouts[op.getResult()] = target;
    return success();
  }

  LogicalResult partitionReturn(func::ReturnOp ret) {
    for (OpOperand &operand : ret->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      auto attr = fn.getResultAttrOfType<ShardingAttr>(i, kShardingAttrName);
      TensorSharding want =
          attr ? TensorSharding::fromAttr(attr)
               : TensorSharding::replicated(
                     cast<RankedTensorType>(operand.get().getType()).getRank());
      FailureOr<Value> local = reshardForUse(ret, operand.get(), want);
      if (failed(local))
        return failure();
      operand.set(*local);
    }
    for (ShardAsOp op : llvm::reverse(pendingErase)) {
      op.getResult().replaceAllUsesWith(op.getInput());
      op.erase();
    }
    fn.setType(FunctionType::get(context, fn.front().getArgumentTypes(),
                                 ret.getOperandTypes()));
    return success();
  }

  LogicalResult partitionOp(Operation *op) {
    // A pipeline transfer moves this rank's block of a value whose layout
    // both sides pinned (--weft-apply-mesh puts a weft.shard_as on a
    // send's input and on a receive's result).
    if (auto send = dyn_cast<SendOp>(op)) {
      FailureOr<Value> local =
          reshardForUse(op, send.getInput(), layoutOf(send.getInput()));
      if (failed(local))
        return failure();
      send.getInputMutable().assign(*local);
      return success();
    }
    if (auto recv = dyn_cast<RecvOp>(op)) {
      auto type = cast<RankedTensorType>(recv.getType());
      TensorSharding layout = TensorSharding::replicated(type.getRank());
      for (Operation *user : recv->getUsers())
        if (auto pin = dyn_cast<ShardAsOp>(user))
          layout = TensorSharding::fromAttr(pin.getSharding());
      FailureOr<RankedTensorType> local = localType(type, layout, [&] {
        return recv.emitError() << "the received value";
      });
      if (failed(local))
        return failure();
      recv.getResult().setType(*local);
      layouts[recv.getResult()] = layout;
      return success();
    }
    auto planned = plans.find(op);
    if (planned == plans.end()) {
      // No rule: the op runs whole on every rank.
      for (OpOperand &operand : op->getOpOperands()) {
        auto type = dyn_cast<RankedTensorType>(operand.get().getType());
        if (!type)
          continue;
        FailureOr<Value> local = reshardForUse(
            op, operand.get(), TensorSharding::replicated(type.getRank()));
        if (failed(local))
          return failure();
        operand.set(*local);
      }
      for (Value result : op->getResults())
        if (auto type = dyn_cast<RankedTensorType>(result.getType()))
          layouts[result] = TensorSharding::replicated(type.getRank());
      return success();
    }
    const ShardingRule *rule = &planned->second.rule;
    ArrayRef<AxisList> axes = planned->second.axes;
    ArrayRef<TensorSharding> results = planned->second.results;
    SmallVector<AxisList> pending;
    for (OpOperand &operand : op->getOpOperands()) {
      unsigned i = operand.getOperandNumber();
      TensorSharding want = analysis.project(rule->operands[i], axes);
      TensorSharding have = layoutOf(operand.get());
      want.partial =
          keptPartial(*rule, results.size(), have, want, results.front());
      FailureOr<Value> local = reshardForUse(op, operand.get(), want);
      if (failed(local))
        return failure();
      operand.set(*local);
      pending.push_back(want.partial);
    }
    joinPendingSum(op, results, pending);
    Value combined = combineShards(op, *rule, axes);
    if (auto conv = dyn_cast<Conv2DOp>(op))
      splitBias(conv, *rule, axes);
    if (auto slice = dyn_cast<SliceOp>(op))
      localizeSlice(slice);
    if (auto dropout = dyn_cast<DropoutOp>(op))
      localizeDropout(dropout, analysis.project(rule->operands[0], axes));
    // A result dimension made of a factor no operand has (a slice's
    // sliced dimension) is computed whole; its split is a local slice.
    llvm::SmallDenseSet<int64_t> operandFactors;
    for (const ShardingRule::ValueFactors &dims : rule->operands)
      for (const auto &factors : dims)
        operandFactors.insert(factors.begin(), factors.end());
    for (auto [r, result] : llvm::enumerate(op->getResults())) {
      auto type = cast<RankedTensorType>(result.getType());
      TensorSharding computed = results[r];
      for (auto [d, factors] : llvm::enumerate(rule->results[r]))
        if (!factors.empty() && !operandFactors.contains(factors.front()))
          computed.dims[d].clear();
      FailureOr<RankedTensorType> local = localType(
          type, computed, [&] { return op->emitOpError("result ") << r; });
      if (failed(local))
        return failure();
      result.setType(*local);
      layouts[result] = computed;
      if (computed != results[r]) {
        OpBuilder b(op->getContext());
        b.setInsertionPointAfter(op);
        FailureOr<Value> split =
            reshard(b, op->getLoc(), result, computed, results[r]);
        if (failed(split))
          return failure();
        current[result] = *split;
        layouts[result] = results[r];
      }
    }
    if (combined) {
      current[op->getResult(0)] = combined;
      superseded.push_back(op);
    }
    return scaleMeans(op, *rule, axes);
  }

  /// A scalar addend without the pending sum its add's result has joins
  /// it as its share (ShardingAnalysis::resultSharding): each rank adds
  /// 1/n of it, so the sum over ranks holds it once (exactly so for a
  /// power-of-two number of ranks).
  /// `pending`: the sum each (local) operand holds pending.
  void joinPendingSum(Operation *op, ArrayRef<TensorSharding> results,
                      ArrayRef<AxisList> pending) {
    if (!isa<AddOp, SubOp>(op) || results.size() != 1 ||
        results.front().rank() != 0 || !results.front().isPartial())
      return;
    for (OpOperand &operand : op->getOpOperands()) {
      int64_t ranks = 1;
      const AxisList &have = pending[operand.getOperandNumber()];
      auto local = cast<RankedTensorType>(operand.get().getType());
      for (StringAttr a : results.front().partial)
        if (!llvm::is_contained(have, a))
          ranks *= mesh.getAxisSize(a.getValue());
      if (ranks == 1 || local.getRank() != 0)
        continue;
      OpBuilder b(op);
      operand.set(grad::scale(b, op->getLoc(), operand.get(), 1.0 / ranks));
    }
  }

  /// The per-rank form of an op over a split axis it reduces or indexes
  /// (vocabulary-parallel softmax, cross-entropy and embedding), built
  /// after it from its local operands; null when that axis is whole.
  Value combineShards(Operation *op, const ShardingRule &rule,
                      ArrayRef<AxisList> axes) {
    OpBuilder b(context);
    b.setInsertionPointAfter(op);
    if (auto gather = dyn_cast<GatherOp>(op)) {
      const AxisList &split = axes[rule.operands[0][gather.getAxis()].front()];
      return split.empty() ? Value() : lookupInShard(b, gather, split);
    }
    if (!isa<SoftmaxOp, LogSoftmaxOp, CrossEntropyOp, LayerNormOp>(op))
      return Value();
    for (auto [f, factor] : llvm::enumerate(rule.factors))
      if (factor.kind == ShardingRule::Kind::Combined && !axes[f].empty())
        return combineOverShards(b, op, axes[f], axesSize(mesh, axes[f]));
    return Value();
  }

  /// A dropout on a block draws the block's part of the whole tensor's
  /// mask: it indexes the mask with the whole tensor's strides, from its
  /// first element's index there (sum over split dimensions of the block's
  /// start times the stride).
  void localizeDropout(DropoutOp dropout, const TensorSharding &layout) {
    if (layout.isReplicated())
      return;
    auto local = cast<RankedTensorType>(dropout.getInput().getType());
    auto global = cast<RankedTensorType>(dropout.getResult().getType());
    OpBuilder b(dropout);
    Location loc = dropout.getLoc();
    auto scalar = RankedTensorType::get({}, b.getI64Type());
    auto constant = [&](int64_t v) -> Value {
      return ConstantOp::create(b, loc, DenseElementsAttr::get(scalar, v));
    };
    dropout.setGlobalShape(global.getShape());
    SmallVector<int64_t> strides = dropout.maskStrides();
    Value offset = dropout.getIndexOffset();
    for (auto [d, axes] : llvm::enumerate(layout.dims)) {
      if (axes.empty())
        continue;
      SmallVector<Attribute> names(axes.begin(), axes.end());
      Value block =
          AxisIndexOp::create(b, loc, scalar, ArrayAttr::get(context, names));
      Value start = MulOp::create(
          b, loc, scalar, block,
          constant(local.getDimSize(d) * strides[d]));
      offset = offset ? AddOp::create(b, loc, scalar, offset, start).getResult()
                      : start;
    }
    dropout.getIndexOffsetMutable().assign(offset);
  }

  /// A convolution over split input channels computes a term of the sum
  /// on each rank; each adds its share of the bias, so the sum holds the
  /// bias once (exactly so for a power-of-two number of ranks).
  void splitBias(Conv2DOp conv, const ShardingRule &rule,
                 ArrayRef<AxisList> axes) {
    int64_t ranks = axesSize(mesh, axes[rule.operands[0][1].front()]);
    if (!conv.getBias() || ranks == 1)
      return;
    OpBuilder b(conv);
    conv.getBiasMutable().assign(
        grad::scale(b, conv.getLoc(), conv.getBias(), 1.0 / ranks));
  }

  /// A slice keeps split dimensions whole (its rule says so), so their
  /// limits are the global sizes: they become the local ones.
  void localizeSlice(SliceOp slice) {
    auto local = cast<RankedTensorType>(slice.getInput().getType());
    auto global = cast<RankedTensorType>(slice.getResult().getType());
    SmallVector<int64_t> limits(slice.getLimits());
    for (int64_t d = 0; d < local.getRank(); ++d)
      if (slice.getStarts()[d] == 0 && slice.getStrides()[d] == 1 &&
          limits[d] == global.getDimSize(d) &&
          local.getDimSize(d) < limits[d])
        limits[d] = local.getDimSize(d);
    slice.setLimits(limits);
  }

  /// A mean over a split dimension is a mean over this rank's block: its
  /// share of the global mean is that times the block's fraction.
  LogicalResult scaleMeans(Operation *op, const ShardingRule &rule,
                           ArrayRef<AxisList> axes) {
    int64_t ranks = 1;
    for (auto [f, factor] : llvm::enumerate(rule.factors))
      if (factor.kind == ShardingRule::Kind::Mean)
        ranks *= axesSize(mesh, axes[f]);
    if (ranks == 1)
      return success();
    OpBuilder b(context);
    for (Value result : op->getResults()) {
      // After the value standing for the result (combineShards' last op).
      Value local = localOf(result);
      b.setInsertionPointAfter(local.getDefiningOp() ? local.getDefiningOp()
                                                     : op);
      current[result] = grad::scale(b, op->getLoc(), local, 1.0 / ranks);
    }
    return success();
  }

  struct Plan {
    ShardingRule rule;
    SmallVector<AxisList> axes;
    SmallVector<TensorSharding> results;
  };

  func::FuncOp fn;
  ShardingAnalysis &analysis;
  llvm::DenseMap<Operation *, Plan> plans;
  MeshAttr mesh;
  MLIRContext *context;
  llvm::DenseMap<Value, TensorSharding> layouts;
  llvm::DenseMap<std::pair<Value, Attribute>, Value> reshards;
  llvm::DenseMap<Value, Operation *> lastReshard;
  llvm::DenseMap<Value, Value> rematerialized, current;
  SmallVector<ShardAsOp> pendingErase;
  /// Ops whose local result another value stands for (combineShards).
  SmallVector<Operation *> superseded;
};

struct PartitionPass : public weft::impl::PartitionPassBase<PartitionPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = module->getAttrOfType<MeshAttr>(kMeshAttrName);
    auto fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!mesh || !fn || fn.isExternal()) {
      module.emitError() << "--weft-partition needs a module with "
                         << kMeshAttrName << " and a function @" << entry
                         << " (run --weft-apply-mesh first)";
      return signalPassFailure();
    }
    if (!llvm::hasSingleElement(fn.getBody())) {
      fn.emitError() << "@" << entry
                     << " must be one block to be partitioned (inline the "
                        "functions it calls first)";
      return signalPassFailure();
    }
    ShardingAnalysis analysis(fn, mesh);
    if (failed(analysis.seed(/*recorded=*/true)))
      return signalPassFailure();
    analysis.run();
    Partitioner partitioner(fn, analysis);
    if (failed(partitioner.run()))
      return signalPassFailure();
  }
};
} // namespace
