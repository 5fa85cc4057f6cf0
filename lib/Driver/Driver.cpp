//===- Driver.cpp - The stage ladder from a model to an executable --------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Driver/Driver.h"
#include "PlanReport.h"
#include "ScheduleReport.h"
#include "weft/Dialect/Weft/IR/ModelLayers.h"
#include "weft/Dialect/Weft/IR/TrainStep.h"
#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Formats/SafeTensors.h"
#include "weft/Import/OnnxImporter.h"
#include "weft/Import/Weights.h"
#include "weft/Planner/ClusterSpec.h"
#include "weft/Target/CUDA.h"
#include "weft/Target/Registration.h"
#include "weft/Transforms/Parallel/Passes.h"
#include "weft/Transforms/Pipeline/Passes.h"

#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/Linker/Linker.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

#include <chrono>
#include <climits>
#include <map>
#include <set>
#include <thread>

using namespace mlir;
using namespace weft;

const char *weft::getStageName(Stage stage) {
  static const char *names[] = {
      "onnx", "weft", "train", "partitioned", "linalg",      "memref",
      "llvm", "obj",  "exe",   "schedule",    "schedule-svg",
      "plan", "plan-json", "plan-svg"};
  return names[static_cast<int>(stage)];
}

std::optional<Stage> weft::getStageOfExtension(StringRef path) {
  std::string ext = llvm::sys::path::extension(path).lower();
  if (ext == ".ll")
    return Stage::Llvm;
  if (ext == ".o")
    return Stage::Obj;
  if (ext.empty() || ext == ".exe" || ext == ".bin")
    return Stage::Exe;
  return std::nullopt;
}

void weft::registerDriverDialects(DialectRegistry &registry, Stage emit) {
  registry.insert<WeftDialect, func::FuncDialect>();
  func::registerInlinerExtension(registry);
  if (emit >= Stage::Linalg && !isScheduleStage(emit))
    registerCodegenDialects(registry);
}

namespace {

/// `target` relative to `fromDir` when both are on disk; keeps the IR free of
/// machine-specific absolute paths.
std::string relativePath(StringRef target, StringRef fromDir) {
  SmallString<256> absTarget(target), absFrom(fromDir);
  if (llvm::sys::fs::make_absolute(absTarget) ||
      llvm::sys::fs::make_absolute(absFrom))
    return target.str();
  llvm::sys::path::remove_dots(absTarget, true);
  llvm::sys::path::remove_dots(absFrom, true);
  SmallVector<StringRef> t(llvm::sys::path::begin(absTarget),
                           llvm::sys::path::end(absTarget));
  SmallVector<StringRef> f(llvm::sys::path::begin(absFrom),
                           llvm::sys::path::end(absFrom));
  size_t common = 0;
  while (common < t.size() && common < f.size() && t[common] == f[common])
    ++common;
  SmallString<256> rel;
  for (size_t i = common; i < f.size(); ++i)
    llvm::sys::path::append(rel, "..");
  for (size_t i = common; i < t.size(); ++i)
    llvm::sys::path::append(rel, t[i]);
  return rel.empty() ? std::string(".") : std::string(rel);
}

std::string mib(uint64_t bytes) {
  return llvm::formatv("{0:F1} MiB", bytes / 1048576.0).str();
}

/// A private temporary folder, removed when done unless kept.
struct TempDir {
  SmallString<128> path;
  bool keep = false;
  std::string tool;
  Location loc;
  explicit TempDir(Location loc) : loc(loc) {}
  ~TempDir() {
    if (path.empty())
      return;
    if (keep)
      llvm::errs() << tool << ": temporary files kept in " << path << "\n";
    else
      llvm::sys::fs::remove_directories(path);
  }
  bool create() {
    std::error_code ec = llvm::sys::fs::createUniqueDirectory("weftc", path);
    if (ec) {
      emitError(loc) << "cannot create a temporary folder: " << ec.message();
      path.clear();
      return false;
    }
    return true;
  }
  std::string file(StringRef name) const {
    SmallString<256> p(path);
    llvm::sys::path::append(p, name);
    return std::string(p);
  }
};

/// One run of the ladder.
class Driver {
public:
  Driver(MLIRContext &context, DriverOptions &options,
         TrainPipelineOptions &train)
      : context(context), options(options), train(train) {}

  LogicalResult run();

private:
  /// Errors that belong to no op (options, files) are reported at an
  /// unknown location: `tool: error: message`.
  Location loc() { return UnknownLoc::get(&context); }
  LogicalResult fail(const Twine &message) { return emitError(loc(), message); }
  bool inputIsOnnx() const {
    return StringRef(options.input).ends_with(".onnx");
  }
  std::string outputDir() const {
    if (options.output == "-")
      return ".";
    StringRef dir = llvm::sys::path::parent_path(options.output);
    return dir.empty() ? "." : dir.str();
  }

  /// Sets what every step's code generation takes from the flags (the
  /// one-step and the pipeline path alike).
  void setCodegenFlags(CodegenPipelineOptions &codegen) const {
    codegen.mergeSiblingKernels = options.mergeSiblingKernels;
    codegen.dumpKernelOutputs = options.dumpKernelOutputs;
    codegen.target = options.device;
  }

  LogicalResult checkOutput();
  LogicalResult checkMesh();
  LogicalResult checkCuda();
  LogicalResult checkPipelineOptions();
  int64_t stepMicroBatches(ModuleOp module) const;
  LogicalResult checkPipelineStages(size_t numStages, int64_t microBatches);
  LogicalResult runPipelineSteps(ModuleOp module, TimingScope &timing);
  LogicalResult writeSchedule(ModuleOp module);
  OwningOpRef<ModuleOp> loadInput();
  LogicalResult runImportAndTrain(ModuleOp module, TimingScope &timing);
  std::string weightsSource(StringAttr attr) const;
  LogicalResult writeWeightsFile(ModuleOp module,
                                 const std::vector<std::string> &names,
                                 const std::string &path);
  /// The initial weights of an object or executable, written by a thread
  /// of their own (startWeights) while the code is generated; emitNative
  /// waits for them when the descriptor needs their size and checksum.
  struct Weights {
    TempDir temps;
    /// Empty when there are none (or for --emit=llvm).
    std::string path;
    /// Beside the executable (--embed-weights-limit), or appended to it.
    bool beside = false, appended = false;
    uint64_t size = 0, checksum = 0;
    /// Set by the writer.
    std::string error;
    std::thread writer;
    /// A file beside the executable left by a compile that failed before
    /// it was complete is removed.
    bool complete = false;
    explicit Weights(Location loc) : temps(loc) {}
    ~Weights() {
      if (writer.joinable())
        writer.join();
      if (beside && !complete)
        llvm::sys::fs::remove(path);
    }
  };
  std::unique_ptr<Weights> weights;
  LogicalResult startWeights(ModuleOp module,
                             ArrayRef<const ModelAbi *> abis);
  LogicalResult writeWeightsOut(ModuleOp module);
  void printTensorTable();
  void printSummary(ModuleOp module);
  std::string memorySummary(ModuleOp module, const ModelAbi &abi);
  /// One program of the executable: a module after code generation, its
  /// step's ABI and name, and for a pipeline rank what its model JSON adds.
  struct Program {
    ModuleOp module;
    ModelAbi abi;
    std::string entry;
    std::optional<llvm::json::Object> pipeline;
  };
  LogicalResult emitNative(ArrayRef<Program> programs,
                           std::optional<int64_t> numClasses,
                           TimingScope &timing);
  LogicalResult compilePipeline(ModuleOp module, TimingScope &timing);
  LogicalResult applyPlan();
  LogicalResult searchLayout(ModuleOp module, planner::SearchResult &result,
                             bool compiling = false);
  LogicalResult writePlan(ModuleOp module);
  LogicalResult autoPlan();
  LogicalResult checkPlanBatch(ModuleOp module);
  LogicalResult applyMicroBatchSize();
  void report(StringRef memory);
  LogicalResult writeIR(ModuleOp module);
  /// `text` to `path` ("-": stdout).
  LogicalResult writeText(StringRef path, StringRef text);

  MLIRContext &context;
  DriverOptions &options;
  TrainPipelineOptions &train;
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  /// How the importer classified the ONNX model's tensors (for --summary).
  std::vector<onnximport::GraphTensor> importedTensors;

