//===- Pipelines.cpp - The pass pipelines of the stage ladder -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Driver/Pipelines.h"
#include "weft/Codegen/Passes.h"
#include "weft/Conversion/Passes.h"
#include "weft/Target/CUDA.h"
#include "weft/Transforms/Pipeline/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MathToLibm/MathToLibm.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/SCFToOpenMP/SCFToOpenMP.h"
#include "mlir/Conversion/OpenMPToLLVM/ConvertOpenMPToLLVM.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Conversion/MathToFuncs/MathToFuncs.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

namespace {

/// One-shot bufferization across function boundaries (identity layouts,
/// 64-byte aligned allocations), then results become out-parameters.
void addBufferizationPasses(OpPassManager &pm) {
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  bufferize.bufferAlignment = 64;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
}

/// Linalg on buffers -> loops -> the LLVM dialect. With `codegen` (weftc's
/// pipeline) each outlined kernel's scf.forall becomes an OpenMP
/// work-shared loop (docs/codegen.md, Threads), and the math ops left after
/// libm become functions (--convert-math-to-funcs).
void addLoopsToLLVMPasses(OpPassManager &pm, bool codegen) {
  pm.addNestedPass<func::FuncOp>(createConvertLinalgToLoopsPass());
  if (codegen)
    pm.addNestedPass<func::FuncOp>(weft::createPromoteAccumulatorsPass());
  // Kernels: f32 exp, tanh, erf, log... as inline polynomials, so that
  // their loops vectorize (--weft-approximate-math).
  if (codegen)
    pm.addNestedPass<func::FuncOp>(weft::createApproximateMathPass());
  if (codegen) {
    pm.addPass(createForallToParallelLoopPass());
    pm.addPass(createConvertSCFToOpenMPPass());
  }
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  // OpenMP wraps each parallel iteration in memref.alloca_scope, a
  // single-block region: lower it (and the memrefs) before scf.for becomes
  // blocks.
  if (codegen)
    pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createSCFToControlFlowPass());
  // bf16 <-> f32 conversions as integer arithmetic, so no runtime helper
  // is needed; transcendental math to LLVM intrinsics or libm calls.
  arith::ArithExpandOpsPassOptions expand;
  expand.includeBf16 = true;
  pm.addPass(arith::createArithExpandOpsPass(expand));
  pm.addPass(createConvertMathToLLVMPass());
  pm.addPass(createConvertMathToLibmPass());
  if (codegen)
    pm.addPass(createConvertMathToFuncs());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  if (codegen)
    pm.addPass(createConvertOpenMPToLLVMPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  // bf16 is storage only by now; as i16 it vectorizes on CPUs without
  // bfloat registers.
  if (codegen)
    pm.addPass(weft::createBf16StorageAsI16Pass());
  pm.addPass(createCanonicalizerPass());
  // After canonicalization, which folds the memref descriptors away: each
  // access's pointer is then a GEP chain from an argument.
  if (codegen)
    pm.addPass(weft::createScopeNoAliasAccessesPass());
}

} // namespace

void weft::buildImportPipeline(OpPassManager &pm,
                               const ImportPipelineOptions &options) {
  LegalizeOnnxPassOptions legalize;
  legalize.training = options.training;
  pm.addPass(createLegalizeOnnxPass(legalize));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createMarkBuffersPass());
}

