//===- CudaBlas.cpp - The device GEMMs, through cuBLASLt ------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weft_rt_cuda_sgemm and its family keep the CPU functions' contract
// (Kernels.h: row-major, row strides, batch strides, stride 0 broadcasts)
// on device pointers. cuBLASLt (libcublasLt.so.13, dlopen'ed on the first
// GEMM) is column-major; mapRowMajorGemm turns each call into the product
// C^T = op(B)^T op(A)^T it computes. f32 products use CUBLAS_COMPUTE_32F,
// never TF32, so that losses match the CPU's; bf16 operands are multiplied
// and summed in f32. The `_bias` versions add a bias per column of C in
// cuBLASLt's epilogue (CUBLASLT_EPILOGUE_BIAS): to the f32 sum, before C
// is rounded to its type, as a kernel adding the bias to an f32 product
// would (--weft-gpu-gemm-epilogue, docs/gpu.md).
//
// Each distinct shape (sizes, transposes, strides, pointer alignments) gets
// a matmul descriptor, layouts and one heuristic query, cached for the
// process: a training step repeats the same few dozen shapes. All GEMMs
// share one 32 MiB workspace, allocated once, and run on the step stream.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Cuda.h"

#include "CudaInternal.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

using namespace weft::rt::cuda;
using namespace weft::rt::cuda::api;

//===----------------------------------------------------------------------===//
// The mapping (CudaApi.h)
//===----------------------------------------------------------------------===//

LtGemm api::mapRowMajorGemm(int64_t batch, bool transA, bool transB, int64_t m,
                            int64_t n, int64_t k, int64_t lda, int64_t strideA,
                            int64_t ldb, int64_t strideB, int64_t ldc,
                            int64_t strideC) {
  LtGemm g;
  g.m = uint64_t(n);
  g.n = uint64_t(m);
  g.k = uint64_t(k);
  g.batch = batch;
  bool batched = batch > 1;
  // cuBLASLt's A is op(b)^T, n x k. Stored b read column-major is b^T:
  // k x n for b (k x n row-major) itself, so transposed back; n x k when
  // the caller's b is stored transposed (n x k row-major), so as it is.
  g.a.op = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.a.rows = uint64_t(transB ? k : n);
  g.a.cols = uint64_t(transB ? n : k);
  g.a.ld = ldb;
  g.a.batchStride = batched ? strideB : 0;
  // cuBLASLt's B is op(a)^T, k x m, likewise.
  g.b.op = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  g.b.rows = uint64_t(transA ? m : k);
  g.b.cols = uint64_t(transA ? k : m);
  g.b.ld = lda;
  g.b.batchStride = batched ? strideA : 0;
  // D = C^T, n x m.
  g.c.rows = uint64_t(n);
  g.c.cols = uint64_t(m);
  g.c.ld = ldc;
  g.c.batchStride = batched ? strideC : 0;
  return g;
}

bool api::fitsCublasLt(const LtGemm &g) {
  auto fits = [](const LtOperand &o) {
    return o.ld >= 1 && uint64_t(o.ld) >= o.rows;
  };
  return g.batch >= 1 && g.batch <= INT32_MAX && fits(g.a) && fits(g.b) &&
         fits(g.c);
}

namespace {

//===----------------------------------------------------------------------===//
// cuBLASLt
//===----------------------------------------------------------------------===//

struct Lt {
#define WEFT_DECLARE_POINTER(name, symbol, ret, ...)                           \
  ret (*name)(__VA_ARGS__) = nullptr;
  WEFT_CUBLASLT_FUNCTIONS(WEFT_DECLARE_POINTER)
#undef WEFT_DECLARE_POINTER
};

constexpr size_t kWorkspaceBytes = 32u << 20;

/// A cached shape: descriptor, layouts and the heuristic's algorithm.
struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo = {};
};

/// What a plan depends on: types, the mapped shape, alignments, the
/// epilogue.
using PlanKey = std::array<int64_t, 23>;

struct BlasState {
  std::mutex mutex;
  bool ready = false;
  Lt lt;
  cublasLtHandle_t handle = nullptr;
  CUdeviceptr workspace = 0;
  std::map<PlanKey, Plan> plans;
  /// The dense copies of operands cuBLASLt cannot read in place.
  detail::GrowingBuffer scratch[2];
};

