//===- Kernels.cpp - Runtime kernels that generated code calls ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weft_rt_sgemm forwards each matrix of a batch to the f32 GEMM library of
// the process, chosen once (WEFT_RT_GEMM=onednn|openblas forces one):
//  - oneDNN's dnnl_sgemm from libdnnl.so.2 (dlopen'ed) where it loads: its
//    JIT picks the kernels for the CPU it runs on, whatever OpenBLAS was
//    told (this environment sets OPENBLAS_CORETYPE=Haswell on an AVX-512
//    CPU), and measured 1.2-2.4x OpenBLAS's throughput on the GEMM shapes
//    of a transformer step on 2 threads (bench/RESULTS.md);
//  - OpenBLAS's cblas_sgemm otherwise.
// Both run on the process's one OpenMP team (oneDNN's and OpenBLAS's
// OpenMP builds share it). Shapes neither can express (a leading dimension
// smaller than a row, as when a stride-0 row is broadcast; for cblas also a
// size past INT_MAX) take a plain loop instead, so every call the header
// allows is computed.
//
// weft_rt_sbgemm and weft_rt_sbgemm_bf16 multiply bf16 matrices with f32
// products and sums, through the first of these the process can load
// (chosen once; WEFT_RT_BF16_GEMM=sbgemm|onednn|f32 forces one):
//  - cblas_sbgemm, where the loaded OpenBLAS exports it (built with
//    BUILD_BFLOAT16; Debian's 0.3.21 is not);
//  - oneDNN's dnnl_gemm_bf16bf16f32 from libdnnl.so.2 (dlopen'ed; its
//    AVX512-BF16 kernels run where the CPU has them);
//  - A and B widened to f32 (exactly) in a per-thread scratch, then
//    cblas_sgemm: the same result at f32 GEMM speed.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Kernels.h"

#include "weft/Runtime/Bf16.h"

#include <cblas.h>
#include <dlfcn.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace {

/// Whether sizes and leading dimensions describe row-major matrices a BLAS
/// interface with 64-bit integers (oneDNN's) accepts: each leading
/// dimension at least the stored row length.
bool fitsRowMajor(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
                  int64_t lda, int64_t ldb, int64_t ldc) {
  int64_t aCols = transA ? m : k, bCols = transB ? k : n;
  return m >= 0 && n >= 0 && k >= 0 && lda >= std::max<int64_t>(1, aCols) &&
         ldb >= std::max<int64_t>(1, bCols) && ldc >= std::max<int64_t>(1, n);
}

/// Whether cblas_sgemm accepts these sizes: as fitsRowMajor, and its
/// integers are `blasint` (32-bit in Debian's OpenBLAS).
bool fitsCblas(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
               int64_t lda, int64_t ldb, int64_t ldc) {
  auto fits = [](int64_t v) { return v <= INT_MAX; };
  return fitsRowMajor(transA, transB, m, n, k, lda, ldb, ldc) && fits(m) &&
         fits(n) && fits(k) && fits(lda) && fits(ldb) && fits(ldc);
}

/// C = op(A) op(B) (+ C when `accumulate`) by definition; accumulates in
/// double like the reference evaluator, so this path is never less accurate
/// than BLAS.
void naiveGemm(bool transA, bool transB, int64_t m, int64_t n, int64_t k,
               const float *a, int64_t lda, const float *b, int64_t ldb,
               float *c, int64_t ldc, bool accumulate = false) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = accumulate ? double(c[i * ldc + j]) : 0.0;
      for (int64_t p = 0; p < k; ++p) {
        float av = transA ? a[p * lda + i] : a[i * lda + p];
        float bv = transB ? b[j * ldb + p] : b[p * ldb + j];
        sum += double(av) * double(bv);
      }
      c[i * ldc + j] = float(sum);
    }
  }
}

/// libdnnl.so.2, opened once for the f32 and bf16 GEMMs; null when the
/// process cannot load it.
void *oneDnnLibrary() {
  static void *const lib = dlopen("libdnnl.so.2", RTLD_NOW | RTLD_LOCAL);
  return lib;
}

/// oneDNN's extern "C" dnnl_sgemm (row-major; dnnl_dim_t is int64_t);
/// returns dnnl_status_t, 0 on success.
using DnnlSgemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float,
                            const float *, int64_t, const float *, int64_t,
                            float, float *, int64_t);

