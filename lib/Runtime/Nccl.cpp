//===- Nccl.cpp - Collectives over NCCL on CUDA devices -------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The GPU counterpart of Gloo.cpp, built into its own library
// (WeftRuntimeNccl) so that CPU training executables, which link
// WeftRuntime only, never depend on libcudart or libnccl.
//
// Nothing here blocks without a bound: the communicator is non-blocking
// (ncclConfig_t::blocking = 0), and initialisation and every collective are
// polled (ncclCommGetAsyncError, cudaStreamQuery) until they finish, fail or
// the timeout passes; then the communicator is aborted (ncclCommAbort) and
// the Status names the rank, the group size and what did not finish. A
// communicator that was aborted refuses every later collective.
//
// Without WEFT_HAVE_NCCL (no CUDA toolkit or no NCCL at configure time) the
// same two functions exist and say so.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Collectives.h"

#ifdef WEFT_HAVE_NCCL

#include <cuda_runtime.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

using namespace weft::rt;

namespace {

using Clock = std::chrono::steady_clock;

std::string who(const std::string &prefix, int rank, int size) {
  return "NCCL communicator " + quote(prefix) + ": rank " +
         std::to_string(rank) + " of " + std::to_string(size);
}

std::string cudaText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + ": " + cudaGetErrorString(e);
}

std::string ncclText(ncclResult_t r, ncclComm_t comm) {
  std::string text = ncclGetErrorString(r);
  const char *last = ncclGetLastError(comm);
  if (last && *last)
    text += " (" + std::string(last) + ")";
  return text;
}

std::string millis(std::chrono::milliseconds timeout) {
  return std::to_string(timeout.count()) + " ms";
}

/// Sleeps a little longer each time, up to 1 ms: short collectives are
/// seen at once, long ones cost little CPU.
class Backoff {
public:
  void pause() {
    if (spins < 64) {
      ++spins;
      std::this_thread::yield();
      return;
    }
    std::this_thread::sleep_for(delay);
    if (delay < std::chrono::microseconds(1000))
      delay *= 2;
  }

private:
  int spins = 0;
  std::chrono::microseconds delay{10};
};

/// Polls a non-blocking communicator while `r` is ncclInProgress, up to
/// `deadline`: its state then (still ncclInProgress if the deadline
/// passed), or the error of asking for it.
ncclResult_t settle(ncclComm_t comm, ncclResult_t r,
                    Clock::time_point deadline) {
  Backoff backoff;
  while (r == ncclInProgress && Clock::now() < deadline) {
    backoff.pause();
    if (ncclResult_t q = ncclCommGetAsyncError(comm, &r); q != ncclSuccess)
      return q;
  }
  return r;
}

/// Checks `device` and makes it current for this thread.
Status useDevice(int device, const std::string &where) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess)
    return Status::error(where + ": no CUDA device is visible (" +
                         cudaText(e) + ")");
  if (device < 0 || device >= count)
    return Status::error(where + ": CUDA device " + std::to_string(device) +
                         " does not exist (" + std::to_string(count) +
                         " visible" +
                         (count ? ", 0 to " + std::to_string(count - 1) : "") +
                         ")");
  if ((e = cudaSetDevice(device)) != cudaSuccess)
    return Status::error(where + ": cannot use CUDA device " +
                         std::to_string(device) + " (" + cudaText(e) + ")");
  return Status::success();
}

/// What a send or recv tells its peer first: sending (1) or not, the tag,
/// the byte count.
constexpr size_t kHeaderSize = 3;

class NcclCommunicator : public Communicator, public DeviceQueue {
public:
  NcclCommunicator(int rank, int size, std::string prefix, int device,
                   std::chrono::milliseconds timeout, ncclComm_t comm,
                   cudaStream_t stream, float *scratch, int64_t *headers,
                   int64_t *hostHeaders)
      : Communicator(rank, size), prefix(std::move(prefix)), device(device),
        timeout(timeout), comm(comm), stream(stream), scratch(scratch),
        headers(headers), hostHeaders(hostHeaders) {}

