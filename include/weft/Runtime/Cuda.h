//===- Cuda.h - The runtime's NVIDIA GPU: driver, memory, GEMMs -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// What an executable compiled with `weftc --target cuda` needs from the
// device, behind one small interface. The CUDA driver (libcuda.so.1) and
// cuBLASLt (libcublasLt.so.13) are loaded with dlopen when the first
// function here runs, so a CUDA executable starts on a machine without a GPU
// and says what it needs instead of failing in the dynamic loader, and CPU
// executables never depend on either library.
//
// All work is queued on one stream per process (the step stream): kernel
// launches (through the mgpu* entry points the generated host code calls),
// GEMMs, copies and fills run in queue order, so the step needs no
// synchronization inside; the trainer synchronizes once per step, when it
// reads the loss.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_CUDA_H
#define WEFT_RUNTIME_CUDA_H

#include "weft/Formats/HostArray.h"
#include "weft/Runtime/ModelABI.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace weft::rt::cuda {

/// The most tokens weft_rt_cuda_scatter_add_rows_f32 sorts (their keys fill
/// 128 KB of one block's shared memory).
constexpr int64_t kMaxScatterTokens = 16384;

/// Loads the driver, selects device `device` (0-based among the visible
/// devices), makes its primary context current on the calling thread and
/// creates the step stream. Idempotent for the same device. The error names
/// what is missing and the fix: no libcuda.so.1 ("this executable was
/// compiled for NVIDIA GPUs (weftc --target cuda) and needs the NVIDIA driver
/// ...; compile without --target cuda to train on the CPU"), no device, a
/// device index out of range, or a driver too old for the embedded code.
Status initialize(int device);
bool initialized();

/// Number of visible devices; 0 (not an error) without a driver or GPU.
int deviceCount();
/// "NVIDIA H200 (sm_90, 139.8 GiB)" for the initialized device.
std::string deviceDescription();

/// Device memory (cuMemAlloc: 256-byte aligned at least). Errors name the
/// byte count and the free memory the device reports.
Status allocate(size_t bytes, void **ptr);
void release(void *ptr);

/// Copies queued on the step stream. toHost waits for the copy (and so for
/// all work queued before it); toDevice returns once the source may be
/// reused (the host buffer is staged when it is not pinned).
Status copyToDevice(void *dst, const void *src, size_t bytes);
Status copyToHost(void *dst, const void *src, size_t bytes);
/// Waits for all work queued on the step stream; reports an error a kernel
/// or GEMM raised asynchronously, naming it.
Status synchronize();

/// The step stream (a CUstream), for WeftRuntimeContext::stream.
void *stream();

//===----------------------------------------------------------------------===//
// Overlapping the host (CudaAsync.cpp; the asynchronous copies in Cuda.cpp)
//===----------------------------------------------------------------------===//

/// Page-locked host memory: copies between it and the device run while the
/// host goes on. Errors name the byte count.
Status allocatePinned(size_t bytes, void **ptr);
void releasePinned(void *ptr);

/// Copies queued on the step stream that return at once: the host buffer
/// must be page-locked, and must stay unchanged (toDevice) or unread
/// (toHost) until the next synchronize().
Status copyToDeviceAsync(void *dst, const void *src, size_t bytes);
Status copyToHostAsync(void *dst, const void *src, size_t bytes);

/// The copy stream, beside the step stream: the next batch's copies run
/// while the step computes. copyAhead queues a copy from page-locked `src`;
/// stepWaitsForCopiesAhead makes work queued on the step stream from then
/// on wait for every copy queued ahead so far. The caller keeps `src`
/// unchanged, and `dst` unread by earlier steps, until that work ran.
Status copyAhead(void *dst, const void *src, size_t bytes);
Status stepWaitsForCopiesAhead();

