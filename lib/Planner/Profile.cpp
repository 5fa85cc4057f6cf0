//===- Profile.cpp - Measure a machine into a cluster spec ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/Profile.h"

#include "weft/Planner/CostModel.h"
#include "weft/Runtime/Collectives.h"
#include "weft/Runtime/Context.h"
#include "weft/Runtime/Kernels.h"
#include "weft/Runtime/Rendezvous.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>
#include <unistd.h>

namespace weft {
namespace planner {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

std::string fmt(const char *format, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof(buf), format, a, b, c);
  return buf;
}

void say(const ProfileOptions &o, const std::string &line) {
  if (o.progress)
    o.progress(line);
}

/// Seconds per call of `fn`, the best of `reps` batches each at least
/// `minSeconds` long: the best, because interference from other processes
/// on a shared host only ever makes a run slower.
template <typename Fn> double bestSeconds(Fn fn, int reps, double minSeconds) {
  fn(); // Warm-up: page faults, the BLAS's buffers, caches.
  double best = INFINITY;
  for (int r = 0; r < reps; ++r) {
    int calls = 0;
    Clock::time_point t0 = Clock::now();
    do {
      fn();
      ++calls;
    } while (since(t0) < minSeconds);
    best = std::min(best, since(t0) / calls);
  }
  return best;
}

/// Square sizes per shape class: each inside its class's FLOP range
/// (CostModel's gemmShapeClass), and the large one big enough that OpenBLAS
/// reaches its plateau. Quick sizes stay in their classes too (a large
/// product is at least 1025 wide), so a quick spec is smaller but not
/// mislabelled.
struct ShapeSize {
  const char *cls;
  int64_t full, quick;
};
constexpr ShapeSize kShapes[] = {
    {"small", 128, 32}, {"medium", 512, 288}, {"large", 2048, 1056}};

/// Four significant digits: more would only write down the noise.
double round4(double v) {
  if (!(v > 0))
    return v;
  double scale = std::pow(10.0, 3 - std::floor(std::log10(v)));
  return std::round(v * scale) / scale;
}

uint16_t toBF16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return uint16_t(bits >> 16);
}

} // namespace

Status measureGemms(const ProfileOptions &o, ProfileResult &result) {
  // The products an executable runs: the runtime's GEMMs (oneDNN where it
  // loads, else OpenBLAS; bf16 through the bf16 library the runtime
  // finds), each rank's on its own core.
  weft_rt_set_gemm_threads(1);
  say(o, std::string("gemm library: ") + weft_rt_gemm_library());
  double minSeconds = o.quick ? 0.01 : 0.3;
  int reps = o.quick ? 1 : 3;
  for (const ShapeSize &shape : kShapes) {
    int64_t n = o.quick ? shape.quick : shape.full;
    // Distinct non-trivial values: denormals or zeros would take other
    // paths in some kernels.
    std::vector<float> a(n * n), b(n * n), c(n * n);
    for (int64_t i = 0; i < n * n; ++i) {
      a[i] = float((i * 7) % 13) / 13.0f - 0.5f;
      b[i] = float((i * 11) % 17) / 17.0f - 0.5f;
    }
    double flops = 2.0 * double(n) * double(n) * double(n);
    double s = bestSeconds(
        [&] {
          weft_rt_sgemm(1, 0, 0, n, n, n, a.data(), n, 0, b.data(), n, 0,
                        c.data(), n, 0);
        },
        reps, minSeconds);
    result.gemms.push_back({"fp32", shape.cls, n, n, n, flops / s * 1e-9});
    say(o, fmt("gemm fp32 %.0f^3: %.1f GFLOP/s", double(n), flops / s * 1e-9));
    std::vector<uint16_t> ah(n * n), bh(n * n);
    for (int64_t i = 0; i < n * n; ++i) {
      ah[i] = toBF16(a[i]);
      bh[i] = toBF16(b[i]);
    }
    double sb = bestSeconds(
        [&] {
          weft_rt_sbgemm(1, 0, 0, n, n, n, ah.data(), n, 0, bh.data(), n, 0,
                         c.data(), n, 0);
        },
        reps, minSeconds);
    result.gemms.push_back({"bf16", shape.cls, n, n, n, flops / sb * 1e-9});
    say(o, fmt("gemm bf16 %.0f^3: %.1f GFLOP/s", double(n), flops / sb * 1e-9));
  }
  result.unmeasured["fp16"] =
      "Weft's CPU path has no fp16 matrix product; fp32's rate stands in";
  return Status::success();
}

Status measureHostMemory(const ProfileOptions &o, ProfileResult &result) {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kb = 0;
  while (in >> key >> kb) {
    if (key == "MemTotal:") {
      result.hostMemoryBytes = kb * 1024;
      say(o, fmt("host memory %.1f GB", result.hostMemoryBytes / 1e9));
      return Status::success();
    }
    in.ignore(1 << 10, '\n');
  }
  return Status::error("cannot read the host's memory from /proc/meminfo "
                       "(MemTotal); write the spec by hand from "
                       "examples/clusters/cpu-host.yaml");
}

Status measureLocalMachine(const ProfileOptions &o, ProfileResult &result) {
  for (auto step :
       {measureHostMemory, measureGemms, measureTriad, measureCollectives})
    if (Status s = step(o, result); !s.ok())
      return s;
  return Status::success();
}