  ~NcclCommunicator() override {
    cudaSetDevice(device);
    if (!aborted) {
      // Finalize flushes what is in flight; on a non-blocking communicator
      // it returns at once and is polled like the rest.
      ncclResult_t r =
          settle(comm, ncclCommFinalize(comm), Clock::now() + timeout);
      if (r == ncclSuccess)
        ncclCommDestroy(comm);
      else
        ncclCommAbort(comm);
    }
    cudaFree(scratch);
    cudaFree(headers);
    cudaFreeHost(hostHeaders);
    if (followed)
      cudaEventDestroy(followed);
    if (joined)
      cudaEventDestroy(joined);
    cudaStreamDestroy(stream);
  }

  DeviceQueue *deviceQueue() override { return this; }

  // DeviceQueue: the same collectives, queued. The two events order the
  // queue's stream against the step's; an event recorded again later does
  // not move a wait already queued on it, so two serve every collective.
  Status follow(void *after) override {
    return order("follow the step", static_cast<cudaStream_t>(after), stream,
                 followed);
  }

  Status join(void *waiter) override {
    return order("join the step", stream, static_cast<cudaStream_t>(waiter),
                 joined);
  }

  Status queueAllReduceSum(const float *in, float *out, size_t count) override {
    return queue("all-reduce", [&] {
      return ncclAllReduce(in, out, count, ncclFloat32, ncclSum, comm, stream);
    });
  }

  Status queueAllGather(const float *in, size_t count, float *out) override {
    return queue("all-gather", [&] {
      return ncclAllGather(in, out, count, ncclFloat32, comm, stream);
    });
  }

  Status queueReduceScatterSum(const float *in, size_t count,
                               float *out) override {
    return queue("reduce-scatter", [&] {
      return ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, comm,
                               stream);
    });
  }

  Status queueAllToAll(const float *in, size_t count, float *out) override {
    return queue("all-to-all", [&] { return groupedAllToAll(in, count, out); });
  }

  Status finish() override {
    std::string what = queued.empty()
                           ? std::string("nothing queued")
                           : "the step's collectives (" + queued + ")";
    if (Status s = prepare(what.c_str()); !s.ok())
      return s;
    return poll(what.c_str());
  }

  Status allReduceSum(float *data, size_t count) override {
    if (Status s = checkDevicePointer("all-reduce", data, count); !s.ok())
      return s;
    return run("all-reduce", [&] {
      return ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm,
                           stream);
    });
  }

  Status allGather(const float *in, size_t count, float *out) override {
    if (Status s = checkDevicePointer("all-gather", in, count); !s.ok())
      return s;
    if (Status s = checkDevicePointer("all-gather", out,
                                      count * size_t(size()));
        !s.ok())
      return s;
    return run("all-gather", [&] {
      return ncclAllGather(in, out, count, ncclFloat32, comm, stream);
    });
  }

  Status reduceScatterSum(const float *in, size_t count, float *out) override {
    if (Status s = checkDevicePointer("reduce-scatter", in,
                                      count * size_t(size()));
        !s.ok())
      return s;
    if (Status s = checkDevicePointer("reduce-scatter", out, count); !s.ok())
      return s;
    return run("reduce-scatter", [&] {
      return ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, comm,
                               stream);
    });
  }

  /// A send and a receive per peer (itself included), fused in one group
  /// so that they progress together.
  Status allToAll(const float *in, size_t count, float *out) override {
    size_t n = size_t(size());
    if (Status s = checkDevicePointer("all-to-all", in, n * count); !s.ok())
      return s;
    if (Status s = checkDevicePointer("all-to-all", out, n * count); !s.ok())
      return s;
    return run("all-to-all", [&] { return groupedAllToAll(in, count, out); });
  }

  Status broadcast(float *data, size_t count, int root) override {
    if (root < 0 || root >= size())
      return Status::error("broadcast: root " + std::to_string(root) +
                           " is not a rank of a group of " +
                           std::to_string(size()));
    if (Status s = checkDevicePointer("broadcast", data, count); !s.ok())
      return s;
    return run("broadcast", [&] {
      return ncclBroadcast(data, data, count, ncclFloat32, root, comm,
                           stream);
    });
  }

  /// An all-reduce of one float on the device: every rank has entered it
  /// once it completes anywhere.
  Status barrier() override {
    return run("barrier", [&] {
      return ncclAllReduce(scratch, scratch, 1, ncclFloat32, ncclSum, comm,
                           stream);
    });
  }

  Status send(const float *data, size_t count, int peer,
              uint64_t tag) override {
    return transfer(/*sending=*/true, const_cast<float *>(data), count, peer,
                    tag);
  }

  Status recv(float *data, size_t count, int peer, uint64_t tag) override {
    return transfer(/*sending=*/false, data, count, peer, tag);
  }