/// Whether the step may be captured as a CUDA graph: not under
/// WEFT_CUDA_GRAPHS=0, nor under WEFT_CUDA_PROFILE, WEFT_CUDA_SYNC or
/// WEFT_DUMP_KERNELS, which time, wait for or read each operation as it
/// runs. `why` (if not null) gets the reason when not.
bool graphsAllowed(std::string *why = nullptr);
/// Captures into a graph what `queue` queues on the step stream (nothing
/// runs), instantiated for launchGraph. The graph replays the same
/// launches with the same arguments: the same pointers, so a step whose
/// buffers move needs a graph of its own. An error (an operation that
/// cannot be captured) leaves the stream as it was; the caller then runs
/// `queue` directly.
Status captureGraph(void (*queue)(void *), void *userData, void **graph);
/// Queues a captured step on the step stream.
Status launchGraph(void *graph);
void destroyGraph(void *graph);

} // namespace weft::rt::cuda

/* The device GEMMs the generated host code calls: the same contract as the
   CPU's weft_rt_sgemm family (Kernels.h: row-major, batch strides, stride 0
   broadcasts), on device pointers, through cuBLASLt with f32 accumulation,
   queued on the step stream. */
extern "C" {
void weft_rt_cuda_sgemm(int64_t batch, int32_t transA, int32_t transB,
                        int64_t m, int64_t n, int64_t k, const float *a,
                        int64_t lda, int64_t strideA, const float *b,
                        int64_t ldb, int64_t strideB, float *c, int64_t ldc,
                        int64_t strideC);
void weft_rt_cuda_sgemm_batch_sum(int64_t batch, int32_t transA, int32_t transB,
                                  int64_t m, int64_t n, int64_t k,
                                  const float *a, int64_t lda, int64_t strideA,
                                  const float *b, int64_t ldb, int64_t strideB,
                                  float *c, int64_t ldc);
void weft_rt_cuda_sgemm_accumulate(int32_t transA, int32_t transB, int64_t m,
                                   int64_t n, int64_t k, const float *a,
                                   int64_t lda, const float *b, int64_t ldb,
                                   float *c, int64_t ldc);
void weft_rt_cuda_sbgemm(int64_t batch, int32_t transA, int32_t transB,
                         int64_t m, int64_t n, int64_t k, const uint16_t *a,
                         int64_t lda, int64_t strideA, const uint16_t *b,
                         int64_t ldb, int64_t strideB, float *c, int64_t ldc,
                         int64_t strideC);
void weft_rt_cuda_sbgemm_bf16(int64_t batch, int32_t transA, int32_t transB,
                              int64_t m, int64_t n, int64_t k,
                              const uint16_t *a, int64_t lda, int64_t strideA,
                              const uint16_t *b, int64_t ldb, int64_t strideB,
                              uint16_t *c, int64_t ldc, int64_t strideC);

/* table[r] += updates[t] for each token t in order, r = ids[t] (negative
   ids counted from the end, then clamped into the table's rows): the
   embedding gradient, each element seeing its tokens' additions in token
   order as on the CPU (the same bits). The tokens are sorted by (row,
   token) in one block's shared memory first, so at most
   kMaxScatterTokens. Called where --weft-gpu-scatter-rows replaces the
   step's scatter-add kernel. */
void weft_rt_cuda_scatter_add_rows_f32(const int64_t *ids, int64_t tokens,
                                       float *table, int64_t rows,
                                       const float *updates, int64_t cols);
/* The same with bf16 updates, each widened to f32 before it is added. */
void weft_rt_cuda_scatter_add_rows_bf16(const int64_t *ids, int64_t tokens,
                                        float *table, int64_t rows,
                                        const uint16_t *updates, int64_t cols);

/* The same products plus a bias per column of C (n elements, C's type),
   added in cuBLASLt's epilogue to the f32 sum before C is rounded: C =
   op(A) op(B) + bias on every row of every matrix of the batch, beta 0.
   weft_rt_cuda_sgemm_bias is weft_rt_sgemm followed by an f32 bias add, bit
   for bit up to the order of the sum; weft_rt_cuda_sbgemm_bf16_bias rounds
   the biased f32 sum to bf16 once. Called where --weft-gpu-gemm-epilogue
   replaces a GEMM and the kernel adding its bias. */
void weft_rt_cuda_sgemm_bias(int64_t batch, int32_t transA, int32_t transB,
                             int64_t m, int64_t n, int64_t k, const float *a,
                             int64_t lda, int64_t strideA, const float *b,
                             int64_t ldb, int64_t strideB, const float *bias,
                             float *c, int64_t ldc, int64_t strideC);
void weft_rt_cuda_sbgemm_bias(int64_t batch, int32_t transA, int32_t transB,
                              int64_t m, int64_t n, int64_t k,
                              const uint16_t *a, int64_t lda, int64_t strideA,
                              const uint16_t *b, int64_t ldb, int64_t strideB,
                              const float *bias, float *c, int64_t ldc,
                              int64_t strideC);
void weft_rt_cuda_sbgemm_bf16_bias(int64_t batch, int32_t transA,
                                   int32_t transB, int64_t m, int64_t n,
                                   int64_t k, const uint16_t *a, int64_t lda,
                                   int64_t strideA, const uint16_t *b,
                                   int64_t ldb, int64_t strideB,
                                   const uint16_t *bias, uint16_t *c,
                                   int64_t ldc, int64_t strideC);

/* weft.attention and weft.attention_grad on the device: the arguments and
   results of the CPU's weft_rt_attention_f32 and weft_rt_attention_grad_f32
   (Attention.h) on device pointers, the bf16 versions with bf16 operands
   and results and an f32 log-sum-exp. Head dimensions d and dv up to 128
   (CudaAttention.cu; larger ones end the process naming the fix). Queued on
   the step stream; the same bits every run. */
void weft_rt_cuda_attention_f32(int64_t heads, int64_t t, int64_t s, int64_t d,
                                int64_t dv, float scale, int32_t causal,
                                const float *q, const float *k, const float *v,
                                float *out, float *lse);
void weft_rt_cuda_attention_bf16(int64_t heads, int64_t t, int64_t s, int64_t d,
                                 int64_t dv, float scale, int32_t causal,
                                 const uint16_t *q, const uint16_t *k,
                                 const uint16_t *v, uint16_t *out, float *lse);
void weft_rt_cuda_attention_grad_f32(int64_t heads, int64_t t, int64_t s,
                                     int64_t d, int64_t dv, float scale,
                                     int32_t causal, const float *dout,
                                     const float *q, const float *k,
                                     const float *v, const float *out,
                                     const float *lse, float *dq, float *dk,
                                     float *dvOut);
void weft_rt_cuda_attention_grad_bf16(int64_t heads, int64_t t, int64_t s,
                                      int64_t d, int64_t dv, float scale,
                                      int32_t causal, const uint16_t *dout,
                                      const uint16_t *q, const uint16_t *k,
                                      const uint16_t *v, const uint16_t *out,
                                      const float *lse, uint16_t *dq,
                                      uint16_t *dk, uint16_t *dvOut);

/* A mesh's collectives on device buffers: the arguments of Kernels.h's
   weft_rt_all_reduce_f32, ..., weft_rt_bucket_get_f32 on device pointers,
   run by NCCL on the group's own stream, ordered against the step stream
   by events (nothing waits on the host). Each group's communicator is made
   at its first collective. In WeftRuntimeNccl (CudaMeshCollectives.cpp),
   which weftc links into --target cuda executables compiled for a mesh. */
void weft_rt_cuda_all_reduce_f32(const WeftRuntimeContext *ctx,
                                 int64_t axisMask, const float *in, float *out,
                                 int64_t count);
void weft_rt_cuda_all_gather_f32(const WeftRuntimeContext *ctx,
                                 int64_t axisMask, const float *in, float *out,
                                 int64_t outer, int64_t inner);
void weft_rt_cuda_reduce_scatter_f32(const WeftRuntimeContext *ctx,
                                     int64_t axisMask, const float *in,
                                     float *out, int64_t outer, int64_t inner);
void weft_rt_cuda_all_to_all_f32(const WeftRuntimeContext *ctx,
                                 int64_t axisMask, const float *in, float *out,
                                 int64_t splitOuter, int64_t splitInner,
                                 int64_t concatOuter, int64_t concatInner);
void weft_rt_cuda_bucket_put_f32(const WeftRuntimeContext *ctx,
                                 int64_t axisMask, int64_t bucket, int64_t kind,
                                 int64_t region, int64_t offset,
                                 const float *in, int64_t outer, int64_t inner);
void weft_rt_cuda_bucket_start(const WeftRuntimeContext *ctx, int64_t axisMask,
                               int64_t bucket, int64_t kind, int64_t region);
void weft_rt_cuda_bucket_get_f32(const WeftRuntimeContext *ctx,
                                 int64_t axisMask, int64_t bucket,
                                 int64_t offset, float *out, int64_t outer,
                                 int64_t inner);
/* A pipeline's weft_rt_send_f32 and weft_rt_recv_f32 on device buffers:
   copied through pinned host memory (after the step stream's queued work,
   which the host waits for) and sent as on the host. */
void weft_rt_cuda_send_f32(const WeftRuntimeContext *ctx, int64_t axisMask,
                           const float *in, int64_t count, int64_t peer,
                           int64_t tag);
void weft_rt_cuda_recv_f32(const WeftRuntimeContext *ctx, int64_t axisMask,
                           float *out, int64_t count, int64_t peer,
                           int64_t tag);
}

