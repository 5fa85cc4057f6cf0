//===- Initializers.h - Which ONNX tensors train --------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// ONNX does not say which initializers PyTorch trains. This decides, for
// every initializer and every `Identity` of one, whether it is a parameter,
// a buffer, a constant, or tied to another tensor, and under which name
// and layout its value is read. The importer builds the function signature
// from it and `readWeights` reads initial values through the same sources,
// so both always agree. Pure C++ (no MLIR) so the weights reader shares it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_IMPORT_INITIALIZERS_H
#define WEFT_IMPORT_INITIALIZERS_H

#include "weft/Formats/HostArray.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <string>
#include <vector>

namespace weft {
namespace onnximport {

/// `metadata_props` keys written by python/weft_export.py: JSON lists of
/// PyTorch's `named_parameters()` and `named_buffers()` names, and a JSON
/// object mapping initializers the exporter renamed (constant folding's
/// `onnx::MatMul_N`) to `{"name": <state_dict name>, "transpose": bool}`.
inline constexpr const char *kParametersKey = "weft.parameters";
inline constexpr const char *kBuffersKey = "weft.buffers";
inline constexpr const char *kRenamedKey = "weft.renamed";
/// A JSON object {state_dict name: parameter name} of tied parameters'
/// second names; carried to the model JSON for `weft-ckpt export`.
inline constexpr const char *kAliasesKey = "weft.aliases";

/// Where an argument's initial value comes from: initializer `source`,
/// transposed (2-D) when `transpose` is set.
struct WeightSource {
  std::string source;
  bool transpose = false;
};

/// Every name a weights reader may be asked for: each initializer (its own
/// source), each `Identity` output of an initializer, and each name the
/// export metadata renames a folded initializer to.
rt::Status collectWeightSources(const onnx::ModelProto &model,
                                std::map<std::string, WeightSource> &out);

/// `array` transposed when `transpose` is set (2-D only; checked).
rt::Status applyTranspose(rt::HostArray &array, bool transpose);

enum class TensorRole { Parameter, Buffer, Constant, Tied };

/// One tensor of the graph that may hold state.
struct GraphTensor {
  /// Its name in the graph (an initializer or an Identity output).
  std::string onnxName;
  /// Parameter / Buffer: the argument name (PyTorch's when known).
  /// Tied: the argument it shares storage with.
  std::string name;
  /// The graph's value is the argument transposed (2-D).
  bool transposed = false;
  /// The initializer holding the initial value, in the graph's layout.
  std::string source;
  TensorRole role = TensorRole::Constant;
  /// Why, for `weftc --summary`.
  std::string reason;
  /// A Buffer whose value the step reads as the initializer's constant
  /// (only compared: a mask); the argument still carries it through
  /// weights files and checkpoints.
  bool readAsConstant = false;
};

/// Classifies every initializer used by the graph and every Identity of
/// one, in graph order. `values` holds the graph's initializers (by name);
/// `frozen` names tensors to keep as buffers (`--freeze`). Warnings (a
/// listed parameter the graph lacks) are appended to `warnings`. Errors:
/// malformed export metadata, `--freeze` of an unknown name, and, with
/// `forTraining`, weights the exporter computed by folding (BatchNorm into
/// a convolution), which evaluate right but cannot train PyTorch's model.
rt::Status classifyTensors(const onnx::ModelProto &model,
                           const std::map<std::string, rt::HostArray> &values,
                           const std::vector<std::string> &frozen,
                           bool forTraining, std::vector<GraphTensor> &out,
                           std::vector<std::string> &warnings);

const char *roleName(TensorRole role);

} // namespace onnximport
} // namespace weft

#endif // WEFT_IMPORT_INITIALIZERS_H
