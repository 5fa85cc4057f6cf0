//===- Normalization.cpp - ONNX softmax and normalizations to weft --------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Softmax and LogSoftmax (both opset semantics), LayerNormalization, and
// BatchNormalization (inference) and InstanceNormalization as elementwise
// ops on their statistics.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"
#include "weft/Dialect/Weft/IR/TrainStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

/// Softmax and LogSoftmax. From opset 13 they work along one axis (default
/// -1). Before, the input is seen as a matrix [prod(dims[:axis]),
/// prod(dims[axis:])] (default axis 1) normalized along its rows, which
/// differs from one-axis softmax unless axis is the last one.
template <typename OpTy>
LegalizeResult legalizeSoftmax(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  int64_t axis = ctx.opset >= 13 ? -1 : 1;
  if (failed(in) || failed(ctx.getInt("axis", axis)))
    return failure();
  Value x = in->front();
  ArrayRef<int64_t> shape = shapeOf(x);
  int64_t rank = shape.size();
  FailureOr<int64_t> a = ctx.normalizeAxis(axis, rank);
  if (failed(a))
    return failure();
  if (ctx.opset >= 13 || *a == rank - 1)
    return one(ctx.create<OpTy>({x}, {ctx.i64Attr("axis", *a)}));
  FailureOr<Value> flat = ctx.reshape(
      x, {product(shape.take_front(*a)), product(shape.drop_front(*a))});
  if (failed(flat))
    return failure();
  FailureOr<Value> normalized =
      ctx.create<OpTy>({*flat}, {ctx.i64Attr("axis", 1)});
  if (failed(normalized))
    return failure();
  return one(ctx.reshape(*normalized, shape));
}

/// Scale or bias of a layer norm, broadcast to the normalized shape when
/// ONNX's broadcasting allows a smaller one.
FailureOr<Value> fitToNormalized(LegalizeContext &ctx, Value v,
                                 ArrayRef<int64_t> normalized, StringRef what) {
  if (shapeOf(v) == normalized)
    return v;
  std::optional<SmallVector<int64_t>> b =
      broadcastShapes(shapeOf(v), normalized);
  if (!b || ArrayRef<int64_t>(*b) != normalized)
    return ctx.emitError() << what << " of shape " << formatShape(shapeOf(v))
                           << " does not broadcast to the normalized shape "
                           << formatShape(normalized);
  return ctx.create<BroadcastOp>(
      {v}, {}, RankedTensorType::get(normalized, elementTypeOf(v)));
}

/// LayerNormalization (opset 17). Only output 0 is supported; Mean and
/// InvStdDev are training-time byproducts weft recomputes itself.
LegalizeResult legalizeLayerNorm(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X", "Scale"});
  int64_t axis = -1;
  double epsilon = 1e-5;
  if (failed(in) || failed(ctx.getInt("axis", axis)) ||
      failed(ctx.getFloat("epsilon", epsilon)))
    return failure();
  Value x = (*in)[0];
  FailureOr<int64_t> a = ctx.normalizeAxis(axis, shapeOf(x).size());
  if (failed(a))
    return failure();
  if (epsilon <= 0)
    return ctx.unsupportedAttr("epsilon", std::to_string(epsilon),
                               "values > 0");
  ArrayRef<int64_t> normalized = shapeOf(x).drop_front(*a);
  FailureOr<Value> scale =
      fitToNormalized(ctx, (*in)[1], normalized, "input 1 (Scale)");
  if (failed(scale))
    return failure();
  FailureOr<Value> bias;
  if (ctx.hasInput(2)) {
    FailureOr<TypedValue<RankedTensorType>> b = ctx.getTensor(2, "B");
    if (failed(b))
      return failure();
    bias = fitToNormalized(ctx, *b, normalized, "input 2 (B)");
  } else {
    auto type = RankedTensorType::get(normalized, elementTypeOf(x));
    bias = ctx.constant(DenseElementsAttr::get(
        type, ctx.builder.getZeroAttr(elementTypeOf(x))));
  }
  if (failed(bias))
    return failure();
  return one(ctx.create<LayerNormOp>(
      {x, *scale, *bias},
      {ctx.i64Attr("axis", *a), ctx.f64Attr("epsilon", epsilon)}));
}

/// Per-channel parameter `i` ([C]) of a normalization over NC... input
/// of `rank`, reshaped to [C, 1, ...] so it broadcasts along axis 1.
FailureOr<Value> getChannelParam(LegalizeContext &ctx, unsigned i,
                                 StringRef what, int64_t channels,
                                 int64_t rank) {
  FailureOr<TypedValue<RankedTensorType>> v = ctx.getTensor(i, what);
  if (failed(v))
    return failure();
  if (shapeOf(*v) != ArrayRef<int64_t>{channels})
    return ctx.emitError() << "input " << i << " (" << what << ") has shape "
                           << formatShape(shapeOf(*v)) << ", expected "
                           << channels << " (one per channel)";
  SmallVector<int64_t> shape(rank - 1, 1);
  shape.front() = channels;
  return ctx.reshape(*v, shape);
}

