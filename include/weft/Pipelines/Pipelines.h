//===- Pipelines.h - Pass pipelines shared by the tools -----------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weftc, weft-opt and the tests run the same pipeline code, so a stage
// behaves the same whichever tool drives it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PIPELINES_PIPELINES_H
#define WEFT_PIPELINES_PIPELINES_H

#include "weft/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

#include <string>

namespace weft {

/// Generic ONNX form -> clean weft dialect: legalize every node, then fold
/// and deduplicate. `training` legalizes the model in train mode (BatchNorm
/// with batch statistics, running statistics as results), for a training
/// step; otherwise it is the model in eval mode.
void buildImportPipeline(mlir::OpPassManager &pm, bool training = false);

/// How the forward model becomes a training step.
struct TrainPipelineOptions {
  AttachLossPassOptions loss;
  OptimizerPassOptions optimizer;
  /// Run the forward (and so backward) pass in bf16 with f32 master weights.
  bool bf16 = false;
};

/// Clean weft forward model -> @loss, @loss_grad and @train_step.
void buildTrainPipeline(mlir::OpPassManager &pm,
                        const TrainPipelineOptions &options);

/// Reference CPU lowering, for executing and checking lowered code (weftc's
/// driver builds its own, with fusion and kernels): weft -> linalg on
/// tensors, elementwise fusion, one-shot bufferization across function
/// boundaries, results to out-parameters, deallocation, loops, LLVM dialect.
/// Every function of the module ends up in the LLVM dialect.
void buildLowerToLLVMPipeline(mlir::OpPassManager &pm);

/// How the training step becomes native code (docs/codegen.md).
struct CodegenPipelineOptions {
  /// The step function to compile; the functions it calls are inlined and
  /// every other function is dropped.
  std::string entry = "train_step";
  /// Where to stop: fused kernels on tensors, planned buffers with BLAS
  /// calls, or the LLVM dialect ready for translation.
  enum class Stage { Kernels, Buffers, LLVM };
  Stage stopAfter = Stage::LLVM;
};

/// weft training step -> LLVM dialect: select and inline the entry,
/// --weft-lower-to-linalg, --weft-fuse-kernels, one-shot bufferization
/// (results become out-parameters), --weft-linalg-to-blas,
/// --weft-plan-buffers, loops, and the LLVM dialect with bare-pointer
/// memref arguments for the entry.
void buildCodegenPipeline(mlir::OpPassManager &pm,
                          const CodegenPipelineOptions &options = {});

/// Registers the pipelines as `--weft-import-pipeline` etc. for weft-opt.
void registerWeftPipelines();

} // namespace weft

#endif // WEFT_PIPELINES_PIPELINES_H
