//===- Cuda.cpp - The runtime's NVIDIA GPU: driver, memory, kernels -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The CUDA driver is opened with dlopen on first use (CudaApi.h declares what
// is used), so the runtime links and CPU executables run without it.
//
// The mgpu* functions are the entry points MLIR's gpu-to-llvm lowering and
// gpu.binary translation (SelectObject) make the host code call. Their
// semantics here, and why:
//  - Modules load lazily. The translation registers each gpu.binary's load
//    as a global constructor, which runs before main, before the trainer
//    has chosen a device (--device, the launcher's local rank) and before
//    anything could report a missing driver sensibly. mgpuModuleLoad only
//    records the blob; the first mgpuModuleGetFunction after initialize()
//    loads it. Nothing here touches the driver before initialize().
//  - There is one stream, the step stream: mgpuStreamCreate returns it and
//    mgpuStreamDestroy leaves it. Every launch, copy, fill and GEMM is queued
//    on it, so the order of the generated code is the order of execution
//    and no dependency needs an event.
//  - mgpuStreamSynchronize and mgpuEventSynchronize do not wait. The
//    lowering synchronizes after every non-async gpu.launch_func; on one
//    in-order queue that wait orders nothing and would cost a host round trip
//    per kernel. The host reads device results only through copyToHost,
//    which waits, and the trainer calls synchronize() once per step when it
//    reads the loss. Copies to host memory through mgpuMemcpy land in
//    pageable memory (the runtime pins none for generated code), for which
//    the driver returns only once the copy is done. For the same reason an
//    event needs no driver object: everything recorded is on the step
//    stream, so recording one and making the stream wait for it are
//    already satisfied by queue order, and waiting for one from the host
//    waits for the step stream (which includes everything before the
//    record). Weft's lowering emits no events; MLIR's async lowering would.
//  - A driver error ends the process with a message naming the entry point,
//    the kernel and the CUresult: these functions cannot return one, and a
//    step that went on would train on garbage. Errors raised asynchronously
//    by a kernel surface at the next synchronization, which names what was
//    queued since the previous one; WEFT_CUDA_SYNC=1 waits after every
//    launch and GEMM so that the error names the culprit exactly.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Cuda.h"

#include "CudaInternal.h"

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

using namespace weft::rt::cuda;
using namespace weft::rt::cuda::api;
using weft::rt::Status;
using weft::rt::cuda::detail::Driver;

namespace {

/// The oldest driver (cuDriverGetVersion) the runtime accepts: cuBLASLt 13
/// needs a CUDA 13 driver (R580 or newer).
constexpr int kMinDriverVersion = 13000;

/// Dynamic shared memory a kernel may use without opting in.
constexpr int kDefaultSharedMemory = 48 * 1024;

std::string versionString(int v) {
  return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10);
}

/// A gpu.binary's blob, loaded on first use.
struct LazyModule;

/// What mgpuModuleGetFunction returns: the function and its name, so that
/// launch errors can name the kernel.
struct Kernel {
  LazyModule *module = nullptr;
  const char *namePointer = nullptr;
  std::string name;
  CUfunction function = nullptr;
  int sharedMemoryLimit = kDefaultSharedMemory;
};

struct LazyModule {
  const void *data = nullptr;
  size_t size = 0;
  bool jit = false; ///< PTX text (mgpuModuleLoadJIT).
  int optLevel = 0;
  CUmodule module = nullptr;
  std::vector<Kernel *> kernels;
};

/// The process's device state. Never destroyed: mgpuModuleUnload runs from
/// global destructors, in an order relative to ours nobody controls.
struct State {
  std::mutex mutex;
  bool driverTried = false;
  std::string driverError;
  void *library = nullptr;
  detail::Driver driver;

  bool initialized = false;
  int deviceIndex = -1;
  CUdevice device = 0;
  CUcontext context = nullptr;
  CUstream stream = nullptr;
  CUmemoryPool pool = nullptr; ///< Null: mgpuMemAlloc uses cuMemAlloc.
  int ccMajor = 0, ccMinor = 0, sharedMemoryOptIn = kDefaultSharedMemory;
  std::string description;
  bool syncEach = false;

