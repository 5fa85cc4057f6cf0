//===- WeftGradientsElementwise.cpp - Gradients of elementwise ops --------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Binary ops broadcast, so each operand adjoint is reduced back to the
// operand's shape (reduceToShape). Non-smooth points follow PyTorch: relu
// and abs have derivative 0 at 0, max and min split ties evenly, pow masks
// the 0 * inf cases PyTorch masks.
//
//===----------------------------------------------------------------------===//

#include "WeftGradients.h"

#include "llvm/Support/MathExtras.h"

#include <cmath>

using namespace mlir;
using namespace weft;
using namespace weft::grad;

namespace {

/// Pushes the adjoints `dl` and `dr` (shaped like the result, or null) of a
/// broadcasting binary op, reduced to the operand shapes.
void pushBinary(OpBuilder &b, Operation *op, Value dl, Value dr,
                SmallVectorImpl<Value> &operandGrads) {
  Location loc = op->getLoc();
  Value grads[] = {dl, dr};
  for (auto [operand, g] : llvm::zip(op->getOperands(), grads))
    operandGrads.push_back(
        g ? ifDifferentiable(operand, reduceToShape(b, loc, g, typeOf(operand)))
          : Value());
}

Value cmp(OpBuilder &b, Location loc, CmpPredicate predicate, Value lhs,
          Value rhs) {
  return CmpOp::create(b, loc, predicate, lhs, rhs);
}

/// The share of a max/min result's gradient that goes to lhs: 1 where lhs
/// alone wins, 1/2 on ties (torch.maximum splits them), 0 elsewhere.
Value lhsShare(OpBuilder &b, Location loc, CmpPredicate wins, Value lhs,
               Value rhs) {
  Type et = typeOf(lhs).getElementType();
  Value tie = WhereOp::create(b, loc, cmp(b, loc, CmpPredicate::eq, lhs, rhs),
                              scalar(b, loc, et, 0.5), scalar(b, loc, et, 0));
  return WhereOp::create(b, loc, cmp(b, loc, wins, lhs, rhs),
                         scalar(b, loc, et, 1), tie);
}

LogicalResult minMaxGradient(OpBuilder &b, Operation *op, CmpPredicate wins,
                             ValueRange resultGrads,
                             SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(op, resultGrads, operandGrads))
    return success();
  Location loc = op->getLoc();
  Value g = resultGrads[0];
  Value toLhs = MulOp::create(
      b, loc, g, lhsShare(b, loc, wins, op->getOperand(0), op->getOperand(1)));
  pushBinary(b, op, toLhs, SubOp::create(b, loc, g, toLhs), operandGrads);
  return success();
}

/// For a unary op `y = f(x)`: pushes `g * derivative`, where `derivative`
/// builds f'(x) from x and y.
template <typename F>
LogicalResult unaryGradient(OpBuilder &b, Operation *op, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads,
                            F derivative) {
  if (noGradientFlows(op, resultGrads, operandGrads))
    return success();
  Location loc = op->getLoc();
  Value x = op->getOperand(0), y = op->getResult(0);
  Value d = derivative(loc, x, y, typeOf(x).getElementType());
  operandGrads.push_back(MulOp::create(b, loc, resultGrads[0], d));
  return success();
}

} // namespace

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

LogicalResult AddOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  pushBinary(b, *this, resultGrads[0], resultGrads[0], operandGrads);
  return success();
}

LogicalResult SubOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Value g = resultGrads[0];
  pushBinary(b, *this, g, NegOp::create(b, getLoc(), g), operandGrads);
  return success();
}

LogicalResult MulOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Value g = resultGrads[0];
  pushBinary(b, *this, MulOp::create(b, getLoc(), g, getRhs()),
             MulOp::create(b, getLoc(), g, getLhs()), operandGrads);
  return success();
}

LogicalResult DivOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  Value g = resultGrads[0];
  // d(l/r)/dr = -l/r^2 = -result/r.
  Value dr = NegOp::create(
      b, loc,
      DivOp::create(b, loc, MulOp::create(b, loc, g, getResult()), getRhs()));
  pushBinary(b, *this, DivOp::create(b, loc, g, getRhs()), dr, operandGrads);
  return success();
}

