//===- Elementwise.cpp - Lowering elementwise weft ops --------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Constants, arithmetic, comparisons, select, unary math, gelu and the
// causal mask: one all-parallel linalg.generic each, with broadcasting
// in the indexing maps. The scalar code mirrors lib/Evaluator/
// OpsElementwise.cpp; bf16 and f16 are computed in f32.
//
//===----------------------------------------------------------------------===//

#include "Lowerings.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace weft;
using namespace weft::lowering;

namespace {

//===----------------------------------------------------------------------===//
// Scalar arithmetic
//===----------------------------------------------------------------------===//

enum class Binary { Add, Sub, Mul, Div, Pow, Max, Min };

/// `x / y` truncating toward zero without the traps of arith.divsi:
/// INT_MIN / -1 wraps to INT_MIN as in the evaluator, and division by zero
/// (an evaluator error) gives 0.
Value safeDivSI(OpBuilder &b, Location loc, Value x, Value y) {
  Type type = x.getType();
  Value zero = scalarConstant(b, loc, type, 0);
  Value one = scalarConstant(b, loc, type, 1);
  Value minusOne = scalarConstant(b, loc, type, -1);
  Value isZero =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, y, zero);
  Value isMinusOne =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, y, minusOne);
  Value special = arith::OrIOp::create(b, loc, isZero, isMinusOne);
  Value divisor = arith::SelectOp::create(b, loc, special, one, y);
  Value quotient = arith::DivSIOp::create(b, loc, x, divisor);
  Value negated = arith::SubIOp::create(b, loc, zero, x);
  Value r = arith::SelectOp::create(b, loc, isMinusOne, negated, quotient);
  return arith::SelectOp::create(b, loc, isZero, zero, r);
}

Value binaryScalar(OpBuilder &b, Location loc, Binary kind, Value x, Value y) {
  Type type = x.getType();
  if (isa<FloatType>(type)) {
    Value a = toCompute(b, loc, x), c = toCompute(b, loc, y);
    Value r;
    switch (kind) {
    case Binary::Add:
      r = arith::AddFOp::create(b, loc, a, c);
      break;
    case Binary::Sub:
      r = arith::SubFOp::create(b, loc, a, c);
      break;
    case Binary::Mul:
      r = arith::MulFOp::create(b, loc, a, c);
      break;
    case Binary::Div:
      r = arith::DivFOp::create(b, loc, a, c);
      break;
    case Binary::Pow:
      r = math::PowFOp::create(b, loc, a, c);
      break;
    case Binary::Max: // NaN-propagating, as torch.maximum.
      r = arith::MaximumFOp::create(b, loc, a, c);
      break;
    case Binary::Min:
      r = arith::MinimumFOp::create(b, loc, a, c);
      break;
    }
    return fromCompute(b, loc, r, type);
  }
  // Integers wrap at their width, as the evaluator's int64 result wrapped.
  switch (kind) {
  case Binary::Add:
    return arith::AddIOp::create(b, loc, x, y);
  case Binary::Sub:
    return arith::SubIOp::create(b, loc, x, y);
  case Binary::Mul:
    return arith::MulIOp::create(b, loc, x, y);
  case Binary::Div:
    return safeDivSI(b, loc, x, y);
  case Binary::Max:
    return arith::MaxSIOp::create(b, loc, x, y);
  case Binary::Min:
    return arith::MinSIOp::create(b, loc, x, y);
  case Binary::Pow:
    break; // The verifier only lets floats through.
  }
  return {};
}

/// IEEE comparison: ordered predicates are false on NaN, `ne` is unordered
/// (true on NaN), as C++'s operators in the evaluator.
arith::CmpFPredicate floatPredicate(CmpPredicate predicate) {
  switch (predicate) {
  case CmpPredicate::eq:
    return arith::CmpFPredicate::OEQ;
  case CmpPredicate::ne:
    return arith::CmpFPredicate::UNE;
  case CmpPredicate::lt:
    return arith::CmpFPredicate::OLT;
  case CmpPredicate::le:
    return arith::CmpFPredicate::OLE;
  case CmpPredicate::gt:
    return arith::CmpFPredicate::OGT;
  case CmpPredicate::ge:
    return arith::CmpFPredicate::OGE;
  }
  return arith::CmpFPredicate::OEQ;
}