  /// What was queued since the last synchronization (the last few).
  static constexpr int kRecent = 8;
  const char *recent[kRecent] = {};
  std::atomic<uint64_t> queued{0};
};

State &state() {
  static State *s = new State;
  return *s;
}

thread_local CUcontext currentContext = nullptr;

/// "CUDA_ERROR_INVALID_VALUE (invalid argument)".
std::string describe(CUresult r) {
  State &s = state();
  const char *name = nullptr, *text = nullptr;
  if (s.driver.cuGetErrorName)
    s.driver.cuGetErrorName(r, &name);
  if (s.driver.cuGetErrorString)
    s.driver.cuGetErrorString(r, &text);
  std::string out = name ? name : "CUresult " + std::to_string(r);
  if (text)
    out += std::string(" (") + text + ")";
  return out;
}

/// Opens libcuda.so.1 and looks up every function, once. Holds the mutex.
bool loadDriverLocked(State &s) {
  if (s.driverTried)
    return s.library != nullptr;
  s.driverTried = true;
  void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char *why = dlerror();
    s.driverError = why ? why : "libcuda.so.1 not found";
    return false;
  }
  detail::Driver d;
  std::string missing;
#define WEFT_LOOK_UP(name, symbol, ret, ...)                                   \
  d.name = reinterpret_cast<ret (*)(__VA_ARGS__)>(dlsym(lib, symbol));         \
  if (!d.name)                                                                 \
    missing += std::string(missing.empty() ? "" : ", ") + symbol;
  WEFT_CUDA_DRIVER_FUNCTIONS(WEFT_LOOK_UP)
#undef WEFT_LOOK_UP
  if (!missing.empty()) {
    s.driverError =
        "libcuda.so.1 lacks " + missing + " (the driver is older than CUDA 13)";
    dlclose(lib);
    return false;
  }
  s.driver = d;
  s.library = lib;
  return true;
}

Status driverError(const char *what, CUresult r) {
  return Status::error(std::string("CUDA: ") + what +
                       " failed: " + describe(r));
}