LogicalResult PowOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  Value g = resultGrads[0], x = getLhs(), y = getRhs();
  Type et = typeOf(x).getElementType();
  Value zero = scalar(b, loc, et, 0), one = scalar(b, loc, et, 1);
  // As PyTorch: d/dx = y * x^(y-1), taken as 0 where y == 0 (so 0^-1 does
  // not poison it); d/dy = result * log(x), taken as 0 where x == 0 and
  // y >= 0 (0 * -inf otherwise).
  Value dx = MulOp::create(
      b, loc, y, PowOp::create(b, loc, x, SubOp::create(b, loc, y, one)));
  dx =
      WhereOp::create(b, loc, cmp(b, loc, CmpPredicate::eq, y, zero), zero, dx);
  Value dy = MulOp::create(b, loc, getResult(), LogOp::create(b, loc, x));
  Value masked =
      WhereOp::create(b, loc, cmp(b, loc, CmpPredicate::ge, y, zero), zero, dy);
  dy = WhereOp::create(b, loc, cmp(b, loc, CmpPredicate::eq, x, zero), masked,
                       dy);
  pushBinary(b, *this, MulOp::create(b, loc, g, dx),
             MulOp::create(b, loc, g, dy), operandGrads);
  return success();
}

LogicalResult MaxOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  return minMaxGradient(b, *this, CmpPredicate::gt, resultGrads, operandGrads);
}

LogicalResult MinOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  return minMaxGradient(b, *this, CmpPredicate::lt, resultGrads, operandGrads);
}

LogicalResult WhereOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  Value g = resultGrads[0], c = getCondition();
  Value zero = scalar(b, loc, typeOf(g).getElementType(), 0);
  operandGrads.push_back(Value());
  operandGrads.push_back(reduceToShape(
      b, loc, WhereOp::create(b, loc, c, g, zero), getOnTrue().getType()));
  operandGrads.push_back(reduceToShape(
      b, loc, WhereOp::create(b, loc, c, zero, g), getOnFalse().getType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Unary math
//===----------------------------------------------------------------------===//

LogicalResult NegOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  operandGrads.push_back(NegOp::create(b, getLoc(), resultGrads[0]));
  return success();
}

LogicalResult AbsOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  return unaryGradient(
      b, *this, resultGrads, operandGrads,
      [&](Location loc, Value x, Value, Type et) -> Value {
        // sign(x), with sign(0) = 0 as torch.abs.
        Value zero = scalar(b, loc, et, 0);
        Value negative =
            WhereOp::create(b, loc, cmp(b, loc, CmpPredicate::lt, x, zero),
                            scalar(b, loc, et, -1), zero);
        return WhereOp::create(b, loc, cmp(b, loc, CmpPredicate::gt, x, zero),
                               scalar(b, loc, et, 1), negative);
      });
}

LogicalResult ReluOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  Location loc = getLoc();
  Value zero = scalar(b, loc, getType().getElementType(), 0);
  // relu(x) > 0 exactly where x > 0 (NaN and -0 included). Testing the
  // result, which the next layer keeps anyway, leaves the input dead after
  // the forward: a bias add fused with its ReLU never stores its sum.
  operandGrads.push_back(
      WhereOp::create(b, loc, cmp(b, loc, CmpPredicate::gt, getResult(), zero),
                      resultGrads[0], zero));
  return success();
}

LogicalResult TanhOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  return unaryGradient(b, *this, resultGrads, operandGrads,
                       [&](Location loc, Value, Value y, Type et) -> Value {
                         return SubOp::create(b, loc, scalar(b, loc, et, 1),
                                              MulOp::create(b, loc, y, y));
                       });
}

LogicalResult SigmoidOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  return unaryGradient(b, *this, resultGrads, operandGrads,
                       [&](Location loc, Value, Value y, Type et) -> Value {
                         return MulOp::create(
                             b, loc, y,
                             SubOp::create(b, loc, scalar(b, loc, et, 1), y));
                       });
}

LogicalResult ExpOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  return unaryGradient(b, *this, resultGrads, operandGrads,
                       [](Location, Value, Value y, Type) { return y; });
}

LogicalResult LogOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  operandGrads.push_back(
      DivOp::create(b, getLoc(), resultGrads[0], getInput()));
  return success();
}

LogicalResult SqrtOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // d sqrt(x) = 1 / (2 sqrt(x)): reuses the result instead of x.
  Location loc = getLoc();
  operandGrads.push_back(
      DivOp::create(b, loc, scale(b, loc, resultGrads[0], 0.5), getResult()));
  return success();
}

LogicalResult RsqrtOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                     SmallVectorImpl<Value> &operandGrads) {
  // d x^(-1/2) = -x^(-3/2) / 2 = -y^3 / 2.
  return unaryGradient(b, *this, resultGrads, operandGrads,
                       [&](Location loc, Value, Value y, Type) -> Value {
                         Value cube = MulOp::create(
                             b, loc, y, MulOp::create(b, loc, y, y));
                         return scale(b, loc, cube, -0.5);
                       });
}