/// oneDNN's f32 GEMM when this process uses it, else null (OpenBLAS).
DnnlSgemmFn f32Library() {
  static const DnnlSgemmFn fn = []() -> DnnlSgemmFn {
    const char *forced = std::getenv("WEFT_RT_GEMM");
    std::string want = forced ? forced : "";
    if (!want.empty() && want != "onednn" && want != "openblas") {
      std::fprintf(stderr,
                   "weft: WEFT_RT_GEMM=%s is not onednn or openblas; using "
                   "oneDNN where it loads, else OpenBLAS\n",
                   want.c_str());
      want.clear();
    }
    if (want == "openblas")
      return nullptr;
    DnnlSgemmFn found = nullptr;
    if (void *lib = oneDnnLibrary())
      found = reinterpret_cast<DnnlSgemmFn>(dlsym(lib, "dnnl_sgemm"));
    if (!found && want == "onednn")
      std::fprintf(stderr,
                   "weft: WEFT_RT_GEMM=onednn, but oneDNN (libdnnl.so.2, "
                   "Debian: libdnnl2) does not load in this process; f32 "
                   "GEMMs run on OpenBLAS\n");
    return found;
  }();
  return fn;
}

/// One f32 matrix product C = op(A) op(B), or C += op(A) op(B) when
/// `accumulate` (beta = 1): oneDNN or cblas_sgemm where they can express
/// the call, the loop otherwise; K = 0 gives zeros, or leaves C (BLAS
/// implementations disagree on it).
void sgemmOne(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
              const float *a, int64_t lda, const float *b, int64_t ldb,
              float *c, int64_t ldc, bool accumulate = false) {
  DnnlSgemmFn oneDnn = f32Library();
  float beta = accumulate ? 1.0f : 0.0f;
  if (k <= 0) {
    if (!accumulate)
      for (int64_t r = 0; r < m; ++r)
        std::memset(c + r * ldc, 0, size_t(n) * sizeof(float));
  } else if (oneDnn && fitsRowMajor(ta, tb, m, n, k, lda, ldb, ldc) &&
             oneDnn(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b,
                    ldb, beta, c, ldc) == 0) {
    return;
  } else if (fitsCblas(ta, tb, m, n, k, lda, ldb, ldc)) {
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), 1.0f,
                a, int(lda), b, int(ldb), beta, c, int(ldc));
  } else {
    naiveGemm(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, accumulate);
  }
}

/// A row-major bf16 GEMM C = op(A) op(B) (beta = 0) of a library; false
/// when the library refused the call.
using Bf16GemmFn = bool (*)(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                            const uint16_t *a, int64_t lda, const uint16_t *b,
                            int64_t ldb, float *c, int64_t ldc);

using SbgemmFn = decltype(&cblas_sbgemm);
SbgemmFn sbgemmSymbol = nullptr;
bool viaSbgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
               const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
               float *c, int64_t ldc) {
  if (!fitsCblas(ta, tb, m, n, k, lda, ldb, ldc))
    return false;
  sbgemmSymbol(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
               tb ? CblasTrans : CblasNoTrans, int(m), int(n), int(k), 1.0f, a,
               int(lda), b, int(ldb), 0.0f, c, int(ldc));
  return true;
}

/// oneDNN's extern "C" dnnl_gemm_bf16bf16f32 (row-major, as dnnl_sgemm);
/// returns dnnl_status_t, 0 on success.
using DnnlGemmFn = int (*)(char, char, int64_t, int64_t, int64_t, float,
                           const uint16_t *, int64_t, const uint16_t *,
                           int64_t, float, float *, int64_t);
DnnlGemmFn dnnlSymbol = nullptr;
bool viaOneDnn(bool ta, bool tb, int64_t m, int64_t n, int64_t k,
               const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb,
               float *c, int64_t ldc) {
  if (!fitsCblas(ta, tb, m, n, k, lda, ldb, ldc))
    return false;
  return dnnlSymbol(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, 1.0f, a, lda, b,
                    ldb, 0.0f, c, ldc) == 0;
}