/// Loads the module of `k` if needed and finds its function. Holds the
/// mutex.
void resolveLocked(Kernel &k) {
  State &s = state();
  LazyModule &m = *k.module;
  const char *call = "mgpuModuleGetFunction";
  if (!m.module) {
    CUresult r;
    std::string log(8192, '\0');
    if (m.jit) {
      int options[] = {CU_JIT_OPTIMIZATION_LEVEL, CU_JIT_ERROR_LOG_BUFFER,
                       CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
      void *values[] = {reinterpret_cast<void *>(intptr_t(m.optLevel)),
                        log.data(),
                        reinterpret_cast<void *>(uintptr_t(log.size()))};
      r = s.driver.cuModuleLoadDataEx(&m.module, m.data, 3, options, values);
    } else {
      r = s.driver.cuModuleLoadData(&m.module, m.data);
    }
    if (r != CUDA_SUCCESS) {
      std::string arch =
          "sm_" + std::to_string(s.ccMajor) + std::to_string(s.ccMinor);
      std::string why = "loading the GPU code of kernel \"" + k.name + "\" (" +
                        std::to_string(m.size) +
                        " bytes) failed: " + describe(r);
      if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
        why += "; the executable holds no code this " + arch +
               " device runs: compile it for " + arch;
      else if (r == CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
        why += "; the embedded PTX is newer than this driver: update the "
               "NVIDIA driver";
      log.resize(std::strlen(log.c_str()));
      if (!log.empty())
        why += "\nJIT log:\n" + log;
      detail::fatal(call, why);
    }
  }
  detail::check(
      s.driver.cuModuleGetFunction(&k.function, m.module, k.name.c_str()), call,
      k.name.c_str(), "cuModuleGetFunction");
}

Kernel &kernelOf(void *function, const char *call) {
  if (!function)
    detail::fatal(call, "no kernel (mgpuModuleGetFunction's result was null)");
  return *static_cast<Kernel *>(function);
}

/// The generated code only ever holds the step stream (mgpuStreamCreate);
/// a null stream is taken as it too, never the legacy default stream that
/// would serialize with every other.
void checkStream(void *stream, const char *call, const char *kernel) {
  if (stream && stream != state().stream)
    detail::fatal(
        call,
        std::string(kernel ? "kernel \"" + std::string(kernel) + "\": " : "") +
            "a stream mgpuStreamCreate did not return");
}

unsigned checkedDim(intptr_t v, const char *call, const Kernel &k,
                    const char *what) {
  if (v < 1 || uint64_t(v) > 0xFFFFFFFFu)
    detail::fatal(call, "kernel \"" + k.name + "\": " + what + " " +
                            std::to_string(int64_t(v)) + " is out of range");
  return unsigned(v);
}

/// Raises the kernel's dynamic shared memory limit when a launch asks for
/// more than the default 48 KiB.
void allowSharedMemory(Kernel &k, int32_t bytes, const char *call) {
  if (bytes <= k.sharedMemoryLimit)
    return;
  State &s = state();
  if (bytes > s.sharedMemoryOptIn)
    detail::fatal(call, "kernel \"" + k.name + "\" asks for " +
                            std::to_string(bytes) +
                            " bytes of shared memory; the device allows " +
                            std::to_string(s.sharedMemoryOptIn));
  detail::check(
      s.driver.cuFuncSetAttribute(
          k.function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, bytes),
      call, k.name.c_str(), "cuFuncSetAttribute");
  k.sharedMemoryLimit = bytes;
}

/// The handle of every event: all of them mark a point of the step stream
/// (see the file comment).
char stepStreamEvent;

} // namespace

//===----------------------------------------------------------------------===//
// Shared with CudaBlas.cpp
//===----------------------------------------------------------------------===//

const detail::Driver &detail::driver() { return state().driver; }
std::string detail::describe(CUresult r) { return ::describe(r); }

void *detail::loadEmbeddedFatbin(const void *data, size_t size) {
  auto *aligned = new std::vector<uint64_t>((size + 7) / 8);
  std::memcpy(aligned->data(), data, size);
  return mgpuModuleLoad(aligned->data(), size);
}

void *detail::GrowingBuffer::atLeast(size_t need, const char *call,
                                     const char *what) {
  if (need <= bytes)
    return ptr;
  if (ptr) {
    if (Status s = synchronize(); !s.ok())
      fatal(call, s.message);
    release(ptr);
    ptr = nullptr;
    bytes = 0;
  }
  if (Status s = allocate(need, &ptr); !s.ok())
    fatal(call, std::string(what) + ": " + s.message);
  bytes = need;
  return ptr;
}
CUstream detail::stepStream() { return state().stream; }
int detail::sharedMemoryOptIn() { return state().sharedMemoryOptIn; }

void detail::fatal(const char *call, const std::string &message) {
  std::fflush(stdout);
  std::string line = std::string("error: CUDA: ") + call + ": " + message;
  if (line.back() != '\n')
    line += '\n';
  // One write: ranks sharing stderr do not interleave a line.
  ssize_t ignored = ::write(2, line.data(), line.size());
  (void)ignored;
  ::_exit(1);
}

void detail::check(CUresult result, const char *call, const char *kernel,
                   const char *driverFunction) {
  if (result == CUDA_SUCCESS)
    return;
  std::string message;
  if (kernel)
    message = std::string("kernel \"") + kernel + "\": ";
  message += std::string(driverFunction) + " failed: " + describe(result);
  fatal(call, message);
}

void detail::requireInitialized(const char *call, const char *kernel) {
  State &s = state();
  if (!s.initialized)
    fatal(
        call,
        std::string(kernel ? "kernel \"" + std::string(kernel) + "\": " : "") +
            "called before weft::rt::cuda::initialize(): the trainer selects "
            "and initializes the device before the first step, and no GPU "
            "work may be queued earlier");
  if (currentContext != s.context) {
    check(s.driver.cuCtxSetCurrent(s.context), call, kernel, "cuCtxSetCurrent");
    currentContext = s.context;
  }
}

void detail::noteQueued(const char *call, const char *what) {
  State &s = state();
  uint64_t n = s.queued.fetch_add(1, std::memory_order_relaxed);
  s.recent[n % State::kRecent] = what;
  profileAfter(what);
  if (s.syncEach) {
    CUresult r = s.driver.cuStreamSynchronize(s.stream);
    if (r != CUDA_SUCCESS)
      fatal(call, std::string(what) +
                      " failed on the device (WEFT_CUDA_SYNC=1 "
                      "waits after each): " +
                      describe(r));
  }
}

//===----------------------------------------------------------------------===//
// Cuda.h
//===----------------------------------------------------------------------===//

namespace weft::rt::cuda {

Status initialize(int device) {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.initialized) {
    if (device == s.deviceIndex)
      return Status::success();
    return Status::error("CUDA is already initialized on device " +
                         std::to_string(s.deviceIndex) +
                         "; a process uses one device, not also device " +
                         std::to_string(device));
  }
  if (!loadDriverLocked(s))
    return Status::error(
        "this executable was compiled for NVIDIA GPUs (weftc --target cuda) "
        "and needs the NVIDIA driver, which could not be loaded (" +
        s.driverError +
        "); run it on a machine with an NVIDIA GPU and driver (CUDA " +
        versionString(kMinDriverVersion) +
        " or newer), or compile without --target cuda to train on the CPU");
  const Driver &d = s.driver;
  int version = 0;
  if (CUresult r = d.cuDriverGetVersion(&version))
    return driverError("cuDriverGetVersion", r);
  if (version < kMinDriverVersion)
    return Status::error(
        "the NVIDIA driver supports CUDA " + versionString(version) +
        "; this executable needs CUDA " + versionString(kMinDriverVersion) +
        " or newer (cuBLASLt 13): update the driver, or compile without "
        "--target cuda to train on the CPU");
  if (CUresult r = d.cuInit(0)) {
    if (r == CUDA_ERROR_NO_DEVICE) {
      const char *visible = std::getenv("CUDA_VISIBLE_DEVICES");
      return Status::error(
          std::string("no NVIDIA GPU is visible") +
          (visible ? std::string(" (CUDA_VISIBLE_DEVICES=") + visible + ")"
                   : "") +
          "; this executable was compiled for NVIDIA GPUs (weftc --target "
          "cuda): run it where one is, or compile without --target cuda to "
          "train on the CPU");
    }
    return driverError("cuInit", r);
  }
  int count = 0;
  if (CUresult r = d.cuDeviceGetCount(&count))
    return driverError("cuDeviceGetCount", r);
  if (count == 0)
    return Status::error("no NVIDIA GPU is visible; compile without --target "
                         "cuda to train on the CPU");
  if (device < 0 || device >= count)
    return Status::error("CUDA device " + std::to_string(device) +
                         " does not exist: " + std::to_string(count) +
                         " visible (0 to " + std::to_string(count - 1) + ")");
  if (CUresult r = d.cuDeviceGet(&s.device, device))
    return driverError("cuDeviceGet", r);
  d.cuDeviceGetAttribute(
      &s.ccMajor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s.device);
  d.cuDeviceGetAttribute(
      &s.ccMinor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s.device);
  d.cuDeviceGetAttribute(&s.sharedMemoryOptIn,
                         CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                         s.device);
  if (CUresult r = d.cuDevicePrimaryCtxRetain(&s.context, s.device))
    return driverError("cuDevicePrimaryCtxRetain", r);
  if (CUresult r = d.cuCtxSetCurrent(s.context))
    return driverError("cuCtxSetCurrent", r);
  currentContext = s.context;
  // Non-blocking: the step never waits on work another library may have
  // queued on the legacy default stream.
  if (CUresult r = d.cuStreamCreate(&s.stream, CU_STREAM_NON_BLOCKING))
    return driverError("cuStreamCreate", r);
  // Stream-ordered allocation for mgpuMemAlloc/Free: no device-wide
  // synchronization per free, and freed memory stays in the pool (release
  // threshold: everything) instead of going back to the driver at every
  // synchronization.
  int pools = 0;
  d.cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED,
                         s.device);
  if (pools) {
    uint64_t keepAll = UINT64_MAX;
    if (d.cuDeviceGetDefaultMemPool(&s.pool, s.device) != CUDA_SUCCESS ||
        d.cuMemPoolSetAttribute(s.pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD,
                                &keepAll) != CUDA_SUCCESS)
      s.pool = nullptr;
  }
  char name[256] = {};
  d.cuDeviceGetName(name, sizeof(name) - 1, s.device);
  size_t total = 0;
  d.cuDeviceTotalMem(&total, s.device);
  char gib[32];
  std::snprintf(gib, sizeof(gib), "%.1f", double(total) / (1ull << 30));
  s.description = std::string(name) + " (sm_" + std::to_string(s.ccMajor) +
                  std::to_string(s.ccMinor) + ", " + gib + " GiB)";
  const char *sync = std::getenv("WEFT_CUDA_SYNC");
  s.syncEach = sync && *sync && std::strcmp(sync, "0") != 0;
  detail::profileInitialize();
  s.deviceIndex = device;
  s.initialized = true;
  return Status::success();
}

