//===- ModelSpec.h - A validated view of a compiled model -------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// `WeftModel` (ModelABI.h) is a plain C table written by generated code.
// `loadModelSpec` checks it once — dtypes, shapes, that every parameter and
// state argument comes back as a result of the same name, shape and dtype,
// that the step takes `step` and `lr` and returns `loss` — and sorts its
// arguments by role, so the training loop never has to interpret kinds or
// trust the table again.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_MODELSPEC_H
#define WEFT_RUNTIME_MODELSPEC_H

#include "weft/Formats/HostArray.h"
#include "weft/Formats/StepContract.h"
#include "weft/Runtime/ModelABI.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft {
namespace rt {

/// One argument or result of the step, copied out of its WeftTensorInfo.
struct TensorSpec {
  std::string name;
  /// "param", "state", "buffer", "input" or "output".
  std::string kind;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Dense size in bytes.
  size_t bytes = 0;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

/// A run-time optimizer hyperparameter: an `hp.<name>` scalar input.
struct HyperParamSpec {
  /// Index into ModelSpec::args.
  int arg = -1;
  /// The name without "hp." ("weight_decay").
  std::string name;
  /// Its command-line flag: "--weight-decay" (the CLI renames it to
  /// "--hp-weight-decay" should that collide with one of its own flags).
  std::string flag;
  /// The compiled default from the model JSON's "hyperparameters" object.
  bool hasDefault = false;
  double defaultValue = 0;
};

/// The compiled step, validated and indexed by role.
struct ModelSpec {
  std::vector<TensorSpec> args, results;
  /// The same slots by role (weft/Formats/StepContract.h).
  contract::StepSignature signature;
  std::string modelJson;
  uint64_t workspaceBytes = 0;

  /// Indices into `args`, in argument order.
  std::vector<int> paramArgs, stateArgs, bufferArgs;
  /// Batch inputs: every "input" except step, lr and hp.*.
  std::vector<int> batchArgs;
  std::vector<HyperParamSpec> hyperParams;
  int stepArg = -1, lrArg = -1;
  /// The run's seed (I64 scalar), for models with dropout; -1 without.
  int seedArg = -1;
  /// Indices into `results`. lrResult is -1 when the step does not return
  /// its scheduled learning rate.
  int lossResult = -1, lrResult = -1;
  /// The global gradient norm (F32 scalar), -1 when the step lacks it.
  int gradNormResult = -1;
  /// For each argument, the result that carries its next value (params and
  /// state), or -1.
  std::vector<int> resultForArg;
  /// Axis 0 of the batch inputs (all of them agree).
  int64_t batchSize = 0;
  /// Labels must lie in [0, numClasses) when > 0: the model JSON's
  /// "num_classes" (or "vocab_size").
  int64_t numClasses = 0;

  /// Number of trainable scalars.
  int64_t numParameters() const;
  /// Index of the argument named `name` of kind `kind`, or -1.
  int findArg(const std::string &name, const std::string &kind) const;
};

/// Validates `model` and fills `out`. Errors name the argument or result
/// that is wrong; they mean weftc and this runtime disagree.
Status loadModelSpec(const WeftModel &model, ModelSpec &out);

/// Copies the initial value of every "param" and "buffer" argument from the
/// model's embedded safetensors image into `argData[i]` (which must hold
/// args[i].bytes bytes). Every such argument must be in the image with its
/// compiled dtype and shape.
Status loadInitialWeights(const WeftModel &model, const ModelSpec &spec,
                          const std::vector<void *> &argData);

/// A multi-line human-readable description for --help: batch inputs,
/// parameter count, hyperparameters and a summary of the model JSON.
std::string describeModel(const ModelSpec &spec);

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_MODELSPEC_H
