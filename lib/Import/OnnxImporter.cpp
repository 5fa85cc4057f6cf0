//===- OnnxImporter.cpp - ONNX protobuf to generic weft IR ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Import/OnnxImporter.h"
#include "weft/Support/DTypes.h"

#include <nlohmann/json.hpp>
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Import/Initializers.h"
#include "weft/Import/OnnxModel.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringRef.h"

#include <set>

using namespace mlir;
using namespace weft;

namespace {

std::string dirName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash + 1);
}

/// The element type a tensor of `dtype` has in the dialect. Narrow integers
/// only occur in constants and are widened to i64.
Type getDialectElementType(MLIRContext *ctx, rt::DType dtype) {
  switch (dtype) {
  case rt::DType::I16:
  case rt::DType::I8:
  case rt::DType::U16:
  case rt::DType::U8:
    return IntegerType::get(ctx, 64);
  default:
    return getElementType(ctx, dtype);
  }
}

DenseElementsAttr toElementsAttr(MLIRContext *ctx, const rt::HostArray &a) {
  auto type = RankedTensorType::get(a.shape, getDialectElementType(ctx, a.dtype));
  switch (a.dtype) {
  case rt::DType::F64:
  case rt::DType::F32:
  case rt::DType::F16:
  case rt::DType::BF16:
  case rt::DType::I64:
  case rt::DType::I32:
    return DenseElementsAttr::getFromRawBuffer(
        type, ArrayRef<char>(reinterpret_cast<const char *>(a.data.data()),
                             a.data.size()));
  case rt::DType::Bool: {
    SmallVector<bool> values;
    for (int64_t i = 0, e = a.numElements(); i < e; ++i)
      values.push_back(a.getAsInt(i) != 0);
    return DenseElementsAttr::get(type, ArrayRef<bool>(values));
  }
  default: {
    SmallVector<int64_t> values;
    for (int64_t i = 0, e = a.numElements(); i < e; ++i)
      values.push_back(a.getAsInt(i));
    return DenseElementsAttr::get(type, ArrayRef<int64_t>(values));
  }
  }
}

class Importer {
public:
  Importer(MLIRContext *ctx, const std::string &path,
           const onnx::ModelProto &model, const OnnxImportOptions &options)
      : ctx(ctx), builder(ctx), path(path), model(model), options(options) {}

  OwningOpRef<ModuleOp> run();

private:
  LogicalResult error(const Twine &message) {
    emitError(FileLineColLoc::get(ctx, path, 0, 0)) << message;
    return failure();
  }
  LogicalResult readInitializers();
  LogicalResult buildSignature(SmallVectorImpl<Type> &argTypes,
                               SmallVectorImpl<DictionaryAttr> &argAttrs);
  FailureOr<RankedTensorType> getInputType(const onnx::ValueInfoProto &info);
  LogicalResult importNode(const onnx::NodeProto &node, int64_t index);
  FailureOr<Attribute> convertAttribute(const onnx::NodeProto &node,
                                        const onnx::AttributeProto &attr);
  Type getDeclaredType(const std::string &name);

  MLIRContext *ctx;
  OpBuilder builder;
  const std::string &path;
  const onnx::ModelProto &model;
  const OnnxImportOptions &options;
  int64_t opset = 0;

  /// The graph's initializers, read once.
  std::map<std::string, rt::HostArray> initializers;
  /// Every tensor that may hold state, classified (onnximport).
  std::vector<onnximport::GraphTensor> tensors;
  /// The parameters and buffers among them, in argument order.
  std::vector<const onnximport::GraphTensor *> arguments;
  std::vector<const onnx::ValueInfoProto *> inputs;
  std::map<std::string, Value> values;
  std::map<std::string, const onnx::TypeProto *> declaredTypes;
};

} // namespace

