//===- CostModel.cpp - What a plan costs on a cluster ---------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Closed forms only: each function is a formula of docs/planner.md's "Cost
// model" section, so the unit tests can check it against a hand calculation.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/CostModel.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace weft {
namespace planner {

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

Status checkDType(const std::string &dtype) {
  for (const char *name : kClusterDTypes)
    if (dtype == name)
      return Status::success();
  return Status::error("unknown dtype '" + dtype +
                       "' for the cost model; use fp32, bf16 or fp16 (the "
                       "dtypes a cluster spec states peaks for)");
}

double efficiencyFor(const ClusterSpec &spec, const std::string &dtype) {
  auto it = spec.device.efficiency.find(dtype);
  // No measurement: the peak itself, so an unmeasured spec errs towards
  // compute looking cheap rather than inventing a number.
  return it == spec.device.efficiency.end() ? 1.0 : it->second;
}

const char *gemmShapeClass(double m, double n, double k) {
  return gemmShapeClassOfFlops(2 * m * n * k);
}

const char *gemmShapeClassOfFlops(double flops) {
  if (flops <= 2 * 256.0 * 256.0 * 256.0)
    return kGemmShapeClasses[0];
  if (flops <= 2 * 1024.0 * 1024.0 * 1024.0)
    return kGemmShapeClasses[1];
  return kGemmShapeClasses[2];
}

double gemmEfficiencyFor(const ClusterSpec &spec, const std::string &dtype,
                         double productFlops) {
  auto byDType = spec.device.gemmEfficiency.find(dtype);
  if (byDType != spec.device.gemmEfficiency.end()) {
    auto it = byDType->second.find(gemmShapeClassOfFlops(productFlops));
    if (it != byDType->second.end())
      return it->second;
  }
  return 1.0;
}

double computeSeconds(const ClusterSpec &spec, double flops, double bytes,
                      double memoryBandwidthGBps, const std::string &dtype) {
  double flopsPerSecond =
      spec.device.peakTFLOPs.at(dtype) * 1e12 * efficiencyFor(spec, dtype);
  double bytesPerSecond = memoryBandwidthGBps * 1e9;
  return std::max(flops / flopsPerSecond, bytes / bytesPerSecond);
}

double gemmSeconds(const ClusterSpec &spec, double flops, double productFlops,
                   double bytes, double memoryBandwidthGBps,
                   const std::string &dtype) {
  return computeSeconds(spec,
                        flops / gemmEfficiencyFor(spec, dtype, productFlops),
                        bytes, memoryBandwidthGBps, dtype);
}

double updateSeconds(double paramsHere, double paramsUpdated, int microBatches,
                     double bytesPerParam, double bytesPerGrad,
                     double optimizerBytesPerParam,
                     double memoryBandwidthGBps) {
  if (!(memoryBandwidthGBps > 0))
    return 0;
  double accumulate =
      std::max(microBatches - 1, 0) * paramsHere * 3 * bytesPerGrad;
  double update = paramsUpdated * (2 * bytesPerParam + bytesPerGrad +
                                   2 * optimizerBytesPerParam);
  return (accumulate + update) / (memoryBandwidthGBps * 1e9);
}

//===----------------------------------------------------------------------===//
// Layouts and memory
//===----------------------------------------------------------------------===//

Status checkLayout(const LayoutChoice &l, const ClusterSpec &spec) {
  auto positive = [](const char *field, int value) -> Status {
    if (value >= 1)
      return Status::success();
    return Status::error(std::string("layout: ") + field +
                         " must be at least 1, got " + std::to_string(value));
  };
  for (Status st : {positive("dp", l.dp), positive("tp", l.tp),
                    positive("pp", l.pp),
                    positive("microBatches", l.microBatches),
                    positive("virtualStages", l.virtualStages)})
    if (!st.ok())
      return st;
  int64_t devices = int64_t(l.dp) * l.tp * l.pp;
  if (devices > spec.numDevices())
    return Status::error(
        "layout: dp x tp x pp = " + std::to_string(l.dp) + " x " +
        std::to_string(l.tp) + " x " + std::to_string(l.pp) + " = " +
        std::to_string(devices) + " devices, but cluster '" + spec.name +
        "' has " + std::to_string(spec.numDevices()) +
        "; shrink a degree or add nodes");
  if (l.zeroStage < 0 || l.zeroStage > 3)
    return Status::error("layout: zeroStage must be 0, 1, 2 or 3, got " +
                         std::to_string(l.zeroStage));
  if (l.schedule == Schedule::Interleaved) {
    if (l.virtualStages < 2)
      return Status::error("layout: interleaved needs virtualStages >= 2, "
                           "got " +
                           std::to_string(l.virtualStages) +
                           "; with one stage per rank use 1f1b");
    if (l.microBatches % l.pp != 0)
      return Status::error("layout: interleaved needs microBatches (" +
                           std::to_string(l.microBatches) +
                           ") to be a multiple of pp (" + std::to_string(l.pp) +
                           ")");
  } else if (l.virtualStages != 1) {
    return Status::error(std::string("layout: ") + pipeline::getScheduleKindName(l.schedule) +
                         " runs one stage per rank, got virtualStages " +
                         std::to_string(l.virtualStages) +
                         "; use 1 or the interleaved schedule");
  }
  return Status::success();
}

double inFlightMicroBatches(Schedule schedule, int p, int m, int v) {
  return inFlightMicroBatchesOnRank(schedule, p, m, v, 0);
}

double inFlightMicroBatchesOnRank(Schedule schedule, int p, int m, int v,
                                  int rank) {
  switch (schedule) {
  case Schedule::GPipe:
    return m; // every forward runs before the first backward
  case Schedule::OneFOneB:
  case Schedule::ZeroBubble:
    return std::min(p - rank, m); // the rank's warm-up forwards
  case Schedule::Interleaved: {
    // Rank r holds 2(p-r-1) + (v-1)p + 1 chunks (docs/pipeline.md's
    // simulator), each 1/v of its layers; on rank 0 that is p + (p-1)/v
    // stages' worth, Megatron's p (1 + (p-1)/(pv)).
    int chunks = std::min(2 * (p - rank - 1) + (v - 1) * p + 1, v * m);
    return double(chunks) / v;
  }
  }
  return m;
}

MemoryEstimate memoryPerDevice(const ModelSize &model,
                               const LayoutChoice &l) {
  MemoryEstimate e;
  // Tensor and pipeline parallelism each hold a disjoint share of the
  // parameters; ZeRO shards over dp what stage it names and every stage
  // below it.
  double paramsHere = model.params / (double(l.tp) * l.pp);
  e.params = paramsHere * model.bytesPerParam / (l.zeroStage >= 3 ? l.dp : 1);
  e.grads = paramsHere * model.bytesPerGrad / (l.zeroStage >= 2 ? l.dp : 1);
  e.optimizerState =
      paramsHere * model.optimizerBytesPerParam / (l.zeroStage >= 1 ? l.dp : 1);

  // Without sequence parallelism the replicated fraction stays whole on
  // every tp rank; with it everything is split tp ways.
  double f = l.sequenceParallel ? 0.0 : model.tpReplicatedActivationFraction;
  double perMicroBatch =
      model.activationBytesPerMicroBatchPerStage * (f + (1.0 - f) / l.tp);
  e.activations = perMicroBatch * inFlightMicroBatches(l.schedule, l.pp,
                                                       l.microBatches,
                                                       l.virtualStages);
  e.total = e.params + e.grads + e.optimizerState + e.activations;
  return e;
}

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

const char *collectiveName(Collective kind) {
  switch (kind) {
  case Collective::AllReduce:
    return "all_reduce";
  case Collective::AllGather:
    return "all_gather";
  case Collective::ReduceScatter:
    return "reduce_scatter";
  case Collective::AllToAll:
    return "all_to_all";
  case Collective::SendRecv:
    return "send_recv";
  }
  return "?";
}

Status checkCollective(const ClusterSpec &spec, Collective kind, int groupSize,
                       Algorithm algo) {
  std::string name = collectiveName(kind);
  if (kind == Collective::SendRecv && groupSize != 2)
    return Status::error("send_recv is between 2 ranks, got a group of " +
                         std::to_string(groupSize));
  if (groupSize < 2)
    return Status::error(name + " needs a group of at least 2 ranks, got " +
                         std::to_string(groupSize) +
                         "; a group of one communicates nothing, skip it");
  if (algo == Algorithm::Hierarchical) {
    if (kind != Collective::AllReduce)
      return Status::error("the hierarchical algorithm is modelled for "
                           "all_reduce only, not " +
                           name + "; use ring or tree");
    if (groupSize % spec.devicesPerNode != 0 ||
        groupSize / spec.devicesPerNode < 2)
      return Status::error(
          "hierarchical all_reduce needs whole nodes (a multiple of " +
          std::to_string(spec.devicesPerNode) +
          " devices per node, at least 2 nodes), got a group of " +
          std::to_string(groupSize) + "; use ring or tree");
  }
  return Status::success();
}

bool measuredSeconds(const ClusterSpec &spec, Collective kind, double bytes,
                     int groupSize, double &seconds, double zeroBytesSeconds) {
  auto it = spec.collectives.find(collectiveName(kind));
  if (it == spec.collectives.end())
    return false;
  std::vector<ClusterSpec::CollectiveSample> s;
  for (const ClusterSpec::CollectiveSample &sample : it->second)
    if (sample.group == groupSize)
      s.push_back(sample);
  if (s.empty())
    return false;
  std::sort(s.begin(), s.end(),
            [](const auto &a, const auto &b) { return a.bytes < b.bytes; });
  auto line = [&](double x0, double y0, double x1, double y1) {
    return x1 == x0 ? y1 : y0 + (bytes - x0) * (y1 - y0) / (x1 - x0);
  };
  double us;
  if (bytes <= s.front().bytes) {
    us = zeroBytesSeconds < 0
             ? s.front().us
             : line(0, std::min(zeroBytesSeconds * 1e6, s.front().us),
                    s.front().bytes, s.front().us);
  } else if (bytes >= s.back().bytes) {
    us = s.size() == 1 ? line(0, 0, s[0].bytes, s[0].us)
                       : line(s[s.size() - 2].bytes, s[s.size() - 2].us,
                              s.back().bytes, s.back().us);
  } else {
    size_t i = 1;
    while (s[i].bytes < bytes)
      ++i;
    us = line(s[i - 1].bytes, s[i - 1].us, s[i].bytes, s[i].us);
  }
  seconds = us * 1e-6;
  return true;
}

namespace {
/// Latency (s) and inverse bandwidth (s per byte) of one link.
struct AlphaBeta {
  double alpha, secondsPerByte;
};
AlphaBeta alphaBeta(const ClusterSpec::Link &link) {
  return {link.latencyUs * 1e-6, 1.0 / (link.bandwidthGBps * 1e9)};
}

double ringAllReduce(AlphaBeta l, double bytes, int n) {
  return 2.0 * (n - 1) / n * bytes * l.secondsPerByte + 2.0 * (n - 1) * l.alpha;
}
double ringHalf(AlphaBeta l, double bytes, int n) {
  return double(n - 1) / n * bytes * l.secondsPerByte + (n - 1) * l.alpha;
}
} // namespace

namespace {
/// collectiveSeconds without the overhead: the time on idle devices.
double idleSeconds(const ClusterSpec &spec, Collective kind, double bytes,
                   int groupSize, bool crossesNodes, Algorithm algo) {
  // A measurement is of what the library really does, whatever algorithm
  // it picked, so it wins over every formula. A group no larger than a
  // node that still crosses nodes (dp over nodes, tp inside them) is not
  // what a sample of its size measured: those ran inside a node.
  // Below the smallest sample, the time falls towards the formula's
  // latency alone (a table of large messages must not price a 4-byte
  // all-reduce as a megabyte's).
  double measured;
  bool sampled = !crossesNodes || groupSize > spec.devicesPerNode;
  if (sampled && measuredSeconds(
                     spec, kind, bytes, groupSize, measured,
                     linkSeconds(spec, kind, 0, groupSize, crossesNodes, algo)))
    return measured;
  return linkSeconds(spec, kind, bytes, groupSize, crossesNodes, algo);
}
} // namespace

double collectiveSeconds(const ClusterSpec &spec, Collective kind, double bytes,
                         int groupSize, bool crossesNodes, Algorithm algo) {
  // Samples and formulas are of idle devices; what a call costs a step
  // beyond that is the overhead.
  return spec.device.collectiveOverheadUs * 1e-6 +
         idleSeconds(spec, kind, bytes, groupSize, crossesNodes, algo);
}

double groupCollectiveSeconds(const ClusterSpec &spec, Collective kind,
                              double bytes, const GroupPlacement &g) {
  bool shared = spec.interNode.sharedByNode && g.groupsPerNode > 1;
  bool leaders = spec.collectiveLibrary == ClusterSpec::Library::Gloo &&
                 kind == Collective::AllReduce && g.perNode > 1;
  if (!g.crossesNodes() || (!shared && !leaders))
    return collectiveSeconds(spec, kind, bytes, g.size, g.crossesNodes(),
                             Algorithm::Ring);
  AlphaBeta inter = alphaBeta(spec.interNode);
  // Each group's ring (or its leaders' ring) crosses a node's link once
  // each way.
  if (shared)
    inter.secondsPerByte *= g.groupsPerNode;
  double overhead = spec.device.collectiveOverheadUs * 1e-6;
  if (!leaders) {
    switch (kind) {
    case Collective::AllReduce:
      return overhead + ringAllReduce(inter, bytes, g.size);
    case Collective::SendRecv:
      return overhead + inter.alpha + bytes * inter.secondsPerByte;
    default:
      return overhead + ringHalf(inter, bytes, g.size);
    }
  }
  // One runtime call: the node's all-reduce, the leaders' (the whole
  // buffer: gloo's leaders do not split it between a node's devices), and
  // the broadcast, a tree of depth ceil(log2 perNode).
  AlphaBeta intra = alphaBeta(spec.intraNode);
  double depth = std::ceil(std::log2(double(g.perNode)));
  return overhead +
         idleSeconds(spec, Collective::AllReduce, bytes, g.perNode, false,
                     Algorithm::Ring) +
         ringAllReduce(inter, bytes, g.size / g.perNode) +
         depth * (intra.alpha + bytes * intra.secondsPerByte);
}

double linkSeconds(const ClusterSpec &spec, Collective kind, double bytes,
                   int groupSize, bool crossesNodes, Algorithm algo) {

  AlphaBeta link = alphaBeta(crossesNodes ? spec.interNode : spec.intraNode);
  int n = groupSize;
  switch (kind) {
  case Collective::SendRecv:
    return link.alpha + bytes * link.secondsPerByte;
  case Collective::AllGather:
  case Collective::ReduceScatter:
  case Collective::AllToAll:
    // Ring all-gather / reduce-scatter, and pairwise all-to-all: n-1 steps,
    // each moving 1/n of the buffer.
    return ringHalf(link, bytes, n);
  case Collective::AllReduce:
    break;
  }
  switch (algo) {
  case Algorithm::Ring:
    return ringAllReduce(link, bytes, n);
  case Algorithm::Tree: {
    // Binary tree, reduce to the root then broadcast, each level passing
    // the whole buffer (no pipelining of chunks): depth ceil(log2 n).
    double depth = std::ceil(std::log2(double(n)));
    return 2.0 * depth * (link.alpha + bytes * link.secondsPerByte);
  }
  case Algorithm::Hierarchical: {
    // Reduce-scatter inside each node, ring all-reduce of each device's 1/k
    // across the nodes, all-gather inside each node.
    int k = int(spec.devicesPerNode);
    int nodes = n / k;
    AlphaBeta intra = alphaBeta(spec.intraNode);
    AlphaBeta inter = alphaBeta(spec.interNode);
    return 2.0 * ringHalf(intra, bytes, k) +
           ringAllReduce(inter, bytes / k, nodes);
  }
  }
  return ringAllReduce(link, bytes, n);
}

//===----------------------------------------------------------------------===//
// Overlap and the pipeline bubble
//===----------------------------------------------------------------------===//

double exposedCommSeconds(double commSeconds, double overlappableSeconds) {
  return std::max(0.0, commSeconds - overlappableSeconds);
}

double stepSeconds(double computeSeconds, double commSeconds,
                   double overlappableSeconds) {
  return computeSeconds + exposedCommSeconds(commSeconds, overlappableSeconds);
}

double bubbleFraction(Schedule schedule, int p, int m, int v) {
  switch (schedule) {
  case Schedule::GPipe:
  case Schedule::OneFOneB:
    return double(p - 1) / (m + p - 1);
  case Schedule::Interleaved:
    return double(p - 1) / (double(v) * m + p - 1);
  case Schedule::ZeroBubble:
    if (m >= p)
      return double(p - 1) / (3.0 * m + p - 1);
    // Too few micro-batches to fill the drain: makespan 2(m+p)-1 over 3m
    // units of work per rank.
    return 1.0 - 3.0 * m / (2.0 * (m + p) - 1);
  }
  return 0;
}

} // namespace planner
} // namespace weft
