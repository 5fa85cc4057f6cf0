//===- LegalizeContext.cpp - Helpers shared by ONNX legalizers ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Generic ONNX nodes carry whatever the file holds, so every accessor here
// checks kinds and shapes and reports on the node instead of asserting: a
// pass must not crash on verifier-valid IR.
//
//===----------------------------------------------------------------------===//

#include "Legalizers.h"

#include "weft/Evaluator/Evaluator.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"

#include <set>

using namespace mlir;
using namespace weft;
using namespace weft::onnxtoweft;

LegalizeContext::LegalizeContext(OpBuilder &builder, OnnxNodeOp node)
    : builder(builder), node(node), opset(node.getOpsetAttr().getInt()) {}

InFlightDiagnostic LegalizeContext::emitError() {
  return node.emitError() << node.getOpType() << " node '" << node.getName()
                          << "': ";
}

//===----------------------------------------------------------------------===//
// Inputs
//===----------------------------------------------------------------------===//

bool LegalizeContext::hasInput(unsigned i) {
  return i < node.getInputs().size() &&
         !isa<NoneType>(node.getInputs()[i].getType());
}

FailureOr<TypedValue<RankedTensorType>>
LegalizeContext::getTensor(unsigned i, StringRef what) {
  if (!hasInput(i))
    return emitError() << "required input " << i << " (" << what
                       << ") is missing";
  Value v = node.getInputs()[i];
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || !type.hasStaticShape())
    return emitError() << "input " << i << " (" << what << ") has type "
                       << v.getType()
                       << "; weft needs statically shaped tensors (fix "
                          "dynamic dimensions with --input-shape)";
  return cast<TypedValue<RankedTensorType>>(v);
}

FailureOr<SmallVector<Value>>
LegalizeContext::getTensors(ArrayRef<StringRef> names) {
  SmallVector<Value> values;
  for (auto [i, name] : llvm::enumerate(names)) {
    FailureOr<TypedValue<RankedTensorType>> v = getTensor(i, name);
    if (failed(v))
      return failure();
    values.push_back(*v);
  }
  return values;
}

FailureOr<SmallVector<Value>> LegalizeContext::getVariadicTensors() {
  if (node.getInputs().empty())
    return emitError() << "needs at least one input";
  SmallVector<Value> values;
  for (unsigned i = 0, e = node.getInputs().size(); i < e; ++i) {
    FailureOr<TypedValue<RankedTensorType>> v = getTensor(i, "inputs");
    if (failed(v))
      return failure();
    values.push_back(*v);
  }
  return values;
}

ElementsAttr LegalizeContext::matchConstant(unsigned i) {
  if (!hasInput(i))
    return {};
  ElementsAttr attr;
  if (!matchPattern(node.getInputs()[i], m_Constant(&attr)))
    return {};
  return attr;
}

FailureOr<SmallVector<int64_t>>
weft::onnxtoweft::getIntValues(ElementsAttr attr) {
  if (!isa<IntegerType>(attr.getElementType()))
    return failure();
  std::string error;
  FailureOr<eval::Tensor> t = eval::Tensor::tryFromAttr(attr, error);
  if (failed(t))
    return failure();
  return SmallVector<int64_t>(t->ints.begin(), t->ints.end());
}

FailureOr<SmallVector<double>>
weft::onnxtoweft::getFloatValues(ElementsAttr attr) {
  if (!isa<FloatType>(attr.getElementType()))
    return failure();
  std::string error;
  FailureOr<eval::Tensor> t = eval::Tensor::tryFromAttr(attr, error);
  if (failed(t))
    return failure();
  return SmallVector<double>(t->fp.begin(), t->fp.end());
}

FailureOr<ElementsAttr> LegalizeContext::getConstant(unsigned i,
                                                     StringRef what) {
  if (!hasInput(i))
    return emitError() << "required input " << i << " (" << what
                       << ") is missing";
  if (ElementsAttr attr = matchConstant(i))
    return attr;
  Value v = node.getInputs()[i];
  InFlightDiagnostic diag = emitError();
  diag << "input " << i << " (" << what
       << ") must be computable at compile time, but it is computed at run "
          "time";
  if (Operation *producer = v.getDefiningOp())
    diag << " by '" << producer->getName() << "'";
  else
    diag << " (a function argument)";
  diag << "; this usually comes from a dynamic dimension: give static input "
          "shapes with --input-shape";
  return diag;
}

std::string weft::onnxtoweft::formatList(ArrayRef<int64_t> values) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "[";
  llvm::interleaveComma(values, os);
  os << "]";
  return s;
}

