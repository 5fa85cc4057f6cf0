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

#include "llvm/ADT/StringExtras.h"

namespace weft {
#define GEN_PASS_DEF_APPLYMESHPASS
#include "weft/Transforms/Parallel/Passes.h.inc"
} // namespace weft

using namespace mlir;
using namespace weft;
using contract::Role;

namespace {
/// "dp=2" -> #weft.mesh<dp = 2>, or an error message.
FailureOr<MeshAttr> parseMesh(MLIRContext *context, StringRef text,
                              std::string &error) {
  SmallVector<StringAttr> names;
  SmallVector<int64_t> sizes;
  SmallVector<StringRef> parts;
  text.split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    auto [name, size] = part.trim().split('=');
    int64_t n = 0;
    if (name.trim().empty() || size.trim().getAsInteger(10, n) || n < 1) {
      error = "mesh '" + text.str() +
              "' does not parse: write axes as name=size, e.g. dp=4";
      return failure();
    }
    names.push_back(StringAttr::get(context, name.trim()));
    sizes.push_back(n);
  }
  if (names.empty()) {
    error = "no mesh given: write its axes as name=size, e.g. dp=4";
    return failure();
  }
  for (StringAttr name : names)
    if (name.getValue() != "dp") {
      error = "mesh axis '" + name.getValue().str() +
              "': only data parallelism (dp) can be partitioned so far; "
              "tensor and pipeline axes come with later stages";
      return failure();
    }
  if (names.size() != 1) {
    error = "mesh '" + text.str() + "' names dp twice";
    return failure();
  }
  return MeshAttr::get(context, names, sizes);
}

struct ApplyMeshPass : public weft::impl::ApplyMeshPassBase<ApplyMeshPass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    MLIRContext *context = &getContext();
    if (module->hasAttr(kMeshAttrName)) {
      module.emitError() << "the step is already partitioned for "
                         << module->getAttr(kMeshAttrName);
      return signalPassFailure();
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
    dpAxis = StringAttr::get(context, "dp");
    dp = meshAttr.getAxisSize("dp");
    fn = module.lookupSymbol<func::FuncOp>(entry);
    if (!fn || fn.isExternal()) {
      module.emitError() << "no function @" << entry << " to partition";
      return signalPassFailure();
    }
    FailureOr<contract::StepSignature> signature = readStepSignature(fn);
    if (failed(signature))
      return signalPassFailure();
    accumSteps = 1;
    if (auto config = module->getAttrOfType<DictionaryAttr>(
            WeftDialect::kTrainConfigAttrName))
      if (auto k = config.getAs<IntegerAttr>("accum_steps"))
        accumSteps = k.getInt();

    OpBuilder b(context);
    for (int i : signature->batchArgs())
      if (failed(splitBatch(i, signature->args[i].name)))
        return signalPassFailure();
    llvm::StringMap<TensorSharding> byName;
    for (auto [i, slot] : llvm::enumerate(signature->args)) {
      auto type = cast<RankedTensorType>(fn.getArgument(i).getType());
      TensorSharding s = TensorSharding::replicated(type.getRank());
      if ((slot.role == Role::Param && zero >= 3) ||
          (slot.role == Role::State && zero >= 1))
        s = zeroSharding(type);
      if (!fn.getArgAttr(i, kShardingAttrName))
        fn.setArgAttr(i, kShardingAttrName, s.toAttr(context));
      if (slot.role == Role::Param || slot.role == Role::State)
        byName[std::string(contract::roleName(slot.role)) + ":" + slot.name] =
            s;
    }
    for (auto [i, slot] : llvm::enumerate(signature->results)) {
      auto type = cast<RankedTensorType>(fn.getResultTypes()[i]);
      TensorSharding s = TensorSharding::replicated(type.getRank());
      auto it = byName.find(std::string(contract::roleName(slot.role)) + ":" +
                            slot.name);
      if (it != byName.end())
        s = it->second;
      fn.setResultAttr(i, kShardingAttrName, s.toAttr(context));
    }
    if (failed(constrainCalls()))
      return signalPassFailure();

    // The step's callees are inlined into it; @forward stays for the model
    // description.
    for (auto other : module.getOps<func::FuncOp>())
      if (other != fn && other.getName() != "forward")
        other.setPrivate();
    module->setAttr(kMeshAttrName, meshAttr);
    recordTrainConfig(module, {b.getNamedAttr("mesh", b.getStringAttr(mesh)),
                               b.getNamedAttr("zero", b.getI64IntegerAttr(zero))});
  }

  /// Splits the first dimension of `t` that divides by dp, else none.
  TensorSharding zeroSharding(RankedTensorType t) {
    TensorSharding s = TensorSharding::replicated(t.getRank());
    for (int64_t d = 0; d < t.getRank(); ++d)
      if (t.getDimSize(d) >= dp && t.getDimSize(d) % dp == 0) {
        s.dims[d] = {dpAxis};
        break;
      }
    return s;
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
    if (zero < 2)
      return success();
    MLIRContext *context = &getContext();
    SmallVector<func::CallOp> calls(fn.getOps<func::CallOp>());
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
          auto type = cast<RankedTensorType>(arg.getType());
          auto whole = ShardAsOp::create(
              b, call.getLoc(), arg,
              TensorSharding::replicated(type.getRank()).toAttr(context));
          whole->setAttr(kRematerializeAttrName, UnitAttr::get(context));
          operand.set(whole);
        }
      }
      b.setInsertionPointAfter(call);
      for (unsigned r = 0; r < call.getNumResults(); ++r) {
        if (!getResultName(callee, r, Role::Grad))
          continue;
        Value grad = call.getResult(r);
        auto type = cast<RankedTensorType>(grad.getType());
        auto scattered = ShardAsOp::create(
            b, call.getLoc(), grad, zeroSharding(type).toAttr(context));
        grad.replaceAllUsesExcept(scattered, scattered);
      }
    }
    return success();
  }

  MeshAttr meshAttr;
  StringAttr dpAxis;
  int64_t dp = 1, accumSteps = 1;
  func::FuncOp fn;
};
} // namespace
