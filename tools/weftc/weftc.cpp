//===- weftc.cpp - The Weft compiler driver -------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weftc MODEL [-o OUT] --emit=STAGE: imports an ONNX model (or reads weft
// IR) and runs the pipeline up to STAGE: the model (weft), the training
// step (train), fused kernels on tensors (linalg), planned buffers with
// BLAS calls (memref), LLVM IR (llvm), an object file (obj) or a training
// executable linked with the runtime (exe, the default for an output name
// without extension); with --mesh pp=N also a pipeline's schedule (schedule,
// schedule-svg). The ladder is lib/Driver; this file maps flags to its
// options.
//
//===----------------------------------------------------------------------===//

#include "weft/Driver/Driver.h"
#include "weft/Support/Diagnostics.h"
#include "weft/Support/Version.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace weft;
namespace cl = llvm::cl;

namespace {
// Sorted first in --help (LLVM lists categories by name).
cl::OptionCategory weftcCategory("Basic options");

cl::opt<std::string> inputFilename(cl::Positional,
                                   cl::desc("<model.onnx | model.mlir>"),
                                   cl::Required, cl::cat(weftcCategory));
cl::opt<std::string> outputFilename(
    "o",
    cl::desc("Output file (default: stdout); its extension names the "
             "stage: .mlir IR, .ll LLVM IR, .o "
             "an object, none/.exe/.bin an "
             "executable (--emit=schedule, schedule-svg and the plan "
             "emits take any name)"),
    cl::value_desc("file"), cl::init("-"), cl::cat(weftcCategory));
cl::opt<Stage> emit(
    "emit", cl::desc("Stage to stop at and print"), cl::init(Stage::Weft),
    cl::values(clEnumValN(Stage::Onnx, "onnx",
                          "imported ONNX nodes, not yet legalized"),
               clEnumValN(Stage::Weft, "weft", "the model in the weft dialect"),
               clEnumValN(Stage::Train, "train",
                          "the training step: @loss, @loss_grad, "
                          "@train_step"),
               clEnumValN(Stage::Partitioned, "partitioned",
                          "the per-rank @train_step of --mesh, with its "
                          "collectives; with --mesh pp=N one "
                          "@train_step.rank<r> per pipeline rank, with "
                          "its sends and receives"),
               clEnumValN(Stage::Linalg, "linalg",
                          "@train_step as fused kernels on tensors"),
               clEnumValN(Stage::Memref, "memref",
                          "@train_step on buffers: BLAS calls, planned "
                          "workspace"),
               clEnumValN(Stage::Llvm, "llvm",
                          "optimized LLVM IR of the step and its "
                          "descriptor (weights not embedded)"),
               clEnumValN(Stage::Obj, "obj",
                          "an object file defining weft_get_model(), "
                          "weights embedded (default -o model.o)"),
               clEnumValN(Stage::Exe, "exe",
                          "a training executable linked with the Weft "
                          "runtime (default -o train; the stage when -o "
                          "has no extension, .exe or .bin)"),
               clEnumValN(Stage::Schedule, "schedule",
                          "with --mesh pp=N: the stages (ops, GFLOP, "
                          "parameters, MiB sent on) and the schedule's "
                          "simulated per-rank timeline, bubble and peak "
                          "micro-batches in flight, as text"),
               clEnumValN(Stage::ScheduleSvg, "schedule-svg",
                          "with --mesh pp=N: the simulated schedule as an "
                          "SVG chart"),
               clEnumValN(Stage::Plan, "plan",
                          "with --cluster: the planner's layout (mesh, "
                          "stages, micro-batches, schedule, ZeRO, memory, "
                          "predicted step time, MFU) and the next best, as "
                          "a table"),
               clEnumValN(Stage::PlanJson, "plan-json",
                          "with --cluster: the same as a plan file, which "
                          "--plan compiles"),
               clEnumValN(Stage::PlanSvg, "plan-svg",
                          "with --cluster: the plan's mesh over the "
                          "cluster's devices and its pipeline timeline, "
                          "as SVG")),
    cl::cat(weftcCategory));
cl::list<std::string> inputShapes(
    "input-shape",
    cl::desc("Static shape of a model input, e.g. --input-shape input=4x48 "
             "(needed for dynamic dimensions; repeat or comma-separate)"),
    cl::value_desc("name=DxD..."), cl::CommaSeparated, cl::cat(weftcCategory));
cl::list<std::string> frozen(
    "freeze",
    cl::desc("Float initializers to load but not train (PyTorch buffers)"),
    cl::value_desc("name"), cl::CommaSeparated, cl::cat(weftcCategory));
cl::opt<std::string> weightsOut(
    "weights-out",
    cl::desc("Write the parameters' initial values to this safetensors file "
             "and point the IR at it (default: the IR points at the .onnx)"),
    cl::value_desc("file.safetensors"), cl::cat(weftcCategory));
cl::OptionCategory trainCategory("Training step options (--emit=train)");
cl::opt<std::string> loss("loss",
                          cl::desc("Loss: cross-entropy (class axis last, "
                                   "int64 labels), mse, or none (the model "
                                   "outputs its loss)"),
                          cl::init("cross-entropy"), cl::cat(trainCategory));
cl::opt<std::string> optimizer("optimizer", cl::desc("sgd or adamw"),
                               cl::init("adamw"), cl::cat(trainCategory));
cl::opt<double> momentum("momentum", cl::desc("SGD momentum (default 0)"),
                         cl::init(0.0), cl::cat(trainCategory));
cl::opt<bool> nesterov("nesterov", cl::desc("SGD Nesterov momentum"),
                       cl::init(false), cl::cat(trainCategory));
cl::opt<double>
    weightDecay("weight-decay",
                cl::desc("Weight decay (default: 0 for sgd, 0.01 for adamw)"),
                cl::init(-1.0), cl::cat(trainCategory));
cl::opt<double> beta1("beta1", cl::desc("AdamW beta1"), cl::init(0.9),
                      cl::cat(trainCategory));
cl::opt<double> beta2("beta2", cl::desc("AdamW beta2"), cl::init(0.999),
                      cl::cat(trainCategory));
cl::opt<double> adamEps("eps", cl::desc("AdamW epsilon"), cl::init(1e-8),
                        cl::cat(trainCategory));
cl::opt<double> clipNorm("clip-norm",
                         cl::desc("Clip gradients to this global norm (0: "
                                  "off)"),
                         cl::init(0.0), cl::cat(trainCategory));
cl::opt<int64_t> accumSteps("accum-steps",
                            cl::desc("Micro-batches per step; batch inputs "
                                     "grow by this factor along axis 0"),
                            cl::init(1), cl::cat(trainCategory));
cl::opt<std::string> lrSchedule("lr-schedule",
                                cl::desc("constant, warmup or cosine"),
                                cl::init("constant"), cl::cat(trainCategory));
cl::opt<int64_t> warmupSteps("warmup-steps", cl::desc("Linear warmup steps"),
                             cl::init(0), cl::cat(trainCategory));
cl::opt<int64_t> totalSteps("total-steps",
                            cl::desc("Steps of the cosine schedule"),
                            cl::init(0), cl::cat(trainCategory));
cl::opt<double> minLrRatio("min-lr-ratio",
                           cl::desc("Cosine floor as a fraction of the base "
                                    "learning rate"),
                           cl::init(0.0), cl::cat(trainCategory));
cl::opt<cl::boolOrDefault> runtimeHyperparameters(
    "runtime-hyperparameters",
    cl::desc("Make the optimizer's hyperparameters run-time inputs "
             "hp.<name>: flags of the executable, defaulting to the values "
             "given here (default: on for --emit=llvm|obj|exe, off for IR)"),
    cl::cat(trainCategory));
cl::opt<std::string> batchNorm(
    "batchnorm",
    cl::desc("BatchNorm in the training step: 'train' normalizes with batch "
             "statistics and updates the running ones, as PyTorch's train "
             "mode; 'inference' uses the running statistics, frozen"),
    cl::value_desc("train|inference"), cl::init("train"),
    cl::cat(trainCategory));
cl::opt<std::string> recurrentActivations(
    "recurrent-activations",
    cl::desc("What an LSTM/GRU backward reads: 'store' keeps each step's "
             "gates from the forward; 'recompute' keeps none and recomputes "
             "them in the backward's time loop (one more [B,H]x[H,4H] GEMM "
             "per step); 'auto' recomputes a layer whose gates exceed "
             "--recurrent-recompute-mb"),
    cl::value_desc("store|recompute|auto"), cl::init("auto"),
    cl::cat(trainCategory));
cl::opt<double> recurrentRecomputeMB(
    "recurrent-recompute-mb",
    cl::desc("--recurrent-activations=auto recomputes an LSTM/GRU whose "
             "stored gates exceed this many MiB (default 64)"),
    cl::init(64.0), cl::cat(trainCategory));
cl::opt<std::string> fusedAttention(
    "fused-attention",
    cl::desc("Scaled dot-product attention (matmul, scale, causal mask, "
             "softmax, matmul) as one kernel that never stores the T x S "
             "scores (f32 or bf16; with --target cuda heads up to 64 wide "
             "in f32 and 128 in bf16): 'on', 'off', or 'auto' (where one "
             "(batch, head)'s "
             "T x S is at least 65536, as T = S = 256; docs/training.md)"),
    cl::value_desc("auto|on|off"), cl::init("auto"), cl::cat(trainCategory));
cl::opt<std::string> recompute(
    "recompute",
    cl::desc("Activations the backward recomputes instead of keeping "
             "(--weft-recompute): 'none'; 'selective', each attention's "
             "scores and probabilities (the T x T tensors); 'full', whole "
             "layers, keeping only what enters each (the residual stream). "
             "Same numbers, less memory, a longer step; with any --mesh. "
             "Planning (--cluster) pins it when given, else chooses it "
             "(docs/training.md)"),
    cl::value_desc("none|selective|full"), cl::init("none"),
    cl::cat(trainCategory));
cl::list<std::string> recomputeLayers(
    "recompute-layers",
    cl::desc("Recompute only these layers (named as the parameters' "
             "numbered prefix, e.g. h.0,h.3); default all"),
    cl::value_desc("layer,..."), cl::CommaSeparated, cl::cat(trainCategory));
cl::opt<std::string> precision("precision",
                               cl::desc("fp32, or bf16 (bf16 compute, f32 "
                                        "master weights and optimizer "
                                        "state)"),
                               cl::init("fp32"), cl::cat(trainCategory));

cl::opt<bool> summary("summary",
                      cl::desc("Print parameter and input counts, planned "
                               "peak memory and compile time to stderr"),
                      cl::init(false), cl::cat(weftcCategory));

cl::OptionCategory parallelCategory(
    "Parallelism options (--emit=partitioned and later stages)");
cl::opt<std::string>
    mesh("mesh",
         cl::desc("Compile for a mesh of ranks, axes as name=size: dp=4 "
                  "trains data-parallel on 4 ranks, dp=2,tp=2 also splits "
                  "layers over 2 (tp ranks are consecutive: inside a "
                  "node); pp=4 cuts the model into a pipeline of 4 stages "
                  "(alone: not yet with dp or tp) (default: one process)"),
         cl::value_desc("axes"), cl::cat(parallelCategory));
cl::list<std::string> shardParams(
    "shard",
    cl::desc("Lay a parameter out over tp, NAME=LAYOUT, NAME may use * and "
             "?: --shard 'h.*.mlp.c_fc.weight=[{tp}, {}]' splits its rows, "
             "--shard 'h.*.attn.*=replicated' keeps them whole on every tp "
             "rank; repeat for more"),
    cl::value_desc("name=layout"), cl::cat(parallelCategory));
cl::opt<std::string> tpPlan(
    "tp-plan",
    cl::desc("How parameters --shard does not name are split over tp: "
             "megatron (default: column- then row-parallel, heads split, "
             "found by propagation) or manual (replicated)"),
    cl::init("megatron"), cl::cat(parallelCategory));
cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("Megatron sequence parallelism: layer norms and residuals "
             "split over the sequence on the tp ranks, an all-gather "
             "before and a reduce-scatter after each tensor-parallel "
             "block"),
    cl::init(false), cl::cat(parallelCategory));
