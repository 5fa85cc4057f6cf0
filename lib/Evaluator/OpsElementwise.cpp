//===- OpsElementwise.cpp - Evaluating elementwise weft ops ---------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Arithmetic, comparisons, select, unary math, gelu, casts and the causal
// mask. Floats are computed in double and rounded once per result element;
// integers are computed in int64 and wrapped to the result's width.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorInternal.h"

#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "llvm/ADT/TypeSwitch.h"

#include <limits>

using namespace mlir;
using namespace weft;
using namespace weft::eval;
using namespace weft::eval::detail;

namespace {

//===----------------------------------------------------------------------===//
// Binary arithmetic
//===----------------------------------------------------------------------===//

/// Applies `f` to broadcast operand pairs in double and rounds each result
/// to the element type once.
template <typename F>
void floatBinary(const Tensor &a, const Tensor &b, Tensor &r, F f) {
  Rounder round(r.elementType);
  std::vector<int64_t> oa = broadcastOffsets(r.shape, a.shape);
  std::vector<int64_t> ob = broadcastOffsets(r.shape, b.shape);
  for (size_t i = 0, e = r.fp.size(); i < e; ++i)
    r.fp[i] = round(f(a.fp[oa[i]], b.fp[ob[i]]));
}

/// Integer counterpart of floatBinary: `f` works in int64 and the result
/// wraps to the element type's width.
template <typename F>
void intBinary(const Tensor &a, const Tensor &b, Tensor &r, F f) {
  Wrapper wrap(r.elementType);
  std::vector<int64_t> oa = broadcastOffsets(r.shape, a.shape);
  std::vector<int64_t> ob = broadcastOffsets(r.shape, b.shape);
  for (size_t i = 0, e = r.ints.size(); i < e; ++i)
    r.ints[i] = wrap(f(a.ints[oa[i]], b.ints[ob[i]]));
}

/// Two's-complement arithmetic in uint64 so that int64 overflow wraps
/// instead of being undefined; the Wrapper then narrows to the result type.
int64_t wrappingAdd(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) +
                              static_cast<uint64_t>(y));
}
int64_t wrappingSub(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) -
                              static_cast<uint64_t>(y));
}
int64_t wrappingMul(int64_t x, int64_t y) {
  return static_cast<int64_t>(static_cast<uint64_t>(x) *
                              static_cast<uint64_t>(y));
}

/// NaN-propagating like torch.maximum / torch.minimum.
double floatMax(double x, double y) {
  return std::isnan(x) || std::isnan(y)
             ? std::numeric_limits<double>::quiet_NaN()
             : std::max(x, y);
}
double floatMin(double x, double y) {
  return std::isnan(x) || std::isnan(y)
             ? std::numeric_limits<double>::quiet_NaN()
             : std::min(x, y);
}

/// Integer division is the one elementwise op that can fail at run time.
LogicalResult evalIntDiv(Operation *op, const Tensor &a, const Tensor &b,
                         Tensor &r) {
  Wrapper wrap(r.elementType);
  std::vector<int64_t> oa = broadcastOffsets(r.shape, a.shape);
  std::vector<int64_t> ob = broadcastOffsets(r.shape, b.shape);
  for (size_t i = 0, e = r.ints.size(); i < e; ++i) {
    int64_t x = a.ints[oa[i]], y = b.ints[ob[i]];
    if (y == 0)
      return op->emitError("integer division by zero (result element ")
             << i << ", dividend " << x << ")";
    // INT64_MIN / -1 overflows; two's complement wraps it to INT64_MIN.
    if (x == std::numeric_limits<int64_t>::min() && y == -1)
      r.ints[i] = wrap(x);
    else
      r.ints[i] = wrap(x / y); // C++ division truncates toward zero.
  }
  return success();
}

/// The binary arithmetic ops, dispatched once per op rather than per element.
enum class Binary { Add, Sub, Mul, Div, Pow, Max, Min };

