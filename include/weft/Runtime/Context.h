//===- Context.h - The process a step runs in -------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Fills the WeftRuntimeContext (ModelABI.h) a compiled step receives: where
// this process stands among the run's ranks, read from the launcher's
// environment; the device; and the compute threads, whose setup (BLAS and
// the pool behind parallelFor) lives here and nowhere else.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_CONTEXT_H
#define WEFT_RUNTIME_CONTEXT_H

#include "weft/Formats/HostArray.h"
#include "weft/Runtime/Collectives.h"
#include "weft/Runtime/ModelABI.h"
#include "weft/Runtime/ModelSpec.h"

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace weft {
namespace rt {

/// Where this process stands among the run's.
struct LaunchInfo {
  int rank = 0, worldSize = 1, localRank = 0, localWorldSize = 1;
  /// Which launcher's variables were read ("torchrun", "OpenMPI", "Slurm"),
  /// or empty when none were set (a single process).
  std::string launcher;
  /// Where rank 0 hosts the rendezvous: MASTER_ADDR and MASTER_PORT; under
  /// Slurm without MASTER_ADDR, the first host of the job's node list;
  /// otherwise loopback (ranks on one node) and port 29500. Under torchrun
  /// (TORCHELASTIC_RUN_ID set), MASTER_PORT + 1: torchrun's agent serves
  /// its own store on MASTER_PORT.
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  /// WEFT_HEARTBEAT_FILE: a file weftrun watches; the loop writes its
  /// progress into it as each step starts and ends, and a rank that stops
  /// writing counts as hung.
  std::string heartbeatFile;
};

/// Reads torchrun's RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE, else
/// OpenMPI's OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE}, else Slurm's
/// SLURM_{PROCID,NTASKS,LOCALID} (and SLURM_NTASKS_PER_NODE when it is one
/// number), through `getenv`, and where rank 0 is (see LaunchInfo). Errors
/// name the variable: a value that is not a non-negative integer, a rank
/// outside the world, a size below 1, a launcher that sets a rank without a
/// world size, a port outside [1, 65535], or ranks on several nodes with
/// nothing saying where rank 0 is.
Status readLaunchInfo(const std::function<const char *(const char *)> &getenv,
                      LaunchInfo &out);

/// The first host of a Slurm node list ("node[07-09,12],gpu3" -> "node07").
std::string firstSlurmHost(const std::string &list);

/// The address this rank's peers reach it at, which its communicators
/// listen on: loopback when every rank is on this node; otherwise the IPv4
/// address of the interface GLOO_SOCKET_IFNAME names (PyTorch's variable),
/// else the local address of the route to rank 0's store (MASTER_ADDR),
/// else, when that route is loopback (rank 0's own host name resolving to
/// 127.0.1.1, as Debian's /etc/hosts has it), the first non-loopback IPv4
/// address that is up, else the host's name. Never the host's name first:
/// it often resolves to loopback, which a peer on another node cannot
/// reach.
std::string peerAddress(const LaunchInfo &info);

/// The CUDA device (0-based among the visible ones) that the process of
/// local rank `localRank` trains on: one GPU per local rank, the local rank
/// modulo `deviceCount` (so a launcher that gives each process its own
/// GPU through CUDA_VISIBLE_DEVICES gets device 0 everywhere). 0 when no
/// device is visible: initializing it then reports that.
int cudaDeviceForLocalRank(int localRank, int deviceCount);

/// A fixed set of worker threads behind WeftRuntimeContext::parallelFor.
/// Threads start on the first parallel loop, so a step that never asks for
/// one costs none.
class ThreadPool {
public:
  explicit ThreadPool(int numThreads);
  ~ThreadPool();
  ThreadPool(const ThreadPool &) = delete;
  ThreadPool &operator=(const ThreadPool &) = delete;

  int size() const { return numThreads; }
  /// Calls fn(arg, i) for every i in [0, n) on the pool's threads (the
  /// caller's included) and returns when every call has.
  void parallelFor(int64_t n, void (*fn)(void *, int64_t), void *arg);

private:
  void start();
  void work();
  void drain(std::unique_lock<std::mutex> &lock);

  int numThreads;
  std::vector<std::thread> workers;
  std::mutex mutex;
  std::condition_variable wake, done;
  bool stopping = false;
  // The loop in flight: generation counts loops so workers join each once.
  uint64_t generation = 0;
  int64_t total = 0, next = 0, chunk = 1;
  int busy = 0;
  void (*fn)(void *, int64_t) = nullptr;
  void *arg = nullptr;
};

/// The context and what it points to, alive for the whole run.
class RuntimeContext {
public:
  /// `threads` compute threads, BLAS's included (0: keep OpenBLAS's own
  /// default, OPENBLAS_NUM_THREADS or the machine's cores).
  RuntimeContext(const LaunchInfo &launch, int threads);
  RuntimeContext(const RuntimeContext &) = delete;
  RuntimeContext &operator=(const RuntimeContext &) = delete;

  const WeftRuntimeContext *get() const { return &context; }
  const LaunchInfo &launch() const { return info; }
  /// Tells the launcher this rank is alive and how far it got: writes
  /// `progress` (2 s + 1 once step s has its batch, 2 (s + 1) when it is
  /// done) into the heartbeat file, if any, which updates its time. When
  /// several ranks go quiet, the launcher names the one least far along:
  /// the others are waiting for it in a collective. A failure to write is
  /// not the run's problem and is ignored.
  void beat(int64_t progress) const;

  /// For a --target cuda step, before anything else touches the device:
  /// initializes the GPU of this process's local rank
  /// (cudaDeviceForLocalRank over cuda::deviceCount()) and sets the
  /// context's deviceType (CUDA), deviceIndex and stream (the step
  /// stream). The error is cuda::initialize's: without a driver or a GPU
  /// it says the executable needs an NVIDIA GPU and how to compile it for
  /// the CPU.
  Status useCudaDevice();

  /// For a step compiled for `mesh` (lib/Runtime/MeshCollectives.cpp): the
  /// launch must have the mesh's number of ranks (an error names both and
  /// what to do); rank 0 hosts the rendezvous at MASTER_ADDR:MASTER_PORT,
  /// and every rank joins one communicator per non-empty set of axes, the
  /// group of ranks sharing its coordinates on the other axes (hierarchical
  /// when the group spans nodes); the context's `axes` hold the one-axis
  /// groups, and each group reaches the others (AxisGroup::mesh). Waits up to
  /// `timeout` for the other ranks; every collective fails after it too.
  Status joinMesh(const std::vector<MeshAxisSpec> &mesh,
                  std::chrono::milliseconds timeout);

  /// Before each training step: each group posts the recvs the last step
  /// issued ahead of the step's recv ops (AxisGroup::early).
  void beginStep();
  /// Waits for the sends a step left running (weft_rt_send_f32 returns
  /// once its data is copied); a failed one is the error. Ends the step
  /// beginStep began: an early recv the step did not take is an error.
  Status drainTransfers();
  /// The seconds this rank spent in sends and receives since the last
  /// call (AxisGroup::transferSeconds over every group); 0 off a mesh.
  double takeTransferSeconds();
  /// The seconds this rank waited for collectives to finish since the
  /// last call (AxisGroup::collectiveSeconds); 0 off a mesh.
  double takeCollectiveSeconds();
  /// Waits for the collectives a --target cuda step queued on each
  /// group's NCCL stream (DeviceQueue::finish): a peer that died or a
  /// collective that never completes is an error after the mesh's timeout,
  /// not a step that waits forever. Succeeds at once off a GPU mesh.
  Status finishDeviceCollectives();
  /// Sums `values` over every rank of the mesh, in place (a no-op off a
  /// mesh). For the runtime's own bookkeeping between steps.
  Status allReduceSum(std::vector<float> &values);
  /// How each axis's group moves its data ("dp: gloo over TCP; ..."),
  /// for the run's log.
  std::string describeCollectives() const;

private:
  LaunchInfo info;
  std::unique_ptr<ThreadPool> pool;
  WeftRuntimeContext context{};
  // What `context.axes` points to, once joinMesh has run.
  std::unique_ptr<StoreServer> storeServer;
  std::unique_ptr<StoreClient> store;
  std::vector<std::string> axisNames;
  std::vector<std::unique_ptr<AxisGroup>> axisGroups;
  std::vector<WeftAxisComm> axes;
};

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_CONTEXT_H
