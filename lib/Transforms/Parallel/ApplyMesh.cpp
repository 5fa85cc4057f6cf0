//===- ApplyMesh.cpp - The layouts a data-parallel plan decides -----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Everything else follows from these by propagation: the batch split gives
// activations their layout and leaves weight gradients partial; ZeRO's
// shards of optimizer state make the update run on shards, which turns the
// gradients' all-reduce into a reduce-scatter and the new parameters' into
// an all-gather.
//
//===----------------------------------------------------------------------===//

#include "ShardingAnalysis.h"
#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Transforms/Parallel/Passes.h"

#include "weft/Transforms/Parallel/TensorParallelPlan.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Transforms/Passes.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/GlobPattern.h"

#include <map>
#include <set>
#include <tuple>

namespace weft {
#define GEN_PASS_DEF_APPLYMESHPASS
#include "weft/Transforms/Parallel/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;
using contract::Role;

namespace {
/// "tp=2,dp=4" -> #weft.mesh<dp = 4, tp = 2>, or an error message. dp is
/// the major axis whatever the order written: ranks are numbered node by
/// node, so a tp group is tp consecutive ranks, inside a node whenever tp
/// divides the ranks per node.
FailureOr<MeshAttr> parseMesh(MLIRContext *context, StringRef text,
                              std::string &error) {
  int64_t sizes[2] = {0, 0};
  const char *axes[2] = {"dp", "tp"};
  SmallVector<StringRef> parts;
  text.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    auto [name, size] = part.trim().split('=');
    name = name.trim();
    int64_t n = 0;
    if (name.empty() || size.trim().getAsInteger(10, n) || n < 1) {
      error = "mesh '" + text.str() +
              "' does not parse: write axes as name=size, e.g. dp=2,tp=2";
      return failure();
    }
    int axis = name == "dp" ? 0 : name == "tp" ? 1 : -1;
    if (axis < 0) {
      error = "mesh axis '" + name.str() +
              "' is not one Weft partitions: use dp (data parallel: the "
              "batch split, ZeRO) and tp (tensor parallel: layers split), "
              "e.g. --mesh dp=2,tp=2";
      return failure();
    }
    if (sizes[axis]) {
      error = "mesh '" + text.str() + "' names " + name.str() + " twice";
      return failure();
    }
    sizes[axis] = n;
  }
  SmallVector<StringAttr> names;
  SmallVector<int64_t> kept;
  for (int axis = 0; axis < 2; ++axis)
    if (sizes[axis]) {
      names.push_back(StringAttr::get(context, axes[axis]));
      kept.push_back(sizes[axis]);
    }
  if (names.empty()) {
    error = "no mesh given: write its axes as name=size, e.g. dp=4";
    return failure();
  }
  return MeshAttr::get(context, names, kept);
}

/// `--shard NAME=LAYOUT`: "h.*.mlp.c_fc.weight=[{tp}, {}]", or
/// "h.*.attn.*=replicated" (whole on every tp rank, whatever its rank).
struct GivenLayout {
  llvm::GlobPattern pattern;
  std::string text;
  TensorSharding layout;
  bool replicated = false;
  bool used = false;
};

struct ApplyMeshPass : public weft::impl::ApplyMeshPassBase<ApplyMeshPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    // A pipeline's rank steps (--weft-pipeline-step) already run over pp:
    // each is laid out over the mesh's other axes, pp staying the major
    // axis, so a pipeline stage's dp x tp ranks are consecutive.
    MeshAttr pipelineMesh;
    if (auto existing = module->getAttrOfType<MeshAttr>(kMeshAttrName)) {
      if (existing.getNames().size() != 1 ||
          existing.getNames()[0].getValue() != "pp") {
        module.emitError() << "the step is already partitioned for "
                           << existing;
        return signalPassFailure();
      }
      pipelineMesh = existing;
    }
    std::string error;
    FailureOr<MeshAttr> parsed = parseMesh(context, mesh, error);
    if (failed(parsed) || zero < 0 || zero > 3) {
      module.emitError() << (failed(parsed) ? error
                                            : "--zero " + std::to_string(zero) +
                                                  " is not a ZeRO stage: use "
                                                  "0, 1, 2 or 3");
      return signalPassFailure();
    }
    meshAttr = *parsed;
    if (pipelineMesh) {
      SmallVector<StringAttr> names(pipelineMesh.getNames());
      SmallVector<int64_t> sizes(pipelineMesh.getSizes());
      llvm::append_range(names, meshAttr.getNames());
      llvm::append_range(sizes, meshAttr.getSizes());
      meshAttr = MeshAttr::get(context, names, sizes);
    }
    dpAxis = StringAttr::get(context, "dp");
    tpAxis = StringAttr::get(context, "tp");
    dp = meshAttr.getAxisSize("dp");
    tp = meshAttr.getAxisSize("tp");
    if (zero > 0 && !dp) {
      module.emitError() << "--zero " << std::to_string(zero)
                         << " shards over data-parallel ranks, and mesh '"
                         << mesh << "' has no dp axis: add dp=N";
      return signalPassFailure();
    }
    if (sequenceParallel && tp < 2) {
      module.emitError()
          << "--sequence-parallel splits the sequence over the tensor-"
             "parallel ranks, and mesh '"
          << mesh << "' has no tp axis of 2 or more: add tp=N";
      return signalPassFailure();
    }
    if (tpPlan != "megatron" && tpPlan != "manual") {
      module.emitError() << "--tp-plan '" << tpPlan
                         << "': use megatron (parameters not given by "
                            "--shard are split as Megatron-LM does) or "
                            "manual (only those given)";
      return signalPassFailure();
    }
    if (!shard.empty() && !tp) {
      module.emitError() << "--shard lays parameters out over tp, and mesh '"
                         << mesh << "' has no tp axis: add tp=N";
      return signalPassFailure();
    }
    SmallVector<func::FuncOp> entries;
    int64_t pipelineRanks = pipelineMesh ? pipelineMesh.getSizes()[0] : 0;
    for (int64_t r = 0; r < std::max<int64_t>(pipelineRanks, 1); ++r) {
      std::string name =
          pipelineMesh ? entry + ".rank" + std::to_string(r) : entry;
      auto found = module.lookupSymbol<func::FuncOp>(name);
      if (!found || found.isExternal()) {
        module.emitError() << "no function @" << name << " to partition";
        return signalPassFailure();
      }
      entries.push_back(found);
    }
    accumSteps = 1;
    if (auto config = module->getAttrOfType<DictionaryAttr>(
            WeftDialect::kTrainConfigAttrName))
      if (auto k = config.getAs<IntegerAttr>("accum_steps"))
        accumSteps = k.getInt();
    if (tp && failed(planTensorParallel(module)))
      return signalPassFailure();
    // Every pipeline rank's parameter types and their tp layouts, so that
    // both ends of a transfer pin it alike (pinTransfers).
    paramTypes.clear();
    microBatchSamples = 0;
    SmallVector<contract::StepSignature> signatures;
    for (func::FuncOp e : entries) {
      FailureOr<contract::StepSignature> signature = readStepSignature(e);
      if (failed(signature))
        return signalPassFailure();
      signatures.push_back(*signature);
      // A micro-batch's samples, as splitBatch will stack them (one rank's
      // batch input is enough: every rank steps through the same batches).
      for (int i : signature->batchArgs()) {
        auto type = cast<RankedTensorType>(e.getArgument(i).getType());
        if (microBatchSamples || type.getRank() == 0)
          continue;
        int64_t batch = type.getDimSize(0);
        microBatchSamples = accumSteps > 1 && batch % accumSteps == 0
                                ? batch / accumSteps
                                : batch;
      }
      for (auto [i, slot] : llvm::enumerate(signature->args)) {
        if (slot.role != Role::Param)
          continue;
        auto type = cast<RankedTensorType>(e.getArgument(i).getType());
        TensorSharding layout = tensorParallelLayout(slot, type);
        auto [it, inserted] = paramTypes.try_emplace(type, layout);
        if (!inserted && it->second != layout)
          it->second = std::nullopt;
      }
    }
    for (auto [e, signature] : llvm::zip(entries, signatures)) {
      fn = e;
      if (failed(layOutEntry(signature)))
        return signalPassFailure();
    }
    findSampleDims(entries);
    for (auto [rank, e] : llvm::enumerate(entries)) {
      fn = e;
      pipelineRank = int64_t(rank);
      pinTransfers();
    }
    if (sequenceParallel)
      splitSequence(module);

