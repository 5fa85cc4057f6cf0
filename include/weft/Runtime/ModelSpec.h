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
#include <functional>
#include <map>
#include <optional>
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

/// One axis of the device mesh the step was compiled for ("dp", 2).
struct MeshAxisSpec {
  std::string name;
  int64_t size = 1;
};

/// How a slot is split over the mesh (the model JSON's "shardings"): its
/// global shape and, per dimension, the mesh axes splitting it (major axis
/// first; empty: not split). Its local shape, the one in the argument
/// table, is the global one divided by the product of each dim's axes.
struct SlotSharding {
  std::vector<int64_t> globalShape;
  std::vector<std::vector<std::string>> dims;
  /// When the step holds the tensor in a view (`globalShape` refines it:
  /// the same row-major elements, consecutive dims split), the shape it
  /// has outside the step: in the weights image and in checkpoints. Empty
  /// when it is `globalShape`.
  std::vector<int64_t> storedShape;
};

/// How each rank's batch inputs come out of the global batch.
struct BatchLayout {
  /// The mesh axes splitting the batch (row-major over them); empty when
  /// every rank reads the whole global batch.
  std::vector<std::string> axes;
  /// Batch inputs laid out [K, m, ...] with dim 1 split (the partitioner's
  /// layout under gradient accumulation): K micro-batches of m rows each,
  /// of which a rank holds its block of m / n rows per micro-batch. 1 for
  /// inputs split along axis 0.
  int64_t microBatches = 1;
};

/// A tensor of a pipeline's whole model (the model JSON's
/// "pipeline"."tensors"), whichever rank holds it.
struct PipelineTensorSpec {
  std::string name;
  /// "param", "state" or "buffer".
  std::string kind;
  DType dtype = DType::F32;
  /// The whole tensor's shape (a view's, when `storedShape` is set).
  std::vector<int64_t> shape;
  /// How the stage's ranks split it over the mesh's other axes, as
  /// SlotSharding::dims (empty: whole on each).
  std::vector<std::vector<std::string>> dims;
  std::vector<int64_t> storedShape;
  /// The pipeline rank that stores it in checkpoints: the first of those
  /// holding it (a tied parameter is held, equal, by several).
  int64_t rank = 0;
};

/// Where one program of a pipeline executable stands (the model JSON's
/// "pipeline"); `ranks` is 0 for a step that is not a pipeline's.
struct PipelineSpec {
  int64_t rank = 0, ranks = 0;
  std::string schedule;
  int64_t microBatches = 1, virtualStages = 1;
  /// The model stages this rank runs.
  std::vector<int64_t> stages;
  /// The schedule's idle fraction as weftc simulated it: the mean over
  /// ranks, and per rank.
  double predictedBubble = 0;
  std::vector<double> predictedRankBubble;
  std::vector<PipelineTensorSpec> tensors;
};

/// What the plan the step was compiled from predicted (the model JSON's
/// "prediction", from weftc --plan or --cluster); `stepTimeS` < 0 when
/// there is none.
struct PredictionSpec {
  double stepTimeS = -1, exposedCommS = 0, bubbleS = 0;
  double memoryBytesPerDevice = 0;
  /// "dp=2,tp=1,pp=1 zero=1 ..." as the planner wrote it, for messages.
  std::string layout;
};

/// The compiled step, validated and indexed by role.
struct ModelSpec {
  std::vector<TensorSpec> args, results;
  /// The same slots by role (weft/Formats/StepContract.h).
  contract::StepSignature signature;
  std::string modelJson;
  uint64_t workspaceBytes = 0;
  /// WEFT_DEVICE_CPU, or WEFT_DEVICE_CUDA: the step takes device pointers.
  int32_t deviceType = WEFT_DEVICE_CPU;

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
  /// Samples of this rank's batch in each batch input (all of them agree):
  /// axis 0, or K x m/n for the micro-batch layout (see BatchLayout).
  int64_t batchSize = 0;
  /// The mesh the step was compiled for (the model JSON's "mesh"), major
  /// axis first; empty for a one-device step.
  std::vector<MeshAxisSpec> mesh;
  /// Every argument and result split over the mesh, by slot name (a param
  /// and its next value share one entry).
  std::map<std::string, SlotSharding> shardings;
  BatchLayout batchLayout;
  /// Labels must lie in [0, numClasses) when > 0: the model JSON's
  /// "num_classes" (or "vocab_size").
  int64_t numClasses = 0;
  PipelineSpec pipeline;
  PredictionSpec prediction;

