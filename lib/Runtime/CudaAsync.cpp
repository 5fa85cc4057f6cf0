//===- CudaAsync.cpp - Overlapping the host with the step
//------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// What keeps the GPU busy between steps (Cuda.h, "Overlapping the host"):
//  - page-locked host buffers, so that copies return at once;
//  - a copy stream beside the step stream, on which the next batch moves
//    while the step computes (an event orders the step after it);
//  - the step captured as a CUDA graph: one launch queues the hundreds of
//    kernels and GEMMs the host code would queue one by one.
//
//===----------------------------------------------------------------------===//

#include "CudaInternal.h"

#include "weft/Runtime/Cuda.h"

#include <cstdlib>
#include <cstring>
#include <mutex>

using namespace weft::rt::cuda;
using namespace weft::rt::cuda::api;
using weft::rt::Status;

namespace {

Status failed(const std::string &what, CUresult r) {
  return Status::error("CUDA: " + what + " failed: " + detail::describe(r));
}

/// The copy stream and the event that marks how far it has come. Made on
/// first use: executables that never copy ahead never create them.
struct CopyStream {
  std::once_flag made;
  CUresult error = CUDA_SUCCESS;
  CUstream stream = nullptr;
  CUevent done = nullptr;
};

CopyStream &copyStream() {
  static CopyStream *c = new CopyStream;
  std::call_once(c->made, [] {
    const detail::Driver &d = detail::driver();
    c->error = d.cuStreamCreate(&c->stream, CU_STREAM_NON_BLOCKING);
    if (c->error == CUDA_SUCCESS)
      c->error = d.cuEventCreate(&c->done, CU_EVENT_DISABLE_TIMING);
  });
  return *c;
}

bool envSet(const char *name) {
  const char *v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

} // namespace

namespace weft::rt::cuda {

Status allocatePinned(size_t bytes, void **ptr) {
  *ptr = nullptr;
  if (!initialized())
    return Status::error("CUDA: allocating page-locked memory before "
                         "initialize()");
  detail::requireInitialized("weft::rt::cuda::allocatePinned", nullptr);
  if (bytes == 0)
    return Status::success();
  if (CUresult r = detail::driver().cuMemHostAlloc(ptr, bytes, 0))
    return failed("allocating " + std::to_string(bytes) +
                      " bytes of page-locked host memory",
                  r);
  return Status::success();
}

void releasePinned(void *ptr) {
  if (!ptr)
    return;
  detail::requireInitialized("weft::rt::cuda::releasePinned", nullptr);
  detail::check(detail::driver().cuMemFreeHost(ptr),
                "weft::rt::cuda::releasePinned", nullptr, "cuMemFreeHost");
}

Status copyAhead(void *dst, const void *src, size_t bytes) {
  detail::requireInitialized("weft::rt::cuda::copyAhead", nullptr);
  CopyStream &c = copyStream();
  if (c.error)
    return failed("creating the copy stream", c.error);
  if (bytes == 0)
    return Status::success();
  if (CUresult r = detail::driver().cuMemcpyHtoDAsync(CUdeviceptr(dst), src,
                                                      bytes, c.stream))
    return failed("copying " + std::to_string(bytes) +
                      " bytes of the next batch to the device",
                  r);
  return Status::success();
}

Status stepWaitsForCopiesAhead() {
  detail::requireInitialized("weft::rt::cuda::stepWaitsForCopiesAhead",
                             nullptr);
  CopyStream &c = copyStream();
  if (c.error)
    return failed("creating the copy stream", c.error);
  const detail::Driver &d = detail::driver();
  if (CUresult r = d.cuEventRecord(c.done, c.stream))
    return failed("marking the copies ahead (cuEventRecord)", r);
  if (CUresult r = d.cuStreamWaitEvent(detail::stepStream(), c.done, 0))
    return failed("ordering the step after the copies ahead "
                  "(cuStreamWaitEvent)",
                  r);
  return Status::success();
}

bool graphsAllowed(std::string *why) {
  const char *reason = nullptr;
  if (const char *v = std::getenv("WEFT_CUDA_GRAPHS");
      v && std::strcmp(v, "0") == 0)
    reason = "WEFT_CUDA_GRAPHS=0";
  else if (detail::profiling())
    reason = "WEFT_CUDA_PROFILE times each operation";
  else if (envSet("WEFT_CUDA_SYNC"))
    reason = "WEFT_CUDA_SYNC waits after each operation";
  else if (envSet("WEFT_DUMP_KERNELS"))
    reason = "WEFT_DUMP_KERNELS reads each kernel's outputs";
  if (reason && why)
    *why = reason;
  return !reason;
}

Status captureGraph(void (*queue)(void *), void *userData, void **graph) {
  *graph = nullptr;
  detail::requireInitialized("weft::rt::cuda::captureGraph", nullptr);
  const detail::Driver &d = detail::driver();
  CUstream stream = detail::stepStream();
  // Relaxed: the host code may still call what a stricter mode refuses
  // while capturing (cuBLASLt's heuristics, a function's attributes).
  if (CUresult r =
          d.cuStreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_RELAXED))
    return failed("starting to capture the step (cuStreamBeginCapture)", r);
  queue(userData);
  CUgraph captured = nullptr;
  if (CUresult r = d.cuStreamEndCapture(stream, &captured)) {
    if (captured)
      d.cuGraphDestroy(captured);
    return failed("capturing the step (cuStreamEndCapture)", r);
  }
  CUgraphExec exec = nullptr;
  CUresult r = d.cuGraphInstantiate(&exec, captured, 0);
  d.cuGraphDestroy(captured);
  if (r)
    return failed("instantiating the step's graph (cuGraphInstantiate)", r);
  *graph = exec;
  return Status::success();
}

Status launchGraph(void *graph) {
  detail::requireInitialized("weft::rt::cuda::launchGraph", nullptr);
  if (CUresult r = detail::driver().cuGraphLaunch(
          static_cast<CUgraphExec>(graph), detail::stepStream()))
    return failed("launching the step's graph (cuGraphLaunch)", r);
  detail::noteQueued("weft::rt::cuda::launchGraph", "the step's CUDA graph");
  return Status::success();
}

void destroyGraph(void *graph) {
  if (!graph)
    return;
  detail::requireInitialized("weft::rt::cuda::destroyGraph", nullptr);
  detail::check(
      detail::driver().cuGraphExecDestroy(static_cast<CUgraphExec>(graph)),
      "weft::rt::cuda::destroyGraph", nullptr, "cuGraphExecDestroy");
}

} // namespace weft::rt::cuda