LogicalResult Importer::readInitializers() {
  const onnx::GraphProto &graph = model.graph();
  std::set<std::string> used;
  for (const onnx::NodeProto &node : graph.node())
    for (const std::string &in : node.input())
      used.insert(in);
  for (const onnx::ValueInfoProto &out : graph.output())
    used.insert(out.name());
  // Initializers reached through an Identity are read too.
  for (const onnx::NodeProto &node : graph.node())
    if (node.op_type() == "Identity" && node.input_size() == 1)
      used.insert(node.input(0));

  std::string dir = dirName(path);
  for (const onnx::TensorProto &t : graph.initializer()) {
    if (!used.count(t.name()) || initializers.count(t.name()))
      continue;
    rt::HostArray array;
    if (rt::Status s = onnximport::tensorToHostArray(t, dir, array); !s.ok())
      return error(s.message);
    initializers.emplace(t.name(), std::move(array));
  }

  std::vector<std::string> warnings;
  if (rt::Status s = onnximport::classifyTensors(model, initializers,
                                                 options.frozen,
                                                 options.forTraining, tensors,
                                                 warnings);
      !s.ok())
    return error(s.message);
  for (const std::string &w : warnings)
    emitWarning(FileLineColLoc::get(ctx, path, 0, 0)) << w;
  if (options.tensorReport)
    *options.tensorReport = tensors;
  return success();
}

FailureOr<RankedTensorType>
Importer::getInputType(const onnx::ValueInfoProto &info) {
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;
  rt::DType dtype;
  if (rt::Status s =
          onnximport::readValueInfoShape(info, dims, symbols, dtype);
      !s.ok())
    return error(s.message);
  if (dtype != rt::DType::F32 && dtype != rt::DType::F64 &&
      dtype != rt::DType::F16 && dtype != rt::DType::BF16 &&
      dtype != rt::DType::I64 && dtype != rt::DType::I32 &&
      dtype != rt::DType::Bool)
    return error("input '" + info.name() + "' has element type " +
                 rt::dtypeName(dtype) +
                 ", which weft does not support; export it as float32 or "
                 "int64");
  auto it = options.inputShapes.find(info.name());
  if (it != options.inputShapes.end()) {
    const std::vector<int64_t> &given = it->second;
    bool fits = given.size() == dims.size();
    for (size_t i = 0; fits && i < dims.size(); ++i)
      fits = dims[i] < 0 || dims[i] == given[i];
    if (!fits) {
      std::string declared;
      for (size_t i = 0; i < dims.size(); ++i)
        declared += (i ? "x" : "") +
                    (dims[i] < 0 ? std::string("?") : std::to_string(dims[i]));
      return error("--input-shape " + info.name() + "=" +
                   formatShape(given) +
                   " does not fit the model's declared shape " + declared);
    }
    dims = given;
  }
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0)
      continue;
    std::string example;
    for (size_t j = 0; j < dims.size(); ++j)
      example += (j ? "x" : "") +
                 (dims[j] < 0 ? std::string(j == 0 ? "4" : "N")
                              : std::to_string(dims[j]));
    return error("input '" + info.name() + "' has dynamic dimension " +
                 std::to_string(i) +
                 (symbols[i].empty() ? std::string()
                                     : " ('" + symbols[i] + "')") +
                 "; weft compiles static shapes: give them with "
                 "--input-shape " +
                 info.name() + "=" + example);
  }
  return RankedTensorType::get(dims, getDialectElementType(ctx, dtype));
}

