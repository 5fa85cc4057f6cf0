//===- CombineShards.cpp - Ops over an axis split across ranks ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Megatron's vocabulary-parallel cross-entropy, written with the dialect's
// own ops and collectives so that the rest of the pipeline (fusion,
// bufferization, the runtime's communication thread) treats it like any
// other part of the step. Only per-row scalars cross ranks: a [rows, 1]
// all-gather of maxima and [rows, 1] all-reduces of sums and picks.
//
//===----------------------------------------------------------------------===//

#include "CombineShards.h"

#include "weft/Dialect/Weft/IR/Builders.h"

using namespace mlir;
using namespace weft;

namespace {
ArrayAttr axesAttr(OpBuilder &b, ArrayRef<StringAttr> axes) {
  SmallVector<Attribute> names(axes.begin(), axes.end());
  return b.getArrayAttr(names);
}

RankedTensorType withDim(Value v, int64_t dim, int64_t size) {
  auto type = cast<RankedTensorType>(v.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] = size;
  return RankedTensorType::get(shape, type.getElementType());
}

/// Row statistics of `x` over its split axis `axis`: the global maximum
/// and the global sum of exp(x - max), both [.., 1, ..], and exp(x - max).
std::tuple<Value, Value, Value> rowStatistics(OpBuilder &b, Location loc, Value x,
                                      int64_t axis,
                                      ArrayRef<StringAttr> axes,
                                      int64_t ranks) {
  auto keep = [&](Value v, bool max) -> Value {
    if (max)
      return ReduceMaxOp::create(b, loc, v, b.getDenseI64ArrayAttr({axis}),
                                 b.getBoolAttr(true));
    return ReduceSumOp::create(b, loc, v, b.getDenseI64ArrayAttr({axis}),
                               b.getBoolAttr(true));
  };
  Value localMax = keep(x, /*max=*/true);
  Value maxima = AllGatherOp::create(b, loc, withDim(localMax, axis, ranks),
                                     localMax, axesAttr(b, axes),
                                     b.getI64IntegerAttr(axis));
  Value max = keep(maxima, /*max=*/true);
  Value exps = ExpOp::create(b, loc, SubOp::create(b, loc, x, max));
  Value localSum = keep(exps, /*max=*/false);
  Value sum = AllReduceOp::create(b, loc, localSum.getType(), localSum,
                                  axesAttr(b, axes));
  return {max, sum, exps};
}
} // namespace

/// Layer norm over an axis split over `axes`: the mean and the (biased)
/// variance from all-reduced sums, scale and bias by this rank's block.
static Value layerNormOverShards(OpBuilder &b, LayerNormOp norm,
                                 ArrayRef<StringAttr> axes, int64_t ranks) {
  Location loc = norm.getLoc();
  Value x = norm.getInput();
  auto type = cast<RankedTensorType>(x.getType());
  int64_t axis = norm.getAxis();
  Type element = type.getElementType();
  auto sum = [&](Value v) -> Value {
    Value local = ReduceSumOp::create(b, loc, v, b.getDenseI64ArrayAttr({axis}),
                                      b.getBoolAttr(true));
    return AllReduceOp::create(b, loc, local.getType(), local,
                               axesAttr(b, axes));
  };
  Value count = grad::scalar(b, loc, element, double(type.getDimSize(axis) * ranks));
  Value mean = DivOp::create(b, loc, sum(x), count);
  Value centered = SubOp::create(b, loc, x, mean);
  Value variance = DivOp::create(
      b, loc, sum(MulOp::create(b, loc, centered, centered)), count);
  Value inverse = RsqrtOp::create(
      b, loc,
      AddOp::create(b, loc, variance,
                    grad::scalar(b, loc, element,
                           norm.getEpsilon().convertToDouble())));
  Value normalized = MulOp::create(b, loc, centered, inverse);
  return AddOp::create(b, loc,
                       MulOp::create(b, loc, normalized, norm.getScale()),
                       norm.getBias());
}

