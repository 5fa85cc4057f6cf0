//===- ContextTest.cpp - Launch environment and thread pool ---------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Context.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <string>

using namespace weft::rt;

namespace {

Status launchFrom(const std::map<std::string, std::string> &env,
                  LaunchInfo &info) {
  return readLaunchInfo(
      [&](const char *name) -> const char * {
        auto it = env.find(name);
        return it == env.end() ? nullptr : it->second.c_str();
      },
      info);
}

TEST(LaunchInfoTest, NoLauncherIsOneProcess) {
  LaunchInfo info;
  ASSERT_TRUE(launchFrom({}, info).ok());
  EXPECT_EQ(info.rank, 0);
  EXPECT_EQ(info.worldSize, 1);
  EXPECT_EQ(info.localRank, 0);
  EXPECT_EQ(info.localWorldSize, 1);
  EXPECT_EQ(info.launcher, "");
}

TEST(LaunchInfoTest, ReadsTorchrunFirst) {
  LaunchInfo info;
  Status s = launchFrom({{"RANK", "3"},
                         {"WORLD_SIZE", "4"},
                         {"LOCAL_RANK", "1"},
                         {"LOCAL_WORLD_SIZE", "2"},
                         {"MASTER_ADDR", "node0"},
                         {"OMPI_COMM_WORLD_RANK", "0"},
                         {"OMPI_COMM_WORLD_SIZE", "8"}},
                        info);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(info.launcher, "torchrun");
  EXPECT_EQ(info.rank, 3);
  EXPECT_EQ(info.worldSize, 4);
  EXPECT_EQ(info.localRank, 1);
  EXPECT_EQ(info.localWorldSize, 2);
}

TEST(LaunchInfoTest, ReadsOpenMpiAndSlurm) {
  LaunchInfo info;
  ASSERT_TRUE(launchFrom({{"OMPI_COMM_WORLD_RANK", "5"},
                          {"OMPI_COMM_WORLD_SIZE", "8"},
                          {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                          {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                          {"MASTER_ADDR", "node0"}},
                         info)
                  .ok());
  EXPECT_EQ(info.launcher, "OpenMPI");
  EXPECT_EQ(info.rank, 5);
  EXPECT_EQ(info.localWorldSize, 4);
  // Slurm's per-node count may be a pattern on uneven allocations; then the
  // node's share is unknown and the world stands in for it.
  ASSERT_TRUE(launchFrom({{"SLURM_PROCID", "2"},
                          {"SLURM_NTASKS", "6"},
                          {"SLURM_LOCALID", "0"},
                          {"SLURM_NTASKS_PER_NODE", "2(x3)"}},
                         info)
                  .ok());
  EXPECT_EQ(info.launcher, "Slurm");
  EXPECT_EQ(info.rank, 2);
  EXPECT_EQ(info.worldSize, 6);
  EXPECT_EQ(info.localWorldSize, 6);
}

TEST(LaunchInfoTest, BadValuesNameTheVariable) {
  auto error = [](const std::map<std::string, std::string> &env) {
    LaunchInfo info;
    Status s = launchFrom(env, info);
    EXPECT_FALSE(s.ok());
    return s.message;
  };
  EXPECT_EQ(error({{"RANK", "x"}, {"WORLD_SIZE", "2"}}),
            "RANK='x' must be an integer >= 0");
  EXPECT_EQ(error({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}),
            "RANK='-1' must be an integer >= 0");
  EXPECT_EQ(error({{"RANK", "0"}, {"WORLD_SIZE", "0"}}),
            "WORLD_SIZE='0' must be an integer >= 1");
  EXPECT_EQ(error({{"RANK", "0"}, {"WORLD_SIZE", "99999999999"}}),
            "WORLD_SIZE='99999999999' must be an integer >= 1");
  EXPECT_EQ(error({{"RANK", "2"}, {"WORLD_SIZE", "2"}}),
            "RANK=2 is outside WORLD_SIZE=2");
  EXPECT_NE(error({{"RANK", "0"}}).find("RANK is set but WORLD_SIZE is not"),
            std::string::npos);
  EXPECT_EQ(error({{"RANK", "0"},
                   {"WORLD_SIZE", "2"},
                   {"LOCAL_RANK", "2"},
                   {"LOCAL_WORLD_SIZE", "2"}}),
            "LOCAL_RANK=2 and LOCAL_WORLD_SIZE=2 do not fit WORLD_SIZE=2");
}

TEST(LaunchInfoTest, FindsRankZero) {
  LaunchInfo info;
  ASSERT_TRUE(launchFrom({}, info).ok());
  EXPECT_EQ(info.masterAddr, "127.0.0.1");
  EXPECT_EQ(info.masterPort, 29500);
  ASSERT_TRUE(launchFrom({{"RANK", "1"},
                          {"WORLD_SIZE", "2"},
                          {"MASTER_ADDR", "10.1.2.3"},
                          {"MASTER_PORT", "1234"}},
                         info)
                  .ok());
  EXPECT_EQ(info.masterAddr, "10.1.2.3");
  EXPECT_EQ(info.masterPort, 1234);
  ASSERT_TRUE(launchFrom({{"SLURM_PROCID", "3"},
                          {"SLURM_NTASKS", "8"},
                          {"SLURM_LOCALID", "1"},
                          {"SLURM_NTASKS_PER_NODE", "4"},
                          {"SLURM_JOB_NODELIST", "gpu[07-08,12],login"}},
                         info)
                  .ok());
  EXPECT_EQ(info.masterAddr, "gpu07");
  EXPECT_EQ(firstSlurmHost("a,b"), "a");
  EXPECT_EQ(firstSlurmHost("node5"), "node5");
  EXPECT_EQ(firstSlurmHost("n[3]"), "n3");
  // Ranks on several nodes need to be told where rank 0 is.
  Status s = launchFrom({{"OMPI_COMM_WORLD_RANK", "0"},
                         {"OMPI_COMM_WORLD_SIZE", "4"},
                         {"OMPI_COMM_WORLD_LOCAL_RANK", "0"},
                         {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}},
                        info);
  EXPECT_NE(s.message.find("4 ranks span several nodes (2 on this one), but "
                           "MASTER_ADDR is not set"),
            std::string::npos)
      << s.message;
  s = launchFrom({{"MASTER_PORT", "70000"}}, info);
  EXPECT_EQ(s.message, "MASTER_PORT='70000' must be a port number in [1, "
                       "65535]");
}

TEST(LaunchInfoTest, PeerAddress) {
  LaunchInfo info;
  // Every rank on this node: loopback.
  info.worldSize = 4;
  info.localWorldSize = 4;
  EXPECT_EQ(peerAddress(info), "127.0.0.1");
  // Ranks on several nodes: the interface GLOO_SOCKET_IFNAME names, even
  // loopback (the user said so).
  info.localWorldSize = 2;
  ::setenv("GLOO_SOCKET_IFNAME", "lo", 1);
  EXPECT_EQ(peerAddress(info), "127.0.0.1");
  ::unsetenv("GLOO_SOCKET_IFNAME");
  // Otherwise never empty (the route to MASTER_ADDR, an interface's
  // address or the host's name).
  info.masterAddr = "127.0.0.1";
  EXPECT_FALSE(peerAddress(info).empty());
}

TEST(ThreadPoolTest, CallsEveryIndexOnce) {
  for (int threads : {1, 2, 4}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 1000}) {
      std::vector<std::atomic<int>> calls(n);
      pool.parallelFor(
          n,
          [](void *arg, int64_t i) {
            (*static_cast<std::vector<std::atomic<int>> *>(arg))[i]++;
          },
          &calls);
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(calls[i].load(), 1)
            << "index " << i << " of " << n << " with " << threads
            << " threads";
    }
  }
}

TEST(ThreadPoolTest, RunsOnSeveralThreads) {
  ThreadPool pool(4);
  std::mutex mutex;
  std::set<std::thread::id> ids;
  struct Arg {
    std::mutex *mutex;
    std::set<std::thread::id> *ids;
  } arg{&mutex, &ids};
  // Enough slow iterations that the workers take some.
  pool.parallelFor(
      64,
      [](void *p, int64_t) {
        auto *a = static_cast<Arg *>(p);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        std::lock_guard<std::mutex> lock(*a->mutex);
        a->ids->insert(std::this_thread::get_id());
      },
      &arg);
  EXPECT_GT(ids.size(), 1u);
}

TEST(RuntimeContextTest, OneGpuPerLocalRank) {
  // Eight ranks on a node of eight GPUs each take their own; a launcher
  // that shows each process one GPU (CUDA_VISIBLE_DEVICES) gets device 0.
  for (int rank = 0; rank < 8; ++rank) {
    EXPECT_EQ(cudaDeviceForLocalRank(rank, 8), rank);
    EXPECT_EQ(cudaDeviceForLocalRank(rank, 1), 0);
  }
  EXPECT_EQ(cudaDeviceForLocalRank(5, 4), 1);
  // No device: device 0, whose initialization says what is missing.
  EXPECT_EQ(cudaDeviceForLocalRank(3, 0), 0);
}

TEST(RuntimeContextTest, FillsTheAbiStruct) {
  LaunchInfo launch;
  RuntimeContext context(launch, 3);
  const WeftRuntimeContext *c = context.get();
  EXPECT_EQ(c->abiVersion, uint32_t(WEFT_MODEL_ABI_VERSION));
  EXPECT_EQ(c->rank, 0);
  EXPECT_EQ(c->worldSize, 1);
  EXPECT_EQ(c->numAxes, 0);
  EXPECT_EQ(c->deviceType, WEFT_DEVICE_CPU);
  EXPECT_EQ(c->numThreads, 3);
  ASSERT_NE(c->parallelFor, nullptr);
  std::atomic<int64_t> sum{0};
  c->parallelFor(
      c->threadPool, 100,
      [](void *arg, int64_t i) { *static_cast<std::atomic<int64_t> *>(arg) += i; },
      &sum);
  EXPECT_EQ(sum.load(), 4950);
}

} // namespace
