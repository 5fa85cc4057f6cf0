//===- CudaTarget.cpp - The CUDA lowering pipeline and its dialects -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Codegen/Passes.h"
#include "weft/Target/CUDA.h"
#include "weft/Target/CUDA/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/GPUCommon/GPUCommonPass.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

#include "llvm/Support/FileSystem.h"

using namespace mlir;

void weft::registerCudaDialects(DialectRegistry &registry) {
  registry.insert<gpu::GPUDialect, NVVM::NVVMDialect>();
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  gpu::registerOffloadingLLVMTranslationInterfaceExternalModels(registry);
  // --gpu-to-llvm converts what it finds through these interfaces.
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
}

void weft::registerCudaPasses() {
  registerWeftCudaPasses();
  // The upstream passes of the pipeline, for tests that run its steps.
  registerGPUPasses();
}

LogicalResult weft::checkCudaToolkit(const CudaTargetOptions &options,
                                     Location loc) {
  for (const char *tool : {"ptxas", "fatbinary"}) {
    std::string path = options.toolkit + "/bin/" + tool;
    if (!llvm::sys::fs::can_execute(path))
      return emitError(loc) << "--target cuda needs the CUDA toolkit (12.0 "
                               "or newer) for its assembler: "
                            << path
                            << " is missing; install the toolkit under "
                               "/usr/local/cuda, or leave out --target cuda "
                               "to compile for the CPU";
  }
  return success();
}

void weft::buildCudaLoweringPipeline(OpPassManager &pm, StringRef entry,
                                     const CudaTargetOptions &options) {
  GpuMapStepPassOptions map;
  map.function = entry.str();
  map.blockSize = options.blockSize;
  // Before the mapping: the bias kernels are still linalg, and the GEMMs
  // the CPU's names.
  GpuGemmEpiloguePassOptions epilogue;
  epilogue.function = entry.str();
  pm.addPass(createGpuGemmEpiloguePass(epilogue));
  GpuScatterRowsPassOptions scatter;
  scatter.function = entry.str();
  pm.addPass(createGpuScatterRowsPass(scatter));
  pm.addPass(createGpuSplitRowsPass());
  pm.addPass(createGpuMapStepPass(map));
  pm.addPass(createCanonicalizerPass());
  // Kernel numerics as on the CPU: accumulators in registers, the same
  // polynomial exp/tanh/erf/log (docs/gpu.md, Numerics).
  pm.addNestedPass<func::FuncOp>(createPromoteAccumulatorsPass());
  pm.addNestedPass<func::FuncOp>(createApproximateMathPass());
  // Constants into the kernels: loop bounds and strides become immediates,
  // so a division by a row length is a multiply and shift, not a 64-bit
  // division by a kernel parameter.
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  pm.addPass(createGpuMergeModulesPass());

  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  // bf16 conversions stay conversions: sm_80 and newer round f32 to bf16
  // in one instruction (cvt.rn.bf16.f32, round to nearest even as the
  // CPU's integer expansion), where that expansion is about ten integer
  // ops per rounding, which made bf16 element-wise kernels with a rounding
  // per op (GELU's) arithmetic-bound.
  pm.addPass(arith::createArithExpandOpsPass());
  // PTX for the oldest architecture; ptxas compiles it for each.
  GpuNVVMAttachTargetOptions attach;
  attach.chip = "sm_" + options.ptxArch.substr(strlen("compute_"));
  attach.features = "+ptx80";
  attach.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(attach));
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.indexBitwidth = 64;
  pm.addNestedPass<gpu::GPUModuleOp>(createConvertGpuOpsToNVVMOps(nvvm));
  pm.addNestedPass<gpu::GPUModuleOp>(createCanonicalizerPass());
  pm.addNestedPass<gpu::GPUModuleOp>(createReconcileUnrealizedCastsPass());

  // The host: address arithmetic, GEMM calls and launches.
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  pm.addPass(createArithToLLVMConversionPass());
  pm.addPass(createConvertControlFlowToLLVMPass());
  pm.addPass(createConvertFuncToLLVMPass());
  pm.addPass(createGpuToLLVMConversionPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
  pm.addPass(createCanonicalizerPass());

  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = options.toolkit;
  binary.compilationTarget = "isa";
  pm.addPass(createGpuModuleToBinaryPass(binary));
  GpuFatbinPassOptions fatbin;
  fatbin.toolkit = options.toolkit;
  fatbin.archs.assign(options.archs.begin(), options.archs.end());
  fatbin.ptxArch = options.ptxArch;
  pm.addPass(createGpuFatbinPass(fatbin));
}
