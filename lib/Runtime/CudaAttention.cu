//===- CudaAttention.cu - Flash attention on NVIDIA GPUs ------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The GPU's weft.attention and weft.attention_grad: the CPU kernels'
// algorithm (lib/Runtime/Attention.cpp) on blocks of 64 rows, so that the
// [T, S] scores of a head never reach device memory. Built by nvcc into a
// fatbin (sm_80, sm_90 and compute_80 PTX) that the runtime embeds and loads
// like generated code (CudaAttention.cpp).
//
// A block of four warps owns 64 rows and meets the other side 64 rows at a
// time, all tiles in shared memory (CudaAttentionLayout.h): the forward
// owns queries and keeps a running maximum and sum per row (online
// softmax), rescaling its output when the maximum grows; the backward
// recomputes each tile's probabilities from the saved log-sum-exp. Causal
// tiles wholly above the diagonal are never visited.
//
// The backward is two kernels, one owning keys (dK, dV) and one owning
// queries (dQ), each recomputing the scores and dP it needs. FlashAttention-2
// does it in one, adding dQ with atomics; the sum's order would then depend
// on timing, and Weft's steps give the same bits every run.
//
// Products: bf16 operands use tensor cores (f32 accumulation); P and dS
// are rounded to bf16 for theirs, as every bf16 flash kernel does. Heads
// up to 64 wide (GPT's) keep scores, probabilities and accumulators in
// registers (mma.sync, the `mma` kernels below); wider bf16 heads use WMMA
// 16x16x16 through shared-memory tiles. f32 operands use plain FMAs in the
// CPU's precision: f32 training matches the CPU executable to 1e-4, which
// TF32 would not. In the shared-memory kernels the backward's dK, dV and dQ
// accumulate in registers; the forward's output, which each step rescales
// row by row, in shared memory.
//
//===----------------------------------------------------------------------===//

#include "CudaAttentionLayout.h"

#include <cuda_bf16.h>
#include <mma.h>
#include <stdint.h>

#include <type_traits>

using namespace weft::rt::cuda::attention;

namespace {

using bf16 = __nv_bfloat16;
constexpr float kNegInf = -__builtin_huge_valf();

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(bf16 x) { return __bfloat162float(x); }
template <typename E> __device__ __forceinline__ E fromFloat(float x);
template <> __device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <> __device__ __forceinline__ bf16 fromFloat<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

/// e^x: f32 operands keep the CPU's precision; bf16 ones take the
/// hardware's approximation (2 ulp of f32), far below a bf16 step.
template <typename E> __device__ __forceinline__ float expOf(float x) {
  return sizeof(E) == 4 ? expf(x) : __expf(x);
}

__device__ __forceinline__ float warpSum(float x) {
  for (int o = 16; o > 0; o /= 2)
    x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

/// A [64][N] f32 accumulator in registers: warp w holds rows 16w..16w+15
/// in both versions, so a warp reading back only its own rows needs no
/// barrier. mma adds op(A) op(B), op(A) [64][K] and op(B) [K][N]: A is
/// stored [64][K], or [K][64] when TransA; B [K][N], or [N][K] when TransB.
template <typename E, int N> struct Accumulator;

/// bf16 operands: WMMA fragments (tensor cores, f32 accumulation).
template <int N> struct Accumulator<bf16, N> {
  nvcuda::wmma::fragment<nvcuda::wmma::accumulator, 16, 16, 16, float>
      acc[N / 16];

  __device__ __forceinline__ int row0() const { return threadIdx.x / 32 * 16; }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int n = 0; n < N / 16; ++n)
      nvcuda::wmma::fill_fragment(acc[n], 0.0f);
  }
  __device__ __forceinline__ void load(const float *c, int ldc) {
#pragma unroll
    for (int n = 0; n < N / 16; ++n)
      nvcuda::wmma::load_matrix_sync(acc[n], c + row0() * ldc + n * 16, ldc,
                                     nvcuda::wmma::mem_row_major);
  }
  __device__ __forceinline__ void store(float *c, int ldc) const {
#pragma unroll
    for (int n = 0; n < N / 16; ++n)
      nvcuda::wmma::store_matrix_sync(c + row0() * ldc + n * 16, acc[n], ldc,
                                      nvcuda::wmma::mem_row_major);
  }
  template <int K, bool TransA, bool TransB>
  __device__ __forceinline__ void mma(const bf16 *a, int lda, const bf16 *b,
                                      int ldb) {
    using namespace nvcuda;
    using ALayout =
        std::conditional_t<TransA, wmma::col_major, wmma::row_major>;
    using BLayout =
        std::conditional_t<TransB, wmma::col_major, wmma::row_major>;
    const int m0 = row0();
#pragma unroll
    for (int k = 0; k < K; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, ALayout> fa;
      wmma::load_matrix_sync(fa, TransA ? a + k * lda + m0 : a + m0 * lda + k,
                             lda);
#pragma unroll
      for (int n = 0; n < N / 16; ++n) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, BLayout> fb;
        wmma::load_matrix_sync(
            fb, TransB ? b + n * 16 * ldb + k : b + k * ldb + n * 16, ldb);
        wmma::mma_sync(acc[n], fa, fb, acc[n]);
      }
    }
  }
};

