//===- WeftShardingRules.cpp - How each weft op may be split --------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// ShardingRuleOpInterface for every weft op, as factors shared between
// dimensions (see Sharding.h). A rule says what may be split, never what
// should be: propagation and the planner decide. Dimensions an op reads as
// a whole (a softmax or normalization axis, a sliced or padded axis, the
// spatial axes of a convolution) get no factor, or a Whole one, so a split
// there is gathered first.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "llvm/ADT/TypeSwitch.h"

using namespace mlir;
using namespace weft;

namespace {
using Kind = ShardingRule::Kind;
using ValueFactors = ShardingRule::ValueFactors;

ArrayRef<int64_t> shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType()).getShape();
}

ValueFactors noFactors(Value v) { return ValueFactors(shapeOf(v).size()); }

/// One factor per dimension of `v`, of `kind`.
ValueFactors addFactorsFor(ShardingRule &rule, Value v,
                           Kind kind = Kind::Parallel) {
  ValueFactors dims;
  for (int64_t size : shapeOf(v))
    dims.push_back({rule.addFactor(size, kind)});
  return dims;
}

/// Numpy broadcasting: `operand`'s dims aligned right with the result's;
/// a size-1 dim stretched to a larger size has no factor.
ValueFactors broadcastFactors(ArrayRef<int64_t> operand,
                              ArrayRef<int64_t> result,
                              const ValueFactors &resultFactors) {
  ValueFactors dims(operand.size());
  size_t offset = result.size() - operand.size();
  for (size_t d = 0; d < operand.size(); ++d)
    if (operand[d] == result[d + offset])
      dims[d] = resultFactors[d + offset];
  return dims;
}

/// Elementwise ops with broadcasting operands (add, where, cast, ...).
ShardingRule elementwise(Operation *op, bool additive = false) {
  ShardingRule rule;
  Value result = op->getResult(0);
  ValueFactors out = addFactorsFor(rule, result);
  for (Value operand : op->getOperands())
    rule.operands.push_back(
        broadcastFactors(shapeOf(operand), shapeOf(result), out));
  rule.results.push_back(out);
  rule.additive = additive;
  return rule;
}

/// Ops that read dimensions `whole` of their first operand as a whole and
/// are elementwise elsewhere (softmax, layer norm over trailing axes, the
/// causal mask); further operands broadcast against the result.
ShardingRule elementwiseExcept(Operation *op, ArrayRef<int64_t> whole) {
  ShardingRule rule = elementwise(op);
  for (int64_t d : whole) {
    rule.factors[rule.results[0][d].front()].kind = Kind::Whole;
  }
  return rule;
}

/// Reductions over `axes` of operand 0; `kind` says what a split reduced
/// factor leaves pending.
ShardingRule reduction(Operation *op, ArrayRef<int64_t> axes, bool keepDims,
                       Kind kind) {
  ShardingRule rule;
  Value input = op->getOperand(0);
  ArrayRef<int64_t> shape = shapeOf(input);
  ValueFactors in, out;
  for (int64_t d = 0, e = shape.size(); d < e; ++d) {
    if (llvm::is_contained(axes, d)) {
      in.push_back({rule.addFactor(shape[d], kind)});
      if (keepDims)
        out.push_back({});
      continue;
    }
    int64_t f = rule.addFactor(shape[d]);
    in.push_back({f});
    out.push_back({f});
  }
  rule.operands.push_back(in);
  for (unsigned i = 1; i < op->getNumOperands(); ++i)
    rule.operands.push_back(noFactors(op->getOperand(i)));
  rule.results.push_back(out);
  return rule;
}

