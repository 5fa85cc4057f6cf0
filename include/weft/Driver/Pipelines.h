//===- Pipelines.h - The pass pipelines of the stage ladder -----*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weftc, weft-opt and the tests run the same pipeline code with the same
// options, so `weft-opt --pass-pipeline='builtin.module(
// weft-train-pipeline{optimizer=sgd momentum=0.9})'` prints what
// `weftc --emit=train --optimizer sgd --momentum 0.9` prints.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_DRIVER_PIPELINES_H
#define WEFT_DRIVER_PIPELINES_H

#include "weft/Codegen/Passes.h"
#include "weft/Transforms/Parallel/Passes.h"
#include "weft/Transforms/Train/Passes.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <string>

namespace weft {

struct ImportPipelineOptions
    : public mlir::PassPipelineOptions<ImportPipelineOptions> {
  Option<bool> training{
      *this, "training",
      llvm::cl::desc("Legalize the model in train mode, for a training step: "
                     "BatchNorm normalizes with batch statistics and returns "
                     "its running statistics' next values"),
      llvm::cl::init(false)};
};

/// Generic ONNX form -> clean weft dialect: legalize every node, then fold,
/// deduplicate, and turn parameters that cannot get a gradient into
/// buffers.
void buildImportPipeline(mlir::OpPassManager &pm,
                         const ImportPipelineOptions &options);

/// The precision the forward and backward passes compute in.
enum class Precision { FP32, BF16 };

/// How the forward model becomes a training step. Names and defaults are
/// those of the passes (--weft-attach-loss, --weft-optimizer) and of weftc's
/// flags.
struct TrainPipelineOptions
    : public mlir::PassPipelineOptions<TrainPipelineOptions> {
  Option<std::string> loss{
      *this, "loss",
      llvm::cl::desc("cross-entropy, mse, or none (the model outputs its "
                     "loss)"),
      llvm::cl::init("cross-entropy")};
  Option<Precision> precision{
      *this, "precision", llvm::cl::desc("Compute precision"),
      llvm::cl::init(Precision::FP32),
      llvm::cl::values(clEnumValN(Precision::FP32, "fp32", "f32 throughout"),
                       clEnumValN(Precision::BF16, "bf16",
                                  "bf16 compute, f32 master weights and "
                                  "optimizer state"))};
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("sgd or adamw"),
                                llvm::cl::init("adamw")};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<bool> nesterov{*this, "nesterov",
                        llvm::cl::desc("SGD Nesterov momentum"),
                        llvm::cl::init(false)};
  Option<double> weightDecay{
      *this, "weight-decay",
      llvm::cl::desc("Weight decay (< 0: 0 for sgd, 0.01 for adamw)"),
      llvm::cl::init(-1.0)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                     llvm::cl::init(1e-8)};
  Option<double> clipNorm{
      *this, "clip-norm",
      llvm::cl::desc("Clip gradients to this global norm (0: off)"),
      llvm::cl::init(0.0)};
  Option<int64_t> accumSteps{*this, "accum-steps",
                             llvm::cl::desc("Micro-batches per step"),
                             llvm::cl::init(1)};
  Option<std::string> lrSchedule{*this, "lr-schedule",
                                 llvm::cl::desc("constant, warmup or cosine"),
                                 llvm::cl::init("constant")};
  Option<int64_t> warmupSteps{*this, "warmup-steps",
                              llvm::cl::desc("Linear warmup steps"),
                              llvm::cl::init(0)};
  Option<int64_t> totalSteps{*this, "total-steps",
                             llvm::cl::desc("Steps of the cosine schedule"),
                             llvm::cl::init(0)};
  Option<double> minLrRatio{
      *this, "min-lr-ratio",
      llvm::cl::desc("Cosine floor as a fraction of the base learning rate"),
      llvm::cl::init(0.0)};
  Option<bool> runtimeHyperparameters{
      *this, "runtime-hyperparameters",
      llvm::cl::desc("Hyperparameters as hp.<name> inputs of the step"),
      llvm::cl::init(false)};
  Option<std::string> recurrentActivations{
      *this, "recurrent-activations",
      llvm::cl::desc("What LSTM/GRU backward passes read: store (the "
                     "forward stores the gates), recompute (the backward "
                     "recomputes them), or auto (recompute where an op's "
                     "gates exceed recurrent-recompute-mb)"),
      llvm::cl::init("auto")};
  Option<double> recurrentRecomputeMB{
      *this, "recurrent-recompute-mb",
      llvm::cl::desc("auto: recompute an LSTM/GRU whose stored gates exceed "
                     "this many MiB"),
      llvm::cl::init(64.0)};
  Option<std::string> recompute{
      *this, "recompute",
      llvm::cl::desc("What the backward recomputes instead of keeping "
                     "(--weft-recompute): none, selective (attention "
                     "scores and probabilities) or full (whole layers, "
                     "keeping each layer's input)"),
      llvm::cl::init("none")};
  ListOption<std::string> recomputeLayers{
      *this, "recompute-layers",
      llvm::cl::desc("Recompute only these layers (e.g. h.0,h.3)")};
  Option<std::string> fusedAttention{
      *this, "fused-attention",
      llvm::cl::desc("Attention chains as weft.attention "
                     "(--weft-fuse-attention): on, off, or auto (where one "
                     "head's T x S scores are large enough to pay)"),
      llvm::cl::init("auto")};
  Option<bool> fusedAttentionBf16{
      *this, "fused-attention-bf16",
      llvm::cl::desc("Fuse bf16 attention chains too (log-sum-exp in "
                     "f32)"),
      llvm::cl::init(false)};
  Option<int64_t> fusedAttentionMaxHeadDim{
      *this, "fused-attention-max-head-dim",
      llvm::cl::desc("Leave attention chains whose head is wider than this "
                     "(0: no limit)"),
      llvm::cl::init(0)};
};