/// f32 operands: FMAs in the CPU's precision. Thread t holds rows
/// 4(t/8)..+3 and columns t%8, t%8 + 8, ..., and sums over K in order.
template <int N> struct Accumulator<float, N> {
  float acc[4][N / 8];

  __device__ __forceinline__ int row0() const { return threadIdx.x / 8 * 4; }
  __device__ __forceinline__ int col0() const { return threadIdx.x % 8; }
  __device__ __forceinline__ void zero() {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < N / 8; ++j)
        acc[i][j] = 0.0f;
  }
  __device__ __forceinline__ void load(const float *c, int ldc) {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < N / 8; ++j)
        acc[i][j] = c[(row0() + i) * ldc + col0() + 8 * j];
  }
  __device__ __forceinline__ void store(float *c, int ldc) const {
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < N / 8; ++j)
        c[(row0() + i) * ldc + col0() + 8 * j] = acc[i][j];
  }
  template <int K, bool TransA, bool TransB>
  __device__ __forceinline__ void mma(const float *a, int lda, const float *b,
                                      int ldb) {
    const int r0 = row0(), c0 = col0();
#pragma unroll 4
    for (int k = 0; k < K; ++k) {
      float x[4];
#pragma unroll
      for (int i = 0; i < 4; ++i)
        x[i] = TransA ? a[k * lda + r0 + i] : a[(r0 + i) * lda + k];
#pragma unroll
      for (int j = 0; j < N / 8; ++j) {
        int n = c0 + 8 * j;
        float y = TransB ? b[n * ldb + k] : b[k * ldb + n];
#pragma unroll
        for (int i = 0; i < 4; ++i)
          acc[i][j] = fmaf(x[i], y, acc[i][j]);
      }
    }
  }
};

/// C[64][N] = (or, Accumulate, +=) op(A) op(B) for C in shared memory.
template <int N, int K, bool TransA, bool TransB, bool Accumulate, typename E>
__device__ __forceinline__ void tileProduct(float *c, int ldc, const E *a,
                                            int lda, const E *b, int ldb) {
  Accumulator<E, N> acc;
  if (Accumulate)
    acc.load(c, ldc);
  else
    acc.zero();
  acc.template mma<K, TransA, TransB>(a, lda, b, ldb);
  acc.store(c, ldc);
}

/// Rows row0.. of a dense [rows][cols] array into a [64][DP] tile, zeros
/// past its rows and columns (so that padded products add nothing).
template <int DP, typename E>
__device__ __forceinline__ void loadTile(E *tile, int ld, const E *src,
                                         int row0, int rows, int cols) {
  // 16 bytes a load where rows allow (every head dimension a multiple of
  // 8 bf16 or 4 f32); the tile's rows are 16-byte aligned by their padding.
  constexpr int V = 16 / sizeof(E);
  if (cols % V == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    for (int i = threadIdx.x; i < kRows * DP / V; i += kThreads) {
      int r = i / (DP / V), c = i % (DP / V) * V, g = row0 + r;
      uint4 x = make_uint4(0, 0, 0, 0);
      if (g < rows && c < cols)
        x = *reinterpret_cast<const uint4 *>(src + int64_t(g) * cols + c);
      *reinterpret_cast<uint4 *>(tile + r * ld + c) = x;
    }
    return;
  }
  for (int i = threadIdx.x; i < kRows * DP; i += kThreads) {
    int r = i / DP, c = i % DP, g = row0 + r;
    tile[r * ld + c] = g < rows && c < cols ? src[int64_t(g) * cols + c]
                                            : fromFloat<E>(0.0f);
  }
}

template <int DP>
__device__ __forceinline__ void zeroTile(float *tile, int ld) {
  for (int i = threadIdx.x; i < kRows * DP; i += kThreads)
    tile[(i / DP) * ld + i % DP] = 0.0f;
}

/// Writes rows row0.. of a [64][DP] f32 tile, times `factor`, to a dense
/// [rows][cols] array.
template <int DP, typename E>
__device__ __forceinline__ void storeTile(E *dst, const float *tile, int ld,
                                          int row0, int rows, int cols,
                                          float factor) {
  for (int i = threadIdx.x; i < kRows * DP; i += kThreads) {
    int r = i / DP, c = i % DP, g = row0 + r;
    if (g < rows && c < cols)
      dst[int64_t(g) * cols + c] = fromFloat<E>(tile[r * ld + c] * factor);
  }
}

/// Carves dynamic shared memory in CudaAttentionLayout.h's order.
struct Carver {
  unsigned char *next;
  template <typename T> __device__ T *take(int bytes) {
    T *p = reinterpret_cast<T *>(next);
    next += bytes;
    return p;
  }
};

extern __shared__ __align__(128) unsigned char sharedMemory[];

/// Is key j masked for query i?
__device__ __forceinline__ bool masked(int i, int j, int s, bool causal) {
  return j >= s || (causal && j > i);
}

