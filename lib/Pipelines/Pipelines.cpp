//===- Pipelines.cpp - Pass pipelines shared by the tools -----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Pipelines/Pipelines.h"
#include "weft/Conversion/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void weft::buildImportPipeline(OpPassManager &pm) {
  pm.addPass(createLegalizeOnnxPass());
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  pm.addPass(createMarkBuffersPass());
}

void weft::buildTrainPipeline(OpPassManager &pm,
                              const TrainPipelineOptions &options) {
  if (options.bf16)
    pm.addPass(createMixedPrecisionPass());
  pm.addPass(createAttachLossPass(options.loss));
  pm.addPass(createAutodiffPass());
  pm.addPass(createOptimizerPass(options.optimizer));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
}

void weft::registerWeftPipelines() {
  PassPipelineRegistration<>(
      "weft-import-pipeline",
      "Legalize imported ONNX nodes into clean weft IR",
      [](OpPassManager &pm) { buildImportPipeline(pm); });
  PassPipelineRegistration<>(
      "weft-train-pipeline",
      "Forward model -> training step with cross-entropy and AdamW defaults",
      [](OpPassManager &pm) { buildTrainPipeline(pm, {}); });
}