  /// The pp, dp and tp axes of --mesh; 0 where it has none.
  int pipelineRanks = 0;
  int meshDp = 0, meshTp = 0;
  /// Whether --mesh names dp or tp (besides pp).
  bool otherMeshAxes() const { return meshDp || meshTp; }
  /// --mesh without its pp axis: what each pipeline rank's step is
  /// partitioned over.
  std::string meshWithoutPp() const {
    std::string out;
    for (auto [name, size] : {std::pair<const char *, int>{"dp", meshDp},
                              {"tp", meshTp}})
      if (size)
        out += (out.empty() ? "" : ",") + std::string(name) + "=" +
               std::to_string(size);
    return out;
  }
  pipeline::ScheduleKind scheduleKind = pipeline::ScheduleKind::OneFOneB;
  int virtualStages = 1;
  /// With --plan or --micro-batch-size: samples in one micro-batch over
  /// the dp ranks (dp x micro-batch size), which the model's batch must
  /// be; 0 without. `planBatchFlag` names the flag that set it.
  int64_t planMicroBatch = 0;
  std::string planBatchFlag;
  /// With --plan: what the plan predicts, for the model JSON.
  std::optional<llvm::json::Object> prediction;
  /// With --plan under pipeline parallelism: the plan's numbered layers
  /// per stage, so the stages compiled are those it costed.
  std::vector<int64_t> planBlocksPerStage;
  /// With --plan recomputing some blocks only: which (the planner's block
  /// indices), named as --recompute-layers once the model is read.
  std::vector<int> planRecomputedBlocks;
};

/// Takes the stage from the output's extension when no stage was asked
/// for, and refuses names that would overwrite an input, disagree with the
/// stage, or point into a folder that does not exist.
LogicalResult Driver::checkOutput() {
  std::string &out = options.output;
  if (out != "-" && out != "/dev/null") {
    std::pair<const char *, StringRef> outputs[] = {
        {"-o", out}, {"--weights-out", options.weightsOut}};
    for (auto [flag, path] : outputs) {
      if (path.empty())
        continue;
      if (llvm::sys::fs::equivalent(path, options.input))
        return fail(Twine(flag) + " " + path + " is the input " +
                    options.input + "; refusing to overwrite it");
      StringRef dir = llvm::sys::path::parent_path(path);
      if (!dir.empty() && !llvm::sys::fs::is_directory(dir))
        return fail("cannot write " + path + ": the folder " + dir +
                    " does not exist");
    }
    std::optional<Stage> byName = getStageOfExtension(out);
    bool isIrText = llvm::sys::path::extension(out).lower() == ".mlir";
    if (!options.emitGiven) {
      if (byName)
        options.emit = *byName;
      // `-o train.dp2` would quietly be IR text, and "Permission denied"
      // the first sign of it.
      else if (!isIrText)
        llvm::errs() << options.tool << ": warning: -o " << out
                     << ": its extension names no stage, so this writes "
                        "IR text (--emit="
                     << getStageName(options.emit)
                     << "); name an executable with no extension, .exe or "
                        ".bin, and IR with .mlir\n";
    } else if (!isScheduleStage(options.emit)) {
      Stage emit = options.emit;
      bool textStage = emit <= Stage::Memref;
      const char *nameSays = isIrText || (!byName && textStage)
                                 ? "IR text"
                             : byName == Stage::Exe ? "an executable"
                             : byName == Stage::Obj ? "an object file"
                             : byName == Stage::Llvm ? "LLVM IR"
                                                     : "IR text";
      if ((isIrText && !textStage) || (byName && *byName != emit) ||
          (!byName && !isIrText && !textStage))
        return fail(Twine("-o ") + out + " names " + nameSays +
                    ", but --emit=" + getStageName(emit) +
                    " writes something else; name the output after the "
                    "stage (.mlir for IR; .ll; .o; no extension, .exe or "
                    ".bin for an executable) or leave out --emit");
    }
  }
  if (out == "-" && options.emit == Stage::Exe)
    out = "train";
  if (out == "-" && options.emit == Stage::Obj)
    out = "model.o";
  return success();
}

/// Reads the pp axis out of --mesh. dp and tp are --weft-apply-mesh's to
/// check; names other than the three are refused here, where pp is known.
LogicalResult Driver::checkMesh() {
  const std::string &mesh = options.mesh;
  SmallVector<StringRef> parts;
  StringRef(mesh).split(parts, ',', -1, /*KeepEmpty=*/false);
  for (StringRef part : parts) {
    auto [name, size] = part.split('=');
    name = name.trim();
    if (name.empty() || !part.contains('='))
      return fail("--mesh " + mesh +
                  " does not parse: write axes as name=size, e.g. pp=4 or "
                  "dp=2,tp=2");
    if (name == "dp" || name == "tp") {
      int &axis = name == "dp" ? meshDp : meshTp;
      if (axis)
        return fail("--mesh " + mesh + " names " + name + " twice");
      if (size.trim().getAsInteger(10, axis) || axis < 1)
        return fail("--mesh " + mesh + ": " + name +
                    " is a number of ranks, 1 or more, e.g. --mesh " + name +
                    "=2");
      continue;
    }
    if (name != "pp")
      return fail("--mesh " + mesh + ": axis '" + name +
                  "' is not one Weft partitions: use dp (data parallel), "
                  "tp (tensor parallel) or pp (pipeline parallel), e.g. "
                  "--mesh dp=2,tp=2 or --mesh pp=4,dp=2");
    if (pipelineRanks)
      return fail("--mesh " + mesh + " names pp twice");
    int ranks = 0;
    if (size.trim().getAsInteger(10, ranks) || ranks < 1)
      return fail("--mesh " + mesh +
                  ": pp is the number of pipeline ranks, 1 or more, e.g. "
                  "--mesh pp=4");
    pipelineRanks = ranks;
  }
  return success();
}

/// The pipeline flags against the mesh and the stage asked for, before
/// anything is loaded. What depends on the model (the stage count the
/// cuts give, the schedule's shape) is checked once the stages are cut.
LogicalResult Driver::checkPipelineOptions() {
  Stage emit = options.emit;
  // A plan searches every layout; pipeline flags only pin parts of it.
  if (isPlanStage(emit)) {
    if (options.cluster.empty())
      return fail(Twine("--emit=") + getStageName(emit) +
                  " plans for a cluster: add --cluster FILE.yaml "
                  "(examples/clusters/) or --cluster local (this machine)");
    if (!options.stageCuts.empty())
      return fail("--stage-cuts: the planner cuts stages itself; leave it "
                  "out with --emit=plan");
    return success();
  }
  if (!options.plan.empty() && (options.devices || options.microBatchSize))
    return fail(std::string(options.devices ? "--devices" : "--micro-batch-size") +
                " pins what --emit=plan searches; with --plan FILE the plan "
                "fixes it: leave it out");
  if (options.devices)
    return fail("--devices pins what --emit=plan searches: add --emit=plan "
                "--cluster FILE");
  if (options.microBatchSize && failed(applyMicroBatchSize()))
    return failure();
  if (pipelineRanks == 0) {
    if (!options.stageCuts.empty())
      return fail("--stage-cuts places the cuts between pipeline stages: "
                  "add --mesh pp=N");
    if (options.schedule)
      return fail("--schedule orders the work of pipeline ranks: add "
                  "--mesh pp=N");
    if (options.virtualStages)
      return fail("--virtual-stages gives each pipeline rank several "
                  "stages: add --mesh pp=N");
    if (options.microBatchesGiven)
      return fail("--micro-batches splits the batch for a pipeline: add "
                  "--mesh pp=N (without one, --accum-steps splits a step "
                  "into micro-batches)");
    if (isScheduleStage(emit))
      return fail(Twine("--emit=") + getStageName(emit) +
                  " shows a pipeline's schedule: add --mesh pp=N");
    if (!options.cluster.empty() && options.plan.empty())
      return fail("--cluster plans a layout (--emit=plan, or a build "
                  "without --mesh) or costs a pipeline's schedule (--mesh "
                  "pp=N --emit=schedule): add one of them");
    return success();
  }
  if (!options.cluster.empty() && !isScheduleStage(emit) &&
      emit < Stage::Llvm && options.plan.empty())
    return fail(Twine("--cluster costs the schedule of --emit=schedule and "
                      "--emit=schedule-svg, and the bubble an executable "
                      "predicts; --emit=") +
                getStageName(emit) + " does not use it: leave it out");
  if (options.zero != 0 && !meshDp)
    return fail("--zero shards over data-parallel ranks, and --mesh " +
                options.mesh + " has none: add dp=N, or leave out --zero");
  if ((!options.shard.empty() || options.sequenceParallel) &&
      !meshTp)
    return fail(std::string(options.sequenceParallel ? "--sequence-parallel"
                                                     : "--shard") +
                " splits over tensor-parallel ranks, and --mesh " +
                options.mesh + " has none: add tp=N, or leave it out");
  if (emit == Stage::Linalg || emit == Stage::Memref)
    return fail(Twine("--emit=") + getStageName(emit) +
                " shows one step's kernels, but a pipeline (--mesh pp=N) "
                "compiles one program per rank: see them with "
                "--emit=partitioned, or build with --emit=obj or exe");
  std::string name = options.schedule.value_or("1f1b");
  if (pipeline::Status s = pipeline::parseScheduleKind(name, scheduleKind);
      !s.ok())
    return fail("--schedule: " + s.message);
  int64_t v = options.virtualStages.value_or(1);
  if (v < 1 || v > INT_MAX)
    return fail("--virtual-stages is the number of stages per pipeline "
                "rank, 1 or more; got " +
                std::to_string(v));
  virtualStages = int(v);
  bool interleaved = scheduleKind == pipeline::ScheduleKind::Interleaved;
  if (interleaved && virtualStages < 2)
    return fail("--schedule interleaved gives each rank several stages: "
                "add --virtual-stages 2 (or more)");
  if (!interleaved && virtualStages > 1)
    return fail("--virtual-stages " + std::to_string(virtualStages) +
                " needs --schedule interleaved; " + name +
                " runs one stage per rank");
  int64_t stages = int64_t(pipelineRanks) * virtualStages;
  if (!options.stageCuts.empty() &&
      int64_t(options.stageCuts.size()) != stages - 1)
    return fail(
        "--stage-cuts gives " + std::to_string(options.stageCuts.size()) +
        " cut" + (options.stageCuts.size() == 1 ? "" : "s") +
        ", but --mesh pp=" + std::to_string(pipelineRanks) +
        " with --virtual-stages " + std::to_string(virtualStages) + " makes " +
        (stages == 1   ? std::string("1 stage: leave out --stage-cuts")
         : stages == 2 ? std::string("2 stages: give 1 cut, the parameter "
                                     "name or prefix that starts stage 1")
                       : std::to_string(stages) + " stages: give " +
                             std::to_string(stages - 1) +
                             " cuts, the parameter names or prefixes that "
                             "start stages 1 to " +
                             std::to_string(stages - 1)));
  if (train.accumSteps < 1 || train.accumSteps > INT_MAX)
    return fail("--micro-batches (or --accum-steps) must be 1 or more, "
                "got " +
                std::to_string(train.accumSteps));
  return success();
}

/// Micro-batches of a built step (its weft.train_config), else of the
/// step about to be built.
int64_t Driver::stepMicroBatches(ModuleOp module) const {
  if (auto config = module->getAttrOfType<DictionaryAttr>(
          WeftDialect::kTrainConfigAttrName))
    if (auto steps = config.getAs<IntegerAttr>("accum_steps"))
      return steps.getInt();
  return train.accumSteps;
}

/// Once the stages are cut: their count is what the pipeline needs, and
/// the schedule can be built for them (interleaved needs the micro-batches
/// to be a multiple of the ranks, ...). Errors name the flags.
LogicalResult Driver::checkPipelineStages(size_t numStages,
                                          int64_t microBatches) {
  int64_t stages = int64_t(pipelineRanks) * virtualStages;
  if (int64_t(numStages) != stages)
    return fail(
        options.input + " is cut into " + std::to_string(numStages) +
        " pipeline stages, but --mesh pp=" + std::to_string(pipelineRanks) +
        " with --virtual-stages " + std::to_string(virtualStages) + " needs " +
        std::to_string(stages) +
        ": compile the model (.onnx or a weft module with @forward) "
        "so they are cut again");
  if (options.microBatchesGiven && microBatches != train.accumSteps)
    return fail("--micro-batches " + std::to_string(train.accumSteps) +
                ", but " + options.input + " is a step built with " +
                std::to_string(microBatches) +
                " micro-batches: leave out --micro-batches, or compile the "
                "model");
  pipeline::Schedule schedule;
  if (pipeline::Status s =
          pipeline::buildSchedule(scheduleKind, pipelineRanks,
                                  int(microBatches), virtualStages, schedule);
      !s.ok())
    return fail("--schedule " +
                std::string(pipeline::getScheduleKindName(scheduleKind)) +
                " on --mesh pp=" + std::to_string(pipelineRanks) + " with " +
                std::to_string(microBatches) +
                " micro-batches (--micro-batches): " + s.message);
  return success();
}

/// The per-rank steps of a pipeline, from a step whose ops carry stages.
LogicalResult Driver::runPipelineSteps(ModuleOp module, TimingScope &timing) {
  if (module.lookupSymbol<func::FuncOp>("train_step.rank0"))
    return success();
  FailureOr<std::vector<StageSummary>> stages = readStageSummary(module);
  if (failed(stages) ||
      failed(checkPipelineStages(stages->size(), stepMicroBatches(module))))
    return failure();
  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  pm.enableTiming(timing);
  PipelineParallelOptions pipelineOptions;
  pipelineOptions.ranks = pipelineRanks;
  pipelineOptions.schedule = pipeline::getScheduleKindName(scheduleKind);
  pipelineOptions.virtualStages = virtualStages;
  buildPipelineParallelPipeline(pm, pipelineOptions);
  // pp with dp or tp: each rank's step is then partitioned over the other
  // axes, pp staying the major one.
  if (otherMeshAxes()) {
    ParallelPipelineOptions parallel;
    parallel.mesh = meshWithoutPp();
    parallel.zero = options.zero;
    parallel.bucketMB = options.bucketMB;
    for (const std::string &entry : options.shard)
      parallel.shard.push_back(entry);
    parallel.tpPlan = options.tpPlan;
    parallel.sequenceParallel = options.sequenceParallel;
    parallel.pipelineRanks = pipelineRanks;
    buildParallelPipeline(pm, parallel);
  }
  return pm.run(module);
}

/// --emit=schedule and --emit=schedule-svg: the stages' summary, costed,
/// and the schedule built, verified and simulated with those costs.
LogicalResult Driver::writeSchedule(ModuleOp module) {
  FailureOr<std::vector<StageSummary>> stages = readStageSummary(module);
  if (failed(stages))
    return failure();
  int64_t microBatches = stepMicroBatches(module);
  if (failed(checkPipelineStages(stages->size(), microBatches)))
    return failure();
  ScheduleRequest request;
  request.kind = scheduleKind;
  request.ranks = pipelineRanks;
  request.microBatches = int(microBatches);
  request.virtualStages = virtualStages;
  request.svg = options.emit == Stage::ScheduleSvg;
  planner::ClusterSpec cluster;
  if (!options.cluster.empty()) {
    if (rt::Status s = planner::loadClusterSpec(options.cluster, cluster);
        !s.ok())
      return fail("--cluster: " + s.message);
    request.cluster = &cluster;
  }
  std::string text;
  if (pipeline::Status s = renderScheduleReport(*stages, request, text);
      !s.ok())
    return fail(s.message);
  return writeText(options.output, text);
}

OwningOpRef<ModuleOp> Driver::loadInput() {
  if (inputIsOnnx()) {
    OnnxImportOptions import;
    for (const std::string &spec : options.inputShapes) {
      std::string name;
      std::vector<int64_t> shape;
      if (failed(parseInputShape(spec, name, shape, loc())))
        return nullptr;
      import.inputShapes[name] = shape;
    }
    import.frozen = options.frozen;
    import.weightsAttr = relativePath(options.input, outputDir());
    if (options.summary)
      import.tensorReport = &importedTensors;
    import.forTraining = options.emit >= Stage::Train;
    return importOnnxModel(&context, options.input, import);
  }
  if (!options.inputShapes.empty() || !options.frozen.empty())
    emitWarning(loc()) << "--input-shape and --freeze apply to .onnx inputs "
                          "only; ignored for "
                       << options.input;
  std::string error;
  auto file = openInputFile(options.input, &error);
  if (!file) {
    emitError(loc(), error);
    return nullptr;
  }
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  return parseSourceFile<ModuleOp>(sourceMgr, &context);
}

/// Imported nodes -> weft, and, unless the input is already a step, the
/// training step. The step runs the model in train mode (BatchNorm's batch
/// statistics); a forward-only import is the model in eval mode. With a
/// pipeline (--mesh pp=N) the model is cut into stages first, so the loss,
/// the backward pass and the optimizer inherit the cut; the schedule
/// reports stop there.
LogicalResult Driver::runImportAndTrain(ModuleOp module, TimingScope &timing) {
  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  pm.enableTiming(timing);
  bool hasStep =
      static_cast<bool>(module.lookupSymbol<func::FuncOp>("train_step"));
  Stage emit = options.emit;
  bool pipelined = pipelineRanks > 0;
  // The rung the schedule reports need: the model, cut into stages.
  Stage ladder = isScheduleStage(emit) ? Stage::Weft : emit;
  if (pipelined && hasStep && !module->hasAttr(kPipelineStagesAttrName))
    return fail(options.input +
                " is already a training step, and --mesh pp=N cuts the "
                "model's @forward into stages before the step is built: "
                "compile the model, or the step weftc --emit=train --mesh "
                "pp=N writes");
  bool buildStep =
      ladder == Stage::Train || (ladder > Stage::Train && !hasStep);
  ImportPipelineOptions import;
  import.training =
      (buildStep || isScheduleStage(emit)) && options.batchNormTrain;
  buildImportPipeline(pm, import);
  // Under tensor parallelism a fused projection (q, k and v in one
  // matmul) is split first, so its parts can be split by heads; before a
  // pipeline's cut, so the parts are staged like any op.
  if (buildStep && meshTp) {
    SplitFusedProjectionsPassOptions split;
    for (const std::string &entry : options.shard)
      split.given.push_back(
          llvm::StringRef(entry).split('=').first.trim().str());
    pm.addNestedPass<func::FuncOp>(createSplitFusedProjectionsPass(split));
  }
  if (pipelined && !hasStep) {
    AssignStagesPassOptions assign;
    assign.stages = int64_t(pipelineRanks) * virtualStages;
    assign.cuts.assign(options.stageCuts.begin(), options.stageCuts.end());
    assign.blocksPerStage.assign(planBlocksPerStage.begin(),
                                 planBlocksPerStage.end());
    pm.addPass(createAssignStagesPass(assign));
  }
  if (buildStep && !planRecomputedBlocks.empty()) {
    auto forward = module.lookupSymbol<func::FuncOp>("forward");
    std::vector<std::vector<std::string>> layers =
        forward ? getModelLayers(forward).names
                : std::vector<std::vector<std::string>>{};
    for (int b : planRecomputedBlocks) {
      if (b >= int(layers.size()))
        return fail("--plan " + options.plan + " recomputes block " +
                    std::to_string(b) + ", but " + options.input + " has " +
                    std::to_string(layers.size()) +
                    " layers: plan this model again");
      for (const std::string &name : layers[size_t(b)])
        train.recomputeLayers.push_back(name);
    }
  }
  if (buildStep) {
    bool native = emit >= Stage::Llvm;
    train.runtimeHyperparameters =
        options.runtimeHyperparameters.value_or(native);
    buildTrainPipeline(pm, train);
  }
  if (!pipelined && !options.mesh.empty() && ladder >= Stage::Partitioned &&
      !module->hasAttr("weft.mesh")) {
    ParallelPipelineOptions parallel;
    parallel.mesh = options.mesh;
    parallel.zero = options.zero;
    parallel.bucketMB = options.bucketMB;
    for (const std::string &entry : options.shard)
      parallel.shard.push_back(entry);
    parallel.tpPlan = options.tpPlan;
    parallel.sequenceParallel = options.sequenceParallel;
    buildParallelPipeline(pm, parallel);
  }
  if (failed(pm.run(module)))
    return failure();
  if (pipelined && ladder >= Stage::Partitioned)
    return runPipelineSteps(module, timing);
  return success();
}

/// Where the module's initial weights are read from: an imported model's
/// weft.weights attribute is relative to the output, and its weights are
/// the input itself; a .mlir file's attribute is relative to the file.
std::string Driver::weightsSource(StringAttr attr) const {
  if (inputIsOnnx())
    return options.input;
  return resolveWeightsPath(attr.str(), options.input);
}

/// Writes the initial values of `names`, read from `source`, to a
/// safetensors file at `path`; returns an error message or "". It touches
/// no MLIR object, so it runs on a thread of its own while the code is
/// generated. With `headerChecksum`, for a file kept beside or appended
/// to an executable: the header
/// also records a checksum per chunk of the data (rt::kWeightsChunkBytes),
/// and `headerChecksum` covers the length and the header, so a rank checks
/// the whole chain while reading only the chunks its slices lie in.
static std::string writeWeightsImage(const std::string &source,
                                     const std::vector<std::string> &names,
                                     const std::string &path,
                                     uint64_t *headerChecksum,
                                     uint64_t *fileSize) {
  rt::SafeTensorsFile file;
  {
    std::vector<rt::HostArray> arrays;
    if (rt::Status s = readWeights(source, names, arrays); !s.ok())
      return s.message;
    for (size_t i = 0; i < names.size(); ++i)
      file.tensors.emplace_back(names[i], std::move(arrays[i]));
  }
  file.metadata.emplace_back("format", "weft-weights");
  if (headerChecksum) {
    std::vector<rt::TensorView> views;
    for (const auto &[name, array] : file.tensors)
      views.push_back({name, array.dtype, array.shape, array.data.data(),
                       array.data.size()});
    rt::SafeTensorsImage image;
    if (rt::Status s = rt::encodeSafeTensors(file.metadata, views, image);
        !s.ok())
      return path + ": " + s.message;
    // The data section does not depend on the header: hash it in chunks
    // now, then record the hashes in the header.
    std::string hashes;
    uint64_t hash = 0, filled = 0;
    auto flush = [&] {
      char hex[17];
      std::snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)hash);
      hashes += hex;
      filled = 0;
    };
    for (size_t p = 2; p < image.pieces.size(); ++p) {
      auto *bytes = static_cast<const uint8_t *>(image.pieces[p].first);
      size_t left = image.pieces[p].second;
      while (left) {
        if (filled == 0)
          hash = rt::fnv1a64(nullptr, 0);
        size_t n = std::min<uint64_t>(left, rt::kWeightsChunkBytes - filled);
        hash = rt::fnv1a64(bytes, n, hash);
        bytes += n;
        left -= n;
        filled += n;
        if (filled == rt::kWeightsChunkBytes)
          flush();
      }
    }
    if (filled)
      flush();
    file.metadata.emplace_back(rt::kWeightsChunkBytesKey,
                               std::to_string(rt::kWeightsChunkBytes));
    file.metadata.emplace_back(rt::kWeightsChunkHashesKey, hashes);
    if (rt::Status s = rt::encodeSafeTensors(file.metadata, views, image);
        !s.ok())
      return path + ": " + s.message;
    *headerChecksum =
        rt::fnv1a64(image.header.data(), image.header.size(),
                    rt::fnv1a64(image.length, sizeof(image.length)));
    *fileSize = 0;
    for (const auto &piece : image.pieces)
      *fileSize += piece.second;
  }
  if (rt::Status s = rt::writeSafeTensors(path, file); !s.ok())
    return s.message;
  return "";
}