template <typename E, int DP>
__device__ __forceinline__ void
forward(int t, int s, int d, int dv, float scale, bool causal, int blocks,
        const E *q, const E *k, const E *v, E *out, float *lse) {
  constexpr Layout L = Layout::of(sizeof(E), DP);
  constexpr int ldE = operandLd(DP, sizeof(E)), ldS = floatLd(kRows),
                ldP = operandLd(kRows, sizeof(E)), ldO = floatLd(DP);
  static_assert(sizeof(E) != 4 || ldP == ldS, "f32 P shares the scores");
  const int64_t head = blockIdx.x / blocks;
  const int q0 = (blockIdx.x % blocks) * kRows;
  q += head * t * d;
  k += head * s * d;
  v += head * s * dv;
  out += head * t * dv;
  lse += head * t;

  Carver m{sharedMemory};
  E *sQ = m.take<E>(L.operand), *sK = m.take<E>(L.operand),
    *sV = m.take<E>(L.operand);
  float *sS = m.take<float>(L.scores);
  E *sP = sizeof(E) == 4 ? reinterpret_cast<E *>(sS) : m.take<E>(L.probs);
  float *sO = m.take<float>(L.accum);
  float *sMax = m.take<float>(L.rowStats), *sSum = m.take<float>(L.rowStats),
        *sRescale = m.take<float>(L.rowStats);

  loadTile<DP>(sQ, ldE, q, q0, t, d);
  zeroTile<DP>(sO, ldO);
  for (int r = threadIdx.x; r < kRows; r += kThreads) {
    sMax[r] = kNegInf;
    sSum[r] = 0.0f;
  }
  const int keyEnd = causal ? min(s, q0 + kRows) : s;
  for (int k0 = 0; k0 < keyEnd; k0 += kRows) {
    __syncthreads(); // The last step's readers of sK, sV and sP are done.
    loadTile<DP>(sK, ldE, k, k0, s, d);
    loadTile<DP>(sV, ldE, v, k0, s, dv);
    __syncthreads();
    tileProduct<kRows, DP, false, true, false>(sS, ldS, sQ, ldE, sK, ldE);
    __syncthreads();
    {
      // Two threads a row, 32 keys each (a pair of lanes). Key 0 is in the
      // first tile and never masked, so the running maximum is finite from
      // the first tile on.
      const int r = threadIdx.x / 2, half = threadIdx.x % 2, i = q0 + r;
      float x[32], top = kNegInf;
#pragma unroll
      for (int c = 0; c < 32; ++c) {
        int col = half * 32 + c;
        x[c] = masked(i, k0 + col, s, causal) ? kNegInf
                                               : sS[r * ldS + col] * scale;
        top = fmaxf(top, x[c]);
      }
      top = fmaxf(top, __shfl_xor_sync(0xffffffffu, top, 1));
      float before = sMax[r], now = fmaxf(before, top), sum = 0.0f;
#pragma unroll
      for (int c = 0; c < 32; ++c) {
        float p = x[c] == kNegInf ? 0.0f : expOf<E>(x[c] - now);
        sum += p;
        sP[r * ldP + half * 32 + c] = fromFloat<E>(p);
      }
      // The partner read sMax[r] before this exchange; only then is it
      // written.
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      if (half == 0) {
        float rescale = before == kNegInf ? 0.0f : expOf<E>(before - now);
        sRescale[r] = rescale;
        sSum[r] = sSum[r] * rescale + sum;
        sMax[r] = now;
      }
    }
    __syncthreads();
    for (int i = threadIdx.x; i < kRows * DP; i += kThreads)
      sO[(i / DP) * ldO + i % DP] *= sRescale[i / DP];
    __syncthreads();
    tileProduct<DP, kRows, false, false, true>(sO, ldO, sP, ldP, sV, ldE);
  }
  __syncthreads();
  for (int i = threadIdx.x; i < kRows * DP; i += kThreads) {
    int r = i / DP, c = i % DP, g = q0 + r;
    if (g < t && c < dv)
      out[int64_t(g) * dv + c] = fromFloat<E>(sO[r * ldO + c] / sSum[r]);
  }
  for (int r = threadIdx.x; r < kRows; r += kThreads)
    if (q0 + r < t)
      lse[q0 + r] = sMax[r] + logf(sSum[r]);
}

/// D = rowsum(dO * O) of every query row, a warp a row: what dS needs of
/// each row, once, instead of once per tile that meets the row.
template <typename E>
__device__ __forceinline__ void rowTerms(int64_t rows, int dv, const E *dout,
                                         const E *out, float *d) {
  int64_t row = int64_t(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows)
    return;
  float x = 0.0f;
  for (int c = lane; c < dv; c += 32)
    x += toFloat(dout[row * dv + c]) * toFloat(out[row * dv + c]);
  x = warpSum(x);
  if (lane == 0)
    d[row] = x;
}

/// lse and D of query rows q0.. into shared memory.
__device__ __forceinline__ void loadRowTerms(float *sLse, float *sD, int q0,
                                             int t, const float *lse,
                                             const float *d) {
  for (int r = threadIdx.x; r < kRows; r += kThreads) {
    bool in = q0 + r < t;
    sLse[r] = in ? lse[q0 + r] : 0.0f;
    sD[r] = in ? d[q0 + r] : 0.0f;
  }
}

/// The probabilities of the tile of queries q0.. and keys k0.. into sP from
/// the scores in sS; zero where masked or past the rows.
template <typename E>
__device__ __forceinline__ void probabilities(E *sP, int ldP, const float *sS,
                                              int ldS, const float *sLse,
                                              int q0, int k0, int t, int s,
                                              float scale, bool causal) {
  for (int i = threadIdx.x; i < kRows * kRows; i += kThreads) {
    int r = i / kRows, c = i % kRows;
    bool zero = q0 + r >= t || masked(q0 + r, k0 + c, s, causal);
    sP[r * ldP + c] = fromFloat<E>(
        zero ? 0.0f : expOf<E>(sS[r * ldS + c] * scale - sLse[r]));
  }
}

/// dS = P (dP - D) into sDS from P in sP and dP in sDP (the same tile as
/// sDS with f32 operands: each element is read, then written, by one
/// thread).
template <typename E>
__device__ __forceinline__ void scoreGradients(E *sDS, int ldDS, const E *sP,
                                               int ldP, const float *sDP,
                                               int ldS, const float *sD) {
  for (int i = threadIdx.x; i < kRows * kRows; i += kThreads) {
    int r = i / kRows, c = i % kRows;
    float dp = sDP[r * ldS + c];
    sDS[r * ldDS + c] = fromFloat<E>(toFloat(sP[r * ldP + c]) * (dp - sD[r]));
  }
}