ShardingRule matmul(MatMulOp op) {
  ShardingRule rule;
  ArrayRef<int64_t> lhs = shapeOf(op.getLhs()), rhs = shapeOf(op.getRhs()),
                    res = shapeOf(op.getResult());
  size_t batch = res.size() - 2;
  ValueFactors out;
  for (size_t d = 0; d < batch; ++d)
    out.push_back({rule.addFactor(res[d])});
  int64_t m = rule.addFactor(res[batch]), n = rule.addFactor(res[batch + 1]);
  int64_t kSize = op.getTransposeLhs() ? lhs[lhs.size() - 2] : lhs.back();
  int64_t k = rule.addFactor(kSize, Kind::Sum);
  out.push_back({m});
  out.push_back({n});
  auto operand = [&](ArrayRef<int64_t> shape, int64_t row, int64_t col,
                     bool transposed) {
    ValueFactors batchDims = broadcastFactors(
        shape.drop_back(2), res.drop_back(2), ValueFactors(out.begin(),
                                                           out.begin() + batch));
    if (transposed)
      std::swap(row, col);
    batchDims.push_back({row});
    batchDims.push_back({col});
    return batchDims;
  };
  rule.operands.push_back(operand(lhs, m, k, op.getTransposeLhs()));
  rule.operands.push_back(operand(rhs, k, n, op.getTransposeRhs()));
  rule.results.push_back(out);
  return rule;
}

/// A reshape splits and merges dimensions: the dims of input and result
/// are grouped where their running products meet, and each group's
/// factors are the result's dims of that group (a merged input dim holds
/// several, major first). A group that is neither one-to-many nor
/// many-to-one stays whole.
ShardingRule reshape(Operation *op) {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ArrayRef<int64_t> out = shapeOf(op->getResult(0));
  ValueFactors inDims(in.size()), outDims(out.size());
  size_t i = 0, o = 0;
  while (i < in.size() || o < out.size()) {
    // Size-1 dims join no group: they carry no data to split.
    if (i < in.size() && in[i] == 1) {
      ++i;
      continue;
    }
    if (o < out.size() && out[o] == 1) {
      ++o;
      continue;
    }
    if (i == in.size() || o == out.size())
      break;
    size_t i0 = i, o0 = o;
    int64_t pi = in[i++], po = out[o++];
    while (pi != po) {
      if (pi < po && i < in.size())
        pi *= in[i++];
      else if (po < pi && o < out.size())
        po *= out[o++];
      else
        break;
    }
    if (pi != po)
      break;
    // The group's common refinement, major first: walking both sides, the
    // smaller remaining size divides the larger (else the group stays
    // whole) and is a factor of both dims. [8, 32] -> [32, 8] (batch 8,
    // 4 heads of 8) gives input dims {8}, {4, 8} and output dims {8, 4},
    // {8}: the batch is the major factor of both sides' first dims.
    ValueFactors groupIn(i - i0), groupOut(o - o0);
    size_t factorsBefore = rule.factors.size();
    size_t a = i0, b = o0;
    int64_t ra = in[a], rb = out[b];
    bool refined = true;
    while (refined) {
      while (ra == 1 && a + 1 < i)
        ra = in[++a];
      while (rb == 1 && b + 1 < o)
        rb = out[++b];
      if (ra == 1 && rb == 1)
        break;
      if (ra % rb != 0 && rb % ra != 0) {
        refined = false;
        break;
      }
      int64_t size = std::min(ra, rb);
      int64_t f = rule.addFactor(size);
      groupIn[a - i0].push_back(f);
      groupOut[b - o0].push_back(f);
      ra /= size;
      rb /= size;
    }
    if (!refined) {
      rule.factors.resize(factorsBefore);
      continue;
    }
    for (size_t d = i0; d < i; ++d)
      inDims[d] = groupIn[d - i0];
    for (size_t d = o0; d < o; ++d)
      outDims[d] = groupOut[d - o0];
  }
  rule.operands.push_back(inDims);
  rule.results.push_back(outDims);
  rule.additive = true;
  return rule;
}

ShardingRule transpose(TransposeOp op) {
  ShardingRule rule;
  ValueFactors in = addFactorsFor(rule, op.getInput()), out;
  for (int64_t p : op.getPermutation())
    out.push_back(in[p]);
  rule.operands.push_back(in);
  rule.results.push_back(out);
  rule.additive = true;
  return rule;
}

/// Slice and pad: the dims they change are read whole.
ShardingRule slicing(Operation *op, function_ref<bool(int64_t)> changes) {
  ShardingRule rule;
  ValueFactors in = addFactorsFor(rule, op->getOperand(0));
  for (size_t d = 0; d < in.size(); ++d)
    if (changes(d))
      rule.factors[in[d].front()].kind = Kind::Whole;
  rule.operands.push_back(in);
  rule.results.push_back(in);
  rule.additive = true;
  return rule;
}

