//===- Schedule.h - Pipeline-parallel schedules as data ---------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A pipeline-parallel training step runs on `p` pipeline ranks, each global
// batch split into `m` micro-batches. A schedule says, per rank, the exact
// order of its computations (forward, backward, or the backward split into
// input gradient and weight gradient) and of its point-to-point messages.
// Schedules are plain data so that the planner can compare them by
// simulation, the partitioner can emit them, and tests can prove them safe
// without running a single kernel.
//
// Model stages: with `v` virtual stages per rank (interleaved 1F1B) the
// model is cut into p*v stages and rank r holds stages r, p+r, 2p+r, ...
// (Megatron-LM's assignment): model stage = chunk * p + rank. Without
// interleaving v == 1 and the model stage is the rank.
//
// Pure C++17; errors are values (rt::Status), as in the runtime's formats.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TRANSFORMS_PIPELINE_SCHEDULE_H
#define WEFT_TRANSFORMS_PIPELINE_SCHEDULE_H

#include "weft/Formats/HostArray.h"

#include <string>
#include <vector>

namespace weft {
namespace pipeline {

using rt::Status;

/// The schedules Weft can build.
enum class ScheduleKind {
  /// All forwards, then all backwards: simplest, holds m micro-batches.
  GPipe,
  /// One forward, one backward in the steady state: GPipe's bubble, at most
  /// p micro-batches alive.
  OneFOneB,
  /// Megatron-LM's interleaved 1F1B over v virtual stages per rank.
  Interleaved,
  /// ZB-H1 (Qi et al., ICLR 2024): 1F1B with the backward split into input
  /// and weight gradients, weight gradients deferred into the bubbles.
  ZeroBubble,
};

/// "gpipe", "1f1b", "interleaved" or "zero-bubble".
const char *getScheduleKindName(ScheduleKind kind);

/// Parses one of the names above into `kind`; anything else is an error
/// that lists the valid names. `kind` is untouched on error.
Status parseScheduleKind(const std::string &name, ScheduleKind &kind);

/// One step of one rank. Sends and receives are blocking and explicit.
struct Action {
  enum Kind {
    Forward,
    /// The full backward of a stage: input and weight gradients together.
    Backward,
    /// The input-gradient half of a split backward (ZB's "B").
    InputGrad,
    /// The weight-gradient half; needs the stage's InputGrad first.
    WeightGrad,
    /// Send a stage's output activation to the rank of the next stage.
    SendActivation,
    /// Receive this stage's input activation from the previous stage's rank.
    RecvActivation,
    /// Send the gradient of a stage's input to the previous stage's rank.
    SendGrad,
    /// Receive the gradient of this stage's output from the next stage's rank.
    RecvGrad,
  };
  Kind kind = Forward;
  /// The pipeline rank that runs the action.
  int rank = 0;
  /// Which of the rank's virtual stages, 0..v-1. A send or receive names
  /// the stage on this rank that produces or consumes the message.
  int chunk = 0;
  int microBatch = 0;
  /// For sends and receives, the other rank; -1 for computations.
  int peer = -1;

  bool isCompute() const { return kind <= WeightGrad; }
  bool isSend() const { return kind == SendActivation || kind == SendGrad; }
  bool isRecv() const { return kind == RecvActivation || kind == RecvGrad; }
  bool operator==(const Action &o) const {
    return kind == o.kind && rank == o.rank && chunk == o.chunk &&
           microBatch == o.microBatch && peer == o.peer;
  }
};

/// Per-rank action lists, executed in order on each rank.
struct Schedule {
  ScheduleKind kind = ScheduleKind::GPipe;
  /// Pipeline ranks (p).
  int ranks = 1;
  /// Micro-batches per global batch (m).
  int microBatches = 1;
  /// Virtual stages per rank (v); 1 unless interleaved.
  int virtualStages = 1;
  /// perRank[r] is rank r's program.
  std::vector<std::vector<Action>> perRank;

  int numModelStages() const { return ranks * virtualStages; }
  int modelStage(const Action &a) const { return a.chunk * ranks + a.rank; }
  int rankOf(int modelStage) const { return modelStage % ranks; }
  int chunkOf(int modelStage) const { return modelStage / ranks; }
};

/// Per-model-stage costs (any time unit): what simulate() runs with, and
/// what buildSchedule() places messages for.
struct Costs {
  /// Indexed by model stage: forward, input-gradient and weight-gradient
  /// time. A full Backward costs inputGrad + weightGrad.
  std::vector<double> forward, inputGrad, weightGrad;
  /// Time a rendezvous transfer holds both ranks.
  double transferLatency = 0;

