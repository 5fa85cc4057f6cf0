//===- ClusterSpec.h - The cluster the planner plans for --------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The planner's input besides the model: how many nodes, how many devices
// per node, what one device computes and holds, and how fast two devices
// talk inside a node and across nodes. It is read from YAML
// (examples/clusters/*.yaml; the format is in docs/planner.md) and checked
// field by field, because a typo in a cluster file would otherwise turn
// silently into a wrong plan.
//
// Every number is per device and, for links, one direction, and a link's
// bandwidth is what the collective library moves, not the line rate: a DGX
// A100's NVLink is 230 GB/s here (NCCL's all-reduce bus bandwidth; the
// line rate is 300 GB/s each way, NVIDIA's 600 GB/s both directions), and
// its network 25 GB/s per GPU (one 200 Gb/s HDR port per GPU).
//
// Pure C++17: the YAML library stays inside ClusterSpec.cpp, so the cost
// model, the search and the unit tests see only these structs. Errors are
// values (rt::Status), as in the runtime's file formats.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PLANNER_CLUSTERSPEC_H
#define WEFT_PLANNER_CLUSTERSPEC_H

#include "weft/Formats/HostArray.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace weft {
namespace planner {

using rt::Status;

/// The dtypes a device must state a peak for, as the YAML spells them.
extern const char *const kClusterDTypes[3];

/// The collectives a spec may carry measured timings for, as the YAML
/// spells them.
extern const char *const kClusterCollectives[5];

/// The GEMM shape classes a spec may state efficiencies for, as the YAML
/// spells them: small, medium, large.
extern const char *const kGemmShapeClasses[3];

/// A cluster of identical nodes, each with identical devices.
struct ClusterSpec {
  /// What describe() and the planner's reports call it: the `name` field,
  /// or else the file name without folder and extension.
  std::string name;
  int64_t nodes = 0;
  int64_t devicesPerNode = 0;

  struct Device {
    /// Memory one device holds, in GB (10^9 bytes).
    double memoryGB = 0;
    /// Peak dense throughput in TFLOP/s per dtype (key: kClusterDTypes).
    /// Always holds all three.
    std::map<std::string, double> peakTFLOPs;
    /// Optional measured fraction of the peak that large matrix products
    /// reach, per dtype; 0 < e <= 1. A dtype absent here has no measurement
    /// and the cost model picks its own default.
    std::map<std::string, double> efficiency;
    /// Optional rate of each GEMM shape class over the fastest class's, per
    /// dtype (key: kGemmShapeClasses; CostModel.h's gemmShapeClass says
    /// which products belong to which), as weft-profile-cluster writes
    /// them: a product runs at peak x efficiency x this (gemmSeconds).
    std::map<std::string, std::map<std::string, double>> gemmEfficiency;
    /// Optional measured memory bandwidth of one device in GB/s (a STREAM
    /// triad); 0 where the spec has none. The roofline's memory side uses
    /// it when the caller gives no bandwidth of its own.
    double memoryBandwidthGBps = 0;
    /// Optional rate in GB/s at which the optimizer's once-a-step pass over
    /// the parameters (the update, and the sum of micro-batches' gradients)
    /// moves its bytes; 0 where the spec has none, and memoryBandwidthGBps
    /// prices it. A CPU rank's compiled update streams parameters, gradients
    /// and two moments at well below a STREAM triad's rate;
    /// weft-profile-cluster --from-metrics --fit update-bandwidth measures it
    /// from a run at a smaller batch.
    double updateBandwidthGBps = 0;
    /// Optional fraction of the computation that communication said to
    /// overlap it really hides behind, in [0, 1]; 1 where the spec has none
    /// (a GPU's copy engines and NICs move data while its SMs compute). 0
    /// for CPU ranks: gloo's transfers run on the cores that compute, so
    /// nothing is hidden (weft-profile-cluster writes 0).
    double commOverlap = 1;
    /// Optional time in microseconds each collective or point-to-point
    /// transfer costs a step beyond what the links and `collectives`
    /// tables say (those are timed on idle devices): on CPU ranks, waking
    /// the threads that run it on cores that are computing. 0 where the
    /// spec has none; weft-profile-cluster --from-metrics --fit
    /// collective-overhead measures it from a multi-rank run.
    double collectiveOverheadUs = 0;
    /// Optional time in microseconds a training step spends per op of the
    /// model's forward pass and micro-batch beyond its FLOPs and bytes:
    /// calling the op's kernels forward and backward (loop setup, waking
    /// threads, small allocations), which a step of a small model is made
    /// of. 0 where the spec has none; weft-profile-cluster --from-metrics
    /// --fit op-overhead measures it from a 1-rank run of a small model.
    double opOverheadUs = 0;
    /// Optional: how much of an op's data a device keeps near its cores,
    /// in MB (10^6 bytes), and the rate in GB/s the ops whose data for one
    /// micro-batch fits there move it at; both or neither, with
    /// memoryBandwidthGBps pricing the rest (at most this rate). 0 where
    /// the spec has none: all traffic at memoryBandwidthGBps. A small
    /// model's tensors stay in a CPU core's L2: at the STREAM triad the
    /// demo GPT's traffic alone would take longer than its whole step.
    /// weft-profile-cluster --from-metrics --fit cache-bandwidth measures
    /// the rate (and takes the size from the host's L2).
    double cacheMB = 0;
    double cacheBandwidthGBps = 0;
  } device;