bool initialized() { return state().initialized; }

int deviceCount() {
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!loadDriverLocked(s))
    return 0;
  int count = 0;
  if (s.driver.cuInit(0) != CUDA_SUCCESS ||
      s.driver.cuDeviceGetCount(&count) != CUDA_SUCCESS)
    return 0;
  return count;
}

std::string deviceDescription() { return state().description; }

Status allocate(size_t bytes, void **ptr) {
  *ptr = nullptr;
  if (!initialized())
    return Status::error("CUDA: allocating device memory before initialize()");
  detail::requireInitialized("weft::rt::cuda::allocate", nullptr);
  if (bytes == 0)
    return Status::success();
  const Driver &d = state().driver;
  CUdeviceptr p = 0;
  if (CUresult r = d.cuMemAlloc(&p, bytes)) {
    size_t freeBytes = 0, totalBytes = 0;
    d.cuMemGetInfo(&freeBytes, &totalBytes);
    return Status::error("CUDA: allocating " + std::to_string(bytes) +
                         " bytes of device memory failed: " + describe(r) +
                         "; the device reports " + std::to_string(freeBytes) +
                         " of " + std::to_string(totalBytes) + " bytes free");
  }
  *ptr = reinterpret_cast<void *>(p);
  return Status::success();
}

void release(void *ptr) {
  if (!ptr)
    return;
  detail::requireInitialized("weft::rt::cuda::release", nullptr);
  detail::check(state().driver.cuMemFree(CUdeviceptr(ptr)),
                "weft::rt::cuda::release", nullptr, "cuMemFree");
}