BlasState &blas() {
  static BlasState *s = new BlasState;
  return *s;
}

/// A GEMM call as its error messages name it; the text is made only for
/// an error.
struct Shape {
  const char *call;
  int64_t batch;
  bool ta, tb;
  int64_t m, n, k;
  std::string str() const {
    return std::string(call) + " batch " + std::to_string(batch) + ", " +
           std::to_string(m) + "x" + std::to_string(n) + "x" +
           std::to_string(k) + (ta ? ", A transposed" : "") +
           (tb ? ", B transposed" : "");
  }
};

void checkLt(cublasStatus_t status, const char *call, const char *function,
             const Shape *shape) {
  if (status == CUBLAS_STATUS_SUCCESS)
    return;
  const Lt &lt = blas().lt;
  const char *name =
      lt.cublasLtGetStatusName ? lt.cublasLtGetStatusName(status) : nullptr;
  const char *text =
      lt.cublasLtGetStatusString ? lt.cublasLtGetStatusString(status) : nullptr;
  detail::fatal(call,
                std::string(function) + " failed for " +
                    (shape ? shape->str() : "the handle") + ": " +
                    (name ? name : "cublasStatus " + std::to_string(status)) +
                    (text ? std::string(" (") + text + ")" : ""));
}

/// Loads cuBLASLt, creates the handle and the workspace, once. Holds the
/// mutex.
void readyLocked(BlasState &s, const char *call) {
  if (s.ready)
    return;
  void *lib = dlopen("libcublasLt.so.13", RTLD_NOW | RTLD_LOCAL);
  if (!lib)
    lib = dlopen("libcublasLt.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    detail::fatal(call, std::string("cuBLASLt could not be loaded (") +
                            (why ? why : "libcublasLt.so.13 not found") +
                            "); the GEMMs of a --target cuda executable need "
                            "cuBLAS 13 (the CUDA 13 toolkit's libcublasLt, or "
                            "the nvidia-cublas package) on the library path");
  }
  std::string missing;
#define WEFT_LOOK_UP(name, symbol, ret, ...)                                   \
  s.lt.name = reinterpret_cast<ret (*)(__VA_ARGS__)>(dlsym(lib, symbol));      \
  if (!s.lt.name)                                                              \
    missing += std::string(missing.empty() ? "" : ", ") + symbol;
  WEFT_CUBLASLT_FUNCTIONS(WEFT_LOOK_UP)
#undef WEFT_LOOK_UP
  if (!missing.empty())
    detail::fatal(call, "the loaded cuBLASLt lacks " + missing +
                            "; install cuBLAS 13");
  checkLt(s.lt.cublasLtCreate(&s.handle), call, "cublasLtCreate", nullptr);
  detail::check(detail::driver().cuMemAlloc(&s.workspace, kWorkspaceBytes),
                call, nullptr, "cuMemAlloc (the cuBLASLt workspace)");
  s.ready = true;
}

/// The largest power of two up to 256 dividing the address of every matrix
/// of the batch: what cuBLASLt's heuristic may assume.
uint32_t alignmentOf(const void *ptr, int64_t batchStride, size_t elementSize,
                     int64_t batch) {
  uint64_t v = reinterpret_cast<uintptr_t>(ptr);
  if (batch > 1)
    v |= uint64_t(batchStride) * elementSize;
  if (v == 0)
    return 256;
  return uint32_t(std::min<uint64_t>(256, v & (~v + 1)));
}

/// With WEFT_CUDA_GEMM_TUNE=1, products from this many FLOPs try the
/// heuristic's candidates on their first call and keep the fastest (below,
/// and by default, the heuristic's first choice). Off by default: the
/// choice then depends on timing, and a different algorithm sums in a
/// different order, so two runs would not give the same bits. Measured on
/// an H100 (GPT-2 124M bf16): 98.0 -> 96.0 ms a step.
constexpr double kTuneFromFlops = 5e9;
constexpr int kCandidates = 8;

/// The operands of the call a plan is made for, for trying candidates.
struct Operands {
  const void *a, *b;
  void *c;
  float beta;
};

