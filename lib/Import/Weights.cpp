//===- Weights.cpp - Initial parameter values beside the IR ---------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Import/Weights.h"
#include "weft/Import/Initializers.h"
#include "weft/Import/OnnxModel.h"
#include "weft/Formats/SafeTensors.h"

#include <fstream>
#include <map>

using namespace weft;

namespace {
bool hasSafeTensorsHeader(const std::string &path) {
  // safetensors starts with a little-endian header length followed by '{';
  // ONNX protobufs start with a field tag, never '{' at offset 8.
  std::ifstream in(path, std::ios::binary);
  char head[9] = {};
  return in.read(head, 9) && head[8] == '{';
}

std::string dirName(const std::string &path) {
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : path.substr(0, slash + 1);
}
} // namespace

rt::Status weft::readWeights(const std::string &path,
                             const std::vector<std::string> &names,
                             std::vector<rt::HostArray> &out) {
  out.clear();
  if (names.empty())
    return rt::Status::success();
  if (hasSafeTensorsHeader(path)) {
    rt::SafeTensorsFile file;
    if (rt::Status s = rt::readSafeTensors(path, file); !s.ok())
      return s;
    std::map<std::string, rt::HostArray *> byName;
    for (auto &[name, array] : file.tensors)
      byName[name] = &array;
    for (const std::string &name : names) {
      auto it = byName.find(name);
      if (it == byName.end())
        return rt::Status::error(path + ": no tensor named '" + name +
                                 "' (the weights file does not belong to "
                                 "this model?)");
      out.push_back(std::move(*it->second));
    }
    return rt::Status::success();
  }

  onnx::ModelProto model;
  if (rt::Status s = onnximport::loadOnnxModel(path, model); !s.ok())
    return s;
  std::map<std::string, const onnx::TensorProto *> byName;
  for (const onnx::TensorProto &t : model.graph().initializer())
    byName[t.name()] = &t;
  // Arguments may be named after an Identity of an initializer or the
  // PyTorch name the export metadata gives a folded copy.
  std::map<std::string, onnximport::WeightSource> sources;
  if (rt::Status s = onnximport::collectWeightSources(model, sources); !s.ok())
    return rt::Status::error(path + ": " + s.message);
  for (const std::string &name : names) {
    auto source = sources.find(name);
    auto it = source == sources.end() ? byName.end()
                                      : byName.find(source->second.source);
    if (it == byName.end())
      return rt::Status::error(path + ": no initializer named '" + name +
                               "' (the weights file does not belong to this "
                               "model?)");
    rt::HostArray array;
    if (rt::Status s =
            onnximport::tensorToHostArray(*it->second, dirName(path), array);
        !s.ok())
      return s;
    if (rt::Status s =
            onnximport::applyTranspose(array, source->second.transpose);
        !s.ok())
      return rt::Status::error(path + ": '" + name + "': " + s.message);
    out.push_back(std::move(array));
  }
  return rt::Status::success();
}

std::string weft::resolveWeightsPath(const std::string &weightsAttr,
                                     const std::string &irFilePath) {
  if (weightsAttr.empty() || weightsAttr[0] == '/' || irFilePath.empty() ||
      irFilePath == "-")
    return weightsAttr;
  size_t slash = irFilePath.find_last_of('/');
  if (slash == std::string::npos)
    return weightsAttr;
  return irFilePath.substr(0, slash + 1) + weightsAttr;
}