template <typename E, int DP>
__device__ __forceinline__ void
gradKeys(int t, int s, int d, int dv, float scale, bool causal, int blocks,
         const E *dout, const E *q, const E *k, const E *v, const float *lse,
         const float *rowD, E *dk, E *dvOut) {
  constexpr Layout L = Layout::of(sizeof(E), DP);
  constexpr int ldE = operandLd(DP, sizeof(E)), ldS = floatLd(kRows),
                ldP = operandLd(kRows, sizeof(E)), ldA = floatLd(DP);
  const int64_t head = blockIdx.x / blocks;
  const int k0 = (blockIdx.x % blocks) * kRows;
  dout += head * t * dv;
  q += head * t * d;
  k += head * s * d;
  v += head * s * dv;
  lse += head * t;
  rowD += head * t;
  dk += head * s * d;
  dvOut += head * s * dv;

  Carver m{sharedMemory};
  E *sK = m.take<E>(L.operand), *sV = m.take<E>(L.operand),
    *sQ = m.take<E>(L.operand), *sDO = m.take<E>(L.operand);
  float *sS = m.take<float>(L.scores);
  E *sP = m.take<E>(L.probs);
  E *sDS = sizeof(E) == 4 ? reinterpret_cast<E *>(sS) : m.take<E>(L.probs);
  float *sLse = m.take<float>(L.rowStats), *sD = m.take<float>(L.rowStats);
  // dK and dV stay in registers: unlike the forward's output, no step
  // rescales them.
  Accumulator<E, DP> accK, accV;
  accK.zero();
  accV.zero();

  loadTile<DP>(sK, ldE, k, k0, s, d);
  loadTile<DP>(sV, ldE, v, k0, s, dv);
  // Causal: queries before k0 see none of these keys.
  for (int q0 = causal ? k0 : 0; q0 < t; q0 += kRows) {
    __syncthreads();
    loadTile<DP>(sQ, ldE, q, q0, t, d);
    loadTile<DP>(sDO, ldE, dout, q0, t, dv);
    loadRowTerms(sLse, sD, q0, t, lse, rowD);
    __syncthreads();
    tileProduct<kRows, DP, false, true, false>(sS, ldS, sQ, ldE, sK, ldE);
    __syncthreads();
    probabilities(sP, ldP, sS, ldS, sLse, q0, k0, t, s, scale, causal);
    __syncthreads();
    // dV += P^T dO; dP = dO V^T (into the scores' tile, read above).
    accV.template mma<kRows, true, false>(sP, ldP, sDO, ldE);
    tileProduct<kRows, DP, false, true, false>(sS, ldS, sDO, ldE, sV, ldE);
    __syncthreads();
    scoreGradients(sDS, ldP, sP, ldP, sS, ldS, sD);
    __syncthreads();
    // dK += dS^T Q (times the scale, at the end).
    accK.template mma<kRows, true, false>(sDS, ldP, sQ, ldE);
  }
  // The operand tiles, done with, stage each result on its way out.
  float *stage = reinterpret_cast<float *>(sharedMemory);
  static_assert(4 * L.operand >= kRows * ldA * 4, "the stage fits");
  __syncthreads();
  accK.store(stage, ldA);
  __syncthreads();
  storeTile<DP>(dk, stage, ldA, k0, s, d, scale);
  __syncthreads();
  accV.store(stage, ldA);
  __syncthreads();
  storeTile<DP>(dvOut, stage, ldA, k0, s, dv, 1.0f);
}

template <typename E, int DP>
__device__ __forceinline__ void
gradQueries(int t, int s, int d, int dv, float scale, bool causal, int blocks,
            const E *dout, const E *q, const E *k, const E *v, const float *lse,
            const float *rowD, E *dq) {
  constexpr Layout L = Layout::of(sizeof(E), DP);
  constexpr int ldE = operandLd(DP, sizeof(E)), ldS = floatLd(kRows),
                ldP = operandLd(kRows, sizeof(E)), ldA = floatLd(DP);
  const int64_t head = blockIdx.x / blocks;
  const int q0 = (blockIdx.x % blocks) * kRows;
  dout += head * t * dv;
  q += head * t * d;
  k += head * s * d;
  v += head * s * dv;
  lse += head * t;
  rowD += head * t;
  dq += head * t * d;

  Carver m{sharedMemory};
  E *sQ = m.take<E>(L.operand), *sDO = m.take<E>(L.operand),
    *sK = m.take<E>(L.operand), *sV = m.take<E>(L.operand);
  float *sS = m.take<float>(L.scores);
  E *sP = m.take<E>(L.probs);
  E *sDS = sizeof(E) == 4 ? reinterpret_cast<E *>(sS) : m.take<E>(L.probs);
  float *sLse = m.take<float>(L.rowStats), *sD = m.take<float>(L.rowStats);
  Accumulator<E, DP> accQ;
  accQ.zero();

  loadTile<DP>(sQ, ldE, q, q0, t, d);
  loadTile<DP>(sDO, ldE, dout, q0, t, dv);
  loadRowTerms(sLse, sD, q0, t, lse, rowD);
  const int keyEnd = causal ? min(s, q0 + kRows) : s;
  for (int k0 = 0; k0 < keyEnd; k0 += kRows) {
    __syncthreads();
    loadTile<DP>(sK, ldE, k, k0, s, d);
    loadTile<DP>(sV, ldE, v, k0, s, dv);
    __syncthreads();
    tileProduct<kRows, DP, false, true, false>(sS, ldS, sQ, ldE, sK, ldE);
    __syncthreads();
    probabilities(sP, ldP, sS, ldS, sLse, q0, k0, t, s, scale, causal);
    __syncthreads();
    tileProduct<kRows, DP, false, true, false>(sS, ldS, sDO, ldE, sV, ldE);
    __syncthreads();
    scoreGradients(sDS, ldP, sP, ldP, sS, ldS, sD);
    __syncthreads();
    // dQ += dS K (times the scale, at the end).
    accQ.template mma<kRows, false, false>(sDS, ldP, sK, ldE);
  }
  float *stage = reinterpret_cast<float *>(sharedMemory);
  static_assert(4 * L.operand >= kRows * ldA * 4, "the stage fits");
  __syncthreads();
  accQ.store(stage, ldA);
  __syncthreads();
  storeTile<DP>(dq, stage, ldA, q0, t, d, scale);
}

