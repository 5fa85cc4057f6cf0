//===- NcclTest.cpp - NCCL collectives on CUDA devices --------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Ranks are real processes (fork), as in CollectivesTest.cpp. Everything
// that touches CUDA runs in a child: a process that has initialised the
// CUDA runtime cannot use it in children it forks afterwards, so the parent
// (which hosts the store) never calls CUDA, not even ncclAvailable().
//
// Without a CUDA device (or in a build without NCCL) the tests that need
// one skip with a message; the error for a device that does not exist is
// checked everywhere.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Collectives.h"
#include "weft/Runtime/Rendezvous.h"

#include "RankProcesses.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <unistd.h>

#ifdef WEFT_HAVE_NCCL
#include <cuda_runtime.h>
#endif

using namespace weft::rt;
using weft::rt::test::runRanks;
using namespace std::chrono_literals;

namespace {

std::string joined(const std::vector<std::string> &errs) {
  std::string all;
  for (size_t r = 0; r < errs.size(); ++r)
    all += "rank " + std::to_string(r) + ": " + errs[r] + "\n";
  return all;
}

/// How many CUDA devices NCCL collectives can use here: 0 without NCCL in
/// the build or without a device. Asked in a child (see above).
int usableDevices() {
#ifdef WEFT_HAVE_NCCL
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(
      1,
      [](int) {
        if (!ncclAvailable())
          return 0;
        int count = 0;
        if (cudaGetDeviceCount(&count) != cudaSuccess)
          return 0;
        return std::min(count, 100);
      },
      &errs);
  return codes[0] <= 100 ? codes[0] : 0;
#else
  return 0;
#endif
}

#define SKIP_WITHOUT_DEVICES(n)                                                \
  do {                                                                         \
    int devices = usableDevices();                                             \
    if (devices == 0)                                                          \
      GTEST_SKIP() << "no CUDA device / no NCCL: NCCL collectives not "        \
                      "exercised";                                             \
    if (devices < (n))                                                         \
      GTEST_SKIP() << devices << " CUDA device(s), " << (n)                    \
                   << " needed (one per rank): not exercised";                 \
  } while (false)

/// The parent's store and a port children connect to.
struct Store {
  std::unique_ptr<StoreServer> server;
  int port = 0;
  Store() {
    if (StoreServer::start("127.0.0.1", 0, server).ok())
      port = server->port();
  }
};

/// A child's connection; null (with the error on stderr) when it fails.
std::unique_ptr<StoreClient> connect(int port) {
  std::unique_ptr<StoreClient> client;
  if (Status s = StoreClient::connect("127.0.0.1", port, 10s, client);
      !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message.c_str());
    return nullptr;
  }
  return client;
}

/// Prints a failed Status and says whether it failed.
[[maybe_unused]] bool failed(const Status &s, const char *what) {
  if (s.ok())
    return false;
  std::fprintf(stderr, "%s: %s\n", what, s.message.c_str());
  return true;
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

TEST(NcclTest, BadArgumentsAreClearErrors) {
  Store store;
  ASSERT_GT(store.port, 0);
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(
      1,
      [&](int) {
        auto client = connect(store.port);
        if (!client)
          return 2;
        std::unique_ptr<Communicator> comm;
        Status s = createNcclCommunicator(*client, "bad-device", 0, 1, 999, 2s,
                                          comm);
        if (s.ok() || comm)
          return 3;
        std::fprintf(stderr, "device: %s\n", s.message.c_str());
        s = createNcclCommunicator(*client, "bad-rank", 2, 2, 0, 2s, comm);
        if (s.ok() || comm)
          return 4;
        std::fprintf(stderr, "rank: %s\n", s.message.c_str());
        return 0;
      },
      &errs);
  ASSERT_EQ(codes[0], 0) << joined(errs);
  const std::string &err = errs[0];
  EXPECT_TRUE(contains(err, "NCCL communicator 'bad-device': rank 0 of 1"))
      << err;
#ifdef WEFT_HAVE_NCCL
  // "does not exist" where devices are visible, else why none are.
  EXPECT_TRUE(contains(err, "CUDA device 999 does not exist") ||
              contains(err, "no CUDA device is visible"))
      << err;
  EXPECT_TRUE(contains(err, "rank 2 is not in a group of 2")) << err;
#else
  EXPECT_TRUE(contains(err, "this build has no NCCL (configure with the CUDA "
                            "toolkit at /usr/local/cuda)"))
      << err;
  EXPECT_FALSE(ncclAvailable());
#endif
  std::printf("[ message  ] %s", err.c_str());
}

#ifdef WEFT_HAVE_NCCL

/// A float array on the current device.
struct DeviceBuffer {
  float *ptr = nullptr;
  size_t count = 0;
  explicit DeviceBuffer(size_t count) : count(count) {
    if (cudaMalloc(&ptr, count * sizeof(float)) != cudaSuccess)
      ptr = nullptr;
  }
  ~DeviceBuffer() { cudaFree(ptr); }
  bool put(const std::vector<float> &values) {
    return values.size() == count &&
           cudaMemcpy(ptr, values.data(), count * sizeof(float),
                      cudaMemcpyHostToDevice) == cudaSuccess;
  }
  std::vector<float> get() const {
    std::vector<float> values(count, -12345.f);
    if (cudaMemcpy(values.data(), ptr, count * sizeof(float),
                   cudaMemcpyDeviceToHost) != cudaSuccess)
      values.assign(count, -12345.f);
    return values;
  }
};

/// Compares, printing the first difference.
bool same(const std::vector<float> &got, const std::vector<float> &want,
          const char *what) {
  for (size_t i = 0; i < want.size(); ++i)
    if (i >= got.size() || got[i] != want[i]) {
      std::fprintf(stderr, "%s: element %zu is %g, not %g\n", what, i,
                   i < got.size() ? double(got[i]) : -1.0, double(want[i]));
      return false;
    }
  return true;
}

std::vector<float> iota(size_t n, float start, float step = 1) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = start + step * float(i);
  return v;
}

