//===- ModelDescriptor.h - What the executable tells the runtime -*- C++
//-*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A compiled model exports `weft_get_model()` (include/weft/Runtime/
// ModelABI.h): the step function's arguments and results by name, kind,
// dtype and shape, a JSON description of how it was compiled, the initial
// weights as an embedded safetensors image, the workspace size, and a
// `trainStep(args, results, workspace)` wrapper around the generated code.
// This header collects that information from the tensor-level entry
// function and writes it into the LLVM module next to the code.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_MODELDESCRIPTOR_H
#define WEFT_TARGET_MODELDESCRIPTOR_H

#include "weft/Runtime/ModelABI.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class Module;
} // namespace llvm

namespace mlir {
namespace func {
class FuncOp;
} // namespace func
} // namespace mlir

namespace weft {

/// One argument or result of the step as the runtime sees it.
struct AbiTensor {
  std::string name;
  /// "param", "state", "buffer", "input" or "output".
  std::string kind;
  /// A weft::rt::DType value.
  int32_t dtype = 0;
  std::vector<int64_t> shape;
  /// For a slot of a partitioned step split over the mesh (its
  /// `weft.sharding` splits a dim): the global shape and, per dim, the mesh
  /// axes splitting it. Empty otherwise; `shape` is always the local one.
  std::vector<int64_t> globalShape;
  std::vector<std::vector<std::string>> shardDims;
  /// For a slot the step holds as a view (`weft.stored_shape`): the shape
  /// the weights and checkpoints know it by; `globalShape` is the view's.
  std::vector<int64_t> storedShape;

  /// Size of the dense row-major buffer in bytes.
  uint64_t bytes() const;
};

/// The step function's C ABI: arguments, then results, in order.
struct ModelAbi {
  std::vector<AbiTensor> args, results;
  /// The module's `weft.mesh` (axis names and sizes, major first), empty
  /// for a one-device step.
  std::vector<std::pair<std::string, int64_t>> mesh;

  /// Names of the "param" and "buffer" arguments, whose initial values the
  /// executable embeds, in argument order.
  std::vector<std::string> weightNames() const;
};

/// Reads the ABI of a tensor-level step function from its signature
/// (weft/Dialect/Weft/IR/TrainStep.h): an argument without a role is an
/// input named `arg<i>`, a result an output named `result<i>`; the runtime
/// context argument is skipped. A partitioned step also gives the mesh and
/// each split slot's global shape. Errors
/// (emitted on the function): a type that is not a statically shaped tensor
/// of a dtype the runtime knows, a gradient, an output as argument or an
/// input as result.
mlir::FailureOr<ModelAbi> collectModelAbi(mlir::func::FuncOp entry);

/// For a cross-entropy loss, the number of classes (the last axis of
/// @forward's output, the vocabulary of a language model): the runtime
/// range-checks labels and tokens against it.
std::optional<int64_t> getNumClasses(mlir::ModuleOp module);

/// The model JSON the runtime reads (lib/Runtime/ModelSpec.cpp) and every
/// checkpoint records: Weft's version, the source model's file name, the
/// entry, how the step was built (the module's weft.train_config), the
/// defaults of its run-time hyperparameters, planned memory, counts, and
/// `numClasses` (getNumClasses before code generation drops @forward).
std::string buildModelJson(mlir::ModuleOp module, const ModelAbi &abi,
                           llvm::StringRef source, llvm::StringRef entry,
                           std::optional<int64_t> numClasses);

/// Everything the descriptor holds besides the code.
struct ModelDescriptor {
  ModelAbi abi;
  std::string modelJson;
  uint64_t workspaceBytes = 0;
  /// A safetensors file embedded with `.incbin` when the object is
  /// assembled, or empty for no weights (weights = NULL).
  std::string weightsPath;
  uint64_t weightsSize = 0;
  /// Or, for weights left beside the executable: the file's name (no
  /// folder), size and FNV-1a 64 checksum.
  std::string weightsFile;
  uint64_t weightsFileSize = 0, weightsFileChecksum = 0;
  /// Or the same file appended to the executable after the link
  /// (appendWeights in weft/Target/CPU.h): weightsFile is empty and the
  /// descriptor's name is "", which tells the runtime to map its own
  /// executable's tail.
  bool weightsAppended = false;
  /// A pipeline executable's programs, one per pipeline rank, are built as
  /// separate modules linked together: program `programIndex` of
  /// `numPrograms`. Program 0's module defines the program table and
  /// `weft_get_model()`; the others' tables are found by symbol. With
  /// `weightsPath` empty and `sharedWeights`, the program points at the
  /// weights program 0's module embeds.
  int32_t programIndex = 0, numPrograms = 1;
  bool sharedWeights = false;
  /// WEFT_DEVICE_CPU or WEFT_DEVICE_CUDA (ModelABI.h): whether the step
  /// function takes host or device pointers.
  int32_t deviceType = WEFT_DEVICE_CPU;
};

/// Adds `weft_get_model()` and the `trainStep` wrapper to `module`, which
/// holds the translated step function `stepName`: its parameters are one
/// pointer per argument, per result (out-parameters) and the workspace, in
/// that order, after the runtime context when the step communicates (one
/// parameter more: --weft-lower-collectives adds it first). The step function becomes internal. Returns an error message
/// or "".
std::string addModelDescriptor(llvm::Module &module, llvm::StringRef stepName,
                               const ModelDescriptor &descriptor);

} // namespace weft

#endif // WEFT_TARGET_MODELDESCRIPTOR_H