FailureOr<SmallVector<int64_t>> LegalizeContext::getConstInts(unsigned i,
                                                              StringRef what) {
  FailureOr<ElementsAttr> constant = getConstant(i, what);
  if (failed(constant))
    return failure();
  ElementsAttr attr = *constant;
  if (!attr.getElementType().isSignlessInteger() ||
      attr.getElementType().isInteger(1))
    return emitError() << "input " << i << " (" << what
                       << ") must hold integers, got " << attr.getType();
  if (cast<ShapedType>(attr.getType()).getRank() > 1)
    return emitError() << "input " << i << " (" << what
                       << ") must be a scalar or 1-D, got " << attr.getType();
  FailureOr<SmallVector<int64_t>> values = getIntValues(attr);
  if (failed(values))
    return emitError() << "input " << i << " (" << what
                       << ") is a constant whose encoding cannot be read";
  return values;
}

//===----------------------------------------------------------------------===//
// Attributes
//===----------------------------------------------------------------------===//

Attribute LegalizeContext::getAttr(StringRef name) {
  if (DictionaryAttr attrs = node.getAttrsAttr())
    return attrs.get(name);
  return {};
}

LogicalResult LegalizeContext::getInt(StringRef name, int64_t &value) {
  Attribute attr = getAttr(name);
  if (!attr)
    return success();
  auto i = dyn_cast<IntegerAttr>(attr);
  if (!i)
    return emitError() << "attribute '" << name << "' must be an integer, got "
                       << attr;
  value = i.getValue().getSExtValue();
  return success();
}

LogicalResult LegalizeContext::getFloat(StringRef name, double &value) {
  Attribute attr = getAttr(name);
  if (!attr)
    return success();
  if (auto f = dyn_cast<FloatAttr>(attr)) {
    value = f.getValueAsDouble();
    return success();
  }
  if (auto i = dyn_cast<IntegerAttr>(attr)) {
    value = static_cast<double>(i.getValue().getSExtValue());
    return success();
  }
  return emitError() << "attribute '" << name << "' must be a float, got "
                     << attr;
}

LogicalResult LegalizeContext::getString(StringRef name, std::string &value) {
  Attribute attr = getAttr(name);
  if (!attr)
    return success();
  auto s = dyn_cast<StringAttr>(attr);
  if (!s)
    return emitError() << "attribute '" << name << "' must be a string, got "
                       << attr;
  value = s.getValue().str();
  return success();
}

LogicalResult LegalizeContext::getInts(StringRef name,
                                       SmallVectorImpl<int64_t> &value) {
  Attribute attr = getAttr(name);
  if (!attr)
    return success();
  if (auto ints = dyn_cast<DenseI64ArrayAttr>(attr)) {
    value.assign(ints.asArrayRef().begin(), ints.asArrayRef().end());
    return success();
  }
  if (auto array = dyn_cast<ArrayAttr>(attr)) {
    SmallVector<int64_t> result;
    for (Attribute element : array) {
      auto i = dyn_cast<IntegerAttr>(element);
      if (!i)
        return emitError() << "attribute '" << name
                           << "' must be a list of integers, got " << attr;
      result.push_back(i.getValue().getSExtValue());
    }
    value.assign(result.begin(), result.end());
    return success();
  }
  return emitError() << "attribute '" << name
                     << "' must be a list of integers, got " << attr;
}

LogicalResult LegalizeContext::unsupportedAttr(StringRef name, StringRef value,
                                               StringRef supported) {
  return emitError() << "attribute '" << name << "' = " << value
                     << " is not supported (supported: " << supported << ")";
}

FailureOr<int64_t> LegalizeContext::normalizeAxis(int64_t axis, int64_t rank,
                                                  StringRef what) {
  if (axis < -rank || axis >= rank)
    return emitError() << what << " " << axis << " is out of range for rank "
                       << rank << " (expected " << -rank << " <= " << what
                       << " < " << rank << ")";
  return axis < 0 ? axis + rank : axis;
}

//===----------------------------------------------------------------------===//
// Building
//===----------------------------------------------------------------------===//

FailureOr<Value> LegalizeContext::build(StringRef opName, ValueRange operands,
                                        ArrayRef<NamedAttribute> attrs,
                                        Type resultType) {
  FailureOr<SmallVector<Value>> results =
      buildResults(opName, operands, attrs, 1, resultType);
  if (failed(results))
    return failure();
  return results->front();
}

