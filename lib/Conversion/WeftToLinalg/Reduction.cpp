//===- Reduction.cpp - Lowering reductions, normalizations and losses -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// reduce_sum/mean/max, global_avg_pool, softmax, log_softmax, layer_norm,
// cross_entropy and mse, each a short chain of linalg.generic reductions and
// elementwise generics on tensors (a fusion pass can later tile a chain into
// one kernel). Accumulators have the compute type (f32 for bf16 and f16);
// the last generic of a chain rounds to the element type. The algorithms
// are the evaluator's (lib/Evaluator/OpsReduction.cpp): max-shifted softmax,
// two-pass biased variance, mean of per-position cross-entropies.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"

#include <limits>

using namespace mlir;
using namespace weft;
using namespace weft::lowering;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

enum class Reduce { Sum, Mean, Max };

/// Accumulates `a` and `x` (both of the accumulator type).
Value combine(OpBuilder &b, Location loc, Reduce kind, Value acc, Value x) {
  bool isFloat = isa<FloatType>(acc.getType());
  if (kind == Reduce::Max)
    return isFloat ? Value(arith::MaximumFOp::create(b, loc, acc, x))
                   : Value(arith::MaxSIOp::create(b, loc, acc, x));
  return isFloat ? Value(arith::AddFOp::create(b, loc, acc, x))
                 : Value(arith::AddIOp::create(b, loc, acc, x));
}

/// Reduces `input` over `axes` into `resultType` (which has the keep_dims
/// shape when the op keeps them).
Value lowerReduce(OpBuilder &b, Location loc, Reduce kind, Value input,
                  ArrayRef<int64_t> axes, RankedTensorType resultType) {
  auto type = cast<RankedTensorType>(input.getType());
  Type elementType = type.getElementType();
  Type acc = computeType(elementType);
  // Sums of f32 accumulate in f64: a gradient that is a small difference
  // of many terms (a bias before BatchNorm, a mean-centred activation)
  // keeps its digits, as PyTorch's cascade summation does. Memory, not
  // the adds, bounds these loops.
  if (kind != Reduce::Max && elementType.isF32())
    acc = b.getF64Type();
  double init = 0;
  if (kind == Reduce::Max)
    init = isa<FloatType>(acc)
               ? -kInf
               : static_cast<double>(
                     APInt::getSignedMinValue(acc.getIntOrFloatBitWidth())
                         .getSExtValue());
  Value reduced =
      buildReduction(b, loc, type.getShape(), axes, input,
                     b.getMultiDimIdentityMap(type.getRank()), acc, init,
                     [&](OpBuilder &nb, Location nl,
                         ValueRange args) -> SmallVector<Value> {
                       Value x = toCompute(nb, nl, args[0]);
                       if (x.getType() != acc)
                         x = arith::ExtFOp::create(nb, nl, acc, x);
                       return {combine(nb, nl, kind, args[1], x)};
                     })
          .front();
  int64_t kept = cast<RankedTensorType>(reduced.getType()).getNumElements();
  double count =
      kept == 0 ? 0 : static_cast<double>(type.getNumElements() / kept);
  if (kind == Reduce::Mean || acc != elementType)
    reduced = mapTensor(b, loc, reduced, elementType,
                        [&](OpBuilder &nb, Location nl, Value v) {
                          if (kind == Reduce::Mean)
                            v = arith::DivFOp::create(
                                nb, nl, v, scalarConstant(nb, nl, acc, count));
                          return fromCompute(nb, nl, v, elementType);
                        });
  return reshapeTo(b, loc, reduced, resultType.getShape());
}

template <typename OpTy, Reduce kind>
struct ReduceLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(op, lowerReduce(rewriter, op.getLoc(), kind,
                                       adaptor.getInput(), op.getAxes(),
                                       op.getType()));
    return success();
  }
};