void weft::buildTrainPipeline(OpPassManager &pm,
                              const TrainPipelineOptions &options) {
  if (options.precision == Precision::BF16)
    pm.addPass(createMixedPrecisionPass());
  // Before autodiff, so that the gradient is weft.attention_grad; after
  // mixed precision, whose bf16 chains only the CUDA kernels take.
  FuseAttentionPassOptions attention;
  attention.mode = options.fusedAttention;
  attention.bf16 = options.fusedAttentionBf16;
  attention.maxHeadDim = options.fusedAttentionMaxHeadDim;
  pm.addPass(createFuseAttentionPass(attention));
  AttachLossPassOptions loss;
  loss.kind = options.loss;
  pm.addPass(createAttachLossPass(loss));
  RecurrentActivationsPassOptions recurrent;
  recurrent.mode = options.recurrentActivations;
  recurrent.thresholdMB = options.recurrentRecomputeMB;
  pm.addPass(createRecurrentActivationsPass(recurrent));
  pm.addPass(createAutodiffPass());
  // On the gradient function alone, before the optimizer wraps it.
  if (options.recompute != "none") {
    RecomputePassOptions recompute;
    recompute.mode = options.recompute;
    recompute.layers.assign(options.recomputeLayers.begin(),
                            options.recomputeLayers.end());
    pm.addPass(createRecomputePass(recompute));
  }
  OptimizerPassOptions optimizer;
  optimizer.optimizer = options.optimizer;
  optimizer.momentum = options.momentum;
  optimizer.nesterov = options.nesterov;
  optimizer.weightDecay = options.weightDecay;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  optimizer.clipNorm = options.clipNorm;
  optimizer.accumSteps = options.accumSteps;
  optimizer.schedule = options.lrSchedule;
  optimizer.warmupSteps = options.warmupSteps;
  optimizer.totalSteps = options.totalSteps;
  optimizer.minLrRatio = options.minLrRatio;
  optimizer.runtimeHyperparameters = options.runtimeHyperparameters;
  pm.addPass(createOptimizerPass(optimizer));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void weft::buildParallelPipeline(OpPassManager &pm,
                                 const ParallelPipelineOptions &options) {
  ApplyMeshPassOptions apply;
  apply.mesh = options.mesh;
  apply.zero = options.zero;
  apply.shard.assign(options.shard.begin(), options.shard.end());
  apply.tpPlan = options.tpPlan;
  apply.sequenceParallel = options.sequenceParallel;
  pm.addPass(createApplyMeshPass(apply));
  // Partitioning sees the whole step in one function.
  pm.addPass(createInlinerPass());
  pm.addPass(createSymbolDCEPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // One step, or each pipeline rank's.
  SmallVector<std::string> entries;
  for (int64_t r = 0; r < options.pipelineRanks; ++r)
    entries.push_back("train_step.rank" + std::to_string(r));
  if (entries.empty())
    entries.push_back("train_step");
  for (const std::string &entry : entries) {
    PropagateShardingsPassOptions propagate;
    propagate.entry = entry;
    pm.addPass(createPropagateShardingsPass(propagate));
    PartitionPassOptions partition;
    partition.entry = entry;
    pm.addPass(createPartitionPass(partition));
  }
  pm.addPass(createCanonicalizerPass());
  // Two users wanting different layouts of one value may each gather it.
  pm.addPass(createCSEPass());
  BucketCollectivesPassOptions bucket;
  bucket.bucketMB = options.bucketMB;
  pm.addPass(createBucketCollectivesPass(bucket));
}

void weft::buildPipelineParallelPipeline(
    OpPassManager &pm, const PipelineParallelOptions &options) {
  // Zero-bubble runs a stage's input and weight gradients apart, so its
  // backward is cut into those two pieces.
  SplitStagesPassOptions split;
  split.splitBackward = options.schedule == "zero-bubble";
  pm.addPass(createSplitStagesPass(split));
  PipelineStepPassOptions step;
  step.ranks = options.ranks;
  step.schedule = options.schedule;
  step.virtualStages = options.virtualStages;
  pm.addPass(createPipelineStepPass(step));
}

void weft::buildLowerToLLVMPipeline(OpPassManager &pm) {
  pm.addPass(createLowerToLinalgPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createLinalgElementwiseOpFusionPass());

  addBufferizationPasses(pm);
  bufferization::buildBufferDeallocationPipeline(pm);
  addLoopsToLLVMPasses(pm, /*codegen=*/false);
}

void weft::buildCodegenPipeline(OpPassManager &pm,
                                const CodegenPipelineOptions &options) {
  using Stage = CodegenStage;
  // One entry: the step; what it calls is inlined (once lowered: weft ops
  // have no inliner interface), the rest dropped.
  SelectEntryPassOptions select;
  select.entry = options.entry;
  pm.addPass(createSelectEntryPass(select));
  pm.addPass(createSymbolDCEPass());
  // A partitioned step's collectives become runtime calls through the
  // context argument while the step is still weft on tensors.
  LowerCollectivesPassOptions collectives;
  collectives.entry = options.entry;
  pm.addPass(createLowerCollectivesPass(collectives));
  // On the per-rank step: batched GEMMs with a 2-D side become one GEMM
  // (before partitioning, its reshapes would need sharding rules). On a GPU
  // bf16 weight gradients too, rounded once instead of per batch element:
  // the batched form writes and sums a [B, K, N] tensor (GPT-2's logits
  // gradient: 617 MB), and cuBLASLt runs the stacked shape fastest. A
  // build whose kernels are dumped keeps the CPU's, to be compared.
  FoldBatchIntoGemmPassOptions fold;
  fold.narrow = options.target == "cuda" && !options.dumpKernelOutputs;
  pm.addNestedPass<func::FuncOp>(createFoldBatchIntoGemmPass(fold));
  pm.addPass(createLowerToLinalgPass());
  pm.addPass(createInlinerPass());
  pm.addPass(createSymbolDCEPass());

  // Kernels on tensors.
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  // On a GPU a bf16 product's rounding pass is a whole tensor written and
  // read again (GPT-2 124M, H100: 98 -> 81 ms a step without it); on the
  // CPU it is cheap next to weft_rt_sbgemm_bf16's per-product rounding
  // (the bench GPT's bf16 step 3 % slower with the fold). A build whose
  // kernels are dumped keeps the CPU's kernels, to be compared with them.
  if (options.target == "cuda" && !options.dumpKernelOutputs)
    pm.addNestedPass<func::FuncOp>(createFoldGemmRoundingPass());
  pm.addNestedPass<func::FuncOp>(createFuseKernelsPass());
  // No CSE from here on: it would merge the per-GEMM zero fills again.
  pm.addPass(createCanonicalizerPass());
  if (options.stopAfter == Stage::Kernels)
    return;

  // Buffers: results become out-parameters written in place, GEMMs call
  // BLAS, intermediates are placed in the workspace. Each kernel first gets
  // a destination of its own, so that the buffer plan sees each value's
  // lifetime rather than one buffer per shape that CSE made.
  pm.addNestedPass<func::FuncOp>(createSplitEmptyTensorsPass());
  addBufferizationPasses(pm);
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createLinalgToBlasPass());
  pm.addNestedPass<func::FuncOp>(createLowerCopiesPass());
  // The optimizer's per-parameter kernels (and other independent
  // neighbours) as one parallel loop, before its rows are chunked.
  // Both group a kernel's rows for a few CPU threads; a GPU wants them all.
  bool cuda = options.target == "cuda";
  // Dumped kernels stay the ones a GPU runs, so that dumps of both
  // targets compare kernel by kernel.
  if (options.mergeSiblingKernels && !cuda && !options.dumpKernelOutputs)
    pm.addPass(createMergeSiblingKernelsPass());
  if (!cuda)
    pm.addPass(createChunkParallelLoopsPass());
  PlanBuffersPassOptions plan;
  plan.function = options.entry;
  pm.addPass(createPlanBuffersPass(plan));
  OutlineKernelsPassOptions outline;
  outline.function = options.entry;
  pm.addPass(createOutlineKernelsPass(outline));
  if (options.dumpKernelOutputs) {
    DumpKernelOutputsPassOptions dump;
    dump.function = options.entry;
    pm.addPass(createDumpKernelOutputsPass(dump));
  }
  pm.addPass(createReassociateReductionsPass());
  if (!cuda) {
    MarkDisjointArgsPassOptions disjoint;
    disjoint.function = options.entry;
    pm.addPass(createMarkDisjointArgsPass(disjoint));
  }
  if (options.stopAfter == Stage::Buffers)
    return;

  if (cuda) {
    buildCudaLoweringPipeline(pm, options.entry, CudaTargetOptions());
    return;
  }
  // Loops and the LLVM dialect. The entry is marked `llvm.bareptr`
  // (--weft-select-entry): it takes one pointer per buffer, which is what the
  // descriptor's trainStep wrapper passes. Kernels take memref descriptors.
  addLoopsToLLVMPasses(pm, /*codegen=*/true);
}

void weft::registerWeftPipelines() {
  PassPipelineRegistration<ImportPipelineOptions>(
      "weft-import-pipeline",
      "Legalize imported ONNX nodes into clean weft IR (weftc --emit=weft)",
      buildImportPipeline);
  PassPipelineRegistration<TrainPipelineOptions>(
      "weft-train-pipeline",
      "Forward model -> training step (weftc --emit=train)",
      buildTrainPipeline);
  PassPipelineRegistration<ParallelPipelineOptions>(
      "weft-parallel-pipeline",
      "Training step -> per-rank step of a mesh (weftc --emit=partitioned)",
      buildParallelPipeline);
  PassPipelineRegistration<PipelineParallelOptions>(
      "weft-pipeline-parallel-pipeline",
      "Stage-tagged training step -> one step per pipeline rank (weftc "
      "--mesh pp=N --emit=partitioned)",
      buildPipelineParallelPipeline);
  PassPipelineRegistration<>(
      "weft-lower-to-llvm-pipeline",
      "Reference CPU lowering: weft -> linalg -> bufferization -> LLVM",
      [](OpPassManager &pm) { buildLowerToLLVMPipeline(pm); });
  PassPipelineRegistration<CodegenPipelineOptions>(
      "weft-codegen-pipeline",
      "weftc's code generation: @train_step -> fused kernels -> buffers "
      "with BLAS calls and a planned workspace -> LLVM dialect",
      buildCodegenPipeline);
}
