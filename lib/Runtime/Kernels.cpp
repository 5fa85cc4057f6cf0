//===- Kernels.cpp - Runtime kernels that generated code calls ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weft_rt_sgemm forwards each matrix of a batch to OpenBLAS. Shapes that
// cblas cannot express (a dimension or leading dimension past INT_MAX, or a
// leading dimension smaller than a row, as when a stride-0 row is broadcast)
// take a plain loop instead, so every call the header allows is computed.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cstring>

namespace {

/// Whether cblas_sgemm accepts these sizes: its integers are `blasint`
/// (32-bit in Debian's OpenBLAS) and it requires each leading dimension to
/// be at least the stored row length.
bool fitsCblas(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
               int64_t lda, int64_t ldb, int64_t ldc) {
  auto fits = [](int64_t v) { return v >= 0 && v <= INT_MAX; };
  int64_t aCols = transA ? m : k, bCols = transB ? k : n;
  return fits(m) && fits(n) && fits(k) && fits(lda) && fits(ldb) && fits(ldc) &&
         lda >= std::max<int64_t>(1, aCols) &&
         ldb >= std::max<int64_t>(1, bCols) && ldc >= std::max<int64_t>(1, n);
}

/// C = op(A) op(B) by definition; accumulates in double like the reference
/// evaluator, so this path is never less accurate than BLAS.
void naiveGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
               const float *a, int64_t lda, const float *b, int64_t ldb,
               float *c, int64_t ldc) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        float av = transA ? a[p * lda + i] : a[i * lda + p];
        float bv = transB ? b[j * ldb + p] : b[p * ldb + j];
        sum += double(av) * double(bv);
      }
      c[i * ldc + j] = float(sum);
    }
  }
}

} // namespace

extern "C" void weft_rt_sgemm(int64_t batch, int32_t transA, int32_t transB,
                              int64_t m, int64_t n, int64_t k, const float *a,
                              int64_t lda, int64_t strideA, const float *b,
                              int64_t ldb, int64_t strideB, float *c,
                              int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  bool ta = transA != 0, tb = transB != 0;
  bool useBlas = k > 0 && fitsCblas(ta, tb, m, n, k, lda, ldb, ldc);
  for (int64_t i = 0; i < batch; ++i) {
    const float *ai = a + i * strideA;
    const float *bi = b + i * strideB;
    float *ci = c + i * strideC;
    if (k <= 0) {
      // An empty sum: C is zero. BLAS implementations disagree on K = 0.
      for (int64_t r = 0; r < m; ++r)
        std::memset(ci + r * ldc, 0, size_t(n) * sizeof(float));
    } else if (useBlas) {
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                  tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), 1.0f,
                  ai, int(lda), bi, int(ldb), 0.0f, ci, int(ldc));
    } else {
      naiveGemm(ta, tb, m, n, k, ai, lda, bi, ldb, ci, ldc);
    }
  }
}