arith::CmpIPredicate intPredicate(CmpPredicate predicate) {
  switch (predicate) {
  case CmpPredicate::eq:
    return arith::CmpIPredicate::eq;
  case CmpPredicate::ne:
    return arith::CmpIPredicate::ne;
  case CmpPredicate::lt:
    return arith::CmpIPredicate::slt;
  case CmpPredicate::le:
    return arith::CmpIPredicate::sle;
  case CmpPredicate::gt:
    return arith::CmpIPredicate::sgt;
  case CmpPredicate::ge:
    return arith::CmpIPredicate::sge;
  }
  return arith::CmpIPredicate::eq;
}

enum class Unary {
  Neg,
  Abs,
  Relu,
  Tanh,
  Sigmoid,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Erf,
  Cos,
  Sin
};

/// Float unary math in the compute type.
Value floatUnary(OpBuilder &b, Location loc, Unary kind, Value x) {
  Type type = x.getType();
  switch (kind) {
  case Unary::Neg:
    return arith::NegFOp::create(b, loc, x);
  case Unary::Abs:
    return math::AbsFOp::create(b, loc, x);
  case Unary::Relu: {
    // `x < 0 ? 0 : x` lets NaN through, as torch.relu does.
    Value zero = scalarConstant(b, loc, type, 0);
    Value negative =
        arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, zero);
    return arith::SelectOp::create(b, loc, negative, zero, x);
  }
  case Unary::Tanh:
    return math::TanhOp::create(b, loc, x);
  case Unary::Sigmoid: {
    Value one = scalarConstant(b, loc, type, 1);
    Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x));
    return arith::DivFOp::create(b, loc, one,
                                 arith::AddFOp::create(b, loc, one, e));
  }
  case Unary::Exp:
    return math::ExpOp::create(b, loc, x);
  case Unary::Log:
    return math::LogOp::create(b, loc, x);
  case Unary::Sqrt:
    return math::SqrtOp::create(b, loc, x);
  case Unary::Rsqrt: {
    // 1 / sqrt(x) rather than math.rsqrt, which may lower to an estimate.
    Value one = scalarConstant(b, loc, type, 1);
    return arith::DivFOp::create(b, loc, one, math::SqrtOp::create(b, loc, x));
  }
  case Unary::Erf:
    return math::ErfOp::create(b, loc, x);
  case Unary::Cos:
    return math::CosOp::create(b, loc, x);
  case Unary::Sin:
    return math::SinOp::create(b, loc, x);
  }
  return {};
}

Value unaryScalar(OpBuilder &b, Location loc, Unary kind, Value x) {
  Type type = x.getType();
  if (isa<FloatType>(type))
    return fromCompute(b, loc, floatUnary(b, loc, kind, toCompute(b, loc, x)),
                       type);
  // Integer neg and abs wrap (-INT_MIN == INT_MIN), as the evaluator's.
  Value zero = scalarConstant(b, loc, type, 0);
  Value negated = arith::SubIOp::create(b, loc, zero, x);
  if (kind == Unary::Neg)
    return negated;
  Value negative =
      arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, x, zero);
  return arith::SelectOp::create(b, loc, negative, negated, x);
}

/// PyTorch's GELU formulas, in the compute type.
Value geluScalar(OpBuilder &b, Location loc, GeluApproximation approximation,
                 Value x) {
  Type type = x.getType();
  auto c = [&](double v) { return scalarConstant(b, loc, type, v); };
  auto mul = [&](Value p, Value q) {
    return arith::MulFOp::create(b, loc, p, q);
  };
  auto add = [&](Value p, Value q) {
    return arith::AddFOp::create(b, loc, p, q);
  };
  if (approximation == GeluApproximation::Tanh) {
    const double beta = M_SQRT2 * M_2_SQRTPI * 0.5; // sqrt(2 / pi)
    Value cube = mul(mul(mul(c(0.044715), x), x), x);
    Value inner = mul(c(beta), add(x, cube));
    Value t = math::TanhOp::create(b, loc, inner);
    return mul(mul(c(0.5), x), add(c(1), t));
  }
  Value e = math::ErfOp::create(b, loc, mul(x, c(M_SQRT1_2)));
  return mul(mul(x, c(0.5)), add(c(1), e));
}

//===----------------------------------------------------------------------===//
// Patterns
//===----------------------------------------------------------------------===//

struct ConstantLowering : OpConversionPattern<ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConstantOp op, OpAdaptor,
                  ConversionPatternRewriter &rewriter) const override {
    auto value = dyn_cast<TypedAttr>(op.getValue());
    if (!value)
      return rewriter.notifyMatchFailure(op,
                                         "constant is not a typed attribute");
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(op, value);
    return success();
  }
};