/* The entry points MLIR 22's gpu-to-llvm lowering and gpu.binary translation
   make the generated host code call (the names and signatures are MLIR's;
   MLIR's CudaRuntimeWrappers library is not linked). Handles are opaque:
   a module is a blob recorded by mgpuModuleLoad and loaded on the first
   mgpuModuleGetFunction after initialize() (global constructors register
   modules before main); a function is the runtime's handle of a kernel and
   its name. mgpuStreamCreate returns the step stream, which
   mgpuStreamDestroy leaves alone; mgpuStreamSynchronize and the events do
   not wait (one in-order queue; the trainer synchronizes once per step).
   A driver error ends the process with a message naming the entry point,
   the kernel and the CUresult. See Cuda.cpp. */
extern "C" {
void *mgpuModuleLoad(void *data, size_t size);
void *mgpuModuleLoadJIT(void *ptx, int optLevel);
void mgpuModuleUnload(void *module);
void *mgpuModuleGetFunction(void *module, const char *name);
void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                      intptr_t gridZ, intptr_t blockX, intptr_t blockY,
                      intptr_t blockZ, int32_t sharedMemoryBytes, void *stream,
                      void **params, void **extra, size_t paramsCount);
void mgpuLaunchClusterKernel(void *function, intptr_t clusterX,
                             intptr_t clusterY, intptr_t clusterZ,
                             intptr_t gridX, intptr_t gridY, intptr_t gridZ,
                             intptr_t blockX, intptr_t blockY, intptr_t blockZ,
                             int32_t sharedMemoryBytes, void *stream,
                             void **params, void **extra);
void *mgpuStreamCreate(void);
void mgpuStreamDestroy(void *stream);
void mgpuStreamSynchronize(void *stream);
void mgpuStreamWaitEvent(void *stream, void *event);
void *mgpuEventCreate(void);
void mgpuEventDestroy(void *event);
void mgpuEventSynchronize(void *event);
void mgpuEventRecord(void *event, void *stream);
void *mgpuMemAlloc(uint64_t bytes, void *stream, bool isHostShared);
void mgpuMemFree(void *ptr, void *stream);
void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream);
void mgpuMemset32(void *dst, unsigned value, size_t count, void *stream);
void mgpuMemset16(void *dst, unsigned short value, size_t count, void *stream);
void mgpuSetDefaultDevice(int32_t device);
}

#endif // WEFT_RUNTIME_CUDA_H