  /// The same costs for each of `numModelStages` stages.
  static Costs uniform(int numModelStages, double forward, double inputGrad,
                       double weightGrad, double transferLatency = 0);
  /// The time computation `a` of `schedule` takes (0 for a send or receive).
  double of(const Schedule &schedule, const Action &a) const;
};

/// Builds a schedule of `kind` for `ranks` (p) pipeline ranks, `microBatches`
/// (m) and `virtualStages` (v) into `out`. Requires p >= 1 and m >= 1;
/// interleaved needs v >= 2 and m a multiple of p; the others need v == 1.
/// 1f1b and zero-bubble accept m < p: they then fill and drain like GPipe.
/// `costs` must have one finite, non-negative entry per model stage. The
/// order of computations depends only on kind, p, m and v. Sends and
/// receives are placed by running that order with `costs` under
/// rendezvous semantics, each message moving when both its ranks are
/// between computations: the programs record an execution in which every
/// send met its receive, so they cannot deadlock under any costs;
/// verifySchedule checks it anyway. Placement for the costs the schedule
/// will run with avoids a send waiting behind a computation its receiver
/// did not need.
Status buildSchedule(ScheduleKind kind, int ranks, int microBatches,
                     int virtualStages, const Costs &costs, Schedule &out);

/// The same with unit costs (F = B = W = 1, no latency).
Status buildSchedule(ScheduleKind kind, int ranks, int microBatches,
                     int virtualStages, Schedule &out);

/// "F", "B", "I", "W", "SA", "RA", "SG" or "RG".
const char *getActionKindName(Action::Kind kind);

/// Says what `a` does in words for messages: "rank 1 (stage 1) runs F of
/// micro-batch 3", "rank 0 (stage 0) sends the activation of micro-batch 4
/// to rank 1".
std::string describe(const Schedule &schedule, const Action &a);

/// Checks that `schedule` computes one training step and cannot deadlock:
///  - every action is in range and every send/receive names the rank of
///    the neighbouring model stage;
///  - per (model stage, micro-batch): one F; one B, or one I then one W;
///    F before B/I; B/I only once the output gradient is there (received,
///    computed on this rank, or the last stage's loss); W after I;
///  - each activation and gradient crossing ranks is sent once after it is
///    computed and received once before it is used;
///  - on each channel (sender rank, receiver rank) the k-th send and the
///    k-th receive carry the same message (one ordered channel per pair,
///    as with NCCL or gloo point-to-point, whatever the message kind);
///  - executing every rank's list in order, where a send completes only
///    when its peer reaches the matching receive (rendezvous, the
///    strictest model), every rank finishes.
/// The first violation is returned, naming ranks, stages, micro-batches
/// and, for a deadlock, the ranks that wait on each other.
Status verifySchedule(const Schedule &schedule);

/// What simulate() measures.
struct SimResult {
  struct Span {
    double start = 0, end = 0;
  };
  /// spans[r][i]: when perRank[r][i] started and ended. A send or receive
  /// starts when its rank reaches it, so it includes the wait for the peer.
  std::vector<std::vector<Span>> spans;
  /// When the last rank finishes.
  double makespan = 0;
  /// Per rank: time not spent computing (waiting, transfers) / makespan.
  std::vector<double> rankBubble;
  /// The mean of rankBubble.
  double bubble = 0;
  /// Per rank: the most (chunk, micro-batch) pairs alive at once, alive
  /// from F until its B (or W) ends. With v chunks per rank each holds 1/v
  /// of the rank's layers.
  std::vector<int> peakActivations;
};

/// Verifies `schedule`, then runs it with `costs` under rendezvous send and
/// receive semantics (each rank runs its next action as soon as it can).
Status simulate(const Schedule &schedule, const Costs &costs, SimResult &out);

/// simulate()'s makespan alone, for a schedule already verified (one
/// buildSchedule made): the planner runs one schedule with many costs.
Status simulateMakespan(const Schedule &schedule, const Costs &costs,
                        double &makespan);

/// A text Gantt chart: a title line, then one row per rank, one column per
/// time unit (the shortest computation), cells such as "F3", "B2", "I1",
/// "W0" ("F3:1" for chunk 1 when interleaved), "-" where a longer
/// computation continues and "." for idle (waiting or transferring).
std::string renderTimeline(const Schedule &schedule, const SimResult &sim);

/// The same chart as an SVG document: ranks as rows, time to the right,
/// one box per computation with its micro-batch number, a colour per kind
/// and a legend; the title gives kind, p, m, v and the bubble.
std::string renderSvg(const Schedule &schedule, const SimResult &sim);

} // namespace pipeline
} // namespace weft

#endif // WEFT_TRANSFORMS_PIPELINE_SCHEDULE_H