Status measureTriad(const ProfileOptions &o, ProfileResult &result) {
  // 3 x 64 MB, twice a large server's last-level cache; quick: 3 x 8 MB.
  size_t n = o.quick ? (size_t(1) << 20) : (size_t(8) << 20);
  std::vector<double> a(n, 0.0), b(n, 1.0), c(n, 2.0);
  const double scalar = 3.0;
  double s = bestSeconds(
      [&] {
        double *pa = a.data();
        const double *pb = b.data(), *pc = c.data();
        for (size_t i = 0; i < n; ++i)
          pa[i] = pb[i] + scalar * pc[i];
      },
      o.quick ? 1 : 5, o.quick ? 0.01 : 0.2);
  if (a[n / 2] != 7.0)
    return Status::error("the triad computed " + std::to_string(a[n / 2]) +
                         " instead of 7: the measurement is broken");
  result.triadGBps = 3.0 * 8.0 * double(n) / s * 1e-9;
  say(o, fmt("memory triad %.0f MB: %.2f GB/s", 3.0 * 8.0 * double(n) / 1e6,
             result.triadGBps));
  return Status::success();
}

namespace {

/// Buffer sizes per collective in bytes (the cost model's count). 256 KiB
/// is the most a rank's part of a collective between ranks of one host
/// moves through shared memory (lib/Runtime/SharedMemory.h); 1 MiB goes
/// over TCP, so the table has both sides of that step.
std::vector<double> collectiveSizes(bool quick) {
  if (quick)
    return {4096, 65536};
  return {4096, 65536, 256 << 10, 1 << 20, 16 << 20};
}

/// Runs one rank of `comm`'s group: each of `collectives` at every size,
/// each timed as the fastest of five batches of back-to-back calls closed
/// by a barrier (so the slowest rank's finish is inside the time), after
/// an untimed batch. The fastest, not the median: on this 2-core host a
/// batch of small collectives now and then takes a stall of tens of
/// milliseconds (gloo's 4 KiB all-reduce, as the median of three batches,
/// came out 2.9, 3.3 and 0.3 ms in three profiles; all-gather and
/// reduce-scatter 0.1 ms), and one collective's unlucky median made it
/// look 10 times dearer than the others to the planner. Sizes up to
/// 256 KiB take the median of the single calls instead (below). The stalls
/// a step meets are device.collective_overhead_us's to carry, fitted from
/// a run (--from-metrics). A send/recv is a ping-pong of ranks 0 and 1 (the
/// others only meet at the barriers). Rank 0 records the times.
Status profileRank(rt::Communicator &comm, bool quick,
                   const std::vector<const char *> &collectives,
                   const std::vector<double> &sizes,
                   std::vector<CollectiveMeasurement> &out) {
  int rank = comm.rank(), group = comm.size();
  uint64_t tag = 0;
  for (const char *name : collectives) {
    bool p2p = std::strcmp(name, "send_recv") == 0;
    for (double bytes : sizes) {
      size_t total = size_t(bytes) / sizeof(float);
      size_t perRank = total / size_t(group);
      std::vector<float> in(total, 1.0f), outBuf(total, 0.0f);
      auto once = [&]() -> Status {
        std::string c = name;
        if (c == "all_reduce")
          return comm.allReduceSum(in.data(), total);
        if (c == "all_gather")
          return comm.allGather(in.data(), perRank, outBuf.data());
        if (c == "reduce_scatter")
          return comm.reduceScatterSum(in.data(), perRank, outBuf.data());
        // A ping-pong: two messages per call.
        ++tag;
        if (rank == 0) {
          if (Status s = comm.send(in.data(), total, 1, tag); !s.ok())
            return s;
          return comm.recv(outBuf.data(), total, 1, tag);
        }
        if (rank != 1)
          return Status::success();
        if (Status s = comm.recv(outBuf.data(), total, 0, tag); !s.ok())
          return s;
        return comm.send(in.data(), total, 0, tag);
      };
      int calls = quick                  ? 2
                  : bytes <= (256 << 10) ? 50
                  : bytes <= (1 << 20)   ? 10
                                         : 3;
      for (int i = 0; i < calls; ++i)
        if (Status s = once(); !s.ok())
          return s;
      // Small ones (what shared memory carries) are timed one by one:
      // their median. A call of microseconds, side by side with its peers,
      // now and then meets a 4 ms scheduler tick (a third thread woken on
      // a busy core), which puts 80 us into the mean of a batch of 50
      // calls (the shared-memory all-gather of 4 KiB measured 80 us as the
      // fastest batch and 1-2 us a call).
      bool perCall = bytes <= (256 << 10);
      // Seconds a call: each call's (perCall), else each batch's mean.
      std::vector<double> times;
      const double perTime = p2p ? 2 : 1;
      for (int b = 0; b < (quick ? 3 : 5); ++b) {
        if (Status s = comm.barrier(); !s.ok())
          return s;
        Clock::time_point t0 = Clock::now();
        for (int i = 0; i < calls; ++i) {
          Clock::time_point c0 = Clock::now();
          if (Status s = once(); !s.ok())
            return s;
          if (perCall)
            times.push_back(since(c0) / perTime);
        }
        if (Status s = comm.barrier(); !s.ok())
          return s;
        if (!perCall)
          times.push_back(since(t0) / calls / perTime);
      }
      double seconds;
      if (perCall) {
        std::nth_element(times.begin(), times.begin() + times.size() / 2,
                         times.end());
        seconds = times[times.size() / 2];
      } else {
        seconds = *std::min_element(times.begin(), times.end());
      }
      if (rank == 0)
        out.push_back({name, group, bytes, seconds * 1e6});
    }
  }
  return Status::success();
}

} // namespace