/// The bf16 GEMM library of this process, or null for the f32 fallback;
/// looked up once (a direct reference to cblas_sbgemm would not link
/// against an OpenBLAS without it).
Bf16GemmFn bf16Library() {
  static const Bf16GemmFn fn = []() -> Bf16GemmFn {
    const char *forced = std::getenv("WEFT_RT_BF16_GEMM");
    std::string want = forced ? forced : "";
    if (!want.empty() && want != "sbgemm" && want != "onednn" &&
        want != "f32") {
      std::fprintf(stderr,
                   "weft: WEFT_RT_BF16_GEMM=%s is not sbgemm, onednn or f32; "
                   "using the first bf16 GEMM this process can load\n",
                   want.c_str());
      want.clear();
    }
    if (want.empty() || want == "sbgemm") {
      sbgemmSymbol =
          reinterpret_cast<SbgemmFn>(dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
      if (sbgemmSymbol)
        return &viaSbgemm;
    }
    if (want.empty() || want == "onednn") {
      if (void *lib = oneDnnLibrary())
        dnnlSymbol =
            reinterpret_cast<DnnlGemmFn>(dlsym(lib, "dnnl_gemm_bf16bf16f32"));
      if (dnnlSymbol)
        return &viaOneDnn;
    }
    if (want == "sbgemm" || want == "onednn")
      std::fprintf(stderr,
                   "weft: WEFT_RT_BF16_GEMM=%s, but %s is not available in "
                   "this process; bf16 GEMMs run as f32 GEMMs (same results, "
                   "f32 speed)\n",
                   want.c_str(),
                   want == "sbgemm" ? "OpenBLAS's cblas_sbgemm"
                                    : "oneDNN (libdnnl.so.2)");
    return nullptr;
  }();
  return fn;
}

/// Per-thread f32 scratch of the bf16 GEMMs, grown to the largest request
/// and then reused: a training step allocates nothing after its first.
struct Scratch {
  std::unique_ptr<float[]> data;
  int64_t capacity = 0;
  float *get(int64_t elements) {
    if (elements > capacity) {
      data.reset(new float[size_t(elements)]);
      capacity = elements;
    }
    return data.get();
  }
};
thread_local Scratch scratchA, scratchB, scratchC, scratchSum;

/// A stored rows x cols bf16 matrix (row stride ld) widened into a dense
/// f32 one. The inner loop is a shift: it vectorizes.
void widen(const uint16_t *from, int64_t rows, int64_t cols, int64_t ld,
           float *to) {
  for (int64_t r = 0; r < rows; ++r) {
    const uint16_t *src = from + r * ld;
    float *dst = to + r * cols;
    for (int64_t j = 0; j < cols; ++j)
      dst[j] = weft::rt::bf16ToFloat(src[j]);
  }
}

/// The batch of bf16 products into f32 C (row stride ldc, batch stride
/// strideC).
void sbgemmBatch(int64_t batch, bool ta, bool tb, int64_t m, int64_t n,
                 int64_t k, const uint16_t *a, int64_t lda, int64_t strideA,
                 const uint16_t *b, int64_t ldb, int64_t strideB, float *c,
                 int64_t ldc, int64_t strideC) {
  Bf16GemmFn library = k > 0 ? bf16Library() : nullptr;
  int64_t first = 0;
  while (library && first < batch &&
         library(ta, tb, m, n, k, a + first * strideA, lda, b + first * strideB,
                 ldb, c + first * strideC, ldc))
    ++first;
  if (first == batch)
    return;
  // The rest widened to dense f32 (a stride-0 operand once): products of
  // bf16 values are exact in f32, so this is the libraries' result.
  int64_t aRows = ta ? k : m, aCols = ta ? m : k;
  int64_t bRows = tb ? n : k, bCols = tb ? k : n;
  float *fa = scratchA.get(std::max<int64_t>(1, aRows * aCols));
  float *fb = scratchB.get(std::max<int64_t>(1, bRows * bCols));
  for (int64_t i = first; i < batch; ++i) {
    if (i == first || strideA != 0)
      widen(a + i * strideA, aRows, aCols, lda, fa);
    if (i == first || strideB != 0)
      widen(b + i * strideB, bRows, bCols, ldb, fb);
    sgemmOne(ta, tb, m, n, k, fa, std::max<int64_t>(1, aCols), fb,
             std::max<int64_t>(1, bCols), c + i * strideC, ldc);
  }
}

} // namespace