LogicalResult Driver::writeWeightsFile(ModuleOp module,
                                       const std::vector<std::string> &names,
                                       const std::string &path) {
  auto attr =
      module->getAttrOfType<StringAttr>(WeftDialect::kWeightsAttrName);
  if (!attr)
    return module.emitError("no weft.weights attribute: the initial values "
                            "of the parameters are unknown");
  std::string error = writeWeightsImage(weightsSource(attr), names, path,
                                        nullptr, nullptr);
  if (!error.empty())
    return module.emitError(error);
  return success();
}

/// Starts writing the initial weights of the programs whose ABIs are
/// `abis` (their "param" and "buffer" arguments), read from `module`'s
/// weft.weights. An executable's, with checksums per chunk, are appended
/// to it after the link (through the assembler and the linker they would
/// be copied twice more), or past --embed-weights-limit written beside
/// it; an object embeds them for the link its user runs.
LogicalResult Driver::startWeights(ModuleOp module,
                                   ArrayRef<const ModelAbi *> abis) {
  Stage emit = options.emit;
  weights = std::make_unique<Weights>(loc());
  Weights &w = *weights;
  w.temps.tool = options.tool;
  w.temps.keep = options.saveTemps;
  if (emit == Stage::Llvm)
    return success();
  if (!w.temps.create())
    return failure();
  std::vector<std::string> names;
  uint64_t tensorBytes = 0;
  for (const ModelAbi *abi : abis)
    for (const AbiTensor &arg : abi->args)
      if (llvm::is_contained(abi->weightNames(), arg.name) &&
          !llvm::is_contained(names, arg.name)) {
        names.push_back(arg.name);
        tensorBytes += arg.bytes();
      }
  if (names.empty())
    return success();
  w.beside = emit == Stage::Exe && tensorBytes > options.embedWeightsLimit;
  w.appended = emit == Stage::Exe && !w.beside;
  if (w.beside) {
    std::string path = options.output + ".weights.safetensors";
    if (llvm::sys::fs::equivalent(path, options.input))
      return fail(path + " is the input; refusing to overwrite it");
    w.path = path;
  } else {
    w.path = w.temps.file("weights.safetensors");
  }
  auto attr =
      module->getAttrOfType<StringAttr>(WeftDialect::kWeightsAttrName);
  if (!attr)
    return module.emitError("no weft.weights attribute: the initial values "
                            "of the parameters are unknown");
  bool checked = w.beside || w.appended;
  w.writer = std::thread([&w, checked, source = weightsSource(attr),
                          names = std::move(names)] {
    w.error = writeWeightsImage(source, names, w.path,
                                checked ? &w.checksum : nullptr,
                                checked ? &w.size : nullptr);
    if (w.error.empty() && !checked)
      if (std::error_code ec = llvm::sys::fs::file_size(w.path, w.size))
        w.error = "cannot read back " + w.path + ": " + ec.message();
  });
  return success();
}