LogicalResult
Importer::buildSignature(SmallVectorImpl<Type> &argTypes,
                         SmallVectorImpl<DictionaryAttr> &argAttrs) {
  for (const onnximport::GraphTensor &t : tensors) {
    if (t.role != onnximport::TensorRole::Parameter &&
        t.role != onnximport::TensorRole::Buffer)
      continue;
    const rt::HostArray &a = initializers[t.source];
    SmallVector<int64_t> shape(a.shape.begin(), a.shape.end());
    if (t.transposed)
      std::reverse(shape.begin(), shape.end());
    argTypes.push_back(
        RankedTensorType::get(shape, getDialectElementType(ctx, a.dtype)));
    StringRef attrName = t.role == onnximport::TensorRole::Buffer
                             ? WeftDialect::kBufferAttrName
                             : WeftDialect::kParamAttrName;
    argAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        attrName, builder.getStringAttr(t.name))));
    arguments.push_back(&t);
  }
  // Graph inputs that are initializers are weights (older exporters list
  // them as inputs), not batch inputs.
  std::set<std::string> initializerNames;
  for (const onnx::TensorProto &t : model.graph().initializer())
    initializerNames.insert(t.name());
  std::vector<const onnx::ValueInfoProto *> batchInputs;
  std::set<std::string> known;
  for (const onnx::ValueInfoProto &in : model.graph().input())
    if (!initializerNames.count(in.name()) && known.insert(in.name()).second)
      batchInputs.push_back(&in);
  for (const auto &[name, shape] : options.inputShapes) {
    if (known.count(name))
      continue;
    std::string list;
    for (const onnx::ValueInfoProto *in : batchInputs)
      list += (list.empty() ? "" : ", ") + in->name();
    return error("--input-shape names '" + name +
                 "', which is not an input of the model (inputs: " + list +
                 ")");
  }
  for (const onnx::ValueInfoProto *input : batchInputs) {
    const onnx::ValueInfoProto &in = *input;
    FailureOr<RankedTensorType> type = getInputType(in);
    if (failed(type))
      return failure();
    inputs.push_back(&in);
    argTypes.push_back(*type);
    argAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
        WeftDialect::kInputAttrName, builder.getStringAttr(in.name()))));
  }
  return success();
}

Type Importer::getDeclaredType(const std::string &name) {
  auto it = declaredTypes.find(name);
  Type element = Float32Type::get(ctx);
  if (it != declaredTypes.end() && it->second->has_tensor_type()) {
    const onnx::TypeProto::Tensor &t = it->second->tensor_type();
    onnx::ValueInfoProto info;
    *info.mutable_type() = *it->second;
    std::vector<int64_t> dims;
    std::vector<std::string> symbols;
    rt::DType dtype;
    if (onnximport::readValueInfoShape(info, dims, symbols, dtype).ok()) {
      element = getDialectElementType(ctx, dtype);
      if (t.has_shape())
        return RankedTensorType::get(
            llvm::map_to_vector(dims,
                                [](int64_t d) {
                                  return d < 0 ? ShapedType::kDynamic : d;
                                }),
            element);
    }
  }
  return UnrankedTensorType::get(element);
}

FailureOr<Attribute>
Importer::convertAttribute(const onnx::NodeProto &node,
                           const onnx::AttributeProto &attr) {
  switch (attr.type()) {
  case onnx::AttributeProto::FLOAT:
    return Attribute(builder.getF32FloatAttr(attr.f()));
  case onnx::AttributeProto::INT:
    return Attribute(builder.getI64IntegerAttr(attr.i()));
  case onnx::AttributeProto::STRING:
    return Attribute(builder.getStringAttr(attr.s()));
  case onnx::AttributeProto::FLOATS:
    return Attribute(DenseF32ArrayAttr::get(
        ctx, SmallVector<float>(attr.floats().begin(), attr.floats().end())));
  case onnx::AttributeProto::INTS:
    return Attribute(DenseI64ArrayAttr::get(
        ctx, SmallVector<int64_t>(attr.ints().begin(), attr.ints().end())));
  case onnx::AttributeProto::STRINGS:
    return Attribute(builder.getStrArrayAttr(
        SmallVector<StringRef>(attr.strings().begin(), attr.strings().end())));
  case onnx::AttributeProto::TENSOR: {
    rt::HostArray a;
    if (rt::Status s = onnximport::tensorToHostArray(attr.t(), dirName(path), a);
        !s.ok())
      return error(s.message);
    return Attribute(toElementsAttr(ctx, a));
  }
  default:
    return error("node '" + node.name() + "' (" + node.op_type() +
                 "): attribute '" + attr.name() +
                 "' is a graph, sparse tensor or type; weft imports only "
                 "graphs without control flow or subgraphs");
  }
}