cl::opt<int64_t> zero("zero",
                      cl::desc("ZeRO stage over dp: 1 shards optimizer "
                               "state, 2 also gradients, 3 also parameters "
                               "(default 0)"),
                      cl::init(0), cl::cat(parallelCategory));
cl::opt<double> bucketMB(
    "bucket-mb",
    cl::desc("Gradient reductions travel in buckets of at most this many "
             "MiB, each sent while the backward pass computes the next; 0 "
             "sends each reduction alone and waits for it (default 25)"),
    cl::init(25.0), cl::cat(parallelCategory));

cl::OptionCategory pipelineCategory(
    "Pipeline parallelism options (--mesh pp=N; --emit=partitioned, "
    "schedule, schedule-svg)");
cl::list<std::string> stageCuts(
    "stage-cuts",
    cl::desc("Where the stages start: a parameter name or prefix per cut, "
             "pp x virtual-stages - 1 of them, e.g. --stage-cuts h.1 starts "
             "stage 1 at the first op reading h.1.* (default: cuts that "
             "balance FLOPs where the fewest bytes cross)"),
    cl::value_desc("name,..."), cl::CommaSeparated, cl::cat(pipelineCategory));
cl::opt<std::string> schedule(
    "schedule",
    cl::desc("Pipeline schedule: gpipe (all forwards, then all backwards), "
             "1f1b (default: one forward, one backward; at most pp "
             "micro-batches in flight), interleaved (Megatron's, needs "
             "--virtual-stages 2 or more and micro-batches a multiple of "
             "pp) or zero-bubble (ZB-H1: weight gradients deferred into the "
             "bubbles)"),
    cl::value_desc("name"), cl::cat(pipelineCategory));