namespace {

/// Queues a copy of `bytes` on the step stream, host to device or back,
/// and names it for the next synchronization's errors.
Status queueCopy(const char *call, bool toDevice, void *dst, const void *src,
                 size_t bytes) {
  detail::requireInitialized(call, nullptr);
  if (bytes == 0)
    return Status::success();
  State &s = state();
  detail::profileBefore(/*compute=*/false);
  CUresult r =
      toDevice
          ? s.driver.cuMemcpyHtoDAsync(CUdeviceptr(dst), src, bytes, s.stream)
          : s.driver.cuMemcpyDtoHAsync(dst, CUdeviceptr(src), bytes, s.stream);
  if (r)
    return Status::error("CUDA: copying " + std::to_string(bytes) + " bytes " +
                         (toDevice ? "to" : "from") +
                         " the device failed: " + describe(r));
  detail::noteQueued(call,
                     toDevice ? "a copy to the device" : "a copy to the host");
  return Status::success();
}

} // namespace

Status copyToDevice(void *dst, const void *src, size_t bytes) {
  if (!initialized())
    return Status::error("CUDA: copying to the device before initialize()");
  if (Status s =
          queueCopy("weft::rt::cuda::copyToDevice", true, dst, src, bytes);
      !s.ok() || bytes == 0)
    return s;
  // From pageable memory the driver returns once it has staged the source.
  // From page-locked memory the copy is still in flight: wait for it, as
  // the caller may reuse the source at once.
  unsigned memoryType = 0;
  if (state().driver.cuPointerGetAttribute(&memoryType,
                                           CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                           CUdeviceptr(src)) == CUDA_SUCCESS &&
      memoryType == CU_MEMORYTYPE_HOST)
    return synchronize();
  return Status::success();
}