/// Clean weft forward model -> @loss, @loss_grad and @train_step.
void buildTrainPipeline(mlir::OpPassManager &pm,
                        const TrainPipelineOptions &options);

/// Reference CPU lowering, for executing and checking lowered code (weftc's
/// driver builds its own, with fusion and kernels): weft -> linalg on
/// tensors, elementwise fusion, one-shot bufferization across function
/// boundaries, results to out-parameters, deallocation, loops, LLVM dialect.
/// Every function of the module ends up in the LLVM dialect.
struct ParallelPipelineOptions
    : public mlir::PassPipelineOptions<ParallelPipelineOptions> {
  Option<std::string> mesh{
      *this, "mesh",
      llvm::cl::desc("Mesh axes and sizes, e.g. dp=4 (data parallel over 4 "
                     "ranks)"),
      llvm::cl::init("")};
  Option<int64_t> zero{
      *this, "zero",
      llvm::cl::desc("ZeRO stage over dp: 0 none, 1 optimizer state, 2 and "
                     "gradients, 3 and parameters"),
      llvm::cl::init(0)};
  Option<double> bucketMB{
      *this, "bucket-mb",
      llvm::cl::desc("Most MiB one bucket of gradient reductions carries "
                     "(0: no buckets, each collective waits where it "
                     "stands)"),
      llvm::cl::init(25.0)};
  ListOption<std::string> shard{
      *this, "shard",
      llvm::cl::desc("Parameter layouts over tp, NAME=LAYOUT")};
  Option<std::string> tpPlan{
      *this, "tp-plan",
      llvm::cl::desc("megatron or manual: how parameters not given by "
                     "shard are split over tp"),
      llvm::cl::init("megatron")};
  Option<bool> sequenceParallel{
      *this, "sequence-parallel",
      llvm::cl::desc("Megatron sequence parallelism over tp"),
      llvm::cl::init(false)};
  Option<int64_t> pipelineRanks{
      *this, "pipeline-ranks",
      llvm::cl::desc("The module holds a pipeline's rank steps "
                     "(@train_step.rank<r>, --weft-pipeline-step) over this "
                     "many pp ranks: each is partitioned (0: one "
                     "@train_step)"),
      llvm::cl::init(0)};
};

/// Global training step -> the per-rank step of a mesh (weftc --mesh).
void buildParallelPipeline(mlir::OpPassManager &pm,
                           const ParallelPipelineOptions &options);