    // The step's callees are inlined into it; @forward stays for the model
    // description.
    for (auto other : module.getOps<func::FuncOp>())
      if (!llvm::is_contained(entries, other) && other.getName() != "forward")
        other.setPrivate();
    module->setAttr(kMeshAttrName, meshAttr);
    OpBuilder b(context);
    SmallVector<NamedAttribute> config{
        b.getNamedAttr("mesh", b.getStringAttr(describe(meshAttr))),
        b.getNamedAttr("zero", b.getI64IntegerAttr(zero))};
    if (tp) {
      config.push_back(b.getNamedAttr("tp_plan", b.getStringAttr(tpPlan)));
      config.push_back(b.getNamedAttr("sequence_parallel",
                                      b.getBoolAttr(sequenceParallel)));
    }
    recordTrainConfig(module, config);
  }

  /// The layouts of `fn`'s arguments and results (`signature` is fn's, read
  /// before any layout), and of what it sends to and receives from other
  /// pipeline ranks.
  LogicalResult layOutEntry(const contract::StepSignature &signature) {
    MLIRContext *context = &getContext();
    if (dp)
      for (int i : signature.batchArgs())
        if (failed(splitBatch(i, signature.args[i].name)))
          return failure();
    llvm::StringMap<TensorSharding> byName;
    for (auto [i, slot] : llvm::enumerate(signature.args)) {
      auto type = cast<RankedTensorType>(fn.getArgument(i).getType());
      TensorSharding s = TensorSharding::replicated(type.getRank());
      if (slot.role == Role::Param || slot.role == Role::State)
        s = tensorParallelLayout(slot, type);
      if ((slot.role == Role::Param && zero >= 3) ||
          (slot.role == Role::State && zero >= 1))
        s = zeroSharding(type, s);
      if (!fn.getArgAttr(i, kShardingAttrName))
        fn.setArgAttr(i, kShardingAttrName, s.toAttr(context));
      if (slot.role == Role::Param || slot.role == Role::State)
        byName[std::string(contract::roleName(slot.role)) + ":" + slot.name] =
            s;
    }
    for (auto [i, slot] : llvm::enumerate(signature.results)) {
      auto type = cast<RankedTensorType>(fn.getResultTypes()[i]);
      TensorSharding s = TensorSharding::replicated(type.getRank());
      auto it = byName.find(std::string(contract::roleName(slot.role)) + ":" +
                            slot.name);
      if (it != byName.end())
        s = it->second;
      fn.setResultAttr(i, kShardingAttrName, s.toAttr(context));
    }
    return constrainCalls();
  }

  /// Where a transfer's samples lie, as either end's own propagation of
  /// the batch inputs' dp split finds them (the sender's through the ops
  /// that made the value, the receiver's through those that read it): a
  /// sequence-first activation with as many time steps as samples cannot
  /// be told apart by its shape. Both ends read the one answer, keyed by
  /// (sending rank, receiving rank, tag); where the ends disagree or
  /// neither finds the samples, pinTransfers falls back on the shape.
  void findSampleDims(ArrayRef<func::FuncOp> entries) {
    sampleDims.clear();
    if (!dp || entries.size() < 2)
      return;
    auto dpDim = [&](const TensorSharding &s) -> std::optional<int64_t> {
      for (auto [d, axes] : llvm::enumerate(s.dims))
        if (llvm::is_contained(axes, dpAxis))
          return int64_t(d);
      return std::nullopt;
    };
    // The rank steps call their stages' functions: propagate over a copy
    // with them inlined, as partitioning will see it.
    OwningOpRef<ModuleOp> copy = cast<ModuleOp>(getOperation()->clone());
    PassManager inliner(&getContext());
    inliner.addPass(createInlinerPass());
    if (failed(inliner.run(*copy)))
      return;
    std::map<TransferKey, std::set<int64_t>> found;
    for (auto [rank, entry] : llvm::enumerate(entries)) {
      auto e =
          copy->lookupSymbol<func::FuncOp>(func::FuncOp(entry).getSymName());
      if (!e)
        continue;
      ShardingAnalysis analysis(e, meshAttr);
      if (failed(analysis.seed(/*recorded=*/false)))
        continue;
      analysis.run();
      const int64_t r = int64_t(rank);
      e.walk([&](SendOp send) {
        if (std::optional<int64_t> d = dpDim(analysis.get(send.getInput())))
          found[{r, int64_t(send.getPeer()), int64_t(send.getTag())}].insert(
              *d);
      });
      e.walk([&](RecvOp recv) {
        if (std::optional<int64_t> d =
                dpDim(analysis.effective(recv.getResult())))
          found[{int64_t(recv.getPeer()), r, int64_t(recv.getTag())}].insert(
              *d);
      });
    }
    for (auto &[key, dims] : found)
      if (dims.size() == 1)
        sampleDims[key] = *dims.begin();
  }

  /// What one pipeline rank sends, the peer receives: both sides hold the
  /// value in one layout, fixed here, so their blocks match (each rank of
  /// a stage exchanges with the rank of the next stage at its dp and tp
  /// coordinates). A value shaped like parameters that share one tp
  /// layout (a tied parameter's gradient, swapped by the pipeline's ends)
  /// keeps that layout; any other is split over tp along its second
  /// dimension (an activation's tokens), as Megatron-LM's scatter-gather
  /// does: each tp rank sends 1/tp of what the receiving tp ranks all need,
  /// and they gather it over their own fast link (with sequence
  /// parallelism the residual stream is split so already). Either way
  /// each tp rank sends its own block rather than all of it. Then split
  /// over dp: an activation along its samples' dimension where the two
  /// ends' propagation finds it (findSampleDims), else its first of a
  /// micro-batch's size (its samples, wherever a sequence-first model
  /// keeps them), else along the first dimension whose block divides; each
  /// data-parallel pipeline moves its own rows. Both ends see the same
  /// parameter types and micro-batch (gathered over every pipeline rank), so
  /// they pin a transfer alike.
  ///
  /// At ZeRO 0 a parameter-shaped block received (a tied parameter's
  /// gradient share) and added to this rank's own block is gathered over
  /// dp right after that sum: the optimizer then updates the whole
  /// parameter on every dp rank, as ZeRO 0 does every other. Updating
  /// blocks instead would gather the parameter and both AdamW moments back
  /// (three tensors of its size, not one).
  void pinTransfers() {
    MLIRContext *context = &getContext();
    // Whether the transfer's tp split is its own (an activation's tokens)
    // rather than the value's layout anyway (a parameter's).
    auto paramLayout = [&](Type type) -> std::optional<TensorSharding> {
      auto shared = paramTypes.find(type);
      return tp && shared != paramTypes.end() ? shared->second : std::nullopt;
    };
    auto splitsTokens = [&](Type type) {
      auto tensor = cast<RankedTensorType>(type);
      return tp && !paramLayout(type) && tensor.getRank() >= 2 &&
             tensor.getDimSize(1) % tp == 0;
    };
    auto layoutFor = [&](Type type, TransferKey key) {
      auto tensor = cast<RankedTensorType>(type);
      TensorSharding s = TensorSharding::replicated(tensor.getRank());
      std::optional<TensorSharding> shared = paramLayout(type);
      if (shared)
        s = *shared;
      else if (splitsTokens(type))
        s.dims[1] = {tpAxis};
      if (!dp || tensor.getRank() == 0)
        return s.toAttr(context);
      // An activation's samples: where propagation found them, else the
      // first dimension of a micro-batch's size, so a sequence-first
      // activation ([time, batch, features], an LSTM's) keeps its batch
      // split rather than cutting its time steps (which the token indices
      // that made it could not follow).
      auto splitsSamples = [&](int64_t d) {
        if (d >= tensor.getRank() || !s.dims[d].empty() ||
            tensor.getDimSize(d) % dp != 0)
          return false;
        s.dims[d] = {dpAxis};
        return true;
      };
      if (!shared) {
        if (auto found = sampleDims.find(key);
            found != sampleDims.end() && splitsSamples(found->second))
          return s.toAttr(context);
        for (int64_t d = 0; d < tensor.getRank(); ++d)
          if (tensor.getDimSize(d) == microBatchSamples && splitsSamples(d))
            return s.toAttr(context);
      }
      if (s.dims[0].empty()) {
        if (tensor.getDimSize(0) % dp == 0)
          s.dims[0] = {dpAxis};
        return s.toAttr(context);
      }
      return zeroSharding(tensor, s).toAttr(context);
    };
    // The split is the transfer's alone: the sender cuts its block right
    // before the send (a pin that is only a wish would split the stage's
    // whole residual stream), and without sequence parallelism the
    // receiver gathers it right after the receive.
    fn.walk([&](SendOp send) {
      OpBuilder b(send);
      auto pinned =
          ShardAsOp::create(b, send.getLoc(), send.getInput(),
                            layoutFor(send.getInput().getType(),
                                      {pipelineRank, int64_t(send.getPeer()),
                                       int64_t(send.getTag())}));
      if (splitsTokens(send.getInput().getType()))
        pinned->setAttr(kRematerializeAttrName, UnitAttr::get(context));
      send.getInputMutable().assign(pinned);
    });
    fn.walk([&](RecvOp recv) {
      OpBuilder b(context);
      b.setInsertionPointAfter(recv);
      ShardingAttr layout = layoutFor(
          recv.getResult().getType(),
          {int64_t(recv.getPeer()), pipelineRank, int64_t(recv.getTag())});
      auto pinned =
          ShardAsOp::create(b, recv.getLoc(), recv.getResult(), layout);
      Value received = pinned;
      TensorSharding split = TensorSharding::fromAttr(layout);
      if (!sequenceParallel && splitsTokens(recv.getResult().getType())) {
        for (AxisList &dim : split.dims)
          llvm::erase(dim, tpAxis);
        received = ShardAsOp::create(b, recv.getLoc(), received,
                                     split.toAttr(context));
      }
      recv.getResult().replaceAllUsesExcept(received, pinned);
      auto param = paramTypes.find(recv.getResult().getType());
      if (zero != 0 || !dp || param == paramTypes.end() || !param->second ||
          !received.hasOneUse())
        return;
      auto total = dyn_cast<AddOp>(*received.user_begin());
      if (!total || total.getType() != recv.getResult().getType())
        return;
      b.setInsertionPointAfter(total);
      auto gathered = ShardAsOp::create(b, total.getLoc(), total.getResult(),
                                        param->second->toAttr(context));
      total.getResult().replaceAllUsesExcept(gathered, gathered);
    });
  }

  static std::string describe(MeshAttr mesh) {
    std::string out;
    for (auto [name, size] : llvm::zip(mesh.getNames(), mesh.getSizes()))
      out += (out.empty() ? "" : ",") + name.getValue().str() + "=" +
             std::to_string(size);
    return out;
  }

  /// Reads --shard and chooses the other parameters' tp layouts from the
  /// model's forward function.
  LogicalResult planTensorParallel(ModuleOp module) {
    MLIRContext *context = &getContext();
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    if (!forward || forward.isExternal())
      return module.emitError()
             << "tensor parallelism reads the model's @forward, and the "
                "module has none";
    SmallVector<GivenLayout> given;
    for (const std::string &entry : shard) {
      auto [name, text] = StringRef(entry).split('=');
      name = name.trim();
      text = text.trim();
      auto fail = [&](const Twine &why) {
        return module.emitError() << "--shard '" << entry << "': " << why;
      };
      llvm::Expected<llvm::GlobPattern> pattern =
          llvm::GlobPattern::create(name);
      if (name.empty() || !pattern) {
        if (!pattern)
          llvm::consumeError(pattern.takeError());
        return fail("write it as PARAMETER=LAYOUT, e.g. "
                    "'h.*.mlp.c_fc.weight=[{tp}, {}]' (the name may use * "
                    "and ?)");
      }
      if (text == "replicated") {
        given.push_back({std::move(*pattern), entry, {}, true});
        continue;
      }
      auto attr = text.starts_with("[")
                      ? dyn_cast_or_null<ShardingAttr>(parseAttribute(
                            ("#weft.sharding<" + text + ">").str(), context))
                      : ShardingAttr();
      if (!attr)
        return fail("layout '" + text +
                    "' does not parse: write one {axes} per dimension, "
                    "e.g. [{tp}, {}] splits the rows over tp, or "
                    "'replicated'");
      TensorSharding layout = TensorSharding::fromAttr(attr);
      if (layout.isPartial())
        return fail("a parameter cannot be a pending sum");
      for (const AxisList &axes : layout.dims)
        for (StringAttr axis : axes)
          if (axis != tpAxis)
            return fail("parameters are split over tp only (dp splits the "
                        "batch; --zero shards over dp), not '" +
                        axis.getValue() + "'");
      given.push_back({std::move(*pattern), entry, layout});
    }
    llvm::StringMap<TensorSharding> fixed;
    for (BlockArgument arg : forward.getArguments()) {
      StringAttr name =
          getArgName(forward, arg.getArgNumber(), contract::Role::Param);
      if (!name)
        continue;
      for (GivenLayout &g : given) {
        if (!g.pattern.match(name.getValue()))
          continue;
        g.used = true;
        auto type = cast<RankedTensorType>(arg.getType());
        if (g.replicated) {
          fixed[name.getValue()] = TensorSharding::replicated(type.getRank());
          break;
        }
        std::string why;
        if (g.layout.rank() != type.getRank() ||
            failed(localShape(meshAttr, type.getShape(), g.layout, &why)))
          return module.emitError()
                 << "--shard '" << g.text << "': parameter '"
                 << name.getValue() << "' (" << type << ") cannot be laid "
                 << "out as " << g.layout.toAttr(context) << ": "
                 << (why.empty() ? "the layout has " +
                                       std::to_string(g.layout.rank()) +
                                       " dimension(s), the parameter " +
                                       std::to_string(type.getRank())
                                 : why);
        fixed[name.getValue()] = g.layout;
        break;
      }
    }
    for (const GivenLayout &g : given)
      if (!g.used)
        return module.emitError()
               << "--shard '" << g.text
               << "': no parameter of the model matches; parameters are "
                  "named as in the model (weftc --emit=weft lists them)";
    TensorParallelLayouts plan = weft::planTensorParallel(
        forward, tpAxis, tp, fixed, tpPlan == "megatron");
    // Correct, but tp ranks each doing the whole step is rarely meant.
    if (plan.params.empty() && plan.slices.empty())
      module.emitWarning()
          << "tp=" << tp
          << " splits no parameter of the model (no split of a weight "
             "avoids gathering an activation, or --shard keeps them whole): "
             "each tp rank runs the whole step; use dp for these devices";
    tpLayouts = std::move(plan.params);
    // The step's functions repeat the forward pass: their slices of a
    // fused projection are laid out as the plan's.
    for (auto callee : module.getOps<func::FuncOp>()) {
      if (callee == fn || callee == forward)
        continue;
      callee.walk([&](SliceOp slice) {
        auto it = plan.slices.find(sliceKey(callee, slice));
        if (it == plan.slices.end())
          return;
        OpBuilder b(context);
        b.setInsertionPointAfter(slice);
        auto split = ShardAsOp::create(b, slice.getLoc(), slice.getResult(),
                                       it->second.toAttr(context));
        slice.getResult().replaceAllUsesExcept(split, split);
      });
    }
    return success();
  }

  /// A parameter's tp layout; an optimizer state's ("exp_avg.fc.weight")
  /// is its parameter's.
  TensorSharding tensorParallelLayout(const contract::Slot &slot,
                                      RankedTensorType type) {
    StringRef name = slot.name;
    if (slot.role == Role::State)
      name = name.split('.').second;
    auto it = tpLayouts.find(name);
    if (it == tpLayouts.end() || it->second.rank() != type.getRank() ||
        failed(localShape(meshAttr, type.getShape(), it->second)))
      return TensorSharding::replicated(type.getRank());
    return it->second;
  }

  /// ZeRO's split of `t` over dp on top of its tp layout `base`: the first
  /// dimension whose block divides by dp, else none.
  TensorSharding zeroSharding(RankedTensorType t, TensorSharding base) {
    if (!dp)
      return base;
    FailureOr<SmallVector<int64_t>> local =
        localShape(meshAttr, t.getShape(), base);
    if (failed(local))
      return base;
    for (int64_t d = 0; d < t.getRank(); ++d)
      if ((*local)[d] >= dp && (*local)[d] % dp == 0) {
        base.dims[d].push_back(dpAxis);
        break;
      }
    return base;
  }

  /// Batch input `i`: split its samples over dp. With accumulation the
  /// argument becomes [K, m, ...] and the optimizer's per-micro-batch
  /// slices of rows read [k, :, ...] instead, so the split is along m.
  LogicalResult splitBatch(unsigned i, StringRef name) {
    BlockArgument arg = fn.getArgument(i);
    auto type = cast<RankedTensorType>(arg.getType());
    if (type.getRank() == 0)
      return success();
    int64_t batch = type.getDimSize(0);
    MLIRContext *context = &getContext();
    if (accumSteps <= 1 || batch % accumSteps != 0) {
      if (batch % dp != 0)
        return fn.emitError()
               << "the batch of input '" << name << "' (" << batch
               << " samples) does not divide by dp=" << dp
               << ": export the model with a batch that is a multiple of "
               << dp << ", or choose a dp that divides " << batch;
      TensorSharding s = TensorSharding::replicated(type.getRank());
      s.dims[0] = {dpAxis};
      fn.setArgAttr(i, kShardingAttrName, s.toAttr(context));
      return success();
    }
    int64_t micro = batch / accumSteps;
    if (micro % dp != 0)
      return fn.emitError()
             << "a micro-batch of input '" << name << "' (" << micro
             << " samples: " << batch << " in " << accumSteps
             << " micro-batches) does not divide by dp=" << dp
             << ": choose a batch and --accum-steps whose micro-batch is a "
                "multiple of "
             << dp;
    SmallVector<int64_t> shape{accumSteps, micro};
    llvm::append_range(shape, type.getShape().drop_front());
    auto stacked = RankedTensorType::get(shape, type.getElementType());
    arg.setType(stacked);
    fn.setType(FunctionType::get(context, fn.front().getArgumentTypes(),
                                 fn.getResultTypes()));
    TensorSharding s = TensorSharding::replicated(stacked.getRank());
    s.dims[1] = {dpAxis};
    fn.setArgAttr(i, kShardingAttrName, s.toAttr(context));

    OpBuilder b = OpBuilder::atBlockBegin(&fn.front());
    Value flat;
    for (OpOperand &use : llvm::make_early_inc_range(arg.getUses())) {
      auto slice = dyn_cast<SliceOp>(use.getOwner());
      int64_t k = slice ? slice.getStarts()[0] / micro : -1;
      bool isMicroBatch =
          slice && slice.getStarts()[0] == k * micro &&
          slice.getLimits()[0] == (k + 1) * micro && slice.getStrides()[0] == 1;
      for (int64_t d = 1; isMicroBatch && d < type.getRank(); ++d)
        isMicroBatch = slice.getStarts()[d] == 0 &&
                       slice.getLimits()[d] == type.getDimSize(d) &&
                       slice.getStrides()[d] == 1;
      if (isMicroBatch) {
        b.setInsertionPoint(slice);
        SmallVector<int64_t> starts(stacked.getRank(), 0), strides(
                                                               stacked.getRank(), 1);
        SmallVector<int64_t> limits(stacked.getShape());
        starts[0] = k;
        limits[0] = k + 1;
        Value part = SliceOp::create(b, slice.getLoc(), arg,
                                     b.getDenseI64ArrayAttr(starts),
                                     b.getDenseI64ArrayAttr(limits),
                                     b.getDenseI64ArrayAttr(strides));
        Value rows = ReshapeOp::create(b, slice.getLoc(), slice.getType(), part);
        slice.getResult().replaceAllUsesWith(rows);
        slice.erase();
        continue;
      }
      if (!flat) {
        b.setInsertionPointToStart(&fn.front());
        flat = ReshapeOp::create(b, arg.getLoc(), type, arg);
      }
      use.set(flat);
    }
    return success();
  }

  /// ZeRO-3 gathers parameters where the gradient function uses them;
  /// ZeRO-2 scatters the gradients it returns.
  LogicalResult constrainCalls() {
    if (zero < 2 && !tp)
      return success();
    MLIRContext *context = &getContext();
    SmallVector<func::CallOp> calls(fn.getOps<func::CallOp>());
    llvm::DenseSet<Value> pinnedSums;
    for (func::CallOp call : calls) {
      auto callee =
          SymbolTable::lookupNearestSymbolFrom<func::FuncOp>(call, call.getCalleeAttr());
      if (!callee)
        continue;
      OpBuilder b(call);
      if (zero >= 3) {
        for (OpOperand &operand : call->getOpOperands()) {
          auto arg = dyn_cast<BlockArgument>(operand.get());
          if (!arg || !getArgName(fn, arg.getArgNumber(), Role::Param))
            continue;
          auto whole = ShardAsOp::create(
              b, call.getLoc(), arg,
              gatheredOverDp(fn.getArgAttrOfType<ShardingAttr>(
                                 arg.getArgNumber(), kShardingAttrName))
                  .toAttr(context));
          whole->setAttr(kRematerializeAttrName, UnitAttr::get(context));
          operand.set(whole);
        }
      }
      b.setInsertionPointAfter(call);
      for (unsigned r = 0; r < call.getNumResults(); ++r) {
        if (!getResultName(callee, r, Role::Grad))
          continue;
        Value grad = call.getResult(r);
        // Below ZeRO-2 the layout is pinned on the micro-batches' sum: a
        // pin on each call's gradient would reduce its pending dp sum once
        // per micro-batch instead of once a step.
        if (zero < 2) {
          grad = accumulatedGradient(call, r);
          if (!pinnedSums.insert(grad).second)
            continue;
          b.setInsertionPointAfterValue(grad);
        }
        auto type = cast<RankedTensorType>(grad.getType());
        contract::Slot slot{Role::Param,
                            getResultName(callee, r, Role::Grad).str()};
        TensorSharding split = tensorParallelLayout(slot, type);
        TensorSharding target = zero >= 2 ? zeroSharding(type, split) : split;
        if (target.isReplicated())
          continue;
        auto scattered =
            ShardAsOp::create(b, call.getLoc(), grad, target.toAttr(context));
        // The gradient is computed in its parameter's tp layout from the
        // start: its matmul splits the weight's dimension, and gathers the
        // activation (Megatron's backward), rather than splitting the
        // sequence and reduce-scattering the weight gradient.
        if (!split.isReplicated())
          scattered->setAttr(kPreferAttrName, split.toAttr(context));
        grad.replaceAllUsesExcept(scattered, scattered);
      }
    }
    return success();
  }

  /// The sum of result `r` over every call of `call`'s callee that the
  /// step adds up (micro-batches' gradients), or that result alone.
  static Value accumulatedGradient(func::CallOp call, unsigned r) {
    Value sum = call.getResult(r);
    while (sum.hasOneUse()) {
      auto add = dyn_cast<AddOp>(*sum.user_begin());
      if (!add)
        break;
      Value other = add.getLhs() == sum ? add.getRhs() : add.getLhs();
      // train::accumulateGradients adds each call's to the running sum.
      auto term = other.getDefiningOp<func::CallOp>();
      if (!term || term.getCallee() != call.getCallee() ||
          other != term.getResult(r))
        break;
      sum = add.getResult();
    }
    return sum;
  }

  /// Sequence parallelism: every layer norm of the step reads its input
  /// split over tp along a token dimension (the first after the batch that
  /// is not normalized and divides), its batch over dp. Propagation then
  /// splits the residual stream the same way, so each tensor-parallel
  /// block gathers its input and reduce-scatters its output.
  void splitSequence(ModuleOp module) {
    MLIRContext *context = &getContext();
    bool splitAny = false;
    for (auto callee : module.getOps<func::FuncOp>()) {
      if (callee == fn || callee.getName() == "forward")
        continue;
      callee.walk([&](LayerNormOp norm) {
        auto type = cast<RankedTensorType>(norm.getInput().getType());
        if (type.getRank() < 3)
          return;
        TensorSharding s = TensorSharding::replicated(type.getRank());
        if (dp && type.getDimSize(0) % dp == 0)
          s.dims[0] = {dpAxis};
        for (int64_t d = 1; d < type.getRank(); ++d)
          if (d < norm.getAxis() && type.getDimSize(d) % tp == 0) {
            s.dims[d] = {tpAxis};
            OpBuilder b(norm);
            auto split = ShardAsOp::create(b, norm.getLoc(), norm.getInput(),
                                           s.toAttr(context));
            norm.getInputMutable().assign(split);
            splitAny = true;
            return;
          }
      });
    }
    if (!splitAny)
      module.emitWarning()
          << "--sequence-parallel: the model has no layer norm over a "
             "sequence whose length divides by tp="
          << tp << "; it trains as with tensor parallelism alone";
  }

  /// `s` without its dp splits: a ZeRO-3 parameter as its uses need it.
  TensorSharding gatheredOverDp(ShardingAttr attr) {
    TensorSharding s = TensorSharding::fromAttr(attr);
    for (AxisList &axes : s.dims)
      llvm::erase(axes, dpAxis);
    return s;
  }

  MeshAttr meshAttr;
  StringAttr dpAxis, tpAxis;
  /// Axis sizes; 0 where the mesh has no such axis.
  int64_t dp = 0, tp = 0, accumSteps = 1;
  llvm::StringMap<TensorSharding> tpLayouts;
  /// Every parameter type of the step (of all its pipeline ranks), with its
  /// tp layout where all parameters of that type share one (nullopt where
  /// they differ).
  llvm::DenseMap<Type, std::optional<TensorSharding>> paramTypes;
  /// Samples in a micro-batch (0: the step has no batch input).
  int64_t microBatchSamples = 0;
  /// A transfer: sending pipeline rank, receiving rank, tag.
  using TransferKey = std::tuple<int64_t, int64_t, int64_t>;
  /// Each transfer's samples' dimension, where propagation found it.
  std::map<TransferKey, int64_t> sampleDims;
  /// The pipeline rank of `fn` (0 without a pipeline).
  int64_t pipelineRank = 0;
  func::FuncOp fn;
};
} // namespace