LogicalResult evalBinary(Operation *op, Binary kind, const Tensor &a,
                         const Tensor &b, Tensor &r) {
  if (r.isFloat()) {
    switch (kind) {
    case Binary::Add:
      floatBinary(a, b, r, [](double x, double y) { return x + y; });
      break;
    case Binary::Sub:
      floatBinary(a, b, r, [](double x, double y) { return x - y; });
      break;
    case Binary::Mul:
      floatBinary(a, b, r, [](double x, double y) { return x * y; });
      break;
    case Binary::Div:
      floatBinary(a, b, r, [](double x, double y) { return x / y; });
      break;
    case Binary::Pow:
      floatBinary(a, b, r, [](double x, double y) { return std::pow(x, y); });
      break;
    case Binary::Max:
      floatBinary(a, b, r, floatMax);
      break;
    case Binary::Min:
      floatBinary(a, b, r, floatMin);
      break;
    }
    return success();
  }
  switch (kind) {
  case Binary::Add:
    intBinary(a, b, r, wrappingAdd);
    break;
  case Binary::Sub:
    intBinary(a, b, r, wrappingSub);
    break;
  case Binary::Mul:
    intBinary(a, b, r, wrappingMul);
    break;
  case Binary::Div:
    return evalIntDiv(op, a, b, r);
  case Binary::Max:
    intBinary(a, b, r, [](int64_t x, int64_t y) { return std::max(x, y); });
    break;
  case Binary::Min:
    intBinary(a, b, r, [](int64_t x, int64_t y) { return std::min(x, y); });
    break;
  case Binary::Pow:
    return op->emitError("weft.pow is only defined on floats");
  }
  return success();
}

/// IEEE comparison for floats (every predicate but ne is false on NaN).
template <typename T> bool compare(CmpPredicate predicate, T x, T y) {
  switch (predicate) {
  case CmpPredicate::eq:
    return x == y;
  case CmpPredicate::ne:
    return x != y;
  case CmpPredicate::lt:
    return x < y;
  case CmpPredicate::le:
    return x <= y;
  case CmpPredicate::gt:
    return x > y;
  case CmpPredicate::ge:
    return x >= y;
  }
  return false;
}

/// Compares in the operands' own representation (double or int64).
void evalCmp(CmpOp op, const Tensor &a, const Tensor &b, Tensor &r) {
  CmpPredicate predicate = op.getPredicate();
  std::vector<int64_t> oa = broadcastOffsets(r.shape, a.shape);
  std::vector<int64_t> ob = broadcastOffsets(r.shape, b.shape);
  for (size_t i = 0, e = r.ints.size(); i < e; ++i)
    r.ints[i] = a.isFloat() ? compare(predicate, a.fp[oa[i]], b.fp[ob[i]])
                            : compare(predicate, a.ints[oa[i]], b.ints[ob[i]]);
}

/// Selects without rounding: both branches already have the result type.
void evalWhere(const Tensor &c, const Tensor &t, const Tensor &f, Tensor &r) {
  std::vector<int64_t> oc = broadcastOffsets(r.shape, c.shape);
  std::vector<int64_t> ot = broadcastOffsets(r.shape, t.shape);
  std::vector<int64_t> of = broadcastOffsets(r.shape, f.shape);
  int64_t n = r.numElements();
  for (int64_t i = 0; i < n; ++i) {
    bool pick = c.ints[oc[i]] != 0;
    if (r.isFloat())
      r.fp[i] = pick ? t.fp[ot[i]] : f.fp[of[i]];
    else
      r.ints[i] = pick ? t.ints[ot[i]] : f.ints[of[i]];
  }
}

//===----------------------------------------------------------------------===//
// Unary
//===----------------------------------------------------------------------===//

/// Applies `f` in double and rounds once per element.
template <typename F> void floatUnary(const Tensor &x, Tensor &r, F f) {
  Rounder round(r.elementType);
  for (size_t i = 0, e = r.fp.size(); i < e; ++i)
    r.fp[i] = round(f(x.fp[i]));
}

/// Applies `f` in int64 and wraps to the element type's width.
template <typename F> void intUnary(const Tensor &x, Tensor &r, F f) {
  Wrapper wrap(r.elementType);
  for (size_t i = 0, e = r.ints.size(); i < e; ++i)
    r.ints[i] = wrap(f(x.ints[i]));
}