namespace {
/// Whether a batch of products runs one product per thread of the team:
/// when each is too small for the team to share (a convolution's
/// per-image products, 2-10 MFLOP each on the bench CNN, gain little from
/// a second thread) and there are enough to go round. Each product then
/// runs on one thread: the libraries see the parallel region and do not
/// nest. Inside a parallel region already (merged kernels) nothing
/// changes. Each product is computed as before, so the results do not
/// depend on which thread computes it.
bool smallProduct(int64_t m, int64_t n, int64_t k) {
  constexpr double kSmallProductFlops = 32e6;
  return 2.0 * double(m) * double(n) * double(k) <= kSmallProductFlops;
}
/// The GEMM threads weft_rt_set_gemm_threads asked for (0: not set).
std::atomic<int> gemmThreads{0};
/// The threads a batch of GEMMs may use: the OpenMP team, capped at the
/// GEMM threads (weft-profile-cluster measures one thread's products in a
/// process whose team has every core).
int gemmTeam() {
  int team = omp_get_max_threads(), cap = gemmThreads.load();
  return cap > 0 ? std::min(team, cap) : team;
}
/// The threads a batch's products are dealt over: the team, or 1 (the
/// loop runs on the calling thread, each product split as the library
/// splits it).
int dealtTeam(int64_t batch, int64_t m, int64_t n, int64_t k) {
  int team = gemmTeam();
  return team > 1 && !omp_in_parallel() && batch >= team &&
                 smallProduct(m, n, k)
             ? team
             : 1;
}
} // namespace

extern "C" void weft_rt_sgemm(int64_t batch, int32_t transA, int32_t transB,
                              int64_t m, int64_t n, int64_t k, const float *a,
                              int64_t lda, int64_t strideA, const float *b,
                              int64_t ldb, int64_t strideB, float *c,
                              int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  int team = dealtTeam(batch, m, n, k);
#pragma omp parallel for if (team > 1) num_threads(team) schedule(static)
  for (int64_t i = 0; i < batch; ++i)
    sgemmOne(transA != 0, transB != 0, m, n, k, a + i * strideA, lda,
             b + i * strideB, ldb, c + i * strideC, ldc);
}

extern "C" void weft_rt_sgemm_batch_sum(int64_t batch, int32_t transA,
                                        int32_t transB, int64_t m, int64_t n,
                                        int64_t k, const float *a, int64_t lda,
                                        int64_t strideA, const float *b,
                                        int64_t ldb, int64_t strideB, float *c,
                                        int64_t ldc) {
  if (m <= 0 || n <= 0)
    return;
  if (batch <= 0) {
    for (int64_t r = 0; r < m; ++r)
      std::memset(c + r * ldc, 0, size_t(n) * sizeof(float));
    return;
  }
  // The sum of products [begin, end) into dst (row stride ld): the first
  // overwrites it (beta = 0: whatever it held, NaN included, is gone), the
  // others add to it in batch order.
  auto sumRange = [&](int64_t begin, int64_t end, float *dst, int64_t ld) {
    for (int64_t i = begin; i < end; ++i)
      sgemmOne(transA != 0, transB != 0, m, n, k, a + i * strideA, lda,
               b + i * strideB, ldb, dst, ld, /*accumulate=*/i > begin);
  };
  // Small products are summed in fixed chunks of the batch, dealt over
  // the team, each chunk on one thread, and the chunks' sums added in
  // order. The order of the additions depends on the batch alone, not on
  // the team (one thread runs the same chunks in turn), so every machine
  // and thread count gets the same bits.
  constexpr int64_t kChunks = 8;
  if (batch >= kChunks && smallProduct(m, n, k)) {
    // The calling thread's scratch, reused: every chunk's first product
    // overwrites its part, so nothing needs clearing.
    float *partial = scratchSum.get((kChunks - 1) * m * n);
#pragma omp parallel for num_threads(gemmTeam()) schedule(static)
    for (int64_t chunk = 0; chunk < kChunks; ++chunk) {
      int64_t begin = batch * chunk / kChunks,
              end = batch * (chunk + 1) / kChunks;
      if (chunk == 0)
        sumRange(begin, end, c, ldc);
      else
        sumRange(begin, end, partial + (chunk - 1) * m * n, n);
    }
    for (int64_t chunk = 1; chunk < kChunks; ++chunk) {
      const float *from = partial + (chunk - 1) * m * n;
      for (int64_t r = 0; r < m; ++r)
        for (int64_t j = 0; j < n; ++j)
          c[r * ldc + j] += from[r * n + j];
    }
    return;
  }
  sumRange(0, batch, c, ldc);
}

