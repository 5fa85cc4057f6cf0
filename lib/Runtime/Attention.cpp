//===- Attention.cpp - Fused attention kernels ----------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Flash-style attention on the CPU (include/weft/Runtime/Attention.h). A
// block of kBlockQ query rows meets the keys kBlockK at a time: the block's
// scores live in a kBlockQ x kBlockK scratch (one GEMM), the
// softmax keeps a running maximum and sum per row and rescales the row's
// accumulated output when the maximum grows, so the [T, S] scores never
// reach memory. Causal key blocks wholly above the diagonal are never
// visited, and a visited block stops at the diagonal of its last row.
//
// The backward recomputes each block's probabilities from the saved
// log-sum-exp and accumulates the three adjoints with three more GEMMs in
// the same visit; it runs one (batch, head) per task so that the key and
// value adjoints need no synchronization.
//
// Between the GEMMs, the loops run over contiguous rows of a block, and
// the exponential is a branch-free polynomial, so that GCC vectorizes
// them. The block functions are compiled for AVX-512, AVX2+FMA and
// baseline x86-64, and the loader picks the best the CPU has (GCC's
// target_clones).
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Attention.h"

#include "weft/Runtime/Bf16.h"

#include "weft/Runtime/Kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define WEFT_MULTIVERSION                                                      \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define WEFT_MULTIVERSION
#endif

namespace {

// A block of query rows meets the keys kBlockK at a time. kBlockK is a
// multiple of kBlockQ, so that every causal block that is visited is
// non-empty in every row (its first key is at most the block's first
// query); at T <= kBlockK a row block sees all its keys in one block.
constexpr int64_t kBlockQ = 64;
constexpr int64_t kBlockK = 256;
static_assert(kBlockK % kBlockQ == 0, "see above");

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// e^x for x <= 0 (and -inf), within 2 ulp where the result is normal:
/// Cody-Waite reduction to r in [-ln2/2, ln2/2] and Cephes' expf
/// polynomial. Below -87.3 it returns 0 or a tiny normal, which is what
/// a probability that small contributes anyway. Plain arithmetic (the
/// rounding is the 1.5 * 2^23 trick, the power of two an exponent built
/// as an integer), so that loops over it vectorize.
inline float expNonPositive(float x) {
  x = x < -87.0f ? -87.0f : x;
  constexpr float kRound = 12582912.0f; // 1.5 * 2^23
  float n = (x * 1.44269504088896341f + kRound) - kRound;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n >= -126 here: 2^n is a normal float.
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  return p * __builtin_bit_cast(float, bits);
}

/// How many of the block's `cols` keys starting at `key0` query row
/// `row` sees.
inline int64_t visibleKeys(bool causal, int64_t row, int64_t key0,
                           int64_t cols) {
  if (!causal)
    return cols;
  return std::max<int64_t>(0, std::min(cols, row - key0 + 1));
}

/// The keys the queries of [q0, q1) may see: [0, end).
inline int64_t keyEnd(bool causal, int64_t q1, int64_t s) {
  return causal ? std::min(s, q1) : s;
}

/// Row-major C = op(A) op(B), through the runtime's GEMM (oneDNN's or
/// OpenBLAS's, as every other product of the step). Inside the kernels'
/// OpenMP region either runs on the calling thread.
inline void gemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                 const float *a, int64_t lda, const float *b, int64_t ldb,
                 float *c, int64_t ldc) {
  weft_rt_sgemm(1, transA, transB, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0);
}

/// Per-thread blocks: scores (then probabilities) and their adjoints, the
/// forward's block product before it is rescaled in, and its running
/// maximum, sum and rescaling per row.
struct Scratch {
  std::vector<float> scores, grads, product, rowMax, rowSum, rowScale;
  Scratch(int64_t d, int64_t dv)
      : scores(kBlockQ * kBlockK), grads(kBlockQ * kBlockK),
        product(kBlockQ * dv), rowMax(kBlockQ), rowSum(kBlockQ),
        rowScale(kBlockQ) {}
};

