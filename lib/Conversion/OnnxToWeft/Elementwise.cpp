//===- Elementwise.cpp - ONNX elementwise ops to weft ---------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Arithmetic, basic activations (the rest are in Activations.cpp),
// comparisons and logical ops, Sign, Cast, Constant, Identity and Dropout.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/xxhash.h"

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

namespace {

template <typename OpTy>
LegalizeResult legalizeBinary(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"A", "B"});
  if (failed(in))
    return failure();
  return one(ctx.create<OpTy>(*in));
}

/// ONNX allows an integer exponent with a float base; weft.pow wants one
/// element type, so the exponent is cast (folded when it is a constant).
LegalizeResult legalizePow(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X", "Y"});
  if (failed(in))
    return failure();
  Value x = (*in)[0], y = (*in)[1];
  if (elementTypeOf(y) != elementTypeOf(x)) {
    FailureOr<Value> cast = ctx.create<CastOp>(
        {y}, {}, RankedTensorType::get(shapeOf(y), elementTypeOf(x)));
    if (failed(cast))
      return failure();
    y = *cast;
  }
  return one(ctx.create<PowOp>({x, y}));
}

/// Max, Min and Sum take any number of inputs.
template <typename OpTy>
LegalizeResult legalizeVariadic(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getVariadicTensors();
  if (failed(in))
    return failure();
  Value result = in->front();
  for (Value v : ArrayRef<Value>(*in).drop_front()) {
    FailureOr<Value> next = ctx.create<OpTy>({result, v});
    if (failed(next))
      return failure();
    result = *next;
  }
  return SmallVector<Value>{result};
}

/// The elementwise mean of any number of inputs.
LegalizeResult legalizeMean(LegalizeContext &ctx, OnnxNodeOp node,
                            ValueRange inputs) {
  LegalizeResult sum = legalizeVariadic<AddOp>(ctx, node, inputs);
  if (failed(sum) || inputs.size() == 1)
    return sum;
  Value total = sum->front();
  FailureOr<Value> count = ctx.scalar(elementTypeOf(total), inputs.size());
  return one(make<DivOp>(ctx, total, count));
}

template <typename OpTy>
LegalizeResult legalizeUnary(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in))
    return failure();
  return one(ctx.create<OpTy>(*in));
}

LegalizeResult legalizeReciprocal(LegalizeContext &ctx, OnnxNodeOp,
                                  ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in))
    return failure();
  FailureOr<Value> oneValue = ctx.scalar(elementTypeOf(in->front()), 1.0);
  if (failed(oneValue))
    return failure();
  return one(ctx.create<DivOp>({*oneValue, in->front()}));
}

/// `min(max(x, lo), hi)`; a missing bound is no bound. Before opset 11 the
/// bounds are attributes, from 11 on optional inputs.
LegalizeResult legalizeClip(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  if (failed(in))
    return failure();
  Value x = in->front();
  Value bounds[2];
  StringRef names[2] = {"min", "max"};
  for (int i = 0; i < 2; ++i) {
    if (ctx.opset < 11) {
      if (!ctx.hasAttr(names[i]))
        continue;
      double bound = 0;
      if (failed(ctx.getFloat(names[i], bound)))
        return failure();
      FailureOr<Value> c = ctx.scalar(elementTypeOf(x), bound);
      if (failed(c))
        return failure();
      bounds[i] = *c;
    } else if (ctx.hasInput(i + 1)) {
      FailureOr<TypedValue<RankedTensorType>> b =
          ctx.getTensor(i + 1, names[i]);
      if (failed(b))
        return failure();
      bounds[i] = *b;
    }
  }
  if (bounds[0]) {
    FailureOr<Value> lo = ctx.create<MaxOp>({x, bounds[0]});
    if (failed(lo))
      return failure();
    x = *lo;
  }
  if (bounds[1]) {
    FailureOr<Value> hi = ctx.create<MinOp>({x, bounds[1]});
    if (failed(hi))
      return failure();
    x = *hi;
  }
  return SmallVector<Value>{x};
}

