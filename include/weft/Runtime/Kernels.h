/*===- Kernels.h - Runtime kernels that generated code calls --------------===*\
|*                                                                            *|
|* Part of the Weft project.                                                  *|
|*                                                                            *|
|* Generated code calls these by name with plain C arguments; they wrap       *|
|* libraries (OpenBLAS) the compiler should not re-implement.                 *|
\*===----------------------------------------------------------------------===*/

#ifndef WEFT_RUNTIME_KERNELS_H
#define WEFT_RUNTIME_KERNELS_H

#include "weft/Runtime/ModelABI.h"

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* For b in [0, batch): C_b = op(A_b) * op(B_b), row-major, where op
   transposes when trans* != 0 and X_b = X + b * strideX (a stride of 0
   broadcasts one matrix over the batch). C is overwritten (beta = 0).
   m x k = op(A), k x n = op(B), m x n = C; lda/ldb/ldc are the row strides of
   A, B and C as stored. Computed by oneDNN's dnnl_sgemm where libdnnl.so.2
   loads (its JIT picks the CPU's kernels), else OpenBLAS's cblas_sgemm;
   WEFT_RT_GEMM=onednn or openblas forces one. */
void weft_rt_sgemm(int64_t batch, int32_t transA, int32_t transB, int64_t m,
                   int64_t n, int64_t k, const float *a, int64_t lda,
                   int64_t strideA, const float *b, int64_t ldb,
                   int64_t strideB, float *c, int64_t ldc, int64_t strideC);

/* C = the sum over b in [0, batch) of op(A_b) * op(B_b), with the operands
   of weft_rt_sgemm and one m x n C (row stride ldc), overwritten: a
   batch-reduce GEMM, as a convolution's filter gradient sums per-image
   products (dW = sum over n of dY_n * cols_n^T). The first product is
   written with beta = 0 and each next one added with beta = 1, in batch
   order, on the same library as weft_rt_sgemm; batch <= 0 gives zeros. */
void weft_rt_sgemm_batch_sum(int64_t batch, int32_t transA, int32_t transB,
                             int64_t m, int64_t n, int64_t k, const float *a,
                             int64_t lda, int64_t strideA, const float *b,
                             int64_t ldb, int64_t strideB, float *c,
                             int64_t ldc);

/* C += op(A) * op(B) (beta = 1), one matrix, operands as weft_rt_sgemm's;
   k <= 0 leaves C as it was. */
void weft_rt_sgemm_accumulate(int32_t transA, int32_t transB, int64_t m,
                              int64_t n, int64_t k, const float *a, int64_t lda,
                              const float *b, int64_t ldb, float *c,
                              int64_t ldc);

/* "oneDNN" or "OpenBLAS": the library weft_rt_sgemm multiplies with in
   this process (chosen on the first call of either function). */
const char *weft_rt_gemm_library(void);

/* Threads of the calling thread's next GEMMs: OpenBLAS's and, where
   oneDNN multiplies, the OpenMP team it runs on. Executables set them
   once through the runtime context; weft-profile-cluster sets 1. */
void weft_rt_set_gemm_threads(int threads);

/// Runs each f32 product kind once on small matrices with the configured
/// threads, so that the GEMM library's code and buffers and the OpenMP
/// team exist before the executable measures its baseline memory.
void weft_rt_warm_up(void);

/* The same product on bf16 A and B (uint16_t: the upper half of an f32),
   multiplied and summed in f32, into f32 C: OpenBLAS's cblas_sbgemm where
   the loaded OpenBLAS has it, else oneDNN's bf16 GEMM where libdnnl.so.2
   can be loaded, else cblas_sgemm on A and B widened to f32 in a
   per-thread scratch (the same result). WEFT_RT_BF16_GEMM=sbgemm, onednn
   or f32 restricts the choice. */
void weft_rt_sbgemm(int64_t batch, int32_t transA, int32_t transB, int64_t m,
                    int64_t n, int64_t k, const uint16_t *a, int64_t lda,
                    int64_t strideA, const uint16_t *b, int64_t ldb,
                    int64_t strideB, float *c, int64_t ldc, int64_t strideC);
/* As weft_rt_sbgemm, into bf16 C: each f32 result is rounded to nearest,
   ties to even (as arith.truncf). Each f32 matrix goes through a scratch
   buffer of the calling thread, grown to the largest m * n and reused. */
void weft_rt_sbgemm_bf16(int64_t batch, int32_t transA, int32_t transB,
                         int64_t m, int64_t n, int64_t k, const uint16_t *a,
                         int64_t lda, int64_t strideA, const uint16_t *b,
                         int64_t ldb, int64_t strideB, uint16_t *c,
                         int64_t ldc, int64_t strideC);

/* The collectives of a partitioned step (--weft-lower-collectives), on the
   communicators the runtime put in `ctx` (WeftRuntimeContext::axes).
   `axisMask` names the mesh axes of the group: bit i is ctx->axes[i]; the
   group is the ranks sharing this rank's coordinates on every other axis,
   numbered row-major over the mask's axes. Buffers are f32, dense, and
   `in` and `out` do not overlap. A failure (a timeout, a dead peer) prints
   an error naming the collective, the axes and the rank, and exits the
   process with status 1: a rank that went on would desynchronize the
   others. */

/* out[i] = the sum over the group of in[i], for i in [0, count). */
void weft_rt_all_reduce_f32(const WeftRuntimeContext *ctx, int64_t axisMask,
                            const float *in, float *out, int64_t count);
/* Concatenation along a dim: in is [outer][inner], out is
   [outer][groupSize][inner] with out[o][g][i] = in of rank g [o][i]. */
void weft_rt_all_gather_f32(const WeftRuntimeContext *ctx, int64_t axisMask,
                            const float *in, float *out, int64_t outer,
                            int64_t inner);
/* Sum, then this rank's block along a dim: in is [outer][groupSize][inner],
   out is [outer][inner] with out[o][i] = sum over ranks g of in_g[o][r][i],
   r this rank's index in the group. */
void weft_rt_reduce_scatter_f32(const WeftRuntimeContext *ctx,
                                int64_t axisMask, const float *in, float *out,
                                int64_t outer, int64_t inner);
/* Moves a split from one dim to another: rank r sends block g of its
   input (split along one dim into groupSize blocks) to rank g, and its
   output is the blocks it receives, concatenated in rank order along
   another dim. Every block has splitOuter * splitInner =
   concatOuter * concatInner elements: in is
   [splitOuter][groupSize][splitInner], out is
   [concatOuter][groupSize][concatInner] with out[o][g][i] = the block rank
   g sent to r, as [concatOuter][concatInner]; that block is
   [splitOuter][splitInner] = in of rank g [.][r][.]. */
void weft_rt_all_to_all_f32(const WeftRuntimeContext *ctx, int64_t axisMask,
                            const float *in, float *out, int64_t splitOuter,
                            int64_t splitInner, int64_t concatOuter,
                            int64_t concatInner);
/* Point to point (weft.send, weft.recv), for pipeline stages: `count`
   floats go from this rank to the group's rank `peer` (its index in the
   group of `axisMask`, row-major over the mask's axes; its coordinates on
   the other axes are this rank's), where the recv from this rank with the
   same `tag` takes them. Both block until the transfer is done
   (weft::rt::Communicator::send): a send returns once the peer has posted
   its recv. A peer outside the group or this rank itself, a tag above
   WEFT_RT_MAX_TAG, a send and its recv of different sizes, and a peer
   that does not answer within the timeout end the process with an error
   naming both ranks, the tag and the byte count. */
#define WEFT_RT_MAX_TAG ((int64_t)0xFFFFFFFFFFFF) /* 2^48 - 1 */
void weft_rt_send_f32(const WeftRuntimeContext *ctx, int64_t axisMask,
                      const float *in, int64_t count, int64_t peer,
                      int64_t tag);
void weft_rt_recv_f32(const WeftRuntimeContext *ctx, int64_t axisMask,
                      float *out, int64_t count, int64_t peer, int64_t tag);
/* This rank's index in the group of `axisMask` (row-major over its axes):
   which block weft.shard_slice keeps. */
int64_t weft_rt_axis_index(const WeftRuntimeContext *ctx, int64_t axisMask);

/* A bucket of collectives over the group of `axisMask` (weft.bucket, see
   --weft-bucket-collectives): its members' inputs are put into one flat
   buffer, one collective runs on it on the group's communication thread
   while the step goes on, and get waits for it and copies a member's
   result out. Each member has a rank block [outer][inner] (the result of
   a reduce-scatter, the input of an all-gather, the whole tensor of an
   all-reduce) at `offset` in a `region` of the buffer. `kind` 0:
   all-reduce. 1: reduce-scatter; the buffer holds one region per rank,
   and the input is [outer][ranks][inner]. 2: all-gather; the result holds
   one region per rank, and get writes [outer][ranks][inner]. */
void weft_rt_bucket_put_f32(const WeftRuntimeContext *ctx, int64_t axisMask,
                            int64_t bucket, int64_t kind, int64_t region,
                            int64_t offset, const float *in, int64_t outer,
                            int64_t inner);
void weft_rt_bucket_start(const WeftRuntimeContext *ctx, int64_t axisMask,
                          int64_t bucket, int64_t kind, int64_t region);
void weft_rt_bucket_get_f32(const WeftRuntimeContext *ctx, int64_t axisMask,
                            int64_t bucket, int64_t offset, float *out,
                            int64_t outer, int64_t inner);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RUNTIME_KERNELS_H */
