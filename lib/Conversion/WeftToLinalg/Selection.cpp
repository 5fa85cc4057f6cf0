//===- Selection.cpp - Lowering rounding, cumsum, arg_max/min, top_k ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Rounding maps each element through math.floor/ceil/roundeven. The scan
// and the selections are linalg.generic reductions with an extra loop over
// the scanned or selected axis, so they stay plain parallel loop nests that
// fusion and the CPU and GPU back ends already handle, at the price of
// O(n^2) work per slice for cumsum and top_k (n is a sequence or expert
// axis, not a batch):
//  - cumsum: out[i] = sum_j (j <= i ? x[j] : 0), accumulated as reduce_sum
//    does (f64 for f32), as the evaluator's double running sum;
//  - arg_max/arg_min: one pass carrying (best value, its index);
//  - top_k: rank[p] = #{q : x[q] comes before x[p]} (larger, or equal at a
//    smaller index), then result[j] is the x[p] (or p) with rank j. Equal
//    values keep their index order, as the evaluator's stable sort.
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

template <typename OpTy, typename MathOp>
struct RoundingLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type elementType = op.getType().getElementType();
    rewriter.replaceOp(
        op, mapTensor(rewriter, op.getLoc(), adaptor.getInput(), elementType,
                      [&](OpBuilder &b, Location loc, Value x) {
                        return fromCompute(
                            b, loc,
                            MathOp::create(b, loc, toCompute(b, loc, x)),
                            elementType);
                      }));
    return success();
  }
};

/// Loops over `shape` plus one trailing loop; reads through the map that
/// puts the trailing loop at `axis`.
AffineMap trailingAt(MLIRContext *ctx, unsigned rank, int64_t axis) {
  SmallVector<AffineExpr> exprs;
  for (unsigned d = 0; d < rank; ++d)
    exprs.push_back(getAffineDimExpr(d == axis ? rank : d, ctx));
  return AffineMap::get(rank + 1, 0, exprs, ctx);
}

Value indexAsI64(OpBuilder &b, Location loc, unsigned dim) {
  Value i = linalg::IndexOp::create(b, loc, dim);
  return arith::IndexCastOp::create(b, loc, b.getI64Type(), i);
}

struct CumSumLowering : OpConversionPattern<CumSumOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CumSumOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    Type elementType = type.getElementType();
    bool isFloat = isa<FloatType>(elementType);
    Type acc = computeType(elementType);
    if (elementType.isF32())
      acc = rewriter.getF64Type();
    unsigned rank = type.getRank();
    int64_t axis = op.getAxis();
    bool exclusive = op.getExclusive(), reverse = op.getReverse();
    MLIRContext *ctx = rewriter.getContext();
    SmallVector<int64_t> loops(type.getShape());
    loops.push_back(type.getDimSize(axis));
    Value sum = buildReduction(
                    rewriter, loc, loops, {static_cast<int64_t>(rank)},
                    adaptor.getInput(), trailingAt(ctx, rank, axis), acc, 0.0,
                    [&](OpBuilder &b, Location l,
                        ValueRange args) -> SmallVector<Value> {
                      Value i = linalg::IndexOp::create(b, l, axis);
                      Value j = linalg::IndexOp::create(b, l, rank);
                      // Output i sums the inputs j before it (after it,
                      // reversed).
                      arith::CmpIPredicate pred =
                          reverse ? (exclusive ? arith::CmpIPredicate::sgt
                                               : arith::CmpIPredicate::sge)
                                  : (exclusive ? arith::CmpIPredicate::slt
                                               : arith::CmpIPredicate::sle);
                      Value counted = arith::CmpIOp::create(b, l, pred, j, i);
                      Value x = args[0];
                      if (isFloat) {
                        x = toCompute(b, l, x);
                        if (x.getType() != acc)
                          x = arith::ExtFOp::create(b, l, acc, x);
                        Value zero = scalarConstant(b, l, acc, 0);
                        return {arith::AddFOp::create(
                            b, l, args[1],
                            arith::SelectOp::create(b, l, counted, x, zero))};
                      }
                      Value zero = scalarConstant(b, l, acc, 0);
                      return {arith::AddIOp::create(
                          b, l, args[1],
                          arith::SelectOp::create(b, l, counted, x, zero))};
                    })
                    .front();
    rewriter.replaceOp(op, roundTensor(rewriter, loc, sum, elementType));
    return success();
  }
};