#endif // WEFT_HAVE_NCCL

/// A communicator of one rank per device, as on a one-GPU machine: every
/// collective over one rank must still give the right numbers.
TEST(NcclTest, OneRankGroupsOnEachDevice) {
  SKIP_WITHOUT_DEVICES(1);
#ifdef WEFT_HAVE_NCCL
  Store store;
  ASSERT_GT(store.port, 0);
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(
      1,
      [&](int) {
        if (!ncclAvailable())
          return 2;
        auto client = connect(store.port);
        if (!client)
          return 2;
        int count = 0;
        cudaGetDeviceCount(&count);
        for (int device = 0; device < std::min(count, 8); ++device) {
          std::unique_ptr<Communicator> comm;
          if (failed(createNcclCommunicator(
                         *client, "single" + std::to_string(device), 0, 1,
                         device, 30s, comm),
                     "create"))
            return 3;
          if (comm->rank() != 0 || comm->size() != 1)
            return 4;
          // The test's buffers on the communicator's device (it set it).
          cudaSetDevice(device);
          const size_t n = 1000;
          DeviceBuffer a(n), b(n);
          if (!a.ptr || !b.ptr)
            return 5;
          // All-reduce over one rank: the identity.
          if (!a.put(iota(n, 1)) ||
              failed(comm->allReduceSum(a.ptr, n), "all-reduce") ||
              !same(a.get(), iota(n, 1), "all-reduce"))
            return 6;
          // All-gather and reduce-scatter over one rank: copies.
          if (!a.put(iota(n, -3, 0.5f)) || !b.put(std::vector<float>(n, 0)) ||
              failed(comm->allGather(a.ptr, n, b.ptr), "all-gather") ||
              !same(b.get(), iota(n, -3, 0.5f), "all-gather"))
            return 7;
          if (!a.put(iota(n, 7, 2)) || !b.put(std::vector<float>(n, 0)) ||
              failed(comm->reduceScatterSum(a.ptr, n, b.ptr),
                     "reduce-scatter") ||
              !same(b.get(), iota(n, 7, 2), "reduce-scatter"))
            return 8;
          // All-to-all over one rank: a copy too.
          if (!a.put(iota(n, 11, 3)) || !b.put(std::vector<float>(n, 0)) ||
              failed(comm->allToAll(a.ptr, n, b.ptr), "all-to-all") ||
              !same(b.get(), iota(n, 11, 3), "all-to-all"))
            return 15;
          // Broadcast from the only rank.
          if (!a.put(iota(n, 42)) ||
              failed(comm->broadcast(a.ptr, n, 0), "broadcast") ||
              !same(a.get(), iota(n, 42), "broadcast"))
            return 9;
          if (failed(comm->barrier(), "barrier"))
            return 10;
          // Collectives from another thread (a new thread has device 0
          // current, not this one) through CommThread.
          {
            CommThread thread(*comm);
            if (!a.put(iota(n, 5)))
              return 11;
            CommThread::Ticket t = thread.allReduceSum(a.ptr, n);
            if (failed(thread.wait(t), "CommThread all-reduce") ||
                !same(a.get(), iota(n, 5), "CommThread all-reduce"))
              return 11;
          }
          // Errors: a root outside the group; a host pointer.
          Status s = comm->broadcast(a.ptr, n, 1);
          if (s.ok() || !contains(s.message, "root 1"))
            return 12;
          std::vector<float> host(n, 1);
          s = comm->allReduceSum(host.data(), n);
          if (s.ok() || !contains(s.message, "device pointers"))
            return 13;
          std::fprintf(stderr, "host pointer: %s\n", s.message.c_str());
          // Refusing the host pointer did not abort the communicator.
          if (failed(comm->barrier(), "barrier after an error"))
            return 14;
          // Send and recv: the only rank is not a peer of its own.
          s = comm->send(a.ptr, n, 0, 1);
          if (s.ok() || !contains(s.message, "cannot send to or receive "
                                             "from itself"))
            return 16;
          s = comm->recv(a.ptr, n, 1, 1);
          if (s.ok() || !contains(s.message, "rank 1 is not in the group"))
            return 17;
        }
        return 0;
      },
      &errs);
  EXPECT_EQ(codes[0], 0) << joined(errs);
#endif
}