cl::opt<int64_t> virtualStages(
    "virtual-stages",
    cl::desc("Stages per pipeline rank, for --schedule interleaved "
             "(default 1): the model is cut into pp x this many stages, "
             "rank r running stages r, pp+r, ..."),
    cl::value_desc("V"), cl::cat(pipelineCategory));
cl::opt<int64_t> microBatches(
    "micro-batches",
    cl::desc("Micro-batches per step flowing through the pipeline: the "
             "model's batch is one micro-batch and a step's batch inputs "
             "grow by this factor: it is --accum-steps under another name "
             "(give one, or both equal) (default: --accum-steps, 1)"),
    cl::value_desc("M"), cl::cat(pipelineCategory));

cl::opt<std::string> cluster(
    "cluster",
    cl::desc("Cluster spec (YAML, docs/planner.md; examples/clusters/), or "
             "'local' (this machine, measured once by weft-profile-cluster "
             "and cached), that --emit=plan plans for; its peak FLOP/s and "
             "links also cost the schedule of --emit=schedule and "
             "schedule-svg (default there: an assumed 100 GFLOP/s per rank "
             "and 1 GB/s per link)"),
    cl::value_desc("file.yaml|local"), cl::cat(pipelineCategory));

cl::OptionCategory planCategory(
    "Planning options (--emit=plan|plan-json|plan-svg, --plan); --mesh, "
    "--zero, --schedule, --virtual-stages and --sequence-parallel pin "
    "those parts of a plan");