FailureOr<SmallVector<Value>>
LegalizeContext::buildResults(StringRef opName, ValueRange operands,
                              ArrayRef<NamedAttribute> attrs,
                              unsigned numResults, Type resultType) {
  MLIRContext *ctx = getContext();
  OperationState state(getLoc(), opName);
  state.addOperands(operands);
  state.addAttributes(attrs);
  // Generated builders abort when inference fails, so build with a
  // provisional none type and infer from the created op, whose properties
  // already hold the attributes' default values.
  state.addTypes(SmallVector<Type>(
      numResults, resultType ? resultType : NoneType::get(ctx)));
  Operation *op = builder.create(state);

  std::string message;
  LogicalResult result = success();
  {
    ScopedDiagnosticHandler capture(ctx, [&](Diagnostic &diag) {
      if (message.empty())
        message = diag.str();
      return success();
    });
    if (!resultType) {
      auto infer = dyn_cast<InferTypeOpInterface>(op);
      SmallVector<Type, 1> types;
      if (!infer ||
          failed(infer.inferReturnTypes(
              ctx, getLoc(), op->getOperands(), op->getRawDictionaryAttrs(),
              op->getPropertiesStorage(), op->getRegions(), types)) ||
          types.size() != numResults)
        result = failure();
      else
        for (auto [v, type] : llvm::zip_equal(op->getResults(), types))
          v.setType(type);
    }
    if (succeeded(result))
      result = mlir::verify(op, /*verifyRecursively=*/false);
  }
  if (failed(result)) {
    op->erase();
    return emitError() << "cannot build '" << opName << "': "
                       << (message.empty() ? "invalid operands" : message);
  }
  created.push_back(op);
  return SmallVector<Value>(op->getResults());
}

FailureOr<Value> LegalizeContext::constant(ElementsAttr value) {
  return build(ConstantOp::getOperationName(), {},
               {builder.getNamedAttr("value", value)});
}

FailureOr<Value> LegalizeContext::scalar(Type elementType, double value) {
  auto type = RankedTensorType::get({}, elementType);
  Attribute element;
  if (auto f = dyn_cast<FloatType>(elementType))
    element = FloatAttr::get(f, value);
  else if (auto i = dyn_cast<IntegerType>(elementType))
    element = IntegerAttr::get(i, static_cast<int64_t>(value));
  else
    return emitError() << "cannot build a constant of type " << elementType;
  return constant(DenseElementsAttr::get(type, element));
}

FailureOr<Value> LegalizeContext::reshape(Value input,
                                          ArrayRef<int64_t> shape) {
  auto type = RankedTensorType::get(shape, elementTypeOf(input));
  if (type == input.getType())
    return input;
  return create<ReshapeOp>({input}, {}, type);
}

NamedAttribute LegalizeContext::i64Attr(StringRef name, int64_t value) {
  return builder.getNamedAttr(name, builder.getI64IntegerAttr(value));
}
NamedAttribute LegalizeContext::f64Attr(StringRef name, double value) {
  return builder.getNamedAttr(name, builder.getF64FloatAttr(value));
}
NamedAttribute LegalizeContext::boolAttr(StringRef name, bool value) {
  return builder.getNamedAttr(name, builder.getBoolAttr(value));
}
NamedAttribute LegalizeContext::arrayAttr(StringRef name,
                                          ArrayRef<int64_t> value) {
  return builder.getNamedAttr(name, builder.getDenseI64ArrayAttr(value));
}

//===----------------------------------------------------------------------===//
// LegalizerRegistry
//===----------------------------------------------------------------------===//

void LegalizerRegistry::add(StringRef opType, int64_t minOpset,
                            int64_t maxOpset, LegalizeFn fn) {
  entries.push_back({opType.str(), minOpset, maxOpset, std::move(fn)});
}

const LegalizeFn *LegalizerRegistry::lookup(StringRef opType,
                                            int64_t opset) const {
  for (const Entry &e : entries)
    if (e.opType == opType && e.minOpset <= opset && opset <= e.maxOpset)
      return &e.fn;
  return nullptr;
}

bool LegalizerRegistry::contains(StringRef opType) const {
  return llvm::any_of(entries,
                      [&](const Entry &e) { return e.opType == opType; });
}

std::string LegalizerRegistry::describeRanges(StringRef opType) const {
  SmallVector<std::pair<int64_t, int64_t>> ranges;
  for (const Entry &e : entries)
    if (e.opType == opType)
      ranges.push_back({e.minOpset, e.maxOpset});
  llvm::sort(ranges);
  // Adjacent ranges (one per semantics change) read better merged.
  SmallVector<std::pair<int64_t, int64_t>> merged;
  for (auto r : ranges) {
    if (!merged.empty() && merged.back().second + 1 >= r.first)
      merged.back().second = std::max(merged.back().second, r.second);
    else
      merged.push_back(r);
  }
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::interleaveComma(merged, os, [&](std::pair<int64_t, int64_t> r) {
    os << r.first << "-" << r.second;
  });
  return s;
}

std::string LegalizerRegistry::describeOpTypes() const {
  std::set<std::string> names;
  for (const Entry &e : entries)
    names.insert(e.opType);
  return llvm::join(names, ", ");
}
