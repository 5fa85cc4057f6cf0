//===- Cast.cpp - Lowering weft.cast --------------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weft.cast between any two of f64, f32, bf16, f16, i64, i32 and i1, one
// elementwise generic. The scalar rules are the evaluator's evalCast: float
// to float rounds to nearest even, float to integer truncates toward zero,
// saturates and maps NaN to 0, integer to integer wraps, anything to i1
// tests for non-zero.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

#include <cmath>

using namespace mlir;
using namespace weft;
using namespace weft::lowering;

namespace {

/// Float to signed integer: truncation toward zero, saturating at the
/// type's range, NaN to 0 (the evaluator's floatToInt).
Value floatToInt(OpBuilder &b, Location loc, Value x, IntegerType to) {
  Value v = toCompute(b, loc, x);
  Type ft = v.getType();
  unsigned width = to.getWidth();
  Value lo = scalarConstant(b, loc, ft, -std::ldexp(1.0, width - 1));
  Value hiExclusive = scalarConstant(b, loc, ft, std::ldexp(1.0, width - 1));
  Value isNan = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNO, v, v);
  Value below = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, v, lo);
  Value above =
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, v, hiExclusive);
  Value outside = arith::OrIOp::create(
      b, loc, isNan, arith::OrIOp::create(b, loc, below, above));
  // fptosi is poison out of range, so only in-range values reach it.
  Value safe = arith::SelectOp::create(b, loc, outside,
                                       scalarConstant(b, loc, ft, 0), v);
  Value r = arith::FPToSIOp::create(b, loc, to, safe);
  APInt min = APInt::getSignedMinValue(width);
  APInt max = APInt::getSignedMaxValue(width);
  Value minValue = arith::ConstantOp::create(b, loc, b.getIntegerAttr(to, min));
  Value maxValue = arith::ConstantOp::create(b, loc, b.getIntegerAttr(to, max));
  r = arith::SelectOp::create(b, loc, below, minValue, r);
  return arith::SelectOp::create(b, loc, above, maxValue, r);
}

struct CastLowering : OpConversionPattern<CastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getType());
    if (adaptor.getInput().getType() == type) {
      rewriter.replaceOp(op, adaptor.getInput());
      return success();
    }
    Type to = type.getElementType();
    Value r = mapTensor(rewriter, op.getLoc(), adaptor.getInput(), to,
                        [&](OpBuilder &b, Location loc, Value x) {
                          return castScalar(b, loc, x, to);
                        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

} // namespace

Value lowering::castScalar(OpBuilder &b, Location loc, Value v, Type to) {
  Type from = v.getType();
  if (from == to)
    return v;
  if (auto fromFloat = dyn_cast<FloatType>(from)) {
    if (auto toInt = dyn_cast<IntegerType>(to)) {
      if (toInt.getWidth() == 1) // Non-zero test; NaN counts as non-zero.
        return arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, v,
                                     scalarConstant(b, loc, from, 0));
      return floatToInt(b, loc, v, toInt);
    }
    auto toFloat = cast<FloatType>(to);
    if (toFloat.getWidth() > fromFloat.getWidth())
      return arith::ExtFOp::create(b, loc, toFloat, v);
    // Narrowing rounds to nearest even. bf16 <-> f16 go through f32 exactly;
    // f64 -> bf16/f16 round twice (via f32), which only differs from the
    // evaluator's single rounding on exact f32 ties.
    Value wide = v;
    if (toFloat.getWidth() == fromFloat.getWidth() ||
        (fromFloat.getWidth() == 64 && toFloat.getWidth() == 16)) {
      Type f32 = b.getF32Type();
      wide = fromFloat.getWidth() == 16
                 ? Value(arith::ExtFOp::create(b, loc, f32, v))
                 : Value(arith::TruncFOp::create(b, loc, f32, v));
    }
    return arith::TruncFOp::create(b, loc, toFloat, wide);
  }
  auto fromInt = cast<IntegerType>(from);
  bool isBool = fromInt.getWidth() == 1; // Stored zero-extended: true is 1.
  if (auto toFloat = dyn_cast<FloatType>(to)) {
    // Integers convert in f32 (f64 for f64) and narrow from there.
    Type wide = computeType(toFloat);
    Value f = isBool ? Value(arith::UIToFPOp::create(b, loc, wide, v))
                     : Value(arith::SIToFPOp::create(b, loc, wide, v));
    return fromCompute(b, loc, f, toFloat);
  }
  auto toInt = cast<IntegerType>(to);
  if (toInt.getWidth() == 1)
    return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, v,
                                 scalarConstant(b, loc, from, 0));
  if (toInt.getWidth() < fromInt.getWidth())
    return arith::TruncIOp::create(b, loc, toInt, v);
  if (isBool)
    return arith::ExtUIOp::create(b, loc, toInt, v);
  return arith::ExtSIOp::create(b, loc, toInt, v);
}

void lowering::populateCastPatterns(RewritePatternSet &patterns) {
  patterns.add<CastLowering>(patterns.getContext());
}