Status measureCollectives(const ProfileOptions &o, ProfileResult &result) {
  if (o.devices < 2)
    return Status::success();
  for (int group = 2; group <= o.devices; ++group) {
    std::unique_ptr<rt::StoreServer> server;
    if (Status s = rt::StoreServer::start("127.0.0.1", 0, server); !s.ok())
      return s;
    std::vector<CollectiveMeasurement> found;
    std::vector<Status> status(group, Status::success());
    std::vector<std::thread> ranks;
    for (int r = 0; r < group; ++r)
      ranks.emplace_back([&, r] {
        std::unique_ptr<rt::StoreClient> client;
        std::unique_ptr<rt::Communicator> comm;
        Status s =
            rt::StoreClient::connect("127.0.0.1", server->port(), 10s, client);
        if (s.ok())
          s = rt::createGlooCommunicator(*client,
                                         "profile" + std::to_string(group), r,
                                         group, "127.0.0.1", 60s, comm);
        std::vector<const char *> kinds = {"all_reduce", "all_gather",
                                           "reduce_scatter"};
        if (group == 2)
          kinds.push_back("send_recv");
        status[r] = s.ok() ? profileRank(*comm, o.quick, kinds,
                                         collectiveSizes(o.quick), found)
                           : s;
      });
    for (std::thread &t : ranks)
      t.join();
    for (int r = 0; r < group; ++r)
      if (!status[r].ok())
        return Status::error("profiling collectives of " +
                             std::to_string(group) +
                             " ranks on 127.0.0.1, "
                             "rank " +
                             std::to_string(r) + ": " + status[r].message);
    for (const CollectiveMeasurement &m : found) {
      say(o, m.collective + " " + std::to_string(group) + " ranks " +
                 fmt("%.0f bytes: %.1f us", m.bytes, m.us));
      result.collectives.push_back(m);
    }
  }
  return Status::success();
}

Status measureInterNode(const ProfileOptions &o,
                        const std::function<const char *(const char *)> &getenv,
                        ClusterSpec::Link &link, bool &measured,
                        int &worldSize) {
  measured = false;
  rt::LaunchInfo info;
  if (Status s = rt::readLaunchInfo(getenv, info); !s.ok())
    return s;
  worldSize = info.worldSize;
  if (info.worldSize < 2)
    return Status::error(
        "--inter-node measures the network between nodes: run one process "
        "on each of 2 or more nodes under a launcher (weftrun --nnodes 2 "
        "--nproc-per-node 1 --node-rank I --master-addr HOST "
        "weft-profile-cluster --inter-node ..., or torchrun, srun); this "
        "process is alone");
  if (info.localWorldSize != 1)
    return Status::error(
        "--inter-node runs one process per node, and the launcher started " +
        std::to_string(info.localWorldSize) +
        " on this one: use --nproc-per-node 1 (two processes of one node "
        "would measure that node's loopback)");
  auto timeout = std::chrono::milliseconds(60000);
  std::unique_ptr<rt::StoreServer> server;
  if (info.rank == 0)
    if (Status s = rt::StoreServer::start("0.0.0.0", info.masterPort, server);
        !s.ok())
      return s;
  std::unique_ptr<rt::StoreClient> client;
  if (Status s = rt::StoreClient::connect(info.masterAddr, info.masterPort,
                                          timeout, client);
      !s.ok())
    return s;
  std::unique_ptr<rt::Communicator> comm;
  if (Status s = rt::createGlooCommunicator(
          *client, "profile-inter-node", info.rank, info.worldSize,
          rt::peerAddress(info), timeout, comm);
      !s.ok())
    return s;
  say(o, "inter-node: send/recv between the first 2 of " +
             std::to_string(info.worldSize) + " nodes");
  std::vector<CollectiveMeasurement> found;
  // Even --quick needs a size large enough for the bandwidth to show.
  std::vector<double> sizes =
      o.quick ? std::vector<double>{1 << 20, 4 << 20} : collectiveSizes(false);
  if (Status s = profileRank(*comm, o.quick, {"send_recv"}, sizes, found);
      !s.ok())
    return s;
  for (const CollectiveMeasurement &m : found)
    say(o, fmt("inter-node send_recv %.0f bytes: %.1f us", m.bytes, m.us));
  if (info.rank != 0)
    return Status::success();
  double latency = 0, bandwidth = 0;
  if (!fitLink(found, latency, bandwidth))
    return Status::error("the inter-node send/recv times do not grow with "
                         "size, so no bandwidth fits them (a link this "
                         "fast is noise at these sizes); run without "
                         "--quick");
  link.bandwidthGBps = round4(bandwidth);
  link.latencyUs = round4(latency);
  measured = true;
  return Status::success();
}

bool fitLink(const std::vector<CollectiveMeasurement> &samples,
             double &latencyUs, double &bandwidthGBps) {
  std::vector<const CollectiveMeasurement *> p2p;
  for (const CollectiveMeasurement &m : samples)
    if (m.collective == "send_recv")
      p2p.push_back(&m);
  if (p2p.size() < 2)
    return false;
  double n = double(p2p.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const CollectiveMeasurement *m : p2p) {
    sx += m->bytes;
    sy += m->us;
    sxx += m->bytes * m->bytes;
    sxy += m->bytes * m->us;
  }
  double den = n * sxx - sx * sx;
  if (den <= 0)
    return false;
  double slope = (n * sxy - sx * sy) / den; // us per byte
  double intercept = (sy - slope * sx) / n;
  if (!(slope > 0))
    return false;
  bandwidthGBps = 1.0 / slope * 1e-3; // bytes/us -> GB/s
  latencyUs = std::max(0.0, intercept);
  return true;
}