/// The forward of one (head, query block) into out and lse.
WEFT_MULTIVERSION void forwardBlock(int64_t t, int64_t s, int64_t d, int64_t dv, float scale,
                  bool causal, const float *q, const float *k, const float *v,
                  float *out, float *lse, int64_t q0, Scratch &w) {
  int64_t q1 = std::min(t, q0 + kBlockQ), rows = q1 - q0;
  float *acc = out + q0 * dv;
  std::fill(acc, acc + rows * dv, 0.0f);
  std::fill(w.rowMax.begin(), w.rowMax.end(), kNegInf);
  std::fill(w.rowSum.begin(), w.rowSum.end(), 0.0f);
  int64_t end = keyEnd(causal, q1, s);
  for (int64_t k0 = 0; k0 < end; k0 += kBlockK) {
    int64_t cols = std::min(kBlockK, end - k0);
    gemm(false, true, rows, cols, d, q + q0 * d, d, k + k0 * d, d,
         w.scores.data(), kBlockK);
    for (int64_t i = 0; i < rows; ++i) {
      float *srow = w.scores.data() + i * kBlockK;
      int64_t seen = visibleKeys(causal, q0 + i, k0, cols);
      float blockMax = kNegInf;
#pragma omp simd reduction(max : blockMax)
      for (int64_t j = 0; j < seen; ++j)
        blockMax = std::max(blockMax, scale * srow[j]);
      float newMax = std::max(w.rowMax[i], blockMax);
      if (newMax == kNegInf) { // Sees none of these keys (nor any before).
        std::fill(srow, srow + cols, 0.0f);
        w.rowScale[i] = 1.0f;
        continue;
      }
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < seen; ++j) {
        float p = expNonPositive(scale * srow[j] - newMax);
        srow[j] = p;
        sum += p;
      }
      std::fill(srow + seen, srow + cols, 0.0f);
      float rescale = expNonPositive(w.rowMax[i] - newMax);
      w.rowSum[i] = w.rowSum[i] * rescale + sum;
      w.rowMax[i] = newMax;
      w.rowScale[i] = rescale;
    }
    // acc = acc * rescale + p v, row by row.
    float *pv = w.product.data();
    gemm(false, false, rows, dv, cols, w.scores.data(), kBlockK, v + k0 * dv,
         dv, pv, dv);
    for (int64_t i = 0; i < rows; ++i) {
      float *arow = acc + i * dv;
      const float *prow = pv + i * dv;
      float rescale = w.rowScale[i];
#pragma omp simd
      for (int64_t c = 0; c < dv; ++c)
        arow[c] = arow[c] * rescale + prow[c];
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    float inv = 1.0f / w.rowSum[i];
    float *arow = acc + i * dv;
#pragma omp simd
    for (int64_t c = 0; c < dv; ++c)
      arow[c] *= inv;
    lse[q0 + i] = w.rowMax[i] + std::log(w.rowSum[i]);
  }
}

/// The backward of one head: every (query block, key block) pair that the
/// forward visited, recomputed from lse, adds to dq, dk and dv.
WEFT_MULTIVERSION void backwardHead(int64_t t, int64_t s, int64_t d, int64_t dvWidth,
                  float scale, bool causal, const float *dout, const float *q,
                  const float *k, const float *v, const float *out,
                  const float *lse, float *dq, float *dk, float *dv,
                  std::vector<float> &delta, Scratch &w) {
  // delta[i] = dout[i] . out[i] = sum_j p[i][j] dp[i][j]: the softmax
  // adjoint's row term.
  delta.resize(t);
  for (int64_t i = 0; i < t; ++i) {
    float sum = 0.0f;
    const float *g = dout + i * dvWidth, *o = out + i * dvWidth;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < dvWidth; ++c)
      sum += g[c] * o[c];
    delta[i] = sum;
  }
  std::fill(dq, dq + t * d, 0.0f);
  std::fill(dk, dk + s * d, 0.0f);
  std::fill(dv, dv + s * dvWidth, 0.0f);
  for (int64_t q0 = 0; q0 < t; q0 += kBlockQ) {
    int64_t q1 = std::min(t, q0 + kBlockQ), rows = q1 - q0;
    int64_t end = keyEnd(causal, q1, s);
    for (int64_t k0 = 0; k0 < end; k0 += kBlockK) {
      int64_t cols = std::min(kBlockK, end - k0);
      float *p = w.scores.data(), *ds = w.grads.data();
      gemm(false, true, rows, cols, d, q + q0 * d, d, k + k0 * d, d, p,
           kBlockK);
      gemm(false, true, rows, cols, dvWidth, dout + q0 * dvWidth, dvWidth,
           v + k0 * dvWidth, dvWidth, ds, kBlockK);
      for (int64_t i = 0; i < rows; ++i) {
        float *prow = p + i * kBlockK, *dsrow = ds + i * kBlockK;
        int64_t seen = visibleKeys(causal, q0 + i, k0, cols);
        float rowLse = lse[q0 + i], rowDelta = delta[q0 + i];
#pragma omp simd
        for (int64_t j = 0; j < seen; ++j) {
          float pj = expNonPositive(scale * prow[j] - rowLse);
          prow[j] = pj;
          dsrow[j] = scale * pj * (dsrow[j] - rowDelta);
        }
        std::fill(prow + seen, prow + cols, 0.0f);
        std::fill(dsrow + seen, dsrow + cols, 0.0f);
      }
      weft_rt_sgemm_accumulate(false, false, rows, d, cols, ds, kBlockK,
                               k + k0 * d, d, dq + q0 * d, d);
      weft_rt_sgemm_accumulate(true, false, cols, d, rows, ds, kBlockK,
                               q + q0 * d, d, dk + k0 * d, d);
      weft_rt_sgemm_accumulate(true, false, cols, dvWidth, rows, p, kBlockK,
                               dout + q0 * dvWidth, dvWidth, dv + k0 * dvWidth,
                               dvWidth);
    }
  }
}

} // namespace