/// How a training step whose ops carry pipeline stages
/// (--weft-assign-stages ran on its model) becomes one step per pipeline
/// rank (weftc --mesh pp=N).
struct PipelineParallelOptions
    : public mlir::PassPipelineOptions<PipelineParallelOptions> {
  Option<int64_t> ranks{*this, "ranks",
                        llvm::cl::desc("Pipeline ranks (the pp axis)"),
                        llvm::cl::init(1)};
  Option<std::string> schedule{
      *this, "schedule",
      llvm::cl::desc("gpipe, 1f1b, interleaved or zero-bubble"),
      llvm::cl::init("1f1b")};
  Option<int64_t> virtualStages{
      *this, "virtual-stages",
      llvm::cl::desc("Stages per rank (interleaved: 2 or more)"),
      llvm::cl::init(1)};
};

/// Stage-tagged training step -> per-stage pieces of @loss_grad
/// (--weft-split-stages; for zero-bubble with each backward cut into its
/// input- and weight-gradient pieces) -> @train_step.rank<r> for each
/// pipeline rank, its work in schedule order with sends and receives
/// (--weft-pipeline-step).
void buildPipelineParallelPipeline(mlir::OpPassManager &pm,
                                   const PipelineParallelOptions &options);

void buildLowerToLLVMPipeline(mlir::OpPassManager &pm);

/// Where code generation stops: fused kernels on tensors, planned buffers
/// with BLAS calls, or the LLVM dialect ready for translation.
enum class CodegenStage { Kernels, Buffers, LLVM };

/// How the training step becomes native code (docs/codegen.md).
struct CodegenPipelineOptions
    : public mlir::PassPipelineOptions<CodegenPipelineOptions> {
  Option<std::string> entry{
      *this, "entry",
      llvm::cl::desc("The step function to compile; what it calls is "
                     "inlined and every other function dropped"),
      llvm::cl::init("train_step")};
  Option<CodegenStage> stopAfter{
      *this, "stop-after", llvm::cl::desc("Where to stop"),
      llvm::cl::init(CodegenStage::LLVM),
      llvm::cl::values(
          clEnumValN(CodegenStage::Kernels, "kernels",
                     "fused kernels on tensors (weftc --emit=linalg)"),
          clEnumValN(CodegenStage::Buffers, "buffers",
                     "planned buffers with BLAS calls (--emit=memref)"),
          clEnumValN(CodegenStage::LLVM, "llvm", "the LLVM dialect"))};
  Option<bool> mergeSiblingKernels{
      *this, "merge-sibling-kernels",
      llvm::cl::desc("Run independent neighbouring kernels (the optimizer "
                     "update of every parameter) as one parallel loop "
                     "(--weft-merge-sibling-kernels)"),
      llvm::cl::init(true)};
  Option<bool> dumpKernelOutputs{
      *this, "dump-kernel-outputs",
      llvm::cl::desc("After each kernel call, hand the buffers it wrote to "
                     "the runtime (--weft-dump-kernel-outputs; kernels "
                     "stay unmerged, as on a GPU, and a GPU's bf16 "
                     "products are rounded by their kernels, as on a CPU)"),
      llvm::cl::init(false)};
  Option<std::string> target{
      *this, "target",
      llvm::cl::desc("cpu, or cuda: kernels as gpu.launch, GEMMs through "
                     "cuBLASLt, one fatbin (docs/gpu.md)"),
      llvm::cl::init("cpu")};
};

/// weft training step -> LLVM dialect: select and inline the entry,
/// --weft-lower-to-linalg, --weft-fuse-kernels, one-shot bufferization
/// (results become out-parameters), --weft-linalg-to-blas,
/// --weft-plan-buffers, loops, and the LLVM dialect with bare-pointer
/// memref arguments for the entry.
void buildCodegenPipeline(mlir::OpPassManager &pm,
                          const CodegenPipelineOptions &options);

/// Registers the pipelines, with their options, as `weft-import-pipeline`,
/// `weft-train-pipeline`, `weft-parallel-pipeline`,
/// `weft-pipeline-parallel-pipeline`, `weft-lower-to-llvm-pipeline` and
/// `weft-codegen-pipeline`.
void registerWeftPipelines();

} // namespace weft

#endif // WEFT_DRIVER_PIPELINES_H
