//===- Simulate.cpp - Timing a pipeline schedule --------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The bubble is measured, not derived from a formula: with equal costs and
// no latency the tests find the textbook numbers, (p-1)/(m+p-1) for GPipe
// and 1F1B, and with real costs the same code gives what the planner needs.
//
//===----------------------------------------------------------------------===//

#include "Rendezvous.h"

#include <algorithm>
#include <cmath>

using namespace weft;
using namespace weft::pipeline;

Costs Costs::uniform(int numModelStages, double forward, double inputGrad,
                     double weightGrad, double transferLatency) {
  Costs c;
  c.forward.assign(numModelStages, forward);
  c.inputGrad.assign(numModelStages, inputGrad);
  c.weightGrad.assign(numModelStages, weightGrad);
  c.transferLatency = transferLatency;
  return c;
}

Status weft::pipeline::checkCosts(int numModelStages, const Costs &costs) {
  size_t n = numModelStages;
  auto bad = [](double x) { return !std::isfinite(x) || x < 0; };
  const std::pair<const char *, const std::vector<double> *> lists[] = {
      {"forward", &costs.forward},
      {"input-gradient", &costs.inputGrad},
      {"weight-gradient", &costs.weightGrad}};
  for (const auto &[name, list] : lists) {
    if (list->size() != n)
      return Status::error(std::string(name) + " costs are given for " +
                           std::to_string(list->size()) +
                           " stages; the schedule has " + std::to_string(n));
    for (size_t i = 0; i < n; ++i)
      if (bad((*list)[i]))
        return Status::error(std::string(name) + " cost of stage " +
                             std::to_string(i) +
                             " must be finite and not negative");
  }
  if (bad(costs.transferLatency))
    return Status::error("transfer latency must be finite and not negative");
  return Status::success();
}

/// When the last rank finishes.
static double makespanOf(const std::vector<std::vector<SimResult::Span>> &spans) {
  double makespan = 0;
  for (const auto &rank : spans)
    for (const SimResult::Span &span : rank)
      makespan = std::max(makespan, span.end);
  return makespan;
}

Status weft::pipeline::simulate(const Schedule &schedule, const Costs &costs,
                                SimResult &out) {
  if (Status st = verifySchedule(schedule); !st.ok())
    return st;
  if (Status st = checkCosts(schedule.numModelStages(), costs); !st.ok())
    return st;
  SimResult result;
  if (Status st = runRendezvous(schedule, costs, result.spans); !st.ok())
    return st;

  int p = schedule.ranks;
  result.makespan = makespanOf(result.spans);
  result.rankBubble.assign(p, 0);
  result.peakActivations.assign(p, 0);
  for (int r = 0; r < p; ++r) {
    double busy = 0;
    int alive = 0;
    const std::vector<Action> &program = schedule.perRank[r];
    // A rank runs its program in order, so counting along it gives the
    // peak at any moment.
    for (size_t i = 0; i < program.size(); ++i) {
      const Action &a = program[i];
      if (a.isCompute())
        busy += result.spans[r][i].end - result.spans[r][i].start;
      if (a.kind == Action::Forward)
        result.peakActivations[r] =
            std::max(result.peakActivations[r], ++alive);
      else if (a.kind == Action::Backward || a.kind == Action::WeightGrad)
        --alive;
    }
    if (result.makespan > 0)
      result.rankBubble[r] = (result.makespan - busy) / result.makespan;
    result.bubble += result.rankBubble[r] / p;
  }
  out = std::move(result);
  return Status::success();
}

Status weft::pipeline::simulateMakespan(const Schedule &schedule,
                                        const Costs &costs, double &makespan) {
  if (Status st = checkCosts(schedule.numModelStages(), costs); !st.ok())
    return st;
  std::vector<std::vector<SimResult::Span>> spans;
  if (Status st = runRendezvous(schedule, costs, spans); !st.ok())
    return st;
  makespan = makespanOf(spans);
  return Status::success();
}
