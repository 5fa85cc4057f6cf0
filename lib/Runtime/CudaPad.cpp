//===- CudaPad.cpp - Launching the padded copy ----------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// detail::padCopy (CudaInternal.h) launches CudaPad.cu's kernel, which nvcc
// builds into a fatbin the build embeds here (WEFT_CUDA_PAD_FATBIN), loaded
// and launched through the mgpu* functions as the attention kernels are.
// Built without nvcc there is nothing to launch, and GEMMs are not padded
// (detail::canPad).
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Cuda.h"

#include "CudaInternal.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <vector>

#ifdef WEFT_CUDA_PAD_FATBIN
#include WEFT_CUDA_PAD_FATBIN
#endif

using namespace weft::rt::cuda;

bool detail::canPad() {
#ifdef WEFT_CUDA_PAD_FATBIN
  return true;
#else
  return false;
#endif
}

void detail::padCopy(const char *call, size_t elementSize, const void *src,
                     int64_t srcRows, int64_t srcCols, int64_t srcLd, void *dst,
                     int64_t dstRows, int64_t dstCols, int64_t dstLd) {
#ifdef WEFT_CUDA_PAD_FATBIN
  static std::once_flag once;
  static void *module = nullptr;
  std::call_once(once, [] {
    module = detail::loadEmbeddedFatbin(weftPadFatbin, sizeof(weftPadFatbin));
  });
  if (dstRows <= 0 || dstCols <= 0)
    return;
  // String literals: mgpuModuleGetFunction keeps the pointer.
  void *kernel = mgpuModuleGetFunction(
      module, elementSize == 2 ? "weft_pad_copy_16" : "weft_pad_copy_32");
  long long sr = srcRows, sc = srcCols, sl = srcLd, dr = dstRows, dc = dstCols,
            dl = dstLd;
  void *from = const_cast<void *>(src), *to = dst;
  void *params[] = {&from, &sr, &sc, &sl, &to, &dr, &dc, &dl};
  // A thread per 16 bytes of a row (CudaPad.cu).
  int64_t chunks = (dstCols * int64_t(elementSize) + 15) / 16;
  int64_t columnBlocks = std::min<int64_t>((chunks + 255) / 256, 1024);
  int64_t rowBlocks = std::min<int64_t>(dstRows, 65535);
  mgpuLaunchKernel(kernel, intptr_t(columnBlocks), intptr_t(rowBlocks), 1, 256,
                   1, 1, 0, nullptr, params, nullptr, 8);
#else
  detail::fatal(call, "this runtime was built without nvcc, so it cannot pad "
                      "a GEMM");
#endif
}
