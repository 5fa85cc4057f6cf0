//===- KernelsTest.cpp - Tests for the runtime's BLAS wrappers ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Kernels.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <dlfcn.h>
#include <string>
#include <cstring>
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

/// The bf16 nearest to `f` (ties to even), as its bits; and back, exactly.
uint16_t toBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

/// Which runtime GEMM a case calls: f32 in and out, bf16 in and f32 out,
/// bf16 in and out.
/// `count` values uniform in [-1, 1) from a generator seeded with `seed`.
std::vector<float> uniform(int64_t count, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> out(static_cast<size_t>(count));
  for (float &x : out)
    x = dist(rng);
  return out;
}

enum class Gemm { S, SB, SBToBf16 };

struct Case {
  int64_t batch, m, n, k;
  bool ta, tb;
  bool broadcastA, broadcastB;
  int64_t padA, padB, padC;
};

void check(const Case &cs, Gemm gemm = Gemm::S) {
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
  // bf16 cases: the f32 inputs are bf16 values, so the reference is exact.
  std::vector<uint16_t> ah(a.size()), bh(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = fromBf16(ah[i] = toBf16(dist(gen)));
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = fromBf16(bh[i] = toBf16(dist(gen)));
  size_t cSize = size_t(sc * cs.batch);
  std::vector<float> c(cSize, -7.0f);
  std::vector<float> want =
      reference(cs.batch, cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, sa,
                b.data(), ldb, sb, ldc, sc, cSize);
  double tolerance = 1e-4;
  if (gemm == Gemm::S) {
    weft_rt_sgemm(cs.batch, cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, sa,
                  b.data(), ldb, sb, c.data(), ldc, sc);
  } else if (gemm == Gemm::SB) {
    weft_rt_sbgemm(cs.batch, cs.ta, cs.tb, cs.m, cs.n, cs.k, ah.data(), lda,
                   sa, bh.data(), ldb, sb, c.data(), ldc, sc);
  } else {
    // Rounded to bf16: within half a bf16 ulp (2^-8 relative) of the f32
    // sum, which is within the f32 tolerance of the exact one.
    std::vector<uint16_t> ch(cSize, toBf16(-7.0f));
    weft_rt_sbgemm_bf16(cs.batch, cs.ta, cs.tb, cs.m, cs.n, cs.k, ah.data(),
                        lda, sa, bh.data(), ldb, sb, ch.data(), ldc, sc);
    for (size_t i = 0; i < cSize; ++i)
      c[i] = fromBf16(ch[i]);
    tolerance = 1.0 / 256 + 1e-4;
  }
  for (size_t i = 0; i < cSize; ++i)
    ASSERT_NEAR(c[i], want[i], tolerance * (1 + std::fabs(want[i])))
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

/// weft_rt_sgemm_batch_sum against the sum over the batch of the naive
/// products (in double), into a C that starts as NaN.
void checkBatchSum(const Case &cs) {
  std::mt19937 gen(7);
  std::uniform_real_distribution<float> dist(-1, 1);
  int64_t aRows = cs.ta ? cs.k : cs.m, aCols = cs.ta ? cs.m : cs.k;
  int64_t bRows = cs.tb ? cs.n : cs.k, bCols = cs.tb ? cs.k : cs.n;
  int64_t lda = aCols + cs.padA, ldb = bCols + cs.padB, ldc = cs.n + cs.padC;
  int64_t sa = cs.broadcastA ? 0 : aRows * lda;
  int64_t sb = cs.broadcastB ? 0 : bRows * ldb;
  std::vector<float> a(
      size_t(std::max<int64_t>(1, sa * cs.batch + aRows * lda)));
  std::vector<float> b(
      size_t(std::max<int64_t>(1, sb * cs.batch + bRows * ldb)));
  for (float &v : a)
    v = dist(gen);
  for (float &v : b)
    v = dist(gen);
  // Each product by itself, then summed over the batch in double.
  int64_t sc = cs.m * ldc;
  size_t all = size_t(std::max<int64_t>(1, sc * cs.batch));
  std::vector<float> each =
      reference(cs.batch, cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(), lda, sa,
                b.data(), ldb, sb, ldc, sc, all);
  size_t cSize = size_t(cs.m * ldc);
  std::vector<float> c(cSize, std::numeric_limits<float>::quiet_NaN());
  weft_rt_sgemm_batch_sum(cs.batch, cs.ta, cs.tb, cs.m, cs.n, cs.k, a.data(),
                          lda, sa, b.data(), ldb, sb, c.data(), ldc);
  for (int64_t i = 0; i < cs.m; ++i)
    for (int64_t j = 0; j < cs.n; ++j) {
      double want = 0, scale = 1;
      for (int64_t bi = 0; bi < cs.batch; ++bi) {
        double v = each[size_t(bi * sc + i * ldc + j)];
        want += v;
        scale += std::fabs(v);
      }
      ASSERT_NEAR(c[size_t(i * ldc + j)], want, 1e-5 * scale * (1 + cs.k))
          << "at (" << i << ", " << j << ") batch=" << cs.batch
          << " m=" << cs.m << " n=" << cs.n << " k=" << cs.k
          << " ta=" << cs.ta << " tb=" << cs.tb;
    }
  // The row padding of C is not written.
  for (int64_t i = 0; i < cs.m; ++i)
    for (int64_t j = cs.n; j < ldc; ++j)
      ASSERT_TRUE(std::isnan(c[size_t(i * ldc + j)]));
}

TEST(KernelsTest, SgemmBatchSumMatchesNaiveForEveryTranspose) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      checkBatchSum({3, 5, 7, 4, ta, tb, false, false, 0, 0, 0});
      checkBatchSum({1, 5, 7, 4, ta, tb, false, false, 0, 0, 0});
      // Leading dimensions wider than the rows, C's too.
      checkBatchSum({4, 4, 5, 3, ta, tb, false, false, 2, 3, 1});
      // One side shared by the whole batch (stride 0).
      checkBatchSum({4, 6, 3, 5, ta, tb, true, false, 0, 0, 0});
      checkBatchSum({4, 6, 3, 5, ta, tb, false, true, 0, 0, 0});
    }
  // A convolution's filter gradient: dW[O, C*9] = sum_n dY_n cols_n^T.
  checkBatchSum({8, 16, 27, 100, false, true, false, false, 0, 0, 0});
  // Batches of 8 or more sum in 8 chunks, uneven ones here, into a C with
  // padded rows.
  checkBatchSum({13, 16, 27, 100, false, true, false, false, 0, 0, 3});
  checkBatchSum({64, 5, 7, 4, true, false, true, false, 1, 0, 0});
}

