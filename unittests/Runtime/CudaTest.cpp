//===- CudaTest.cpp - The runtime's CUDA layer ----------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Everywhere: the errors without a driver or device, the mgpu* entry points
// refusing to run before initialize(), module registration not touching the
// driver, the row-major to cuBLASLt mapping evaluated on the host, and,
// where the build found the CUDA toolkit, CudaApi.h's values, layouts and
// symbol names against cuda.h and cublasLt.h.
//
// With a CUDA device (otherwise they skip, saying so): every GEMM entry
// point against its CPU counterpart on random data, copies, the mgpu*
// memory functions and a kernel launched from a cubin and from PTX.
//
// Death tests use the "threadsafe" style: the child re-executes this binary
// and runs only that test, so it starts without CUDA state whatever the
// parent did.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Cuda.h"
#include "weft/Runtime/Attention.h"
#include "weft/Runtime/CudaApi.h"
#include "weft/Runtime/Kernels.h"

#include "CudaTestKernel.h"
#ifdef WEFT_TEST_CUBIN
#include "CudaTestKernel.cubin.h"
#include "CudaTestKernel.fatbin.h"
#endif

#include <gtest/gtest.h>

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#ifdef WEFT_TEST_CUDA_HEADERS
#include <cublasLt.h>
#include <cuda.h>
#endif

using namespace weft::rt;
namespace api = weft::rt::cuda::api;

namespace {

//===----------------------------------------------------------------------===//
// Without a device
//===----------------------------------------------------------------------===//

TEST(CudaTest, InitializeWithoutDeviceSaysWhatIsMissing) {
  if (cuda::deviceCount() > 0)
    GTEST_SKIP() << "a CUDA device is present; "
                    "InitializeRejectsAMissingDevice covers the error";
  weft::rt::Status s = cuda::initialize(0);
  ASSERT_FALSE(s.ok());
  EXPECT_FALSE(cuda::initialized());
  // Without libcuda.so.1 the message names it and the flag; with a driver
  // but no GPU it says no GPU is visible. Both say how to train on the CPU.
  EXPECT_NE(s.message.find("compile without --target cuda"), std::string::npos)
      << s.message;
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver) {
    EXPECT_NE(s.message.find("libcuda.so.1"), std::string::npos) << s.message;
    EXPECT_NE(s.message.find("weftc --target cuda"), std::string::npos)
        << s.message;
  } else {
    dlclose(driver);
  }
  EXPECT_TRUE(cuda::deviceDescription().empty());
}

TEST(CudaTest, GraphsAreOffWhenAskedOrWhileEachOperationIsWatched) {
  std::string why;
  for (const char *name : {"WEFT_CUDA_GRAPHS", "WEFT_CUDA_SYNC",
                           "WEFT_DUMP_KERNELS", "WEFT_CUDA_PROFILE"})
    unsetenv(name);
  EXPECT_TRUE(cuda::graphsAllowed(&why));
  EXPECT_EQ(why, "");
  setenv("WEFT_CUDA_GRAPHS", "0", 1);
  EXPECT_FALSE(cuda::graphsAllowed(&why));
  EXPECT_EQ(why, "WEFT_CUDA_GRAPHS=0");
  setenv("WEFT_CUDA_GRAPHS", "1", 1);
  EXPECT_TRUE(cuda::graphsAllowed());
  setenv("WEFT_CUDA_SYNC", "1", 1);
  EXPECT_FALSE(cuda::graphsAllowed(&why));
  EXPECT_EQ(why, "WEFT_CUDA_SYNC waits after each operation");
  unsetenv("WEFT_CUDA_SYNC");
  setenv("WEFT_DUMP_KERNELS", "/tmp/k", 1);
  EXPECT_FALSE(cuda::graphsAllowed(&why));
  EXPECT_EQ(why, "WEFT_DUMP_KERNELS reads each kernel's outputs");
  unsetenv("WEFT_DUMP_KERNELS");
  unsetenv("WEFT_CUDA_GRAPHS");
}

TEST(CudaTest, DeviceCountIsZeroWithoutDriver) {
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (driver) {
    dlclose(driver);
    EXPECT_GE(cuda::deviceCount(), 0);
    GTEST_SKIP() << "libcuda.so.1 loads here; counted " << cuda::deviceCount()
                 << " devices";
  }
  EXPECT_EQ(cuda::deviceCount(), 0);
}

/// The generated code's entry points cannot return errors; before the
/// trainer initialized the device they end the process, naming themselves.
TEST(CudaTest, EntryPointsBeforeInitializeEndTheProcess) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(mgpuStreamCreate(), testing::ExitedWithCode(1),
              "error: CUDA: mgpuStreamCreate: called before "
              "weft::rt::cuda::initialize\\(\\)");
  EXPECT_EXIT(
      {
        void *module =
            mgpuModuleLoad(const_cast<char *>(kTestPtx), sizeof(kTestPtx));
        mgpuModuleGetFunction(module, "scale_add");
      },
      testing::ExitedWithCode(1),
      "mgpuModuleGetFunction: kernel \"scale_add\": called before "
      "weft::rt::cuda::initialize");
  EXPECT_EXIT(mgpuMemAlloc(16, nullptr, false), testing::ExitedWithCode(1),
              "mgpuMemAlloc: called before");
  EXPECT_EXIT(weft_rt_cuda_sgemm(1, 0, 0, 2, 2, 2, nullptr, 2, 0, nullptr, 2, 0,
                                 nullptr, 2, 0),
              testing::ExitedWithCode(1), "weft_rt_cuda_sgemm: called before");
}

/// Global constructors register modules before main: that must not load
/// (or even open) the driver.
TEST(CudaTest, ModuleLoadDoesNotTouchTheDriver) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        void *module =
            mgpuModuleLoad(const_cast<char *>(kTestPtx), sizeof(kTestPtx));
        void *jit = mgpuModuleLoadJIT(const_cast<char *>(kTestPtx), 2);
        bool opened = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
        // Unloading a module never loaded needs no driver either (global
        // destructors of a process that never initialized).
        mgpuModuleUnload(module);
        mgpuModuleUnload(jit);
        std::exit(module && jit && !opened && !cuda::initialized() ? 0 : 2);
      },
      testing::ExitedWithCode(0), "");
}

//===----------------------------------------------------------------------===//
// The row-major to cuBLASLt mapping, evaluated on the host
//===----------------------------------------------------------------------===//

/// D = op(A) op(B) for one matrix of cuBLASLt's batch, column-major, as
/// cuBLASLt defines it, with `a` and `b` the pointers it is given.
void evaluateLt(const api::LtGemm &g, const float *a, const float *b,
                float *d) {
  for (int64_t bi = 0; bi < g.batch; ++bi)
    for (uint64_t i = 0; i < g.m; ++i)
      for (uint64_t j = 0; j < g.n; ++j) {
        double sum = 0;
        for (uint64_t p = 0; p < g.k; ++p) {
          const float *ab = a + bi * g.a.batchStride;
          const float *bb = b + bi * g.b.batchStride;
          // op(A) is m x k: A itself (rows x cols = m x k) or A^T.
          double av = g.a.op == api::CUBLAS_OP_N ? ab[i + p * g.a.ld]
                                                 : ab[p + i * g.a.ld];
          double bv = g.b.op == api::CUBLAS_OP_N ? bb[p + j * g.b.ld]
                                                 : bb[j + p * g.b.ld];
          sum += av * bv;
        }
        d[bi * g.c.batchStride + i + j * g.c.ld] = float(sum);
      }
}

struct Case {
  int64_t batch;
  bool ta, tb;
  int64_t m, n, k;
  int64_t padA = 0, padB = 0, padC = 0;        ///< Row stride beyond the row.
  bool broadcastA = false, broadcastB = false; ///< Batch stride 0.
};

/// The CPU call of a case: leading dimensions and batch strides.
struct Call {
  int64_t lda, ldb, ldc, sa, sb, sc;
  size_t aSize, bSize, cSize;
};

