//===- Collectives.h - Communication between ranks --------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// One interface for the collectives a partitioned step calls, whatever
// library carries them: gloo over TCP on CPUs, NCCL on CUDA devices. A
// communicator spans the ranks of one mesh-axis group; the runtime context
// hands one per axis to generated code (WeftAxisComm::comm).
//
// The buffers a communicator takes are where its library works: host
// pointers for gloo, device pointers (cudaMalloc, on the communicator's
// device) for NCCL.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_COLLECTIVES_H
#define WEFT_RUNTIME_COLLECTIVES_H

#include "weft/Formats/HostArray.h"
#include "weft/Runtime/Kernels.h"
#include "weft/Runtime/Rendezvous.h"

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace weft {
namespace rt {

class DeviceQueue;

class Communicator {
public:
  virtual ~Communicator();
  int rank() const { return myRank; }
  int size() const { return numRanks; }

  /// data = the sum over ranks of data, elementwise, in place.
  virtual Status allReduceSum(float *data, size_t count) = 0;
  /// out (size() * count) = every rank's `in` (count), in rank order.
  virtual Status allGather(const float *in, size_t count, float *out) = 0;
  /// out (count) = this rank's slice of the sum over ranks of `in`
  /// (size() * count). By default an all-reduce and a slice.
  virtual Status reduceScatterSum(const float *in, size_t count, float *out);
  /// out (size() * count): block g is block rank() of rank g's `in`
  /// (size() * count, one block of `count` per destination rank).
  virtual Status allToAll(const float *in, size_t count, float *out) = 0;
  /// data = root's data.
  virtual Status broadcast(float *data, size_t count, int root) = 0;
  virtual Status barrier() = 0;
  /// How the group moves its data, for a person reading the run's log.
  virtual std::string describe() const { return ""; }

  /// Point to point, for pipeline stages: `send` gives `count` floats to
  /// group rank `peer`, where the `recv` from this rank with the same `tag`
  /// takes them. Both block, up to the communicator's timeout, until the
  /// transfer is done: `send` returns once the peer has posted that recv
  /// and the data is on its way (`data` may then be reused), so a cycle of
  /// ranks that all send first waits until the timeout; order them (in a
  /// ring, even ranks send first and odd ranks receive first).
  ///
  /// Both sides must agree on the size: a send and its recv of different
  /// sizes fail on both ranks, naming both sizes, and move no data (on
  /// gloo checked at a (peer, tag, size)'s first transfer: a tag keeps the
  /// size it was first sent with, as a compiled step's tags do). Sends
  /// and recvs between two ranks with one tag match in the order they are
  /// issued; with distinct tags they may be posted in any order (from
  /// several threads at once on gloo; NCCL has no tags and matches in
  /// issue order only, so there the tags must come in the same order on
  /// both sides, else the transfer fails naming both tags). A failure
  /// names this rank, the peer, the tag and the byte count; after a
  /// timeout the communicator is unusable, as after a failed collective.
  /// `peer` is not this rank; `tag` is at most kMaxTag.
  virtual Status send(const float *data, size_t count, int peer,
                      uint64_t tag) = 0;
  virtual Status recv(float *data, size_t count, int peer, uint64_t tag) = 0;
  /// Whether sends and recvs with distinct tags may run on two threads at
  /// once (gloo), so that a rank's sends need not wait behind its recvs.
  virtual bool concurrentTransfers() const { return false; }

  /// A recv that startRecv posted: it moves while the caller computes on.
  class PendingTransfer {
  public:
    virtual ~PendingTransfer();
    /// Blocks until the transfer is done, up to the communicator's timeout;
    /// recv's errors.
    virtual Status wait() = 0;
  };
  /// Posts a recv as `recv` describes it and returns at once, where the
  /// communicator moves transfers without a thread of the caller's: gloo,
  /// once this (peer, tag, size) has been agreed by a first send and recv
  /// of it. Else null: run `recv`. `data` stays unread until wait()
  /// returns; the recvs of one (peer, tag) match in the order they are
  /// posted (`recv` posts its own when it starts).
  virtual std::unique_ptr<PendingTransfer> startRecv(float *data, size_t count,
                                                     int peer, uint64_t tag) {
    return nullptr;
  }
  /// The same collectives queued on a device stream rather than run to
  /// completion (NCCL's), or null (gloo's run on the host).
  virtual DeviceQueue *deviceQueue() { return nullptr; }

  /// Tags fit in 48 bits: gloo's message slots keep the rest for the kind
  /// of message. The ABI's limit, which weft.send and weft.recv verify.
  static constexpr uint64_t kMaxTag = uint64_t(WEFT_RT_MAX_TAG);

  /// "send of 64 bytes with tag 7 from rank 0 to rank 1 of 2", or "recv of
  /// ... on rank 1 from rank 0 of 2": how point-to-point errors begin.
  std::string transferText(bool sending, size_t bytes, int peer,
                           uint64_t tag) const;
  /// An error when `peer` is not another rank of the group or `tag` is
  /// above kMaxTag; `what` is transferText's. Public so that a send
  /// issued to run later (weft_rt_send_f32) is checked when it is issued.
  Status checkTransfer(const std::string &what, int peer, uint64_t tag) const;

protected:
  Communicator(int rank, int size) : myRank(rank), numRanks(size) {}

private:
  int myRank, numRanks;
};

/// A communicator's collectives on device memory, queued on its own CUDA
/// stream instead of run to completion: what a --target cuda step calls
/// (lib/Runtime/CudaMeshCollectives.cpp). The host queues and goes on; the
/// order between the step's stream and the queue's is by events, so a
/// bucket of gradients is reduced while the backward pass computes. Every
/// rank queues the same collectives in the same order.
class DeviceQueue {
public:
  virtual ~DeviceQueue();
  /// What is queued next waits for the work `stream` (a CUstream) has
  /// queued so far.
  virtual Status follow(void *stream) = 0;
  /// `stream` waits for what this queue has queued so far.
  virtual Status join(void *stream) = 0;
  /// As Communicator's, on device pointers; out-of-place for all-reduce.
  virtual Status queueAllReduceSum(const float *in, float *out,
                                   size_t count) = 0;
  virtual Status queueAllGather(const float *in, size_t count, float *out) = 0;
  virtual Status queueReduceScatterSum(const float *in, size_t count,
                                       float *out) = 0;
  virtual Status queueAllToAll(const float *in, size_t count, float *out) = 0;
  /// Waits on the host for everything queued, up to the communicator's
  /// timeout: a failure or the timeout aborts the communicator and the
  /// error says what was queued and which rank of which group this is.
  virtual Status finish() = 0;
};

/// One strided copy: `height` rows of `width` elements from src + srcOffset
/// (rows `srcPitch` apart) to dst + dstOffset (rows `dstPitch` apart), in
/// elements. What cudaMemcpy2D does, and what the host loop does on a CPU.
struct BlockCopy {
  size_t dstOffset, srcOffset, dstPitch, srcPitch, width, height;
};
/// Blocks regrouped by rank, one strided copy per rank. `toRanks`: rank
/// g's block of a tensor laid out [outer][n][inner] (split along the dim
/// where inner starts) goes to g * stride, as [outer][inner], since a
/// communicator wants each rank's block contiguous. Otherwise the inverse:
/// rank g's [outer][inner] block at g * stride goes into [outer][n][inner]
/// (an all-gather along a dim with dims before it).
struct RankBlocks {
  size_t n, outer, inner, stride;
  bool toRanks;
  /// Rank g's copy.
  BlockCopy copy(size_t g) const;
  /// Every rank's copy on host memory.
  void run(const float *src, float *dst) const;
};

/// A gloo communicator over TCP for the `size` ranks that meet in `store`
/// under `prefix` (one prefix per group). `hostname` is the address this
/// rank's peers reach it at. Waits up to `timeout` for the group, and
/// every collective fails after `timeout` rather than hanging.
Status createGlooCommunicator(StoreClient &store, const std::string &prefix,
                              int rank, int size, const std::string &hostname,
                              std::chrono::milliseconds timeout,
                              std::unique_ptr<Communicator> &out);

/// For ranks that span nodes (`localSize` < `size`, ranks numbered node by
/// node as launchers do): all-reduce runs within each node, then across
/// nodes among each node's first rank, then within each node again (a
/// broadcast), so only one rank per node crosses the slow link. The other
/// collectives go over all ranks at once. With one node it is the flat
/// communicator.
Status createHierarchicalCommunicator(StoreClient &store,
                                      const std::string &prefix, int rank,
                                      int size, int localSize,
                                      const std::string &hostname,
                                      std::chrono::milliseconds timeout,
                                      std::unique_ptr<Communicator> &out);

/// A NCCL communicator for the `size` ranks that meet in `store` under
/// `prefix`, this rank on CUDA device `device` (one device per rank: NCCL
/// does not let two ranks of one communicator share a device). Rank 0
/// makes the group's ncclUniqueId and publishes it in the store; the others
/// wait up to `timeout` for it. Implemented in lib/Runtime/Nccl.cpp, in the
/// WeftRuntimeNccl library (not WeftRuntime, so that CPU executables need
/// no CUDA libraries).
///
/// Unlike gloo's, every pointer its collectives take is a device pointer on
/// `device` (a host pointer is refused with an error). Each collective runs
/// on a CUDA stream the communicator owns (cudaStreamNonBlocking: the GPU
/// counterpart of CommThread, so a step's own stream computes on while it
/// runs) and returns once the stream has finished it. The communicator is
/// non-blocking: initialisation and every collective are polled, and one
/// that fails or does not finish within `timeout` aborts the communicator
/// (ncclCommAbort) and returns a Status naming the rank, the group size and
/// what did not finish, rather than hanging. An aborted communicator
/// refuses every later collective. Creating it leaves `device` current on
/// the calling thread; a thread calling a collective need not have it
/// current (a CommThread's does not): collectives set it.
///
/// Without NCCL in the build (no CUDA toolkit or NCCL at configure time)
/// this only returns an error that says so.
Status createNcclCommunicator(StoreClient &store, const std::string &prefix,
                              int rank, int size, int device,
                              std::chrono::milliseconds timeout,
                              std::unique_ptr<Communicator> &out);

/// True when this build has NCCL and the CUDA runtime sees a device
/// (cudaGetDeviceCount). Calling it initialises the CUDA runtime in this
/// process: a child forked afterwards cannot use CUDA, so a program that
/// forks ranks asks in a rank, not before forking.
bool ncclAvailable();

/// Runs a communicator's collectives in order on a thread of its own, so
/// that computation goes on while they run: a partitioned step reduces a
/// bucket of gradients while the backward pass computes the next. Every
/// rank must issue the same collectives in the same order, as with the
/// communicator itself. The first failure sticks: every later wait
/// returns it.
class CommThread {
public:
  using Ticket = uint64_t;

  explicit CommThread(Communicator &comm);
  /// Waits for what was issued, then stops the thread.
  ~CommThread();
  CommThread(const CommThread &) = delete;
  CommThread &operator=(const CommThread &) = delete;

  /// Issues data = the sum over ranks of data; `data` must stay untouched
  /// until the ticket is waited for.
  Ticket allReduceSum(float *data, size_t count);
  /// Issues out = every rank's `in`, in rank order.
  Ticket allGather(const float *in, size_t count, float *out);
  /// Issues out = this rank's slice of the sum over ranks of `in`.
  Ticket reduceScatterSum(const float *in, size_t count, float *out);
  /// Issues out = block rank() of every rank's `in`, in rank order.
  Ticket allToAll(const float *in, size_t count, float *out);
  /// Issues a send of `data` to `peer` (Communicator::send); the thread
  /// runs nothing else until the peer has taken it.
  Ticket send(const float *data, size_t count, int peer, uint64_t tag);
  /// Issues a recv into `data` from `peer` (Communicator::recv).
  Ticket recv(float *data, size_t count, int peer, uint64_t tag);

  /// Blocks until collective `ticket` (and every one issued before it) has
  /// run; its status, or the first failure before it.
  Status wait(Ticket ticket);
  /// wait() for everything issued so far.
  Status waitAll();
  /// Whether `ticket` has run (without waiting).
  bool finished(Ticket ticket);
  /// Whether this thread records what it runs (WEFT_TRACE, read when the
  /// thread starts): callers waiting on it record their waits alike.
  bool traced() const { return tracing; }

private:
  /// Queues `work`; `what` and `bytes` name it in a trace (WEFT_TRACE).
  Ticket issue(const char *what, size_t bytes, std::function<Status()> work);
  void run();

  Communicator &comm;
  std::mutex mutex;
  std::condition_variable changed;
  struct Work {
    Ticket ticket;
    const char *what;
    size_t bytes;
    std::function<Status()> run;
  };
  std::deque<Work> queue;
  /// This thread's lane in a trace, and whether it records.
  int lane;
  bool tracing;
  Ticket issued = 0, completed = 0;
  Status failed;
  bool stopping = false;
  std::thread thread;
};

/// A group's collectives on a device (lib/Runtime/CudaMeshCollectives.cpp):
/// its NCCL communicator and the device buffers its collectives use.
struct DeviceGroup {
  virtual ~DeviceGroup();
  /// DeviceQueue::finish of its communicator.
  virtual Status finish() = 0;
};

/// One mesh-axis group as generated code reaches it (WeftAxisComm::comm
/// points to one): its communicator, the thread every collective of the
/// group runs on (so that two never use the communicator at once, and all
/// ranks run them in program order), and the buckets of reductions a step
/// sends while it computes (--weft-bucket-collectives).
struct AxisGroup {
  struct Bucket {
    /// The members' inputs side by side; for a reduce-scatter one region
    /// per rank, each holding that rank's block of every member.
    std::vector<float> data;
    /// A reduce-scatter's result (this rank's region of the sum) or an
    /// all-gather's (every rank's region, in rank order).
    std::vector<float> result;
    /// 0 all-reduce, 1 reduce-scatter, 2 all-gather.
    int64_t kind = 0;
    bool inFlight = false;
    /// Started since its last member was put: its result may be read (and
    /// it may not start again).
    bool started = false;
    CommThread::Ticket ticket = 0;
  };

  /// A recv as a step issues it.
  struct RecvKey {
    int64_t peer = 0, tag = 0, count = 0;
    bool operator==(const RecvKey &o) const {
      return peer == o.peer && tag == o.tag && count == o.count;
    }
  };
  /// A recv posted before the step asked for it, into a buffer of its own:
  /// by the communicator (`posted`: Communicator::startRecv), else on
  /// recvThread (`ticket`).
  struct EarlyRecv {
    RecvKey key;
    CommThread::Ticket ticket = 0;
    std::unique_ptr<Communicator::PendingTransfer> posted;
    std::vector<float> data;
  };

  explicit AxisGroup(std::unique_ptr<Communicator> c)
      : comm(std::move(c)), thread(std::make_unique<CommThread>(*comm)) {
    if (comm->concurrentTransfers()) {
      sendThread = std::make_unique<CommThread>(*comm);
      recvThread = std::make_unique<CommThread>(*comm);
    }
  }

  /// The thread a send runs on: its own where the communicator allows.
  CommThread &sender() { return sendThread ? *sendThread : *thread; }

  std::unique_ptr<Communicator> comm;
  /// Sends still running on sender(), each with its own copy of the data:
  /// a pipeline stage goes on computing while its activation travels.
  /// Declared before `thread`, which finishes them when it stops. (Posted
  /// from the step's own thread instead, as recvs ahead are, a pipelined
  /// step of 4 micro-batches took 7.7 ms against 6.1.)
  std::deque<std::pair<CommThread::Ticket, std::vector<float>>> sends;
  /// Declared after `comm`: it stops (finishing what was issued) first.
  std::unique_ptr<CommThread> thread;
  /// Sends, apart from `thread`: a send returns only once the peer has
  /// posted its recv, and on `thread` it would hold up this rank's own
  /// next recv (a pipeline stage waiting for a gradient behind the
  /// activation it sent): the ranks would move in lock step, idle between
  /// messages, or wait for each other until the timeout. Null where the
  /// communicator runs one transfer at a time.
  std::unique_ptr<CommThread> sendThread;

  /// Receiving ahead (RuntimeContext::beginStep). gloo moves a message only
  /// once its recv is posted: a recv posted at the op makes the receiving
  /// stage wait a round trip and the whole transfer, every micro-batch,
  /// however early the peer sent. A compiled step issues the same recvs
  /// in the same order every step, so from the second step on the group
  /// posts the last step's recvs ahead, kRecvsAhead at a time (through
  /// the communicator's startRecv where it can, else on a thread of their
  /// own), and a recv op that matches the oldest takes its data.
  static constexpr size_t kRecvsAhead = 2;
  /// The recvs of the step running (beginStep clears them; recorded only
  /// where recvThread posts ahead) and of the one before, whose order the
  /// running step's early recvs follow.
  std::vector<RecvKey> stepRecvs, lastStepRecvs;
  /// The next of lastStepRecvs to post ahead.
  size_t nextEarly = 0;
  /// The last recv queued on recvThread.
  CommThread::Ticket lastThreadRecv = 0;
  /// Posted ahead and not yet taken, oldest first. Declared before
  /// `recvThread`, which fills them until it stops.
  std::deque<EarlyRecv> early;
  /// The buffers of early recvs already taken, for the next ones: a step's
  /// recvs are as large every step, so after the first none allocates.
  std::vector<std::vector<float>> spareRecvBuffers;
  /// Whether a step runs (between beginStep and drainTransfers): recvs
  /// outside it are neither recorded nor served from `early`.
  bool inStep = false;
  /// Where the group posts recvs ahead; null where the communicator runs
  /// one transfer at a time, or WEFT_RECV_AHEAD=0 turned it off.
  std::unique_ptr<CommThread> recvThread;
  std::vector<Bucket> buckets;
  /// The mesh's groups by axis mask (bit i: axis i), this one among them:
  /// how a collective over several axes finds its group from the context.
  const std::vector<std::unique_ptr<AxisGroup>> *mesh = nullptr;
  /// Where the group met (joinMesh): a --target cuda step makes its NCCL
  /// communicator there, on its first collective, which every rank of the
  /// group reaches in the same order.
  StoreClient *store = nullptr;
  std::string prefix;
  std::chrono::milliseconds timeout{0};
  /// The group on this rank's GPU, once a --target cuda step has used it.
  std::unique_ptr<DeviceGroup> device;
  /// Seconds the step has spent in sends and receives (waiting for the
  /// peer included) since RuntimeContext::takeTransferSeconds last
  /// collected them: a pipeline rank's time not computing.
  double transferSeconds = 0;
  /// Seconds the step has waited for this group's collectives (all-reduce,
  /// gather, scatter, buckets) to finish: communication the computation
  /// did not hide. Collected by RuntimeContext::takeCollectiveSeconds.
  double collectiveSeconds = 0;
};

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_COLLECTIVES_H
