//===- CudaApi.h - The CUDA driver and cuBLASLt subset used -----*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Internal to the runtime's CUDA layer (Cuda.cpp, CudaBlas.cpp) and its
// tests; generated code and the trainer use Cuda.h.
//
// The runtime builds without the CUDA toolkit: the few types, constants and
// function signatures it needs from cuda.h and cublasLt.h (CUDA 13) are
// declared here, and the functions are looked up with dlsym. Handles are
// opaque pointers, enums plain ints with the headers' values. CudaTest.cpp
// checks every value, struct layout and versioned symbol name against the
// toolkit's headers where the build finds them.
//
// Also here: how a row-major GEMM of the weft_rt_sgemm contract maps onto
// cuBLASLt's column-major one, as a pure function the tests evaluate on the
// host.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_CUDAAPI_H
#define WEFT_RUNTIME_CUDAAPI_H

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::rt::cuda::api {

//===----------------------------------------------------------------------===//
// Driver API (cuda.h)
//===----------------------------------------------------------------------===//

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st *;
using CUmodule = struct CUmod_st *;
using CUfunction = struct CUfunc_st *;
using CUstream = struct CUstream_st *;
using CUmemoryPool = struct CUmemPoolHandle_st *;
using CUevent = struct CUevent_st *;
using CUgraph = struct CUgraph_st *;
using CUgraphExec = struct CUgraphExec_st *;

constexpr CUresult CUDA_SUCCESS = 0;
constexpr CUresult CUDA_ERROR_INVALID_VALUE = 1;
constexpr CUresult CUDA_ERROR_OUT_OF_MEMORY = 2;
constexpr CUresult CUDA_ERROR_DEINITIALIZED = 4;
constexpr CUresult CUDA_ERROR_NO_DEVICE = 100;
constexpr CUresult CUDA_ERROR_NO_BINARY_FOR_GPU = 209;
constexpr CUresult CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222;

constexpr unsigned CU_STREAM_NON_BLOCKING = 0x1;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75;
constexpr int CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76;
constexpr int CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97;
constexpr int CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115;
constexpr int CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2;
constexpr unsigned CU_MEMORYTYPE_HOST = 0x01;
constexpr int CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8;
constexpr int CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4;
constexpr int CU_JIT_ERROR_LOG_BUFFER = 5;
constexpr int CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;
constexpr int CU_JIT_OPTIMIZATION_LEVEL = 7;
constexpr int CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4;
constexpr unsigned CU_EVENT_DISABLE_TIMING = 0x2;
constexpr int CU_STREAM_CAPTURE_MODE_RELAXED = 2;

/// cuLaunchKernelEx's attribute: an id, padding to 8 bytes, and a 64-byte
/// value union of which a cluster launch uses the first three unsigned ints.
struct CUlaunchAttribute {
  int id;
  char pad[8 - sizeof(int)];
  union {
    char bytes[64];
    struct {
      unsigned x, y, z;
    } clusterDim;
  } value;
};
struct CUlaunchConfig {
  unsigned gridDimX, gridDimY, gridDimZ;
  unsigned blockDimX, blockDimY, blockDimZ;
  unsigned sharedMemBytes;
  CUstream hStream;
  CUlaunchAttribute *attrs;
  unsigned numAttrs;
};

/// The driver functions the runtime calls, with the symbol each is looked up
/// by: cuda.h maps several names to a versioned entry point (cuMemAlloc is
/// cuMemAlloc_v2; the unversioned symbols are the old 32-bit ABI), and the
/// table names the one the header's macro picks.
#define WEFT_CUDA_DRIVER_FUNCTIONS(X)                                          \
  X(cuInit, "cuInit", CUresult, unsigned)                                      \
  X(cuDriverGetVersion, "cuDriverGetVersion", CUresult, int *)                 \
  X(cuGetErrorName, "cuGetErrorName", CUresult, CUresult, const char **)       \
  X(cuGetErrorString, "cuGetErrorString", CUresult, CUresult, const char **)   \
  X(cuDeviceGetCount, "cuDeviceGetCount", CUresult, int *)                     \
  X(cuDeviceGet, "cuDeviceGet", CUresult, CUdevice *, int)                     \
  X(cuDeviceGetName, "cuDeviceGetName", CUresult, char *, int, CUdevice)       \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute", CUresult, int *, int,        \
    CUdevice)                                                                  \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2", CUresult, size_t *, CUdevice)     \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", CUresult,            \
    CUcontext *, CUdevice)                                                     \
  X(cuCtxSetCurrent, "cuCtxSetCurrent", CUresult, CUcontext)                   \
  X(cuCtxGetCurrent, "cuCtxGetCurrent", CUresult, CUcontext *)                 \
  X(cuStreamCreate, "cuStreamCreate", CUresult, CUstream *, unsigned)          \
  X(cuStreamSynchronize, "cuStreamSynchronize", CUresult, CUstream)            \
  X(cuMemAlloc, "cuMemAlloc_v2", CUresult, CUdeviceptr *, size_t)              \
  X(cuMemFree, "cuMemFree_v2", CUresult, CUdeviceptr)                          \
  X(cuMemGetInfo, "cuMemGetInfo_v2", CUresult, size_t *, size_t *)             \
  X(cuMemAllocAsync, "cuMemAllocAsync", CUresult, CUdeviceptr *, size_t,       \
    CUstream)                                                                  \
  X(cuMemFreeAsync, "cuMemFreeAsync", CUresult, CUdeviceptr, CUstream)         \
  X(cuDeviceGetDefaultMemPool, "cuDeviceGetDefaultMemPool", CUresult,          \
    CUmemoryPool *, CUdevice)                                                  \
  X(cuMemPoolSetAttribute, "cuMemPoolSetAttribute", CUresult, CUmemoryPool,    \
    int, void *)                                                               \
  X(cuPointerGetAttribute, "cuPointerGetAttribute", CUresult, void *, int,     \
    CUdeviceptr)                                                               \
  X(cuMemcpyAsync, "cuMemcpyAsync", CUresult, CUdeviceptr, CUdeviceptr,        \
    size_t, CUstream)                                                          \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", CUresult, CUdeviceptr,          \
    const void *, size_t, CUstream)                                            \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", CUresult, void *, CUdeviceptr,  \
    size_t, CUstream)                                                          \
  X(cuMemsetD16Async, "cuMemsetD16Async", CUresult, CUdeviceptr,               \
    unsigned short, size_t, CUstream)                                          \
  X(cuMemsetD32Async, "cuMemsetD32Async", CUresult, CUdeviceptr, unsigned,     \
    size_t, CUstream)                                                          \
  X(cuMemsetD2D16Async, "cuMemsetD2D16Async", CUresult, CUdeviceptr, size_t,   \
    unsigned short, size_t, size_t, CUstream)                                  \
  X(cuMemsetD2D32Async, "cuMemsetD2D32Async", CUresult, CUdeviceptr, size_t,   \
    unsigned, size_t, size_t, CUstream)                                        \
  X(cuModuleLoadData, "cuModuleLoadData", CUresult, CUmodule *, const void *)  \
  X(cuModuleLoadDataEx, "cuModuleLoadDataEx", CUresult, CUmodule *,            \
    const void *, unsigned, int *, void **)                                    \
  X(cuModuleUnload, "cuModuleUnload", CUresult, CUmodule)                      \
  X(cuModuleGetFunction, "cuModuleGetFunction", CUresult, CUfunction *,        \
    CUmodule, const char *)                                                    \
  X(cuFuncSetAttribute, "cuFuncSetAttribute", CUresult, CUfunction, int, int)  \
  X(cuLaunchKernel, "cuLaunchKernel", CUresult, CUfunction, unsigned,          \
    unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, CUstream,      \
    void **, void **)                                                          \
  X(cuLaunchKernelEx, "cuLaunchKernelEx", CUresult, const CUlaunchConfig *,    \
    CUfunction, void **, void **)                                              \
  X(cuEventCreate, "cuEventCreate", CUresult, CUevent *, unsigned)             \
  X(cuEventRecord, "cuEventRecord", CUresult, CUevent, CUstream)               \
  X(cuEventElapsedTime, "cuEventElapsedTime_v2", CUresult, float *, CUevent,   \
    CUevent)                                                                   \
  X(cuEventDestroy, "cuEventDestroy_v2", CUresult, CUevent)                    \
  X(cuStreamWaitEvent, "cuStreamWaitEvent", CUresult, CUstream, CUevent,       \
    unsigned)                                                                  \
  X(cuMemHostAlloc, "cuMemHostAlloc", CUresult, void **, size_t, unsigned)     \
  X(cuMemFreeHost, "cuMemFreeHost", CUresult, void *)                          \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2", CUresult, CUstream, int)  \
  X(cuStreamEndCapture, "cuStreamEndCapture", CUresult, CUstream, CUgraph *)   \
  X(cuGraphInstantiate, "cuGraphInstantiateWithFlags", CUresult,               \
    CUgraphExec *, CUgraph, unsigned long long)                                \
  X(cuGraphLaunch, "cuGraphLaunch", CUresult, CUgraphExec, CUstream)           \
  X(cuGraphExecDestroy, "cuGraphExecDestroy", CUresult, CUgraphExec)           \
  X(cuGraphDestroy, "cuGraphDestroy", CUresult, CUgraph)