ClusterSpec specFromProfile(const ProfileResult &r, const ProfileOptions &o,
                            const std::string &name) {
  ClusterSpec spec;
  spec.name = name;
  spec.nodes = 1;
  spec.devicesPerNode = o.devices;
  // An even share of the host, rounded down to 0.1 GB.
  spec.device.memoryGB =
      std::max(0.1, std::floor(r.hostMemoryBytes / o.devices / 1e8) / 10);
  std::map<std::string, double> best;
  for (const GemmMeasurement &g : r.gemms)
    best[g.dtype] = std::max(best[g.dtype], g.gflops);
  for (const char *dt : kClusterDTypes) {
    double peak = best.count(dt) ? best[dt] : best["fp32"];
    spec.device.peakTFLOPs[dt] = round4(peak * 1e-3);
  }
  for (const GemmMeasurement &g : r.gemms) {
    double e = g.gflops / best[g.dtype];
    spec.device.gemmEfficiency[g.dtype][g.shapeClass] =
        round4(std::min(1.0, std::max(e, 1e-6)));
  }
  if (r.triadGBps > 0)
    spec.device.memoryBandwidthGBps = round4(r.triadGBps);
  // A device here is a core: its collectives run on the cores that compute.
  spec.device.commOverlap = 0;
  double latency = 0, bandwidth = 0;
  if (!fitLink(r.collectives, latency, bandwidth)) {
    // One device (which never uses the link), or a --quick run without
    // enough sizes: the spec requires a link, so an assumed one, which
    // the spec's comment says is not measured.
    latency = 100;
    bandwidth = 1;
  }
  spec.intraNode = {round4(bandwidth), round4(latency)};
  spec.interNode = spec.intraNode;
  // Cores of one host share its network link, and the ranks run Weft's
  // gloo runtime.
  spec.interNode.sharedByNode = true;
  spec.collectiveLibrary = ClusterSpec::Library::Gloo;
  for (const CollectiveMeasurement &m : r.collectives)
    spec.collectives[m.collective].push_back({m.group, m.bytes, round4(m.us)});
  for (auto &[name, samples] : spec.collectives)
    std::stable_sort(samples.begin(), samples.end(),
                     [](const auto &a, const auto &b) {
                       return std::make_pair(a.group, a.bytes) <
                              std::make_pair(b.group, b.bytes);
                     });
  return spec;
}

namespace {
/// Shortest text that reads back as the same double.
std::string number(double v) {
  char buf[40];
  for (int digits = 6; digits <= 17; ++digits) {
    std::snprintf(buf, sizeof(buf), "%.*g", digits, v);
    if (std::strtod(buf, nullptr) == v)
      break;
  }
  return buf;
}
} // namespace

std::string
formatClusterSpec(const ClusterSpec &spec,
                  const std::map<std::string, std::string> &comments) {
  std::ostringstream os;
  auto comment = [&](const std::string &path, const std::string &indent) {
    auto it = comments.find(path);
    if (it == comments.end())
      return;
    std::istringstream lines(it->second);
    std::string line;
    while (std::getline(lines, line))
      os << indent << "# " << line << "\n";
  };
  comment("", "");
  os << "name: " << spec.name << "\n";
  os << "nodes: " << spec.nodes << "\n";
  os << "devices_per_node: " << spec.devicesPerNode << "\n";
  if (spec.collectiveLibrary == ClusterSpec::Library::Gloo) {
    comment("collective_library", "");
    os << "collective_library: gloo\n";
  }
  os << "device:\n";
  comment("device.memory_GB", "  ");
  os << "  memory_GB: " << number(spec.device.memoryGB) << "\n";
  if (spec.device.memoryBandwidthGBps > 0) {
    comment("device.memory_bandwidth_GBps", "  ");
    os << "  memory_bandwidth_GBps: " << number(spec.device.memoryBandwidthGBps)
       << "\n";
  }
  if (spec.device.cacheMB > 0) {
    comment("device.cache_MB", "  ");
    os << "  cache_MB: " << number(spec.device.cacheMB) << "\n";
    comment("device.cache_bandwidth_GBps", "  ");
    os << "  cache_bandwidth_GBps: " << number(spec.device.cacheBandwidthGBps)
       << "\n";
  }
  if (spec.device.updateBandwidthGBps > 0) {
    comment("device.update_bandwidth_GBps", "  ");
    os << "  update_bandwidth_GBps: " << number(spec.device.updateBandwidthGBps)
       << "\n";
  }
  if (spec.device.commOverlap != 1) {
    comment("device.comm_overlap", "  ");
    os << "  comm_overlap: " << number(spec.device.commOverlap) << "\n";
  }
  if (spec.device.collectiveOverheadUs != 0) {
    comment("device.collective_overhead_us", "  ");
    os << "  collective_overhead_us: "
       << number(spec.device.collectiveOverheadUs) << "\n";
  }
  if (spec.device.opOverheadUs != 0) {
    comment("device.op_overhead_us", "  ");
    os << "  op_overhead_us: " << number(spec.device.opOverheadUs) << "\n";
  }
  os << "  peak_TFLOPs:\n";
  for (const char *dt : kClusterDTypes) {
    comment(std::string("device.peak_TFLOPs.") + dt, "    ");
    os << "    " << dt << ": " << number(spec.device.peakTFLOPs.at(dt)) << "\n";
  }
  if (!spec.device.efficiency.empty()) {
    os << "  efficiency:\n";
    for (const char *dt : kClusterDTypes)
      if (spec.device.efficiency.count(dt)) {
        comment(std::string("device.efficiency.") + dt, "    ");
        os << "    " << dt << ": " << number(spec.device.efficiency.at(dt))
           << "\n";
      }
  }
  if (!spec.device.gemmEfficiency.empty()) {
    comment("device.gemm_efficiency", "  ");
    os << "  gemm_efficiency:\n";
    for (const char *dt : kClusterDTypes) {
      auto it = spec.device.gemmEfficiency.find(dt);
      if (it == spec.device.gemmEfficiency.end())
        continue;
      os << "    " << dt << ":";
      const char *sep = " {";
      for (const char *cls : kGemmShapeClasses)
        if (it->second.count(cls)) {
          os << sep << cls << ": " << number(it->second.at(cls));
          sep = ", ";
        }
      os << "}\n";
    }
  }
  for (auto [key, link] : {std::make_pair("intra_node", &spec.intraNode),
                           std::make_pair("inter_node", &spec.interNode)}) {
    comment(key, "");
    os << key << ":\n";
    os << "  bandwidth_GBps: " << number(link->bandwidthGBps) << "\n";
    os << "  latency_us: " << number(link->latencyUs) << "\n";
    if (link->sharedByNode)
      os << "  shared_by_node: true\n";
  }
  if (!spec.collectives.empty()) {
    comment("collectives", "");
    os << "collectives:\n";
    for (const char *name : kClusterCollectives) {
      auto it = spec.collectives.find(name);
      if (it == spec.collectives.end() || it->second.empty())
        continue;
      os << "  " << name << ":\n";
      for (const ClusterSpec::CollectiveSample &s : it->second)
        os << "    - {group: " << s.group << ", bytes: " << number(s.bytes)
           << ", us: " << number(s.us) << "}\n";
    }
  }
  return os.str();
}

