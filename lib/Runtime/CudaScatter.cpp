//===- CudaScatter.cpp - Launching the row scatter-add kernels ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weft_rt_cuda_scatter_add_rows_f32 (Cuda.h) launches CudaScatter.cu's two
// kernels, which nvcc builds into a fatbin the build embeds here
// (WEFT_CUDA_SCATTER_FATBIN), loaded and launched through the mgpu*
// functions as the attention kernels are (CudaAttention.cpp). Built without
// nvcc, the entry point ends the process saying so.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Cuda.h"

#include "CudaInternal.h"

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#ifdef WEFT_CUDA_SCATTER_FATBIN
#include WEFT_CUDA_SCATTER_FATBIN
#endif

using namespace weft::rt::cuda;

namespace {

void *scatterModule([[maybe_unused]] const char *call) {
#ifdef WEFT_CUDA_SCATTER_FATBIN
  static std::once_flag once;
  static void *module = nullptr;
  std::call_once(once, [] {
    module = detail::loadEmbeddedFatbin(weftScatterFatbin,
                                        sizeof(weftScatterFatbin));
  });
  return module;
#else
  detail::fatal(call, "this runtime was built without nvcc (the CUDA "
                      "toolkit's compiler), so it has no scatter kernels: "
                      "rebuild Weft where /usr/local/cuda/bin/nvcc exists");
#endif
}

/// Device memory for the sorted (row, token) keys.
uint64_t *sortedKeysBuffer(const char *call, int64_t tokens) {
  static std::mutex mutex;
  static detail::GrowingBuffer buffer;
  std::lock_guard<std::mutex> lock(mutex);
  return static_cast<uint64_t *>(
      buffer.atLeast(size_t(tokens) * 8, call, "the scatter's sorted keys"));
}

} // namespace

namespace {

/// Sorts the tokens by (row, token), then launches `addName` (the f32 or
/// bf16 updates' kernel) over them.
void scatterAddRows(const char *call, const char *addName, const int64_t *ids,
                    int64_t tokens, float *table, int64_t rows,
                    const void *updates, int64_t cols) {
  if (tokens <= 0 || cols <= 0)
    return;
  if (rows < 1 || rows > INT32_MAX || tokens > kMaxScatterTokens)
    detail::fatal(call, "sizes out of range: " + std::to_string(tokens) +
                            " tokens (at most " +
                            std::to_string(kMaxScatterTokens) + "), " +
                            std::to_string(rows) + " rows");
  int n = 1;
  while (n < tokens)
    n *= 2;
  int sharedBytes = n * 8;
  if (sharedBytes > detail::sharedMemoryOptIn())
    detail::fatal(call, "sorting " + std::to_string(tokens) + " tokens needs " +
                            std::to_string(sharedBytes) +
                            " bytes of shared memory; this GPU allows " +
                            std::to_string(detail::sharedMemoryOptIn()));
  static const char sortName[] = "weft_scatter_sort_rows";
  detail::requireInitialized(call, sortName);
  void *module = scatterModule(call);
  void *sort = mgpuModuleGetFunction(module, sortName);
  void *add = mgpuModuleGetFunction(module, addName);
  uint64_t *sorted = sortedKeysBuffer(call, tokens);
  int count = int(tokens);
  long long rowCount = rows, colCount = cols;
  const void *idsArg = ids, *updatesArg = updates;
  void *tableArg = table, *sortedArg = sorted;
  void *sortParams[] = {&idsArg, &count, &n, &rowCount, &sortedArg};
  mgpuLaunchKernel(sort, 1, 1, 1, 1024, 1, 1, sharedBytes, nullptr, sortParams,
                   nullptr, 5);
  void *addParams[] = {&sortedArg, &count, &tableArg, &updatesArg, &colCount};
  int threads = cols >= 256 ? 256 : int((cols + 31) / 32 * 32);
  mgpuLaunchKernel(add, count, 1, 1, threads, 1, 1, 0, nullptr, addParams,
                   nullptr, 5);
}

} // namespace

extern "C" void weft_rt_cuda_scatter_add_rows_f32(const int64_t *ids,
                                                  int64_t tokens, float *table,
                                                  int64_t rows,
                                                  const float *updates,
                                                  int64_t cols) {
  // String literals: mgpuModuleGetFunction keeps the pointer.
  scatterAddRows("weft_rt_cuda_scatter_add_rows_f32",
                 "weft_scatter_add_rows_f32", ids, tokens, table, rows, updates,
                 cols);
}

extern "C" void weft_rt_cuda_scatter_add_rows_bf16(const int64_t *ids,
                                                   int64_t tokens, float *table,
                                                   int64_t rows,
                                                   const uint16_t *updates,
                                                   int64_t cols) {
  scatterAddRows("weft_rt_cuda_scatter_add_rows_bf16",
                 "weft_scatter_add_rows_bf16", ids, tokens, table, rows,
                 updates, cols);
}
