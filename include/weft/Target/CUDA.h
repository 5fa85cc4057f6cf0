//===- CUDA.h - The CUDA target of weftc --------------------------*- C++
//-*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// `weftc --target cuda` (docs/gpu.md): the step the CPU path plans and
// outlines runs its kernels as gpu.launch ops and its GEMMs through the
// runtime's cuBLASLt entry points; the kernels become one fatbin (cubins
// for each architecture plus PTX) that the executable carries and the
// runtime loads through the driver. The rest of the executable (the
// descriptor, the trainer, the link) is the CPU target's.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_CUDA_H
#define WEFT_TARGET_CUDA_H

#include "mlir/IR/Location.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace weft {

struct CudaTargetOptions {
  /// The CUDA toolkit: ptxas and fatbinary in bin/, libdevice in
  /// nvvm/libdevice/.
  std::string toolkit = "/usr/local/cuda";
  /// Architectures of the embedded cubins; PTX for `ptxArch` rides along.
  std::vector<std::string> archs = {"sm_90", "sm_80"};
  std::string ptxArch = "compute_80";
  /// Threads per block of a parallel loop's launch.
  int64_t blockSize = 256;
};

/// The GPU, NVVM and LLVM-translation dialects and interfaces the CUDA
/// pipeline and the translation of its output need.
void registerCudaDialects(mlir::DialectRegistry &registry);

/// Registers --weft-gpu-map-step, --weft-gpu-merge-modules,
/// --weft-gpu-fatbin and the upstream GPU passes (--gpu-kernel-outlining,
/// --gpu-module-to-binary, ...).
void registerCudaPasses();

/// Fails, after an error at `loc` naming the toolkit and the fix, unless
/// `toolkit`'s ptxas and fatbinary can be run.
mlir::LogicalResult checkCudaToolkit(const CudaTargetOptions &options,
                                     mlir::Location loc);

/// The planned, outlined step `entry` on buffers (the output of
/// weft-codegen-pipeline's buffer stage, without the CPU's row chunking) ->
/// the LLVM dialect: host code with gpu.binary and launches, GEMM calls to
/// the runtime's device versions.
void buildCudaLoweringPipeline(mlir::OpPassManager &pm, llvm::StringRef entry,
                               const CudaTargetOptions &options);

} // namespace weft

#endif // WEFT_TARGET_CUDA_H