/// The index of the fastest of `found` candidates on `x` (each run twice,
/// the second timed, on the step stream). Only for beta = 0: a run
/// overwrites C, which the call then writes again.
int fastestCandidate(BlasState &s, Plan &p,
                     const cublasLtMatmulHeuristicResult_t *results, int found,
                     const Operands &x, const char *call, const Shape &shape) {
  const detail::Driver &d = detail::driver();
  CUstream stream = detail::stepStream();
  CUevent start = nullptr, end = nullptr;
  detail::check(d.cuEventCreate(&start, 0), call, nullptr, "cuEventCreate");
  detail::check(d.cuEventCreate(&end, 0), call, nullptr, "cuEventCreate");
  float alpha = 1.0f, best = 0;
  int chosen = 0;
  bool timed = false;
  std::string report;
  for (int i = 0; i < found; ++i) {
    if (results[i].state != CUBLAS_STATUS_SUCCESS)
      continue;
    for (int run = 0; run < 2; ++run) {
      if (run == 1)
        detail::check(d.cuEventRecord(start, stream), call, nullptr,
                      "cuEventRecord");
      checkLt(s.lt.cublasLtMatmul(s.handle, p.desc, &alpha, x.a, p.a, x.b, p.b,
                                  &x.beta, x.c, p.c, x.c, p.c, &results[i].algo,
                                  reinterpret_cast<void *>(s.workspace),
                                  kWorkspaceBytes, stream),
              call, "cublasLtMatmul", &shape);
    }
    detail::check(d.cuEventRecord(end, stream), call, nullptr, "cuEventRecord");
    detail::check(d.cuStreamSynchronize(stream), call, nullptr,
                  "cuStreamSynchronize");
    float ms = 0;
    detail::check(d.cuEventElapsedTime(&ms, start, end), call, nullptr,
                  "cuEventElapsedTime");
    char line[48];
    std::snprintf(line, sizeof(line), "%s#%d %.3f ms", i ? ", " : "", i, ms);
    report += line;
    if (!timed || ms < best) {
      best = ms;
      chosen = i;
      timed = true;
    }
  }
  d.cuEventDestroy(start);
  d.cuEventDestroy(end);
  detail::profileNote(shape.str() + ": candidates " + report + "; chose #" +
                      std::to_string(chosen));
  return chosen;
}