Call callOf(const Case &c) {
  Call r;
  int64_t aRows = c.ta ? c.k : c.m, aCols = c.ta ? c.m : c.k;
  int64_t bRows = c.tb ? c.n : c.k, bCols = c.tb ? c.k : c.n;
  r.lda = aCols + c.padA;
  r.ldb = bCols + c.padB;
  r.ldc = c.n + c.padC;
  r.sa = c.broadcastA ? 0 : aRows * r.lda;
  r.sb = c.broadcastB ? 0 : bRows * r.ldb;
  r.sc = c.m * r.ldc;
  r.aSize = size_t(c.broadcastA ? 1 : c.batch) * aRows * r.lda;
  r.bSize = size_t(c.broadcastB ? 1 : c.batch) * bRows * r.ldb;
  r.cSize = size_t(c.batch) * c.m * r.ldc;
  return r;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      out.push_back({1, ta, tb, 1, 1, 1});
      out.push_back({1, ta, tb, 7, 5, 3});
      out.push_back({3, ta, tb, 13, 9, 17, 1, 2, 3});
      out.push_back({4, ta, tb, 33, 65, 31, 0, 0, 0, true, false});
      out.push_back({2, ta, tb, 64, 48, 96, 5, 0, 7, false, true});
      out.push_back({5, ta, tb, 1, 40, 24, 0, 1, 0, true, true});
    }
  return out;
}

std::vector<float> randomFloats(size_t n, std::mt19937 &gen) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(gen);
  return v;
}

TEST(CudaTest, RowMajorGemmMapsToCublasLtColumnMajor) {
  std::mt19937 gen(7);
  for (const Case &c : cases()) {
    Call call = callOf(c);
    std::vector<float> a = randomFloats(call.aSize, gen);
    std::vector<float> b = randomFloats(call.bSize, gen);
    std::vector<float> want(call.cSize, -7.0f), got(call.cSize, -7.0f);
    weft_rt_sgemm(c.batch, c.ta, c.tb, c.m, c.n, c.k, a.data(), call.lda,
                  call.sa, b.data(), call.ldb, call.sb, want.data(), call.ldc,
                  call.sc);
    api::LtGemm g =
        api::mapRowMajorGemm(c.batch, c.ta, c.tb, c.m, c.n, c.k, call.lda,
                             call.sa, call.ldb, call.sb, call.ldc, call.sc);
    EXPECT_TRUE(api::fitsCublasLt(g));
    // cuBLASLt's A is the caller's B.
    evaluateLt(g, b.data(), a.data(), got.data());
    std::string what = "batch " + std::to_string(c.batch) + " " +
                       std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                       std::to_string(c.k) + " ta " + std::to_string(c.ta) +
                       " tb " + std::to_string(c.tb);
    for (size_t i = 0; i < call.cSize; ++i)
      ASSERT_NEAR(got[i], want[i], 1e-5f * float(c.k)) << what << " at " << i;
    // The layouts describe the stored matrices: the row stride is the
    // leading dimension, the column-major rows are the stored row length.
    EXPECT_EQ(g.a.ld, call.ldb);
    EXPECT_EQ(g.b.ld, call.lda);
    EXPECT_EQ(g.a.rows, uint64_t(c.tb ? c.k : c.n));
    EXPECT_EQ(g.b.rows, uint64_t(c.ta ? c.m : c.k));
    EXPECT_EQ(g.c.rows, uint64_t(c.n));
    EXPECT_EQ(g.c.cols, uint64_t(c.m));
  }
}

TEST(CudaTest, BroadcastRowsNeedADenseCopy) {
  // A row stride of 0 (every row of B the same) is valid for the CPU
  // functions but no cuBLASLt layout: the device GEMM copies it first.
  api::LtGemm g = api::mapRowMajorGemm(1, false, false, 4, 8, 3, 3, 0,
                                       /*ldb=*/0, 0, 8, 0);
  EXPECT_FALSE(api::fitsCublasLt(g));
  g = api::mapRowMajorGemm(1, false, false, 4, 8, 3, 3, 0, 8, 0, 8, 0);
  EXPECT_TRUE(api::fitsCublasLt(g));
  // Transposed, the stored row is op(A)'s column: lda >= m.
  g = api::mapRowMajorGemm(1, true, false, 4, 8, 3, /*lda=*/3, 0, 8, 0, 8, 0);
  EXPECT_FALSE(api::fitsCublasLt(g));
}

//===----------------------------------------------------------------------===//
// CudaApi.h against the toolkit's headers
//===----------------------------------------------------------------------===//

#ifdef WEFT_TEST_CUDA_HEADERS
#define WEFT_STRINGIFY2(x) #x
#define WEFT_STRINGIFY(x) WEFT_STRINGIFY2(x)

/// The sizes of a function type's result and parameters.
template <typename R, typename... Args>
std::vector<size_t> sizesOf(R (*)(Args...)) {
  return {sizeof(R), sizeof(Args)...};
}