LogicalResult Importer::importNode(const onnx::NodeProto &node,
                                   int64_t index) {
  std::string name = node.name().empty()
                         ? node.op_type() + "_" + std::to_string(index)
                         : node.name();
  Location loc = NameLoc::get(builder.getStringAttr(name),
                                 FileLineColLoc::get(ctx, path, 0, 0));
  SmallVector<Value> operands;
  for (const std::string &in : node.input()) {
    if (in.empty()) {
      operands.push_back(OnnxNoneOp::create(builder, loc));
      continue;
    }
    auto it = values.find(in);
    if (it == values.end())
      return error("node '" + name + "' (" + node.op_type() +
                   ") reads '" + in + "', which nothing defines");
    operands.push_back(it->second);
  }

  // Constants need no legalization; importing them as weft.constant lets
  // legalizers match shape inputs directly.
  if (node.op_type() == "Constant" && node.attribute_size() == 1 &&
      node.attribute(0).name() == "value" && node.output_size() == 1) {
    FailureOr<Attribute> value = convertAttribute(node, node.attribute(0));
    if (failed(value))
      return failure();
    values[node.output(0)] =
        ConstantOp::create(builder, loc, cast<ElementsAttr>(*value));
    return success();
  }

  SmallVector<NamedAttribute> attrs;
  for (const onnx::AttributeProto &attr : node.attribute()) {
    FailureOr<Attribute> value = convertAttribute(node, attr);
    if (failed(value))
      return failure();
    attrs.push_back(builder.getNamedAttr(attr.name(), *value));
  }
  SmallVector<Type> resultTypes;
  for (const std::string &out : node.output())
    resultTypes.push_back(getDeclaredType(out));
  auto op = OnnxNodeOp::create(
      builder, loc, resultTypes, builder.getStringAttr(node.op_type()),
      builder.getI64IntegerAttr(opset), builder.getStringAttr(name),
      attrs.empty() ? DictionaryAttr() : builder.getDictionaryAttr(attrs),
      operands);
  for (auto [out, result] : llvm::zip(node.output(), op.getResults()))
    if (!out.empty())
      values[out] = result;
  return success();
}