/// The cached plan of `g` on these types and alignments (of cuBLASLt's A,
/// B and C), with the bias epilogue when `bias` is not null (its
/// alignment `alignBias`); made, with a heuristic query, the first time; a
/// large product (kTuneFromFlops) with beta = 0 times the heuristic's
/// candidates on `x` and keeps the fastest. The caller sets the bias
/// pointer of each call on the plan's descriptor. Holds the mutex.
Plan &planLocked(BlasState &s, const LtGemm &g, int inType, int outType,
                 uint32_t alignA, uint32_t alignB, uint32_t alignC,
                 const void *bias, uint32_t alignBias, const char *call,
                 const Shape &shape, const Operands &x) {
  PlanKey key = {inType,
                 outType,
                 g.a.op,
                 int64_t(g.a.rows),
                 int64_t(g.a.cols),
                 g.a.ld,
                 g.a.batchStride,
                 g.b.op,
                 int64_t(g.b.rows),
                 int64_t(g.b.cols),
                 g.b.ld,
                 g.b.batchStride,
                 g.c.ld,
                 g.c.batchStride,
                 int64_t(g.m),
                 int64_t(g.n),
                 int64_t(g.k),
                 g.batch,
                 alignA,
                 alignB,
                 alignC,
                 bias ? int64_t(CUBLASLT_EPILOGUE_BIAS) : 0,
                 bias ? int64_t(alignBias) : 0};
  auto found = s.plans.find(key);
  if (found != s.plans.end())
    return found->second;
  const Lt &lt = s.lt;
  Plan p;
  checkLt(lt.cublasLtMatmulDescCreate(&p.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
          call, "cublasLtMatmulDescCreate", &shape);
  int32_t opA = g.a.op, opB = g.b.op;
  checkLt(lt.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSA,
                                            &opA, sizeof(opA)),
          call, "cublasLtMatmulDescSetAttribute", &shape);
  checkLt(lt.cublasLtMatmulDescSetAttribute(p.desc, CUBLASLT_MATMUL_DESC_TRANSB,
                                            &opB, sizeof(opB)),
          call, "cublasLtMatmulDescSetAttribute", &shape);
  if (bias) {
    // The heuristic reads the bias pointer's alignment, not its data.
    uint32_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    checkLt(lt.cublasLtMatmulDescSetAttribute(p.desc,
                                              CUBLASLT_MATMUL_DESC_EPILOGUE,
                                              &epilogue, sizeof(epilogue)),
            call, "cublasLtMatmulDescSetAttribute", &shape);
    checkLt(lt.cublasLtMatmulDescSetAttribute(
                p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
            call, "cublasLtMatmulDescSetAttribute", &shape);
  }
  auto layout = [&](cublasLtMatrixLayout_t &l, int type, const LtOperand &o) {
    checkLt(lt.cublasLtMatrixLayoutCreate(&l, type, o.rows, o.cols, o.ld), call,
            "cublasLtMatrixLayoutCreate", &shape);
    if (g.batch > 1) {
      int32_t count = int32_t(g.batch);
      int64_t stride = o.batchStride;
      checkLt(lt.cublasLtMatrixLayoutSetAttribute(
                  l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
              call, "cublasLtMatrixLayoutSetAttribute", &shape);
      checkLt(lt.cublasLtMatrixLayoutSetAttribute(
                  l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
                  sizeof(stride)),
              call, "cublasLtMatrixLayoutSetAttribute", &shape);
    }
  };
  layout(p.a, inType, g.a);
  layout(p.b, inType, g.b);
  layout(p.c, outType, g.c);
  cublasLtMatmulPreference_t pref = nullptr;
  checkLt(lt.cublasLtMatmulPreferenceCreate(&pref), call,
          "cublasLtMatmulPreferenceCreate", &shape);
  uint64_t workspace = kWorkspaceBytes;
  lt.cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
      sizeof(workspace));
  // Without these the heuristic assumes 256-byte aligned matrices, and a
  // product on a view into a buffer fails or reads wrongly aligned.
  lt.cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignA,
      sizeof(alignA));
  lt.cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignB,
      sizeof(alignB));
  lt.cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignC,
      sizeof(alignC));
  lt.cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignC,
      sizeof(alignC));
  double flops = 2.0 * double(g.m) * double(g.n) * double(g.k) * g.batch;
  static const bool tune = [] {
    const char *v = std::getenv("WEFT_CUDA_GEMM_TUNE");
    return v && *v && std::strcmp(v, "0") != 0;
  }();
  bool tuning = tune && flops >= kTuneFromFlops && x.beta == 0.0f;
  cublasLtMatmulHeuristicResult_t results[kCandidates] = {};
  int found_count = 0;
  checkLt(lt.cublasLtMatmulAlgoGetHeuristic(s.handle, p.desc, p.a, p.b, p.c,
                                            p.c, pref, tuning ? kCandidates : 1,
                                            results, &found_count),
          call, "cublasLtMatmulAlgoGetHeuristic", &shape);
  lt.cublasLtMatmulPreferenceDestroy(pref);
  if (found_count < 1)
    detail::fatal(call, "cuBLASLt has no algorithm for " + shape.str() +
                            (bias ? " with a bias epilogue (bias aligned to " +
                                        std::to_string(alignBias) + " bytes)"
                                  : std::string()));
  int chosen =
      tuning && found_count > 1
          ? fastestCandidate(s, p, results, found_count, x, call, shape)
          : 0;
  p.algo = results[chosen].algo;
  return s.plans.emplace(std::move(key), p).first->second;
}