/// --weights-out: every parameter's and buffer's initial value in its own
/// file, and the IR pointing at it, so the IR no longer needs the .onnx.
LogicalResult Driver::writeWeightsOut(ModuleOp module) {
  std::vector<std::string> names;
  module.walk([&](func::FuncOp fn) {
    for (unsigned i = 0; i < fn.getNumArguments(); ++i)
      for (contract::Role role : {contract::Role::Param, contract::Role::Buffer})
        if (StringAttr name = getArgName(fn, i, role))
          if (!llvm::is_contained(names, name.str()))
            names.push_back(name.str());
  });
  if (failed(writeWeightsFile(module, names, options.weightsOut)))
    return failure();
  module->setAttr(WeftDialect::kWeightsAttrName,
                  StringAttr::get(module.getContext(),
                                  relativePath(options.weightsOut,
                                               outputDir())));
  return success();
}

/// One line per initializer (and Identity of one): what it became and why,
/// so a user sees at once whether Weft trains what PyTorch trains.
void Driver::printTensorTable() {
  if (importedTensors.empty())
    return;
  size_t width = 0;
  for (const auto &t : importedTensors)
    width = std::max(width, t.onnxName.size());
  width = std::min<size_t>(width, 48);
  llvm::errs() << options.tool << ": " << options.input << ": tensors\n";
  for (const auto &t : importedTensors) {
    llvm::errs() << "  " << llvm::left_justify(t.onnxName, width) << "  "
                 << llvm::left_justify(onnximport::roleName(t.role), 9)
                 << "  ";
    if (t.name != t.onnxName && t.role != onnximport::TensorRole::Tied)
      llvm::errs() << "as '" << t.name << "'"
                   << (t.transposed ? " (transposed)" : "") << ": ";
    llvm::errs() << t.reason << "\n";
  }
}