ShardingRule concat(ConcatOp op) {
  ShardingRule rule;
  ValueFactors out = addFactorsFor(rule, op.getResult());
  rule.factors[out[op.getAxis()].front()].kind = Kind::Whole;
  for (Value v : op.getInputs()) {
    (void)v;
    ValueFactors dims = out;
    dims[op.getAxis()] = {};
    rule.operands.push_back(dims);
  }
  rule.results.push_back(out);
  rule.additive = true;
  return rule;
}

/// gather: input[:axis] + indices + input[axis+1:]; the gathered axis is
/// read whole.
/// The dims of an indexed op's table `in` (its `axis` indexed, the others
/// a factor each) and of the value that pairs with it (the gathered
/// result, the scattered updates): the table's dims with `axis` replaced
/// by the indices' dims.
void indexedFactors(ShardingRule &rule, ArrayRef<int64_t> in, int64_t axis,
                    const ValueFactors &idxDims, ValueFactors &inDims,
                    ValueFactors &paired) {
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    if (d == axis) {
      inDims.push_back({});
      llvm::append_range(paired, idxDims);
      continue;
    }
    int64_t f = rule.addFactor(in[d]);
    inDims.push_back({f});
    paired.push_back({f});
  }
}

ShardingRule gather(GatherOp op) {
  ShardingRule rule;
  ValueFactors inDims, idxDims = addFactorsFor(rule, op.getIndices()), out;
  indexedFactors(rule, shapeOf(op.getInput()), op.getAxis(), idxDims, inDims,
                 out);
  // A table split along the gathered axis (a vocabulary-parallel
  // embedding): each rank looks up the indices in its rows and gives zero
  // for the others, so the results sum to the lookup.
  inDims[op.getAxis()] = {
      rule.addFactor(shapeOf(op.getInput())[op.getAxis()], Kind::Sum)};
  rule.operands = {inDims, idxDims};
  rule.results.push_back(out);
  return rule;
}

/// scatter_add(input, indices, updates): positions of `indices` are summed
/// into the result, so they are sum factors.
ShardingRule scatterAdd(ScatterAddOp op) {
  ShardingRule rule;
  ValueFactors inDims, idxDims = addFactorsFor(rule, op.getIndices(), Kind::Sum),
                       upd;
  indexedFactors(rule, shapeOf(op.getInput()), op.getAxis(), idxDims, inDims,
                 upd);
  rule.operands = {inDims, idxDims, upd};
  // The result may be split along the scattered axis (a vocabulary-
  // parallel embedding's gradient): scattered whole, each rank keeps its
  // rows.
  ValueFactors out = inDims;
  out[op.getAxis()] = {
      rule.addFactor(shapeOf(op.getResult())[op.getAxis()])};
  rule.results.push_back(out);
  return rule;
}

/// NCHW window ops: batch and channels are split, spatial dims are whole.
/// `numOperands` operands share the layout of the first.
ShardingRule window(Operation *op) {
  ShardingRule rule;
  Value first = op->getOperand(0);
  int64_t n = rule.addFactor(shapeOf(first)[0]),
          c = rule.addFactor(shapeOf(first)[1]);
  auto layout = [&](Value v) {
    ValueFactors dims = noFactors(v);
    dims[0] = {n};
    dims[1] = {c};
    return dims;
  };
  for (Value v : op->getOperands())
    rule.operands.push_back(layout(v));
  rule.results.push_back(layout(op->getResult(0)));
  return rule;
}