//===----------------------------------------------------------------------===//
// bf16 heads up to 64 wide: products in registers (mma.sync)
//===----------------------------------------------------------------------===//
//
// GPT-style heads (64 wide) take these kernels instead of the WMMA ones
// above, FlashAttention-2's way: a warp owns 16 rows and keeps its
// operands, its scores and its accumulators in registers, as mma.sync's
// m16n8k16 fragments, whose element-to-thread layout PTX defines (WMMA's
// is opaque, so scores had to go through shared memory to be softmaxed).
// A score tile's accumulator is laid out exactly as the A operand of the
// next product, so P and dS go from the softmax into the next mma without
// leaving the thread. Shared memory holds only the tiles all four warps
// read (the other side's 64 rows), loaded with cp.async into two stages:
// the next tile's copy runs while the current one is multiplied.
//
// Fragments (m16n8k16, PTX ISA "Matrix Fragments for mma.m16n8k16"), with
// g = lane / 4 and c = lane % 4: the accumulator of a 16x8 tile is
// {(g, 2c), (g, 2c+1), (g+8, 2c), (g+8, 2c+1)}; A (16x16) is four pairs,
// (g, 2c..), (g+8, 2c..), (g, 2c+8..), (g+8, 2c+8..); B (16x8, k by n) is
// two pairs along k, (2c.., g) and (2c+8.., g). ldmatrix reads them from
// shared memory: four 8x8 matrices, lane l naming row l % 8 of matrix
// l / 8; `.trans` hands out the transpose, B from a [k][n] tile.

namespace mma {

constexpr int kLd = RegisterLayout::kLd;
constexpr int kTile = kRows * kLd; ///< Elements of a tile.
constexpr int kChunks = 4;         ///< 64 columns as four k-steps of 16.
constexpr int kTiles = 8;          ///< 64 columns as eight n-tiles of 8.

using Frag = uint32_t[4]; ///< An A operand: 16x16 bf16.
using Acc = float[4];     ///< An accumulator: 16x8 f32.

__device__ __forceinline__ int lane() { return threadIdx.x % 32; }
__device__ __forceinline__ int warp() { return threadIdx.x / 32; }

__device__ __forceinline__ uint32_t sharedAddress(const void *p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// c += a b on tensor cores, f32 accumulation.
__device__ __forceinline__ void mma(Acc &c, const Frag &a, uint32_t b0,
                                    uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n"
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <bool Trans>
__device__ __forceinline__ void ldmatrix(uint32_t (&r)[4], const bf16 *p) {
  if (Trans)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sharedAddress(p)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 "
                 "{%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(sharedAddress(p)));
}

/// The A operands of rows row0..row0+15 of a [64][kLd] tile, all 64
/// columns: four k-steps.
__device__ __forceinline__ void loadRows(Frag (&a)[kChunks], const bf16 *tile,
                                         int row0) {
  const int l = lane();
#pragma unroll
  for (int kc = 0; kc < kChunks; ++kc) {
    uint32_t r[4];
    ldmatrix<false>(r, tile + (row0 + l % 8 + (l / 8) % 2 * 8) * kLd + kc * 16 +
                           l / 16 * 8);
#pragma unroll
    for (int i = 0; i < 4; ++i)
      a[kc][i] = r[i];
  }
}

/// acc[n] = a op(B) over 64 columns of n (eight n-tiles), summing the
/// four k-steps of `a`. NK: B's tile is [n][k] (a row per output column:
/// the keys of Q K^T); otherwise [k][n] (P V), read transposed.
template <bool NK>
__device__ __forceinline__ void
product(Acc (&acc)[kTiles], const Frag (&a)[kChunks], const bf16 *b) {
  const int l = lane();
#pragma unroll
  for (int kc = 0; kc < kChunks; ++kc)
#pragma unroll
    for (int np = 0; np < kTiles / 2; ++np) {
      uint32_t r[4];
      if (NK) // Matrices: (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, ...).
        ldmatrix<false>(r, b + (np * 16 + l % 8 + l / 16 * 8) * kLd + kc * 16 +
                               (l / 8) % 2 * 8);
      else // (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), ...
        ldmatrix<true>(r, b + (kc * 16 + l % 8 + (l / 8) % 2 * 8) * kLd +
                              np * 16 + l / 16 * 8);
      mma(acc[2 * np], a[kc], r[0], r[1]);
      mma(acc[2 * np + 1], a[kc], r[2], r[3]);
    }
}

__device__ __forceinline__ void zero(Acc (&acc)[kTiles]) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i)
      acc[n][i] = 0.0f;
}

__device__ __forceinline__ uint32_t pack(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t *>(&h);
}

/// A 16x64 accumulator, rounded to bf16, as the A operands of a product
/// over its 64 columns: n-tiles 2k and 2k+1 make k-step k.
__device__ __forceinline__ void asOperand(Frag (&a)[kChunks],
                                          const Acc (&acc)[kTiles]) {
#pragma unroll
  for (int kc = 0; kc < kChunks; ++kc) {
    a[kc][0] = pack(acc[2 * kc][0], acc[2 * kc][1]);
    a[kc][1] = pack(acc[2 * kc][2], acc[2 * kc][3]);
    a[kc][2] = pack(acc[2 * kc + 1][0], acc[2 * kc + 1][1]);
    a[kc][3] = pack(acc[2 * kc + 1][2], acc[2 * kc + 1][3]);
  }
}

/// Where element i of n-tile n of a thread's accumulator sits in its
/// 16x64 tile.
__device__ __forceinline__ int rowOf(int i) { return lane() / 4 + i / 2 * 8; }
__device__ __forceinline__ int colOf(int n, int i) {
  return n * 8 + lane() % 4 * 2 + i % 2;
}

/// Rows row0..row0+15 (of the warp's 16) of a 16x64 accumulator, times
/// `factor`, into a dense [rows][cols] array, from global row `first`.
__device__ __forceinline__ void store(bf16 *dst, const Acc (&acc)[kTiles],
                                      int first, int rows, int cols,
                                      float factor) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n)
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int r = first + rowOf(i), c = colOf(n, i);
      if (r < rows && c < cols)
        dst[int64_t(r) * cols + c] = __float2bfloat16_rn(acc[n][i] * factor);
    }
}