void Driver::printSummary(ModuleOp module) {
  using contract::Role;
  printTensorTable();
  int64_t params = 0, values = 0, bytes = 0, buffers = 0, state = 0, inputs = 0;
  // A training step's arguments describe the model; the functions it was
  // built from repeat them.
  auto step = module.lookupSymbol<func::FuncOp>("train_step");
  module.walk([&](func::FuncOp fn) {
    if (step && fn != step)
      return;
    for (unsigned i = 0; i < fn.getNumArguments(); ++i) {
      auto type = dyn_cast<RankedTensorType>(fn.getArgument(i).getType());
      std::optional<contract::Slot> slot = getArgSlot(fn, i);
      Role role = slot ? slot->role : Role::Input;
      if (role == Role::Param && type) {
        ++params;
        values += type.getNumElements();
        bytes += type.getNumElements() * type.getElementTypeBitWidth() / 8;
      } else if (role == Role::Buffer) {
        ++buffers;
      } else if (role == Role::State) {
        ++state;
      } else {
        ++inputs;
      }
    }
  });
  llvm::errs() << options.tool << ": " << options.input << ": " << params
               << " parameter tensors, " << values << " trainable values ("
               << llvm::format("%.1f", bytes / 1048576.0) << " MiB), "
               << buffers << " buffers, ";
  if (state)
    llvm::errs() << state << " optimizer state tensors, ";
  llvm::errs() << inputs << " inputs\n";
}

/// "planned peak memory 12.3 MiB: workspace ..., params+state+batch ...,
/// results ...".
std::string Driver::memorySummary(ModuleOp module, const ModelAbi &abi) {
  uint64_t args = 0, results = 0;
  for (const AbiTensor &t : abi.args)
    args += t.bytes();
  for (const AbiTensor &t : abi.results)
    results += t.bytes();
  auto attr =
      module->getAttrOfType<IntegerAttr>(WeftDialect::kWorkspaceBytesAttrName);
  uint64_t workspace = attr ? attr.getInt() : 0;
  return "planned peak memory " + mib(workspace + args + results) +
         " (workspace " + mib(workspace) + ", params+state+batch " + mib(args) +
         ", results " + mib(results) + ")";
}

/// llvm, obj, exe: LLVM IR, an object file with the weights embedded, an
/// executable linked with the runtime with the weights appended to it. A
/// pipeline's programs are built module by module and linked into one;
/// they share one weights image (an object's program 0 embeds it).
LogicalResult Driver::emitNative(ArrayRef<Program> programs,
                                 std::optional<int64_t> numClasses,
                                 TimingScope &timing) {
  Stage emit = options.emit;
  ModuleOp first = programs.front().module;
  if (!weights) {
    std::vector<const ModelAbi *> abis;
    for (const Program &program : programs)
      abis.push_back(&program.abi);
    if (failed(startWeights(first, abis)))
      return failure();
  }
  {
    TimingScope t = timing.nest("Embed weights (waiting for its thread)");
    if (weights->writer.joinable())
      weights->writer.join();
  }
  if (!weights->error.empty())
    return first.emitError(weights->error);
  weights->complete = true;
  TempDir &temps = weights->temps;
  const std::string &weightsPath = weights->path;
  std::string weightsBeside = weights->beside ? weights->path : "";
  bool appended = weights->appended;
  uint64_t weightsSize = weights->size, weightsChecksum = weights->checksum;
  std::string runtime;
  if (emit == Stage::Exe) {
    // Fail before the expensive part when the runtime is missing.
    FailureOr<std::string> dir =
        findRuntimeDir(options.argv0, options.runtimeDir, loc());
    if (failed(dir))
      return failure();
    runtime = *dir;
  }

  std::unique_ptr<llvm::TargetMachine> machine =
      createCpuTargetMachine(options.target, loc());
  if (!machine)
    return failure();
  if (!weightsBeside.empty())
    llvm::errs() << options.tool << ": initial weights ("
                 << mib(weightsSize) << ") kept beside the executable in "
                 << weightsBeside << "\n";

  // The CPU the kernels were built for, so the runtime can refuse a CPU
  // that lacks its instructions instead of dying of SIGILL mid-step.
  Builder builder(&context);
  SmallVector<Attribute> cpuFeatures;
  for (const std::string &feature : checkableCpuFeatures(*machine))
    cpuFeatures.push_back(builder.getStringAttr(feature));
  DictionaryAttr targetInfo = builder.getDictionaryAttr(
      {builder.getNamedAttr("cpu",
                            builder.getStringAttr(machine->getTargetCPU())),
       builder.getNamedAttr("requested_cpu",
                            builder.getStringAttr(options.target.cpu)),
       builder.getNamedAttr("cpu_features",
                            builder.getArrayAttr(cpuFeatures))});

  llvm::LLVMContext llvmContext;
  std::unique_ptr<llvm::Module> llvmModule;
  for (auto [index, program] : llvm::enumerate(programs)) {
    program.module->setAttr(WeftDialect::kTargetAttrName, targetInfo);
    ModelDescriptor descriptor;
    descriptor.abi = program.abi;
    descriptor.modelJson =
        buildModelJson(program.module, program.abi,
                       llvm::sys::path::filename(options.input), program.entry,
                       numClasses);
    if (program.pipeline || prediction) {
      llvm::Expected<llvm::json::Value> json =
          llvm::json::parse(descriptor.modelJson);
      if (!json)
        return fail("the model JSON does not parse: " +
                    llvm::toString(json.takeError()));
      if (program.pipeline)
        json->getAsObject()->insert(
            {"pipeline", llvm::json::Object(*program.pipeline)});
      if (prediction)
        json->getAsObject()->insert(
            {"prediction", llvm::json::Object(*prediction)});
      descriptor.modelJson = llvm::formatv("{0}", *json).str();
    }
    if (auto ws = program.module->getAttrOfType<IntegerAttr>(
            WeftDialect::kWorkspaceBytesAttrName))
      descriptor.workspaceBytes = ws.getInt();
    descriptor.programIndex = int32_t(index);
    if (options.device == "cuda")
      descriptor.deviceType = WEFT_DEVICE_CUDA;
    descriptor.numPrograms = int32_t(programs.size());
    if (appended) {
      descriptor.weightsAppended = true;
      descriptor.weightsFileSize = weightsSize;
      descriptor.weightsFileChecksum = weightsChecksum;
    } else if (weightsBeside.empty()) {
      // Program 0 embeds the weights; the others point at them.
      descriptor.weightsPath = index == 0 ? weightsPath : std::string();
      descriptor.sharedWeights = !weightsPath.empty();
      descriptor.weightsSize = weightsSize;
    } else {
      descriptor.weightsFile = llvm::sys::path::filename(weightsBeside).str();
      descriptor.weightsFileSize = weightsSize;
      descriptor.weightsFileChecksum = weightsChecksum;
    }
    // An executable's parts run O2 on their own threads, with the object
    // emission (emitObjectFiles); an object or LLVM IR is optimized whole.
    bool optimizeWhole = emit == Stage::Llvm || emit == Stage::Obj;
    std::unique_ptr<llvm::Module> built;
    {
      TimingScope t = timing.nest(
          optimizeWhole ? "LLVM translation and O" +
                              std::to_string(options.target.optLevel)
                        : std::string("LLVM translation"));
      built =
          buildModelModule(program.module, llvmContext, *machine, program.entry,
                           descriptor, options.target.optLevel, optimizeWhole);
    }
    if (!built)
      return failure();
    if (!llvmModule) {
      llvmModule = std::move(built);
      continue;
    }
    // Each program's kernels and tables are internal: linking renames
    // what clashes; the programs' tables are the only shared symbols.
    if (llvm::Linker::linkModules(*llvmModule, std::move(built)))
      return fail("cannot link the programs of pipeline ranks 0 and " +
                  std::to_string(index) + " into one module");
  }
  if (emit == Stage::Llvm) {
    std::string openError;
    auto output = openOutputFile(options.output, &openError);
    if (!output)
      return fail(openError);
    llvmModule->print(output->os(), nullptr);
    output->keep();
    return success();
  }
  if (emit == Stage::Obj) {
    TimingScope t = timing.nest("Object emission");
    return emitObjectFile(*llvmModule, *machine, options.output, loc());
  }
  // An executable's object code is optimized and emitted in two parts on
  // two threads (a fixed count, so the executable does not depend on this
  // machine).
  SmallVector<std::string> objects;
  {
    TimingScope t = timing.nest("Object emission (O" +
                                std::to_string(options.target.optLevel) +
                                " and code, 2 threads)");
    if (failed(emitObjectFiles(
            std::move(llvmModule), options.target, /*parts=*/2,
            [&](unsigned i) {
              return temps.file("model-" + std::to_string(i) + ".o");
            },
            objects, loc(), /*optimize=*/true)))
      return failure();
  }
  LinkOptions link;
  link.output = options.output;
  link.objects.assign(objects.begin(), objects.end());
  link.runtimeDir = runtime;
  link.extraArgs = options.linkArgs;
  link.verbose = options.saveTemps;
  link.nccl = options.device == "cuda" && !options.mesh.empty();
  {
    TimingScope t = timing.nest("Link");
    if (failed(linkExecutable(link, loc())))
      return failure();
  }
  if (!appended)
    return success();
  TimingScope t = timing.nest("Append weights");
  return appendWeights(options.output, weightsPath, loc());
}