Status copyToHost(void *dst, const void *src, size_t bytes) {
  if (!initialized())
    return Status::error("CUDA: copying from the device before initialize()");
  if (Status s =
          queueCopy("weft::rt::cuda::copyToHost", false, dst, src, bytes);
      !s.ok() || bytes == 0)
    return s;
  return synchronize();
}

Status copyToDeviceAsync(void *dst, const void *src, size_t bytes) {
  return queueCopy("weft::rt::cuda::copyToDeviceAsync", true, dst, src, bytes);
}

Status copyToHostAsync(void *dst, const void *src, size_t bytes) {
  return queueCopy("weft::rt::cuda::copyToHostAsync", false, dst, src, bytes);
}

Status synchronize() {
  if (!initialized())
    return Status::error("CUDA: synchronizing before initialize()");
  detail::requireInitialized("weft::rt::cuda::synchronize", nullptr);
  State &s = state();
  CUresult r = s.driver.cuStreamSynchronize(s.stream);
  uint64_t n = s.queued.exchange(0);
  if (r == CUDA_SUCCESS) {
    detail::profileCollect();
    return Status::success();
  }
  // The error was raised by something queued since the last wait; list the
  // last few, newest first.
  std::string what;
  uint64_t shown = std::min<uint64_t>(n, State::kRecent);
  for (uint64_t i = 0; i < shown; ++i) {
    const char *w = s.recent[(n - 1 - i) % State::kRecent];
    what += std::string(i ? ", " : "") + (w ? w : "?");
  }
  return Status::error(
      "CUDA: the device reported " + describe(r) +
      " for work queued since "
      "the last synchronization (" +
      std::to_string(n) + (n == 1 ? " operation" : " operations") +
      "; the last: " + what +
      "); run with WEFT_CUDA_SYNC=1 to wait after each and name the one "
      "that failed");
}

void *stream() { return state().stream; }

} // namespace weft::rt::cuda

//===----------------------------------------------------------------------===//
// The entry points of MLIR's GPU lowering
//===----------------------------------------------------------------------===//

extern "C" void *mgpuModuleLoad(void *data, size_t size) {
  auto *m = new LazyModule;
  m->data = data;
  m->size = size;
  return m;
}

extern "C" void *mgpuModuleLoadJIT(void *data, int optLevel) {
  auto *m = new LazyModule;
  m->data = data;
  m->size = data ? std::strlen(static_cast<const char *>(data)) : 0;
  m->jit = true;
  m->optLevel = optLevel;
  return m;
}

extern "C" void mgpuModuleUnload(void *module) {
  auto *m = static_cast<LazyModule *>(module);
  if (!m)
    return;
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (m->module) {
    // From a global destructor the driver may already be shut down; the
    // module goes with the process then.
    CUresult r = s.driver.cuModuleUnload(m->module);
    if (r != CUDA_ERROR_DEINITIALIZED)
      detail::check(r, "mgpuModuleUnload", nullptr, "cuModuleUnload");
    m->module = nullptr;
  }
  // The handles stay (a few bytes per kernel, unloaded at exit): the
  // names recorded for error messages point into them, and a module asked
  // for again is loaded again.
  for (Kernel *k : m->kernels) {
    k->function = nullptr;
    k->sharedMemoryLimit = kDefaultSharedMemory;
  }
}

extern "C" void *mgpuModuleGetFunction(void *module, const char *name) {
  const char *call = "mgpuModuleGetFunction";
  detail::requireInitialized(call, name);
  if (!module)
    detail::fatal(call, std::string("kernel \"") + (name ? name : "?") +
                            "\": no module (mgpuModuleLoad's result was null)");
  auto *m = static_cast<LazyModule *>(module);
  State &s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  // The generated code asks before every launch, with its kernel name's
  // constant: the pointer finds the handle without a string comparison.
  for (Kernel *k : m->kernels)
    if (k->namePointer == name || k->name == name) {
      if (!k->function)
        resolveLocked(*k);
      return k;
    }
  auto *k = new Kernel;
  k->module = m;
  k->namePointer = name;
  k->name = name;
  resolveLocked(*k);
  m->kernels.push_back(k);
  return k;
}