  /// One direction of one device's link: bandwidth in GB/s (10^9 bytes per
  /// second) and latency of a small message in microseconds.
  struct Link {
    double bandwidthGBps = 0;
    double latencyUs = 0;
    /// inter_node only: the bandwidth is one link per node that its devices
    /// share (Ethernet between CPU hosts, scripts/cluster.sh's emulated
    /// nodes), not one per device (a NIC per GPU).
    bool sharedByNode = false;
  } intraNode, interNode;

  /// The library the ranks' collectives run on, which decides how a
  /// data-parallel all-reduce over several devices of each of several
  /// nodes moves: NCCL rings through every device (the default); Weft's
  /// gloo runtime reduces inside each node, then between the nodes' first
  /// devices, then broadcasts inside each node.
  enum class Library { Nccl, Gloo } collectiveLibrary = Library::Nccl;

  /// One measured collective: `group` ranks, `bytes` per rank, `us`
  /// microseconds end to end.
  struct CollectiveSample {
    int64_t group = 0;
    double bytes = 0;
    double us = 0;
  };
  /// Optional measured timings per collective (key: kClusterCollectives),
  /// in file order. They refine the bandwidth/latency model where present.
  std::map<std::string, std::vector<CollectiveSample>> collectives;

  int64_t numDevices() const { return nodes * devicesPerNode; }

  /// One line for logs and `weft-cluster check`:
  /// "dgx-a100-80gb: 1 node x 8 devices, 80 GB, TFLOP/s fp32 19.5 bf16 312
  ///  fp16 312, intra-node 230 GB/s 3 us, inter-node 25 GB/s 5 us".
  std::string describe() const;
};

/// Parses and checks the YAML text of a cluster spec into `out`.
/// `sourceName` starts every error message (normally the file's path) and,
/// without a `name` field, gives the cluster its name. Errors name the
/// field by its path (`device.peak_TFLOPs.bf16`), where it is (line:column)
/// and what a valid value looks like; unknown keys are refused, naming the
/// valid ones.
Status parseClusterSpec(const std::string &yamlText,
                        const std::string &sourceName, ClusterSpec &out);

/// Reads the file at `path` and parses it as parseClusterSpec does.
Status loadClusterSpec(const std::string &path, ClusterSpec &out);

} // namespace planner
} // namespace weft

#endif // WEFT_PLANNER_CLUSTERSPEC_H
