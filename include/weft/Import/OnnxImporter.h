//===- OnnxImporter.h - ONNX protobuf to generic weft IR ----------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The importer is deliberately dumb: every ONNX node becomes one
// `weft.onnx.node` keeping its op type, opset and attributes; initializers
// become parameters or constants. Everything op-specific lives in the
// `--weft-legalize-onnx` patterns, which are tested on .mlir files.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_IMPORT_ONNXIMPORTER_H
#define WEFT_IMPORT_ONNXIMPORTER_H

#include "weft/Import/Initializers.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <map>
#include <string>
#include <vector>

namespace weft {

struct OnnxImportOptions {
  /// Static shapes for graph inputs, by input name; required for every
  /// input with a dynamic dimension.
  std::map<std::string, std::vector<int64_t>> inputShapes;
  /// Float initializers that are loaded with the weights but not trained
  /// (PyTorch buffers); they become `weft.buffer` arguments.
  std::vector<std::string> frozen;
  /// Value of the module's `weft.weights` attribute: how IR readers find
  /// the initializers (by default the model path as given).
  std::string weightsAttr;
  /// Name of the imported function.
  std::string functionName = "forward";
  /// The model is imported to be trained: weights the exporter computed by
  /// folding (BatchNorm into convolutions) are refused.
  bool forTraining = true;
  /// When set, receives how every initializer was classified (parameter,
  /// buffer, constant, tied) and why, for `weftc --summary`.
  std::vector<onnximport::GraphTensor> *tensorReport = nullptr;
};

/// Imports the ONNX model at `path` into generic form. Errors (unreadable
/// file, dynamic shapes without --input-shape, unsupported attribute kinds)
/// are emitted as diagnostics and yield null.
mlir::OwningOpRef<mlir::ModuleOp>
importOnnxModel(mlir::MLIRContext *context, const std::string &path,
                const OnnxImportOptions &options);

/// Parses "name=4x48" into a name and shape; an error at `loc` when
/// malformed.
mlir::LogicalResult parseInputShape(const std::string &spec,
                                    std::string &name,
                                    std::vector<int64_t> &shape,
                                    mlir::Location loc);

} // namespace weft

#endif // WEFT_IMPORT_ONNXIMPORTER_H