/// `where(a, b, !b)` is a == b for booleans, which weft.cmp does not take.
FailureOr<Value> buildBoolEqual(LegalizeContext &ctx, Value a, Value b) {
  FailureOr<Value> f = ctx.scalar(elementTypeOf(a), 0);
  FailureOr<Value> t = ctx.scalar(elementTypeOf(a), 1);
  if (failed(f) || failed(t))
    return failure();
  FailureOr<Value> notB = ctx.create<WhereOp>({b, *f, *t});
  if (failed(notB))
    return failure();
  return ctx.create<WhereOp>({a, b, *notB});
}

template <CmpPredicate predicate>
LegalizeResult legalizeCmp(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"A", "B"});
  if (failed(in))
    return failure();
  Value a = (*in)[0], b = (*in)[1];
  if (predicate == CmpPredicate::eq && elementTypeOf(a).isInteger(1) &&
      elementTypeOf(b).isInteger(1))
    return one(buildBoolEqual(ctx, a, b));
  return one(ctx.create<CmpOp>(
      {a, b},
      {ctx.builder.getNamedAttr(
          "predicate", CmpPredicateAttr::get(ctx.getContext(), predicate))}));
}

LegalizeResult legalizeNot(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"X"});
  if (failed(in))
    return failure();
  Type i1 = ctx.builder.getI1Type();
  FailureOr<Value> f = ctx.scalar(i1, 0);
  FailureOr<Value> t = ctx.scalar(i1, 1);
  if (failed(f) || failed(t))
    return failure();
  return one(ctx.create<WhereOp>({in->front(), *f, *t}));
}

enum class Logical { And, Or, Xor };

/// And, Or and Xor on booleans as selects: `a ? b : false`, `a ? true :
/// b` and `a ? !b : b`.
template <Logical kind>
LegalizeResult legalizeLogical(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"A", "B"});
  if (failed(in))
    return failure();
  Value a = (*in)[0], b = (*in)[1];
  if (!elementTypeOf(a).isInteger(1) || !elementTypeOf(b).isInteger(1))
    return ctx.emitError() << "inputs must be booleans, got " << a.getType()
                           << " and " << b.getType();
  Type i1 = ctx.builder.getI1Type();
  if (kind == Logical::And)
    return one(make<WhereOp>(ctx, a, b, ctx.scalar(i1, 0)));
  if (kind == Logical::Or)
    return one(make<WhereOp>(ctx, a, ctx.scalar(i1, 1), b));
  FailureOr<Value> f = ctx.scalar(i1, 0);
  FailureOr<Value> t = ctx.scalar(i1, 1);
  FailureOr<Value> notB = make<WhereOp>(ctx, b, f, t);
  return one(make<WhereOp>(ctx, a, notB, b));
}

/// `x > 0 ? 1 : (x < 0 ? -1 : 0)`.
LegalizeResult legalizeSign(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  if (failed(in))
    return failure();
  Value x = in->front();
  Type element = elementTypeOf(x);
  FailureOr<Value> zero = ctx.scalar(element, 0);
  FailureOr<Value> isNegative = makeCmp(ctx, CmpPredicate::lt, x, zero);
  FailureOr<Value> minusOne = ctx.scalar(element, -1);
  FailureOr<Value> negative = make<WhereOp>(ctx, isNegative, minusOne, zero);
  FailureOr<Value> isPositive = makeCmp(ctx, CmpPredicate::gt, x, zero);
  FailureOr<Value> plusOne = ctx.scalar(element, 1);
  return one(make<WhereOp>(ctx, isPositive, plusOne, negative));
}

LegalizeResult legalizeCast(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"input"});
  int64_t to = -1;
  if (failed(in) || failed(ctx.getInt("to", to)))
    return failure();
  OpBuilder &b = ctx.builder;
  Type element;
  switch (to) {
  case 1:
    element = b.getF32Type();
    break;
  case 6:
    element = b.getI32Type();
    break;
  case 7:
    element = b.getI64Type();
    break;
  case 9:
    element = b.getI1Type();
    break;
  case 10:
    element = b.getF16Type();
    break;
  case 11:
    element = b.getF64Type();
    break;
  case 16:
    element = b.getBF16Type();
    break;
  default:
    return ctx.unsupportedAttr(
        "to", std::to_string(to),
        "1 (float), 6 (int32), 7 (int64), 9 (bool), 10 (float16), "
        "11 (double), 16 (bfloat16)");
  }
  Value x = in->front();
  return one(
      ctx.create<CastOp>({x}, {}, RankedTensorType::get(shapeOf(x), element)));
}