/// Two ranks on devices 0 and 1 with rank-dependent data.
TEST(NcclTest, TwoRanksOnTwoDevices) {
  SKIP_WITHOUT_DEVICES(2);
#ifdef WEFT_HAVE_NCCL
  Store store;
  ASSERT_GT(store.port, 0);
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(
      2,
      [&](int rank) {
        auto client = connect(store.port);
        if (!client)
          return 2;
        std::unique_ptr<Communicator> comm;
        if (failed(createNcclCommunicator(*client, "dp", rank, 2, rank, 30s,
                                          comm),
                   "create"))
          return 3;
        if (comm->rank() != rank || comm->size() != 2)
          return 4;
        cudaSetDevice(rank);
        const size_t n = 4097; // Odd, and more than one NCCL chunk of work.
        float r = float(rank);
        DeviceBuffer a(2 * n), b(2 * n), c(n);
        if (!a.ptr || !b.ptr || !c.ptr)
          return 5;
        // All-reduce: (r + 1) * (i + 1) summed over ranks 0 and 1.
        DeviceBuffer x(n);
        if (!x.put(iota(n, r + 1, r + 1)) ||
            failed(comm->allReduceSum(x.ptr, n), "all-reduce") ||
            !same(x.get(), iota(n, 3, 3), "all-reduce"))
          return 6;
        // All-gather: rank 0's 0.. then rank 1's 10000...
        std::vector<float> gathered = iota(n, 0);
        std::vector<float> second = iota(n, 10000);
        gathered.insert(gathered.end(), second.begin(), second.end());
        if (!c.put(iota(n, 10000 * r)) ||
            failed(comm->allGather(c.ptr, n, b.ptr), "all-gather") ||
            !same(b.get(), gathered, "all-gather"))
          return 7;
        // Reduce-scatter: in[j] = (r + 1) * j + 100 r over 2n; rank r keeps
        // block r of the sum, 3 j + 100 for j in [r n, (r + 1) n).
        if (!a.put(iota(2 * n, 100 * r, r + 1)) ||
            failed(comm->reduceScatterSum(a.ptr, n, c.ptr),
                   "reduce-scatter") ||
            !same(c.get(), iota(n, 3 * r * float(n) + 100, 3),
                  "reduce-scatter"))
          return 8;
        // All-to-all: block g of rank q (10000 q + g n + i) goes to rank g;
        // rank r gets block r of rank 0, then block r of rank 1.
        std::vector<float> exchanged = iota(n, r * float(n));
        std::vector<float> fromOne = iota(n, 10000 + r * float(n));
        exchanged.insert(exchanged.end(), fromOne.begin(), fromOne.end());
        if (!a.put(iota(2 * n, 10000 * r)) ||
            failed(comm->allToAll(a.ptr, n, b.ptr), "all-to-all") ||
            !same(b.get(), exchanged, "all-to-all"))
          return 12;
        // Broadcast from rank 1.
        if (!x.put(rank == 1 ? iota(n, 7) : std::vector<float>(n, -1)) ||
            failed(comm->broadcast(x.ptr, n, 1), "broadcast") ||
            !same(x.get(), iota(n, 7), "broadcast"))
          return 9;
        if (failed(comm->barrier(), "barrier"))
          return 10;
        // Send and recv: rank 0 sends to rank 1, which returns it; then a
        // send of n meets a recv of n - 1 (an error on both ranks, naming
        // both sizes) and a recv whose tag is not the send's (NCCL has no
        // tags: an error naming both), and the communicator still works.
        int peer = 1 - rank;
        if (rank == 0) {
          if (!x.put(iota(n, 3)) ||
              failed(comm->send(x.ptr, n, peer, 7), "send") ||
              !x.put(std::vector<float>(n, 0)) ||
              failed(comm->recv(x.ptr, n, peer, 8), "recv") ||
              !same(x.get(), iota(n, 3), "send and recv"))
            return 13;
        } else if (failed(comm->recv(x.ptr, n, peer, 7), "recv") ||
                   failed(comm->send(x.ptr, n, peer, 8), "send")) {
          return 13;
        }
        Status sizes = rank == 0 ? comm->send(x.ptr, n, peer, 9)
                                 : comm->recv(x.ptr, n - 1, peer, 9);
        if (sizes.ok() ||
            !contains(sizes.message,
                      rank == 0 ? "receives 16384 bytes" : "sends 16388 bytes"))
          return 14;
        Status tags = rank == 0 ? comm->send(x.ptr, n, peer, 10)
                                : comm->recv(x.ptr, n, peer, 11);
        if (tags.ok() ||
            !contains(tags.message, rank == 0 ? "has tag 11" : "has tag 10"))
          return 15;
        if (failed(comm->barrier(), "barrier after the mismatches"))
          return 16;
        // Through CommThread, as generated code issues them.
        CommThread thread(*comm);
        if (!x.put(iota(n, r)))
          return 11;
        CommThread::Ticket t1 = thread.allReduceSum(x.ptr, n);
        CommThread::Ticket t2 = thread.allGather(c.ptr, n, b.ptr);
        (void)t1;
        if (failed(thread.wait(t2), "CommThread") ||
            !same(x.get(), iota(n, 1, 2), "CommThread all-reduce"))
          return 11;
        return 0;
      },
      &errs);
  EXPECT_EQ(codes, (std::vector<int>{0, 0})) << joined(errs);
#endif
}