//===----------------------------------------------------------------------===//
// cuBLASLt (cublasLt.h, cublas_api.h, library_types.h)
//===----------------------------------------------------------------------===//

using cublasStatus_t = int;
using cublasLtHandle_t = struct cublasLtContext *;
using cublasLtMatmulDesc_t = struct cublasLtMatmulDescOpaque *;
using cublasLtMatrixLayout_t = struct cublasLtMatrixLayoutOpaque *;
using cublasLtMatmulPreference_t = struct cublasLtMatmulPreferenceOpaque *;

constexpr cublasStatus_t CUBLAS_STATUS_SUCCESS = 0;
constexpr int CUDA_R_32F = 0;
constexpr int CUDA_R_16BF = 14;
constexpr int CUBLAS_COMPUTE_32F = 68;
constexpr int CUBLAS_OP_N = 0;
constexpr int CUBLAS_OP_T = 1;
constexpr int CUBLASLT_MATMUL_DESC_TRANSA = 3;
constexpr int CUBLASLT_MATMUL_DESC_TRANSB = 4;
constexpr int CUBLASLT_MATMUL_DESC_EPILOGUE = 7;
constexpr int CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8;
constexpr uint32_t CUBLASLT_EPILOGUE_DEFAULT = 1;
/// D = op(A) op(B) + bias, the bias (D's element type, one per row of
/// cuBLASLt's D: per column of the row-major C) added before D is rounded.
constexpr uint32_t CUBLASLT_EPILOGUE_BIAS = 4;
constexpr int CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5;
constexpr int CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6;
constexpr int CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7;
constexpr int CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8;

struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

#define WEFT_CUBLASLT_FUNCTIONS(X)                                             \
  X(cublasLtCreate, "cublasLtCreate", cublasStatus_t, cublasLtHandle_t *)      \
  X(cublasLtGetStatusName, "cublasLtGetStatusName", const char *,              \
    cublasStatus_t)                                                            \
  X(cublasLtGetStatusString, "cublasLtGetStatusString", const char *,          \
    cublasStatus_t)                                                            \
  X(cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate", cublasStatus_t,      \
    cublasLtMatmulDesc_t *, int, int)                                          \
  X(cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute",          \
    cublasStatus_t, cublasLtMatmulDesc_t, int, const void *, size_t)           \
  X(cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate", cublasStatus_t,  \
    cublasLtMatrixLayout_t *, int, uint64_t, uint64_t, int64_t)                \
  X(cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute",      \
    cublasStatus_t, cublasLtMatrixLayout_t, int, const void *, size_t)         \
  X(cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate",          \
    cublasStatus_t, cublasLtMatmulPreference_t *)                              \
  X(cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy",        \
    cublasStatus_t, cublasLtMatmulPreference_t)                                \
  X(cublasLtMatmulPreferenceSetAttribute,                                      \
    "cublasLtMatmulPreferenceSetAttribute", cublasStatus_t,                    \
    cublasLtMatmulPreference_t, int, const void *, size_t)                     \
  X(cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic",          \
    cublasStatus_t, cublasLtHandle_t, cublasLtMatmulDesc_t,                    \
    cublasLtMatrixLayout_t, cublasLtMatrixLayout_t, cublasLtMatrixLayout_t,    \
    cublasLtMatrixLayout_t, cublasLtMatmulPreference_t, int,                   \
    cublasLtMatmulHeuristicResult_t *, int *)                                  \
  X(cublasLtMatmul, "cublasLtMatmul", cublasStatus_t, cublasLtHandle_t,        \
    cublasLtMatmulDesc_t, const void *, const void *, cublasLtMatrixLayout_t,  \
    const void *, cublasLtMatrixLayout_t, const void *, const void *,          \
    cublasLtMatrixLayout_t, void *, cublasLtMatrixLayout_t,                    \
    const cublasLtMatmulAlgo_t *, void *, size_t, CUstream)

//===----------------------------------------------------------------------===//
// A row-major GEMM as cuBLASLt's column-major one
//===----------------------------------------------------------------------===//

/// One cuBLASLt matrix: its layout (column-major rows x cols, leading
/// dimension ld, batch stride in elements) and the operation applied to it.
struct LtOperand {
  int op = CUBLAS_OP_N;
  uint64_t rows = 0, cols = 0;
  int64_t ld = 0, batchStride = 0;
};

/// D = op(A) op(B) in cuBLASLt's terms, for the row-major call
/// C = op(a) op(b) of weft_rt_sgemm. A row-major r x c matrix with row
/// stride ld is, read column-major, its c x r transpose with leading
/// dimension ld; so C^T = op(b)^T op(a)^T is the product cuBLASLt computes,
/// with cuBLASLt's A the caller's b, its B the caller's a, and D = C read
/// as an n x m column-major matrix.
struct LtGemm {
  LtOperand a; ///< The caller's b.
  LtOperand b; ///< The caller's a.
  LtOperand c; ///< The caller's c (also D).
  uint64_t m = 0, n = 0, k = 0; ///< cuBLASLt's: D is m x n, n = caller's m.
  int64_t batch = 1;
};

/// The mapping above; pure. Sizes must be positive.
LtGemm mapRowMajorGemm(int64_t batch, bool transA, bool transB, int64_t m,
                       int64_t n, int64_t k, int64_t lda, int64_t strideA,
                       int64_t ldb, int64_t strideB, int64_t ldc,
                       int64_t strideC);

/// Whether cuBLASLt accepts the mapped GEMM as it is: every leading
/// dimension at least its layout's rows (a row-major operand's row stride at
/// least its row length) and the batch count an int32. Calls the weft_rt
/// contract allows beyond that (a row stride of 0 that broadcasts one row)
/// copy the operand densely first.
bool fitsCublasLt(const LtGemm &g);

} // namespace weft::rt::cuda::api

#endif // WEFT_RUNTIME_CUDAAPI_H