extern "C" void mgpuLaunchKernel(void *function, intptr_t gridX, intptr_t gridY,
                                 intptr_t gridZ, intptr_t blockX,
                                 intptr_t blockY, intptr_t blockZ,
                                 int32_t sharedMemoryBytes, void *stream,
                                 void **params, void **extra,
                                 size_t /*paramsCount*/) {
  const char *call = "mgpuLaunchKernel";
  Kernel &k = kernelOf(function, call);
  detail::requireInitialized(call, k.name.c_str());
  checkStream(stream, call, k.name.c_str());
  allowSharedMemory(k, sharedMemoryBytes, call);
  State &s = state();
  detail::profileBefore();
  detail::check(s.driver.cuLaunchKernel(
                    k.function, checkedDim(gridX, call, k, "grid x"),
                    checkedDim(gridY, call, k, "grid y"),
                    checkedDim(gridZ, call, k, "grid z"),
                    checkedDim(blockX, call, k, "block x"),
                    checkedDim(blockY, call, k, "block y"),
                    checkedDim(blockZ, call, k, "block z"),
                    unsigned(sharedMemoryBytes), s.stream, params, extra),
                call, k.name.c_str(), "cuLaunchKernel");
  detail::noteQueued(call, k.name.c_str());
}

extern "C" void mgpuLaunchClusterKernel(void *function, intptr_t clusterX,
                                        intptr_t clusterY, intptr_t clusterZ,
                                        intptr_t gridX, intptr_t gridY,
                                        intptr_t gridZ, intptr_t blockX,
                                        intptr_t blockY, intptr_t blockZ,
                                        int32_t sharedMemoryBytes, void *stream,
                                        void **params, void **extra) {
  const char *call = "mgpuLaunchClusterKernel";
  Kernel &k = kernelOf(function, call);
  detail::requireInitialized(call, k.name.c_str());
  checkStream(stream, call, k.name.c_str());
  allowSharedMemory(k, sharedMemoryBytes, call);
  State &s = state();
  CUlaunchAttribute cluster = {};
  cluster.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
  cluster.value.clusterDim.x = checkedDim(clusterX, call, k, "cluster x");
  cluster.value.clusterDim.y = checkedDim(clusterY, call, k, "cluster y");
  cluster.value.clusterDim.z = checkedDim(clusterZ, call, k, "cluster z");
  CUlaunchConfig config = {};
  config.gridDimX = checkedDim(gridX, call, k, "grid x");
  config.gridDimY = checkedDim(gridY, call, k, "grid y");
  config.gridDimZ = checkedDim(gridZ, call, k, "grid z");
  config.blockDimX = checkedDim(blockX, call, k, "block x");
  config.blockDimY = checkedDim(blockY, call, k, "block y");
  config.blockDimZ = checkedDim(blockZ, call, k, "block z");
  config.sharedMemBytes = unsigned(sharedMemoryBytes);
  config.hStream = s.stream;
  config.attrs = &cluster;
  config.numAttrs = 1;
  detail::profileBefore();
  detail::check(s.driver.cuLaunchKernelEx(&config, k.function, params, extra),
                call, k.name.c_str(), "cuLaunchKernelEx");
  detail::noteQueued(call, k.name.c_str());
}

extern "C" void *mgpuStreamCreate() {
  detail::requireInitialized("mgpuStreamCreate", nullptr);
  return state().stream;
}

extern "C" void mgpuStreamDestroy(void *stream) {
  checkStream(stream, "mgpuStreamDestroy", nullptr);
}

extern "C" void mgpuStreamSynchronize(void *stream) {
  checkStream(stream, "mgpuStreamSynchronize", nullptr);
}

extern "C" void mgpuStreamWaitEvent(void *stream, void * /*event*/) {
  checkStream(stream, "mgpuStreamWaitEvent", nullptr);
}

extern "C" void *mgpuEventCreate() {
  detail::requireInitialized("mgpuEventCreate", nullptr);
  return &stepStreamEvent;
}

extern "C" void mgpuEventDestroy(void * /*event*/) {}

extern "C" void mgpuEventSynchronize(void * /*event*/) {
  if (Status status = synchronize(); !status.ok())
    detail::fatal("mgpuEventSynchronize", status.message);
}

