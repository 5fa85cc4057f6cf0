//===- Initializers.cpp - Which ONNX tensors train ------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// PyTorch's exporter loses the parameter/buffer distinction and, in eval
// mode, merges tensors that hold equal values: one initializer plus an
// `Identity` to each other parameter's name. Training such a group as one
// tensor trains a different model, so every Identity of an initializer is a
// tensor of its own here; only one initializer read directly by several
// nodes (tied embeddings) is a true tie.
//
//===----------------------------------------------------------------------===//

#include "weft/Import/Initializers.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

using namespace weft;
using namespace weft::onnximport;

namespace {

struct Metadata {
  bool present = false;
  std::vector<std::string> parameters;
  std::set<std::string> parameterSet, buffers;
  std::map<std::string, WeightSource> renamed; // onnx name -> PyTorch name
};

rt::Status readNameList(const std::string &key, const std::string &text,
                        std::vector<std::string> &out) {
  nlohmann::json list = nlohmann::json::parse(text, nullptr, false);
  if (!list.is_array())
    return rt::Status::error("the model's metadata '" + key +
                             "' is not a JSON list of names; re-export "
                             "with python/weft_export.py");
  for (const nlohmann::json &name : list) {
    if (!name.is_string())
      return rt::Status::error("the model's metadata '" + key +
                               "' holds a non-string entry; re-export with "
                               "python/weft_export.py");
    out.push_back(name.get<std::string>());
  }
  return rt::Status::success();
}

rt::Status readMetadata(const onnx::ModelProto &model, Metadata &md) {
  for (const onnx::StringStringEntryProto &entry : model.metadata_props()) {
    if (entry.key() == kParametersKey) {
      md.present = true;
      if (rt::Status s = readNameList(entry.key(), entry.value(), md.parameters);
          !s.ok())
        return s;
    } else if (entry.key() == kBuffersKey) {
      std::vector<std::string> names;
      if (rt::Status s = readNameList(entry.key(), entry.value(), names);
          !s.ok())
        return s;
      md.buffers.insert(names.begin(), names.end());
    } else if (entry.key() == kRenamedKey) {
      nlohmann::json map = nlohmann::json::parse(entry.value(), nullptr, false);
      if (!map.is_object())
        return rt::Status::error("the model's metadata '" +
                                 std::string(kRenamedKey) +
                                 "' is not a JSON object; re-export with "
                                 "python/weft_export.py");
      for (auto it = map.begin(); it != map.end(); ++it) {
        const nlohmann::json &v = it.value();
        if (!v.is_object() || !v.contains("name") || !v["name"].is_string())
          return rt::Status::error(
              "the model's metadata '" + std::string(kRenamedKey) +
              "' entry '" + it.key() +
              "' lacks a \"name\"; re-export with python/weft_export.py");
        md.renamed[it.key()] = {v["name"].get<std::string>(),
                                v.value("transpose", false)};
      }
    }
  }
  md.parameterSet.insert(md.parameters.begin(), md.parameters.end());
  return rt::Status::success();
}

bool isFloat(rt::DType dtype) {
  return dtype == rt::DType::F64 || dtype == rt::DType::F32 ||
         dtype == rt::DType::F16 || dtype == rt::DType::BF16;
}

bool allFinite(const rt::HostArray &a) {
  for (int64_t i = 0, e = a.numElements(); i < e; ++i)
    if (!std::isfinite(a.getAsDouble(i)))
      return false;
  return true;
}

bool isTransposeOf(const rt::HostArray &a, const rt::HostArray &b) {
  if (a.dtype != b.dtype || a.shape.size() != 2 || b.shape.size() != 2 ||
      a.shape[0] != b.shape[1] || a.shape[1] != b.shape[0])
    return false;
  size_t size = rt::dtypeSize(a.dtype);
  int64_t rows = a.shape[0], cols = a.shape[1];
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      if (std::memcmp(&a.data[(i * cols + j) * size],
                      &b.data[(j * rows + i) * size], size) != 0)
        return false;
  return true;
}

bool startsWith(const std::string &s, const char *prefix) {
  return s.rfind(prefix, 0) == 0;
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Identity outputs whose input is an initializer, in node order.
std::vector<std::pair<std::string, std::string>>
identitiesOfInitializers(const onnx::ModelProto &model,
                         const std::set<std::string> &initializers) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const onnx::NodeProto &node : model.graph().node())
    if (node.op_type() == "Identity" && node.input_size() == 1 &&
        node.output_size() == 1 && initializers.count(node.input(0)) &&
        !initializers.count(node.output(0)))
      out.emplace_back(node.output(0), node.input(0));
  return out;
}