/// The channel count of X, which must have rank >= `minRank`.
FailureOr<int64_t> getChannels(LegalizeContext &ctx, Value x, int64_t minRank) {
  ArrayRef<int64_t> shape = shapeOf(x);
  if (static_cast<int64_t>(shape.size()) < minRank)
    return ctx.emitError() << "input 0 (X) must have rank >= " << minRank
                           << " (N, C, ...), got " << formatShape(shape);
  return shape[1];
}

/// `centered * rsqrt(var + epsilon) * scale + B`, centered = x - mean.
FailureOr<Value> normalize(LegalizeContext &ctx, FailureOr<Value> centered,
                           FailureOr<Value> var, Value scale, Value bias,
                           double epsilon) {
  FailureOr<Value> eps = ctx.scalar(elementTypeOf(scale), epsilon);
  FailureOr<Value> invStd = make<RsqrtOp>(ctx, make<AddOp>(ctx, var, eps));
  return make<AddOp>(
      ctx, make<MulOp>(ctx, centered, make<MulOp>(ctx, invStd, scale)), bias);
}

/// Running statistics are not trained by gradient: PyTorch updates them by
/// a moving average in train mode. They become buffers, not the parameters
/// a plain import makes of every float initializer.
void freezeStatistics(OnnxNodeOp node) {
  for (unsigned i = 3; i < 5 && i < node.getInputs().size(); ++i) {
    auto arg = dyn_cast<BlockArgument>(node.getInputs()[i]);
    if (!arg)
      continue;
    auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (!fn)
      continue;
    unsigned index = arg.getArgNumber();
    if (auto name = getArgName(fn, index, contract::Role::Param))
      setArgSlot(fn, index, contract::Role::Buffer, name.getValue());
  }
}

/// Makes `value` (shaped like the buffer argument behind input `i`) that
/// buffer's next value: a new result of the function, tagged with the
/// buffer's name. A statistic that is not a buffer argument (a constant)
/// has nothing to carry.
LogicalResult addBufferUpdate(LegalizeContext &ctx, unsigned i,
                              FailureOr<Value> value) {
  if (failed(value))
    return failure();
  auto arg = dyn_cast<BlockArgument>(ctx.node.getInputs()[i]);
  auto fn = ctx.node->getParentOfType<func::FuncOp>();
  if (!arg || !fn || arg.getOwner() != &fn.getBody().front())
    return success();
  auto name = fn.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                              WeftDialect::kBufferAttrName);
  if (!name)
    return success();
  auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
  for (unsigned r = 0, e = fn.getNumResults(); r < e; ++r)
    if (fn.getResultAttr(r, WeftDialect::kBufferAttrName) == name)
      return ctx.emitError() << "running statistic '" << name.getValue()
                             << "' is updated by two BatchNorm nodes; Weft "
                                "supports one BatchNorm per statistic";
  unsigned index = fn.getNumResults();
  ret->insertOperands(ret.getNumOperands(), *value);
  if (failed(fn.insertResult(
          index, (*value).getType(),
          getSlotAttrs(ctx.builder, contract::Role::Buffer,
                       name.getValue()))))
    return ctx.emitError() << "could not add the update of '"
                           << name.getValue() << "' as a result";
  return success();
}