TEST(CudaTest, DeclarationsMatchTheToolkitHeaders) {
  EXPECT_EQ(api::CUDA_SUCCESS, CUDA_SUCCESS);
  EXPECT_EQ(api::CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
  EXPECT_EQ(api::CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
  EXPECT_EQ(api::CUDA_ERROR_DEINITIALIZED, CUDA_ERROR_DEINITIALIZED);
  EXPECT_EQ(api::CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
  EXPECT_EQ(api::CUDA_ERROR_NO_BINARY_FOR_GPU, CUDA_ERROR_NO_BINARY_FOR_GPU);
  EXPECT_EQ(api::CUDA_ERROR_UNSUPPORTED_PTX_VERSION,
            CUDA_ERROR_UNSUPPORTED_PTX_VERSION);
  EXPECT_EQ(api::CU_STREAM_NON_BLOCKING, unsigned(CU_STREAM_NON_BLOCKING));
  EXPECT_EQ(api::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  EXPECT_EQ(api::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
            CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  EXPECT_EQ(api::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  EXPECT_EQ(api::CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
            CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED);
  EXPECT_EQ(api::CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
            CU_POINTER_ATTRIBUTE_MEMORY_TYPE);
  EXPECT_EQ(api::CU_MEMORYTYPE_HOST, unsigned(CU_MEMORYTYPE_HOST));
  EXPECT_EQ(api::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
  EXPECT_EQ(api::CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
            CU_MEMPOOL_ATTR_RELEASE_THRESHOLD);
  EXPECT_EQ(api::CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER);
  EXPECT_EQ(api::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
  EXPECT_EQ(api::CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_OPTIMIZATION_LEVEL);
  EXPECT_EQ(api::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION,
            CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
  EXPECT_EQ(api::CU_EVENT_DISABLE_TIMING, CU_EVENT_DISABLE_TIMING);
  EXPECT_EQ(api::CU_STREAM_CAPTURE_MODE_RELAXED,
            int(CU_STREAM_CAPTURE_MODE_RELAXED));
  EXPECT_EQ(sizeof(api::CUdeviceptr), sizeof(CUdeviceptr));
  EXPECT_EQ(sizeof(api::CUdevice), sizeof(CUdevice));

  EXPECT_EQ(sizeof(api::CUlaunchAttribute), sizeof(CUlaunchAttribute));
  EXPECT_EQ(offsetof(api::CUlaunchAttribute, value),
            offsetof(CUlaunchAttribute, value));
  EXPECT_EQ(offsetof(api::CUlaunchAttribute, value.clusterDim.z),
            offsetof(CUlaunchAttribute, value.clusterDim.z));
  EXPECT_EQ(sizeof(api::CUlaunchConfig), sizeof(CUlaunchConfig));
  EXPECT_EQ(offsetof(api::CUlaunchConfig, sharedMemBytes),
            offsetof(CUlaunchConfig, sharedMemBytes));
  EXPECT_EQ(offsetof(api::CUlaunchConfig, hStream),
            offsetof(CUlaunchConfig, hStream));
  EXPECT_EQ(offsetof(api::CUlaunchConfig, attrs),
            offsetof(CUlaunchConfig, attrs));
  EXPECT_EQ(offsetof(api::CUlaunchConfig, numAttrs),
            offsetof(CUlaunchConfig, numAttrs));

  EXPECT_EQ(api::CUBLAS_STATUS_SUCCESS, CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(api::CUDA_R_32F, CUDA_R_32F);
  EXPECT_EQ(api::CUDA_R_16BF, CUDA_R_16BF);
  EXPECT_EQ(api::CUBLAS_COMPUTE_32F, CUBLAS_COMPUTE_32F);
  EXPECT_EQ(api::CUBLAS_OP_N, CUBLAS_OP_N);
  EXPECT_EQ(api::CUBLAS_OP_T, CUBLAS_OP_T);
  EXPECT_EQ(api::CUBLASLT_MATMUL_DESC_TRANSA, CUBLASLT_MATMUL_DESC_TRANSA);
  EXPECT_EQ(api::CUBLASLT_MATMUL_DESC_TRANSB, CUBLASLT_MATMUL_DESC_TRANSB);
  EXPECT_EQ(api::CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_MATMUL_DESC_EPILOGUE);
  EXPECT_EQ(api::CUBLASLT_MATMUL_DESC_BIAS_POINTER,
            CUBLASLT_MATMUL_DESC_BIAS_POINTER);
  EXPECT_EQ(api::CUBLASLT_EPILOGUE_DEFAULT,
            uint32_t(CUBLASLT_EPILOGUE_DEFAULT));
  EXPECT_EQ(api::CUBLASLT_EPILOGUE_BIAS, uint32_t(CUBLASLT_EPILOGUE_BIAS));
  EXPECT_EQ(api::CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
            CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
  EXPECT_EQ(api::CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
            CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET);
  EXPECT_EQ(api::CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
            CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
  EXPECT_EQ(api::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
  EXPECT_EQ(api::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
  EXPECT_EQ(api::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
  EXPECT_EQ(api::CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES,
            CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
  EXPECT_EQ(sizeof(api::cublasLtMatmulAlgo_t), sizeof(cublasLtMatmulAlgo_t));
  EXPECT_EQ(sizeof(api::cublasLtMatmulHeuristicResult_t),
            sizeof(cublasLtMatmulHeuristicResult_t));
  EXPECT_EQ(offsetof(api::cublasLtMatmulHeuristicResult_t, workspaceSize),
            offsetof(cublasLtMatmulHeuristicResult_t, workspaceSize));
  EXPECT_EQ(offsetof(api::cublasLtMatmulHeuristicResult_t, state),
            offsetof(cublasLtMatmulHeuristicResult_t, state));

  // The symbol each function is looked up by is the one cuda.h's macros
  // pick (cuMemAlloc is cuMemAlloc_v2), and the signature is the header's.
  // Handles are distinct types on both sides; the sizes of the result and
  // of every parameter must agree (decltype: no reference to the symbol).
#define WEFT_CHECK_FUNCTION(name, symbol, ret, ...)                            \
  EXPECT_STREQ(symbol, WEFT_STRINGIFY(name)) << #name;                         \
  EXPECT_EQ(sizesOf(static_cast<ret (*)(__VA_ARGS__)>(nullptr)),               \
            sizesOf(static_cast<decltype(&name)>(nullptr)))                    \
      << #name;
  WEFT_CUDA_DRIVER_FUNCTIONS(WEFT_CHECK_FUNCTION)
  WEFT_CUBLASLT_FUNCTIONS(WEFT_CHECK_FUNCTION)
#undef WEFT_CHECK_FUNCTION
}
#endif

//===----------------------------------------------------------------------===//
// With a device
//===----------------------------------------------------------------------===//

/// Initializes device 0 once; false (the caller skips) without one.
bool haveDevice() {
  static const bool have = [] {
    if (cuda::deviceCount() == 0)
      return false;
    weft::rt::Status s = cuda::initialize(0);
    EXPECT_TRUE(s.ok()) << s.message;
    return s.ok();
  }();
  return have;
}

#define REQUIRE_DEVICE()                                                       \
  if (!haveDevice())                                                           \
  GTEST_SKIP() << "no CUDA device: this test needs an NVIDIA GPU and driver"

/// A device copy of `host` that frees itself.
struct DeviceBuffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer(const void *host, size_t n) : bytes(n) {
    weft::rt::Status s = cuda::allocate(n, &ptr);
    EXPECT_TRUE(s.ok()) << s.message;
    if (host && n) {
      s = cuda::copyToDevice(ptr, host, n);
      EXPECT_TRUE(s.ok()) << s.message;
    }
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T> &v)
      : DeviceBuffer(v.data(), v.size() * sizeof(T)) {}
  ~DeviceBuffer() { cuda::release(ptr); }
  template <typename T> std::vector<T> read(size_t count) const {
    std::vector<T> out(count);
    weft::rt::Status s = cuda::copyToHost(out.data(), ptr, count * sizeof(T));
    EXPECT_TRUE(s.ok()) << s.message;
    return out;
  }
  template <typename T> T *as() const { return static_cast<T *>(ptr); }
};

TEST(CudaTest, InitializeRejectsAMissingDevice) {
  REQUIRE_DEVICE();
  EXPECT_TRUE(cuda::initialize(0).ok());
  int count = cuda::deviceCount();
  weft::rt::Status s = cuda::initialize(count);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("already initialized on device 0"),
            std::string::npos)
      << s.message;
  EXPECT_NE(cuda::deviceDescription().find("(sm_"), std::string::npos)
      << cuda::deviceDescription();
  EXPECT_NE(cuda::stream(), nullptr);
  EXPECT_EQ(mgpuStreamCreate(), cuda::stream());
}

TEST(CudaTest, CopiesRoundTrip) {
  REQUIRE_DEVICE();
  std::mt19937 gen(1);
  std::vector<float> host = randomFloats(100003, gen);
  DeviceBuffer d(host);
  EXPECT_EQ(d.read<float>(host.size()), host);
  // A copy at an odd offset, and one of no bytes.
  std::vector<float> part(7, 3.5f);
  ASSERT_TRUE(cuda::copyToDevice(d.as<float>() + 11, part.data(),
                                 part.size() * sizeof(float))
                  .ok());
  ASSERT_TRUE(cuda::copyToDevice(d.as<float>(), part.data(), 0).ok());
  std::vector<float> back = d.read<float>(20);
  for (int i = 0; i < 20; ++i)
    EXPECT_EQ(back[i], i >= 11 && i < 18 ? 3.5f : host[i]) << i;
  EXPECT_TRUE(cuda::synchronize().ok());
}

TEST(CudaTest, MgpuMemoryFunctions) {
  REQUIRE_DEVICE();
  void *stream = mgpuStreamCreate();
  auto *a = static_cast<uint32_t *>(mgpuMemAlloc(1000 * 4, stream, false));
  auto *b = static_cast<uint32_t *>(mgpuMemAlloc(1000 * 4, stream, false));
  ASSERT_NE(a, nullptr);
  mgpuMemset32(a, 0x3F800000u, 1000, stream);
  mgpuMemset16(b, 0xABCD, 2000, stream);
  mgpuMemcpy(b + 500, a + 100, 200 * 4, stream);
  void *event = mgpuEventCreate();
  mgpuEventRecord(event, stream);
  mgpuStreamWaitEvent(stream, event);
  mgpuEventSynchronize(event);
  mgpuEventDestroy(event);
  mgpuStreamSynchronize(stream);
  std::vector<uint32_t> got(1000);
  ASSERT_TRUE(cuda::copyToHost(got.data(), b, 4000).ok());
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(got[i], i >= 500 && i < 700 ? 0x3F800000u : 0xABCDABCDu) << i;
  mgpuMemFree(a, stream);
  mgpuMemFree(b, stream);
  mgpuStreamDestroy(stream);
  EXPECT_EQ(mgpuMemAlloc(0, stream, false), nullptr);
  EXPECT_TRUE(cuda::synchronize().ok());
}

/// Launches scale_add (out = 2 in + 1) from `module` through the entry
/// points the generated host code calls; in clusters of `cluster` blocks
/// when not 0.
void launchScaleAdd(void *module, int cluster = 0) {
  const int n = 1000;
  std::vector<float> in(n);
  for (int i = 0; i < n; ++i)
    in[i] = float(i) * 0.25f;
  DeviceBuffer din(in), dout(nullptr, n * sizeof(float));
  static const char name[] = "scale_add";
  void *function = mgpuModuleGetFunction(module, name);
  // Asked again (before every launch): the same handle.
  EXPECT_EQ(mgpuModuleGetFunction(module, name), function);
  void *inPtr = din.ptr, *outPtr = dout.ptr;
  int32_t count = n;
  void *params[] = {&inPtr, &outPtr, &count};
  void *stream = mgpuStreamCreate();
  if (cluster)
    mgpuLaunchClusterKernel(function, cluster, 1, 1, 8, 1, 1, 128, 1, 1, 0,
                            stream, params, nullptr);
  else
    mgpuLaunchKernel(function, 8, 1, 1, 128, 1, 1, 0, stream, params, nullptr,
                     3);
  mgpuStreamSynchronize(stream);
  mgpuStreamDestroy(stream);
  std::vector<float> out = dout.read<float>(n);
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(out[i], 2.0f * in[i] + 1.0f) << i;
}

TEST(CudaTest, LaunchesAKernel) {
  REQUIRE_DEVICE();
#ifdef WEFT_TEST_CUBIN
  // A cubin, as gpu.binary embeds (cubin-format=bin).
  void *cubin = mgpuModuleLoad(const_cast<unsigned char *>(weftTestCubin),
                               sizeof(weftTestCubin));
  launchScaleAdd(cubin);
  mgpuModuleUnload(cubin);
  // A fatbin of sm_80 and sm_90 cubins and the PTX, as weftc embeds.
  void *fatbin = mgpuModuleLoad(const_cast<unsigned char *>(weftTestFatbin),
                                sizeof(weftTestFatbin));
  launchScaleAdd(fatbin);
  mgpuModuleUnload(fatbin);
#endif
  // PTX the driver compiles (cubin-format=isa).
  void *ptx = mgpuModuleLoadJIT(const_cast<char *>(kTestPtx), 2);
  launchScaleAdd(ptx);
  // Thread block clusters (gpu.launch_func's clusters) need sm_90.
  if (cuda::deviceDescription().find("(sm_") != std::string::npos &&
      std::atoi(cuda::deviceDescription().c_str() +
                cuda::deviceDescription().find("(sm_") + 4) >= 90)
    launchScaleAdd(ptx, /*cluster=*/2);
  mgpuModuleUnload(ptx);
  // Unloaded, then asked for again: loaded again.
  launchScaleAdd(ptx);
  mgpuModuleUnload(ptx);
  EXPECT_TRUE(cuda::synchronize().ok());
}

/// scale_add's launch (out = 2 in + 1 over n floats) on the step stream.
void queueScaleAdd(void *function, void *in, void *out, int32_t n) {
  void *params[] = {&in, &out, &n};
  mgpuLaunchKernel(function, (n + 127) / 128, 1, 1, 128, 1, 1, 0,
                   mgpuStreamCreate(), params, nullptr, 3);
}

TEST(CudaTest, CopiesAheadRunBeforeTheStepThatWaitsForThem) {
  REQUIRE_DEVICE();
  // 16M floats: long enough on the copy stream that a kernel not ordered
  // after it would read the buffer before the copy lands.
  const int32_t n = 1 << 24;
  void *staging = nullptr;
  ASSERT_TRUE(cuda::allocatePinned(n * sizeof(float), &staging).ok());
  auto *host = static_cast<float *>(staging);
  for (int32_t i = 0; i < n; ++i)
    host[i] = float(i % 1000) * 0.5f;
  DeviceBuffer in(nullptr, n * sizeof(float)), out(nullptr, n * sizeof(float));
  mgpuMemset32(in.ptr, 0, n, mgpuStreamCreate());
  ASSERT_TRUE(cuda::synchronize().ok());
  void *ptx = mgpuModuleLoadJIT(const_cast<char *>(kTestPtx), 2);
  void *function = mgpuModuleGetFunction(ptx, "scale_add");
  ASSERT_TRUE(cuda::copyAhead(in.ptr, staging, n * sizeof(float)).ok());
  ASSERT_TRUE(cuda::stepWaitsForCopiesAhead().ok());
  queueScaleAdd(function, in.ptr, out.ptr, n);
  // The outputs come back through page-locked memory, asynchronously.
  void *back = nullptr;
  ASSERT_TRUE(cuda::allocatePinned(n * sizeof(float), &back).ok());
  ASSERT_TRUE(cuda::copyToHostAsync(back, out.ptr, n * sizeof(float)).ok());
  ASSERT_TRUE(cuda::synchronize().ok());
  const auto *got = static_cast<const float *>(back);
  for (int32_t i = 0; i < n; i += 4099)
    ASSERT_EQ(got[i], 2.0f * host[i] + 1.0f) << i;
  ASSERT_EQ(got[n - 1], 2.0f * host[n - 1] + 1.0f);
  mgpuModuleUnload(ptx);
  cuda::releasePinned(back);
  cuda::releasePinned(staging);
}

namespace {
struct GraphStep {
  void *function;
  void *a, *b;
  int32_t n;
};
} // namespace

TEST(CudaTest, GraphsReplayTheCapturedLaunches) {
  REQUIRE_DEVICE();
  const int32_t n = 5000;
  std::vector<float> in(n);
  for (int32_t i = 0; i < n; ++i)
    in[i] = float(i) * 0.125f;
  DeviceBuffer a(in), b(nullptr, n * sizeof(float));
  void *ptx = mgpuModuleLoadJIT(const_cast<char *>(kTestPtx), 2);
  GraphStep step{mgpuModuleGetFunction(ptx, "scale_add"), a.ptr, b.ptr, n};
  // Two launches, the second reading what the first wrote: b = 2a + 1,
  // then a = 2b + 1.
  auto queue = [](void *user) {
    auto *s = static_cast<GraphStep *>(user);
    queueScaleAdd(s->function, s->a, s->b, s->n);
    queueScaleAdd(s->function, s->b, s->a, s->n);
  };
  void *graph = nullptr;
  weft::rt::Status s = cuda::captureGraph(queue, &step, &graph);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_NE(graph, nullptr);
  // Capturing ran nothing.
  EXPECT_EQ(a.read<float>(n), in);
  // Each replay runs both launches again on the buffers' current values.
  for (int replay = 0; replay < 3; ++replay) {
    ASSERT_TRUE(cuda::launchGraph(graph).ok());
    for (float &x : in)
      x = 2.0f * (2.0f * x + 1.0f) + 1.0f;
  }
  ASSERT_TRUE(cuda::synchronize().ok());
  EXPECT_EQ(a.read<float>(n), in);
  cuda::destroyGraph(graph);
  mgpuModuleUnload(ptx);
}

TEST(CudaTest, AFailedCaptureLeavesTheStreamUsable) {
  REQUIRE_DEVICE();
  // Waiting for the stream cannot be captured: the capture fails, says
  // so, and the stream runs work again (the trainer then launches the
  // step kernel by kernel).
  auto waits = [](void *) { (void)cuda::synchronize(); };
  void *graph = nullptr;
  weft::rt::Status s = cuda::captureGraph(waits, nullptr, &graph);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(graph, nullptr);
  EXPECT_NE(s.message.find("capturing the step"), std::string::npos)
      << s.message;
  std::vector<float> in = {1.0f, 2.0f, 3.0f};
  DeviceBuffer a(in), b(nullptr, in.size() * sizeof(float));
  void *ptx = mgpuModuleLoadJIT(const_cast<char *>(kTestPtx), 2);
  queueScaleAdd(mgpuModuleGetFunction(ptx, "scale_add"), a.ptr, b.ptr, 3);
  ASSERT_TRUE(cuda::synchronize().ok());
  EXPECT_EQ(b.read<float>(3), (std::vector<float>{3.0f, 5.0f, 7.0f}));
  mgpuModuleUnload(ptx);
}

TEST(CudaTest, DriverErrorsNameTheKernel) {
  REQUIRE_DEVICE();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        if (!cuda::initialize(0).ok())
          std::exit(3);
        void *m = mgpuModuleLoadJIT(const_cast<char *>(kTestPtx), 2);
        mgpuModuleGetFunction(m, "no_such_kernel");
      },
      testing::ExitedWithCode(1),
      "error: CUDA: mgpuModuleGetFunction: kernel \"no_such_kernel\": "
      "cuModuleGetFunction failed: CUDA_ERROR_NOT_FOUND");
  EXPECT_EXIT(
      {
        if (!cuda::initialize(0).ok())
          std::exit(3);
        void *m = mgpuModuleLoadJIT(const_cast<char *>(kTestPtx), 2);
        void *f = mgpuModuleGetFunction(m, "scale_add");
        // 2048 threads a block: more than any device allows.
        mgpuLaunchKernel(f, 1, 1, 1, 2048, 1, 1, 0, mgpuStreamCreate(), nullptr,
                         nullptr, 0);
      },
      testing::ExitedWithCode(1),
      "mgpuLaunchKernel: kernel \"scale_add\": cuLaunchKernel failed: "
      "CUDA_ERROR_INVALID_VALUE");
}

/// A kernel's fault surfaces at the next synchronization, which names what
/// was queued since the last; with WEFT_CUDA_SYNC=1 the launch itself ends
/// the process naming the kernel. Each in a child: the fault spoils the
/// context.
TEST(CudaTest, DeviceFaultsNameTheKernel) {
  REQUIRE_DEVICE();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto launchTrap = [] {
    if (!cuda::initialize(0).ok())
      std::exit(3);
    void *m = mgpuModuleLoadJIT(const_cast<char *>(kTestPtx), 2);
    void *f = mgpuModuleGetFunction(m, "fail_trap");
    mgpuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, mgpuStreamCreate(), nullptr,
                     nullptr, 0);
    mgpuStreamSynchronize(mgpuStreamCreate()); // does not wait
  };
  EXPECT_EXIT(
      {
        launchTrap();
        weft::rt::Status s = cuda::synchronize();
        std::fprintf(stderr, "%s\n", s.message.c_str());
        std::exit(s.ok() ? 0 : 4);
      },
      testing::ExitedWithCode(4),
      "CUDA: the device reported CUDA_ERROR_.* for work queued since the "
      "last synchronization \\(1 operation; the last: fail_trap\\); run "
      "with WEFT_CUDA_SYNC=1");
  // initialize() reads it, and the child (this binary again) initializes
  // before the statement runs: set in its environment.
  setenv("WEFT_CUDA_SYNC", "1", 1);
  EXPECT_EXIT(
      {
        launchTrap();
        std::exit(0);
      },
      testing::ExitedWithCode(1),
      "error: CUDA: mgpuLaunchKernel: fail_trap failed on the device "
      "\\(WEFT_CUDA_SYNC=1 waits after each\\): CUDA_ERROR_");
  unsetenv("WEFT_CUDA_SYNC");
}

//===----------------------------------------------------------------------===//
// The device GEMMs against the CPU's
//===----------------------------------------------------------------------===//

uint16_t toBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return uint16_t((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
float fromBf16(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

/// `n` random values (randomFloats) rounded to bf16, as their bits.
std::vector<uint16_t> randomBf16s(size_t n, std::mt19937 &gen) {
  std::vector<float> f = randomFloats(n, gen);
  std::vector<uint16_t> out(n);
  for (size_t i = 0; i < n; ++i)
    out[i] = toBf16(f[i]);
  return out;
}

/// Device buffers start `offset` elements into an allocation, so that the
/// GEMMs see pointers aligned to less than cuBLASLt's default 256 bytes.
constexpr size_t kOffset = 1;

std::string describe(const Case &c) {
  return "batch " + std::to_string(c.batch) + " " + std::to_string(c.m) + "x" +
         std::to_string(c.n) + "x" + std::to_string(c.k) + " ta " +
         std::to_string(c.ta) + " tb " + std::to_string(c.tb) +
         (c.broadcastA ? " A broadcast" : "") +
         (c.broadcastB ? " B broadcast" : "");
}

void expectClose(const std::vector<float> &got, const std::vector<float> &want,
                 float tolerance, const std::string &what) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // Padding both sides left as it was (a NaN in batch_sum's C).
    if (std::isnan(got[i]) && std::isnan(want[i]))
      continue;
    ASSERT_NEAR(got[i], want[i], tolerance * (1.0f + std::fabs(want[i])))
        << what << " at " << i;
  }
}

TEST(CudaTest, SgemmMatchesTheCpu) {
  REQUIRE_DEVICE();
  std::mt19937 gen(11);
  for (const Case &c : cases()) {
    Call call = callOf(c);
    std::vector<float> a = randomFloats(call.aSize + kOffset, gen);
    std::vector<float> b = randomFloats(call.bSize + kOffset, gen);
    std::vector<float> want(call.cSize + kOffset, -7.0f);
    DeviceBuffer da(a), db(b), dc(want);
    weft_rt_sgemm(c.batch, c.ta, c.tb, c.m, c.n, c.k, a.data() + kOffset,
                  call.lda, call.sa, b.data() + kOffset, call.ldb, call.sb,
                  want.data() + kOffset, call.ldc, call.sc);
    weft_rt_cuda_sgemm(c.batch, c.ta, c.tb, c.m, c.n, c.k,
                       da.as<float>() + kOffset, call.lda, call.sa,
                       db.as<float>() + kOffset, call.ldb, call.sb,
                       dc.as<float>() + kOffset, call.ldc, call.sc);
    // f32 accumulation, not TF32: within a few f32 roundings.
    expectClose(dc.read<float>(want.size()), want, 1e-5f, describe(c));
  }
}

TEST(CudaTest, SgemmBatchSumAndAccumulateMatchTheCpu) {
  REQUIRE_DEVICE();
  std::mt19937 gen(12);
  for (const Case &c : cases()) {
    Call call = callOf(c);
    std::vector<float> a = randomFloats(call.aSize, gen);
    std::vector<float> b = randomFloats(call.bSize, gen);
    // One C: whatever it held (NaN too) is overwritten.
    size_t cSize = size_t(c.m) * call.ldc;
    std::vector<float> want(cSize, std::nanf(""));
    DeviceBuffer da(a), db(b), dc(want);
    weft_rt_sgemm_batch_sum(c.batch, c.ta, c.tb, c.m, c.n, c.k, a.data(),
                            call.lda, call.sa, b.data(), call.ldb, call.sb,
                            want.data(), call.ldc);
    weft_rt_cuda_sgemm_batch_sum(
        c.batch, c.ta, c.tb, c.m, c.n, c.k, da.as<float>(), call.lda, call.sa,
        db.as<float>(), call.ldb, call.sb, dc.as<float>(), call.ldc);
    expectClose(dc.read<float>(cSize), want, 1e-5f * float(c.batch),
                "batch_sum " + describe(c));

    // C += op(A) op(B) on the first matrices.
    std::vector<float> acc = randomFloats(cSize, gen);
    DeviceBuffer dacc(acc);
    weft_rt_sgemm_accumulate(c.ta, c.tb, c.m, c.n, c.k, a.data(), call.lda,
                             b.data(), call.ldb, acc.data(), call.ldc);
    weft_rt_cuda_sgemm_accumulate(c.ta, c.tb, c.m, c.n, c.k, da.as<float>(),
                                  call.lda, db.as<float>(), call.ldb,
                                  dacc.as<float>(), call.ldc);
    expectClose(dacc.read<float>(cSize), acc, 1e-5f,
                "accumulate " + describe(c));
  }
}

TEST(CudaTest, EmptySumsAndBroadcastRows) {
  REQUIRE_DEVICE();
  std::mt19937 gen(13);
  // k = 0 zeroes C (rows ldc apart, the padding kept); accumulate leaves it.
  std::vector<float> c = randomFloats(4 * 6, gen);
  DeviceBuffer dc(c);
  weft_rt_cuda_sgemm(1, 0, 0, 4, 5, 0, nullptr, 1, 0, nullptr, 5, 0,
                     dc.as<float>(), 6, 0);
  std::vector<float> got = dc.read<float>(c.size());
  for (int i = 0; i < 24; ++i)
    EXPECT_EQ(got[i], i % 6 == 5 ? c[i] : 0.0f) << i;
  DeviceBuffer dc2(c);
  weft_rt_cuda_sgemm_accumulate(0, 0, 4, 5, 0, nullptr, 1, nullptr, 5,
                                dc2.as<float>(), 6);
  EXPECT_EQ(dc2.read<float>(c.size()), c);
  DeviceBuffer dc3(c);
  weft_rt_cuda_sgemm_batch_sum(0, 0, 0, 4, 5, 3, nullptr, 3, 0, nullptr, 5, 0,
                               dc3.as<float>(), 6);
  got = dc3.read<float>(c.size());
  for (int i = 0; i < 24; ++i)
    EXPECT_EQ(got[i], i % 6 == 5 ? c[i] : 0.0f) << i;

  // Row strides of 0 (one row broadcast) and shorter than a row, which no
  // cuBLASLt layout expresses, on A and B, batched.
  for (int64_t ld : {int64_t(0), int64_t(2)}) {
    const int64_t batch = 3, m = 37, n = 19, k = 5;
    std::vector<float> a = randomFloats(size_t(batch) * m * k, gen);
    std::vector<float> b = randomFloats(size_t(batch) * k * n, gen);
    std::vector<float> want(size_t(batch) * m * n, -7.0f);
    DeviceBuffer da(a), db(b), dd(want);
    weft_rt_sgemm(batch, 0, 0, m, n, k, a.data(), ld, m * k, b.data(), ld,
                  k * n, want.data(), n, m * n);
    weft_rt_cuda_sgemm(batch, 0, 0, m, n, k, da.as<float>(), ld, m * k,
                       db.as<float>(), ld, k * n, dd.as<float>(), n, m * n);
    expectClose(dd.read<float>(want.size()), want, 1e-5f,
                "row stride " + std::to_string(ld));
  }
}

TEST(CudaTest, Bf16GemmsMatchTheCpu) {
  REQUIRE_DEVICE();
  std::mt19937 gen(14);
  for (const Case &c : cases()) {
    Call call = callOf(c);
    std::vector<uint16_t> a = randomBf16s(call.aSize + kOffset, gen),
                          b = randomBf16s(call.bSize + kOffset, gen);
    DeviceBuffer da(a), db(b);

    std::vector<float> want(call.cSize + kOffset, -7.0f);
    DeviceBuffer dc(want);
    weft_rt_sbgemm(c.batch, c.ta, c.tb, c.m, c.n, c.k, a.data() + kOffset,
                   call.lda, call.sa, b.data() + kOffset, call.ldb, call.sb,
                   want.data() + kOffset, call.ldc, call.sc);
    weft_rt_cuda_sbgemm(c.batch, c.ta, c.tb, c.m, c.n, c.k,
                        da.as<uint16_t>() + kOffset, call.lda, call.sa,
                        db.as<uint16_t>() + kOffset, call.ldb, call.sb,
                        dc.as<float>() + kOffset, call.ldc, call.sc);
    // bf16 products are exact in f32; only the sums round.
    expectClose(dc.read<float>(want.size()), want, 1e-5f,
                "sbgemm " + describe(c));

    std::vector<uint16_t> wantH(call.cSize + kOffset, 0x7777);
    DeviceBuffer dh(wantH);
    weft_rt_sbgemm_bf16(c.batch, c.ta, c.tb, c.m, c.n, c.k, a.data() + kOffset,
                        call.lda, call.sa, b.data() + kOffset, call.ldb,
                        call.sb, wantH.data() + kOffset, call.ldc, call.sc);
    weft_rt_cuda_sbgemm_bf16(c.batch, c.ta, c.tb, c.m, c.n, c.k,
                             da.as<uint16_t>() + kOffset, call.lda, call.sa,
                             db.as<uint16_t>() + kOffset, call.ldb, call.sb,
                             dh.as<uint16_t>() + kOffset, call.ldc, call.sc);
    std::vector<uint16_t> gotH = dh.read<uint16_t>(wantH.size());
    // Both round an f32 sum to bf16: equal, or one bf16 step apart where
    // the sums differ near a rounding boundary.
    for (size_t i = 0; i < wantH.size(); ++i) {
      float g = fromBf16(gotH[i]), w = fromBf16(wantH[i]);
      ASSERT_NEAR(g, w, std::ldexp(1.0f, -7) * (std::fabs(w) + 1e-3f))
          << "sbgemm_bf16 " << describe(c) << " at " << i;
    }
  }
}

/// The CPU reference of a `_bias` GEMM: `c` (the CPU GEMM's result, f32)
/// plus bias[j] on the n columns of every row, padding left alone.
void addBias(std::vector<float> &c, const std::vector<float> &bias,
             const Case &c0, const Call &call) {
  for (int64_t i = 0; i < c0.batch; ++i)
    for (int64_t r = 0; r < c0.m; ++r)
      for (int64_t j = 0; j < c0.n; ++j)
        c[kOffset + size_t(i * call.sc + r * call.ldc + j)] +=
            bias[kOffset + j];
}

/// The bias epilogue cases: cases() and odd shapes (primes, a single row or
/// column, k of 1) that leave cuBLASLt few vectorized tiles.
std::vector<Case> biasCases() {
  std::vector<Case> out = cases();
  for (bool tb : {false, true}) {
    out.push_back({1, false, tb, 1, 97, 13});
    out.push_back({1, false, tb, 131, 1, 7});
    out.push_back({1, true, tb, 61, 67, 1, 3, 0, 1});
    out.push_back({2, false, tb, 257, 129, 65, 0, 3, 5});
  }
  return out;
}

TEST(CudaTest, SgemmBiasMatchesTheCpu) {
  REQUIRE_DEVICE();
  std::mt19937 gen(15);
  for (const Case &c : biasCases()) {
    Call call = callOf(c);
    std::vector<float> a = randomFloats(call.aSize + kOffset, gen);
    std::vector<float> b = randomFloats(call.bSize + kOffset, gen);
    std::vector<float> bias = randomFloats(size_t(c.n) + kOffset, gen);
    std::vector<float> want(call.cSize + kOffset, -7.0f);
    DeviceBuffer da(a), db(b), dbias(bias), dc(want);
    weft_rt_sgemm(c.batch, c.ta, c.tb, c.m, c.n, c.k, a.data() + kOffset,
                  call.lda, call.sa, b.data() + kOffset, call.ldb, call.sb,
                  want.data() + kOffset, call.ldc, call.sc);
    addBias(want, bias, c, call);
    weft_rt_cuda_sgemm_bias(c.batch, c.ta, c.tb, c.m, c.n, c.k,
                            da.as<float>() + kOffset, call.lda, call.sa,
                            db.as<float>() + kOffset, call.ldb, call.sb,
                            dbias.as<float>() + kOffset,
                            dc.as<float>() + kOffset, call.ldc, call.sc);
    // The sum in f32 (not TF32) and one rounding of the bias: as the plain
    // GEMM's result and the kernel adding the bias.
    expectClose(dc.read<float>(want.size()), want, 1e-5f,
                "sgemm_bias " + describe(c));
  }
  // k = 0: every row of C is the bias; the padding stays.
  std::vector<float> bias = randomFloats(5, gen);
  std::vector<float> c = randomFloats(4 * 6, gen);
  DeviceBuffer dbias(bias), dc(c);
  weft_rt_cuda_sgemm_bias(1, 0, 0, 4, 5, 0, nullptr, 1, 0, nullptr, 5, 0,
                          dbias.as<float>(), dc.as<float>(), 6, 0);
  std::vector<float> got = dc.read<float>(c.size());
  for (int i = 0; i < 24; ++i)
    EXPECT_EQ(got[i], i % 6 == 5 ? c[i] : bias[i % 6]) << i;
}

TEST(CudaTest, Bf16GemmsWithBiasMatchTheCpu) {
  REQUIRE_DEVICE();
  std::mt19937 gen(16);
  for (const Case &c : biasCases()) {
    Call call = callOf(c);
    std::vector<uint16_t> a = randomBf16s(call.aSize + kOffset, gen),
                          b = randomBf16s(call.bSize + kOffset, gen);
    DeviceBuffer da(a), db(b);
    std::vector<float> product(call.cSize + kOffset, -7.0f);
    weft_rt_sbgemm(c.batch, c.ta, c.tb, c.m, c.n, c.k, a.data() + kOffset,
                   call.lda, call.sa, b.data() + kOffset, call.ldb, call.sb,
                   product.data() + kOffset, call.ldc, call.sc);

    // f32 C and an f32 bias.
    std::vector<float> bias = randomFloats(size_t(c.n) + kOffset, gen);
    std::vector<float> want = product;
    addBias(want, bias, c, call);
    DeviceBuffer dbias(bias), dc(std::vector<float>(want.size(), -7.0f));
    weft_rt_cuda_sbgemm_bias(c.batch, c.ta, c.tb, c.m, c.n, c.k,
                             da.as<uint16_t>() + kOffset, call.lda, call.sa,
                             db.as<uint16_t>() + kOffset, call.ldb, call.sb,
                             dbias.as<float>() + kOffset,
                             dc.as<float>() + kOffset, call.ldc, call.sc);
    // bf16 products are exact in f32; only the sums round.
    expectClose(dc.read<float>(want.size()), want, 1e-5f,
                "sbgemm_bias " + describe(c));

    // bf16 C and a bf16 bias: the biased f32 sum rounded once.
    std::vector<uint16_t> biasH(size_t(c.n) + kOffset);
    std::vector<float> biasRounded(biasH.size());
    for (size_t i = 0; i < biasH.size(); ++i) {
      biasH[i] = toBf16(bias[i]);
      biasRounded[i] = fromBf16(biasH[i]);
    }
    std::vector<float> wantF = product;
    addBias(wantF, biasRounded, c, call);
    DeviceBuffer dbiasH(biasH),
        dh(std::vector<uint16_t>(call.cSize + kOffset, 0x7777));
    weft_rt_cuda_sbgemm_bf16_bias(
        c.batch, c.ta, c.tb, c.m, c.n, c.k, da.as<uint16_t>() + kOffset,
        call.lda, call.sa, db.as<uint16_t>() + kOffset, call.ldb, call.sb,
        dbiasH.as<uint16_t>() + kOffset, dh.as<uint16_t>() + kOffset, call.ldc,
        call.sc);
    std::vector<uint16_t> gotH = dh.read<uint16_t>(wantF.size());
    for (size_t i = kOffset; i < wantF.size(); ++i) {
      // Padding (columns from n) left as it was.
      if (int64_t(i - kOffset) % call.ldc >= c.n) {
        ASSERT_EQ(gotH[i], 0x7777) << "sbgemm_bf16_bias padding at " << i;
        continue;
      }
      // One bf16 step apart at most where the f32 sums differ near a
      // rounding boundary.
      float g = fromBf16(gotH[i]), w = fromBf16(toBf16(wantF[i]));
      ASSERT_NEAR(g, w, 1e-2f * std::fabs(w) + 1e-4f)
          << "sbgemm_bf16_bias " << describe(c) << " at " << i;
    }
  }
}

//===----------------------------------------------------------------------===//
// Attention: the GPU kernels against the CPU's (lib/Runtime/Attention.cpp,
// which the evaluator tests) on random inputs
//===----------------------------------------------------------------------===//

struct AttentionCase {
  int64_t heads, t, s, d, dv;
  bool causal;
};

std::string describe(const AttentionCase &c) {
  return std::to_string(c.heads) + " heads, t " + std::to_string(c.t) + ", s " +
         std::to_string(c.s) + ", d " + std::to_string(c.d) + ", dv " +
         std::to_string(c.dv) + (c.causal ? ", causal" : "");
}

/// max |got - want| / max |want|: the kernels sum in other orders than the
/// CPU's (and bf16 rounds P and dS), so errors scale with the tensor.
double relativeError(const std::vector<float> &got,
                     const std::vector<float> &want) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    err = std::max(err, double(std::fabs(got[i] - want[i])));
    scale = std::max(scale, double(std::fabs(want[i])));
  }
  return err / scale;
}

/// The forward and backward of `c` on the CPU (f32, from the operands as
/// given) and on the GPU (f32 or bf16 operands; bf16 ones are rounded
/// first, and the CPU computes from the rounded values too). Returns the
/// GPU's results in f32 for out, lse, dq, dk, dv, with the CPU's in `want`.
using Results = std::vector<std::vector<float>>;
Results runAttention(const AttentionCase &c, bool bf16, std::mt19937 &gen,
                     Results &want) {
  float scale = 1.0f / std::sqrt(float(c.d));
  size_t nq = c.heads * c.t * c.d, nk = c.heads * c.s * c.d,
         nv = c.heads * c.s * c.dv, no = c.heads * c.t * c.dv,
         nl = c.heads * c.t;
  auto operand = [&](size_t n, float range) {
    std::vector<float> v = randomFloats(n, gen);
    for (float &x : v)
      x = bf16 ? fromBf16(toBf16(x * range)) : x * range;
    return v;
  };
  // Wide enough scores that the softmax is far from uniform.
  std::vector<float> q = operand(nq, 2.0f), k = operand(nk, 2.0f),
                     v = operand(nv, 1.0f), dout = operand(no, 1.0f);
  want.assign(5, {});
  want[0].resize(no);
  want[1].resize(nl);
  weft_rt_attention_f32(c.heads, c.t, c.s, c.d, c.dv, scale, c.causal, q.data(),
                        k.data(), v.data(), want[0].data(), want[1].data());
  std::vector<float> out = want[0];
  if (bf16)
    for (float &x : out)
      x = fromBf16(toBf16(x));
  want[2].resize(nq);
  want[3].resize(nk);
  want[4].resize(nv);
  weft_rt_attention_grad_f32(c.heads, c.t, c.s, c.d, c.dv, scale, c.causal,
                             dout.data(), q.data(), k.data(), v.data(),
                             out.data(), want[1].data(), want[2].data(),
                             want[3].data(), want[4].data());

  Results got(5);
  DeviceBuffer lse(nullptr, nl * 4);
  if (!bf16) {
    DeviceBuffer dq_(q), dk_(k), dv_(v), ddo(dout), dout_(nullptr, no * 4),
        gq(nullptr, nq * 4), gk(nullptr, nk * 4), gv(nullptr, nv * 4);
    weft_rt_cuda_attention_f32(
        c.heads, c.t, c.s, c.d, c.dv, scale, c.causal, dq_.as<float>(),
        dk_.as<float>(), dv_.as<float>(), dout_.as<float>(), lse.as<float>());
    // The backward reads the CPU's out, as it does the CPU's lse.
    DeviceBuffer o(out), l(want[1]);
    weft_rt_cuda_attention_grad_f32(
        c.heads, c.t, c.s, c.d, c.dv, scale, c.causal, ddo.as<float>(),
        dq_.as<float>(), dk_.as<float>(), dv_.as<float>(), o.as<float>(),
        l.as<float>(), gq.as<float>(), gk.as<float>(), gv.as<float>());
    got[0] = dout_.read<float>(no);
    got[1] = lse.read<float>(nl);
    got[2] = gq.read<float>(nq);
    got[3] = gk.read<float>(nk);
    got[4] = gv.read<float>(nv);
    return got;
  }
  auto half = [](const std::vector<float> &x) {
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      h[i] = toBf16(x[i]);
    return h;
  };
  auto widen = [](const std::vector<uint16_t> &h) {
    std::vector<float> x(h.size());
    for (size_t i = 0; i < h.size(); ++i)
      x[i] = fromBf16(h[i]);
    return x;
  };
  DeviceBuffer dq_(half(q)), dk_(half(k)), dv_(half(v)), ddo(half(dout)),
      dout_(nullptr, no * 2), gq(nullptr, nq * 2), gk(nullptr, nk * 2),
      gv(nullptr, nv * 2), o(half(out)), l(want[1]);
  weft_rt_cuda_attention_bf16(c.heads, c.t, c.s, c.d, c.dv, scale, c.causal,
                              dq_.as<uint16_t>(), dk_.as<uint16_t>(),
                              dv_.as<uint16_t>(), dout_.as<uint16_t>(),
                              lse.as<float>());
  weft_rt_cuda_attention_grad_bf16(
      c.heads, c.t, c.s, c.d, c.dv, scale, c.causal, ddo.as<uint16_t>(),
      dq_.as<uint16_t>(), dk_.as<uint16_t>(), dv_.as<uint16_t>(),
      o.as<uint16_t>(), l.as<float>(), gq.as<uint16_t>(), gk.as<uint16_t>(),
      gv.as<uint16_t>());
  got[0] = widen(dout_.read<uint16_t>(no));
  got[1] = lse.read<float>(nl);
  got[2] = widen(gq.read<uint16_t>(nq));
  got[3] = widen(gk.read<uint16_t>(nk));
  got[4] = widen(gv.read<uint16_t>(nv));
  return got;
}

void checkAttention(const std::vector<AttentionCase> &cases, bool bf16,
                    double tolerance, double gradTolerance) {
  std::mt19937 gen(bf16 ? 17 : 16);
  const char *names[] = {"out", "lse", "dq", "dk", "dv"};
  for (const AttentionCase &c : cases) {
    Results want;
    Results got = runAttention(c, bf16, gen, want);
    for (int i = 0; i < 5; ++i) {
      double err = relativeError(got[i], want[i]);
      EXPECT_LE(err, i < 2 ? tolerance : gradTolerance)
          << (bf16 ? "bf16 " : "f32 ") << names[i] << ", " << describe(c);
      std::printf("[ attention ] %s %-4s %-40s relative error %.2e\n",
                  bf16 ? "bf16" : "f32", names[i], describe(c).c_str(), err);
    }
  }
}

TEST(CudaTest, GemmsPaddedPastAnAwkwardDimensionMatchTheCpu) {
  REQUIRE_DEVICE();
  // A dimension of at least 4096 that is not a multiple of 64 (GPT-2's
  // vocabulary, 50257) is padded to the next multiple in scratch, for
  // products of at least a GFLOP: n here (the logits GEMM's shape, C's
  // block copied back out), k (its input gradient's), m transposed (as its
  // weight gradient's). C's row stride is wider than a row, and the
  // elements past each row must stay untouched.
  struct Padded {
    bool ta, tb;
    int64_t m, n, k;
  };
  std::mt19937 gen(23);
  for (Padded c : {Padded{false, true, 256, 4100, 1024},
                   Padded{false, false, 320, 320, 5001},
                   Padded{true, false, 4100, 256, 1024}}) {
    int64_t lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n, ldc = c.n + 3;
    std::vector<uint16_t> a = randomBf16s(c.m * c.k, gen),
                          b = randomBf16s(c.k * c.n, gen);
    std::vector<float> want(c.m * ldc, -7.0f);
    DeviceBuffer da(a), db(b), dc(want);
    weft_rt_sbgemm(1, c.ta, c.tb, c.m, c.n, c.k, a.data(), lda, 0, b.data(),
                   ldb, 0, want.data(), ldc, 0);
    weft_rt_cuda_sbgemm(1, c.ta, c.tb, c.m, c.n, c.k, da.as<uint16_t>(), lda, 0,
                        db.as<uint16_t>(), ldb, 0, dc.as<float>(), ldc, 0);
    std::string what = std::to_string(c.m) + "x" + std::to_string(c.n) + "x" +
                       std::to_string(c.k);
    // Long sums: a few f32 roundings of terms up to 1.
    expectClose(dc.read<float>(want.size()), want, 1e-4f, "sbgemm " + what);

    std::vector<float> af(a.size()), bf(b.size());
    for (size_t i = 0; i < a.size(); ++i)
      af[i] = fromBf16(a[i]);
    for (size_t i = 0; i < b.size(); ++i)
      bf[i] = fromBf16(b[i]);
    std::vector<float> wantF(c.m * ldc, -7.0f);
    DeviceBuffer daf(af), dbf(bf), dcf(wantF);
    weft_rt_sgemm(1, c.ta, c.tb, c.m, c.n, c.k, af.data(), lda, 0, bf.data(),
                  ldb, 0, wantF.data(), ldc, 0);
    weft_rt_cuda_sgemm(1, c.ta, c.tb, c.m, c.n, c.k, daf.as<float>(), lda, 0,
                       dbf.as<float>(), ldb, 0, dcf.as<float>(), ldc, 0);
    expectClose(dcf.read<float>(wantF.size()), wantF, 1e-4f, "sgemm " + what);

    std::vector<uint16_t> wantH(c.m * ldc, 0x7777);
    DeviceBuffer dh(wantH);
    weft_rt_sbgemm_bf16(1, c.ta, c.tb, c.m, c.n, c.k, a.data(), lda, 0,
                        b.data(), ldb, 0, wantH.data(), ldc, 0);
    weft_rt_cuda_sbgemm_bf16(1, c.ta, c.tb, c.m, c.n, c.k, da.as<uint16_t>(),
                             lda, 0, db.as<uint16_t>(), ldb, 0,
                             dh.as<uint16_t>(), ldc, 0);
    std::vector<uint16_t> gotH = dh.read<uint16_t>(wantH.size());
    // A bf16 step, or the f32 sums' own difference (1e-4, as above) where
    // a long sum is small: on an H100, element (66, 3434) of the first
    // case was outside 2^-7 (|w| + 1e-3), the bound of the short sums of
    // Bf16GemmsMatchTheCpu, while both f32-output checks of the case
    // passed at 1e-4.
    for (size_t i = 0; i < wantH.size(); ++i) {
      float g = fromBf16(gotH[i]), w = fromBf16(wantH[i]);
      ASSERT_NEAR(g, w, std::ldexp(1.0f, -7) * std::fabs(w) + 1e-4f)
          << "sbgemm_bf16 " << what << " at " << i;
    }
  }
  ASSERT_TRUE(cuda::synchronize().ok());
}

/// table[r] += updates[t] in token order, r = ids[t] counted from the end
/// when negative and clamped: the CPU scatter the GPU's must equal.
template <typename U, typename Widen>
void scatterOnCpu(const std::vector<int64_t> &ids, std::vector<float> &table,
                  int64_t rows, const std::vector<U> &updates, int64_t cols,
                  Widen widen) {
  for (size_t t = 0; t < ids.size(); ++t) {
    int64_t r = ids[t] < 0 ? ids[t] + rows : ids[t];
    r = std::min<int64_t>(std::max<int64_t>(r, 0), rows - 1);
    for (int64_t c = 0; c < cols; ++c)
      table[r * cols + c] = table[r * cols + c] + widen(updates[t * cols + c]);
  }
}

TEST(CudaTest, ScatterAddRowsEqualsTheCpuBitForBit) {
  REQUIRE_DEVICE();
  std::mt19937 gen(21);
  // Repeated rows (a few hot ones, as frequent tokens), negative and
  // out-of-range ids, a single token, a token count not a power of two,
  // columns not a multiple of 32, and the GPT-2 batch's 8192 tokens.
  struct Case {
    int64_t tokens, rows, cols;
  };
  for (Case c : {Case{1, 5, 3}, Case{37, 11, 70}, Case{1000, 50, 768},
                 Case{8192, 50257, 96}, Case{16384, 300, 33}}) {
    std::vector<int64_t> ids(c.tokens);
    std::uniform_int_distribution<int64_t> any(-c.rows - 2, c.rows + 2),
        hot(0, std::min<int64_t>(c.rows - 1, 3));
    for (int64_t &id : ids)
      id = gen() % 3 == 0 ? hot(gen) : any(gen);
    std::vector<float> table = randomFloats(c.rows * c.cols, gen);
    std::vector<float> updates = randomFloats(c.tokens * c.cols, gen);
    std::vector<uint16_t> updates16 = randomBf16s(c.tokens * c.cols, gen);
    DeviceBuffer dids(ids), dtable(table), dup(updates), dup16(updates16);
    DeviceBuffer dtable16(table);
    weft_rt_cuda_scatter_add_rows_f32(dids.as<int64_t>(), c.tokens,
                                      dtable.as<float>(), c.rows,
                                      dup.as<float>(), c.cols);
    weft_rt_cuda_scatter_add_rows_bf16(dids.as<int64_t>(), c.tokens,
                                       dtable16.as<float>(), c.rows,
                                       dup16.as<uint16_t>(), c.cols);
    ASSERT_TRUE(cuda::synchronize().ok());
    std::vector<float> want = table, want16 = table;
    scatterOnCpu(ids, want, c.rows, updates, c.cols, [](float x) { return x; });
    scatterOnCpu(ids, want16, c.rows, updates16, c.cols, fromBf16);
    EXPECT_EQ(dtable.read<float>(want.size()), want) << c.tokens << " tokens";
    EXPECT_EQ(dtable16.read<float>(want16.size()), want16)
        << c.tokens << " tokens, bf16 updates";
  }
}

// Tails of 64-row blocks, cross attention (t != s), both head widths (64
// and 128 after padding), d != dv.
TEST(CudaTest, AttentionF32MatchesTheCpu) {
  REQUIRE_DEVICE();
  checkAttention({{3, 100, 100, 40, 24, true},
                  {3, 100, 100, 40, 24, false},
                  {2, 50, 90, 16, 16, false},
                  {2, 130, 130, 64, 64, true}},
                 /*bf16=*/false, 1e-5, 1e-5);
}

TEST(CudaTest, AttentionBf16MatchesTheCpu) {
  REQUIRE_DEVICE();
  // bf16 outputs round to 8 bits (2^-9 relative) and the kernels round P
  // and dS to bf16 for their products. Heads up to 64 wide run the
  // register kernels: causal and not, t != s both ways, and widths that
  // are not whole 16-byte rows (20, 36: plain loads instead of cp.async).
  checkAttention({{2, 200, 200, 64, 64, true},
                  {2, 70, 70, 128, 128, false},
                  {3, 100, 100, 40, 24, true},
                  {2, 50, 90, 16, 16, false},
                  {2, 130, 70, 20, 36, true},
                  {1, 70, 200, 64, 48, true}},
                 /*bf16=*/true, 1e-2, 2e-2);
}

TEST(CudaTest, AttentionIsDeterministic) {
  REQUIRE_DEVICE();
  AttentionCase c{4, 300, 300, 64, 64, true};
  std::mt19937 gen1(5), gen2(5);
  Results w1, w2;
  Results a = runAttention(c, /*bf16=*/true, gen1, w1);
  Results b = runAttention(c, /*bf16=*/true, gen2, w2);
  for (int i = 0; i < 5; ++i)
    EXPECT_EQ(std::memcmp(a[i].data(), b[i].data(), a[i].size() * 4), 0)
        << "result " << i;
}

TEST(CudaTest, AttentionRefusesWideHeads) {
  REQUIRE_DEVICE();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(weft_rt_cuda_attention_bf16(1, 4, 4, 160, 64, 1.0f, 0, nullptr,
                                           nullptr, nullptr, nullptr, nullptr),
               "head dimension 160 is over the GPU attention kernels' 128 "
               "for bf16 operands: compile with --fused-attention=off");
  EXPECT_DEATH(weft_rt_cuda_attention_f32(1, 4, 4, 96, 64, 1.0f, 0, nullptr,
                                          nullptr, nullptr, nullptr, nullptr),
               "head dimension 96 is over the GPU attention kernels' 64 "
               "for f32 operands");
}

} // namespace