//===----------------------------------------------------------------------===//
// Recalibration
//===----------------------------------------------------------------------===//

Status readRunMetrics(const std::string &text, const std::string &source,
                      RunMetrics &out) {
  out = RunMetrics();
  std::vector<double> times;
  std::istringstream lines(text);
  std::string line;
  int lineNo = 0;
  while (std::getline(lines, line)) {
    ++lineNo;
    if (line.find_first_not_of(" \t\r") == std::string::npos)
      continue;
    auto j = nlohmann::json::parse(line, nullptr, false);
    std::string where = source + ":" + std::to_string(lineNo);
    if (!j.is_object() || !j.contains("step_time_s") ||
        !j["step_time_s"].is_number())
      return Status::error(where + ": not a metrics line with a numeric "
                                   "step_time_s (write one with the "
                                   "executable's --metrics FILE)");
    ++out.steps;
    if (j.contains("skipped") && j["skipped"].is_boolean() &&
        j["skipped"].get<bool>())
      continue;
    times.push_back(j["step_time_s"].get<double>());
    if (j.contains("peak_rss_bytes") && j["peak_rss_bytes"].is_number())
      out.peakRssBytes =
          std::max(out.peakRssBytes, j["peak_rss_bytes"].get<double>());
    if (j.contains("baseline_rss_bytes") && j["baseline_rss_bytes"].is_number())
      out.baselineRssBytes = j["baseline_rss_bytes"].get<double>();
  }
  if (times.empty())
    return Status::error(source +
                         ": no completed steps; train at least one "
                         "step with --metrics " +
                         source);
  if (times.size() >= 3)
    times.erase(times.begin());
  out.used = int(times.size());
  std::sort(times.begin(), times.end());
  size_t n = times.size();
  out.medianStepSeconds =
      n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
  if (!(out.medianStepSeconds > 0))
    return Status::error(source + ": the median step time is " +
                         std::to_string(out.medianStepSeconds) +
                         " s; a calibration needs positive step times");
  return Status::success();
}

/// The step time the plan of a run's layout predicts on `spec`.
static Status predictedStep(const ModelStats &model, const ClusterSpec &spec,
                            const SearchOptions &options,
                            const LayoutChoice &layout, int microBatchSize,
                            double &seconds) {
  Plan plan;
  if (Status s = evaluatePlan(model, spec, options, layout, microBatchSize,
                              Recompute::None, plan);
      !s.ok())
    return s;
  seconds = plan.stepSeconds;
  return Status::success();
}

/// The x in [lo, hi] at which `predict(x)` meets `measured`: 60 halvings
/// (geometric with `logScale`, for values that span decades), the
/// prediction growing with x if `growing`, falling otherwise; `measured`
/// must lie between the predictions at the ends. Returns the end of the
/// last interval on the high side.
template <typename Predict>
static Status bisect(Predict predict, double lo, double hi, bool logScale,
                     bool growing, double measured, double &x) {
  for (int i = 0; i < 60; ++i) {
    double mid = logScale ? std::sqrt(lo * hi) : 0.5 * (lo + hi), t = 0;
    if (Status s = predict(mid, t); !s.ok())
      return s;
    ((t > measured) == growing ? hi : lo) = mid;
  }
  x = hi;
  return Status::success();
}

