//===- Profile.h - Measure a machine into a cluster spec --------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// What weft-profile-cluster measures and how it turns the measurements
// into a ClusterSpec: GEMM throughput per dtype and shape class (OpenBLAS,
// one thread per device, as a training rank runs), memory bandwidth (a
// STREAM triad), and collectives per group size over the runtime's gloo
// communicators on loopback. And the other direction: recalibrating a
// spec's compute efficiency from the per-step metrics an executable wrote.
// docs/planner.md ("Calibration") states the methods.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PLANNER_PROFILE_H
#define WEFT_PLANNER_PROFILE_H

#include "weft/Planner/ClusterSpec.h"
#include "weft/Planner/Search.h"

#include <functional>
#include <string>
#include <vector>

namespace weft {
namespace planner {

struct ProfileOptions {
  /// Ranks the machine runs (one core each); the spec's devices_per_node.
  int devices = 1;
  /// Tiny sizes and few repetitions: a smoke test in seconds, not numbers
  /// to plan with.
  bool quick = false;
  /// Where progress lines go (one per measurement); may be empty.
  std::function<void(const std::string &)> progress;
};

/// One timed matrix product.
struct GemmMeasurement {
  std::string dtype, shapeClass;
  int64_t m = 0, n = 0, k = 0;
  double gflops = 0;
};

/// One timed collective: `bytes` counted as the cost model counts them (the
/// all-reduce buffer, the all-gather output, the reduce-scatter input, the
/// message of a send/recv).
struct CollectiveMeasurement {
  std::string collective;
  int group = 0;
  double bytes = 0, us = 0;
};

struct ProfileResult {
  std::vector<GemmMeasurement> gemms;
  /// dtypes whose products were not measured (no kernel for them in the
  /// linked BLAS), with the reason.
  std::map<std::string, std::string> unmeasured;
  double triadGBps = 0;
  std::vector<CollectiveMeasurement> collectives;
  /// Host memory in bytes (/proc/meminfo's MemTotal).
  double hostMemoryBytes = 0;
};

/// Times OpenBLAS products of each shape class (cblas_sgemm for fp32,
/// cblas_sbgemm for bf16 where the library has it) on one thread.
Status measureGemms(const ProfileOptions &options, ProfileResult &result);

/// Times a STREAM triad a[i] = b[i] + s c[i] on one thread over arrays
/// well beyond the last-level cache; bytes counted as STREAM does (three
/// arrays, no write-allocate).
Status measureTriad(const ProfileOptions &options, ProfileResult &result);

/// Reads the host's memory (/proc/meminfo's MemTotal) into
/// `hostMemoryBytes`; an error where it cannot.
Status measureHostMemory(const ProfileOptions &options, ProfileResult &result);

/// Everything a spec of this machine needs, in the order a person reads the
/// progress: the host's memory, the products, the triad and (more than one
/// device) the collectives. weft-profile-cluster and `weftc --cluster
/// local` both measure through this, so their specs cannot differ.
Status measureLocalMachine(const ProfileOptions &options,
                           ProfileResult &result);

/// Times all-reduce, all-gather and reduce-scatter for every group size
/// 2..devices, and send/recv between 2 ranks, over gloo on 127.0.0.1: one
/// thread per rank, meeting in a store on a port the system picks.
Status measureCollectives(const ProfileOptions &options, ProfileResult &result);

/// Measures the network between nodes. This process is one rank of a
/// launch with one process per node (weftrun --nnodes N --nproc-per-node 1,
/// torchrun, srun: the variables rt::readLaunchInfo reads, `getenv` here);
/// ranks 0 and 1 ping-pong send/recv over gloo between the first two
/// nodes, at the sizes measureCollectives uses, and rank 0 fits them
/// (fitLink) into `link` and sets `measured`; elsewhere `measured` stays
/// false. `worldSize` gets the launch's number of processes (nodes).
Status measureInterNode(const ProfileOptions &options,
                        const std::function<const char *(const char *)> &getenv,
                        ClusterSpec::Link &link, bool &measured,
                        int &worldSize);

/// A least-squares fit t = alpha + bytes / beta over the send/recv
/// measurements: latency in microseconds, bandwidth in GB/s. False where
/// there are fewer than two sizes or the fit is not positive.
bool fitLink(const std::vector<CollectiveMeasurement> &samples,
             double &latencyUs, double &bandwidthGBps);

/// The spec the measurements describe: one node of `devices` devices,
/// each the best measured throughput per dtype as its peak (an unmeasured
/// dtype takes fp32's), per-class efficiencies against that peak, the
/// triad bandwidth, an even share of host memory, and the links fitted from
/// send/recv (the same for inter_node: one host has no other link).
ClusterSpec specFromProfile(const ProfileResult &result,
                            const ProfileOptions &options,
                            const std::string &name);

/// The spec as YAML that parseClusterSpec reads back to the same numbers:
/// keys in a fixed order, collectives sorted by group and bytes, and
/// `comments` (by field path, e.g. "device.peak_TFLOPs.bf16") written as a
/// comment line above their field.
std::string
formatClusterSpec(const ClusterSpec &spec,
                  const std::map<std::string, std::string> &comments);

//===----------------------------------------------------------------------===//
// Recalibration from an executable's metrics
//===----------------------------------------------------------------------===//

/// What one run measured, reduced to what calibration needs.
struct RunMetrics {
  /// Steps read, and the ones used (after the warm-up).
  int steps = 0, used = 0;
  double medianStepSeconds = 0;
  /// The largest peak_rss_bytes and the baseline_rss_bytes, where logged
  /// (-1 otherwise).
  double peakRssBytes = -1, baselineRssBytes = -1;
};

/// Reads a metrics JSONL file's text (lib/Runtime/Metrics.cpp's lines).
/// The first step pays one-off costs (page faults on fresh buffers, the
/// BLAS's own buffers), so it is left out when there are three or more;
/// skipped steps are left out too. `source` names the file in errors.
Status readRunMetrics(const std::string &text, const std::string &source,
                      RunMetrics &out);

struct Calibration {
  std::string dtype;
  double efficiency = 0, previous = 0;
  /// The plan's step time before and after, and what was measured.
  double predictedBefore = 0, predictedAfter = 0, measured = 0;
};

/// Sets spec.device.efficiency[options.dtype] so that evaluatePlan of the
/// run's layout (`layout`, `microBatchSize`, no recomputation) predicts the
/// measured median step time: the step time is decreasing in the
/// efficiency, so a bisection finds it. Fails, saying which number to
/// revise, when even the full peak predicts a slower step than measured
/// (the memory bandwidth is understated, where the products alone at the
/// peak fit in the run: fit it with calibrateMemoryBandwidth; else the
/// peak is) or when communication alone exceeds the measurement.
Status calibrateEfficiency(const ModelStats &model, ClusterSpec &spec,
                           const SearchOptions &options,
                           const LayoutChoice &layout, int microBatchSize,
                           const RunMetrics &run, Calibration &out);

/// What calibrateCollectiveOverhead and calibrateOpOverhead found.
struct OverheadCalibration {
  double overheadUs = 0, previousUs = 0;
  double predictedBefore = 0, predictedAfter = 0, measured = 0;
};

/// Sets spec.device.collective_overhead_us so that evaluatePlan of a
/// multi-rank run's layout predicts its measured median step: the step
/// grows with the overhead (every collective and transfer pays it once),
/// so a bisection finds it. The compute side (efficiency) must be
/// calibrated first, from a 1-rank run. Fails, naming what to revise, when
/// the layout communicates nothing (one device) or when the plan without
/// any overhead already predicts a slower step than measured.
Status calibrateCollectiveOverhead(const ModelStats &model, ClusterSpec &spec,
                                   const SearchOptions &options,
                                   const LayoutChoice &layout,
                                   int microBatchSize, const RunMetrics &run,
                                   OverheadCalibration &out);

/// Sets spec.device.op_overhead_us so that evaluatePlan of a 1-rank run
/// predicts its measured median step: what a small model's step spends
/// beyond its FLOPs and bytes, per op of its forward pass and micro-batch.
/// Fit it from a model whose ops are small (the efficiency then barely
/// matters), and the efficiency from a large one. Fails, naming what to
/// revise, on a multi-rank layout or when the plan without any overhead
/// already predicts a slower step than measured.
Status calibrateOpOverhead(const ModelStats &model, ClusterSpec &spec,
                           const SearchOptions &options,
                           const LayoutChoice &layout, int microBatchSize,
                           const RunMetrics &run, OverheadCalibration &out);

/// What calibrateMemoryBandwidth and calibrateUpdateBandwidth found.
struct BandwidthCalibration {
  double gbps = 0, previousGBps = 0;
  double predictedBefore = 0, predictedAfter = 0, measured = 0;
  /// The update's fit came out above the device's memory bandwidth, and
  /// `gbps` is that bandwidth instead.
  bool capped = false;
  /// The update's fit came out below a quarter of the device's memory
  /// bandwidth, and `gbps` is that quarter instead.
  bool floored = false;
  /// calibrateCacheBandwidth set device.cache_MB (the host's L2), which the
  /// spec did not have.
  double cacheMBSet = 0;
};

/// Sets spec.device.memory_bandwidth_GBps, the rate the roofline prices
/// the ops' memory traffic at, so that evaluatePlan of the run's layout
/// predicts its measured median step, the efficiency held: for a run
/// faster than the plan at the full peak (calibrateEfficiency refuses it),
/// whose memory-bound ops ran faster than the triad the profile measured
/// (their data in cache). The update keeps its own rate where the spec has
/// one. Fails, naming what to revise, when the traffic free already
/// predicts a slower step than measured (the efficiency is too low).
Status calibrateMemoryBandwidth(const ModelStats &model, ClusterSpec &spec,
                                const SearchOptions &options,
                                const LayoutChoice &layout, int microBatchSize,
                                const RunMetrics &run,
                                BandwidthCalibration &out);

/// Sets spec.device.cache_bandwidth_GBps, the rate of the traffic of ops
/// whose data for one micro-batch fits in device.cache_MB (taken from this
/// host's per-core L2 where the spec has none), so that evaluatePlan of
/// the run's layout predicts its median step, everything else held: a run
/// of a small model at a batch other than the op overhead's (a step's ops
/// cost a fixed part, device.op_overhead_us, and a part that scales with
/// the micro-batch, this). Fails without device.memory_bandwidth_GBps (the
/// rest of the traffic's rate), and where the fit comes out below it.
Status calibrateCacheBandwidth(const ModelStats &model, ClusterSpec &spec,
                               const SearchOptions &options,
                               const LayoutChoice &layout, int microBatchSize,
                               const RunMetrics &run,
                               BandwidthCalibration &out);

/// Sets spec.device.update_bandwidth_GBps so that evaluatePlan of the
/// run's layout predicts its measured median step: the step falls as the
/// bandwidth grows, so a bisection (over a log scale) finds it. The update
/// runs once a step whatever the batch, so the run that fits it has a
/// batch other than the one device.efficiency was fitted at (half of it):
/// a step = the update + what each sample costs. Fails, naming what to
/// revise, when a free update already predicts a slower step than
/// measured (the efficiency is too low: fit it first) or when no rate
/// reaches the measurement. A fit above the device's memory bandwidth or
/// below a quarter of it is the runs' noise, and stops at that bound.
Status calibrateUpdateBandwidth(const ModelStats &model, ClusterSpec &spec,
                                const SearchOptions &options,
                                const LayoutChoice &layout, int microBatchSize,
                                const RunMetrics &run,
                                BandwidthCalibration &out);

} // namespace planner
} // namespace weft

#endif // WEFT_PLANNER_PROFILE_H