  /// Ranks the step runs on: the product of the mesh's axis sizes (1
  /// without a mesh).
  int64_t meshDevices() const;
  /// "dp=2,tp=4", as weftc's --mesh spells it.
  std::string describeMesh() const;
  /// The sharding of slot `name`, or null when it is not split.
  const SlotSharding *findSharding(const std::string &name) const;

  /// Number of trainable scalars of the whole model (a sharded
  /// parameter counts its global shape; a pipeline's, every rank's).
  int64_t numParameters() const;
  /// Index of the argument named `name` of kind `kind`, or -1.
  int findArg(const std::string &name, const std::string &kind) const;
};

/// Where every buffer of a device step (ModelSpec::deviceType CUDA) lies in
/// its one device allocation, planned once before the first step so that
/// the loop allocates nothing. Every slot starts at a multiple of
/// kAlignment. The scalar inputs (step, seed, lr, hp.*) are one block, and
/// so are the results that carry no argument's next value (loss, lr,
/// grad_norm): each step copies the first in and the second out with one
/// copy each.
struct DeviceArenaPlan {
  /// cuMemAlloc's alignment: generated kernels may use their widest
  /// vector accesses on any slot.
  static constexpr uint64_t kAlignment = 256;
  /// Byte offsets of each argument, result and the workspace.
  std::vector<uint64_t> argOffsets, resultOffsets;
  uint64_t workspaceOffset = 0;
  /// [begin, end) of the scalar inputs and of the outputs; a host block of
  /// end - begin bytes with the same layout mirrors each.
  uint64_t scalarsBegin = 0, scalarsEnd = 0;
  uint64_t outputsBegin = 0, outputsEnd = 0;
  /// Bytes to allocate.
  uint64_t totalBytes = 0;
  /// Whether argument `i` is a scalar input, result `r` an output.
  std::vector<bool> scalarArg, outputResult;
};

/// Plans the device arena of `spec`: the scalars block, the outputs block,
/// then params, state and buffers, their results, the batch inputs and the
/// workspace (workspaceBytes).
DeviceArenaPlan planDeviceArena(const ModelSpec &spec);

/// Validates `model` and fills `out`. Errors name the argument or result
/// that is wrong; they mean weftc and this runtime disagree. A model whose
/// code needs instructions this CPU lacks is refused (checkCpuFeatures).
Status loadModelSpec(const WeftModel &model, ModelSpec &out);

/// Whether this CPU has `feature` (a name of GCC's __builtin_cpu_supports:
/// "avx2", "fma", ...); nullopt for a name this runtime cannot test.
std::optional<bool> cpuSupports(const std::string &feature);

/// Checks the model JSON's "target" ({cpu, requested_cpu, cpu_features})
/// against `supports`: an error naming the CPU the code was built for, the
/// missing extensions and the weftc flag that fixes it. No "target" (an
/// older or non-x86 executable) passes.
Status checkCpuFeatures(
    const std::string &modelJson,
    const std::function<std::optional<bool>(const std::string &)> &supports);

/// Copies the initial value of every "param" and "buffer" argument from the
/// model's embedded safetensors image into `argData[i]` (which must hold
/// args[i].bytes bytes). Every such argument must be in the image with its
/// compiled dtype and shape; for a slot the model JSON's "shardings" split,
/// the image holds the global tensor (in its stored shape, when the step
/// holds a view of it) and rank `rank` copies its block.
/// Optimizer state is not in the image: it starts at zero.
Status loadInitialWeights(const WeftModel &model, const ModelSpec &spec,
                          const std::vector<void *> &argData,
                          int64_t rank = 0);

/// A multi-line human-readable description for --help: batch inputs,
/// parameter count, hyperparameters and a summary of the model JSON.
std::string describeModel(const ModelSpec &spec);

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_MODELSPEC_H