/// conv2d and its adjoints, as NCHW x OIHW: batch n, output channels o and
/// input channels c; whichever of them the op's result lacks is summed.
/// Grouped convolutions keep their channels whole.
ShardingRule convolution(Operation *op, int64_t groups) {
  ShardingRule rule;
  bool grouped = groups != 1;
  auto channel = [&](int64_t size, bool summed) {
    return rule.addFactor(size, grouped ? Kind::Whole
                                        : summed ? Kind::Sum : Kind::Parallel);
  };
  auto nchw = [](Value v, int64_t a, int64_t b) {
    ValueFactors dims = noFactors(v);
    dims[0] = {a};
    dims[1] = {b};
    return dims;
  };
  if (auto conv = dyn_cast<Conv2DOp>(op)) {
    ArrayRef<int64_t> x = shapeOf(conv.getInput()), w = shapeOf(conv.getFilter());
    int64_t n = rule.addFactor(x[0]), o = channel(w[0], false),
            c = channel(x[1], true);
    rule.operands = {nchw(conv.getInput(), n, c), nchw(conv.getFilter(), o, c)};
    if (conv.getBias())
      rule.operands.push_back({{o}});
    rule.results.push_back(nchw(conv.getResult(), n, o));
  } else if (auto dx = dyn_cast<Conv2DBackwardInputOp>(op)) {
    ArrayRef<int64_t> g = shapeOf(dx.getGrad()), w = shapeOf(dx.getFilter());
    int64_t n = rule.addFactor(g[0]), o = channel(w[0], true),
            c = channel(shapeOf(dx.getResult())[1], false);
    rule.operands = {nchw(dx.getGrad(), n, o), nchw(dx.getFilter(), o, c)};
    rule.results.push_back(nchw(dx.getResult(), n, c));
  } else {
    auto dw = cast<Conv2DBackwardFilterOp>(op);
    ArrayRef<int64_t> g = shapeOf(dw.getGrad()), x = shapeOf(dw.getInput());
    int64_t n = rule.addFactor(g[0], Kind::Sum), o = channel(g[1], false),
            c = channel(x[1], false);
    rule.operands = {nchw(dw.getGrad(), n, o), nchw(dw.getInput(), n, c)};
    rule.results.push_back(nchw(dw.getResult(), o, c));
  }
  return rule;
}

/// A loss that averages over every position of its operands.
ShardingRule meanLoss(Operation *op, bool classesLast) {
  ShardingRule rule;
  Value first = op->getOperand(0);
  ArrayRef<int64_t> shape = shapeOf(first);
  ValueFactors dims;
  for (size_t d = 0; d < shape.size(); ++d)
    dims.push_back({rule.addFactor(shape[d], classesLast && d + 1 == shape.size()
                                                 ? Kind::Combined
                                                 : Kind::Mean)});
  rule.operands.push_back(dims);
  ValueFactors second = dims;
  if (classesLast)
    second.pop_back();
  rule.operands.push_back(second);
  rule.results.push_back({});
  return rule;
}

/// Ops that read one axis of their input as a whole and keep or replace it
/// (top_k's k of n): every other dimension is parallel, the axis never
/// split.
ShardingRule selectAlong(Operation *op, int64_t axis) {
  ShardingRule rule;
  ArrayRef<int64_t> in = shapeOf(op->getOperand(0));
  ValueFactors inDims, outDims;
  for (int64_t d = 0, e = in.size(); d < e; ++d) {
    if (d == axis) {
      inDims.push_back({rule.addFactor(in[d], Kind::Whole)});
      outDims.push_back({});
      continue;
    }
    int64_t f = rule.addFactor(in[d]);
    inDims.push_back({f});
    outDims.push_back({f});
  }
  rule.operands.push_back(inDims);
  rule.results.push_back(outDims);
  return rule;
}

/// lstm, gru and their adjoints: independent sequences, so the batch (dim
/// 1 of `[T, B, ...]`, dim 0 of `[B, H]` states) splits; time is a
/// dependence chain and the hidden units all meet in every step's
/// `h @ recurrence^T`, so both stay whole, and the recurrent weights
/// (`weights`, by operand index) are replicated.
ShardingRule recurrence(Operation *op, ArrayRef<unsigned> weights) {
  ShardingRule rule;
  int64_t b = rule.addFactor(shapeOf(op->getResult(0))[1]);
  auto layout = [&](Value v) {
    ValueFactors dims = noFactors(v);
    dims[shapeOf(v).size() == 3 ? 1 : 0] = {b};
    return dims;
  };
  for (OpOperand &operand : op->getOpOperands())
    rule.operands.push_back(
        llvm::is_contained(weights, operand.getOperandNumber())
            ? noFactors(operand.get())
            : layout(operand.get()));
  for (Value result : op->getResults())
    rule.results.push_back(layout(result));
  return rule;
}