/// Copies an operand cuBLASLt cannot read in place (a row stride shorter
/// than the row, as a stride of 0 broadcasting one row) into dense scratch,
/// on the step stream, and describes the copy in `o`. The stored matrix is
/// o.cols rows of o.rows elements, rows ld apart.
const void *densify(const void *src, LtOperand &o, int64_t batch,
                    size_t elementSize, detail::GrowingBuffer &scratch,
                    const char *call) {
  const detail::Driver &d = detail::driver();
  CUstream stream = detail::stepStream();
  uint64_t rows = o.cols, rowBytes = o.rows * elementSize;
  int64_t copies = o.batchStride == 0 ? 1 : batch;
  size_t need = size_t(copies) * rows * rowBytes;
  auto dense = reinterpret_cast<CUdeviceptr>(
      scratch.atLeast(need, call, "a dense copy of a GEMM operand"));
  auto base = reinterpret_cast<CUdeviceptr>(src);
  for (int64_t i = 0; i < copies; ++i) {
    CUdeviceptr from = base + CUdeviceptr(i * o.batchStride * elementSize);
    CUdeviceptr to = dense + CUdeviceptr(i * rows * rowBytes);
    if (o.ld == 0) {
      // Every row is the first: copy it, then double what is there.
      detail::check(d.cuMemcpyAsync(to, from, rowBytes, stream), call, nullptr,
                    "cuMemcpyAsync");
      for (uint64_t have = 1; have < rows; have *= 2) {
        uint64_t more = std::min(have, rows - have);
        detail::check(
            d.cuMemcpyAsync(to + have * rowBytes, to, more * rowBytes, stream),
            call, nullptr, "cuMemcpyAsync");
      }
    } else {
      for (uint64_t r = 0; r < rows; ++r)
        detail::check(
            d.cuMemcpyAsync(to + r * rowBytes,
                            from + CUdeviceptr(r * o.ld * elementSize),
                            rowBytes, stream),
            call, nullptr, "cuMemcpyAsync");
    }
  }
  o.ld = int64_t(o.rows);
  if (o.batchStride != 0)
    o.batchStride = int64_t(rows * o.rows);
  return reinterpret_cast<const void *>(dense);
}

/// Zeroes batch m x n matrices of C (k = 0: an empty sum).
void zeroC(void *c, int64_t batch, int64_t m, int64_t n, int64_t ldc,
           int64_t strideC, size_t elementSize, const char *call) {
  const detail::Driver &d = detail::driver();
  CUstream stream = detail::stepStream();
  detail::profileBefore();
  for (int64_t i = 0; i < (strideC == 0 ? 1 : batch); ++i) {
    CUdeviceptr to = reinterpret_cast<CUdeviceptr>(c) +
                     CUdeviceptr(i * strideC * int64_t(elementSize));
    size_t pitch = size_t(ldc) * elementSize;
    if (elementSize == 4)
      detail::check(
          d.cuMemsetD2D32Async(to, pitch, 0, size_t(n), size_t(m), stream),
          call, nullptr, "cuMemsetD2D32Async");
    else
      detail::check(
          d.cuMemsetD2D16Async(to, pitch, 0, size_t(n), size_t(m), stream),
          call, nullptr, "cuMemsetD2D16Async");
  }
  detail::noteQueued(call, call);
}

/// Copies the bias (n elements) into each of the m rows of batch matrices
/// of C (k = 0 with a bias: an empty sum plus the bias).
void biasC(void *c, const void *bias, int64_t batch, int64_t m, int64_t n,
           int64_t ldc, int64_t strideC, size_t elementSize, const char *call) {
  const detail::Driver &d = detail::driver();
  CUstream stream = detail::stepStream();
  detail::profileBefore();
  for (int64_t i = 0; i < (strideC == 0 ? 1 : batch); ++i)
    for (int64_t r = 0; r < m; ++r)
      detail::check(d.cuMemcpyAsync(reinterpret_cast<CUdeviceptr>(c) +
                                        CUdeviceptr((i * strideC + r * ldc) *
                                                    int64_t(elementSize)),
                                    reinterpret_cast<CUdeviceptr>(bias),
                                    size_t(n) * elementSize, stream),
                    call, nullptr, "cuMemcpyAsync");
  detail::noteQueued(call, call);
}

/// C = op(A) op(B) + beta C for each matrix of the batch, on the step
/// stream; the sizes are positive. With `bias` (n elements of C's type,
/// beta 0 only) C = op(A) op(B) + bias per row, in cuBLASLt's epilogue.
/// A dimension cuBLASLt runs several times slower at than at the next
/// multiple of 64 (GPT-2's vocabulary, 50257: its logits GEMM 6.6 ms against
/// 0.9 ms at 50304 on an H100, bench/RESULTS.md), padded to that multiple;
/// other dimensions as they are.
int64_t paddedDim(int64_t x) {
  constexpr int64_t kFrom = 4096, kTo = 64;
  return x >= kFrom && x % kTo ? (x + kTo - 1) / kTo * kTo : x;
}

/// The padded GEMMs' operands and product.
struct PadScratch {
  std::mutex mutex;
  detail::GrowingBuffer buffers[3];
};

PadScratch &padScratch() {
  static PadScratch *s = new PadScratch;
  return *s;
}