template <typename OpTy, Binary kind>
struct BinaryLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (kind == Binary::Pow && !isa<FloatType>(op.getType().getElementType()))
      return rewriter.notifyMatchFailure(op, "pow needs floats");
    Value r = buildElementwise(
        rewriter, op.getLoc(), op.getType(),
        ValueRange{adaptor.getLhs(), adaptor.getRhs()},
        [&](OpBuilder &b, Location loc, ValueRange args) -> SmallVector<Value> {
          return {binaryScalar(b, loc, kind, args[0], args[1])};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct CmpLowering : OpConversionPattern<CmpOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CmpOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    CmpPredicate predicate = op.getPredicate();
    Value r = buildElementwise(
        rewriter, op.getLoc(), op.getType(),
        ValueRange{adaptor.getLhs(), adaptor.getRhs()},
        [&](OpBuilder &b, Location loc, ValueRange args) -> SmallVector<Value> {
          if (isa<FloatType>(args[0].getType()))
            return {arith::CmpFOp::create(b, loc, floatPredicate(predicate),
                                          toCompute(b, loc, args[0]),
                                          toCompute(b, loc, args[1]))};
          return {arith::CmpIOp::create(b, loc, intPredicate(predicate),
                                        args[0], args[1])};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct WhereLowering : OpConversionPattern<WhereOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(WhereOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value r = buildElementwise(
        rewriter, op.getLoc(), op.getType(), adaptor.getOperands(),
        [&](OpBuilder &b, Location loc, ValueRange args) -> SmallVector<Value> {
          return {arith::SelectOp::create(b, loc, args[0], args[1], args[2])};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

template <typename OpTy, Unary kind>
struct UnaryLowering : OpConversionPattern<OpTy> {
  using OpConversionPattern<OpTy>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(OpTy op, typename OpTy::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value r = mapTensor(rewriter, op.getLoc(), adaptor.getInput(),
                        op.getType().getElementType(),
                        [&](OpBuilder &b, Location loc, Value x) {
                          return unaryScalar(b, loc, kind, x);
                        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct GeluLowering : OpConversionPattern<GeluOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(GeluOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    GeluApproximation approximation = op.getApproximate();
    Type elementType = op.getType().getElementType();
    Value r = mapTensor(rewriter, op.getLoc(), adaptor.getInput(), elementType,
                        [&](OpBuilder &b, Location loc, Value x) {
                          Value g = geluScalar(b, loc, approximation,
                                               toCompute(b, loc, x));
                          return fromCompute(b, loc, g, elementType);
                        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

struct CausalMaskLowering : OpConversionPattern<CausalMaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CausalMaskOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank();
    int64_t diagonal = op.getDiagonal();
    double fill = op.getFill().convertToDouble();
    Value r = buildParallel(
        rewriter, op.getLoc(), type, adaptor.getInput(),
        rewriter.getMultiDimIdentityMap(rank),
        [&](OpBuilder &b, Location loc, ValueRange args) -> SmallVector<Value> {
          Value i = linalg::IndexOp::create(b, loc, rank - 2);
          Value j = linalg::IndexOp::create(b, loc, rank - 1);
          Value limit =
              arith::AddIOp::create(b, loc, i, indexConstant(b, loc, diagonal));
          Value masked = arith::CmpIOp::create(
              b, loc, arith::CmpIPredicate::sgt, j, limit);
          // The fill is rounded to the element type like any result.
          Value f = scalarConstant(b, loc, args[0].getType(), fill);
          return {arith::SelectOp::create(b, loc, masked, f, args[0])};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

/// SplitMix64's finalizer in i64 arith, bit for bit DropoutOp's.
Value mix64(OpBuilder &b, Location loc, Value x) {
  auto c = [&](uint64_t v) {
    return arith::ConstantIntOp::create(b, loc, b.getI64Type(), int64_t(v));
  };
  x = arith::XOrIOp::create(b, loc, x, arith::ShRUIOp::create(b, loc, x, c(30)));
  x = arith::MulIOp::create(b, loc, x, c(0xBF58476D1CE4E5B9ull));
  x = arith::XOrIOp::create(b, loc, x, arith::ShRUIOp::create(b, loc, x, c(27)));
  x = arith::MulIOp::create(b, loc, x, c(0x94D049BB133111EBull));
  return arith::XOrIOp::create(b, loc, x,
                               arith::ShRUIOp::create(b, loc, x, c(31)));
}

/// weft.dropout: the mask is a hash of the key and the element's linear
/// index, so no mask tensor is ever stored (DropoutOp::keeps).
struct DropoutLowering : OpConversionPattern<DropoutOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(DropoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank();
    Location loc = op.getLoc();
    double ratio = op.getRatio().convertToDouble();
    auto c = [&](OpBuilder &b, uint64_t v) -> Value {
      return arith::ConstantIntOp::create(b, loc, b.getI64Type(), int64_t(v));
    };
    Value seed = tensor::ExtractOp::create(rewriter, loc, adaptor.getSeed(),
                                           ValueRange{});
    Value opKey = mix64(rewriter, loc,
                        c(rewriter, uint64_t(op.getOpId()) +
                                        0x9E3779B97F4A7C15ull));
    Value key = mix64(rewriter, loc,
                      arith::XOrIOp::create(rewriter, loc, seed, opKey));
    SmallVector<int64_t> strides = op.maskStrides();
    // A block of a split tensor counts its elements from its place in
    // the whole (DropoutOp's index_offset).
    Value offset =
        adaptor.getIndexOffset()
            ? tensor::ExtractOp::create(rewriter, loc,
                                        adaptor.getIndexOffset(), ValueRange{})
                  .getResult()
            : c(rewriter, 0);
    double scale = 1.0 / (1.0 - ratio);
    Value r = buildParallel(
        rewriter, loc, type, adaptor.getInput(),
        rewriter.getMultiDimIdentityMap(rank),
        [&](OpBuilder &b, Location loc, ValueRange args) -> SmallVector<Value> {
          Value linear = offset;
          for (int64_t d = 0; d < rank; ++d) {
            Value i = arith::IndexCastOp::create(
                b, loc, b.getI64Type(), linalg::IndexOp::create(b, loc, d));
            linear = arith::AddIOp::create(
                b, loc, linear,
                arith::MulIOp::create(b, loc, i, c(b, strides[d])));
          }
          Value h = mix64(
              b, loc,
              arith::AddIOp::create(
                  b, loc, key,
                  arith::MulIOp::create(b, loc, linear,
                                        c(b, 0x9E3779B97F4A7C15ull))));
          Value u = arith::ShRUIOp::create(b, loc, h, c(b, 40));
          Value kept = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge,
                                             u, c(b, DropoutOp::threshold(ratio)));
          Type elementType = args[0].getType();
          Value x = toCompute(b, loc, args[0]);
          Value scaled = arith::MulFOp::create(
              b, loc, x, scalarConstant(b, loc, x.getType(), scale));
          Value zero = scalarConstant(b, loc, x.getType(), 0.0);
          return {fromCompute(b, loc,
                              arith::SelectOp::create(b, loc, kept, scaled, zero),
                              elementType)};
        });
    rewriter.replaceOp(op, r);
    return success();
  }
};

} // namespace

void lowering::populateElementwisePatterns(RewritePatternSet &patterns) {
  patterns.add<DropoutLowering>(patterns.getContext());
  patterns.add<
      ConstantLowering, CmpLowering, WhereLowering, GeluLowering,
      CausalMaskLowering, BinaryLowering<AddOp, Binary::Add>,
      BinaryLowering<SubOp, Binary::Sub>, BinaryLowering<MulOp, Binary::Mul>,
      BinaryLowering<DivOp, Binary::Div>, BinaryLowering<PowOp, Binary::Pow>,
      BinaryLowering<MaxOp, Binary::Max>, BinaryLowering<MinOp, Binary::Min>,
      UnaryLowering<NegOp, Unary::Neg>, UnaryLowering<AbsOp, Unary::Abs>,
      UnaryLowering<ReluOp, Unary::Relu>, UnaryLowering<TanhOp, Unary::Tanh>,
      UnaryLowering<SigmoidOp, Unary::Sigmoid>,
      UnaryLowering<ExpOp, Unary::Exp>, UnaryLowering<LogOp, Unary::Log>,
      UnaryLowering<SqrtOp, Unary::Sqrt>, UnaryLowering<RsqrtOp, Unary::Rsqrt>,
      UnaryLowering<ErfOp, Unary::Erf>, UnaryLowering<CosOp, Unary::Cos>,
      UnaryLowering<SinOp, Unary::Sin>>(patterns.getContext());
}