/// The sum of x over the four threads that hold a row (lanes 4g..4g+3).
__device__ __forceinline__ float quadSum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float quadMax(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

/// Rows row0.. of a dense [rows][cols] array into a [64][kLd] tile, zeros
/// past its rows and columns: cp.async, 16 bytes a copy, where rows are
/// whole 16-byte chunks (to be waited for with wait()); otherwise plain
/// loads, visible after the next barrier like the copies.
__device__ __forceinline__ void copyTile(bf16 *tile, const bf16 *src, int row0,
                                         int rows, int cols) {
  if (cols % 8 == 0 && reinterpret_cast<uintptr_t>(src) % 16 == 0) {
    for (int i = threadIdx.x; i < kRows * 8; i += kThreads) {
      int r = i / 8, c = i % 8 * 8, g = row0 + r;
      bool in = g < rows && c < cols;
      const bf16 *from = in ? src + int64_t(g) * cols + c : src;
      // A zero source size fills the 16 bytes with zeros.
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(
                       sharedAddress(tile + r * kLd + c)),
                   "l"(from), "r"(in ? 16 : 0));
    }
    return;
  }
  for (int i = threadIdx.x; i < kRows * 64; i += kThreads) {
    int r = i / 64, c = i % 64, g = row0 + r;
    tile[r * kLd + c] =
        g < rows && c < cols ? src[int64_t(g) * cols + c] : fromFloat<bf16>(0);
  }
}

__device__ __forceinline__ void commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
/// Waits for this thread's copies but the last `pending` groups.
template <int Pending> __device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending));
}

/// The loop every kernel runs over the other side's tiles: stage i % 2
/// holds tile i; tile i + 1 is copied (`fetch(i + 1, stage)`) while tile i
/// is multiplied (`use(i, stage)`). The first group also holds whatever
/// the kernel copied before the loop (its own rows).
template <typename Fetch, typename Use>
__device__ __forceinline__ void pipeline(int tiles, Fetch fetch, Use use) {
  if (tiles > 0)
    fetch(0, 0);
  commit();
  if (tiles == 0)
    wait<0>(); // The kernel's own rows: no copy outlives the block.
  for (int i = 0; i < tiles; ++i) {
    if (i + 1 < tiles) {
      fetch(i + 1, (i + 1) % 2);
      commit();
      wait<1>();
    } else {
      wait<0>();
    }
    __syncthreads(); // Every thread's copies of tile i have landed.
    use(i, i % 2);
    __syncthreads(); // Stage i % 2 is free for tile i + 2.
  }
}

__device__ __forceinline__ bool maskedAt(int i, int j, int s, bool causal) {
  return j >= s || (causal && j > i);
}

/// 2^x, the hardware's approximation (what __expf computes after scaling
/// by log2(e)): the scores are kept in base 2, so that scale and shift are
/// one fused multiply-add before it. ex2(-inf) is 0.
__device__ __forceinline__ float exp2Approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}
constexpr float kLog2E = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

/// Runs `f(std::true_type)` where a tile has masked elements (a causal
/// diagonal, rows past the end), `f(std::false_type)` elsewhere: the
/// compare and select per element only where they can matter.
template <typename F> __device__ __forceinline__ void masking(bool any, F f) {
  if (any)
    f(std::true_type{});
  else
    f(std::false_type{});
}

/// The forward of 64 queries a block, 16 a warp.
__device__ __forceinline__ void forward(int t, int s, int d, int dv,
                                        float scale, bool causal, int blocks,
                                        const bf16 *q, const bf16 *k,
                                        const bf16 *v, bf16 *out, float *lse) {
  const int64_t head = blockIdx.x / blocks;
  const int q0 = (blockIdx.x % blocks) * kRows, w0 = q0 + warp() * 16;
  q += head * t * d;
  k += head * s * d;
  v += head * s * dv;
  out += head * t * dv;
  lse += head * t;

  // Q, then K and V of stage 0, then of stage 1.
  bf16 *sQ = reinterpret_cast<bf16 *>(sharedMemory), *sKV = sQ + kTile;
  copyTile(sQ, q, q0, t, d);

  Frag qa[kChunks];
  Acc o[kTiles];
  zero(o);
  // The running maximum (base 2) and (this thread's part of the) sum of
  // rows g and g + 8. Key 0 is in the first tile and never masked, so the
  // maximum is finite from the first tile on.
  float top[2] = {kNegInf, kNegInf}, sum[2] = {0.0f, 0.0f};
  const float scaleLog2 = scale * kLog2E;
  const int keyEnd = causal ? min(s, q0 + kRows) : s;
  pipeline((keyEnd + kRows - 1) / kRows,
           [&](int i, int stage) {
             copyTile(sKV + 2 * stage * kTile, k, i * kRows, s, d);
             copyTile(sKV + (2 * stage + 1) * kTile, v, i * kRows, s, dv);
           },
           [&](int i, int stage) {
             if (i == 0)
               loadRows(qa, sQ, warp() * 16);
             const int k0 = i * kRows;
             Acc x[kTiles];
             zero(x);
             product<true>(x, qa, sKV + 2 * stage * kTile);
             // Scores in base 2 (times log2(e)), masked to -inf.
             float tileTop[2] = {kNegInf, kNegInf};
             masking(k0 + kRows > s || (causal && k0 + kRows - 1 > w0),
                     [&](auto masked) {
#pragma unroll
                       for (int n = 0; n < kTiles; ++n)
#pragma unroll
                         for (int e = 0; e < 4; ++e) {
                           float v = x[n][e] * scaleLog2;
                           if constexpr (decltype(masked)::value)
                             v = maskedAt(w0 + rowOf(e), k0 + colOf(n, e), s,
                                          causal)
                                     ? kNegInf
                                     : v;
                           x[n][e] = v;
                           tileTop[e / 2] = fmaxf(tileTop[e / 2], v);
                         }
                     });
             float rescale[2];
#pragma unroll
             for (int h = 0; h < 2; ++h) {
               float now = fmaxf(top[h], quadMax(tileTop[h]));
               rescale[h] = exp2Approx(top[h] - now); // 0 on the first tile.
               top[h] = now;
               sum[h] *= rescale[h];
             }
#pragma unroll
             for (int n = 0; n < kTiles; ++n)
#pragma unroll
               for (int e = 0; e < 4; ++e) {
                 float p = exp2Approx(x[n][e] - top[e / 2]);
                 sum[e / 2] += p;
                 x[n][e] = p;
                 o[n][e] *= rescale[e / 2];
               }
             Frag pa[kChunks];
             asOperand(pa, x);
             product<false>(o, pa, sKV + (2 * stage + 1) * kTile);
           });
#pragma unroll
  for (int h = 0; h < 2; ++h)
    sum[h] = quadSum(sum[h]);
#pragma unroll
  for (int n = 0; n < kTiles; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e)
      o[n][e] /= sum[e / 2];
  store(out, o, w0, t, dv, 1.0f);
  if (lane() % 4 == 0)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      if (w0 + rowOf(2 * h) < t)
        lse[w0 + rowOf(2 * h)] = top[h] * kLn2 + logf(sum[h]);
}