LogicalResult Driver::writeText(StringRef path, StringRef text) {
  std::string error;
  auto output = openOutputFile(path, &error);
  if (!output)
    return fail(error);
  output->os() << text;
  output->keep();
  return success();
}

LogicalResult Driver::writeIR(ModuleOp module) {
  std::string error;
  auto output = openOutputFile(options.output, &error);
  if (!output)
    return fail(error);
  module->print(output->os());
  output->os() << "\n";
  output->keep();
  return success();
}

/// --plan FILE: the plan's layout becomes the flags that compile it.
LogicalResult Driver::applyPlan() {
  if (!options.mesh.empty() || options.zeroGiven || options.schedule ||
      options.virtualStages || options.sequenceParallel ||
      options.microBatchesGiven || !options.stageCuts.empty())
    return fail("--plan " + options.plan +
                " fixes the layout (mesh, ZeRO, schedule, micro-batches, "
                "sequence parallelism): leave out the flags that set them");
  if (isPlanStage(options.emit))
    return fail("--plan compiles a plan; --emit=" +
                std::string(getStageName(options.emit)) +
                " makes one: give one of them");
  planner::Plan plan;
  if (rt::Status s = readPlanFile(options.plan, options.planAlternative, plan);
      !s.ok())
    return fail(s.message);
  const planner::LayoutChoice &l = plan.layout;
  // The plan's recomputation is --recompute (--weft-recompute).
  std::string planRecompute = planner::recomputeName(plan.recompute);
  if (train.recompute != "none" && train.recompute != planRecompute)
    return fail("--plan " + options.plan + " recomputes " + planRecompute +
                " and --recompute says " + train.recompute +
                ": leave out --recompute, the plan fixes it");
  train.recompute = planRecompute;
  if (!train.recomputeLayers.empty())
    return fail("--plan " + options.plan +
                " fixes which layers recompute: leave out --recompute-layers");
  if (plan.recomputeBlocks > 0)
    planRecomputedBlocks = planner::recomputedBlocks(plan);
  std::string mesh;
  for (auto [name, size] : {std::pair<const char *, int>{"pp", l.pp},
                            {"dp", l.dp},
                            {"tp", l.tp}})
    if (size > 1)
      mesh += (mesh.empty() ? "" : ",") + std::string(name) + "=" +
              std::to_string(size);
  options.mesh = mesh;
  options.zero = l.dp > 1 ? l.zeroStage : 0;
  options.sequenceParallel = l.tp > 1 && l.sequenceParallel;
  if (l.pp > 1) {
    options.schedule = pipeline::getScheduleKindName(l.schedule);
    if (l.virtualStages > 1)
      options.virtualStages = l.virtualStages;
    options.microBatchesGiven = true;
    // The stages the plan costed, cut between its layers (interleaved
    // chunks are equal runs of layers, as weftc balances them anyway).
    if (l.virtualStages == 1)
      planBlocksPerStage.assign(plan.blocksPerRank.begin(),
                                plan.blocksPerRank.end());
  }
  // The plan's tensor-parallel parts: those it keeps whole, and the
  // embedding tables it splits by rows (the Megatron plan would not).
  if (l.tp > 1 &&
      !(plan.tpReplicatedParams.empty() && plan.tpRowSplitParams.empty())) {
    if (!options.shard.empty() || options.tpPlan != "megatron")
      return fail("--plan " + options.plan +
                  " fixes which parameters tensor parallelism splits: leave "
                  "out --shard and --tp-plan");
    for (const std::string &name : plan.tpReplicatedParams)
      options.shard.push_back(name + "=replicated");
    for (const std::string &name : plan.tpRowSplitParams)
      options.shard.push_back(name + "=[{tp}, {}]");
  }
  train.accumSteps = l.microBatches;
  planMicroBatch = int64_t(plan.microBatchSize) * l.dp;
  planBatchFlag = "--plan " + options.plan;
  // The executable reports what it measures next to this.
  std::string layout = "dp=" + std::to_string(l.dp) +
                       ",tp=" + std::to_string(l.tp) +
                       ",pp=" + std::to_string(l.pp) +
                       " zero=" + std::to_string(l.zeroStage) +
                       " micro-batches=" + std::to_string(l.microBatches);
  prediction = llvm::json::Object{
      {"layout", layout},
      {"plan_file", llvm::sys::path::filename(options.plan).str()},
      {"step_time_s", plan.stepSeconds},
      {"compute_s", plan.computeSeconds},
      {"exposed_comm_s", plan.exposedCommSeconds},
      {"bubble_s", plan.bubbleSeconds},
      {"memory_bytes_per_device", plan.memory.total},
      {"tokens_per_s", plan.tokensPerSecond},
      {"mfu", plan.mfu}};
  std::string replicated = l.tp > 1 ? llvm::join(plan.tpReplicated, ", ") : "";
  llvm::errs() << options.tool << ": --plan " << options.plan << ": "
               << (mesh.empty() ? "one device" : "--mesh " + mesh)
               << (options.zero ? ", --zero " + std::to_string(options.zero)
                                : "")
               << (options.sequenceParallel ? ", --sequence-parallel" : "")
               << (l.pp > 1 ? ", --schedule " + *options.schedule : "") << ", "
               << l.microBatches << " micro-batch(es) of " << planMicroBatch
               << " samples"
               << (replicated.empty() ? ""
                                      : ", replicated over tp: " + replicated)
               << (plan.recompute != planner::Recompute::None
                       ? ", recomputation " + planner::recomputeText(plan)
                       : "")
               << "\n";
  return success();
}