/// Whether GEMMs may be padded: not under WEFT_CUDA_PAD_GEMMS=0, and only
/// with the padding kernel built in.
bool paddingEnabled() {
  static const bool enabled = [] {
    const char *v = std::getenv("WEFT_CUDA_PAD_GEMMS");
    return detail::canPad() && !(v && std::strcmp(v, "0") == 0);
  }();
  return enabled;
}

void gemm(const char *call, int inType, int outType, int64_t batch, bool ta,
          bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
          int64_t strideA, const void *b, int64_t ldb, int64_t strideB, void *c,
          int64_t ldc, int64_t strideC, float beta, const void *bias = nullptr);

/// One product (batch 1, beta 0, no bias) with a dimension paddedDim pads:
/// A and B copied into scratch with zero rows and columns to the padded
/// sizes (zero terms leave every sum as it is), the padded product, then its
/// m x n block copied into C. False, doing nothing, for other GEMMs.
bool paddedGemm(const char *call, int inType, int outType, bool ta, bool tb,
                int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
                const void *b, int64_t ldb, void *c, int64_t ldc) {
  int64_t mp = paddedDim(m), np = paddedDim(n), kp = paddedDim(k);
  if ((mp == m && np == n && kp == k) ||
      2.0 * double(m) * double(n) * double(k) < 1e9 || !paddingEnabled())
    return false;
  size_t inSize = inType == CUDA_R_32F ? 4 : 2;
  size_t outSize = outType == CUDA_R_32F ? 4 : 2;
  PadScratch &scratch = padScratch();
  std::lock_guard<std::mutex> lock(scratch.mutex);
  // Stored as row-major rows x cols: A is m x k (k x m transposed), B is
  // k x n (n x k transposed).
  auto pad = [&](int which, const void *src, int64_t rows, int64_t cols,
                 int64_t ld, int64_t rowsP, int64_t colsP,
                 int64_t &ldOut) -> const void * {
    if (rows == rowsP && cols == colsP) {
      ldOut = ld;
      return src;
    }
    void *dst = scratch.buffers[which].atLeast(size_t(rowsP * colsP) * inSize,
                                               call, "a padded GEMM's operand");
    detail::padCopy(call, inSize, src, rows, cols, ld, dst, rowsP, colsP,
                    colsP);
    ldOut = colsP;
    return dst;
  };
  int64_t ldap = 0, ldbp = 0;
  const void *ap = ta ? pad(0, a, k, m, lda, kp, mp, ldap)
                      : pad(0, a, m, k, lda, mp, kp, ldap);
  const void *bp = tb ? pad(1, b, n, k, ldb, np, kp, ldbp)
                      : pad(1, b, k, n, ldb, kp, np, ldbp);
  void *cp = c;
  int64_t ldcp = ldc;
  if (mp != m || np != n) {
    cp = scratch.buffers[2].atLeast(size_t(mp * np) * outSize, call,
                                    "a padded GEMM's product");
    ldcp = np;
  }
  gemm(call, inType, outType, 1, ta, tb, mp, np, kp, ap, ldap, 0, bp, ldbp, 0,
       cp, ldcp, 0, 0.0f);
  if (cp != c)
    detail::padCopy(call, outSize, cp, mp, np, ldcp, c, m, n, ldc);
  return true;
}