/// dK and dV of 64 keys a block, 16 a warp: the products transposed
/// (S^T = K Q^T, dP^T = V dO^T), so that P^T and dS^T are A operands of
/// dV += P^T dO and dK += dS^T Q.
__device__ __forceinline__ void
gradKeys(int t, int s, int d, int dv, float scale, bool causal, int blocks,
         const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,
         const float *lse, const float *rowD, bf16 *dk, bf16 *dvOut) {
  const int64_t head = blockIdx.x / blocks;
  const int k0 = (blockIdx.x % blocks) * kRows, w0 = k0 + warp() * 16;
  const float scaleLog2 = scale * kLog2E;
  dout += head * t * dv;
  q += head * t * d;
  k += head * s * d;
  v += head * s * dv;
  lse += head * t;
  rowD += head * t;
  dk += head * s * d;
  dvOut += head * s * dv;

  // K, V; Q and dO of stage 0, then of stage 1; lse and D of stage 0,
  // then of stage 1.
  bf16 *sK = reinterpret_cast<bf16 *>(sharedMemory), *sV = sK + kTile,
       *sQDO = sK + 2 * kTile;
  float *sTerms = reinterpret_cast<float *>(sK + 6 * kTile);
  copyTile(sK, k, k0, s, d);
  copyTile(sV, v, k0, s, dv);

  Frag ka[kChunks], va[kChunks];
  Acc gk[kTiles], gv[kTiles];
  zero(gk);
  zero(gv);
  // Causal: queries before k0 see none of these keys.
  const int qBegin = causal ? k0 : 0;
  pipeline(
      qBegin < t ? (t - qBegin + kRows - 1) / kRows : 0,
      [&](int i, int stage) {
        int q0 = qBegin + i * kRows;
        copyTile(sQDO + 2 * stage * kTile, q, q0, t, d);
        copyTile(sQDO + (2 * stage + 1) * kTile, dout, q0, t, dv);
        for (int r = threadIdx.x; r < kRows; r += kThreads) {
          bool in = q0 + r < t;
          sTerms[2 * stage * kRows + r] = in ? lse[q0 + r] * kLog2E : 0.0f;
          sTerms[(2 * stage + 1) * kRows + r] = in ? rowD[q0 + r] : 0.0f;
        }
      },
      [&](int i, int stage) {
        if (i == 0) {
          loadRows(ka, sK, warp() * 16);
          loadRows(va, sV, warp() * 16);
        }
        const int q0 = qBegin + i * kRows;
        const bf16 *sQ = sQDO + 2 * stage * kTile, *sDO = sQ + kTile;
        const float *sLse = sTerms + 2 * stage * kRows, *sD = sLse + kRows;
        Acc p[kTiles], dp[kTiles];
        zero(p);
        zero(dp);
        product<true>(p, ka, sQ);
        product<true>(dp, va, sDO);
        // P^T = 2^(S^T scale log2(e) - lse log2(e)) (sLse is in base 2).
        masking(q0 + kRows > t || w0 + 16 > s || (causal && w0 + 15 > q0),
                [&](auto masked) {
#pragma unroll
                  for (int n = 0; n < kTiles; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                      int col = colOf(n, e);
                      float x =
                          exp2Approx(fmaf(p[n][e], scaleLog2, -sLse[col]));
                      if constexpr (decltype(masked)::value) {
                        int key = w0 + rowOf(e), query = q0 + col;
                        if (query >= t || maskedAt(query, key, s, causal))
                          x = 0.0f;
                      }
                      p[n][e] = x;
                      dp[n][e] = x * (dp[n][e] - sD[col]);
                    }
                });
        Frag pa[kChunks], dsa[kChunks];
        asOperand(pa, p);
        asOperand(dsa, dp);
        product<false>(gv, pa, sDO);
        product<false>(gk, dsa, sQ);
      });
  store(dk, gk, w0, s, d, scale);
  store(dvOut, gv, w0, s, dv, 1.0f);
}

