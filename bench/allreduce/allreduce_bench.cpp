//===- allreduce_bench.cpp - Flat against hierarchical all-reduce ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// One rank of the all-reduce benchmark (bench/allreduce.sh starts it under
// weftrun on emulated nodes): joins a flat and a hierarchical gloo group
// through rank 0's store, all-reduces the same buffer with each, and rank 0
// prints the median time of each and their ratio. Then the groups of ranks
// with the same local rank, one per node (data parallelism's groups when
// tensor parallelism fills a node), all cross the slow link at once with a
// reduce-scatter, an all-gather and an all-reduce that each send M MiB per
// rank, and rank 0 prints their medians: the ZeRO step's two halves against
// the all-reduce they replace.
//
//   allreduce_bench --host ADDR [--mib M] [--iters K]
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Collectives.h"
#include "weft/Runtime/Context.h"
#include "weft/Runtime/Rendezvous.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

using namespace weft::rt;
using Clock = std::chrono::steady_clock;

namespace {
int fail(const std::string &message) {
  std::fprintf(stderr, "allreduce_bench: error: %s\n", message.c_str());
  return 1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
/// Times `call` `iters` times after a warm-up call (which sets up
/// connections), each after `prepare` and a barrier of `world`, into
/// `times`.
Status timeCalls(Communicator &world, int iters,
                 const std::function<void()> &prepare,
                 const std::function<Status()> &call,
                 std::vector<double> &times) {
  for (int k = 0; k <= iters; ++k) {
    prepare();
    if (Status s = world.barrier(); !s.ok())
      return s;
    auto t0 = Clock::now();
    if (Status s = call(); !s.ok())
      return s;
    if (k > 0)
      times.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return Status::success();
}

/// Times each of the cross-node groups' collectives `iters` times, all
/// groups at once (`world`: every rank); rank 0 prints the medians.
Status crossNodeGroups(StoreClient &store, Communicator &world,
                       const LaunchInfo &launch, const std::string &host,
                       std::chrono::milliseconds timeout, double mib,
                       int iters) {
  int local = launch.rank % launch.localWorldSize;
  int node = launch.rank / launch.localWorldSize;
  int nodes = launch.worldSize / launch.localWorldSize;
  if (nodes < 2)
    return Status::error("needs ranks on 2 or more nodes");
  std::unique_ptr<Communicator> group;
  if (Status s = createGlooCommunicator(store, "across" + std::to_string(local),
                                        node, nodes, host, timeout, group);
      !s.ok())
    return s;
  // Each rank sends `count` floats in each: the reduce-scatter's and the
  // all-gather's blocks are `count` (n - 1 of them pass, over n = 2 one),
  // and an all-reduce of n count / 2 sends half of it in each phase.
  size_t n = size_t(nodes);
  size_t count = size_t(mib * 1048576.0 / sizeof(float)) / (n - 1);
  std::vector<float> in(n * count), out(n * count);
  struct Kind {
    const char *name;
    std::function<Status()> run;
    std::vector<double> times;
  } kinds[] = {
      {"reduce-scatter",
       [&] { return group->reduceScatterSum(in.data(), count, out.data()); },
       {}},
      {"all-gather",
       [&] { return group->allGather(in.data(), count, out.data()); },
       {}},
      {"all-reduce",
       [&] { return group->allReduceSum(out.data(), count * n / 2); },
       {}},
  };
  for (Kind &kind : kinds)
    if (Status s = timeCalls(
            world, iters,
            [&] { std::fill(in.begin(), in.end(), float(node + 1)); }, kind.run,
            kind.times);
        !s.ok())
      return Status::error(std::string(kind.name) + ": " + s.message);
  // Every block of the reduce-scatter is the sum over nodes of (node + 1).
  if (Status s = group->reduceScatterSum(in.data(), count, out.data());
      !s.ok() || out[0] != float(n * (n + 1) / 2) ||
      out[count - 1] != float(n * (n + 1) / 2))
    return Status::error("wrong reduce-scatter sum");
  if (launch.rank == 0)
    std::printf("%zu groups of %zu ranks across the nodes, all at once, "
                "%.2f MiB sent per rank: reduce-scatter %.3f s, all-gather "
                "%.3f s, all-reduce %.3f s (median of %d)\n",
                size_t(launch.localWorldSize), n, mib, median(kinds[0].times),
                median(kinds[1].times), median(kinds[2].times), iters);
  return Status::success();
}
} // namespace

int main(int argc, char **argv) {
  std::string host;
  double mib = 16;
  int iters = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--host"))
      host = argv[i + 1];
    else if (!std::strcmp(argv[i], "--mib"))
      mib = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--iters"))
      iters = std::atoi(argv[i + 1]);
    else
      return fail(std::string("unknown flag ") + argv[i]);
  }
  if (host.empty() || mib <= 0 || iters < 1)
    return fail("usage: allreduce_bench --host ADDR [--mib M] [--iters K]");
  LaunchInfo launch;
  if (Status s =
          readLaunchInfo([](const char *n) { return std::getenv(n); }, launch);
      !s.ok())
    return fail(s.message);

  std::unique_ptr<StoreServer> server;
  if (launch.rank == 0)
    if (Status s =
            StoreServer::start(launch.masterAddr, launch.masterPort, server);
        !s.ok())
      return fail(s.message);
  std::unique_ptr<StoreClient> store;
  if (Status s = StoreClient::connect(launch.masterAddr, launch.masterPort,
                                      std::chrono::seconds(30), store);
      !s.ok())
    return fail(s.message);
  auto timeout = std::chrono::seconds(60);
  std::unique_ptr<Communicator> flat, hier;
  if (Status s = createGlooCommunicator(*store, "flat", launch.rank,
                                        launch.worldSize, host, timeout, flat);
      !s.ok())
    return fail(s.message);
  if (Status s = createHierarchicalCommunicator(
          *store, "hier", launch.rank, launch.worldSize, launch.localWorldSize,
          host, timeout, hier);
      !s.ok())
    return fail(s.message);

  size_t count = size_t(mib * 1048576.0 / sizeof(float));
  std::vector<float> data(count);
  auto time = [&](Communicator &comm, std::vector<double> &out) -> Status {
    return timeCalls(
        comm, iters,
        [&] { std::fill(data.begin(), data.end(), float(launch.rank + 1)); },
        [&]() -> Status {
          if (Status s = comm.allReduceSum(data.data(), count); !s.ok())
            return s;
          // Every element is the sum over ranks of (rank + 1).
          float expected = float(launch.worldSize * (launch.worldSize + 1) / 2);
          if (data[0] != expected || data[count - 1] != expected)
            return Status::error("wrong sum");
          return Status::success();
        },
        out);
  };
  std::vector<double> flatTimes, hierTimes;
  if (Status s = time(*flat, flatTimes); !s.ok())
    return fail("flat: " + s.message);
  if (Status s = time(*hier, hierTimes); !s.ok())
    return fail("hierarchical: " + s.message);
  if (Status s =
          crossNodeGroups(*store, *flat, launch, host, timeout, mib, iters);
      !s.ok())
    return fail("groups across nodes: " + s.message);
  if (launch.rank == 0) {
    double f = median(flatTimes), h = median(hierTimes);
    std::printf("all-reduce of %.0f MiB over %d ranks (%d per node): flat "
                "%.3f s, hierarchical %.3f s (median of %d); hierarchical / "
                "flat = %.2f\n",
                mib, launch.worldSize, launch.localWorldSize, f, h, iters,
                h / f);
  }
  return 0;
}
