//===- ScheduleReport.h - A pipeline's stages and schedule, for people ----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// weftc --mesh pp=N --emit=schedule|schedule-svg: the stages
// --weft-assign-stages cut the model into, costed by an assumed machine,
// and the chosen schedule built, verified and simulated with those costs
// (weft/Transforms/Pipeline/Schedule.h). Private to the driver.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_DRIVER_SCHEDULEREPORT_H
#define WEFT_LIB_DRIVER_SCHEDULEREPORT_H

#include "weft/Planner/ClusterSpec.h"
#include "weft/Transforms/Pipeline/Schedule.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace weft {

/// One entry of the module's `weft.pipeline_stages`, and where it starts.
struct StageSummary {
  int64_t ops = 0;
  /// FLOPs of one micro-batch's forward work.
  int64_t flops = 0;
  /// Trainable values the stage reads (a tied parameter counts on each
  /// stage that reads it).
  int64_t params = 0;
  /// Bytes the stage sends on to the next per micro-batch.
  int64_t bytesSent = 0;
  /// The first parameter the stage's ops read, in program order; empty
  /// when the stage reads none or @forward is gone.
  std::string firstParam;
};

/// Reads `weft.pipeline_stages`; names each stage's first parameter from
/// the stage tags on @forward. Reports a missing or malformed summary on
/// the module.
mlir::FailureOr<std::vector<StageSummary>>
readStageSummary(mlir::ModuleOp module);

/// The machine the costs assume until the planner measures one: a rank
/// computes 100 GFLOP/s and a link moves 1 GB/s.
inline constexpr double kAssumedFlopsPerSecond = 100e9;
inline constexpr double kAssumedBytesPerSecond = 1e9;

/// The machine a schedule is costed on: an assumed one, or a cluster
/// spec's device (fp32 peak x efficiency) and the link between pipeline
/// ranks (intra-node when the ranks fit in one node).
struct ScheduleMachine {
  double flopsPerSecond = kAssumedFlopsPerSecond;
  double bytesPerSecond = kAssumedBytesPerSecond;
  double latencySeconds = 0;
  /// "assuming 100 GFLOP/s per rank and 1 GB/s per link (not measured)".
  std::string description;
};
ScheduleMachine scheduleMachine(const planner::ClusterSpec *cluster,
                                int ranks);

/// Per-stage costs in microseconds: the forward takes the stage's FLOPs
/// at the machine's rate; the backward twice that, split evenly between
/// the input gradient and the weight gradient (each as long as the
/// forward); a transfer takes the link's latency plus the largest stage's
/// bytes sent at its bandwidth (Costs has one latency for every link).
pipeline::Costs estimateStageCosts(llvm::ArrayRef<StageSummary> stages,
                                   const ScheduleMachine &machine);

/// What the report shows.
struct ScheduleRequest {
  pipeline::ScheduleKind kind = pipeline::ScheduleKind::OneFOneB;
  int ranks = 1;
  int microBatches = 1;
  int virtualStages = 1;
  /// The SVG chart instead of the text report.
  bool svg = false;
  /// Costs from this cluster's device and links; null: an assumed machine.
  const planner::ClusterSpec *cluster = nullptr;
};

/// Builds the schedule for `stages` with their estimated costs, verifies
/// and simulates it, and renders the text report (stage table, cost
/// model, timeline, bubble, peak micro-batches in flight) or the SVG chart
/// into `out`. The same inputs give the same bytes.
pipeline::Status renderScheduleReport(llvm::ArrayRef<StageSummary> stages,
                                      const ScheduleRequest &request,
                                      std::string &out);

} // namespace weft

#endif // WEFT_LIB_DRIVER_SCHEDULEREPORT_H