/// Is every use of `name` a comparison, directly or through ops that only
/// move its elements? Then its value matters only as the boolean mask the
/// comparison makes (a causal mask stored as a float buffer, as GPT-2's
/// `attn.bias`), nothing can train or update it, and the step may read it
/// as the constant it is: the importer then sees the mask (onnxtoweft's
/// Where recognizes weft.causal_mask) instead of reading a buffer every
/// step.
bool comparedOnly(
    const std::string &name,
    const std::multimap<std::string, std::pair<const onnx::NodeProto *, int>>
        &uses,
    const std::set<std::string> &outputs, int depth = 0) {
  static const std::set<std::string> comparisons = {
      "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"};
  static const std::set<std::string> moves = {
      "Identity", "Slice", "Reshape", "Squeeze", "Unsqueeze", "Expand", "Cast"};
  auto [begin, end] = uses.equal_range(name);
  if (begin == end || outputs.count(name) || depth > 8)
    return false;
  for (auto it = begin; it != end; ++it) {
    const auto &[node, index] = it->second;
    if (comparisons.count(node->op_type()))
      continue;
    if (!moves.count(node->op_type()) || index != 0)
      return false;
    for (const std::string &out : node->output())
      if (!comparedOnly(out, uses, outputs, depth + 1))
        return false;
  }
  return true;
}

} // namespace

const char *weft::onnximport::roleName(TensorRole role) {
  switch (role) {
  case TensorRole::Parameter:
    return "parameter";
  case TensorRole::Buffer:
    return "buffer";
  case TensorRole::Constant:
    return "constant";
  case TensorRole::Tied:
    return "tied";
  }
  return "?";
}

rt::Status weft::onnximport::applyTranspose(rt::HostArray &array,
                                            bool transpose) {
  if (!transpose)
    return rt::Status::success();
  if (array.shape.size() != 2)
    return rt::Status::error("a transposed weight must be 2-D");
  size_t size = rt::dtypeSize(array.dtype);
  int64_t rows = array.shape[0], cols = array.shape[1];
  std::vector<uint8_t> data(array.data.size());
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      std::memcpy(&data[(j * rows + i) * size],
                  &array.data[(i * cols + j) * size], size);
  array.data = std::move(data);
  array.shape = {cols, rows};
  return rt::Status::success();
}

rt::Status
weft::onnximport::collectWeightSources(const onnx::ModelProto &model,
                                       std::map<std::string, WeightSource> &out) {
  Metadata md;
  if (rt::Status s = readMetadata(model, md); !s.ok())
    return s;
  std::set<std::string> initializers;
  for (const onnx::TensorProto &t : model.graph().initializer()) {
    initializers.insert(t.name());
    out[t.name()] = {t.name(), false};
  }
  for (const auto &[output, input] :
       identitiesOfInitializers(model, initializers))
    out.emplace(output, WeightSource{input, false});
  // A renamed tensor's argument holds PyTorch's layout: the graph's value
  // transposed back when the exporter folded a transpose into it.
  for (const auto &[onnxName, target] : md.renamed) {
    auto it = out.find(onnxName);
    if (it != out.end() && !out.count(target.source))
      out[target.source] = {it->second.source, target.transpose};
  }
  return rt::Status::success();
}