/// bisect, then the value rounded as measurements are (step times vary by
/// more than 0.1 %) in `x`, and the prediction there in `predicted`.
template <typename Predict>
static Status settle(Predict predict, double lo, double hi, bool logScale,
                     bool growing, double measured, double &x,
                     double &predicted) {
  double root = 0;
  if (Status s = bisect(predict, lo, hi, logScale, growing, measured, root);
      !s.ok())
    return s;
  x = round4(root);
  return predict(x, predicted);
}

Status calibrateEfficiency(const ModelStats &model, ClusterSpec &spec,
                           const SearchOptions &options,
                           const LayoutChoice &layout, int microBatchSize,
                           const RunMetrics &run, Calibration &out) {
  if (Status s = checkDType(options.dtype); !s.ok())
    return s;
  out = Calibration();
  out.dtype = options.dtype;
  out.previous = efficiencyFor(spec, options.dtype);
  out.measured = run.medianStepSeconds;
  auto predict = [&](double e, double &seconds) -> Status {
    ClusterSpec trial = spec;
    trial.device.efficiency[options.dtype] = e;
    return predictedStep(model, trial, options, layout, microBatchSize,
                         seconds);
  };
  if (Status s = predict(out.previous, out.predictedBefore); !s.ok())
    return s;
  double atPeak = 0;
  if (Status s = predict(1.0, atPeak); !s.ok())
    return s;
  std::string dt = options.dtype;
  // The peak and the shape classes are each the best of a few timed
  // batches of three square products; a run within 2 % faster than the
  // plan at that peak (a step made almost only of products, on an idle
  // host) is their noise, not a wrong spec: it runs at the peak.
  const double peakNoise = 0.02;
  if (atPeak > out.measured && atPeak <= out.measured * (1 + peakNoise)) {
    spec.device.efficiency[dt] = out.efficiency = 1.0;
    out.predictedAfter = atPeak;
    return Status::success();
  }
  if (atPeak > out.measured) {
    std::string head = "the run took " + fmt("%.4g s per step", out.measured) +
                       ", faster than the plan predicts at the full peak (" +
                       fmt("%.4g s", atPeak) + "): ";
    // Where the products alone at the peak fit in the run, its
    // memory-bound ops ran faster than the spec's bandwidth prices them
    // (on this host the triad streams from DRAM, while a step's
    // activations mostly stay in cache).
    double memoryFree = 0;
    ClusterSpec free = spec;
    free.device.efficiency[dt] = 1.0;
    // An update without a rate of its own moves with the memory's, as
    // calibrateMemoryBandwidth moves it.
    free.device.memoryBandwidthGBps = 0;
    if (options.memoryBandwidthGBps <= 0 &&
        spec.device.memoryBandwidthGBps > 0 &&
        predictedStep(model, free, options, layout, microBatchSize, memoryFree)
            .ok() &&
        memoryFree < out.measured)
      return Status::error(
          head + "its memory-bound ops ran faster than device." +
          "memory_bandwidth_GBps (" +
          fmt("%g", spec.device.memoryBandwidthGBps) + ") prices them; " +
          (out.previous < 1 ? "set device.efficiency." + dt +
                                  " to 1 (the run is at the peak) and "
                            : std::string()) +
          "fit the bandwidth from this run instead (--fit memory-bandwidth)");
    return Status::error(
        head + "device.peak_TFLOPs." + dt + " (" +
        fmt("%g", spec.device.peakTFLOPs.at(dt)) +
        ") is understated, or the links are slower in the spec than in the "
        "run; measure the machine with weft-profile-cluster first");
  }
  // The step time falls as e grows; at e -> 0 it grows without bound, so a
  // root lies in (0, 1]. Bisect in log space: efficiencies span decades.
  double lo = 1e-6, hi = 1.0, tLo = 0;
  if (Status s = predict(lo, tLo); !s.ok())
    return s;
  if (tLo < out.measured)
    return Status::error(
        "even at an efficiency of 1e-6 the plan predicts " +
        fmt("%.4g s", tLo) + " per step, less than the " +
        fmt("%.4g s", out.measured) +
        " measured: the time is not in compute. Check that --model, "
        "--mesh and --micro-batch-size describe the run");
  if (Status s = settle(predict, lo, hi, /*logScale=*/true, /*growing=*/false,
                        out.measured, out.efficiency, out.predictedAfter);
      !s.ok())
    return s;
  spec.device.efficiency[dt] = out.efficiency;
  return Status::success();
}

/// A field of the spec's device that a calibration fits, and how the
/// predicted step moves with it.
struct FieldFit {
  double ClusterSpec::Device::*field;
  /// The value the spec prices with before (a field left at 0 may fall
  /// back to another).
  double previous;
  /// Where the step is shortest (no overhead, free traffic) and longest,
  /// and whether to bisect between them on a log scale.
  double fastEnd, slowEnd;
  bool logScale;
  /// Where the shortest step is still slower than the run: "the plan
  /// predicts <fastPhrase> (...): <fastHint>".
  std::string fastPhrase, fastHint;
  /// Where even the longest step is faster than the run: the error, given
  /// the prediction there.
  std::function<std::string(double)> slowError;
};