/// arg_max (`maximum`) or arg_min. A NaN beats every number, as in PyTorch.
template <typename OpTy, bool maximum>
struct ArgReduceLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    auto type = cast<RankedTensorType>(adaptor.getInput().getType());
    Type elementType = type.getElementType();
    bool isFloat = isa<FloatType>(elementType);
    Type acc = computeType(elementType);
    int64_t axis = op.getAxis();
    bool last = op.getSelectLastIndex();
    double init;
    if (isFloat)
      init = maximum ? -kInf : kInf;
    else
      init = static_cast<double>(
          maximum ? APInt::getSignedMinValue(acc.getIntOrFloatBitWidth())
                        .getSExtValue()
                  : APInt::getSignedMaxValue(acc.getIntOrFloatBitWidth())
                        .getSExtValue());
    SmallVector<Value> reduced = buildReduction(
        rewriter, loc, type.getShape(), {axis}, adaptor.getInput(),
        rewriter.getMultiDimIdentityMap(type.getRank()),
        {acc, rewriter.getI64Type()}, {init, 0.0},
        [&](OpBuilder &b, Location l, ValueRange args) -> SmallVector<Value> {
          Value x = toCompute(b, l, args[0]);
          Value best = args[1], bestIndex = args[2];
          Value k = indexAsI64(b, l, axis);
          Value better;
          if (isFloat) {
            using P = arith::CmpFPredicate;
            P strict = maximum ? P::OGT : P::OLT;
            P orEqual = maximum ? P::OGE : P::OLE;
            Value wins =
                arith::CmpFOp::create(b, l, last ? orEqual : strict, x, best);
            Value xNan = arith::CmpFOp::create(b, l, P::UNO, x, x);
            Value bestNan = arith::CmpFOp::create(b, l, P::UNO, best, best);
            // A NaN x wins over a number, and over an earlier NaN only
            // when the last index is wanted; nothing beats a NaN best
            // otherwise.
            Value nanWins = last ? xNan
                                 : arith::AndIOp::create(
                                       b, l, xNan,
                                       arith::XOrIOp::create(
                                           b, l, bestNan,
                                           arith::ConstantOp::create(
                                               b, l, b.getBoolAttr(true))));
            better = arith::OrIOp::create(b, l, wins, nanWins);
          } else {
            using P = arith::CmpIPredicate;
            P strict = maximum ? P::sgt : P::slt;
            P orEqual = maximum ? P::sge : P::sle;
            better =
                arith::CmpIOp::create(b, l, last ? orEqual : strict, x, best);
          }
          // The first element always replaces the initial value, so an
          // axis of all -inf (or INT_MIN) still answers index 0.
          Value first =
              arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, k,
                                    scalarConstant(b, l, b.getI64Type(), 0));
          better = arith::OrIOp::create(b, l, better, first);
          return {arith::SelectOp::create(b, l, better, x, best),
                  arith::SelectOp::create(b, l, better, k, bestIndex)};
        });
    rewriter.replaceOp(
        op, reshapeTo(rewriter, loc, reduced[1], op.getType().getShape()));
    return success();
  }
};

/// The rank of every element within its slice along `axis`: how many
/// elements come before it in top_k's order.
Value buildRanks(OpBuilder &b, Location loc, Value x, int64_t axis,
                 bool largest) {
  auto type = cast<RankedTensorType>(x.getType());
  unsigned rank = type.getRank();
  MLIRContext *ctx = b.getContext();
  SmallVector<int64_t> loops(type.getShape());
  loops.push_back(type.getDimSize(axis));
  AffineMap atP =
      AffineMap::getMultiDimIdentityMap(rank + 1, ctx).getMajorSubMap(rank);
  return buildReduction(
             b, loc, loops, {static_cast<int64_t>(rank)}, {x, x},
             {atP, trailingAt(ctx, rank, axis)}, b.getI64Type(), 0.0,
             [&](OpBuilder &nb, Location l,
                 ValueRange args) -> SmallVector<Value> {
               Value p = toCompute(nb, l, args[0]);
               Value q = toCompute(nb, l, args[1]);
               Value pi = linalg::IndexOp::create(nb, l, axis);
               Value qi = linalg::IndexOp::create(nb, l, rank);
               Value ahead =
                   arith::CmpFOp::create(nb, l,
                                         largest ? arith::CmpFPredicate::OGT
                                                 : arith::CmpFPredicate::OLT,
                                         q, p);
               Value tie = arith::AndIOp::create(
                   nb, l,
                   arith::CmpFOp::create(nb, l, arith::CmpFPredicate::OEQ, q,
                                         p),
                   arith::CmpIOp::create(nb, l, arith::CmpIPredicate::slt, qi,
                                         pi));
               Value before = arith::OrIOp::create(nb, l, ahead, tie);
               Value one =
                   arith::ExtUIOp::create(nb, l, nb.getI64Type(), before);
               return {arith::AddIOp::create(nb, l, args[2], one)};
             })
      .front();
}

/// top_k (values) or top_k_indices: result[.., j, ..] is x[p] (or p) for
/// the p of rank j.
template <typename OpTy, bool values>
struct TopKLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    auto inType = cast<RankedTensorType>(x.getType());
    RankedTensorType type = op.getType();
    unsigned rank = type.getRank();
    int64_t axis = op.getAxis();
    MLIRContext *ctx = rewriter.getContext();
    Value ranks = buildRanks(rewriter, loc, x, axis, op.getLargest());
    SmallVector<int64_t> loops(type.getShape());
    loops.push_back(inType.getDimSize(axis));
    AffineMap atP = trailingAt(ctx, rank, axis);
    Type elementType = type.getElementType();
    Value selected =
        buildReduction(
            rewriter, loc, loops, {static_cast<int64_t>(rank)}, {x, ranks},
            {atP, atP}, elementType, 0.0,
            [&](OpBuilder &b, Location l,
                ValueRange args) -> SmallVector<Value> {
              Value j = indexAsI64(b, l, axis);
              Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq,
                                                args[1], j);
              Value picked = values ? args[0] : indexAsI64(b, l, rank);
              return {arith::SelectOp::create(b, l, hit, picked, args[2])};
            })
            .front();
    rewriter.replaceOp(op, selected);
    return success();
  }
};

} // namespace

void weft::lowering::populateSelectionPatterns(RewritePatternSet &patterns) {
  patterns.add<RoundingLowering<FloorOp, math::FloorOp>,
               RoundingLowering<CeilOp, math::CeilOp>,
               RoundingLowering<RoundOp, math::RoundEvenOp>, CumSumLowering,
               ArgReduceLowering<ArgMaxOp, true>,
               ArgReduceLowering<ArgMinOp, false>, TopKLowering<TopKOp, true>,
               TopKLowering<TopKIndicesOp, false>>(patterns.getContext());
}