private:
  /// A send and a receive per peer (itself included), fused in one group
  /// so that they progress together.
  ncclResult_t groupedAllToAll(const float *in, size_t count, float *out) {
    size_t n = size_t(size());
    ncclResult_t r = ncclGroupStart();
    if (r != ncclSuccess)
      return r;
    for (size_t peer = 0; peer < n; ++peer) {
      r = ncclSend(in + peer * count, count, ncclFloat32, int(peer), comm,
                   stream);
      if (r == ncclSuccess || r == ncclInProgress)
        r = ncclRecv(out + peer * count, count, ncclFloat32, int(peer), comm,
                     stream);
      if (r != ncclSuccess && r != ncclInProgress) {
        ncclGroupEnd();
        return r;
      }
    }
    return ncclGroupEnd();
  }

  /// Refuses work on an aborted communicator, and makes its device
  /// current: CUDA's current device is per thread, and the calling thread
  /// (a CommThread, say) may have another.
  Status prepare(const char *what) {
    if (aborted)
      return Status::error(where(what) +
                           ": the communicator was aborted "
                           "after an earlier failure (" +
                           abortReason + ")");
    if (cudaError_t e = cudaSetDevice(device); e != cudaSuccess)
      return fail(what, "cannot use CUDA device " + std::to_string(device) +
                            " (" + cudaText(e) + ")");
    return Status::success();
  }

  /// `waiter` waits for what `from` has queued so far, through `event`.
  Status order(const char *what, cudaStream_t from, cudaStream_t waiter,
               cudaEvent_t &event) {
    if (Status s = prepare(what); !s.ok())
      return s;
    cudaError_t e = cudaSuccess;
    if (!event)
      e = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (e == cudaSuccess)
      e = cudaEventRecord(event, from);
    if (e == cudaSuccess)
      e = cudaStreamWaitEvent(waiter, event, 0);
    if (e != cudaSuccess)
      return fail(what, "ordering its stream against the step's failed (" +
                            cudaText(e) + ")");
    return Status::success();
  }

  /// Enqueues a collective on the communicator's stream and returns once
  /// NCCL has taken it (a non-blocking communicator may still be enqueuing
  /// when the call returns; nothing else may be queued until it is done),
  /// not once it has run: finish() waits for that.
  template <typename Enqueue>
  Status queue(const char *what, Enqueue &&enqueue) {
    if (Status s = prepare(what); !s.ok())
      return s;
    ncclResult_t r = settle(comm, enqueue(), Clock::now() + timeout);
    if (r == ncclInProgress)
      return fail(what, "it did not complete within " + millis(timeout) +
                            " (NCCL was still enqueuing it)");
    if (r != ncclSuccess)
      return fail(what, ncclText(r, comm));
    // What poll() names if the step's collectives never complete.
    if (++queuedCount <= 8)
      queued += std::string(queued.empty() ? "" : ", ") + what;
    else if (queuedCount == 9)
      queued += ", ...";
    return Status::success();
  }

  /// NCCL pairs a send with the next recv between the two ranks: it has no
  /// tags, and a recv of another size than the send hangs or corrupts. So
  /// the two sides first swap a header (send or recv, tag, bytes) in one
  /// group, check it on the host, and move the data only when it matches.
  /// A mismatch fails on both ranks and leaves the communicator usable.
  Status transfer(bool sending, float *data, size_t count, int peer,
                  uint64_t tag) {
    size_t bytes = count * sizeof(float);
    std::string what = transferText(sending, bytes, peer, tag);
    if (Status s = checkTransfer(what, peer, tag); !s.ok())
      return s;
    if (Status s = checkDevicePointer(what.c_str(), data, count); !s.ok())
      return s;
    // Pinned host memory: a copy to pageable memory would block until the
    // exchange is done, beyond the timeout's reach.
    int64_t *mine = hostHeaders, *theirs = hostHeaders + kHeaderSize;
    mine[0] = sending;
    mine[1] = int64_t(tag);
    mine[2] = int64_t(bytes);
    std::fill(theirs, theirs + kHeaderSize, -1);
    size_t headerBytes = kHeaderSize * sizeof(int64_t);
    Status swapped = run(what.c_str(), [&] {
      if (cudaMemcpyAsync(headers, mine, headerBytes, cudaMemcpyHostToDevice,
                          stream) != cudaSuccess)
        return ncclUnhandledCudaError;
      ncclResult_t r = ncclGroupStart();
      if (r != ncclSuccess)
        return r;
      r = ncclSend(headers, kHeaderSize, ncclInt64, peer, comm, stream);
      if (r == ncclSuccess || r == ncclInProgress)
        r = ncclRecv(headers + kHeaderSize, kHeaderSize, ncclInt64, peer, comm,
                     stream);
      ncclResult_t end = ncclGroupEnd();
      if (r != ncclSuccess && r != ncclInProgress)
        return r;
      if (end != ncclSuccess && end != ncclInProgress)
        return end;
      if (cudaMemcpyAsync(theirs, headers + kHeaderSize, headerBytes,
                          cudaMemcpyDeviceToHost, stream) != cudaSuccess)
        return ncclUnhandledCudaError;
      return end;
    });
    if (!swapped.ok())
      return swapped;
    std::string them = "rank " + std::to_string(peer);
    if (theirs[0] == mine[0])
      return Status::error(where(what.c_str()) + " failed: " + them + " also " +
                           (sending ? "sends" : "receives") + " (tag " +
                           std::to_string(theirs[1]) + ", " +
                           std::to_string(theirs[2]) +
                           " bytes); a send must meet a recv (no data moved)");
    if (theirs[1] != mine[1])
      return Status::error(
          where(what.c_str()) + " failed: " + them + "'s next transfer with " +
          "this rank has tag " + std::to_string(theirs[1]) +
          "; NCCL matches transfers between two ranks in the order they are "
          "issued, so both must issue them in the same order (no data "
          "moved)");
    if (theirs[2] != mine[2])
      return Status::error(where(what.c_str()) + " failed: " + them +
                           (sending ? " receives " : " sends ") +
                           std::to_string(theirs[2]) +
                           " bytes with this tag; a send and its recv must "
                           "have the same size (no data moved)");
    if (count == 0)
      return Status::success();
    return run(what.c_str(), [&] {
      return sending ? ncclSend(data, count, ncclFloat32, peer, comm, stream)
                     : ncclRecv(data, count, ncclFloat32, peer, comm, stream);
    });
  }

  std::string where(const char *what) const {
    return std::string(what) + " on " + who(prefix, rank(), size());
  }

  /// NCCL does not check pointers by default (NCCL_CHECK_POINTERS), and a
  /// host pointer would fault in the kernel and take the CUDA context
  /// with it: refuse it here with a message instead.
  Status checkDevicePointer(const char *what, const void *ptr,
                            size_t count) {
    if (count == 0)
      return Status::success();
    if (aborted)
      return Status::success(); // run() reports it.
    cudaPointerAttributes attributes;
    cudaError_t e = cudaPointerGetAttributes(&attributes, ptr);
    if (e != cudaSuccess) {
      cudaGetLastError(); // Not sticky; clear it.
      return Status::error(where(what) + ": cannot inspect buffer " +
                           pointerText(ptr) + " (" + cudaText(e) + ")");
    }
    if (attributes.type != cudaMemoryTypeDevice &&
        attributes.type != cudaMemoryTypeManaged)
      return Status::error(where(what) + ": buffer " + pointerText(ptr) +
                           " is host memory; NCCL collectives take device "
                           "pointers (cudaMalloc)");
    if (attributes.type == cudaMemoryTypeDevice && attributes.device != device)
      return Status::error(where(what) + ": buffer " + pointerText(ptr) +
                           " is on CUDA device " +
                           std::to_string(attributes.device) +
                           ", the communicator on device " +
                           std::to_string(device));
    return Status::success();
  }

  static std::string pointerText(const void *ptr) {
    char text[32];
    std::snprintf(text, sizeof text, "%p", ptr);
    return text;
  }

  /// Enqueues a collective on the communicator's stream, then polls until
  /// the stream has run it, NCCL reports an error, or the timeout passes.
  template <typename Enqueue> Status run(const char *what, Enqueue &&enqueue) {
    if (Status s = queue(what, std::forward<Enqueue>(enqueue)); !s.ok())
      return s;
    return poll(what);
  }

  /// Polls until the stream has run what was queued, NCCL reports an
  /// error, or the timeout passes. After prepare().
  Status poll(const char *what) {
    Clock::time_point deadline = Clock::now() + timeout;
    Backoff backoff;
    for (;;) {
      ncclResult_t async = ncclSuccess;
      if (ncclResult_t q = ncclCommGetAsyncError(comm, &async);
          q != ncclSuccess)
        return fail(what, ncclText(q, comm));
      if (async != ncclSuccess && async != ncclInProgress)
        return fail(what, ncclText(async, comm));
      if (async == ncclSuccess) {
        cudaError_t e = cudaStreamQuery(stream);
        if (e == cudaSuccess) {
          queued.clear();
          queuedCount = 0;
          return Status::success();
        }
        if (e != cudaErrorNotReady)
          return fail(what, "its CUDA stream failed (" + cudaText(e) + ")");
      }
      if (Clock::now() >= deadline)
        return fail(what, "it did not complete within " + millis(timeout) +
                              (async == ncclInProgress
                                   ? " (NCCL was still enqueuing it)"
                                   : " (its kernel is still running: a "
                                     "rank that never joined it, or one "
                                     "that called a different collective)"));
      backoff.pause();
    }
  }

  /// Aborts the communicator (which stops its kernels) and says why.
  Status fail(const char *what, const std::string &reason) {
    if (!aborted) {
      ncclCommAbort(comm);
      aborted = true;
      abortReason = std::string(what) + ": " + reason;
    }
    return Status::error(where(what) + " failed: " + reason +
                         "; the communicator is aborted");
  }

  std::string prefix;
  int device;
  std::chrono::milliseconds timeout;
  ncclComm_t comm;
  cudaStream_t stream;
  /// The barrier's one float.
  float *scratch;
  /// A transfer's header then the peer's (2 * kHeaderSize): on the device
  /// for NCCL, and pinned on the host to compare them.
  int64_t *headers;
  int64_t *hostHeaders;
  bool aborted = false;
  std::string abortReason;
  /// DeviceQueue's: its two events (made on first use), and what was
  /// queued since the last finish(), for its error.
  cudaEvent_t followed = nullptr, joined = nullptr;
  std::string queued;
  size_t queuedCount = 0;
};

} // namespace

