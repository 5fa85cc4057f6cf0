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

namespace weft {

/// Generic ONNX form -> clean weft dialect: legalize every node, then fold
/// and deduplicate.
void buildImportPipeline(mlir::OpPassManager &pm);

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

/// Registers the pipelines as `--weft-import-pipeline` etc. for weft-opt.
void registerWeftPipelines();

} // namespace weft

#endif // WEFT_PIPELINES_PIPELINES_H