/// dQ of 64 queries a block, 16 a warp.
__device__ __forceinline__ void
gradQueries(int t, int s, int d, int dv, float scale, bool causal, int blocks,
            const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,
            const float *lse, const float *rowD, bf16 *dq) {
  const int64_t head = blockIdx.x / blocks;
  const int q0 = (blockIdx.x % blocks) * kRows, w0 = q0 + warp() * 16;
  const float scaleLog2 = scale * kLog2E;
  dout += head * t * dv;
  q += head * t * d;
  k += head * s * d;
  v += head * s * dv;
  lse += head * t;
  rowD += head * t;
  dq += head * t * d;

  // Q, dO; K and V of stage 0, then of stage 1.
  bf16 *sQ = reinterpret_cast<bf16 *>(sharedMemory), *sDO = sQ + kTile,
       *sKV = sQ + 2 * kTile;
  copyTile(sQ, q, q0, t, d);
  copyTile(sDO, dout, q0, t, dv);

  float rowLse[2], rowTerm[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    int r = w0 + rowOf(2 * h);
    rowLse[h] = r < t ? lse[r] * kLog2E : 0.0f; // Base 2.
    rowTerm[h] = r < t ? rowD[r] : 0.0f;
  }
  Frag qa[kChunks], doa[kChunks];
  Acc gq[kTiles];
  zero(gq);
  const int keyEnd = causal ? min(s, q0 + kRows) : s;
  pipeline((keyEnd + kRows - 1) / kRows,
           [&](int i, int stage) {
             copyTile(sKV + 2 * stage * kTile, k, i * kRows, s, d);
             copyTile(sKV + (2 * stage + 1) * kTile, v, i * kRows, s, dv);
           },
           [&](int i, int stage) {
             if (i == 0) {
               loadRows(qa, sQ, warp() * 16);
               loadRows(doa, sDO, warp() * 16);
             }
             const int k0 = i * kRows;
             const bf16 *sK = sKV + 2 * stage * kTile, *sV = sK + kTile;
             Acc p[kTiles], dp[kTiles];
             zero(p);
             zero(dp);
             product<true>(p, qa, sK);
             product<true>(dp, doa, sV);
             masking(k0 + kRows > s || (causal && k0 + kRows - 1 > w0),
                     [&](auto masked) {
#pragma unroll
                       for (int n = 0; n < kTiles; ++n)
#pragma unroll
                         for (int e = 0; e < 4; ++e) {
                           int h = e / 2;
                           float x =
                               exp2Approx(fmaf(p[n][e], scaleLog2, -rowLse[h]));
                           if constexpr (decltype(masked)::value)
                             if (maskedAt(w0 + rowOf(e), k0 + colOf(n, e), s,
                                          causal))
                               x = 0.0f;
                           dp[n][e] = x * (dp[n][e] - rowTerm[h]);
                         }
                     });
             Frag dsa[kChunks];
             asOperand(dsa, dp);
             product<false>(gq, dsa, sK);
           });
  store(dq, gq, w0, t, d, scale);
}

} // namespace mma

} // namespace

// The entry points, by name (CudaAttention.cpp launches them): one per
// operand type and padded head dimension. `blocks` is the number of row
// blocks per head; the grid is heads x blocks along x.
#define WEFT_ATTENTION_KERNELS(E, NAME, DP)                                    \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      weft_attention_forward_##NAME##_##DP(                                    \
          int t, int s, int d, int dv, float scale, int causal, int blocks,    \
          const E *q, const E *k, const E *v, E *out, float *lse) {            \
    forward<E, DP>(t, s, d, dv, scale, causal, blocks, q, k, v, out, lse);     \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      weft_attention_grad_keys_##NAME##_##DP(                                  \
          int t, int s, int d, int dv, float scale, int causal, int blocks,    \
          const E *dout, const E *q, const E *k, const E *v, const float *lse, \
          const float *rowD, E *dk, E *dvOut) {                                \
    gradKeys<E, DP>(t, s, d, dv, scale, causal, blocks, dout, q, k, v, lse,    \
                    rowD, dk, dvOut);                                          \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      weft_attention_grad_queries_##NAME##_##DP(                               \
          int t, int s, int d, int dv, float scale, int causal, int blocks,    \
          const E *dout, const E *q, const E *k, const E *v, const float *lse, \
          const float *rowD, E *dq) {                                          \
    gradQueries<E, DP>(t, s, d, dv, scale, causal, blocks, dout, q, k, v, lse, \
                       rowD, dq);                                              \
  }

// bf16 heads up to 64 wide: the kernels above whose products stay in
// registers, under the same names.
#define WEFT_ATTENTION_MMA_KERNELS(NAME, DP)                                   \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      weft_attention_forward_##NAME##_##DP(                                    \
          int t, int s, int d, int dv, float scale, int causal, int blocks,    \
          const bf16 *q, const bf16 *k, const bf16 *v, bf16 *out,              \
          float *lse) {                                                        \
    mma::forward(t, s, d, dv, scale, causal, blocks, q, k, v, out, lse);       \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      weft_attention_grad_keys_##NAME##_##DP(                                  \
          int t, int s, int d, int dv, float scale, int causal, int blocks,    \
          const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,       \
          const float *lse, const float *rowD, bf16 *dk, bf16 *dvOut) {        \
    mma::gradKeys(t, s, d, dv, scale, causal, blocks, dout, q, k, v, lse,      \
                  rowD, dk, dvOut);                                            \
  }                                                                            \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      weft_attention_grad_queries_##NAME##_##DP(                               \
          int t, int s, int d, int dv, float scale, int causal, int blocks,    \
          const bf16 *dout, const bf16 *q, const bf16 *k, const bf16 *v,       \
          const float *lse, const float *rowD, bf16 *dq) {                     \
    mma::gradQueries(t, s, d, dv, scale, causal, blocks, dout, q, k, v, lse,   \
                     rowD, dq);                                                \
  }

// D of every row (the grid covers heads x t rows, kThreads / 32 a block).
#define WEFT_ATTENTION_ROW_TERMS(E, NAME)                                      \
  extern "C" __global__ void __launch_bounds__(kThreads)                       \
      weft_attention_row_terms_##NAME(int64_t rows, int dv, const E *dout,    \
                                      const E *out, float *d) {                \
    rowTerms<E>(rows, dv, dout, out, d);                                       \
  }

WEFT_ATTENTION_ROW_TERMS(float, f32)
WEFT_ATTENTION_ROW_TERMS(bf16, bf16)
WEFT_ATTENTION_KERNELS(float, f32, 64)
WEFT_ATTENTION_KERNELS(float, f32, 128)
WEFT_ATTENTION_MMA_KERNELS(bf16, 64)
WEFT_ATTENTION_KERNELS(bf16, bf16, 128)