OwningOpRef<ModuleOp> Importer::run() {
  opset = onnximport::getDefaultOpset(model);
  const onnx::GraphProto &graph = model.graph();
  for (const onnx::ValueInfoProto &v : graph.value_info())
    declaredTypes[v.name()] = &v.type();
  for (const onnx::ValueInfoProto &v : graph.output())
    declaredTypes[v.name()] = &v.type();
  if (failed(readInitializers()))
    return nullptr;

  SmallVector<Type> argTypes;
  SmallVector<DictionaryAttr> argAttrs;
  if (failed(buildSignature(argTypes, argAttrs)))
    return nullptr;

  Location fileLoc = FileLineColLoc::get(ctx, path, 0, 0);
  OwningOpRef<ModuleOp> module = ModuleOp::create(fileLoc);
  (*module)->setAttr(WeftDialect::kWeightsAttrName,
                     builder.getStringAttr(options.weightsAttr.empty()
                                               ? path
                                               : options.weightsAttr));
  // Tied parameters' second names, for a state_dict with every key.
  for (const onnx::StringStringEntryProto &entry : model.metadata_props()) {
    if (entry.key() != onnximport::kAliasesKey)
      continue;
    nlohmann::json map = nlohmann::json::parse(entry.value(), nullptr, false);
    SmallVector<NamedAttribute> aliases;
    if (map.is_object())
      for (auto it = map.begin(); it != map.end(); ++it)
        if (it.value().is_string())
          aliases.push_back(builder.getNamedAttr(
              it.key(), builder.getStringAttr(it.value().get<std::string>())));
    if (!map.is_object() || aliases.size() != map.size()) {
      emitError(fileLoc) << "the model's metadata '"
                         << onnximport::kAliasesKey
                         << "' is not a JSON object of names; re-export with "
                            "python/weft_export.py";
      return nullptr;
    }
    if (!aliases.empty())
      (*module)->setAttr(WeftDialect::kAliasesAttrName,
                         builder.getDictionaryAttr(aliases));
  }
  builder.setInsertionPointToEnd(module->getBody());
  auto fn = func::FuncOp::create(builder, fileLoc, options.functionName,
                                 builder.getFunctionType(argTypes, {}));
  fn.setAllArgAttrs(argAttrs);
  Block *body = fn.addEntryBlock();
  builder.setInsertionPointToStart(body);

  std::map<std::string, Value> argumentValues;
  for (auto [i, t] : llvm::enumerate(arguments))
    argumentValues[t->name] = body->getArgument(i);
  for (auto [i, in] : llvm::enumerate(inputs))
    values[in->name()] = body->getArgument(arguments.size() + i);
  for (const onnximport::GraphTensor &t : tensors) {
    Location loc = NameLoc::get(builder.getStringAttr(t.onnxName),
                                FileLineColLoc::get(ctx, path, 0, 0));
    if (t.role == onnximport::TensorRole::Constant || t.readAsConstant) {
      values[t.onnxName] = ConstantOp::create(
          builder, loc, toElementsAttr(ctx, initializers[t.source]));
      continue;
    }
    Value v = argumentValues[t.name];
    if (t.transposed)
      v = TransposeOp::create(builder, loc, v,
                              builder.getDenseI64ArrayAttr({1, 0}));
    values[t.onnxName] = v;
  }
  // Initializers only an Identity reads, and any the classification did
  // not list, are constants.
  for (auto &[name, array] : initializers)
    if (!values.count(name))
      values[name] = ConstantOp::create(
          builder,
          NameLoc::get(builder.getStringAttr(name),
                       FileLineColLoc::get(ctx, path, 0, 0)),
          toElementsAttr(ctx, array));

  for (auto [i, node] : llvm::enumerate(graph.node())) {
    // An Identity of an initializer defines a tensor of its own above.
    if (node.op_type() == "Identity" && node.output_size() == 1 &&
        values.count(node.output(0)))
      continue;
    if (failed(importNode(node, i)))
      return nullptr;
  }

  SmallVector<Value> results;
  for (const onnx::ValueInfoProto &out : graph.output()) {
    auto it = values.find(out.name());
    if (it == values.end()) {
      (void)error("graph output '" + out.name() + "' is never computed");
      return nullptr;
    }
    results.push_back(it->second);
  }
  func::ReturnOp::create(builder, fileLoc, results);
  fn.setFunctionType(
      builder.getFunctionType(argTypes, ValueRange(results).getTypes()));
  return module;
}

OwningOpRef<ModuleOp> weft::importOnnxModel(MLIRContext *context,
                                            const std::string &path,
                                            const OnnxImportOptions &options) {
  context->loadDialect<WeftDialect, func::FuncDialect>();
  onnx::ModelProto model;
  if (rt::Status s = onnximport::loadOnnxModel(path, model); !s.ok()) {
    emitError(UnknownLoc::get(context)) << s.message;
    return nullptr;
  }
  return Importer(context, path, model, options).run();
}

LogicalResult weft::parseInputShape(const std::string &spec, std::string &name,
                                    std::vector<int64_t> &shape,
                                    Location loc) {
  size_t eq = spec.rfind('=');
  if (eq == std::string::npos || eq == 0)
    return emitError(loc) << "--input-shape expects NAME=DIMS such as "
                             "input=4x48, got '"
                          << spec << "'";
  name = spec.substr(0, eq);
  shape.clear();
  SmallVector<StringRef> parts;
  StringRef(spec).substr(eq + 1).split(parts, 'x');
  for (StringRef part : parts) {
    int64_t dim;
    if (part.getAsInteger(10, dim) || dim < 1)
      return emitError(loc) << "--input-shape " << spec
                            << ": every dimension must be a positive "
                               "integer (e.g. "
                            << name << "=4x48)";
    shape.push_back(dim);
  }
  return success();
}
