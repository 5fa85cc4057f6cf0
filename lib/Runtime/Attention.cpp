//===- Attention.cpp - Fused attention kernels ----------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Flash-style attention on the CPU (include/weft/Runtime/Attention.h). A
// block of kBlockQ query rows meets the keys kBlockK at a time: the block's
// scores live in a kBlockQ x kBlockK scratch, the softmax keeps a running
// maximum and sum per row and rescales the row's accumulated output when
// the maximum grows, so the [T, S] scores never reach memory. Causal blocks
// wholly above the diagonal are never visited.
//
// The backward recomputes each block's probabilities from the saved
// log-sum-exp and accumulates the three adjoints in the same visit; it runs
// one (batch, head) per task so that the key and value adjoints need no
// synchronization.
//
// Every inner loop runs over a contiguous row (keys of a transposed key
// block, or the feature axis) with no reduction, so GCC vectorizes it; the
// exponential is a branch-free polynomial for the same reason. The entry
// points are compiled for AVX-512, AVX2+FMA and baseline x86-64 and the
// loader picks the best the CPU has (GCC's target_clones).
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Attention.h"

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

// 64 keys of f32 are one AVX-512 cache line of scores per row times 4; a
// key block a multiple of the query block keeps every causal block that is
// visited non-empty in every row (its first key is at most the block's
// first query).
constexpr int64_t kBlockQ = 32;
constexpr int64_t kBlockK = 64;
static_assert(kBlockK % kBlockQ == 0, "see above");

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

/// e^x for x <= 0 (and -inf), within 2 ulp where the result is normal:
/// Cody-Waite reduction to r in [-ln2/2, ln2/2] and Cephes' expf
/// polynomial. Below -87.3 it returns 0 or a tiny normal, which is what
/// a probability that small contributes anyway.
inline float expNonPositive(float x) {
  x = std::max(x, -88.0f);
  float n = std::floor(x * 1.44269504088896341f + 0.5f);
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  // n >= -127: a biased exponent of 0 gives 0 (n = -127 only for x below
  // about -87.7).
  int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float two;
  std::memcpy(&two, &bits, sizeof(two));
  return p * two;
}

/// How many of the block's `cols` keys starting at `key0` query row
/// `row` sees.
inline int64_t visibleKeys(bool causal, int64_t row, int64_t key0,
                           int64_t cols) {
  if (!causal)
    return cols;
  return std::min(cols, row - key0 + 1);
}

/// The keys the queries of [q0, q1) may see: [0, end).
inline int64_t keyEnd(bool causal, int64_t q1, int64_t s) {
  return causal ? std::min(s, q1) : s;
}

/// kt[c][j] = scale * rows[j][c] for j < cols, zero beyond (to kBlockK):
/// a transposed block, so that score rows accumulate over contiguous keys.
inline void packTransposed(const float *__restrict rows, int64_t width,
                           int64_t cols, float scale, float *__restrict kt) {
  for (int64_t c = 0; c < width; ++c) {
    float *dst = kt + c * kBlockK;
    for (int64_t j = 0; j < cols; ++j)
      dst[j] = scale * rows[j * width + c];
    for (int64_t j = cols; j < kBlockK; ++j)
      dst[j] = 0.0f;
  }
}

/// srow[j] = sum_c a[c] * bt[c][j] over the kBlockK columns.
inline void rowTimesBlock(const float *__restrict a, const float *__restrict bt,
                          int64_t width, float *__restrict srow) {
  float acc[kBlockK] = {};
  for (int64_t c = 0; c < width; ++c) {
    float x = a[c];
    const float *b = bt + c * kBlockK;
#pragma omp simd
    for (int64_t j = 0; j < kBlockK; ++j)
      acc[j] += x * b[j];
  }
  std::memcpy(srow, acc, sizeof(acc));
}

/// y[c] += x * row[c].
inline void axpy(float x, const float *__restrict row, int64_t n,
                 float *__restrict y) {
#pragma omp simd
  for (int64_t c = 0; c < n; ++c)
    y[c] += x * row[c];
}