Value weft::combineOverShards(OpBuilder &b, Operation *op,
                              ArrayRef<StringAttr> axes, int64_t ranks) {
  Location loc = op->getLoc();
  if (auto norm = dyn_cast<LayerNormOp>(op))
    return layerNormOverShards(b, norm, axes, ranks);
  Value x = op->getOperand(0);
  auto type = cast<RankedTensorType>(x.getType());
  int64_t axis = type.getRank() - 1;
  if (auto softmax = dyn_cast<SoftmaxOp>(op))
    axis = softmax.getAxis();
  else if (auto logSoftmax = dyn_cast<LogSoftmaxOp>(op))
    axis = logSoftmax.getAxis();
  auto [max, sum, exps] = rowStatistics(b, loc, x, axis, axes, ranks);
  if (isa<SoftmaxOp>(op))
    return DivOp::create(b, loc, exps, sum);
  Value logSum = AddOp::create(b, loc, LogOp::create(b, loc, sum), max);
  if (isa<LogSoftmaxOp>(op))
    return SubOp::create(b, loc, x, logSum);
  // Cross-entropy: the mean over positions of log-sum-exp minus the
  // label's logit, which one rank holds.
  auto ce = cast<CrossEntropyOp>(op);
  SmallVector<int64_t> whole(type.getShape());
  whole[axis] *= ranks;
  Value oneHot = OneHotOp::create(
      b, loc, RankedTensorType::get(whole, type.getElementType()),
      ce.getLabels());
  Value mine = ShardSliceOp::create(b, loc, type, oneHot, axesAttr(b, axes),
                                    b.getI64IntegerAttr(axis));
  Value localPick = ReduceSumOp::create(
      b, loc, MulOp::create(b, loc, x, mine), b.getDenseI64ArrayAttr({axis}),
      b.getBoolAttr(true));
  Value pick = AllReduceOp::create(b, loc, localPick.getType(), localPick,
                                   axesAttr(b, axes));
  Value losses = SubOp::create(b, loc, logSum, pick);
  auto all = llvm::to_vector(llvm::seq<int64_t>(0, type.getRank()));
  return ReduceMeanOp::create(b, loc, losses, b.getDenseI64ArrayAttr(all),
                              b.getBoolAttr(false));
}

Value weft::lookupInShard(OpBuilder &b, GatherOp gather,
                          ArrayRef<StringAttr> axes) {
  Location loc = gather.getLoc();
  auto table = cast<RankedTensorType>(gather.getInput().getType());
  Value indices = gather.getIndices();
  auto indexType = cast<RankedTensorType>(indices.getType());
  int64_t axis = gather.getAxis(), rows = table.getDimSize(axis);
  Type f32 = b.getF32Type();
  // Index arithmetic in f32 is exact below 2^24 rows.
  auto asF32 = RankedTensorType::get(indexType.getShape(), f32);
  Value first = MulOp::create(
      b, loc,
      CastOp::create(b, loc, RankedTensorType::get({}, f32),
                     AxisIndexOp::create(
                         b, loc, RankedTensorType::get({}, b.getI64Type()),
                         axesAttr(b, axes))),
      grad::scalar(b, loc, f32, double(rows)));
  Value local =
      SubOp::create(b, loc, CastOp::create(b, loc, asF32, indices), first);
  Value zero = grad::scalar(b, loc, f32, 0.0), last = grad::scalar(b, loc, f32, rows - 1);
  Value mine = WhereOp::create(
      b, loc, CmpOp::create(b, loc, CmpPredicate::ge, local, zero),
      WhereOp::create(b, loc, CmpOp::create(b, loc, CmpPredicate::le, local, last),
                      grad::scalar(b, loc, f32, 1.0), zero),
      zero);
  Value clamped = MinOp::create(b, loc, MaxOp::create(b, loc, local, zero), last);
  Value rowsOfMine = CastOp::create(b, loc, indexType, clamped);
  // The local result: the local table's other axes around the local
  // indices' shape.
  SmallVector<int64_t> shape(table.getShape().take_front(axis));
  llvm::append_range(shape, indexType.getShape());
  llvm::append_range(shape, table.getShape().drop_front(axis + 1));
  auto resultType = RankedTensorType::get(shape, table.getElementType());
  Value looked = GatherOp::create(b, loc, resultType, gather.getInput(),
                                  rowsOfMine, gather.getAxisAttr());
  // The mask, shaped to broadcast over the table's other axes.
  SmallVector<int64_t> maskShape(axis, 1);
  llvm::append_range(maskShape, indexType.getShape());
  maskShape.append(table.getRank() - axis - 1, 1);
  Value mask = ReshapeOp::create(
      b, loc, RankedTensorType::get(maskShape, f32), mine);
  if (resultType.getElementType() != f32)
    mask = CastOp::create(
        b, loc, RankedTensorType::get(maskShape, resultType.getElementType()),
        mask);
  return MulOp::create(b, loc, looked, mask);
}
