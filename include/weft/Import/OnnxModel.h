//===- OnnxModel.h - Reading and checking ONNX model files ------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The file layer of the ONNX importer: it parses a model file, rejects files
// that are truncated, malformed or use features Weft does not import, and
// decodes tensors (inline or external data) into plain host arrays. It knows
// nothing of MLIR, so the importer proper can assume a structurally sound
// graph and the runtime tools can read initializers without linking MLIR.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_IMPORT_ONNXMODEL_H
#define WEFT_IMPORT_ONNXMODEL_H

#include "weft/Formats/HostArray.h"

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <string>
#include <vector>

namespace weft {
namespace onnximport {

/// Reads and parses the ONNX model at `path` and checks that it is one the
/// importer can walk: a positive ir_version, a graph, an opset for the default
/// domain, every node with an op_type and with inputs that name a graph input,
/// an initializer or an earlier node output (recursively for subgraphs, which
/// may also use names of enclosing graphs). Models with ONNX-ML nodes,
/// model-local functions or sparse initializers are refused. Errors name
/// `path`, and for graph errors the first offending node.
rt::Status loadOnnxModel(const std::string &path, onnx::ModelProto &model);

/// Opset version of the default ("" or "ai.onnx") domain, or 0 if the model
/// imports none (loadOnnxModel refuses such models).
int64_t getDefaultOpset(const onnx::ModelProto &model);

/// Decodes an initializer or Constant value into `out`. Inline data may be in
/// raw_data or the typed field the ONNX spec assigns to the dtype. External
/// data is read from a regular file under `modelDir`; locations that are
/// absolute, contain `..` or pass through a symlink are refused so a model
/// cannot make the reader open files outside its own directory. Errors name
/// the tensor.
rt::Status tensorToHostArray(const onnx::TensorProto &tensor,
                             const std::string &modelDir, rt::HostArray &out);

/// Reads the tensor type of a graph input or output. `dims` gets -1 for every
/// dimension that is not a fixed size, and `symbolicNames[i]` the dim_param
/// of dimension i or "" if it has none. A value of unknown rank or of a
/// non-tensor type is an error.
rt::Status readValueInfoShape(const onnx::ValueInfoProto &info,
                              std::vector<int64_t> &dims,
                              std::vector<std::string> &symbolicNames,
                              rt::DType &elemType);

} // namespace onnximport
} // namespace weft

#endif // WEFT_IMPORT_ONNXMODEL_H