// weft-profile-cluster measures one thread's GEMMs in a process whose
// OpenMP team has every core: the GEMM threads set that team too, which
// oneDNN's products and the dealt batches run on.
TEST(KernelsTest, GemmThreadsSetTheTeamTheLibrariesRunOn) {
  weft_rt_set_gemm_threads(1);
  EXPECT_EQ(1, omp_get_max_threads());
  weft_rt_set_gemm_threads(2);
  EXPECT_EQ(2, omp_get_max_threads());
}

// The chunks' order depends on the batch, not on the team: one thread and
// two give the same bits.
TEST(KernelsTest, SgemmBatchSumIsTheSameOnAnyTeam) {
  const int64_t batch = 13, m = 16, n = 27, k = 100;
  std::vector<float> a = uniform(batch * m * k, 3),
                     b = uniform(batch * n * k, 4);
  std::vector<float> one(m * n), two(m * n);
  omp_set_num_threads(1);
  weft_rt_sgemm_batch_sum(batch, 0, 1, m, n, k, a.data(), k, m * k, b.data(), k,
                          n * k, one.data(), n);
  omp_set_num_threads(2);
  weft_rt_sgemm_batch_sum(batch, 0, 1, m, n, k, a.data(), k, m * k, b.data(), k,
                          n * k, two.data(), n);
  EXPECT_EQ(one, two);
}