/// Fits `fit.field` to the run's median step, and sets it: `value` the
/// fitted value, `before` and `after` the plan's step at the previous and
/// fitted ones.
static Status fitField(const ModelStats &model, ClusterSpec &spec,
                       const SearchOptions &options, const LayoutChoice &layout,
                       int microBatchSize, double measured, const FieldFit &fit,
                       double &value, double &before, double &after) {
  auto predict = [&](double x, double &seconds) -> Status {
    ClusterSpec trial = spec;
    trial.device.*fit.field = x;
    return predictedStep(model, trial, options, layout, microBatchSize,
                         seconds);
  };
  if (Status s = predict(fit.previous, before); !s.ok())
    return s;
  double fastest = 0, slowest = 0;
  if (Status s = predict(fit.fastEnd, fastest); !s.ok())
    return s;
  if (fastest > measured)
    return Status::error("the run took " + fmt("%.4g s per step", measured) +
                         ", faster than the plan predicts " + fit.fastPhrase +
                         " (" + fmt("%.4g s", fastest) + "): " + fit.fastHint);
  if (Status s = predict(fit.slowEnd, slowest); !s.ok())
    return s;
  if (slowest < measured)
    return Status::error(fit.slowError(slowest));
  bool growing = fit.fastEnd < fit.slowEnd;
  if (Status s = settle(predict, std::min(fit.fastEnd, fit.slowEnd),
                        std::max(fit.fastEnd, fit.slowEnd), fit.logScale,
                        growing, measured, value, after);
      !s.ok())
    return s;
  spec.device.*fit.field = value;
  return Status::success();
}

/// Fits the overhead in microseconds at `field` of the spec's device, which
/// the predicted step grows with (by at least one call's worth per
/// microsecond: bracketed between none and the whole measured step).
/// `what` names it; `noneHint` says what to revise when the plan without
/// it is already slower than the run, `allHint` when even an overhead of
/// the whole step is faster.
static Status fitOverhead(const ModelStats &model, ClusterSpec &spec,
                          const SearchOptions &options,
                          const LayoutChoice &layout, int microBatchSize,
                          const RunMetrics &run,
                          double ClusterSpec::Device::*field,
                          const std::string &what, const std::string &noneHint,
                          const std::string &allHint,
                          OverheadCalibration &out) {
  out = OverheadCalibration();
  out.previousUs = spec.device.*field;
  out.measured = run.medianStepSeconds;
  const double measured = out.measured;
  FieldFit fit{field,
               out.previousUs,
               /*fastEnd=*/0,
               /*slowEnd=*/measured * 1e6,
               /*logScale=*/false,
               "with no " + what + " at all",
               noneHint,
               [&](double t) {
                 return "even " + what + " of the whole step predicts " +
                        fmt("%.4g s", t) + ", less than the " +
                        fmt("%.4g s", measured) + " measured: " + allHint;
               }};
  return fitField(model, spec, options, layout, microBatchSize, measured, fit,
                  out.overheadUs, out.predictedBefore, out.predictedAfter);
}

Status calibrateCollectiveOverhead(const ModelStats &model, ClusterSpec &spec,
                                   const SearchOptions &options,
                                   const LayoutChoice &layout,
                                   int microBatchSize, const RunMetrics &run,
                                   OverheadCalibration &out) {
  if (int64_t(layout.dp) * layout.tp * layout.pp < 2)
    return Status::error(
        "the run's layout is one device, which runs no collectives: "
        "calibrate the overhead from a run of 2 or more ranks (--mesh), and "
        "the efficiency from the 1-rank run");
  return fitOverhead(
      model, spec, options, layout, microBatchSize, run,
      &ClusterSpec::Device::collectiveOverheadUs, "collective overhead",
      "calibrate device.efficiency from a 1-rank run first (--fit "
      "efficiency), or check the links and collectives tables",
      "the layout communicates nothing the plan prices. Check that --mesh "
      "and --micro-batch-size describe the run",
      out);
}

Status calibrateOpOverhead(const ModelStats &model, ClusterSpec &spec,
                           const SearchOptions &options,
                           const LayoutChoice &layout, int microBatchSize,
                           const RunMetrics &run, OverheadCalibration &out) {
  int64_t devices = int64_t(layout.dp) * layout.tp * layout.pp;
  if (devices > 1)
    return Status::error("the run's layout is " + std::to_string(devices) +
                         " devices, whose collectives would be counted as "
                         "ops: calibrate the op overhead from a 1-rank run");
  return fitOverhead(
      model, spec, options, layout, microBatchSize, run,
      &ClusterSpec::Device::opOverheadUs, "op overhead",
      "the FLOPs and bytes alone take longer than the run: check that "
      "--model and --micro-batch-size describe it, or fit the efficiency "
      "(--fit efficiency) from a larger model first",
      "the model has no ops; check --model", out);
}

/// Fits the rate in GB/s at `field` of the spec's device, which the
/// predicted step falls with (bracketed, on a log scale, between a rate
/// that makes the traffic take seconds per byte and one at which it is
/// free), and sets it. `previous` is the rate the spec prices with before
/// (a field left at 0 falls back to another); before it, unpriced where
/// the spec had none. `what` names it; `freeHint` says what to revise when
/// the plan with that traffic free is already slower than the run.
static Status fitBandwidth(const ModelStats &model, ClusterSpec &spec,
                           const SearchOptions &options,
                           const LayoutChoice &layout, int microBatchSize,
                           const RunMetrics &run,
                           double ClusterSpec::Device::*field, double previous,
                           const std::string &what, const std::string &freeHint,
                           BandwidthCalibration &out) {
  out = BandwidthCalibration();
  out.previousGBps = previous;
  out.measured = run.medianStepSeconds;
  if (options.memoryBandwidthGBps > 0)
    return Status::error("--memory-bandwidth fixes the bandwidth the plan "
                         "prices memory traffic at; calibrate without it");
  const double measured = out.measured, slow = 1e-6;
  FieldFit fit{field,
               previous,
               /*fastEnd=*/1e6,
               /*slowEnd=*/slow,
               /*logScale=*/true,
               "with " + what + " free",
               freeHint,
               [&](double t) {
                 return "even " + what + " at " + fmt("%.3g GB/s", slow) +
                        " predicts " + fmt("%.4g s", t) +
                        ", less than the measured " + fmt("%.4g s", measured) +
                        ": the plan prices none of it. Check --model";
               }};
  return fitField(model, spec, options, layout, microBatchSize, measured, fit,
                  out.gbps, out.predictedBefore, out.predictedAfter);
}