/// The forward of one (head, query block) into out and lse.
struct ForwardScratch {
  std::vector<float> kt, scores, acc;
  std::vector<float> rowMax, rowSum;
  ForwardScratch(int64_t d, int64_t dv)
      : kt(d * kBlockK), scores(kBlockQ * kBlockK), acc(kBlockQ * dv),
        rowMax(kBlockQ), rowSum(kBlockQ) {}
};

inline void forwardBlock(int64_t t, int64_t s, int64_t d, int64_t dv,
                         float scale, bool causal, const float *q,
                         const float *k, const float *v, float *out,
                         float *lse, int64_t q0, ForwardScratch &w) {
  int64_t q1 = std::min(t, q0 + kBlockQ), rows = q1 - q0;
  std::fill(w.acc.begin(), w.acc.begin() + rows * dv, 0.0f);
  std::fill(w.rowMax.begin(), w.rowMax.end(), kNegInf);
  std::fill(w.rowSum.begin(), w.rowSum.end(), 0.0f);
  int64_t end = keyEnd(causal, q1, s);
  for (int64_t k0 = 0; k0 < end; k0 += kBlockK) {
    int64_t cols = std::min(kBlockK, end - k0);
    packTransposed(k + k0 * d, d, cols, scale, w.kt.data());
    for (int64_t i = 0; i < rows; ++i) {
      int64_t seen = visibleKeys(causal, q0 + i, k0, cols);
      if (seen <= 0)
        continue;
      float *srow = w.scores.data() + i * kBlockK;
      rowTimesBlock(q + (q0 + i) * d, w.kt.data(), d, srow);
      for (int64_t j = seen; j < kBlockK; ++j)
        srow[j] = kNegInf;
      float blockMax = kNegInf;
      for (int64_t j = 0; j < kBlockK; ++j)
        blockMax = std::max(blockMax, srow[j]);
      float newMax = std::max(w.rowMax[i], blockMax);
      float rescale = expNonPositive(w.rowMax[i] - newMax);
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (int64_t j = 0; j < kBlockK; ++j) {
        float p = expNonPositive(srow[j] - newMax);
        srow[j] = p;
        sum += p;
      }
      w.rowSum[i] = w.rowSum[i] * rescale + sum;
      w.rowMax[i] = newMax;
      float *arow = w.acc.data() + i * dv;
      if (rescale != 1.0f)
        for (int64_t c = 0; c < dv; ++c)
          arow[c] *= rescale;
      for (int64_t j = 0; j < seen; ++j)
        axpy(srow[j], v + (k0 + j) * dv, dv, arow);
    }
  }
  for (int64_t i = 0; i < rows; ++i) {
    float inv = 1.0f / w.rowSum[i];
    const float *arow = w.acc.data() + i * dv;
    float *orow = out + (q0 + i) * dv;
    for (int64_t c = 0; c < dv; ++c)
      orow[c] = arow[c] * inv;
    lse[q0 + i] = w.rowMax[i] + std::log(w.rowSum[i]);
  }
}

/// The backward of one head.
struct BackwardScratch {
  std::vector<float> kt, vt, p, ds, dk, dv, delta;
  BackwardScratch(int64_t t, int64_t d, int64_t dvWidth)
      : kt(d * kBlockK), vt(dvWidth * kBlockK), p(kBlockK), ds(kBlockK),
        dk(kBlockK * d), dv(kBlockK * dvWidth), delta(t) {}
};