#ifdef WEFT_HAVE_NCCL
/// DeviceQueue as a --target cuda step uses it, on `ranks` ranks (one per
/// device): what the step stream queued before follow() is what the
/// collective reads, and what it queues after join() reads the result,
/// with no wait on the host in between; finish() then waits for all.
int queuedCollectives(int rank, int ranks, int port) {
  auto client = connect(port);
  if (!client)
    return 2;
  std::unique_ptr<Communicator> comm;
  if (failed(createNcclCommunicator(*client, "queued", rank, ranks, rank, 30s,
                                    comm),
             "create"))
    return 3;
  DeviceQueue *queue = comm->deviceQueue();
  if (!queue)
    return 4;
  cudaSetDevice(rank);
  cudaStream_t step = nullptr;
  if (cudaStreamCreateWithFlags(&step, cudaStreamNonBlocking) != cudaSuccess)
    return 5;
  const size_t n = 1 << 20; // Long enough that a missing order shows.
  float r = float(rank), sumOfRanks = float(ranks * (ranks - 1) / 2);
  DeviceBuffer in(n), out(n), seen(n), gathered(n * size_t(ranks));
  if (!in.ptr || !out.ptr || !seen.ptr || !gathered.ptr)
    return 5;
  // The step writes `in` (r + 1 everywhere) just before following.
  if (!in.put(std::vector<float>(n, -1000)) ||
      !out.put(std::vector<float>(n, 0)))
    return 6;
  std::vector<float> ones(n, r + 1);
  cudaMemcpyAsync(in.ptr, ones.data(), n * sizeof(float),
                  cudaMemcpyHostToDevice, step);
  if (failed(queue->follow(step), "follow") ||
      failed(queue->queueAllReduceSum(in.ptr, out.ptr, n),
             "queued all-reduce") ||
      failed(queue->queueAllGather(in.ptr, n, gathered.ptr),
             "queued all-gather") ||
      failed(queue->join(step), "join"))
    return 7;
  // The step reads the result right after joining.
  cudaMemcpyAsync(seen.ptr, out.ptr, n * sizeof(float),
                  cudaMemcpyDeviceToDevice, step);
  if (failed(queue->finish(), "finish") ||
      cudaStreamSynchronize(step) != cudaSuccess)
    return 8;
  float total = float(ranks) + sumOfRanks; // sum over q of (q + 1)
  if (!same(seen.get(), std::vector<float>(n, total), "queued all-reduce"))
    return 9;
  std::vector<float> want;
  for (int q = 0; q < ranks; ++q)
    want.insert(want.end(), n, float(q + 1));
  if (!same(gathered.get(), want, "queued all-gather"))
    return 10;
  // Reduce-scatter and all-to-all, queued back to back.
  DeviceBuffer blocks(n * size_t(ranks)), mine(n), swapped(n * size_t(ranks));
  if (!blocks.put(iota(n * size_t(ranks), 10 * r)))
    return 11;
  if (failed(queue->follow(step), "follow") ||
      failed(queue->queueReduceScatterSum(blocks.ptr, n, mine.ptr),
             "queued reduce-scatter") ||
      failed(queue->queueAllToAll(blocks.ptr, n, swapped.ptr),
             "queued all-to-all") ||
      failed(queue->join(step), "join") || failed(queue->finish(), "finish") ||
      cudaStreamSynchronize(step) != cudaSuccess)
    return 12;
  std::vector<float> sum(n), exchanged;
  for (size_t i = 0; i < n; ++i)
    sum[i] = float(ranks) * float(size_t(rank) * n + i) + 10 * sumOfRanks;
  if (!same(mine.get(), sum, "queued reduce-scatter"))
    return 13;
  for (int q = 0; q < ranks; ++q) {
    std::vector<float> block = iota(n, 10 * float(q) + r * float(n));
    exchanged.insert(exchanged.end(), block.begin(), block.end());
  }
  if (!same(swapped.get(), exchanged, "queued all-to-all"))
    return 14;
  cudaStreamDestroy(step);
  return 0;
}
#endif // WEFT_HAVE_NCCL

