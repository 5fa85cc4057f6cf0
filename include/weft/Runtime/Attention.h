/*===- Attention.h - Fused attention kernels that generated code calls ----===*\
|*                                                                            *|
|* Part of the Weft project.                                                  *|
|*                                                                            *|
|* weft.attention and weft.attention_grad lower to these calls (see           *|
|* docs/training.md, Fused attention). Plain C, like Kernels.h.               *|
\*===----------------------------------------------------------------------===*/

#ifndef WEFT_RUNTIME_ATTENTION_H
#define WEFT_RUNTIME_ATTENTION_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Scaled dot-product attention of `heads` independent (batch, head) pairs,
   all arrays dense and row-major: q [heads][t][d], k [heads][s][d],
   v [heads][s][dv]; out [heads][t][dv] and lse [heads][t] are written.
   For each head and query row i, over keys j (j <= i only when causal):
     p[i][j] = exp(scale * q[i] . k[j] - lse[i]),
     lse[i] = log sum_j exp(scale * q[i] . k[j]),  out[i] = sum_j p[i][j] v[j].
   The [t][s] scores are computed block by block with a running maximum and
   sum (online softmax) and never stored; blocks wholly above the diagonal
   are skipped when causal. Runs on the OpenMP team over heads x query
   blocks. */
void weft_rt_attention_f32(int64_t heads, int64_t t, int64_t s, int64_t d,
                           int64_t dv, float scale, int32_t causal,
                           const float *q, const float *k, const float *v,
                           float *out, float *lse);

/* The adjoint: from dout [heads][t][dv] and the forward's operands and
   results, writes dq, dk and dv (shaped like q, k and v), recomputing p
   from lse:
     ds[i][j] = p[i][j] (dout[i] . v[j] - dout[i] . out[i]),
     dq = scale ds k,  dk = scale ds^T q,  dv = p^T dout.
   Runs on the OpenMP team over heads. */
void weft_rt_attention_grad_f32(int64_t heads, int64_t t, int64_t s,
                                int64_t d, int64_t dv, float scale,
                                int32_t causal, const float *dout,
                                const float *q, const float *k, const float *v,
                                const float *out, const float *lse, float *dq,
                                float *dk, float *dvOut);

/* The same on bf16 operands and results (uint16_t: the upper half of an
   f32) with an f32 lse: the f32 kernels on widened copies, each result
   rounded to nearest even once. */
void weft_rt_attention_bf16(int64_t heads, int64_t t, int64_t s, int64_t d,
                            int64_t dv, float scale, int32_t causal,
                            const uint16_t *q, const uint16_t *k,
                            const uint16_t *v, uint16_t *out, float *lse);
void weft_rt_attention_grad_bf16(int64_t heads, int64_t t, int64_t s, int64_t d,
                                 int64_t dv, float scale, int32_t causal,
                                 const uint16_t *dout, const uint16_t *q,
                                 const uint16_t *k, const uint16_t *v,
                                 const uint16_t *out, const float *lse,
                                 uint16_t *dq, uint16_t *dk, uint16_t *dvOut);

#ifdef __cplusplus
}
#endif

#endif /* WEFT_RUNTIME_ATTENTION_H */