extern "C" void mgpuEventRecord(void * /*event*/, void *stream) {
  checkStream(stream, "mgpuEventRecord", nullptr);
}

extern "C" void *mgpuMemAlloc(uint64_t bytes, void *stream, bool isHostShared) {
  const char *call = "mgpuMemAlloc";
  detail::requireInitialized(call, nullptr);
  checkStream(stream, call, nullptr);
  if (isHostShared)
    detail::fatal(call, "host-shared (managed) memory is not supported: the "
                        "step keeps its buffers on the device and the host "
                        "reads them through weft::rt::cuda::copyToHost");
  if (bytes == 0)
    return nullptr;
  State &s = state();
  CUdeviceptr p = 0;
  CUresult r = s.pool ? s.driver.cuMemAllocAsync(&p, bytes, s.stream)
                      : s.driver.cuMemAlloc(&p, bytes);
  if (r != CUDA_SUCCESS) {
    size_t freeBytes = 0, totalBytes = 0;
    s.driver.cuMemGetInfo(&freeBytes, &totalBytes);
    detail::fatal(call, "allocating " + std::to_string(bytes) +
                            " bytes failed: " + describe(r) +
                            "; the device reports " +
                            std::to_string(freeBytes) + " of " +
                            std::to_string(totalBytes) + " bytes free");
  }
  return reinterpret_cast<void *>(p);
}

extern "C" void mgpuMemFree(void *ptr, void *stream) {
  const char *call = "mgpuMemFree";
  if (!ptr)
    return;
  detail::requireInitialized(call, nullptr);
  checkStream(stream, call, nullptr);
  State &s = state();
  if (s.pool)
    detail::check(s.driver.cuMemFreeAsync(CUdeviceptr(ptr), s.stream), call,
                  nullptr, "cuMemFreeAsync");
  else
    detail::check(s.driver.cuMemFree(CUdeviceptr(ptr)), call, nullptr,
                  "cuMemFree");
}

extern "C" void mgpuMemcpy(void *dst, void *src, size_t bytes, void *stream) {
  const char *call = "mgpuMemcpy";
  detail::requireInitialized(call, nullptr);
  checkStream(stream, call, nullptr);
  if (bytes == 0)
    return;
  State &s = state();
  detail::profileBefore();
  detail::check(s.driver.cuMemcpyAsync(CUdeviceptr(dst), CUdeviceptr(src),
                                       bytes, s.stream),
                call, nullptr, "cuMemcpyAsync");
  detail::noteQueued(call, "mgpuMemcpy");
}

namespace {
/// `count` elements of `value` from `dst`, queued on the step stream by
/// `set` (cuMemsetD32Async or cuMemsetD16Async).
template <typename Value, typename Set>
void memsetOnStepStream(const char *call, const char *driverCall, void *dst,
                        Value value, size_t count, void *stream, Set set) {
  detail::requireInitialized(call, nullptr);
  checkStream(stream, call, nullptr);
  if (count == 0)
    return;
  State &s = state();
  detail::profileBefore();
  detail::check(set(CUdeviceptr(dst), value, count, s.stream), call, nullptr,
                driverCall);
  detail::noteQueued(call, call);
}
} // namespace

extern "C" void mgpuMemset32(void *dst, unsigned value, size_t count,
                             void *stream) {
  memsetOnStepStream("mgpuMemset32", "cuMemsetD32Async", dst, value, count,
                     stream, state().driver.cuMemsetD32Async);
}

extern "C" void mgpuMemset16(void *dst, unsigned short value, size_t count,
                             void *stream) {
  memsetOnStepStream("mgpuMemset16", "cuMemsetD16Async", dst, value, count,
                     stream, state().driver.cuMemsetD16Async);
}

extern "C" void mgpuSetDefaultDevice(int32_t device) {
  const char *call = "mgpuSetDefaultDevice";
  detail::requireInitialized(call, nullptr);
  if (device != state().deviceIndex)
    detail::fatal(call, "the generated code asks for device " +
                            std::to_string(device) +
                            ", but the process runs on device " +
                            std::to_string(state().deviceIndex) +
                            " (chosen by the trainer; one device a process)");
}