inline void backwardHead(int64_t t, int64_t s, int64_t d, int64_t dvWidth,
                         float scale, bool causal, const float *dout,
                         const float *q, const float *k, const float *v,
                         const float *out, const float *lse, float *dq,
                         float *dk, float *dv, BackwardScratch &w) {
  // delta[i] = dout[i] . out[i] = sum_j p[i][j] dp[i][j]: the softmax
  // adjoint's row term.
  for (int64_t i = 0; i < t; ++i) {
    float sum = 0.0f;
    const float *g = dout + i * dvWidth, *o = out + i * dvWidth;
#pragma omp simd reduction(+ : sum)
    for (int64_t c = 0; c < dvWidth; ++c)
      sum += g[c] * o[c];
    w.delta[i] = sum;
  }
  std::fill(dq, dq + t * d, 0.0f);
  for (int64_t k0 = 0; k0 < s; k0 += kBlockK) {
    int64_t cols = std::min(kBlockK, s - k0);
    packTransposed(k + k0 * d, d, cols, scale, w.kt.data());
    packTransposed(v + k0 * dvWidth, dvWidth, cols, 1.0f, w.vt.data());
    std::fill(w.dk.begin(), w.dk.end(), 0.0f);
    std::fill(w.dv.begin(), w.dv.end(), 0.0f);
    // Causal: rows before the block's first key see none of it.
    for (int64_t i = causal ? k0 : 0; i < t; ++i) {
      int64_t seen = visibleKeys(causal, i, k0, cols);
      if (seen <= 0)
        continue;
      const float *qrow = q + i * d, *grow = dout + i * dvWidth;
      rowTimesBlock(qrow, w.kt.data(), d, w.p.data());
      float rowLse = lse[i];
      for (int64_t j = 0; j < kBlockK; ++j)
        w.p[j] = j < seen ? expNonPositive(w.p[j] - rowLse) : 0.0f;
      rowTimesBlock(grow, w.vt.data(), dvWidth, w.ds.data());
      float rowDelta = w.delta[i];
#pragma omp simd
      for (int64_t j = 0; j < kBlockK; ++j)
        w.ds[j] = scale * w.p[j] * (w.ds[j] - rowDelta);
      float *dqrow = dq + i * d;
      for (int64_t j = 0; j < seen; ++j) {
        axpy(w.p[j], grow, dvWidth, w.dv.data() + j * dvWidth);
        axpy(w.ds[j], qrow, d, w.dk.data() + j * d);
        axpy(w.ds[j], k + (k0 + j) * d, d, dqrow);
      }
    }
    std::memcpy(dk + k0 * d, w.dk.data(), cols * d * sizeof(float));
    std::memcpy(dv + k0 * dvWidth, w.dv.data(),
                cols * dvWidth * sizeof(float));
  }
}

} // namespace

extern "C" WEFT_MULTIVERSION void
weft_rt_attention_f32(int64_t heads, int64_t t, int64_t s, int64_t d,
                      int64_t dv, float scale, int32_t causal, const float *q,
                      const float *k, const float *v, float *out, float *lse) {
  int64_t blocks = (t + kBlockQ - 1) / kBlockQ;
#pragma omp parallel
  {
    ForwardScratch scratch(d, dv);
    // Causal blocks further down see more keys: hand them out one by one.
#pragma omp for schedule(dynamic) collapse(2)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t b = 0; b < blocks; ++b)
        forwardBlock(t, s, d, dv, scale, causal != 0, q + h * t * d,
                     k + h * s * d, v + h * s * dv, out + h * t * dv,
                     lse + h * t, b * kBlockQ, scratch);
  }
}

extern "C" WEFT_MULTIVERSION void
weft_rt_attention_grad_f32(int64_t heads, int64_t t, int64_t s, int64_t d,
                           int64_t dv, float scale, int32_t causal,
                           const float *dout, const float *q, const float *k,
                           const float *v, const float *out, const float *lse,
                           float *dq, float *dk, float *dvOut) {
#pragma omp parallel
  {
    BackwardScratch scratch(t, d, dv);
#pragma omp for schedule(dynamic)
    for (int64_t h = 0; h < heads; ++h)
      backwardHead(t, s, d, dv, scale, causal != 0, dout + h * t * dv,
                   q + h * t * d, k + h * s * d, v + h * s * dv,
                   out + h * t * dv, lse + h * t, dq + h * t * d,
                   dk + h * s * d, dvOut + h * s * dv, scratch);
  }
}