rt::Status weft::onnximport::classifyTensors(
    const onnx::ModelProto &model,
    const std::map<std::string, rt::HostArray> &values,
    const std::vector<std::string> &frozen, bool forTraining,
    std::vector<GraphTensor> &out, std::vector<std::string> &warnings) {
  Metadata md;
  if (rt::Status s = readMetadata(model, md); !s.ok())
    return s;
  const onnx::GraphProto &graph = model.graph();

  std::set<std::string> used, bnStatistics, convWeights;
  for (const onnx::NodeProto &node : graph.node()) {
    for (const std::string &in : node.input())
      used.insert(in);
    if (node.op_type() == "BatchNormalization")
      for (int i = 3; i < node.input_size() && i < 5; ++i)
        bnStatistics.insert(node.input(i));
    if (node.op_type() == "Conv" || node.op_type() == "ConvTranspose")
      for (int i = 1; i < node.input_size() && i < 3; ++i)
        convWeights.insert(node.input(i));
  }
  std::set<std::string> outputs;
  for (const onnx::ValueInfoProto &o : graph.output()) {
    used.insert(o.name());
    outputs.insert(o.name());
  }
  std::multimap<std::string, std::pair<const onnx::NodeProto *, int>> uses;
  for (const onnx::NodeProto &node : graph.node())
    for (int i = 0; i < node.input_size(); ++i)
      uses.emplace(node.input(i), std::make_pair(&node, i));

  // Candidates: used initializers in file order, then Identity outputs.
  std::set<std::string> initializers;
  for (const onnx::TensorProto &t : graph.initializer())
    if (values.count(t.name()))
      initializers.insert(t.name());
  std::vector<GraphTensor> candidates;
  std::set<std::string> seen;
  for (const onnx::TensorProto &t : graph.initializer())
    if (used.count(t.name()) && values.count(t.name()) &&
        seen.insert(t.name()).second)
      candidates.push_back({t.name(), t.name(), false, t.name(),
                            TensorRole::Constant, ""});
  for (const auto &[output, input] : identitiesOfInitializers(model, initializers))
    if (used.count(output) && seen.insert(output).second)
      candidates.push_back(
          {output, output, false, input, TensorRole::Constant, ""});

  std::set<std::string> frozenSet(frozen.begin(), frozen.end());
  for (const std::string &name : frozen)
    if (!seen.count(name) &&
        std::none_of(md.renamed.begin(), md.renamed.end(),
                     [&](const auto &r) { return r.second.source == name; }))
      return rt::Status::error("--freeze names '" + name +
                               "', which is not a float initializer used by "
                               "the model");

  std::map<std::string, const GraphTensor *> arguments;
  for (GraphTensor &c : candidates) {
    const rt::HostArray &a = values.at(c.source);
    if (!isFloat(a.dtype)) {
      c.reason = "not floating point";
      continue;
    }
    if (a.numElements() <= 1) {
      // PyTorch folds hyperparameters (1/sqrt(d), eps) into scalars.
      c.reason = "a scalar";
      continue;
    }
    if (md.present) {
      auto renamed = md.renamed.find(c.onnxName);
      if (renamed != md.renamed.end()) {
        c.name = renamed->second.source;
        c.transposed = renamed->second.transpose;
      }
      if (md.parameterSet.count(c.name)) {
        c.role = TensorRole::Parameter;
        c.reason = "a parameter (export metadata)";
      } else if (md.buffers.count(c.name)) {
        c.role = TensorRole::Buffer;
        c.reason = "a buffer (export metadata)";
      } else {
        c.reason = "neither a parameter nor a buffer in the export metadata "
                   "(a value the exporter computed)";
      }
    } else if (bnStatistics.count(c.onnxName) ||
               endsWith(c.name, ".running_mean") ||
               endsWith(c.name, ".running_var")) {
      c.role = TensorRole::Buffer;
      c.reason = "a BatchNorm running statistic";
    } else {
      c.role = TensorRole::Parameter;
      c.reason = c.onnxName == c.source
                     ? "a float initializer"
                     : "its own tensor: the exporter merged equal values "
                       "into '" + c.source + "'";
    }
    if (frozenSet.count(c.name) || frozenSet.count(c.onnxName)) {
      c.role = TensorRole::Buffer;
      c.reason = "--freeze";
    }
    if (c.role == TensorRole::Parameter && !allFinite(a)) {
      c.role = TensorRole::Buffer;
      c.reason = "holds non-finite values (a mask), never trainable";
    }
    if (!bnStatistics.count(c.onnxName) &&
        comparedOnly(c.onnxName, uses, outputs)) {
      // Still a buffer of the checkpoints (a PyTorch state_dict has it),
      // but the step compares its exported value.
      c.role = TensorRole::Buffer;
      c.readAsConstant = true;
      c.reason = "only compared (a mask): a buffer the step reads as its "
                 "exported value";
    }
  }

  // Ties: a second tensor under the same argument name (metadata renames
  // two folded copies of one parameter), or, without metadata, a generated
  // `onnx::` initializer equal to a named parameter or its transpose.
  for (GraphTensor &c : candidates) {
    if (c.role != TensorRole::Parameter && c.role != TensorRole::Buffer)
      continue;
    auto [it, inserted] = arguments.emplace(c.name, &c);
    if (!inserted) {
      c.role = TensorRole::Tied;
      c.reason = "tied to '" + c.name + "'";
      continue;
    }
  }
  if (!md.present) {
    for (GraphTensor &c : candidates) {
      if (c.role != TensorRole::Parameter || !startsWith(c.onnxName, "onnx::") ||
          c.onnxName != c.source || frozenSet.count(c.onnxName))
        continue;
      const rt::HostArray &copy = values.at(c.source);
      for (const GraphTensor &target : candidates) {
        if (target.role != TensorRole::Parameter ||
            startsWith(target.onnxName, "onnx::"))
          continue;
        const rt::HostArray &orig = values.at(target.source);
        bool same = orig.shape == copy.shape && orig.dtype == copy.dtype &&
                    orig.data == copy.data;
        if (same || isTransposeOf(orig, copy)) {
          arguments.erase(c.name);
          c.role = TensorRole::Tied;
          c.name = target.name;
          c.transposed = !same;
          c.reason = "tied to '" + target.name + "'" +
                     (same ? "" : " (transposed)");
          break;
        }
      }
    }
  }

  // Eval-mode exports fold each BatchNorm into the convolution before it:
  // the graph then holds neither the convolution's weight nor the
  // BatchNorm's parameters, and training the product trains another model.
  std::string folded;
  for (const GraphTensor &c : candidates)
    if (convWeights.count(c.onnxName) && startsWith(c.source, "onnx::") &&
        c.role != TensorRole::Tied &&
        !(md.present && md.renamed.count(c.onnxName)) &&
        !frozenSet.count(c.onnxName))
      folded += (folded.empty() ? "" : ",") + c.onnxName;
  if (forTraining && !folded.empty())
    return rt::Status::error(
        "the convolution weights " + folded +
        " are values PyTorch's exporter computed, not parameters: an "
        "eval-mode export folds each BatchNorm into the convolution before "
        "it, so training this graph would not train the model's "
        "convolution and BatchNorm parameters. Export in training mode "
        "(torch.onnx.export(..., training=torch.onnx.TrainingMode.TRAINING)) "
        "or with python/weft_export.py, or keep the folded weights fixed "
        "with --freeze " + folded);

  if (md.present) {
    std::vector<std::string> missing;
    for (const std::string &name : md.parameters)
      if (!arguments.count(name))
        missing.push_back(name);
    if (!missing.empty()) {
      std::string list;
      for (size_t i = 0; i < missing.size() && i < 5; ++i)
        list += (i ? ", " : "") + missing[i];
      if (missing.size() > 5)
        list += ", ... (" + std::to_string(missing.size()) + " in all)";
      warnings.push_back(
          "parameters of the PyTorch model that are not in the graph will "
          "not train: " + list +
          " (unused by forward(), or folded away by the exporter)");
    }
  }
  out = std::move(candidates);
  return rt::Status::success();
}