LegalizeResult legalizeConstant(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  OpBuilder &b = ctx.builder;
  Attribute attr;
  if ((attr = ctx.getAttr("value"))) {
    if (auto elements = dyn_cast<ElementsAttr>(attr))
      return one(ctx.constant(elements));
  } else if ((attr = ctx.getAttr("value_float"))) {
    double v = 0;
    if (failed(ctx.getFloat("value_float", v)))
      return failure();
    return one(ctx.scalar(b.getF32Type(), v));
  } else if ((attr = ctx.getAttr("value_int"))) {
    int64_t v = 0;
    if (failed(ctx.getInt("value_int", v)))
      return failure();
    return one(ctx.constant(DenseElementsAttr::get(
        RankedTensorType::get({}, b.getI64Type()), b.getI64IntegerAttr(v))));
  } else if ((attr = ctx.getAttr("value_floats"))) {
    if (auto floats = dyn_cast<DenseF32ArrayAttr>(attr))
      return one(ctx.constant(DenseElementsAttr::get(
          RankedTensorType::get({floats.size()}, b.getF32Type()),
          floats.asArrayRef())));
  } else if ((attr = ctx.getAttr("value_ints"))) {
    SmallVector<int64_t> ints;
    if (failed(ctx.getInts("value_ints", ints)))
      return failure();
    return one(ctx.constant(DenseElementsAttr::get(
        RankedTensorType::get({static_cast<int64_t>(ints.size())},
                              b.getI64Type()),
        ArrayRef<int64_t>(ints))));
  } else {
    return ctx.emitError()
           << "needs one of the attributes 'value', 'value_float', "
              "'value_int', 'value_floats', 'value_ints' (string and sparse "
              "constants are not supported)";
  }
  return ctx.emitError() << "unsupported constant attribute " << attr;
}

LegalizeResult legalizeIdentity(LegalizeContext &ctx, OnnxNodeOp, ValueRange) {
  return ctx.getTensors({"input"});
}

/// The function's random-stream input (`weft.input = "rng"`, an i64
/// scalar the training step derives from the run's seed and the step),
/// added on first use.
FailureOr<Value> getRngInput(LegalizeContext &ctx) {
  auto fn = ctx.node->getParentOfType<func::FuncOp>();
  if (!fn || fn.getBody().getBlocks().size() != 1)
    return ctx.emitError() << "must be in a single-block function";
  for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
    if (auto name = fn.getArgAttrOfType<StringAttr>(
            i, WeftDialect::kInputAttrName);
        name && name.getValue() == WeftDialect::kRngInputName)
      return Value(fn.getArgument(i));
  unsigned index = fn.getNumArguments();
  OpBuilder &b = ctx.builder;
  if (failed(fn.insertArgument(
          index, RankedTensorType::get({}, b.getI64Type()),
          b.getDictionaryAttr(b.getNamedAttr(WeftDialect::kInputAttrName,
                                             b.getStringAttr(WeftDialect::kRngInputName))),
          fn.getLoc())))
    return ctx.emitError() << "could not add the random-stream input";
  return Value(fn.getArgument(index));
}

/// Dropout follows the pass's mode, as PyTorch's model.train()/eval(): in
/// eval mode (and at p = 0) it passes its input through; in train mode a
/// node exported in training mode becomes weft.dropout with a
/// counter-based mask. Its op id hashes the node's name, so masks do not
/// depend on the order nodes are visited in.
LegalizeResult legalizeDropout(LegalizeContext &ctx, OnnxNodeOp node,
                               ValueRange) {
  FailureOr<SmallVector<Value>> in = ctx.getTensors({"data"});
  if (failed(in))
    return failure();
  bool trainingNode = ctx.opset < 12;
  double ratio = 0.5;
  if (ctx.opset < 12) {
    if (failed(ctx.getFloat("ratio", ratio)))
      return failure();
  } else if (ctx.hasInput(1)) {
    ElementsAttr r = ctx.matchConstant(1);
    FailureOr<SmallVector<double>> values = failure();
    if (r)
      values = getFloatValues(r);
    if (failed(values) || values->size() != 1)
      return ctx.emitError() << "input 1 (ratio) must be a constant scalar";
    ratio = values->front();
  }
  if (ctx.hasInput(2)) {
    ElementsAttr training = ctx.matchConstant(2);
    FailureOr<SmallVector<int64_t>> values = failure();
    if (training)
      values = getIntValues(training);
    if (failed(values) || values->size() != 1)
      return ctx.emitError() << "input 2 (training_mode) must be a constant";
    trainingNode = values->front() != 0;
  }
  if (!(ratio >= 0 && ratio < 1))
    return ctx.emitError() << "ratio " << ratio << " is not in [0, 1)";
  if (!ctx.training || !trainingNode || ratio == 0)
    return in;
  FailureOr<Value> rng = getRngInput(ctx);
  if (failed(rng))
    return failure();
  int64_t opId = int64_t(llvm::xxh3_64bits(node.getName()) >> 1);
  return one(ctx.create<DropoutOp>({in->front(), *rng},
                                   {ctx.f64Attr("ratio", ratio),
                                    ctx.i64Attr("op_id", opId)}));
}

} // namespace