TEST(KernelsTest, SgemmBatchSumEmptyIsZero) {
  // No batch, or K = 0: C becomes zeros whatever it held.
  float dummy = 1;
  std::vector<float> c(6, std::numeric_limits<float>::quiet_NaN());
  weft_rt_sgemm_batch_sum(0, 0, 0, 2, 3, 4, &dummy, 4, 4, &dummy, 3, 12,
                          c.data(), 3);
  EXPECT_EQ(c, std::vector<float>(6, 0.0f));
  std::vector<float> d(6, 5.0f);
  weft_rt_sgemm_batch_sum(3, 0, 0, 2, 3, 0, &dummy, 0, 0, &dummy, 3, 0,
                          d.data(), 3);
  EXPECT_EQ(d, std::vector<float>(6, 0.0f));
}

TEST(KernelsTest, SbgemmMatchesNaive) {
  for (Gemm gemm : {Gemm::SB, Gemm::SBToBf16}) {
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check({3, 5, 7, 4, ta, tb, false, false, 0, 0, 0}, gemm);
        check({2, 4, 5, 3, ta, tb, false, false, 2, 3, 1}, gemm);
        check({4, 6, 3, 5, ta, tb, true, false, 0, 0, 0}, gemm);
      }
    check({1, 67, 45, 129, false, true, false, false, 0, 0, 0}, gemm);
    check({2, 33, 70, 64, true, false, true, false, 0, 0, 0}, gemm);
  }
}

TEST(KernelsTest, SbgemmOverwritesNaNsAndEmptySums) {
  const uint16_t one = 0x3F80, two = 0x4000, three = 0x4040, four = 0x4080;
  std::vector<uint16_t> a = {one, two, three, four}, b = {one, 0, 0, one};
  std::vector<float> c(4, std::numeric_limits<float>::quiet_NaN());
  weft_rt_sbgemm(1, 0, 0, 2, 2, 2, a.data(), 2, 0, b.data(), 2, 0, c.data(), 2,
                 0);
  EXPECT_EQ(c, (std::vector<float>{1, 2, 3, 4}));
  std::vector<uint16_t> ch(6, one);
  weft_rt_sbgemm_bf16(2, 0, 0, 1, 3, 0, a.data(), 0, 0, b.data(), 3, 0,
                      ch.data(), 3, 3);
  EXPECT_EQ(ch, std::vector<uint16_t>(6, 0));
}

