//===- CudaInternal.h - What Cuda.cpp shares with its siblings ---*- C++
//-*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_RUNTIME_CUDAINTERNAL_H
#define WEFT_LIB_RUNTIME_CUDAINTERNAL_H

#include "weft/Runtime/CudaApi.h"

#include <cstdint>
#include <string>

namespace weft::rt::cuda::detail {

using namespace weft::rt::cuda::api;

/// The driver's entry points, looked up once (dlsym on libcuda.so.1).
struct Driver {
#define WEFT_DECLARE_POINTER(name, symbol, ret, ...)                           \
  ret (*name)(__VA_ARGS__) = nullptr;
  WEFT_CUDA_DRIVER_FUNCTIONS(WEFT_DECLARE_POINTER)
#undef WEFT_DECLARE_POINTER
};

/// The driver of an initialized process. Callers have passed
/// requireInitialized.
const Driver &driver();
/// The step stream.
api::CUstream stepStream();
/// The most dynamic shared memory a kernel of this device may ask for.
int sharedMemoryOptIn();

/// Ends the process unless initialize() succeeded, naming `call` and, when
/// not null, `kernel`: the generated code's entry points cannot return an
/// error, and none of them may be the first to touch the driver. Also makes
/// the device's context current on the calling thread.
void requireInitialized(const char *call, const char *kernel);

/// Ends the process when `result` is not CUDA_SUCCESS, with a message
/// naming `call` (the entry point), `kernel` (when not null), the driver
/// function and the CUresult's name and description.
void check(api::CUresult result, const char *call, const char *kernel,
           const char *driverFunction);
/// "CUDA_ERROR_INVALID_VALUE (invalid argument)".
std::string describe(api::CUresult result);
/// Ends the process with "error: CUDA: <call>: <message>".
[[noreturn]] void fatal(const char *call, const std::string &message);

/// Records what was just queued on the step stream (a static string or a
/// kernel's name that lives as long as the process), so that an error the
/// next synchronization reports names its candidates; with WEFT_CUDA_SYNC=1
/// also waits for it, so that the error names exactly the culprit.
void noteQueued(const char *call, const char *what);

/// The module of a fatbin the build embedded (bin2c's array, byte-aligned:
/// copied to the 8-byte alignment the driver reads its header at), loaded
/// lazily through mgpuModuleLoad as generated code's is. Call it once per
/// fatbin (a std::call_once); the copy lives as long as the process.
void *loadEmbeddedFatbin(const void *data, size_t size);

/// Scratch device memory that only grows. A larger request waits for the
/// step stream (queued work may still read the old buffer), frees it and
/// allocates anew, so only the first step allocates; failures end the
/// process naming `call` and `what`. The caller serializes calls.
struct GrowingBuffer {
  void *ptr = nullptr;
  size_t bytes = 0;
  void *atLeast(size_t need, const char *call, const char *what);
};

/// Queues dst[r][c] = src[r][c] for r < srcRows, c < srcCols, and 0
/// elsewhere in dstRows x dstCols (CudaPad.cpp): a GEMM operand copied into
/// a padded one, or a padded product's block copied back (elementSize 2 or
/// 4; row-major, leading dimensions in elements).
void padCopy(const char *call, size_t elementSize, const void *src,
             int64_t srcRows, int64_t srcCols, int64_t srcLd, void *dst,
             int64_t dstRows, int64_t dstCols, int64_t dstLd);
/// Whether padCopy has its kernel (the runtime was built with nvcc).
bool canPad();

/// WEFT_CUDA_PROFILE (CudaProfile.cpp): read by initialize().
void profileInitialize();
bool profiling();
/// Brackets one operation on the step stream when profiling: profileBefore
/// right before it is queued, noteQueued (which calls profileAfter) after.
/// `compute`: a kernel, GEMM or fill (not a copy between host and device),
/// which marks a synchronization window as a step.
void profileBefore(bool compute = true);
void profileAfter(const char *what);
/// A name that lives as long as the process, for a label made at run time
/// (a GEMM's shape).
const char *profileLabel(const std::string &label);
/// A line for the profile's header (a GEMM's candidates and choice).
void profileNote(const std::string &line);
/// Adds up the bracketed operations; the step stream has just been waited
/// for.
void profileCollect();

} // namespace weft::rt::cuda::detail

#endif // WEFT_LIB_RUNTIME_CUDAINTERNAL_H