ShardingRule ruleOf(Operation *op) {
  return llvm::TypeSwitch<Operation *, ShardingRule>(op)
      .Case<AddOp, SubOp, NegOp>(
          [](Operation *op) { return elementwise(op, /*additive=*/true); })
      .Case<MulOp, DivOp, PowOp, MaxOp, MinOp, CmpOp, WhereOp, AbsOp, ReluOp,
            TanhOp, SigmoidOp, ExpOp, LogOp, SqrtOp, RsqrtOp, ErfOp, CosOp,
            SinOp, GeluOp, CastOp, FloorOp, CeilOp, RoundOp>(
          [](Operation *op) { return elementwise(op); })
      .Case([](CumSumOp op) {
        return elementwiseExcept(op, {static_cast<int64_t>(op.getAxis())});
      })
      .Case<ArgMaxOp, ArgMinOp>([](auto op) {
        int64_t axis = op.getAxis();
        return reduction(op, axis, op.getKeepDims(), Kind::Whole);
      })
      .Case<TopKOp, TopKIndicesOp>(
          [](auto op) { return selectAlong(op, op.getAxis()); })
      // Linear: a pending sum stays pending through them (a weight
      // gradient reduced over the batch before its sum over ranks).
      .Case<BroadcastOp>(
          [](Operation *op) { return elementwise(op, /*additive=*/true); })
      .Case<SoftmaxOp, LogSoftmaxOp>([](auto op) {
        ShardingRule rule = elementwise(op);
        // Over vocabulary shards: the partitioner combines the ranks'
        // maxima and sums.
        rule.factors[rule.results[0][op.getAxis()].front()].kind =
            Kind::Combined;
        return rule;
      })
      .Case([](LayerNormOp op) {
        SmallVector<int64_t> whole;
        for (int64_t d = op.getAxis(), e = shapeOf(op.getInput()).size();
             d < e; ++d)
          whole.push_back(d);
        ShardingRule rule = elementwiseExcept(op, whole);
        // scale and bias are shaped like the trailing axes, not aligned
        // with a broadcast of the input: they are whole.
        rule.operands[1] = noFactors(op.getScale());
        rule.operands[2] = noFactors(op.getBias());
        // Over one axis, that axis may be split: the partitioner combines
        // the ranks' sums for the mean and the variance, and each rank
        // applies its block of scale and bias.
        if (whole.size() == 1) {
          int64_t axis = whole.front();
          int64_t f = rule.addFactor(shapeOf(op.getInput())[axis],
                                     Kind::Combined);
          rule.operands[0][axis] = {f};
          rule.results[0][axis] = {f};
          rule.operands[1] = {{f}};
          rule.operands[2] = {{f}};
        }
        return rule;
      })
      .Case([](CausalMaskOp op) {
        int64_t rank = shapeOf(op.getInput()).size();
        return elementwiseExcept(op, {rank - 2, rank - 1});
      })
      .Case([](ReduceSumOp op) {
        ShardingRule rule =
            reduction(op, op.getAxes(), op.getKeepDims(), Kind::Sum);
        rule.additive = true;
        return rule;
      })
      .Case([](ReduceMeanOp op) {
        ShardingRule rule =
            reduction(op, op.getAxes(), op.getKeepDims(), Kind::Mean);
        rule.additive = true;
        return rule;
      })
      .Case([](ReduceMaxOp op) {
        return reduction(op, op.getAxes(), op.getKeepDims(), Kind::Whole);
      })
      .Case([](GlobalAvgPoolOp op) { return window(op); })
      .Case([](MatMulOp op) { return matmul(op); })
      .Case([](ReshapeOp op) { return reshape(op); })
      .Case([](TransposeOp op) { return transpose(op); })
      .Case([](SliceOp op) {
        ArrayRef<int64_t> shape = shapeOf(op.getInput());
        ShardingRule rule = slicing(op, [&](int64_t d) {
          return op.getStarts()[d] != 0 || op.getLimits()[d] != shape[d] ||
                 op.getStrides()[d] != 1;
        });
        // A sliced dimension of the result may still be split: the slice
        // runs whole and each rank keeps its block (a weight sliced out of
        // a fused projection, used column-parallel).
        ArrayRef<int64_t> out = shapeOf(op.getResult());
        for (size_t d = 0; d < out.size(); ++d)
          if (rule.factors[rule.results[0][d].front()].kind == Kind::Whole)
            rule.results[0][d] = {rule.addFactor(out[d])};
        return rule;
      })
      .Case([](PadOp op) {
        return slicing(op, [&](int64_t d) {
          return op.getLow()[d] != 0 || op.getHigh()[d] != 0 ||
                 op.getInterior()[d] != 0;
        });
      })
      .Case([](ConcatOp op) { return concat(op); })
      .Case([](GatherOp op) { return gather(op); })
      .Case([](ScatterAddOp op) { return scatterAdd(op); })
      .Case([](OneHotOp op) {
        ShardingRule rule;
        ValueFactors in = addFactorsFor(rule, op.getIndices());
        ValueFactors out = in;
        // The classes may be split: computed whole, each rank keeps its
        // block.
        out.push_back({rule.addFactor(shapeOf(op.getResult()).back())});
        rule.operands.push_back(in);
        rule.results.push_back(out);
        return rule;
      })
      .Case<MaxPool2DOp, AvgPool2DOp, MaxPool2DGradOp, AvgPool2DGradOp>(
          [](Operation *op) { return window(op); })
      .Case([](Conv2DOp op) { return convolution(op, op.getGroups()); })
      .Case([](Conv2DBackwardInputOp op) {
        return convolution(op, op.getGroups());
      })
      .Case([](Conv2DBackwardFilterOp op) {
        return convolution(op, op.getGroups());
      })
      .Case([](CrossEntropyOp op) { return meanLoss(op, true); })
      .Case([](MseOp op) { return meanLoss(op, false); })
      // The mask hashes each element's index in the whole tensor; a block
      // computes those indices from the whole tensor's shape and its first
      // element's index, which the partitioner hands the op.
      .Case([](DropoutOp op) { return elementwise(op); })
      .Case([](LstmOp op) { return recurrence(op, {1}); })
      .Case([](GruOp op) { return recurrence(op, {1, 2}); })
      .Case([](LstmGradOp op) { return recurrence(op, {2}); })
      // With recompute, operand 5 is the recurrence bias.
      .Case([](GruGradOp op) { return recurrence(op, {1, 5}); })
      .Default([](Operation *op) { return ShardingRule::whole(op); });
}