// A batch of small products is dealt over the OpenMP team, one product
// per thread (a convolution's per-image GEMMs): each must come out as it
// does alone, bit for bit, whichever thread computes it.
TEST(KernelsTest, SmallBatchesDealtOverTheTeamMatchOneByOne) {
  omp_set_num_threads(2);
  const int64_t batch = 6, m = 8, n = 12, k = 10;
  std::vector<float> a = uniform(batch * m * k, 7),
                     b = uniform(batch * k * n, 8);
  std::vector<uint16_t> ah(a.size()), bh(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ah[i] = toBf16(a[i]);
  for (size_t i = 0; i < b.size(); ++i)
    bh[i] = toBf16(b[i]);
  // `gemm` on the whole batch into `all`, then on each product alone.
  auto batchMatchesAlone = [&](const char *name, auto gemm, const auto &x,
                               const auto &y, auto &all, auto &one) {
    SCOPED_TRACE(name);
    gemm(batch, 0, 0, m, n, k, x.data(), k, m * k, y.data(), n, k * n,
         all.data(), n, m * n);
    for (int64_t i = 0; i < batch; ++i)
      gemm(1, 0, 0, m, n, k, x.data() + i * m * k, k, 0, y.data() + i * k * n,
           n, 0, one.data() + i * m * n, n, 0);
    EXPECT_EQ(all, one);
  };
  std::vector<float> all(batch * m * n), one(batch * m * n);
  batchMatchesAlone("sgemm", weft_rt_sgemm, a, b, all, one);
  batchMatchesAlone("sbgemm", weft_rt_sbgemm, ah, bh, all, one);
  std::vector<uint16_t> allh(batch * m * n), oneh(batch * m * n);
  batchMatchesAlone("sbgemm_bf16", weft_rt_sbgemm_bf16, ah, bh, allh, oneh);
  // And the batch as a whole is the product (naive reference).
  check({batch, m, n, k, false, false, false, false, 0, 0, 0}, Gemm::S);
}

TEST(KernelsTest, SbgemmToBf16RoundsToNearestEven) {
  // Each x is an f32 that bf16 cannot hold (bf16's ulp at 1 is 2^-7),
  // summed from two bf16 values: A = (1, 1), B = (hi, lo), K = 2. 1 + 2^-8
  // is a tie (to even: 1), 1 + 3 * 2^-8 one too (to even: 1 + 2^-6),
  // 1 + 2^-8 + 2^-12 is past it (up: 1 + 2^-7).
  auto bits = [](float f) {
    uint32_t u;
    std::memcpy(&u, &f, sizeof(u));
    return u;
  };
  std::vector<float> xs = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,
                           1.0f + 0x1p-8f + 0x1p-12f, -(1.0f + 0x1p-8f)};
  std::vector<uint16_t> want = {0x3F80, 0x3F82, 0x3F81, 0xBF80};
  const uint16_t one = 0x3F80;
  std::vector<uint16_t> a = {one, one};
  for (size_t i = 0; i < xs.size(); ++i) {
    // hi: x truncated to bf16; lo = x - hi, exact in bf16 for these x.
    uint16_t hi = uint16_t(bits(xs[i]) >> 16);
    uint16_t lo = toBf16(xs[i] - fromBf16(hi));
    ASSERT_EQ(fromBf16(hi) + fromBf16(lo), xs[i]);
    std::vector<uint16_t> b = {hi, lo}, c = {0};
    weft_rt_sbgemm_bf16(1, 0, 0, 1, 1, 2, a.data(), 2, 0, b.data(), 1, 0,
                        c.data(), 1, 0);
    EXPECT_EQ(c[0], want[i]) << "x = " << xs[i];
  }
}

} // namespace

// oneDNN multiplies wherever it loads unless WEFT_RT_GEMM says otherwise
// (this suite runs once each way, unittests/Runtime/CMakeLists.txt).
TEST(KernelsTest, GemmLibraryIsOneDnnWhereItLoads) {
  const char *forced = std::getenv("WEFT_RT_GEMM");
  std::string library = weft_rt_gemm_library();
  if (forced && std::string(forced) == "openblas") {
    EXPECT_EQ(library, "OpenBLAS");
    return;
  }
  void *oneDnn = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  EXPECT_EQ(library, oneDnn ? "oneDNN" : "OpenBLAS");
  if (!oneDnn)
    GTEST_SKIP() << "libdnnl.so.2 (Debian: libdnnl2) does not load here; "
                    "f32 GEMMs run on OpenBLAS";
  dlclose(oneDnn);
}

// C += op(A) op(B) keeps what C held and adds the product (the fused
// attention's backward sums its block products this way).
TEST(KernelsTest, SgemmAccumulateAddsToC) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      const int64_t m = 3, n = 5, k = 4;
      std::vector<float> a(m * k), b(k * n), c(m * n), expect(m * n);
      for (size_t i = 0; i < a.size(); ++i)
        a[i] = float(i % 7) - 3.0f;
      for (size_t i = 0; i < b.size(); ++i)
        b[i] = float(i % 5) * 0.5f - 1.0f;
      for (int64_t i = 0; i < m; ++i)
        for (int64_t j = 0; j < n; ++j) {
          c[i * n + j] = float(i * n + j);
          double sum = 0;
          for (int64_t p = 0; p < k; ++p)
            sum += double(ta ? a[p * m + i] : a[i * k + p]) *
                   double(tb ? b[j * k + p] : b[p * n + j]);
          expect[i * n + j] = float(double(c[i * n + j]) + sum);
        }
      weft_rt_sgemm_accumulate(ta, tb, m, n, k, a.data(), ta ? m : k, b.data(),
                               tb ? k : n, c.data(), n);
      for (int64_t i = 0; i < m * n; ++i)
        EXPECT_FLOAT_EQ(expect[i], c[i]) << "ta=" << ta << " tb=" << tb;
    }
}