bool weft::rt::ncclAvailable() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess && count > 0;
}

Status weft::rt::createNcclCommunicator(StoreClient &store,
                                        const std::string &prefix, int rank,
                                        int size, int device,
                                        std::chrono::milliseconds timeout,
                                        std::unique_ptr<Communicator> &out) {
  if (size < 1 || rank < 0 || rank >= size)
    return Status::error("NCCL communicator " + quote(prefix) + ": rank " +
                         std::to_string(rank) + " is not in a group of " +
                         std::to_string(size));
  std::string name = who(prefix, rank, size);
  if (Status s = useDevice(device, name); !s.ok())
    return s;

  // Rank 0 makes the group's id (the address of NCCL's bootstrap root) and
  // the others read it from the store.
  ncclUniqueId id;
  std::string key = prefix + "/nccl-unique-id";
  if (rank == 0) {
    if (ncclResult_t r = ncclGetUniqueId(&id); r != ncclSuccess)
      return Status::error(name + ": ncclGetUniqueId failed: " +
                           ncclGetErrorString(r));
    std::vector<char> bytes(reinterpret_cast<const char *>(&id),
                            reinterpret_cast<const char *>(&id) + sizeof id);
    if (Status s = store.set(key, bytes); !s.ok())
      return Status::error(name + ": cannot publish the NCCL unique id: " +
                           s.message);
  } else {
    std::vector<char> bytes;
    if (Status s = store.get(key, timeout, bytes); !s.ok())
      return Status::error(name + ": no NCCL unique id from rank 0 within " +
                           millis(timeout) + ": " + s.message);
    if (bytes.size() != sizeof id)
      return Status::error(name + ": the NCCL unique id under " + quote(key) +
                           " has " + std::to_string(bytes.size()) +
                           " bytes, not " + std::to_string(sizeof id) +
                           " (another NCCL version, or a key that is not "
                           "NCCL's)");
    std::memcpy(&id, bytes.data(), sizeof id);
  }

  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  ncclResult_t r = ncclCommInitRankConfig(&comm, size, id, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    std::string reason = ncclText(r, comm);
    if (comm)
      ncclCommAbort(comm);
    return Status::error(name + " on device " + std::to_string(device) +
                         ": ncclCommInitRankConfig failed: " + reason);
  }
  r = settle(comm, r, Clock::now() + timeout);
  if (r == ncclInProgress) {
    ncclCommAbort(comm);
    return Status::error(
        name + " on device " + std::to_string(device) +
        ": NCCL initialisation did not complete within " + millis(timeout) +
        " (are all " + std::to_string(size) +
        " ranks running, each on a CUDA device of its own?); aborted");
  }
  if (r != ncclSuccess) {
    std::string reason = ncclText(r, comm);
    ncclCommAbort(comm);
    return Status::error(name + " on device " + std::to_string(device) +
                         ": NCCL initialisation failed: " + reason);
  }

  cudaStream_t stream = nullptr;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    ncclCommAbort(comm);
    return Status::error(name + ": cannot create a CUDA stream on device " +
                         std::to_string(device) + " (" + cudaText(e) + ")");
  }
  float *scratch = nullptr;
  int64_t *headers = nullptr, *hostHeaders = nullptr;
  cudaError_t e = cudaMalloc(&scratch, sizeof(float));
  if (e == cudaSuccess)
    e = cudaMalloc(&headers, 2 * kHeaderSize * sizeof(int64_t));
  if (e == cudaSuccess)
    e = cudaMallocHost(&hostHeaders, 2 * kHeaderSize * sizeof(int64_t));
  if (e != cudaSuccess) {
    cudaFree(scratch);
    cudaFree(headers);
    cudaStreamDestroy(stream);
    ncclCommAbort(comm);
    return Status::error(name + ": cannot allocate on device " +
                         std::to_string(device) + " (" + cudaText(e) + ")");
  }
  out = std::make_unique<NcclCommunicator>(rank, size, prefix, device, timeout,
                                           comm, stream, scratch, headers,
                                           hostHeaders);
  return Status::success();
}

#else // !WEFT_HAVE_NCCL

using namespace weft::rt;

bool weft::rt::ncclAvailable() { return false; }

Status weft::rt::createNcclCommunicator(StoreClient &, const std::string &prefix,
                                        int rank, int size, int device,
                                        std::chrono::milliseconds,
                                        std::unique_ptr<Communicator> &) {
  return Status::error(
      "NCCL communicator " + quote(prefix) + ": rank " + std::to_string(rank) +
      " of " + std::to_string(size) + " on device " + std::to_string(device) +
      ": this build has no NCCL (configure with the CUDA toolkit at "
      "/usr/local/cuda)");
}

#endif // WEFT_HAVE_NCCL
