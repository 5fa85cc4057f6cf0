//===- Weights.h - Initial parameter values beside the IR ---------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Parameter values stay out of the textual IR: the module's `weft.weights`
// attribute names a file holding them, either the ONNX model they came from
// (its initializers) or a safetensors file. This reader is pure C++ so the
// runtime and every tool share it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_IMPORT_WEIGHTS_H
#define WEFT_IMPORT_WEIGHTS_H

#include "weft/Formats/HostArray.h"

#include <string>
#include <vector>

namespace weft {

/// Reads the tensors called `names` from `path` (.onnx or .safetensors, by
/// content). `out` receives one array per name, in order. Errors name the
/// file and the first missing or unreadable tensor.
rt::Status readWeights(const std::string &path,
                       const std::vector<std::string> &names,
                       std::vector<rt::HostArray> &out);

/// Resolves a `weft.weights` attribute value against the folder of the IR
/// file it was read from (absolute paths are kept).
std::string resolveWeightsPath(const std::string &weightsAttr,
                               const std::string &irFilePath);

} // namespace weft

#endif // WEFT_IMPORT_WEIGHTS_H