template <typename OpT>
struct ShardingRuleModel
    : public ShardingRuleOpInterface::ExternalModel<ShardingRuleModel<OpT>,
                                                    OpT> {
  ShardingRule getShardingRule(Operation *op) const { return ruleOf(op); }
};

template <typename... Ops>
void attachTo(MLIRContext *context) {
  (Ops::template attachInterface<ShardingRuleModel<Ops>>(*context), ...);
}
} // namespace

void weft::registerShardingRules(MLIRContext *context) {
  attachTo<MatMulOp, AddOp, SubOp, MulOp, DivOp, PowOp, MaxOp, MinOp, CmpOp, WhereOp,
           NegOp, AbsOp, ReluOp, TanhOp, SigmoidOp, ExpOp, LogOp, SqrtOp,
           RsqrtOp, ErfOp, CosOp, SinOp, GeluOp, CastOp, SoftmaxOp,
           LogSoftmaxOp, LayerNormOp, ReduceSumOp, ReduceMeanOp, ReduceMaxOp,
           GatherOp, ReshapeOp, BroadcastOp, TransposeOp, SliceOp, ConcatOp,
           CausalMaskOp, DropoutOp, Conv2DOp, MaxPool2DOp, AvgPool2DOp,
           GlobalAvgPoolOp, CrossEntropyOp, MseOp, ScatterAddOp, PadOp,
           OneHotOp, Conv2DBackwardInputOp, Conv2DBackwardFilterOp,
           MaxPool2DGradOp, AvgPool2DGradOp, ConstantOp, FloorOp, CeilOp,
           RoundOp, CumSumOp, ArgMaxOp, ArgMinOp, TopKOp, TopKIndicesOp,
           LstmOp, GruOp, LstmGradOp, GruGradOp>(
      context);
}
