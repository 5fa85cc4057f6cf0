//===- Search.h - The layout search -----------------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Finds the fastest layout of a training step that fits the devices'
// memory: dp x tp x pp, sequence parallelism, ZeRO stage, recomputation,
// micro-batch size, pipeline schedule (and virtual stages), and the cut of
// the blocks into stages. Every candidate is priced by evaluatePlan from
// ModelStats and the cost model; the search returns exactly the plan that
// evaluating every candidate would (the brute force is an option, and the
// tests compare the two), pruning only what cannot win: memory only grows
// with the micro-batch size, and a candidate whose compute alone is slower
// than a plan already found is skipped. docs/planner.md ("Search") states
// the space, the costs and why the pruning is exact.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PLANNER_SEARCH_H
#define WEFT_PLANNER_SEARCH_H

#include "weft/Planner/CostModel.h"
#include "weft/Planner/ModelStats.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace weft {
namespace planner {

/// What the backward recomputes instead of keeping: nothing; the attention
/// core (Korthikanti et al. 2022's selective recomputation); or whole
/// blocks from their inputs.
enum class Recompute { None, Selective, Full };
const char *recomputeName(Recompute r);
/// Accepts none, selective, full.
Status parseRecompute(const std::string &name, Recompute &r);
/// Also accepts full:K, K >= 1: the first K blocks of each pipeline rank.
Status parseRecompute(const std::string &name, Recompute &r, int &blocks);

struct SearchOptions {
  /// Devices to plan for; 0: all of the spec's nodes x devices_per_node.
  int devices = 0;
  /// The training dtype: compute peak, activation and weight bytes
  /// (bf16/fp16: 2-byte weights and gradients, 12 bytes of f32 master
  /// weights and AdamW moments; fp32: 4, 4 and 8).
  std::string dtype = "bf16";
  /// Device memory bandwidth (GB/s) for the roofline's memory side; 0
  /// takes the spec's device.memory_bandwidth_GBps, and where the spec has
  /// none either, leaves it out, so every op is costed at the compute peak.
  double memoryBandwidthGBps = 0;

  /// Count what a Weft executable holds beyond the textbook parts
  /// (MemoryEstimate::stepOutputs and the rest): the peak resident memory
  /// the executable will measure, rather than what a framework updating in
  /// place would need.
  bool executableMemory = false;

  /// Pins; unset parts are searched.
  int dp = 0, tp = 0, pp = 0;
  int microBatchSize = 0;
  /// One micro-batch per step: the micro-batch size is the batch over dp.
  /// weftc builds its plan with the model's batch as one micro-batch, so a
  /// plan it compiles without a re-exported model has one.
  bool oneMicroBatch = false;
  int zeroStage = -1;
  std::optional<Schedule> schedule;
  int virtualStages = 0;
  std::optional<Recompute> recompute;
  /// With recompute pinned to Full: recompute only the first this many
  /// blocks of each rank (0: all).
  int recomputeBlocks = 0;
  std::optional<bool> sequenceParallel;
  /// The tensor-parallel parts (ModelStats::tpParts, by name) kept
  /// replicated over tp; the rest split Megatron's way. Unset: searched
  /// (a part whose divisor tp does not divide is replicated regardless;
  /// with sequence parallelism none is). Empty: every part split, as
  /// Megatron-LM lays a transformer out.
  std::optional<std::vector<std::string>> tpReplicated;

  /// How the data-parallel gradient reduction runs: Weft's runtime
  /// overlaps it with the backward (buckets) in the gradient dtype. Another
  /// framework's measured steps are predicted with its own behaviour:
  /// Megatron-LM (2021, local DDP) reduces after the whole backward
  /// (dpOverlap false) and, training in bf16, in fp32 (fp32GradReduce).
  bool dpOverlap = true;
  bool fp32GradReduce = false;

  /// How many runner-up meshes to report.
  int alternatives = 5;
  /// false: evaluate every candidate (the brute force the tests compare
  /// against).
  bool prune = true;
};

/// One priced candidate.
struct Plan {
  LayoutChoice layout;
  int microBatchSize = 1;
  Recompute recompute = Recompute::None;
  /// With Recompute::Full: how many blocks of each pipeline rank
  /// recompute, its first ones (Megatron-LM's --recompute-method block;
  /// a rank with fewer recomputes all); 0: every block.
  int recomputeBlocks = 0;
  /// Blocks on each pipeline rank (all its virtual stages together).
  std::vector<int> blocksPerRank;
  /// The tensor-parallel parts kept whole on every tp rank, as a set of
  /// ModelStats::tpParts indices (bit k: part k); the others are split.
  uint32_t tpReplicatedMask = 0;
  /// The same parts by name and the parameters they hold (filled for the
  /// plans a search or evaluatePlan returns): what weftc --plan keeps
  /// replicated (--shard NAME=replicated).
  std::vector<std::string> tpReplicated, tpReplicatedParams;
  /// The tables of the split gather-only parts (TpPart::gatherOnly), which
  /// weftc --plan splits by rows: its Megatron plan leaves them whole.
  std::vector<std::string> tpRowSplitParams;

  double stepSeconds = 0;
  /// stepSeconds = compute + exposedComm + bubble, on the slowest rank.
  double computeSeconds = 0, exposedCommSeconds = 0, bubbleSeconds = 0;
  /// The rank with the most memory, and what it holds.
  MemoryEstimate memory;
  int memoryRank = 0;
  double tokensPerSecond = 0;
  /// Model FLOPs (forward + backward, no recomputation) per device-second,
  /// and that over the device's peak.
  double tflopsPerDevice = 0, mfu = 0;