Status calibrateMemoryBandwidth(const ModelStats &model, ClusterSpec &spec,
                                const SearchOptions &options,
                                const LayoutChoice &layout, int microBatchSize,
                                const RunMetrics &run,
                                BandwidthCalibration &out) {
  return fitBandwidth(
      model, spec, options, layout, microBatchSize, run,
      &ClusterSpec::Device::memoryBandwidthGBps,
      spec.device.memoryBandwidthGBps, "the memory traffic",
      "the products alone take longer than that at device.efficiency." +
          options.dtype + " " + fmt("%g", efficiencyFor(spec, options.dtype)) +
          "; fit the efficiency (--fit efficiency) instead",
      out);
}

/// This host's L2 per core in MB, or 0 where it cannot say.
static double hostCacheMB() {
  long bytes = ::sysconf(_SC_LEVEL2_CACHE_SIZE);
  return bytes > 0 ? double(bytes) / 1e6 : 0;
}

Status calibrateCacheBandwidth(const ModelStats &model, ClusterSpec &spec,
                               const SearchOptions &options,
                               const LayoutChoice &layout, int microBatchSize,
                               const RunMetrics &run,
                               BandwidthCalibration &out) {
  const double memory = options.memoryBandwidthGBps > 0
                            ? options.memoryBandwidthGBps
                            : spec.device.memoryBandwidthGBps;
  if (!(memory > 0))
    return Status::error(
        "the cache's rate prices the ops whose data fits in it; the others "
        "need device.memory_bandwidth_GBps, which the spec does not have "
        "(weft-profile-cluster measures it)");
  ClusterSpec trial = spec;
  double setMB = 0;
  if (!(trial.device.cacheMB > 0)) {
    setMB = hostCacheMB();
    if (!(setMB > 0))
      return Status::error("this host does not say its L2 cache's size: set "
                           "device.cache_MB in the spec first");
    trial.device.cacheMB = setMB;
  }
  if (Status s = fitBandwidth(
          model, trial, options, layout, microBatchSize, run,
          &ClusterSpec::Device::cacheBandwidthGBps,
          trial.device.cacheBandwidthGBps > 0 ? trial.device.cacheBandwidthGBps
                                              : memory,
          "the in-cache traffic",
          "the FLOPs, the op overhead and the traffic out of cache alone "
          "take longer: fit the op overhead (--fit op-overhead) from a run "
          "at another batch, or the efficiency",
          out);
      !s.ok())
    return s;
  if (out.gbps < memory)
    return Status::error(
        "the run's ops moved their in-cache data at " +
        fmt("%.3g GB/s", out.gbps) + ", below the memory's " +
        fmt("%g GB/s", memory) +
        ": their time is not the traffic's; fit the op overhead (--fit "
        "op-overhead) or the efficiency instead");
  out.cacheMBSet = setMB;
  spec = trial;
  return Status::success();
}

/// The slowest update a fit may give, as a share of the device's memory
/// bandwidth.
constexpr double kSlowestUpdateShare = 4;

Status calibrateUpdateBandwidth(const ModelStats &model, ClusterSpec &spec,
                                const SearchOptions &options,
                                const LayoutChoice &layout, int microBatchSize,
                                const RunMetrics &run,
                                BandwidthCalibration &out) {
  if (Status s = fitBandwidth(
          model, spec, options, layout, microBatchSize, run,
          &ClusterSpec::Device::updateBandwidthGBps,
          spec.device.updateBandwidthGBps > 0 ? spec.device.updateBandwidthGBps
                                              : spec.device.memoryBandwidthGBps,
          "the update",
          "calibrate device.efficiency first, from a 1-rank run at another "
          "batch (--fit efficiency), then the update from this one",
          out);
      !s.ok())
    return s;
  // The update streams its bytes through memory: a fit above the device's
  // measured bandwidth is the noise of the two runs it comes from (the
  // fixed part of a step is their small difference; on this host one such
  // fit gave 736 GB/s against a 43 GB/s triad, pricing 8 micro-batches'
  // gradient sums as free), so it stops there.
  // Below a quarter of it is the same noise the other way: a streaming
  // pass that slow is not what the runtime's update does (quiet runs here
  // fit 9-13 GB/s against a 10-12 GB/s triad; one whose 1-rank steps
  // drifted 510-704 ms fit 1.3 GB/s, pricing the update at 112 ms a step),
  // so it stops there too.
  double mem = spec.device.memoryBandwidthGBps;
  double bounded =
      mem > 0 ? std::clamp(out.gbps, mem / kSlowestUpdateShare, mem) : out.gbps;
  if (bounded != out.gbps) {
    out.capped = out.gbps > mem;
    out.floored = !out.capped;
    out.gbps = spec.device.updateBandwidthGBps = bounded;
    if (Status s = predictedStep(model, spec, options, layout, microBatchSize,
                                 out.predictedAfter);
        !s.ok())
      return s;
  }
  return Status::success();
}

} // namespace planner
} // namespace weft