extern "C" void
weft_rt_attention_f32(int64_t heads, int64_t t, int64_t s, int64_t d,
                      int64_t dv, float scale, int32_t causal, const float *q,
                      const float *k, const float *v, float *out, float *lse) {
  int64_t blocks = (t + kBlockQ - 1) / kBlockQ;
#pragma omp parallel
  {
    Scratch scratch(d, dv);
    // Causal blocks further down see more keys: hand them out one by one.
#pragma omp for schedule(dynamic) collapse(2)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t b = 0; b < blocks; ++b)
        forwardBlock(t, s, d, dv, scale, causal != 0, q + h * t * d,
                     k + h * s * d, v + h * s * dv, out + h * t * dv,
                     lse + h * t, b * kBlockQ, scratch);
  }
}

extern "C" void
weft_rt_attention_grad_f32(int64_t heads, int64_t t, int64_t s, int64_t d,
                           int64_t dv, float scale, int32_t causal,
                           const float *dout, const float *q, const float *k,
                           const float *v, const float *out, const float *lse,
                           float *dq, float *dk, float *dvOut) {
#pragma omp parallel
  {
    Scratch scratch(d, dv);
    std::vector<float> delta;
#pragma omp for schedule(dynamic)
    for (int64_t h = 0; h < heads; ++h)
      backwardHead(t, s, d, dv, scale, causal != 0, dout + h * t * dv,
                   q + h * t * d, k + h * s * d, v + h * s * dv,
                   out + h * t * dv, lse + h * t, dq + h * t * d,
                   dk + h * s * d, dvOut + h * s * dv, delta, scratch);
  }
}

//===----------------------------------------------------------------------===//
// bf16 operands (--precision bf16): the f32 kernels on widened copies
//===----------------------------------------------------------------------===//

namespace {

/// A copy of n bf16 elements in f32 (exact).
std::vector<float> widen(const uint16_t *x, int64_t n) {
  std::vector<float> out(n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    out[i] = weft::rt::bf16ToFloat(x[i]);
  return out;
}

/// `x` rounded to bf16 into `out`, as every bf16 result of the step is.
void narrow(const std::vector<float> &x, uint16_t *out) {
  int64_t n = int64_t(x.size());
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; ++i)
    out[i] = weft::rt::floatToBf16(x[i]);
}

} // namespace

// The widened copies cost a pass over q, k, v (and dO, O) per call; the
// [T, S] scores, which the fused op exists to avoid, are never stored.
extern "C" void weft_rt_attention_bf16(int64_t heads, int64_t t, int64_t s,
                                       int64_t d, int64_t dv, float scale,
                                       int32_t causal, const uint16_t *q,
                                       const uint16_t *k, const uint16_t *v,
                                       uint16_t *out, float *lse) {
  std::vector<float> fq = widen(q, heads * t * d), fk = widen(k, heads * s * d),
                     fv = widen(v, heads * s * dv), fo(heads * t * dv);
  weft_rt_attention_f32(heads, t, s, d, dv, scale, causal, fq.data(), fk.data(),
                        fv.data(), fo.data(), lse);
  narrow(fo, out);
}

extern "C" void weft_rt_attention_grad_bf16(
    int64_t heads, int64_t t, int64_t s, int64_t d, int64_t dv, float scale,
    int32_t causal, const uint16_t *dout, const uint16_t *q, const uint16_t *k,
    const uint16_t *v, const uint16_t *out, const float *lse, uint16_t *dq,
    uint16_t *dk, uint16_t *dvOut) {
  std::vector<float> fdo = widen(dout, heads * t * dv),
                     fq = widen(q, heads * t * d), fk = widen(k, heads * s * d),
                     fv = widen(v, heads * s * dv),
                     fo = widen(out, heads * t * dv), gq(fq.size()),
                     gk(fk.size()), gv(fv.size());
  weft_rt_attention_grad_f32(heads, t, s, d, dv, scale, causal, fdo.data(),
                             fq.data(), fk.data(), fv.data(), fo.data(), lse,
                             gq.data(), gk.data(), gv.data());
  narrow(gq, dq);
  narrow(gk, dk);
  narrow(gv, dvOut);
}
