//===- Driver.h - The stage ladder from a model to an executable -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The stages a model goes through, in order: the imported ONNX nodes
// (onnx), the model in the weft dialect (weft), the training step (train),
// fused kernels on tensors (linalg), planned buffers with BLAS calls
// (memref), LLVM IR (llvm), an object file (obj) and a training executable
// (exe). `runDriver` climbs the ladder to the stage asked for and writes
// it; tools only map their flags to DriverOptions and the pipelines'
// options (weft/Driver/Pipelines.h). Beside the ladder, a pipeline-parallel
// compile (--mesh pp=N) can stop at its schedule, as text or a picture.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DRIVER_DRIVER_H
#define WEFT_DRIVER_DRIVER_H

#include "weft/Driver/Pipelines.h"
#include "weft/Target/CPU.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft {

enum class Stage {
  Onnx,
  Weft,
  Train,
  Partitioned,
  Linalg,
  Memref,
  Llvm,
  Obj,
  Exe,
  /// Not rungs of the ladder: with --mesh pp=N, the model cut into stages
  /// and the chosen schedule simulated, as a text report or an SVG chart.
  Schedule,
  ScheduleSvg,
  /// The planner's layout for the model on --cluster: a table, the plan
  /// file (JSON), or a picture of the mesh and the pipeline.
  Plan,
  PlanJson,
  PlanSvg
};

/// "onnx", "weft", ... as --emit spells them.
const char *getStageName(Stage stage);

/// Whether `stage` is a pipeline schedule report rather than a rung.
inline bool isPlanStage(Stage stage) {
  return stage == Stage::Plan || stage == Stage::PlanJson ||
         stage == Stage::PlanSvg;
}
/// Reports rather than rungs of the ladder: any output name.
inline bool isScheduleStage(Stage stage) {
  return stage == Stage::Schedule || stage == Stage::ScheduleSvg ||
         isPlanStage(stage);
}

/// The stage an output file's extension names: .ll LLVM IR, .o an object,
/// none/.exe/.bin an executable; nullopt for other names (IR text).
std::optional<Stage> getStageOfExtension(llvm::StringRef path);

struct DriverOptions {
  /// Prefix of messages ("weftc").
  std::string tool = "weftc";
  /// argv[0], to find the runtime libraries next to the compiler.
  std::string argv0;
  /// model.onnx, or weft IR (.mlir).
  std::string input;
  /// "-" writes IR to stdout, an executable to `train` and an object to
  /// `model.o`.
  std::string output = "-";
  Stage emit = Stage::Weft;
  /// Whether `emit` was asked for; if not, the output's extension picks it.
  bool emitGiven = false;

  // Import (.onnx inputs).
  /// Static shapes of model inputs, "name=DxD...".
  std::vector<std::string> inputShapes;
  /// Float initializers to load but not train.
  std::vector<std::string> frozen;
  /// Write the parameters' initial values here and point the IR at them.
  std::string weightsOut;
  /// BatchNorm in the training step: batch statistics (train mode) or the
  /// running ones, frozen.
  bool batchNormTrain = true;

  /// Optimizer hyperparameters as run-time inputs; unset: on for native
  /// stages (an executable can be retuned without recompiling), off for IR
  /// (dumps stay readable with constants).
  std::optional<bool> runtimeHyperparameters;

  // Native code.
  CpuTargetOptions target;
  /// --target: the step's device, "cpu" or "cuda" (docs/gpu.md).
  std::string device = "cpu";
  /// Independent neighbouring kernels (the optimizer update of every
  /// parameter) run as one parallel loop (--weft-merge-sibling-kernels).
  bool mergeSiblingKernels = true;
  /// --dump-kernel-outputs: the step hands each kernel's outputs to the
  /// runtime, which writes them under WEFT_DUMP_KERNELS (docs/gpu.md).
  bool dumpKernelOutputs = false;
  /// Folder with the runtime libraries (default: next to the compiler).
  std::string runtimeDir;
  std::vector<std::string> linkArgs;
  bool saveTemps = false;
  /// An executable whose initial weights are larger than this keeps them in
  /// `<output>.weights.safetensors` beside it instead of inside it (by
  /// default none does: weights are appended to the executable, which
  /// costs no more than writing them beside it).
  uint64_t embedWeightsLimit = UINT64_MAX;

  // Parallelism.
  /// Mesh axes and sizes ("dp=4"); empty: one device.
  std::string mesh;
  /// ZeRO stage over dp.
  int64_t zero = 0;
  /// Most MiB one bucket of gradient reductions carries; 0: no buckets.
  double bucketMB = 25.0;
  /// Parameter layouts over tp given by hand ("NAME=[{tp}, {}]").
  std::vector<std::string> shard;
  /// "megatron" or "manual": how the other parameters are split over tp.
  std::string tpPlan = "megatron";
  /// Megatron sequence parallelism over tp.
  bool sequenceParallel = false;

  // Pipeline parallelism (a pp axis in `mesh`). The micro-batch count is
  // the training step's accumSteps: a pipeline's micro-batches are the
  // ones gradient accumulation already splits the batch into.
  /// Parameter names or prefixes that start stages 1, 2, ... (pp x
  /// virtual stages - 1 of them); empty: cuts that balance FLOPs.
  std::vector<std::string> stageCuts;
  /// gpipe, 1f1b, interleaved or zero-bubble; unset: 1f1b.
  std::optional<std::string> schedule;
  /// Stages per pipeline rank (interleaved); unset: 1.
  std::optional<int64_t> virtualStages;
  /// Whether --micro-batches was given (it needs a pp axis).
  bool microBatchesGiven = false;
  /// A cluster spec (YAML, docs/planner.md) whose devices and links cost
  /// the schedule of --emit=schedule|schedule-svg; empty: an assumed
  /// machine.
  std::string cluster;

  // Planning (--emit=plan|plan-json|plan-svg, --plan).
  /// Devices to plan for; 0: all of the cluster's.
  int devices = 0;
  /// --micro-batch-size: pins the plan's samples per micro-batch per rank.
  int64_t microBatchSize = 0;
  /// Whether --zero was given (a pin for the plan).
  bool zeroGiven = false;
  /// Whether --recompute was given (a pin for the plan); without it the
  /// search chooses recomputation for one-device plans.
  bool recomputeGiven = false;
  /// A plan file whose layout to compile, and which of its plans (0: the
  /// chosen one, k: its k-th alternative).
  std::string plan;
  int planAlternative = 0;

  /// Tensor table, counts, planned memory and compile time on stderr.
  bool summary = false;
};

/// Registers the dialects the ladder up to `emit` needs.
void registerDriverDialects(mlir::DialectRegistry &registry, Stage emit);

/// Checks the options (output names, stage), loads the input, runs the
/// pipelines up to `options.emit` with `train` for the training step, and
/// writes the result. Errors are reported as they happen (through the
/// context's diagnostic handler or as `tool: error: ...`); the return value
/// only says whether one occurred.
mlir::LogicalResult runDriver(mlir::MLIRContext &context,
                              DriverOptions &options,
                              TrainPipelineOptions &train);

} // namespace weft

#endif // WEFT_DRIVER_DRIVER_H