void gemm(const char *call, int inType, int outType, int64_t batch, bool ta,
          bool tb, int64_t m, int64_t n, int64_t k, const void *a, int64_t lda,
          int64_t strideA, const void *b, int64_t ldb, int64_t strideB, void *c,
          int64_t ldc, int64_t strideC, float beta, const void *bias) {
  detail::requireInitialized(call, nullptr);
  if (lda < 0 || ldb < 0 || ldc < 0 || strideA < 0 || strideB < 0 ||
      strideC < 0)
    detail::fatal(call, Shape{call, batch, ta, tb, m, n, k}.str() +
                            ": a negative leading dimension or batch stride");
  size_t inSize = inType == CUDA_R_32F ? 4 : 2;
  size_t outSize = outType == CUDA_R_32F ? 4 : 2;
  if (k <= 0) {
    if (bias)
      biasC(c, bias, batch, m, n, ldc, strideC, outSize, call);
    else if (beta == 0.0f)
      zeroC(c, batch, m, n, ldc, strideC, outSize, call);
    return;
  }
  // Every matrix of a batch writing one C: the last product is what stays,
  // as on the CPU.
  if (batch > 1 && strideC == 0) {
    a = static_cast<const char *>(a) + (batch - 1) * strideA * int64_t(inSize);
    b = static_cast<const char *>(b) + (batch - 1) * strideB * int64_t(inSize);
    batch = 1;
  }
  if (batch == 1 && beta == 0.0f && !bias &&
      paddedGemm(call, inType, outType, ta, tb, m, n, k, a, lda, b, ldb, c,
                 ldc))
    return;
  BlasState &s = blas();
  std::lock_guard<std::mutex> lock(s.mutex);
  readyLocked(s, call);
  Shape shape{call, batch, ta, tb, m, n, k};
  // cuBLASLt's batch count is an int32: larger batches go in pieces.
  for (int64_t done = 0; done < batch; done += INT32_MAX) {
    int64_t piece = std::min<int64_t>(INT32_MAX, batch - done);
    const void *pa =
        static_cast<const char *>(a) + done * strideA * int64_t(inSize);
    const void *pb =
        static_cast<const char *>(b) + done * strideB * int64_t(inSize);
    void *pc = static_cast<char *>(c) + done * strideC * int64_t(outSize);
    LtGemm g = mapRowMajorGemm(piece, ta, tb, m, n, k, lda, strideA, ldb,
                               strideB, ldc, strideC);
    if (uint64_t(g.c.ld) < g.c.rows)
      detail::fatal(call, shape.str() + ": ldc " + std::to_string(ldc) +
                              " is shorter than a row of C (" +
                              std::to_string(n) + ")");
    // Lt's A is the caller's b.
    const void *ltA = pb, *ltB = pa;
    if (uint64_t(g.a.ld) < std::max<uint64_t>(1, g.a.rows))
      ltA = densify(ltA, g.a, piece, inSize, s.scratch[0], call);
    if (uint64_t(g.b.ld) < std::max<uint64_t>(1, g.b.rows))
      ltB = densify(ltB, g.b, piece, inSize, s.scratch[1], call);
    Plan &p = planLocked(s, g, inType, outType,
                         alignmentOf(ltA, g.a.batchStride, inSize, piece),
                         alignmentOf(ltB, g.b.batchStride, inSize, piece),
                         alignmentOf(pc, g.c.batchStride, outSize, piece), bias,
                         alignmentOf(bias, 0, outSize, 1), call, shape,
                         Operands{ltA, ltB, pc, beta});
    // Plans are per alignment, not per pointer: each call names its bias
    // (read when the product is queued).
    if (bias)
      checkLt(
          s.lt.cublasLtMatmulDescSetAttribute(
              p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
          call, "cublasLtMatmulDescSetAttribute", &shape);
    float alpha = 1.0f;
    // After the plan lookup: the interval is the device's, not the host's.
    if (done == 0)
      detail::profileBefore();
    checkLt(s.lt.cublasLtMatmul(s.handle, p.desc, &alpha, ltA, p.a, ltB, p.b,
                                &beta, pc, p.c, pc, p.c, &p.algo,
                                reinterpret_cast<void *>(s.workspace),
                                kWorkspaceBytes, detail::stepStream()),
            call, "cublasLtMatmul", &shape);
  }
  detail::noteQueued(
      call, detail::profiling() ? detail::profileLabel(shape.str()) : call);
}

} // namespace

extern "C" void weft_rt_cuda_sgemm(int64_t batch, int32_t transA,
                                   int32_t transB, int64_t m, int64_t n,
                                   int64_t k, const float *a, int64_t lda,
                                   int64_t strideA, const float *b, int64_t ldb,
                                   int64_t strideB, float *c, int64_t ldc,
                                   int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  gemm("weft_rt_cuda_sgemm", CUDA_R_32F, CUDA_R_32F, batch, transA != 0,
       transB != 0, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC,
       0.0f);
}