/// The planner's search on `module` with weftc's flags as pins.
LogicalResult Driver::searchLayout(ModuleOp module,
                                   planner::SearchResult &result,
                                   bool compiling) {
  planner::SearchOptions search;
  // A plan built from this model takes its batch as one micro-batch
  // (checkPlanBatch): one micro-batch per step, unless the micro-batch
  // size is given.
  search.oneMicroBatch = compiling && !options.microBatchSize;
  search.devices = options.devices;
  // Plans weftc compiles are Weft executables: count what they hold.
  search.executableMemory = true;
  search.dtype = train.precision == Precision::BF16 ? "bf16" : "fp32";
  // --recompute pins it; without it the search chooses.
  if (options.recomputeGiven) {
    planner::Recompute recompute = planner::Recompute::None;
    if (rt::Status s = planner::parseRecompute(train.recompute, recompute);
        !s.ok())
      return fail("--recompute: " + s.message);
    search.recompute = recompute;
  }
  search.dp = meshDp;
  search.tp = meshTp;
  search.pp = pipelineRanks;
  // GPU pipelines pass their stage transfers through host memory, far
  // slower than the links the cost model prices: plan without one unless
  // --mesh asks for pp.
  bool noPipelineOnGpu = options.device == "cuda" && !pipelineRanks;
  if (noPipelineOnGpu)
    search.pp = 1;
  if (options.zeroGiven)
    search.zeroStage = int(options.zero);
  if (options.schedule) {
    pipeline::ScheduleKind kind;
    if (pipeline::Status s = pipeline::parseScheduleKind(*options.schedule, kind);
        !s.ok())
      return fail("--schedule: " + s.message);
    search.schedule = kind;
  }
  if (options.virtualStages)
    search.virtualStages = int(*options.virtualStages);
  if (options.sequenceParallel)
    search.sequenceParallel = true;
  search.microBatchSize = int(options.microBatchSize);
  planner::ClusterSpec cluster;
  auto progress = [&](const std::string &line) {
    llvm::errs() << options.tool << ": " << line << "\n";
  };
  if (rt::Status s = loadPlanCluster(options.cluster, options.devices,
                                     progress, cluster);
      !s.ok())
    return fail("--cluster " + options.cluster + ": " + s.message);
  if (rt::Status s = searchModelPlan(module, cluster, search, result);
      !s.ok())
    return fail(
        s.message +
        (noPipelineOnGpu ? " (--target cuda plans without pipeline "
                           "stages, pp=1: GPU pipelines send through "
                           "host memory, not NCCL, yet; --mesh pp=N "
                           "forces one)"
                         : "") +
        (search.oneMicroBatch
             ? " (building, weftc takes the model's batch as one "
               "micro-batch; --emit=plan may find smaller micro-batches "
               "that fit: export the model with that batch and compile "
               "with --plan, or give it a dynamic batch axis and "
               "--micro-batch-size)"
             : ""));
  return success();
}

/// --emit=plan|plan-json|plan-svg: the planner's search on the model.
LogicalResult Driver::writePlan(ModuleOp module) {
  planner::SearchResult result;
  if (failed(searchLayout(module, result)))
    return failure();
  PlanFormat format = options.emit == Stage::Plan       ? PlanFormat::Table
                      : options.emit == Stage::PlanJson ? PlanFormat::Json
                                                        : PlanFormat::Svg;
  return writeText(options.output, formatPlan(result, format));
}

/// weftc model --cluster FILE -o train, without --mesh or --plan: the
/// planner chooses the layout. Its table goes to stderr, its plan file and
/// picture beside the output (OUTPUT.plan.json, OUTPUT.plan.svg), and the
/// build goes on as with --plan OUTPUT.plan.json.
LogicalResult Driver::autoPlan() {
  OwningOpRef<ModuleOp> model = loadInput();
  if (!model)
    return failure();
  PassManager pm(&context);
  ImportPipelineOptions import;
  import.training = options.batchNormTrain;
  buildImportPipeline(pm, import);
  if (failed(pm.run(*model)))
    return failure();
  planner::SearchResult result;
  if (failed(searchLayout(*model, result, /*compiling=*/true)))
    return failure();
  std::string base = options.output == "-" ? "train" : options.output;
  std::string json = base + ".plan.json", svg = base + ".plan.svg";
  if (failed(writeText(json, formatPlan(result, PlanFormat::Json))) ||
      failed(writeText(svg, formatPlan(result, PlanFormat::Svg))))
    return failure();
  llvm::errs() << formatPlan(result, PlanFormat::Table) << options.tool
               << ": plan written to " << json << ", its picture to " << svg
               << "\n";
  // The pins became the plan; the plan is now what the flags say.
  options.plan = json;
  options.planAlternative = 0;
  options.mesh.clear();
  options.zeroGiven = false;
  options.schedule.reset();
  options.virtualStages.reset();
  options.sequenceParallel = false;
  options.devices = 0;
  options.microBatchSize = 0;
  return success();
}

/// --micro-batch-size B when compiling. weftc takes the model's batch as
/// one micro-batch over the dp ranks, so that batch must be dp x B
/// (checkPlanBatch, once the model is loaded). An --input-shape gives the
/// step's batch instead (a model exported with a dynamic batch axis): the
/// model is imported at dp x B and the step runs the rest as micro-batches,
/// so `--input-shape ids=64x1024 --mesh pp=2,dp=2 --micro-batch-size 4`
/// is 8 micro-batches of 4 samples per rank.
LogicalResult Driver::applyMicroBatchSize() {
  int64_t micro = options.microBatchSize * std::max(meshDp, 1);
  std::string flag =
      "--micro-batch-size " + std::to_string(options.microBatchSize);
  if (meshDp > 1)
    flag += " with dp=" + std::to_string(meshDp);
  planMicroBatch = micro;
  planBatchFlag = flag;
  int64_t steps = 0;
  std::string first;
  for (std::string &spec : options.inputShapes) {
    std::string name;
    std::vector<int64_t> shape;
    if (failed(parseInputShape(spec, name, shape, loc())))
      return failure();
    if (shape.empty())
      continue;
    if (shape[0] % micro != 0)
      return fail("--input-shape " + spec + ": a step's batch of " +
                  std::to_string(shape[0]) + " samples does not split into " +
                  "micro-batches of " + std::to_string(micro) + " (" + flag +
                  "); give a batch that is a multiple of " +
                  std::to_string(micro));
    int64_t m = shape[0] / micro;
    if (steps && m != steps)
      return fail("--input-shape " + spec + " and " + first +
                  " give the step different batches; give every batch "
                  "input the same first dimension");
    steps = m;
    first = spec;
    shape[0] = micro;
    std::string rewritten = name + "=";
    for (size_t d = 0; d < shape.size(); ++d)
      rewritten += (d ? "x" : "") + std::to_string(shape[d]);
    spec = rewritten;
  }
  if (!steps)
    return success();
  if (train.accumSteps != 1 && train.accumSteps != steps)
    return fail(first + " with " + flag + " is " + std::to_string(steps) +
                " micro-batches, but --micro-batches (or --accum-steps) says " +
                std::to_string(train.accumSteps) + ": give one of them");
  train.accumSteps = steps;
  if (pipelineRanks)
    options.microBatchesGiven = true;
  return success();
}

/// With --plan or --micro-batch-size: the model's batch is one micro-batch
/// (its dp ranks' samples together), as weftc's micro-batches are.
LogicalResult Driver::checkPlanBatch(ModuleOp module) {
  auto forward = module.lookupSymbol<func::FuncOp>("forward");
  if (!planMicroBatch || !forward)
    return success();
  for (unsigned i = 0; i < forward.getNumArguments(); ++i) {
    if (!getArgName(forward, i, contract::Role::Input))
      continue;
    auto type = dyn_cast<RankedTensorType>(forward.getArgument(i).getType());
    if (!type || type.getRank() == 0)
      continue;
    if (type.getDimSize(0) != planMicroBatch)
      return fail(
          planBatchFlag + ": a micro-batch is " +
          std::to_string(planMicroBatch) +
          " samples (dp x micro-batch size), but the model's batch is " +
          std::to_string(type.getDimSize(0)) +
          "; weftc takes the model's batch as one micro-batch: "
          "export the model with batch " +
          std::to_string(planMicroBatch) +
          ", or with a dynamic batch axis and give the step's batch "
          "with --input-shape");
    return success();
  }
  return success();
}

/// --target cuda: the toolkit for native stages, and the GPU dialects. dp
/// and tp run their collectives on NCCL; a pipeline's sends and receives
/// go through host memory (CudaMeshCollectives.cpp).
LogicalResult Driver::checkCuda() {
  if (!options.mesh.empty() && options.emit >= Stage::Llvm &&
      !isScheduleStage(options.emit) && !canLinkNccl())
    return fail("--target cuda --mesh " + options.mesh +
                " runs its collectives on NCCL, and this Weft was built "
                "without it: rebuild Weft with the CUDA toolkit and NCCL "
                "under /usr/local/cuda, or leave out --target cuda");
  if (options.emit >= Stage::Llvm && !isScheduleStage(options.emit) &&
      failed(checkCudaToolkit(CudaTargetOptions(), loc())))
    return failure();
  DialectRegistry registry;
  registerCudaDialects(registry);
  context.appendDialectRegistry(registry);
  context.loadAllAvailableDialects();
  return success();
}