/// GELU exactly or with PyTorch's tanh approximation.
double geluOf(double x, GeluApproximation approximation) {
  // PyTorch's formulas (aten/src/ATen/native/cpu/Activation.cpp).
  if (approximation == GeluApproximation::Tanh) {
    const double beta = M_SQRT2 * M_2_SQRTPI * 0.5; // sqrt(2 / pi)
    const double kappa = 0.044715;
    double inner = beta * (x + kappa * x * x * x);
    return 0.5 * x * (1 + std::tanh(inner));
  }
  return x * 0.5 * (1 + std::erf(x * M_SQRT1_2));
}

//===----------------------------------------------------------------------===//
// Cast
//===----------------------------------------------------------------------===//

/// Float to integer: truncation toward zero, saturating at the target's
/// range (C++ leaves out-of-range conversions undefined), NaN to 0.
int64_t floatToInt(double v, IntegerType type) {
  if (type.getWidth() == 1)
    return v != 0;
  if (std::isnan(v))
    return 0;
  double t = std::trunc(v);
  unsigned width = std::min(type.getWidth(), 64u);
  bool isUnsigned = type.isUnsigned();
  double lo = isUnsigned ? 0.0 : -std::ldexp(1.0, width - 1);
  // One past the largest value; exact as a double for every width.
  double hiExclusive = std::ldexp(1.0, isUnsigned ? width : width - 1);
  if (t < lo)
    return static_cast<int64_t>(lo);
  if (t >= hiExclusive) {
    if (width == 64)
      // 2^63 - 1 is not a double: computing hiExclusive - 1 would round
      // back to 2^63 and overflow the conversion.
      return isUnsigned ? -1 : std::numeric_limits<int64_t>::max();
    return static_cast<int64_t>(hiExclusive - 1);
  }
  return static_cast<int64_t>(t);
}

/// Float to float rounds, float to integer truncates (floatToInt), integer
/// to integer wraps, anything to i1 tests for non-zero.
void evalCast(const Tensor &x, Tensor &r) {
  int64_t n = r.numElements();
  if (r.isFloat()) {
    Rounder round(r.elementType);
    bool fromUnsigned = x.elementType.isUnsignedInteger(64);
    for (int64_t i = 0; i < n; ++i) {
      double v;
      if (x.isFloat())
        v = x.fp[i];
      else if (fromUnsigned)
        v = static_cast<double>(static_cast<uint64_t>(x.ints[i]));
      else
        v = static_cast<double>(x.ints[i]);
      r.fp[i] = round(v);
    }
    return;
  }
  auto to = cast<IntegerType>(r.elementType);
  for (int64_t i = 0; i < n; ++i) {
    if (x.isFloat())
      r.ints[i] = floatToInt(x.fp[i], to);
    else if (to.getWidth() == 1)
      r.ints[i] = x.ints[i] != 0;
    else
      r.ints[i] = wrapToInteger(to, x.ints[i]);
  }
}

//===----------------------------------------------------------------------===//
// Causal mask
//===----------------------------------------------------------------------===//

/// Masks per trailing matrix; `fill` is rounded to the element type like
/// any other result.
void evalCausalMask(CausalMaskOp op, const Tensor &x, Tensor &r) {
  int64_t rows = x.shape[x.shape.size() - 2], cols = x.shape.back();
  int64_t diagonal = static_cast<int64_t>(op.getDiagonal());
  double fill = Rounder(r.elementType)(op.getFill().convertToDouble());
  int64_t matrices = rows * cols == 0 ? 0 : x.numElements() / (rows * cols);
  for (int64_t m = 0; m < matrices; ++m) {
    int64_t base = m * rows * cols;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j)
        r.fp[base + i * cols + j] =
            j > i + diagonal ? fill : x.fp[base + i * cols + j];
  }
}