cl::opt<int> devices("devices",
                     cl::desc("Devices to plan for (default: all of "
                              "--cluster's)"),
                     cl::value_desc("N"), cl::init(0), cl::cat(planCategory));
cl::opt<int64_t> microBatchSize(
    "micro-batch-size",
    cl::desc("Samples per micro-batch on one rank. With --emit=plan it "
             "pins the plan's; when compiling, the model's batch (one "
             "micro-batch over the dp ranks) must be dp x B, or, with "
             "--input-shape giving the step's batch (a dynamic batch "
             "axis), the step is cut into micro-batches of B per rank"),
    cl::value_desc("B"), cl::init(0), cl::cat(planCategory));
cl::opt<std::string> planFile(
    "plan",
    cl::desc("Compile the layout of this plan file (weftc --emit=plan-json "
             "or weft-plan search --emit plan-json): its mesh, ZeRO stage, "
             "schedule, micro-batches and sequence parallelism"),
    cl::value_desc("plan.json"), cl::cat(planCategory));
cl::opt<int> planAlternative(
    "plan-alternative",
    cl::desc("With --plan: compile the plan's K-th alternative instead of "
             "its choice"),
    cl::value_desc("K"), cl::init(0), cl::cat(planCategory));

cl::OptionCategory codegenCategory(
    "Code generation options (--emit=linalg|memref|llvm|obj|exe)");