LogicalResult Driver::run() {
  if (failed(checkOutput()))
    return failure();
  // --cluster with a native build and no layout: plan it first.
  if (!options.cluster.empty() && options.plan.empty() &&
      options.mesh.empty() && options.emit >= Stage::Llvm &&
      !isScheduleStage(options.emit) && failed(autoPlan()))
    return failure();
  if (!options.plan.empty() && failed(applyPlan()))
    return failure();
  if (failed(checkMesh()) || failed(checkPipelineOptions()))
    return failure();
  if (options.device == "cuda" && failed(checkCuda()))
    return failure();
  if (options.mesh.empty() && options.emit == Stage::Partitioned)
    return fail("--emit=partitioned needs a mesh: add --mesh dp=N (or "
                "tp=N, or pp=N)");
  if (options.mesh.empty() && options.zero != 0)
    return fail("--zero shards over data-parallel ranks: add --mesh dp=N");
  if (options.mesh.empty() &&
      (!options.shard.empty() || options.sequenceParallel))
    return fail(std::string(options.sequenceParallel ? "--sequence-parallel"
                                                     : "--shard") +
                " splits over tensor-parallel ranks: add --mesh tp=N");
  OwningOpRef<ModuleOp> module = loadInput();
  if (!module)
    return failure();

  DefaultTimingManager tm;
  applyDefaultTimingManagerCLOptions(tm);
  TimingScope timing = tm.getRootScope();
  Stage emit = options.emit;
  if (emit != Stage::Onnx && failed(runImportAndTrain(*module, timing)))
    return failure();
  if (!options.weightsOut.empty() && failed(writeWeightsOut(*module)))
    return failure();
  if (options.summary)
    printSummary(*module);
  if (isPlanStage(emit))
    return writePlan(*module);
  if (isScheduleStage(emit))
    return writeSchedule(*module);
  if (failed(checkPlanBatch(*module)))
    return failure();
  if (emit < Stage::Linalg)
    return writeIR(*module);

  if (pipelineRanks > 0)
    return compilePipeline(*module, timing);
  auto step = module->lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return fail(options.input + " has no @train_step to compile");
  FailureOr<ModelAbi> abi = collectModelAbi(step);
  if (failed(abi))
    return failure();
  std::optional<int64_t> numClasses = getNumClasses(*module);
  // The weights are written while the code is generated.
  if ((emit == Stage::Obj || emit == Stage::Exe) &&
      failed(startWeights(*module, {&*abi})))
    return failure();
  PassManager pm(&context);
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  pm.enableTiming(timing);
  CodegenPipelineOptions codegen;
  setCodegenFlags(codegen);
  codegen.stopAfter = emit == Stage::Linalg   ? CodegenStage::Kernels
                      : emit == Stage::Memref ? CodegenStage::Buffers
                                              : CodegenStage::LLVM;
  buildCodegenPipeline(pm, codegen);
  if (failed(pm.run(*module)))
    return failure();
  std::string memory =
      emit >= Stage::Memref ? memorySummary(*module, *abi) : std::string();
  if (emit >= Stage::Llvm) {
    Program program{*module, *abi, "train_step", std::nullopt};
    if (failed(emitNative(program, numClasses, timing)))
      return failure();
    if (options.summary || emit == Stage::Exe)
      report(memory);
    return success();
  }
  if (options.summary)
    report(memory);
  return writeIR(*module);
}

/// "wrote train: planned peak memory ...; compiled in 1.23 s".
void Driver::report(StringRef memory) {
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  llvm::errs() << options.tool << ": "
               << (options.emit == Stage::Exe ? "wrote " + options.output + ": "
                                              : std::string())
               << (memory.empty() ? "" : memory + "; ") << "compiled in "
               << llvm::formatv("{0:F2}", seconds) << " s\n";
}

/// A pipeline's executable: one program per rank (MPMD), each rank's step
/// compiled on its own copy of the module, then linked into one binary
/// whose runtime runs the program of its pipeline rank. Each program's
/// model JSON says where it stands in the pipeline, the schedule's
/// predicted bubble, and every tensor of the whole model with the rank
/// that stores it in checkpoints, so any rank can describe the model and
/// a checkpoint written at one pp resumes at another.
LogicalResult Driver::compilePipeline(ModuleOp module, TimingScope &timing) {
  std::optional<int64_t> numClasses = getNumClasses(module);
  int64_t microBatches = stepMicroBatches(module);
  // The schedule as the executable will run it, simulated with the stage
  // costs of --emit=schedule.
  llvm::json::Array rankBubble;
  double bubble = 0;
  {
    FailureOr<std::vector<StageSummary>> stages = readStageSummary(module);
    if (failed(stages))
      return failure();
    planner::ClusterSpec cluster;
    if (!options.cluster.empty()) {
      if (rt::Status s = planner::loadClusterSpec(options.cluster, cluster);
          !s.ok())
        return fail("--cluster: " + s.message);
    }
    ScheduleMachine machine = scheduleMachine(
        options.cluster.empty() ? nullptr : &cluster, pipelineRanks);
    pipeline::Schedule schedule;
    pipeline::SimResult sim;
    pipeline::Status s = pipeline::buildSchedule(
        scheduleKind, pipelineRanks, int(microBatches), virtualStages,
        schedule);
    if (s.ok())
      s = pipeline::simulate(schedule, estimateStageCosts(*stages, machine),
                             sim);
    if (!s.ok())
      return fail(s.message);
    bubble = sim.bubble;
    for (double b : sim.rankBubble)
      rankBubble.push_back(b);
  }

  SmallVector<func::FuncOp> steps;
  SmallVector<ModelAbi> abis;
  for (int r = 0; r < pipelineRanks; ++r) {
    std::string name = "train_step.rank" + std::to_string(r);
    auto fn = module.lookupSymbol<func::FuncOp>(name);
    if (!fn)
      return fail(options.input + " has no @" + name +
                  " (the pipeline's rank steps) to compile");
    FailureOr<ModelAbi> abi = collectModelAbi(fn);
    if (failed(abi))
      return failure();
    steps.push_back(fn);
    abis.push_back(std::move(*abi));
  }
  // Every param, state and buffer of the model, stored by the first rank
  // holding it (a tied parameter is held, equal, by several).
  llvm::json::Array tensors;
  {
    llvm::StringSet<> seen;
    for (int r = 0; r < pipelineRanks; ++r)
      for (const AbiTensor &t : abis[r].args) {
        if ((t.kind != "param" && t.kind != "state" && t.kind != "buffer") ||
            !seen.insert(t.name).second)
          continue;
        auto array = [](ArrayRef<int64_t> dims) {
          llvm::json::Array out;
          for (int64_t d : dims)
            out.push_back(d);
          return out;
        };
        // The stage's ranks split it over dp and tp as its sharding says
        // (the model JSON's "shardings" of the programs holding it).
        llvm::json::Object entry{
            {"name", t.name},
            {"kind", t.kind},
            {"dtype", rt::dtypeName(rt::DType(t.dtype))},
            {"shape", array(t.globalShape.empty() ? t.shape : t.globalShape)},
            {"rank", r}};
        if (!t.globalShape.empty()) {
          llvm::json::Array dims;
          for (const std::vector<std::string> &axes : t.shardDims) {
            llvm::json::Array names;
            for (const std::string &axis : axes)
              names.push_back(axis);
            dims.push_back(std::move(names));
          }
          entry["dims"] = std::move(dims);
          if (!t.storedShape.empty())
            entry["stored_shape"] = array(t.storedShape);
        }
        tensors.push_back(std::move(entry));
      }
  }

  SmallVector<OwningOpRef<ModuleOp>> clones;
  SmallVector<Program> programs;
  std::string memory;
  for (int r = 0; r < pipelineRanks; ++r) {
    clones.push_back(module.clone());
    ModuleOp clone = *clones.back();
    PassManager pm(&context);
    if (failed(applyPassManagerCLOptions(pm)))
      return failure();
    pm.enableTiming(timing);
    CodegenPipelineOptions codegen;
    setCodegenFlags(codegen);
    codegen.entry = steps[r].getName().str();
    buildCodegenPipeline(pm, codegen);
    if (failed(pm.run(clone)))
      return failure();
    llvm::json::Array stages;
    for (int64_t stage = r; stage < int64_t(pipelineRanks) * virtualStages;
         stage += pipelineRanks)
      stages.push_back(stage);
    llvm::json::Object pipelineJson{
        {"rank", r},
        {"ranks", pipelineRanks},
        {"schedule", pipeline::getScheduleKindName(scheduleKind)},
        {"virtual_stages", virtualStages},
        {"micro_batches", microBatches},
        {"stages", std::move(stages)},
        {"predicted_bubble", bubble},
        {"predicted_rank_bubble", llvm::json::Array(rankBubble)},
        {"tensors", llvm::json::Array(tensors)}};
    memory += (memory.empty() ? "" : "; ") + ("rank " + Twine(r) + " ").str() +
              memorySummary(clone, abis[r]);
    programs.push_back(
        {clone, abis[r], codegen.entry, std::move(pipelineJson)});
  }
  if (failed(emitNative(programs, numClasses, timing)))
    return failure();
  if (options.summary || options.emit == Stage::Exe)
    report(memory);
  return success();
}
} // namespace

LogicalResult weft::runDriver(MLIRContext &context, DriverOptions &options,
                              TrainPipelineOptions &train) {
  return Driver(context, options, train).run();
}