extern "C" void weft_rt_cuda_sgemm_batch_sum(
    int64_t batch, int32_t transA, int32_t transB, int64_t m, int64_t n,
    int64_t k, const float *a, int64_t lda, int64_t strideA, const float *b,
    int64_t ldb, int64_t strideB, float *c, int64_t ldc) {
  const char *call = "weft_rt_cuda_sgemm_batch_sum";
  if (m <= 0 || n <= 0)
    return;
  if (batch <= 0) {
    detail::requireInitialized(call, nullptr);
    zeroC(c, 1, m, n, ldc, 0, sizeof(float), call);
    return;
  }
  // The first product overwrites C, the others add to it in batch order,
  // as on the CPU.
  for (int64_t i = 0; i < batch; ++i)
    gemm(call, CUDA_R_32F, CUDA_R_32F, 1, transA != 0, transB != 0, m, n, k,
         a + i * strideA, lda, 0, b + i * strideB, ldb, 0, c, ldc, 0,
         i == 0 ? 0.0f : 1.0f);
}

extern "C" void weft_rt_cuda_sgemm_accumulate(int32_t transA, int32_t transB,
                                              int64_t m, int64_t n, int64_t k,
                                              const float *a, int64_t lda,
                                              const float *b, int64_t ldb,
                                              float *c, int64_t ldc) {
  if (m <= 0 || n <= 0)
    return;
  gemm("weft_rt_cuda_sgemm_accumulate", CUDA_R_32F, CUDA_R_32F, 1, transA != 0,
       transB != 0, m, n, k, a, lda, 0, b, ldb, 0, c, ldc, 0, 1.0f);
}

extern "C" void weft_rt_cuda_sbgemm(int64_t batch, int32_t transA,
                                    int32_t transB, int64_t m, int64_t n,
                                    int64_t k, const uint16_t *a, int64_t lda,
                                    int64_t strideA, const uint16_t *b,
                                    int64_t ldb, int64_t strideB, float *c,
                                    int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  gemm("weft_rt_cuda_sbgemm", CUDA_R_16BF, CUDA_R_32F, batch, transA != 0,
       transB != 0, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC,
       0.0f);
}

extern "C" void weft_rt_cuda_sbgemm_bf16(int64_t batch, int32_t transA,
                                         int32_t transB, int64_t m, int64_t n,
                                         int64_t k, const uint16_t *a,
                                         int64_t lda, int64_t strideA,
                                         const uint16_t *b, int64_t ldb,
                                         int64_t strideB, uint16_t *c,
                                         int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  gemm("weft_rt_cuda_sbgemm_bf16", CUDA_R_16BF, CUDA_R_16BF, batch, transA != 0,
       transB != 0, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC,
       0.0f);
}

extern "C" void weft_rt_cuda_sgemm_bias(int64_t batch, int32_t transA,
                                        int32_t transB, int64_t m, int64_t n,
                                        int64_t k, const float *a, int64_t lda,
                                        int64_t strideA, const float *b,
                                        int64_t ldb, int64_t strideB,
                                        const float *bias, float *c,
                                        int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  gemm("weft_rt_cuda_sgemm_bias", CUDA_R_32F, CUDA_R_32F, batch, transA != 0,
       transB != 0, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC,
       0.0f, bias);
}

extern "C" void
weft_rt_cuda_sbgemm_bias(int64_t batch, int32_t transA, int32_t transB,
                         int64_t m, int64_t n, int64_t k, const uint16_t *a,
                         int64_t lda, int64_t strideA, const uint16_t *b,
                         int64_t ldb, int64_t strideB, const float *bias,
                         float *c, int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  gemm("weft_rt_cuda_sbgemm_bias", CUDA_R_16BF, CUDA_R_32F, batch, transA != 0,
       transB != 0, m, n, k, a, lda, strideA, b, ldb, strideB, c, ldc, strideC,
       0.0f, bias);
}

extern "C" void weft_rt_cuda_sbgemm_bf16_bias(
    int64_t batch, int32_t transA, int32_t transB, int64_t m, int64_t n,
    int64_t k, const uint16_t *a, int64_t lda, int64_t strideA,
    const uint16_t *b, int64_t ldb, int64_t strideB, const uint16_t *bias,
    uint16_t *c, int64_t ldc, int64_t strideC) {
  if (batch <= 0 || m <= 0 || n <= 0)
    return;
  gemm("weft_rt_cuda_sbgemm_bf16_bias", CUDA_R_16BF, CUDA_R_16BF, batch,
       transA != 0, transB != 0, m, n, k, a, lda, strideA, b, ldb, strideB, c,
       ldc, strideC, 0.0f, bias);
}