void weft::onnxtoweft::populateElementwiseLegalizers(
    LegalizerRegistry &registry) {
  registry.add("Add", 7, kMaxOpset, legalizeBinary<AddOp>);
  registry.add("Sub", 7, kMaxOpset, legalizeBinary<SubOp>);
  registry.add("Mul", 7, kMaxOpset, legalizeBinary<MulOp>);
  registry.add("Div", 7, kMaxOpset, legalizeBinary<DivOp>);
  registry.add("Pow", 7, kMaxOpset, legalizePow);
  registry.add("Max", 8, kMaxOpset, legalizeVariadic<MaxOp>);
  registry.add("Min", 8, kMaxOpset, legalizeVariadic<MinOp>);
  registry.add("Sum", 8, kMaxOpset, legalizeVariadic<AddOp>);
  registry.add("Mean", 8, kMaxOpset, legalizeMean);

  registry.add("Abs", 6, kMaxOpset, legalizeUnary<AbsOp>);
  registry.add("Neg", 6, kMaxOpset, legalizeUnary<NegOp>);
  registry.add("Sqrt", 6, kMaxOpset, legalizeUnary<SqrtOp>);
  registry.add("Exp", 6, kMaxOpset, legalizeUnary<ExpOp>);
  registry.add("Log", 6, kMaxOpset, legalizeUnary<LogOp>);
  registry.add("Relu", 6, kMaxOpset, legalizeUnary<ReluOp>);
  registry.add("Tanh", 6, kMaxOpset, legalizeUnary<TanhOp>);
  registry.add("Sigmoid", 6, kMaxOpset, legalizeUnary<SigmoidOp>);
  registry.add("Erf", 9, kMaxOpset, legalizeUnary<ErfOp>);
  registry.add("Cos", 7, kMaxOpset, legalizeUnary<CosOp>);
  registry.add("Sin", 7, kMaxOpset, legalizeUnary<SinOp>);
  registry.add("Reciprocal", 6, kMaxOpset, legalizeReciprocal);
  registry.add("Clip", 6, kMaxOpset, legalizeClip);

  registry.add("Equal", 7, kMaxOpset, legalizeCmp<CmpPredicate::eq>);
  registry.add("Less", 7, kMaxOpset, legalizeCmp<CmpPredicate::lt>);
  registry.add("LessOrEqual", 12, kMaxOpset, legalizeCmp<CmpPredicate::le>);
  registry.add("Greater", 7, kMaxOpset, legalizeCmp<CmpPredicate::gt>);
  registry.add("GreaterOrEqual", 12, kMaxOpset, legalizeCmp<CmpPredicate::ge>);
  registry.add("Not", 1, kMaxOpset, legalizeNot);
  registry.add("And", 7, kMaxOpset, legalizeLogical<Logical::And>);
  registry.add("Or", 7, kMaxOpset, legalizeLogical<Logical::Or>);
  registry.add("Xor", 7, kMaxOpset, legalizeLogical<Logical::Xor>);
  registry.add("Sign", 9, kMaxOpset, legalizeSign);

  registry.add("Cast", 6, kMaxOpset, legalizeCast);
  registry.add("Constant", 1, kMaxOpset, legalizeConstant);
  registry.add("Identity", 1, kMaxOpset, legalizeIdentity);
  registry.add("Dropout", 1, kMaxOpset, legalizeDropout);
}