struct GlobalAvgPoolLowering : OpConversionPattern<GlobalAvgPoolOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GlobalAvgPoolOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    int64_t rank = op.getType().getRank();
    SmallVector<int64_t> axes = llvm::to_vector(llvm::seq<int64_t>(2, rank));
    rewriter.replaceOp(op, lowerReduce(rewriter, op.getLoc(), Reduce::Mean,
                                       adaptor.getInput(), axes, op.getType()));
    return success();
  }
};

/// The maximum of `x` along `axis`, and the sum of exp(x - max): softmax's
/// and cross-entropy's row statistics, built alike so that CSE merges a
/// cross-entropy's with its gradient's softmax (one pass over the logits
/// backward instead of two).
Value rowMax(OpBuilder &b, Location loc, RankedTensorType type, int64_t axis,
             Value x, Type acc) {
  AffineMap id = b.getMultiDimIdentityMap(type.getRank());
  return buildReduction(b, loc, type.getShape(), axis, x, id, acc, -kInf,
                        [&](OpBuilder &nb, Location l,
                            ValueRange args) -> SmallVector<Value> {
                          return {arith::MaximumFOp::create(
                              nb, l, args[1], toCompute(nb, l, args[0]))};
                        })
      .front();
}
Value rowSumOfExponentials(OpBuilder &b, Location loc, RankedTensorType type,
                           int64_t axis, Value x, Value max, Type acc) {
  int64_t rank = type.getRank();
  AffineMap id = b.getMultiDimIdentityMap(rank);
  AffineMap rowMap = projectionMap(b.getContext(), rank, axis);
  return buildReduction(
             b, loc, type.getShape(), axis, ValueRange{x, max}, {id, rowMap},
             acc, 0.0,
             [&](OpBuilder &nb, Location l,
                 ValueRange args) -> SmallVector<Value> {
               Value shifted = arith::SubFOp::create(
                   nb, l, toCompute(nb, l, args[0]), args[1]);
               return {arith::AddFOp::create(
                   nb, l, args[2], math::ExpOp::create(nb, l, shifted))};
             })
      .front();
}