TEST(NcclTest, QueuedCollectivesFollowAndJoinTheStepStream) {
  SKIP_WITHOUT_DEVICES(1);
#ifdef WEFT_HAVE_NCCL
  for (int ranks : {1, 2}) {
    if (ranks > usableDevices())
      continue;
    Store store;
    ASSERT_GT(store.port, 0);
    std::vector<std::string> errs;
    int port = store.port;
    std::vector<int> codes = runRanks(
        ranks, [&](int rank) { return queuedCollectives(rank, ranks, port); },
        &errs);
    EXPECT_EQ(codes, std::vector<int>(size_t(ranks), 0))
        << ranks << " ranks: " << joined(errs);
  }
#endif
}

/// A rank alone in a group of two: rank 0 times out in NCCL's
/// initialisation, rank 1 waiting for rank 0's id; both with a message
/// instead of a hang.
TEST(NcclTest, AMissingRankTimesOut) {
  SKIP_WITHOUT_DEVICES(1);
#ifdef WEFT_HAVE_NCCL
  for (int alone : {0, 1}) {
    Store store;
    ASSERT_GT(store.port, 0);
    std::vector<std::string> errs;
    std::vector<int> codes = runRanks(
        1,
        [&](int) {
          auto client = connect(store.port);
          if (!client)
            return 2;
          std::unique_ptr<Communicator> comm;
          Status s = createNcclCommunicator(*client, "lonely", alone, 2, 0,
                                            3s, comm);
          if (s.ok())
            return 3;
          std::fprintf(stderr, "%s\n", s.message.c_str());
          return 0;
        },
        &errs);
    ASSERT_EQ(codes[0], 0) << joined(errs);
    EXPECT_TRUE(contains(errs[0], "rank " + std::to_string(alone) + " of 2"))
        << errs[0];
    if (alone == 0)
      EXPECT_TRUE(contains(errs[0], "did not complete within 3000 ms"))
          << errs[0];
    else
      EXPECT_TRUE(contains(errs[0], "no NCCL unique id from rank 0"))
          << errs[0];
  }
#endif
}

} // namespace
