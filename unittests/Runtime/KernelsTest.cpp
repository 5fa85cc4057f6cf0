//===- KernelsTest.cpp - Tests for the runtime's BLAS wrappers ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

namespace {

/// C_b = op(A_b) op(B_b) by the definition, in double.
std::vector<float> reference(int64_t batch, bool ta, bool tb, int64_t m,
                             int64_t n, int64_t k, const float *a, int64_t lda,
                             int64_t sa, const float *b, int64_t ldb,
                             int64_t sb, int64_t ldc, int64_t sc,
                             size_t cSize) {
  std::vector<float> c(cSize, -7.0f);
  for (int64_t bi = 0; bi < batch; ++bi)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p) {
          double av = ta ? a[bi * sa + p * lda + i] : a[bi * sa + i * lda + p];
          double bv = tb ? b[bi * sb + j * ldb + p] : b[bi * sb + p * ldb + j];
          sum += av * bv;
        }
        c[bi * sc + i * ldc + j] = float(sum);
      }
  return c;
}

struct Case {
  int64_t batch, m, n, k;
  bool ta, tb;
  bool broadcastA, broadcastB;
  int64_t padA, padB, padC;
};

void check(const Case &cs) {
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> dist(-1, 1);
  int64_t aRows = cs.ta ? cs.k : cs.m, aCols = cs.ta ? cs.m : cs.k;
  int64_t bRows = cs.tb ? cs.n : cs.k, bCols = cs.tb ? cs.k : cs.n;
  int64_t lda = aCols + cs.padA, ldb = bCols + cs.padB, ldc = cs.n + cs.padC;
  int64_t sa = cs.broadcastA ? 0 : aRows * lda;
  int64_t sb = cs.broadcastB ? 0 : bRows * ldb;
  int64_t sc = cs.m * ldc;
  std::vector<float> a(
      size_t(std::max<int64_t>(1, sa * cs.batch + aRows * lda)));
  std::vector<float> b(
      size_t(std::max<int64_t>(1, sb * cs.batch + bRows * ldb)));
  for (float &v : a)
    v = dist(gen);
  for (float &v : b)
    v = dist(gen);
  size_t cSize = size_t(sc * cs.batch);
  std::vector<float> c(cSize, -7.0f);
  std::vector<float> want =
      reference(cs.batch, cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, sa,
                b.data(), ldb, sb, ldc, sc, cSize);
  weft_rt_sgemm(cs.batch, cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, sa,
                b.data(), ldb, sb, c.data(), ldc, sc);
  for (size_t i = 0; i < cSize; ++i)
    ASSERT_NEAR(c[i], want[i], 1e-4 * (1 + std::fabs(want[i])))
        << "at " << i << " (m=" << cs.m << " n=" << cs.n << " k=" << cs.k
        << " ta=" << cs.ta << " tb=" << cs.tb << ")";
}

TEST(KernelsTest, SgemmMatchesNaiveForEveryTranspose) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      check({3, 5, 7, 4, ta, tb, false, false, 0, 0, 0});
}

TEST(KernelsTest, SgemmBroadcastsZeroStrides) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      check({4, 6, 3, 5, ta, tb, true, false, 0, 0, 0});
      check({4, 6, 3, 5, ta, tb, false, true, 0, 0, 0});
    }
}

TEST(KernelsTest, SgemmHonoursLeadingDimensions) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      check({2, 4, 5, 3, ta, tb, false, false, 2, 3, 1});
}

TEST(KernelsTest, SgemmLargerThanBlockSizes) {
  check({1, 67, 45, 129, false, true, false, false, 0, 0, 0});
  check({2, 33, 70, 64, true, false, true, false, 0, 0, 0});
}

TEST(KernelsTest, SgemmOverwritesNaNs) {
  // beta = 0: whatever C held (even NaN) must not leak into the result.
  std::vector<float> a = {1, 2, 3, 4}, b = {1, 0, 0, 1};
  std::vector<float> c(4, std::numeric_limits<float>::quiet_NaN());
  weft_rt_sgemm(1, 0, 0, 2, 2, 2, a.data(), 2, 0, b.data(), 2, 0, c.data(), 2,
                0);
  EXPECT_EQ(c, a);
}

TEST(KernelsTest, SgemmEmptySumIsZero) {
  std::vector<float> c(6, 5.0f);
  float dummy = 1;
  weft_rt_sgemm(2, 0, 0, 1, 3, 0, &dummy, 0, 0, &dummy, 3, 0, c.data(), 3, 3);
  for (float v : c)
    EXPECT_EQ(v, 0.0f);
}

TEST(KernelsTest, SgemmRowBroadcastThroughZeroLeadingDimension) {
  // lda = 0 repeats one row of A; cblas refuses it, the fallback does not.
  std::vector<float> a = {1, 2}, b = {1, 2, 3, 4}, c(6, 0);
  weft_rt_sgemm(1, 0, 0, 3, 2, 2, a.data(), 0, 0, b.data(), 2, 0, c.data(), 2,
                0);
  EXPECT_EQ(c, (std::vector<float>{7, 10, 7, 10, 7, 10}));
}

} // namespace