  bool feasible = false;
  /// For an alternative: why it lost ("slower by 3.2 %", "over memory by
  /// 4.1 GB").
  std::string why;
};

/// What a plan was made for, so its text and JSON stand alone.
struct PlanContext {
  std::string cluster;
  int devices = 0;
  int devicesPerNode = 0;
  double deviceMemoryBytes = 0;
  std::string dtype;
  int64_t globalBatch = 0, seq = 0;
  int numBlocks = 0;
  double params = 0;
};

struct SearchResult {
  PlanContext context;
  /// The fastest feasible plan; if none fits, the one needing the least
  /// memory (feasible = false).
  Plan best;
  /// The best plan of each of the next meshes, fastest first; then, if
  /// there are fewer feasible ones, the meshes nearest to fitting.
  std::vector<Plan> alternatives;
  uint64_t evaluated = 0;
  /// The best plan's step on one device where that is faster than `best`
  /// on all of them (a model too small to gain from the devices), else 0.
  double oneDeviceStepSeconds = 0;
};

/// Runs the search. An error is either a bad option (naming it) or no
/// feasible plan: then `result` still holds the closest plan, and the
/// message says how much memory it needs against the device's.
Status searchPlan(const ModelStats &model, const ClusterSpec &spec,
                  const SearchOptions &options, SearchResult &result);

/// Prices one fully chosen candidate (layout.microBatches is derived from
/// the batch, dp and microBatchSize). Fails on a candidate outside the
/// space (a degree that does not divide, too few blocks for the stages).
Status evaluatePlan(const ModelStats &model, const ClusterSpec &spec,
                    const SearchOptions &options, const LayoutChoice &layout,
                    int microBatchSize, Recompute recompute, Plan &plan,
                    int recomputeBlocks = 0, uint32_t tpReplicatedMask = 0);

/// Whether tp ranks can split at least one of the model's tensor-parallel
/// parts and divide what must split (ModelStats::requiredTpDivisor).
bool tpSplitsSomething(const ModelStats &model, int tp);

/// The parts tp cannot split (their divisor is not a multiple of it): kept
/// replicated in every plan of that tp.
uint32_t forcedTpReplicated(const ModelStats &model, int tp);

/// The set of parts named (ModelStats::tpParts); an error names an unknown
/// one and lists the parts.
Status tpPartMask(const ModelStats &model,
                  const std::vector<std::string> &names, uint32_t &mask);

/// Fills plan.tpReplicated, tpReplicatedParams and tpRowSplitParams from
/// its mask.
void nameTpParts(const ModelStats &model, Plan &plan);

/// The blocks of each pipeline rank, in model order: runs of
/// `blocksPerRank` one after another, or with v > 1 virtual stages chunk c
/// of pp x v equal chunks on rank c mod pp. Empty if they do not add up
/// to `numBlocks`.
std::vector<std::vector<int>>
blocksOfRanks(const std::vector<int> &blocksPerRank, int pp, int v,
              int numBlocks);

/// The blocks `plan` recomputes in full, ascending (of those its ranks
/// hold): none without Recompute::Full, all with recomputeBlocks 0, else
/// the first recomputeBlocks of each rank.
std::vector<int> recomputedBlocks(const Plan &plan);

/// The plan's recomputation in words: "none", "selective", "full", or
/// "full, first K blocks of each stage"; `brief` writes the last "full:K".
std::string recomputeText(const Plan &plan, bool brief = false);

/// The strict order plans are ranked by: step time (to 36 significant
/// bits, so that an ulp apart is a tie), then compute time (of two equally
/// fast plans, the one doing less work: recomputation hidden under an
/// exposed reduction is predicted free, but it still costs the cores),
/// then memory, then the layout's fields, so that ties resolve the same
/// way every run.
bool planBefore(const Plan &a, const Plan &b);

//===----------------------------------------------------------------------===//
// Pieces of the cost, exposed for the unit tests
//===----------------------------------------------------------------------===//

/// Cuts `costs` (one per block, in order) into `parts` contiguous non-empty
/// stages minimizing the largest stage cost, where the first stage also
/// pays `first` and the last `last`. Among optimal cuts, the one that puts
/// the most blocks early. Needs 1 <= parts <= costs.size().
std::vector<int> balancedCut(const std::vector<double> &costs, double first,
                             double last, int parts);

/// Seconds of tensor-parallel communication for one micro-batch through
/// one layer: each of `allReduceBytes` is all-reduced in the forward and
/// in the backward (and once more when the forward is recomputed); with
/// sequence parallelism each all-reduce becomes a reduce-scatter plus an
/// all-gather of the same tensor.
double tpCommSeconds(const ClusterSpec &spec,
                     const std::vector<double> &allReduceBytes, int tp,
                     bool sequenceParallel, bool recomputed);

/// Data-parallel communication one rank does not hide, per step, for a
/// dp group placed as `dp`.
/// `gradBytes` and `paramBytes` are the rank's (after tp), `forwardSeconds`
/// and `backwardSeconds` one micro-batch's compute on the rank, m the
/// micro-batches. ZeRO 0: an all-reduce behind the last backward;
/// 1: a reduce-scatter behind it, then the updated parameters all-gathered;
/// 2: a reduce-scatter behind every micro-batch's backward (the gradients
/// stay sharded), then the all-gather; 3: per micro-batch the parameters
/// gathered behind the forward and again behind the backward, and the
/// gradients reduce-scattered behind the backward.
double dpExposedSeconds(const ClusterSpec &spec, int zeroStage,
                        const GroupPlacement &dp, double gradBytes,
                        double paramBytes, double forwardSeconds,
                        double backwardSeconds, int m);

} // namespace planner
} // namespace weft

#endif // WEFT_PLANNER_SEARCH_H
