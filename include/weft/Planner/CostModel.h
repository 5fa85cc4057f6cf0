//===- CostModel.h - What a plan costs on a cluster -------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The planner's estimates, each a closed form over the ClusterSpec's
// numbers, so that the search can rank thousands of layouts without running
// any: the time of a computation (roofline), the bytes one device holds for
// a layout (params, grads, optimizer state, activations), the time of a
// collective (alpha-beta, or the spec's measured table where it has one),
// how much gradient reduction hides behind the backward, and the pipeline
// bubble. docs/planner.md ("Cost model") states every formula and what is
// not modelled.
//
// Units: seconds, bytes (not GB), FLOPs. The functions assume inputs that
// checkDType / checkLayout / checkCollective accept; the planner calls those
// once per candidate, so that a bad flag or spec is an error naming the fix
// rather than a NaN in a ranking.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PLANNER_COSTMODEL_H
#define WEFT_PLANNER_COSTMODEL_H

#include "weft/Planner/ClusterSpec.h"
#include "weft/Transforms/Pipeline/Schedule.h"

#include <string>

namespace weft {
namespace planner {

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

/// Ok if `dtype` is one of kClusterDTypes, the dtypes a spec states peaks for.
Status checkDType(const std::string &dtype);

/// The fraction of the peak the spec says `dtype` reaches:
/// device.efficiency[dtype], or 1.0 where the spec has no measurement.
double efficiencyFor(const ClusterSpec &spec, const std::string &dtype);

/// The shape class of an M x N x K matrix product by its FLOPs 2MNK, as
/// weft-profile-cluster measures them: "small" up to 2·256³ (a 256³
/// product), "medium" up to 2·1024³, "large" above.
const char *gemmShapeClass(double m, double n, double k);
/// The same by the product's FLOPs (2MNK).
const char *gemmShapeClassOfFlops(double flops);

/// How much slower than the fastest class a `dtype` product of
/// `productFlops` runs: device.gemm_efficiency[dtype][its class], which
/// weft-profile-cluster writes as that class's measured rate over the
/// fastest's (the peak), or 1 where the spec has none. A product then takes
/// flops / (peak · efficiencyFor · this) (gemmSeconds).
double gemmEfficiencyFor(const ClusterSpec &spec, const std::string &dtype,
                         double productFlops);

/// Roofline time of a kernel running matrix products of `productFlops`
/// each, `flops` in all: computeSeconds with the compute side slowed by
/// the products' class (gemmEfficiencyFor).
double gemmSeconds(const ClusterSpec &spec, double flops, double productFlops,
                   double bytes, double memoryBandwidthGBps,
                   const std::string &dtype);

/// Roofline time of one kernel on one device, in seconds:
///   max(flops / (peak[dtype] * efficiency[dtype]), bytes / memory bandwidth).
/// `bytes` is the memory traffic; `memoryBandwidthGBps` is the device's
/// memory bandwidth in GB/s, supplied by the caller because the cluster spec
/// has no field for it (e.g. 2039 for an A100 80GB SXM's HBM2e).
double computeSeconds(const ClusterSpec &spec, double flops, double bytes,
                      double memoryBandwidthGBps, const std::string &dtype);

/// Seconds of memory traffic a step spends outside the layers, at
/// `memoryBandwidthGBps` (0: not priced): each micro-batch's gradients
/// after the first added into the running sum (both read, the sum
/// written: 3 x bytesPerGrad per local parameter), and the optimizer's
/// update of the `paramsUpdated` parameters this device owns (parameter,
/// gradient and state read; parameter and state written: 2 x bytesPerParam
/// + bytesPerGrad + 2 x optimizerBytesPerParam each; AdamW in f32: 28).
double updateSeconds(double paramsHere, double paramsUpdated, int microBatches,
                     double bytesPerParam, double bytesPerGrad,
                     double optimizerBytesPerParam, double memoryBandwidthGBps);

//===----------------------------------------------------------------------===//
// Layouts and memory
//===----------------------------------------------------------------------===//

/// The pipeline schedules of docs/pipeline.md, as the schedule library
/// names and parses them (pipeline::parseScheduleKind,
/// pipeline::getScheduleKindName).
using Schedule = pipeline::ScheduleKind;

/// One way to lay a training step over the cluster.
struct LayoutChoice {
  int dp = 1, tp = 1, pp = 1;
  /// ZeRO stage 0..3: 1 shards optimizer state over dp, 2 also gradients,
  /// 3 also parameters.
  int zeroStage = 0;
  /// Megatron's sequence parallelism: the activations tensor parallelism
  /// would replicate (norms, dropout, residuals) are split over tp too.
  bool sequenceParallel = false;
  int microBatches = 1;
  Schedule schedule = Schedule::OneFOneB;
  /// Stages (chunks) per pipeline rank; interleaved needs >= 2, others 1.
  int virtualStages = 1;
};

/// Ok if every field is in range and dp * tp * pp devices exist in `spec`;
/// otherwise an error naming the field and what it must be.
Status checkLayout(const LayoutChoice &layout, const ClusterSpec &spec);

/// What the memory model needs to know of the model.
struct ModelSize {
  /// Trainable parameters, all stages together.
  double params = 0;
  /// Activation bytes one micro-batch leaves alive for the backward on one
  /// pipeline stage (a rank's 1/pp of the layers), without tensor
  /// parallelism.
  double activationBytesPerMicroBatchPerStage = 0;
  /// The part of those activations that tensor parallelism alone does not
  /// split but replicates on every tp rank (Megatron: layer-norm inputs,
  /// dropout masks, residuals, 10 of the 34 + 5as/h bytes per token and
  /// hidden unit). 0 means tp splits all of them.
  double tpReplicatedActivationFraction = 0;
  /// Bytes of one parameter and of one gradient (4: f32).
  int bytesPerParam = 4;
  int bytesPerGrad = 4;
  /// Optimizer bytes per parameter: AdamW's two f32 moments are 8; with
  /// bf16 training and an f32 master copy, 12.
  int optimizerBytesPerParam = 8;
};

/// Bytes one device holds at its peak, per kind. Counted: parameters,
/// gradients, optimizer state and the activations alive for the backward on
/// pipeline rank 0 (the rank holding the most). Not counted: temporaries
/// inside an op, communication buffers, the ZeRO-3 gather of one layer's
/// parameters, framework and allocator overhead.
struct MemoryEstimate {
  double params = 0, grads = 0, optimizerState = 0, activations = 0;
  /// What a Weft executable holds besides, counted only when the search is
  /// asked for it (SearchOptions::executableMemory; docs/planner.md,
  /// "Memory model against measured peaks"), else 0:
  ///  - stepOutputs: the step is a function, so the updated parameters and
  ///    optimizer state are results next to their inputs;
  ///  - weightImage: the initial weights the executable embeds, paged in
  ///    when they are copied into the parameters, the rank's layers whole;
  ///  - lossBuffers: the loss over the model's output: two output-sized
  ///    tensors (the logits and their gradient) alive together, less the
  ///    room of the block a recomputation reruns later (they are dead by
  ///    then);
  ///  - commBuffers: the runtime's data-parallel buckets, kept for the run:
  ///    the gradient all-reduce's (ZeRO 0), or the reduce-scatter's input,
  ///    its result and gloo's copy of the input, and the parameter
  ///    all-gather's input and result (ZeRO >= 1).
  double stepOutputs = 0, weightImage = 0, lossBuffers = 0, commBuffers = 0;
  double total = 0;
};

/// Micro-batches' worth of one stage's activations alive at once on
/// pipeline rank 0 (docs/pipeline.md's simulator, unit costs): gpipe m;
/// 1f1b and zero-bubble min(p, m); interleaved min(vp + p - 1, vm) chunks of
/// 1/v of a stage each, i.e. p (1 + (p - 1)/(pv)) for m large enough,
/// Korthikanti et al. 2022's factor.
double inFlightMicroBatches(Schedule schedule, int p, int m, int v);

/// The same on pipeline rank `rank` (0 <= rank < p), which starts fewer
/// warm-up forwards the later it sits: gpipe m; 1f1b and zero-bubble
/// min(p - rank, m); interleaved min(2(p - rank - 1) + (v - 1)p + 1, vm)
/// chunks of 1/v (Megatron's warm-up count plus the steady-state one).
double inFlightMicroBatchesOnRank(Schedule schedule, int p, int m, int v,
                                  int rank);

MemoryEstimate memoryPerDevice(const ModelSize &model,
                               const LayoutChoice &layout);

//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

enum class Collective { AllReduce, AllGather, ReduceScatter, AllToAll, SendRecv };
/// The spelling of ClusterSpec::collectives' keys: `all_reduce` ...
const char *collectiveName(Collective kind);

/// How the collective moves data. Hierarchical applies to all-reduce only.
enum class Algorithm { Ring, Tree, Hierarchical };

/// Ok if the collective can be costed: groupSize >= 2 (send/recv: exactly
/// 2), and for a hierarchical all-reduce a group of whole nodes (a multiple
/// of devicesPerNode, more than one node).
Status checkCollective(const ClusterSpec &spec, Collective kind, int groupSize,
                       Algorithm algo);

/// Seconds for one collective over `groupSize` ranks. `bytes` is the size of
/// the whole buffer, as nccl-tests counts it: the all-reduce buffer, the
/// all-gather output, the reduce-scatter input, all-to-all's send buffer,
/// the message of a send/recv. `crossesNodes` picks the inter-node link
/// (otherwise the intra-node one); hierarchical uses both. Where the spec
/// has measured samples for this collective and group size they replace
/// the formula (see measuredSeconds), except for a group of at most a
/// node's devices that crosses nodes (samples that small ran inside one
/// node). Either way the device's
/// collective_overhead_us is added: what a call costs a step beyond its
/// time on idle devices.
double collectiveSeconds(const ClusterSpec &spec, Collective kind,
                         double bytes, int groupSize, bool crossesNodes,
                         Algorithm algo);

/// Where the ranks of a collective's group sit: `perNode` of its `size`
/// on each node it spans (size when it stays in one), and `groupsPerNode`
/// groups like it on each node, communicating at the same time (dp groups
/// differ in their tp coordinate).
struct GroupPlacement {
  int size = 1, perNode = 1, groupsPerNode = 1;
  bool crossesNodes() const { return perNode < size; }
};

/// collectiveSeconds (ring) for a group placed as `g`, with what placement
/// changes: on an inter-node link shared by a node's devices the groups
/// crossing it at once split its bandwidth; with the gloo library an
/// all-reduce over several devices of each of several nodes runs as Weft's
/// runtime does it (an all-reduce inside each node, one between the
/// nodes' first devices, a broadcast inside each node).
double groupCollectiveSeconds(const ClusterSpec &spec, Collective kind,
                              double bytes, const GroupPlacement &g);

/// The α–β formula of collectiveSeconds alone: no measured table, no
/// overhead.
double linkSeconds(const ClusterSpec &spec, Collective kind, double bytes,
                   int groupSize, bool crossesNodes, Algorithm algo);

/// Interpolates the spec's measured samples of `kind` for `groupSize` at
/// `bytes`: linear in bytes between the two neighbouring samples; below the
/// smallest, the line from (0, `zeroBytesSeconds`, at most the smallest's
/// time) to the smallest sample, or with `zeroBytesSeconds` < 0 the
/// smallest's time (latency-bound, not faster); above the largest, the
/// line through the last two (one sample: through the origin). Returns
/// false, leaving `seconds` alone, where there are no such samples.
bool measuredSeconds(const ClusterSpec &spec, Collective kind, double bytes,
                     int groupSize, double &seconds,
                     double zeroBytesSeconds = -1);

//===----------------------------------------------------------------------===//
// Overlap and the pipeline bubble
//===----------------------------------------------------------------------===//

/// Communication not hidden behind computation: max(0, comm - overlappable),
/// where `overlappableSeconds` is the computation that can run meanwhile
/// (for gradient reduction, the backward after the first bucket is ready).
double exposedCommSeconds(double commSeconds, double overlappableSeconds);

/// One step: compute + exposedCommSeconds(comm, overlappable). Assumes the
/// overlapped communication does not slow the computation down.
double stepSeconds(double computeSeconds, double commSeconds,
                   double overlappableSeconds);

/// Idle fraction of the makespan (docs/pipeline.md, F = I = W = 1):
/// gpipe and 1f1b (p-1)/(m+p-1); interleaved (p-1)/(vm+p-1); zero-bubble
/// (ZB-H1) (p-1)/(3m+p-1) for m >= p, and 1 - 3m/(2(m+p)-1) for m < p.
double bubbleFraction(Schedule schedule, int p, int m, int v);

} // namespace planner
} // namespace weft

#endif // WEFT_PLANNER_COSTMODEL_H