cl::opt<std::string>
    cpu("cpu",
        cl::desc("CPU to generate code for: default (x86-64-v3 on x86-64: "
                 "AVX2 and FMA, which every x86 server CPU since 2013 has; "
                 "the executable refuses to start on a CPU without them), "
                 "generic (any machine of the host's architecture), native "
                 "(this machine), or an LLVM CPU name"),
        cl::init("default"), cl::cat(codegenCategory));
cl::opt<std::string> deviceTarget(
    "target",
    cl::desc("Device the step runs on: cpu, or cuda (NVIDIA GPUs, sm_80 "
             "and newer: kernels as CUDA kernels, GEMMs through cuBLASLt; "
             "with --mesh dp/tp, one GPU per rank and collectives on NCCL; "
             "pp's transfers through host memory; needs the CUDA toolkit at "
             "/usr/local/cuda "
             "to compile and the NVIDIA driver to run; docs/gpu.md)"),
    cl::init("cpu"), cl::cat(codegenCategory));
cl::opt<bool> mergeSiblingKernels(
    "merge-sibling-kernels",
    cl::desc("Run independent neighbouring kernels, such as the optimizer "
             "update of every parameter, as one parallel loop; "
             "=false keeps one kernel each (same results, bit for bit)"),
    cl::init(true), cl::cat(codegenCategory));
cl::opt<bool> dumpKernelOutputs(
    "dump-kernel-outputs",
    cl::desc("Debugging: after each kernel call the step hands the buffers "
             "the kernel wrote to the runtime, which writes them as .npy "
             "files under $WEFT_DUMP_KERNELS for one step (to compare the "
             "kernels of two targets; docs/gpu.md). Implies "
             "--merge-sibling-kernels=false"),
    cl::init(false), cl::cat(codegenCategory));
cl::opt<unsigned> optLevel("O", cl::desc("LLVM optimization level 0-3"),
                           cl::init(2), cl::Prefix, cl::cat(codegenCategory));
cl::opt<std::string>
    runtimeDir("runtime-dir",
               cl::desc("Folder with libWeftRuntimeMain.a and libWeftRuntime.a "
                        "(default: next to weftc)"),
               cl::value_desc("dir"), cl::cat(codegenCategory));
cl::list<std::string> linkArgs("link-arg",
                               cl::desc("Extra argument for the link"),
                               cl::value_desc("arg"), cl::cat(codegenCategory));
cl::opt<double> embedWeightsLimit(
    "embed-weights-limit",
    cl::desc("Initial weights larger than this many MiB stay in a file "
             "beside the executable, <exe>.weights.safetensors, instead of "
             "inside it (default: no limit, always inside)"),
    cl::value_desc("MiB"), cl::init(0), cl::cat(codegenCategory));
cl::opt<bool> saveTemps("save-temps",
                        cl::desc("Keep the temporary folder with the object "
                                 "and weights (its path goes to stderr)"),
                        cl::init(false), cl::cat(codegenCategory));

void hideUnrelatedOptions() {
  const cl::OptionCategory *ours[] = {&weftcCategory, &trainCategory,
                                      &parallelCategory, &pipelineCategory,
                                      &planCategory, &codegenCategory};
  for (auto &entry : cl::getRegisteredOptions()) {
    cl::Option *option = entry.second;
    StringRef name = entry.first;
    bool ourCategory = false;
    for (const cl::OptionCategory *category : option->Categories)
      ourCategory |= llvm::is_contained(ours, category);
    // MLIR's pass-manager and printing flags work but are not Weft's: they
    // are listed by --help-hidden, after --help's own options.
    if (name.starts_with("mlir-") && !ourCategory)
      option->setHiddenFlag(cl::Hidden);
    else if (!ourCategory && name != "help" && name != "help-hidden" &&
             name != "version")
      option->setHiddenFlag(cl::ReallyHidden);
  }
}

