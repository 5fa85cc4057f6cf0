//===- Metrics.h - Per-step training metrics and progress lines -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Two views of the same numbers: a JSON-lines file with one object per step
// (for tools and plots), flushed line by line so a crash loses at most the
// step in flight, and a readable progress line every few steps.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_METRICS_H
#define WEFT_RUNTIME_METRICS_H

#include "weft/Formats/HostArray.h"

#include <cstdint>
#include <cstdio>
#include <string>

namespace weft {
namespace rt {

/// What one training step measured.
struct StepMetrics {
  /// Steps completed, counting this one (1 for the first step).
  int64_t step = 0;
  /// The loss of this step's forward pass (before its update).
  double loss = 0;
  /// The scheduled learning rate the step used.
  double lr = 0;
  /// Wall time of the step, including waiting for its batch.
  double stepTimeS = 0;
  /// Time spent waiting for the batch.
  double dataWaitS = 0;
  double samplesPerS = 0;
  /// Negative for non-token data, and then left out of the JSON.
  double tokensPerS = -1;
  /// The step's loss or gradient norm was not finite and, with
  /// --skip-nonfinite, its update was dropped.
  bool skipped = false;
  /// The global gradient norm before clipping; negative when unknown.
  double gradNorm = -1;
  /// A pipeline's step: the fraction of the ranks' step time spent in
  /// sends and receives, measured, and the schedule's as weftc simulated
  /// it; negative (and left out of the JSON) otherwise.
  double bubble = -1, bubblePredicted = -1;
  /// On a mesh: seconds the step waited for its collectives to finish
  /// (communication not hidden behind computation); negative otherwise.
  double commWaitS = -1;
  /// The plan's predicted step time (weftc --plan or --cluster); negative
  /// when the executable was compiled without one.
  double predictedStepTimeS = -1;
  /// The process's peak resident memory so far (peakRssBytes()), and its
  /// resident memory before the model's buffers were allocated
  /// (currentRssBytes() then): code, libraries, runtime threads. The
  /// difference is what the step's tensors cost, which the planner's memory
  /// model predicts. Negative (and left out of the JSON) when unknown.
  int64_t peakRssBytes = -1, baselineRssBytes = -1;
};

/// The peak resident set size of this process so far, in bytes
/// (getrusage's ru_maxrss); -1 if the system does not say.
int64_t peakRssBytes();
/// The resident set size of this process now, in bytes (/proc/self/statm);
/// -1 where there is no /proc.
int64_t currentRssBytes();

/// `{"step":1,"loss":2.30258512,"lr":0.001,"step_time_s":...,
/// "samples_per_s":...,"tokens_per_s":...,"data_wait_s":...,
/// "peak_rss_bytes":...,"baseline_rss_bytes":...}`, without a
/// newline. Non-finite numbers are written as null (JSON has no NaN).
std::string metricsJsonLine(const StepMetrics &m);

/// Appends metricsJsonLine()s to a file.
class MetricsWriter {
public:
  MetricsWriter() = default;
  MetricsWriter(const MetricsWriter &) = delete;
  MetricsWriter &operator=(const MetricsWriter &) = delete;
  ~MetricsWriter();

  /// Opens `path`. A fresh run (`resumeStep` 0) starts the file over; a
  /// resumed run keeps the lines of steps <= `resumeStep` and drops later
  /// ones (written after the checkpoint it resumes from), so the file reads
  /// as one uninterrupted run.
  Status open(const std::string &path, int64_t resumeStep);
  /// Writes one line and flushes it.
  Status write(const StepMetrics &m);

private:
  std::FILE *file = nullptr;
  std::string path;
};

/// "45s", "2m03s", "1h02m", "3d04h".
std::string formatDuration(double seconds);

/// Builds the progress line printed every --log-every steps:
///   step 40/200 (20%) loss 2.3456 lr 1.0e-03 12.3 ms/step 4321 tok/s eta 2m03s
/// Times and throughput are averaged over the steps since the last line.
class ProgressLog {
public:
  /// `tokensPerStep` is 0 for non-token data, whose throughput is shown in
  /// samples/s.
  ProgressLog(int64_t totalSteps, int64_t samplesPerStep,
              int64_t tokensPerStep);
  /// Accounts for one step. Returns true when a line is due: every
  /// `every` steps, and at the last step.
  bool record(const StepMetrics &m, int64_t every);
  /// The line for the last recorded step; starts a new averaging window.
  std::string line();

private:
  int64_t total, samples, tokens;
  StepMetrics last;
  double windowTime = 0;
  int64_t windowSteps = 0;
};

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_METRICS_H