/// The mask the executable applies, bit for bit: DropoutOp::keeps.
void evalDropout(DropoutOp op, const Tensor &x, const Tensor &seed,
                 const Tensor *offset, Tensor &r) {
  double ratio = op.getRatio().convertToDouble();
  uint64_t key = DropoutOp::keyOf(seed.ints[0], op.getOpId());
  uint64_t first = offset ? uint64_t(offset->ints[0]) : 0;
  double scale = 1.0 / (1.0 - ratio);
  Rounder round(r.elementType);
  // Element i's index in the whole tensor: its coordinates (row-major in
  // the block) times the whole tensor's strides.
  SmallVector<int64_t> strides = op.maskStrides();
  ArrayRef<int64_t> shape = cast<RankedTensorType>(op.getType()).getShape();
  for (int64_t i = 0, e = x.numElements(); i < e; ++i) {
    uint64_t index = first;
    for (int64_t d = int64_t(shape.size()) - 1, rest = i; d >= 0; --d) {
      index += uint64_t((rest % shape[d]) * strides[d]);
      rest /= shape[d];
    }
    r.fp[i] = DropoutOp::keeps(key, index, ratio) ? round(x.fp[i] * round(scale))
                                                  : 0.0;
  }
}

} // namespace

std::optional<LogicalResult> weft::eval::detail::evaluateElementwiseOp(
    Operation *op, ArrayRef<Tensor> operands, Tensor &result) {
  auto binary = [&](Binary kind) -> LogicalResult {
    return evalBinary(op, kind, operands[0], operands[1], result);
  };
  auto unary = [&](auto f) -> LogicalResult {
    floatUnary(operands[0], result, f);
    return success();
  };
  return llvm::TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      .Case([&](AddOp) { return binary(Binary::Add); })
      .Case([&](SubOp) { return binary(Binary::Sub); })
      .Case([&](MulOp) { return binary(Binary::Mul); })
      .Case([&](DivOp) { return binary(Binary::Div); })
      .Case([&](PowOp) { return binary(Binary::Pow); })
      .Case([&](MaxOp) { return binary(Binary::Max); })
      .Case([&](MinOp) { return binary(Binary::Min); })
      .Case([&](CmpOp cmp) {
        evalCmp(cmp, operands[0], operands[1], result);
        return success();
      })
      .Case([&](WhereOp) {
        evalWhere(operands[0], operands[1], operands[2], result);
        return success();
      })
      .Case([&](NegOp) -> LogicalResult {
        if (result.isFloat())
          return unary([](double x) { return -x; });
        intUnary(operands[0], result,
                 [](int64_t x) { return wrappingSub(0, x); });
        return success();
      })
      .Case([&](AbsOp) -> LogicalResult {
        if (result.isFloat())
          return unary([](double x) { return std::fabs(x); });
        intUnary(operands[0], result,
                 [](int64_t x) { return x < 0 ? wrappingSub(0, x) : x; });
        return success();
      })
      // `x < 0 ? 0 : x` lets NaN through, as torch.relu does.
      .Case(
          [&](ReluOp) { return unary([](double x) { return x < 0 ? 0 : x; }); })
      .Case(
          [&](TanhOp) { return unary([](double x) { return std::tanh(x); }); })
      .Case([&](SigmoidOp) {
        return unary([](double x) { return 1 / (1 + std::exp(-x)); });
      })
      .Case([&](ExpOp) { return unary([](double x) { return std::exp(x); }); })
      .Case([&](LogOp) { return unary([](double x) { return std::log(x); }); })
      .Case(
          [&](SqrtOp) { return unary([](double x) { return std::sqrt(x); }); })
      .Case([&](RsqrtOp) {
        return unary([](double x) { return 1 / std::sqrt(x); });
      })
      .Case([&](ErfOp) { return unary([](double x) { return std::erf(x); }); })
      .Case([&](CosOp) { return unary([](double x) { return std::cos(x); }); })
      .Case([&](SinOp) { return unary([](double x) { return std::sin(x); }); })
      .Case([&](GeluOp gelu) {
        GeluApproximation approximation = gelu.getApproximate();
        return unary([=](double x) { return geluOf(x, approximation); });
      })
      .Case([&](CastOp) {
        evalCast(operands[0], result);
        return success();
      })
      .Case([&](CausalMaskOp mask) {
        evalCausalMask(mask, operands[0], result);
        return success();
      })
      .Case([&](DropoutOp dropout) {
        evalDropout(dropout, operands[0], operands[1],
                    operands.size() > 2 ? &operands[2] : nullptr, result);
        return success();
      })
      .Default([](Operation *) { return std::nullopt; });
}