LogicalResult ErfOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  // d erf(x) = 2 / sqrt(pi) * exp(-x^2).
  return unaryGradient(
      b, *this, resultGrads, operandGrads,
      [&](Location loc, Value x, Value, Type) -> Value {
        Value e = ExpOp::create(
            b, loc, NegOp::create(b, loc, MulOp::create(b, loc, x, x)));
        return scale(b, loc, e, 2 * llvm::numbers::inv_sqrtpi);
      });
}

LogicalResult CosOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  return unaryGradient(b, *this, resultGrads, operandGrads,
                       [&](Location loc, Value x, Value, Type) -> Value {
                         return NegOp::create(b, loc, SinOp::create(b, loc, x));
                       });
}

LogicalResult SinOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                   SmallVectorImpl<Value> &operandGrads) {
  return unaryGradient(b, *this, resultGrads, operandGrads,
                       [&](Location loc, Value x, Value, Type) -> Value {
                         return CosOp::create(b, loc, x);
                       });
}

LogicalResult GeluOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  bool exact = getApproximate() == GeluApproximation::None;
  return unaryGradient(
      b, *this, resultGrads, operandGrads,
      [&](Location loc, Value x, Value, Type et) -> Value {
        Value one = scalar(b, loc, et, 1);
        Value x2 = MulOp::create(b, loc, x, x);
        if (exact) {
          // d x*Phi(x) = Phi(x) + x * phi(x).
          Value cdf = scale(
              b, loc,
              AddOp::create(
                  b, loc, one,
                  ErfOp::create(b, loc,
                                scale(b, loc, x, llvm::numbers::inv_sqrt2))),
              0.5);
          Value pdf =
              scale(b, loc, ExpOp::create(b, loc, scale(b, loc, x2, -0.5)),
                    llvm::numbers::inv_sqrt2 * llvm::numbers::inv_sqrtpi);
          return AddOp::create(b, loc, cdf, MulOp::create(b, loc, x, pdf));
        }
        // y = x (1 + tanh u) / 2 with u = k (x + c x^3):
        // dy = (1 + tanh u) / 2 + x (1 - tanh^2 u) k (1 + 3 c x^2) / 2.
        constexpr double c = 0.044715;
        constexpr double k = llvm::numbers::sqrt2 * llvm::numbers::inv_sqrtpi;
        Value u =
            scale(b, loc,
                  AddOp::create(b, loc, x,
                                scale(b, loc, MulOp::create(b, loc, x2, x), c)),
                  k);
        Value t = TanhOp::create(b, loc, u);
        Value left = scale(b, loc, AddOp::create(b, loc, one, t), 0.5);
        Value sech2 = SubOp::create(b, loc, one, MulOp::create(b, loc, t, t));
        Value du = scale(
            b, loc, AddOp::create(b, loc, one, scale(b, loc, x2, 3 * c)), k);
        Value right = scale(
            b, loc, MulOp::create(b, loc, MulOp::create(b, loc, x, sech2), du),
            0.5);
        return AddOp::create(b, loc, left, right);
      });
}

//===----------------------------------------------------------------------===//
// Casts and masks
//===----------------------------------------------------------------------===//

LogicalResult CastOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                    SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // Only a float-to-float cast passes a gradient: integers are not
  // differentiable, whichever side they are on.
  Value input = getInput();
  operandGrads.push_back(
      isDifferentiableType(input.getType())
          ? Value(CastOp::create(b, getLoc(), typeOf(input), resultGrads[0]))
          : Value());
  return success();
}

LogicalResult
CausalMaskOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                            SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // Masked cells are constants: their gradient is 0, the rest passes.
  operandGrads.push_back(CausalMaskOp::create(
      b, getLoc(), resultGrads[0], getDiagonalAttr(), b.getF64FloatAttr(0.0)));
  return success();
}

LogicalResult DropoutOp::buildGradient(OpBuilder &b, ValueRange resultGrads,
                                       SmallVectorImpl<Value> &operandGrads) {
  if (noGradientFlows(*this, resultGrads, operandGrads))
    return success();
  // y = x * mask / (1 - p) is linear in x: dx is dy through the same mask.
  operandGrads.push_back(DropoutOp::create(
      b, getLoc(), resultGrads[0], getSeed(), getIndexOffset(), getRatioAttr(),
      getOpIdAttr(), getGlobalShapeAttr()));
  operandGrads.push_back(Value());
  if (getIndexOffset())
    operandGrads.push_back(Value());
  return success();
}