/// Maps weftc's flags to the driver's and the training pipeline's options.
/// Returns false after printing an error for a value no option accepts.
bool mapOptions(DriverOptions &driver, TrainPipelineOptions &train,
                const char *argv0) {
  auto fail = [](const llvm::Twine &message) {
    llvm::errs() << "weftc: " << message << "\n";
    return false;
  };
  driver.argv0 = argv0;
  driver.input = inputFilename;
  driver.output = outputFilename;
  driver.emit = emit;
  driver.emitGiven = emit.getNumOccurrences() > 0;
  driver.inputShapes.assign(inputShapes.begin(), inputShapes.end());
  driver.frozen.assign(frozen.begin(), frozen.end());
  driver.weightsOut = weightsOut;
  driver.summary = summary;
  driver.mesh = mesh;
  driver.zero = zero;
  driver.shard.assign(shardParams.begin(), shardParams.end());
  driver.tpPlan = tpPlan;
  driver.sequenceParallel = sequenceParallel;
  driver.stageCuts.assign(stageCuts.begin(), stageCuts.end());
  if (schedule.getNumOccurrences())
    driver.schedule = schedule;
  if (virtualStages.getNumOccurrences())
    driver.virtualStages = virtualStages;
  driver.cluster = cluster;
  if (devices < 0 || microBatchSize < 0 || planAlternative < 0)
    return fail(std::string(devices < 0 ? "--devices" :
                            microBatchSize < 0 ? "--micro-batch-size"
                                               : "--plan-alternative") +
                " must be positive");
  driver.devices = devices;
  driver.microBatchSize = microBatchSize;
  driver.zeroGiven = zero.getNumOccurrences() > 0;
  driver.recomputeGiven = recompute.getNumOccurrences() > 0;
  driver.plan = planFile;
  driver.planAlternative = planAlternative;
  if (planAlternative && planFile.empty())
    return fail("--plan-alternative picks one of a plan file's plans: add "
                "--plan FILE");
  if (!(bucketMB >= 0) || bucketMB > 1e6)
    return fail("--bucket-mb must be a size in MiB >= 0, got " +
                std::to_string(double(bucketMB)));
  // A warning, not an error: scripts pass one set of flags for the
  // 1-rank and the N-rank build.
  if (bucketMB.getNumOccurrences() && mesh.empty())
    llvm::errs() << "weftc: warning: --bucket-mb has no effect without "
                    "--mesh (one rank has no collectives to group)\n";
  driver.bucketMB = bucketMB;
  if (batchNorm != "train" && batchNorm != "inference")
    return fail("--batchnorm must be train or inference, got '" + batchNorm +
                "'");
  driver.batchNormTrain = batchNorm == "train";
  if (runtimeHyperparameters != cl::BOU_UNSET)
    driver.runtimeHyperparameters = runtimeHyperparameters == cl::BOU_TRUE;
  driver.target.cpu = cpu;
  driver.target.optLevel = optLevel;
  driver.mergeSiblingKernels = mergeSiblingKernels;
  driver.dumpKernelOutputs = dumpKernelOutputs;
  driver.runtimeDir = runtimeDir;
  driver.linkArgs.assign(linkArgs.begin(), linkArgs.end());
  driver.saveTemps = saveTemps;
  if (!(embedWeightsLimit >= 0) || embedWeightsLimit > 1e12)
    return fail("--embed-weights-limit must be a size in MiB >= 0");
  if (embedWeightsLimit.getNumOccurrences())
    driver.embedWeightsLimit = uint64_t(embedWeightsLimit * 1048576.0);

  if (precision != "fp32" && precision != "bf16")
    return fail("--precision must be fp32 or bf16, got '" + precision + "'");
  train.precision = precision == "bf16" ? Precision::BF16 : Precision::FP32;
  train.loss = loss;
  train.optimizer = optimizer;
  train.momentum = momentum;
  train.nesterov = nesterov;
  train.weightDecay = weightDecay;
  train.beta1 = beta1;
  train.beta2 = beta2;
  train.eps = adamEps;
  train.clipNorm = clipNorm;
  train.accumSteps = accumSteps;
  // A pipeline's micro-batches are gradient accumulation's: one count.
  if (microBatches.getNumOccurrences()) {
    if (microBatches < 1)
      return fail("--micro-batches must be 1 or more, got " +
                  std::to_string(int64_t(microBatches)));
    if (accumSteps.getNumOccurrences() && accumSteps != microBatches)
      return fail("--micro-batches " + std::to_string(int64_t(microBatches)) +
                  " and --accum-steps " + std::to_string(int64_t(accumSteps)) +
                  " disagree: both are the micro-batches per step; give one "
                  "of them");
    train.accumSteps = microBatches;
    driver.microBatchesGiven = true;
  }
  train.lrSchedule = lrSchedule;
  train.warmupSteps = warmupSteps;
  train.totalSteps = totalSteps;
  train.minLrRatio = minLrRatio;
  if (recurrentActivations != "store" && recurrentActivations != "recompute" &&
      recurrentActivations != "auto")
    return fail("--recurrent-activations must be store, recompute or auto, "
                "got '" +
                recurrentActivations + "'");
  if (!(recurrentRecomputeMB >= 0))
    return fail("--recurrent-recompute-mb must be a size in MiB >= 0");
  train.recurrentActivations = recurrentActivations;
  train.recurrentRecomputeMB = recurrentRecomputeMB;
  if (fusedAttention != "auto" && fusedAttention != "on" &&
      fusedAttention != "off")
    return fail("--fused-attention must be auto, on or off, got '" +
                fusedAttention + "'");
  if (recompute != "none" && recompute != "selective" && recompute != "full")
    return fail("--recompute must be none, selective or full, got '" +
                recompute + "'");
  // With --plan the driver says the plan fixes them.
  if (!recomputeLayers.empty() && recompute == "none" && planFile.empty())
    return fail("--recompute-layers names layers to recompute: give "
                "--recompute=selective or full with it");
  train.recompute = recompute;
  for (const std::string &layer : recomputeLayers)
    train.recomputeLayers.push_back(layer);
  train.fusedAttention = fusedAttention;
  if (deviceTarget != "cpu" && deviceTarget != "cuda")
    return fail("--target must be cpu or cuda, got '" + deviceTarget + "'");
  driver.device = deviceTarget;
  // Both runtimes' attention kernels take bf16 as well as f32. The CUDA
  // ones take heads up to 128 wide in bf16 and 64 in f32 (whose tiles are
  // twice the bytes: lib/Runtime/CudaAttentionLayout.h); wider heads stay
  // unfused there.
  train.fusedAttentionBf16 = true;
  if (deviceTarget == "cuda")
    train.fusedAttentionMaxHeadDim =
        train.precision == Precision::BF16 ? 128 : 64;
  return true;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM y(argc, argv);
  registerAsmPrinterCLOptions();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerDefaultTimingManagerCLOptions();
  hideUnrelatedOptions();
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "weftc (Weft) " << getWeftVersion() << "\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "Weft: ahead-of-time compiler for training\n"
      "(MLIR's pass-manager flags, --mlir-print-ir-after-all, --mlir-timing "
      "and the rest, are listed by --help-hidden)\n\n"
      "  weftc model.onnx --emit=weft            print the imported model\n"
      "  weftc model.onnx --input-shape input=4x48 --emit=weft -o m.mlir\n"
      "  weftc model.onnx --emit=train --loss cross-entropy --optimizer adamw\n"
      "  weftc model.onnx -o train               a training executable\n"
      "  weftc model.onnx --mesh pp=2 --micro-batches 4 --emit=schedule\n"
      "                                          a pipeline's stages and "
      "schedule\n");

  DriverOptions driver;
  TrainPipelineOptions train;
  if (!mapOptions(driver, train, argv[0]))
    return 1;
  // The stage may still come from -o's extension; the dialects for code
  // generation are cheap to register either way.
  DialectRegistry registry;
  registerDriverDialects(registry, Stage::Exe);
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  ToolDiagnosticHandler diagnostics(&context, "weftc");
  // The failing op is named in the message; its generic dump is noise.
  context.printOpOnDiagnostic(false);
  return failed(runDriver(context, driver, train)) ? 1 : 0;
}