/// BatchNormalization, in all three forms PyTorch exports: inference (one
/// output), training_mode=1 (opset 14+, three outputs) and the five-output
/// form of opset 13 and older. The pass's mode decides the semantics, as
/// model.train()/eval() do in PyTorch, whatever the export's form: eval
/// normalizes with the running statistics; train normalizes with the
/// batch's (biased variance) and returns the running statistics' next
/// values, `momentum * running + (1 - momentum) * batch` with the unbiased
/// batch variance. The other outputs (running statistics, saved mean and
/// variance) are training byproducts weft computes itself.
LegalizeResult legalizeBatchNorm(LegalizeContext &ctx, OnnxNodeOp node,
                                 ValueRange) {
  freezeStatistics(node);
  FailureOr<TypedValue<RankedTensorType>> x = ctx.getTensor(0, "X");
  double epsilon = 1e-5, momentum = 0.9;
  int64_t training = 0, spatial = 1;
  if (failed(x) || failed(ctx.getFloat("epsilon", epsilon)) ||
      failed(ctx.getFloat("momentum", momentum)) ||
      failed(ctx.getInt("training_mode", training)) ||
      failed(ctx.getInt("spatial", spatial)))
    return failure();
  if (spatial != 1)
    return ctx.unsupportedAttr("spatial", std::to_string(spatial), "1");
  FailureOr<int64_t> channels = getChannels(ctx, *x, 2);
  if (failed(channels))
    return failure();
  int64_t rank = shapeOf(*x).size();
  StringRef names[4] = {"scale", "B", "input_mean", "input_var"};
  SmallVector<Value> params;
  for (unsigned i = 0; i < 4; ++i) {
    FailureOr<Value> p = getChannelParam(ctx, i + 1, names[i], *channels, rank);
    if (failed(p))
      return failure();
    params.push_back(*p);
  }
  if (!ctx.training)
    return one(normalize(ctx, make<SubOp>(ctx, *x, params[2]), params[3],
                         params[0], params[1], epsilon));

  // Statistics over every axis but the channels, kept [C, 1, ...] like
  // the parameters.
  SmallVector<int64_t> axes{0};
  for (int64_t a = 2; a < rank; ++a)
    axes.push_back(a);
  SmallVector<NamedAttribute> attrs = {ctx.arrayAttr("axes", axes),
                                       ctx.boolAttr("keep_dims", false)};
  int64_t count = product(shapeOf(*x)) / *channels;
  if (count < 2)
    return ctx.emitError() << "training needs more than one value per "
                              "channel to compute a batch variance (input "
                           << formatShape(shapeOf(*x)) << ")";
  FailureOr<Value> mean = ctx.create<ReduceMeanOp>({*x}, attrs);
  if (failed(mean))
    return failure();
  FailureOr<Value> meanBc = ctx.reshape(*mean, shapeOf(params[0]));
  FailureOr<Value> centered = make<SubOp>(ctx, *x, meanBc);
  FailureOr<Value> squares = make<MulOp>(ctx, centered, centered);
  if (failed(squares))
    return failure();
  FailureOr<Value> var = ctx.create<ReduceMeanOp>({*squares}, attrs);
  if (failed(var))
    return failure();
  FailureOr<Value> y = normalize(ctx, centered, ctx.reshape(*var, shapeOf(params[0])),
                                 params[0], params[1], epsilon);
  if (failed(y))
    return failure();

  Type type = elementTypeOf(*x);
  FailureOr<Value> keep = ctx.scalar(type, momentum);
  FailureOr<Value> take = ctx.scalar(type, 1.0 - momentum);
  FailureOr<Value> unbias = ctx.scalar(type, double(count) / double(count - 1));
  auto update = [&](unsigned i, FailureOr<Value> batch) {
    return make<AddOp>(ctx, make<MulOp>(ctx, node.getInputs()[i], keep),
                       make<MulOp>(ctx, batch, take));
  };
  if (failed(addBufferUpdate(ctx, 3, update(3, mean))) ||
      failed(addBufferUpdate(ctx, 4, update(4, make<MulOp>(ctx, var, unbias)))))
    return failure();
  return one(y);
}

/// InstanceNormalization: statistics over the spatial axes of each
/// (sample, channel), then a per-channel scale and bias. PyTorch's
/// GroupNorm exports as one over [N, groups, -1].
LegalizeResult legalizeInstanceNorm(LegalizeContext &ctx, OnnxNodeOp,
                                    ValueRange) {
  FailureOr<TypedValue<RankedTensorType>> x = ctx.getTensor(0, "input");
  double epsilon = 1e-5;
  if (failed(x) || failed(ctx.getFloat("epsilon", epsilon)))
    return failure();
  FailureOr<int64_t> channels = getChannels(ctx, *x, 3);
  if (failed(channels))
    return failure();
  int64_t rank = shapeOf(*x).size();
  FailureOr<Value> scale = getChannelParam(ctx, 1, "scale", *channels, rank);
  FailureOr<Value> bias = getChannelParam(ctx, 2, "B", *channels, rank);
  if (failed(scale) || failed(bias))
    return failure();
  SmallVector<NamedAttribute> attrs = {
      ctx.arrayAttr("axes", llvm::to_vector(llvm::seq<int64_t>(2, rank))),
      ctx.boolAttr("keep_dims", true)};
  FailureOr<Value> mean = ctx.create<ReduceMeanOp>({*x}, attrs);
  FailureOr<Value> centered = make<SubOp>(ctx, *x, mean);
  FailureOr<Value> squares = make<MulOp>(ctx, centered, centered);
  if (failed(squares))
    return failure();
  FailureOr<Value> var = ctx.create<ReduceMeanOp>({*squares}, attrs);
  return one(normalize(ctx, centered, var, *scale, *bias, epsilon));
}

} // namespace

void weft::onnxtoweft::populateNormalizationLegalizers(
    LegalizerRegistry &registry) {
  registry.add("Softmax", 1, kMaxOpset, legalizeSoftmax<SoftmaxOp>);
  registry.add("LogSoftmax", 1, kMaxOpset, legalizeSoftmax<LogSoftmaxOp>);
  registry.add("LayerNormalization", 17, kMaxOpset, legalizeLayerNorm);
  registry.add("BatchNormalization", 7, kMaxOpset, legalizeBatchNorm);
  registry.add("InstanceNormalization", 6, kMaxOpset, legalizeInstanceNorm);
}