/// Softmax or log-softmax along one axis: max, sum of exp(x - max), then
/// exp(x - max) / sum or (x - max) - log(sum).
template <typename OpTy, bool logarithm>
struct SoftmaxLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    Type acc = computeType(elementType);
    int64_t rank = type.getRank();
    int64_t axis = static_cast<int64_t>(op.getAxis());
    MLIRContext *ctx = rewriter.getContext();
    AffineMap id = rewriter.getMultiDimIdentityMap(rank);
    AffineMap rowMap = projectionMap(ctx, rank, axis);

    Value max = rowMax(rewriter, loc, type, axis, x, acc);
    Value sum = rowSumOfExponentials(rewriter, loc, type, axis, x, max, acc);
    Value r = buildParallel(
        rewriter, loc, type, ValueRange{x, max, sum}, {id, rowMap, rowMap},
        [&](OpBuilder &b, Location l, ValueRange args) -> SmallVector<Value> {
          Value shifted =
              arith::SubFOp::create(b, l, toCompute(b, l, args[0]), args[1]);
          Value v =
              logarithm
                  ? Value(arith::SubFOp::create(
                        b, l, shifted, math::LogOp::create(b, l, args[2])))
                  : Value(arith::DivFOp::create(
                        b, l, math::ExpOp::create(b, l, shifted), args[2]));
          return {fromCompute(b, l, v, elementType)};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// PyTorch's LayerNorm over axes [axis, rank): mean, centred sum of
/// squares, then (x - mean) * rsqrt(var + eps) * scale + bias.
struct LayerNormLowering : OpConversionPattern<LayerNormOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LayerNormOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    Type acc = computeType(elementType);
    int64_t rank = type.getRank();
    int64_t axis = static_cast<int64_t>(op.getAxis());
    MLIRContext *ctx = rewriter.getContext();
    SmallVector<int64_t> inner =
        llvm::to_vector(llvm::seq<int64_t>(axis, rank));
    SmallVector<int64_t> outer = llvm::to_vector(llvm::seq<int64_t>(0, axis));
    double n = static_cast<double>(
        ShapedType::getNumElements(type.getShape().drop_front(axis)));
    double epsilon = op.getEpsilon().convertToDouble();
    AffineMap id = rewriter.getMultiDimIdentityMap(rank);
    AffineMap rowMap = projectionMap(ctx, rank, inner);
    AffineMap paramMap = projectionMap(ctx, rank, outer);

    Value sum =
        buildReduction(rewriter, loc, type.getShape(), inner, x, id, acc, 0.0,
                       [&](OpBuilder &b, Location l,
                           ValueRange args) -> SmallVector<Value> {
                         return {arith::AddFOp::create(
                             b, l, args[1], toCompute(b, l, args[0]))};
                       })
            .front();
    auto centred = [&](OpBuilder &b, Location l, Value v, Value s) -> Value {
      Value mean = arith::DivFOp::create(b, l, s, scalarConstant(b, l, acc, n));
      return arith::SubFOp::create(b, l, toCompute(b, l, v), mean);
    };
    Value squares =
        buildReduction(rewriter, loc, type.getShape(), inner,
                       ValueRange{x, sum}, {id, rowMap}, acc, 0.0,
                       [&](OpBuilder &b, Location l,
                           ValueRange args) -> SmallVector<Value> {
                         Value d = centred(b, l, args[0], args[1]);
                         return {arith::AddFOp::create(
                             b, l, args[2], arith::MulFOp::create(b, l, d, d))};
                       })
            .front();
    Value r = buildParallel(
        rewriter, loc, type,
        ValueRange{x, sum, squares, adaptor.getScale(), adaptor.getBias()},
        {id, rowMap, rowMap, paramMap, paramMap},
        [&](OpBuilder &b, Location l, ValueRange args) -> SmallVector<Value> {
          Value d = centred(b, l, args[0], args[1]);
          Value var = arith::DivFOp::create(b, l, args[2],
                                            scalarConstant(b, l, acc, n));
          Value shifted = arith::AddFOp::create(
              b, l, var, scalarConstant(b, l, acc, epsilon));
          Value rstd =
              arith::DivFOp::create(b, l, scalarConstant(b, l, acc, 1),
                                    math::SqrtOp::create(b, l, shifted));
          Value v =
              arith::MulFOp::create(b, l, arith::MulFOp::create(b, l, d, rstd),
                                    toCompute(b, l, args[3]));
          v = arith::AddFOp::create(b, l, v, toCompute(b, l, args[4]));
          return {fromCompute(b, l, v, elementType)};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// Sums every element of the positions tensors through `term` into a 0-d
/// accumulator, then divides by `count` and rounds: the losses' mean.
Value meanOver(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
               ValueRange inputs, Type acc, RankedTensorType resultType,
               double count,
               function_ref<Value(OpBuilder &, Location, ValueRange)> term) {
  int64_t rank = shape.size();
  SmallVector<int64_t> all = llvm::to_vector(llvm::seq<int64_t>(0, rank));
  SmallVector<AffineMap> maps(inputs.size(), b.getMultiDimIdentityMap(rank));
  Value total =
      buildReduction(b, loc, shape, all, inputs, maps, acc, 0.0,
                     [&](OpBuilder &nb, Location nl,
                         ValueRange args) -> SmallVector<Value> {
                       Value t = term(nb, nl, args.drop_back());
                       return {arith::AddFOp::create(nb, nl, args.back(), t)};
                     })
          .front();
  Type elementType = resultType.getElementType();
  return mapTensor(b, loc, total, elementType,
                   [&](OpBuilder &nb, Location nl, Value v) {
                     Value m = arith::DivFOp::create(
                         nb, nl, v, scalarConstant(nb, nl, acc, count));
                     return fromCompute(nb, nl, m, elementType);
                   });
}

/// Per position: max + log(sum exp(x - max)) - x[label], then the mean.
/// The max and the sum are softmax's (rowMax, rowSumOfExponentials), which
/// the gradient's softmax then reuses; the label's logit is read at the
/// label (a label out of range, an evaluator error, picks nothing).
struct CrossEntropyLowering : OpConversionPattern<CrossEntropyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CrossEntropyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value logits = adaptor.getLogits(), labels = adaptor.getLabels();
    auto type = cast<RankedTensorType>(logits.getType());
    Type acc = computeType(type.getElementType());
    int64_t rank = type.getRank();
    int64_t classAxis = rank - 1;
    Type labelType = cast<RankedTensorType>(labels.getType()).getElementType();
    int64_t classes = type.getDimSize(classAxis);

    Value max = rowMax(rewriter, loc, type, classAxis, logits, acc);
    Value sum =
        rowSumOfExponentials(rewriter, loc, type, classAxis, logits, max, acc);
    auto positions = cast<RankedTensorType>(max.getType());
    Value picked = buildParallel(
        rewriter, loc, positions, labels,
        rewriter.getMultiDimIdentityMap(positions.getRank()),
        [&](OpBuilder &b, Location l, ValueRange args) -> SmallVector<Value> {
          Value zero = scalarConstant(b, l, labelType, 0);
          Value count = scalarConstant(b, l, labelType, double(classes));
          Value inRange = arith::AndIOp::create(
              b, l,
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::sge, args[0],
                                    zero),
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::slt, args[0],
                                    count));
          Value label = arith::SelectOp::create(b, l, inRange, args[0], zero);
          SmallVector<Value> coords;
          for (int64_t d = 0; d < classAxis; ++d)
            coords.push_back(linalg::IndexOp::create(b, l, d));
          coords.push_back(
              arith::IndexCastOp::create(b, l, b.getIndexType(), label));
          Value x =
              toCompute(b, l, tensor::ExtractOp::create(b, l, logits, coords));
          return {arith::SelectOp::create(b, l, inRange, x,
                                          scalarConstant(b, l, acc, 0))};
        });
    Value r = meanOver(rewriter, loc, positions.getShape(),
                       ValueRange{max, sum, picked}, acc, op.getType(),
                       static_cast<double>(positions.getNumElements()),
                       [](OpBuilder &b, Location l, ValueRange args) -> Value {
                         Value lse = arith::AddFOp::create(
                             b, l, args[0], math::LogOp::create(b, l, args[1]));
                         return arith::SubFOp::create(b, l, lse, args[2]);
                       });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct MseLowering : OpConversionPattern<MseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MseOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(adaptor.getPrediction().getType());
    Type acc = computeType(type.getElementType());
    Value r =
        meanOver(rewriter, op.getLoc(), type.getShape(),
                 ValueRange{adaptor.getPrediction(), adaptor.getTarget()}, acc,
                 op.getType(), static_cast<double>(type.getNumElements()),
                 [](OpBuilder &b, Location l, ValueRange args) -> Value {
                   Value d =
                       arith::SubFOp::create(b, l, toCompute(b, l, args[0]),
                                             toCompute(b, l, args[1]));
                   return arith::MulFOp::create(b, l, d, d);
                 });
    rewriter.replaceOp(op, r);
    return success();
  }
};

} // namespace

void lowering::populateReductionPatterns(RewritePatternSet &patterns) {
  patterns.add<ReduceLowering<ReduceSumOp, Reduce::Sum>,
               ReduceLowering<ReduceMeanOp, Reduce::Mean>,
               ReduceLowering<ReduceMaxOp, Reduce::Max>, GlobalAvgPoolLowering,
               SoftmaxLowering<SoftmaxOp, false>,
               SoftmaxLowering<LogSoftmaxOp, true>, LayerNormLowering,
               CrossEntropyLowering, MseLowering>(patterns.getContext());
}