extern "C" void weft_rt_sgemm_accumulate(int32_t transA, int32_t transB,
                                         int64_t m, int64_t n, int64_t k,
                                         const float *a, int64_t lda,
                                         const float *b, int64_t ldb, float *c,
                                         int64_t ldc) {
  if (m <= 0 || n <= 0)
    return;
  sgemmOne(transA != 0, transB != 0, m, n, k, a, lda, b, ldb, c, ldc,
           /*accumulate=*/true);
}

extern "C" const char *weft_rt_gemm_library(void) {
  return f32Library() ? "oneDNN" : "OpenBLAS";
}

extern "C" void weft_rt_set_gemm_threads(int threads) {
  gemmThreads.store(threads);
  openblas_set_num_threads(threads);
  // The OpenMP runtime this library runs on (LLVM's libomp): oneDNN's
  // OpenMP calls bind to it too wherever it is loaded first, as in every
  // process linking this file. Where oneDNN still brings its own runtime,
  // that one's team as well.
  omp_set_num_threads(threads);
  using SetThreadsFn = void (*)(int);
  if (f32Library())
    if (auto set = reinterpret_cast<SetThreadsFn>(
            dlsym(oneDnnLibrary(), "omp_set_num_threads")))
      set(threads);
}

extern "C" void weft_rt_warm_up(void) {
  constexpr int64_t n = 96;
  std::vector<float> a(n * n, 1.0f), b(n * n, 1.0f), c(n * n, 0.0f);
  for (int32_t ta : {0, 1})
    for (int32_t tb : {0, 1})
      weft_rt_sgemm(1, ta, tb, n, n, n, a.data(), n, 0, b.data(), n, 0,
                    c.data(), n, 0);
  std::vector<float> sum(1024, 0.0f);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < int64_t(sum.size()); ++i)
    sum[size_t(i)] += float(i);
}

extern "C" void weft_rt_sbgemm(int64_t batch, int32_t transA, int32_t transB,
                               int64_t m, int64_t n, int64_t k,
                               const uint16_t *a, int64_t lda, int64_t strideA,
                               const uint16_t *b, int64_t ldb, int64_t strideB,
                               float *c, int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  if (int team = dealtTeam(batch, m, n, k); team > 1) {
#pragma omp parallel for num_threads(team) schedule(static)
    for (int64_t i = 0; i < batch; ++i)
      sbgemmBatch(1, transA != 0, transB != 0, m, n, k, a + i * strideA, lda, 0,
                  b + i * strideB, ldb, 0, c + i * strideC, ldc, 0);
    return;
  }
  sbgemmBatch(batch, transA != 0, transB != 0, m, n, k, a, lda, strideA, b,
              ldb, strideB, c, ldc, strideC);
}

extern "C" void weft_rt_sbgemm_bf16(int64_t batch, int32_t transA,
                                    int32_t transB, int64_t m, int64_t n,
                                    int64_t k, const uint16_t *a, int64_t lda,
                                    int64_t strideA, const uint16_t *b,
                                    int64_t ldb, int64_t strideB, uint16_t *c,
                                    int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  // Each matrix goes through a dense m x n f32 scratch of the thread
  // computing it, then is rounded.
  auto one = [&](int64_t i) {
    float *tmp = scratchC.get(m * n);
    sbgemmBatch(1, transA != 0, transB != 0, m, n, k, a + i * strideA, lda, 0,
                b + i * strideB, ldb, 0, tmp, n, 0);
    uint16_t *ci = c + i * strideC;
    for (int64_t r = 0; r < m; ++r) {
      const float *from = tmp + r * n;
      uint16_t *to = ci + r * ldc;
      for (int64_t j = 0; j < n; ++j)
        to[j] = weft::rt::floatToBf16(from[j]);
    }
  };
  int team = dealtTeam(batch, m, n, k);
#pragma omp parallel for if (team > 1) num_threads(team) schedule(static)
  for (int64_t i = 0; i < batch; ++i)
    one(i);
}
