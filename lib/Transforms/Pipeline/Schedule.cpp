//===- Schedule.cpp - Building pipeline-parallel schedules ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Each kind is an order of computations per rank. Where the sends and
// receives go is decided once for all kinds by running those orders with
// the costs given (unit costs by default): a message moves at a moment
// when both its sender and its receiver are between computations, and is
// written into both programs at that point. The resulting programs are a
// record of one execution in which every send met its receive, so running
// them in order with blocking rendezvous send/recv cannot deadlock
// (whatever the real costs: the waits form the same acyclic order).
// Placing each send right after its compute and each receive right before
// its use, the obvious rule, deadlocks 1F1B: neighbouring ranks both send
// first.
//
//===----------------------------------------------------------------------===//

#include "Rendezvous.h"

#include <algorithm>
#include <deque>
#include <limits>

using namespace weft;
using namespace weft::pipeline;

namespace {

struct KindName {
  ScheduleKind kind;
  const char *name;
};
constexpr KindName kKindNames[] = {
    {ScheduleKind::GPipe, "gpipe"},
    {ScheduleKind::OneFOneB, "1f1b"},
    {ScheduleKind::Interleaved, "interleaved"},
    {ScheduleKind::ZeroBubble, "zero-bubble"},
};

/// Each rank's computations, in the order it runs them.
using Order = std::vector<std::vector<Action>>;

/// Runs each rank's order of computations with the given costs, each
/// computation once its inputs are there, and records computations and
/// messages into the schedule's programs.
class Generator {
public:
  Generator(Schedule &schedule, const Costs &costs, Order order)
      : s(schedule), costs(costs), order(std::move(order)), p(schedule.ranks),
        m(schedule.microBatches), numStages(schedule.numModelStages()),
        forwardDone(numStages * m), inputGradDone(numStages * m),
        activationIn(numStages * m), gradIn(numStages * m) {
    for (int mb = 0; mb < m; ++mb)
      activationIn[idx(0, mb)] = true;
  }

  /// Runs to completion; false if the order stalls (a bug in an order).
  bool run();

private:
  bool ready(const Action &a) const {
    int i = idx(s.modelStage(a), a.microBatch);
    switch (a.kind) {
    case Action::Forward:
      return activationIn[i];
    case Action::Backward:
    case Action::InputGrad:
      return forwardDone[i] && gradIn[i];
    default:
      return inputGradDone[i];
    }
  }

  int idx(int stage, int mb) const { return stage * m + mb; }
  void finish(const Action &a);
  /// Moves every message whose sender and receiver are both free.
  void exchange(double now);

  Schedule &s;
  const Costs &costs;
  Order order;
  int p, m, numStages;
  std::vector<char> forwardDone, inputGradDone, activationIn, gradIn;
  /// Per rank, produced messages not sent yet, in production order.
  std::vector<std::deque<Action>> outbox;
  /// Per rank: busy until endTime, computing running[r] if hasRunning[r]
  /// (else transferring).
  std::vector<char> busy, hasRunning;
  std::vector<double> endTime;
  std::vector<Action> running;
};

} // namespace

double Costs::of(const Schedule &schedule, const Action &a) const {
  int stage = schedule.modelStage(a);
  switch (a.kind) {
  case Action::Forward:
    return forward[stage];
  case Action::Backward:
    return inputGrad[stage] + weightGrad[stage];
  case Action::InputGrad:
    return inputGrad[stage];
  case Action::WeightGrad:
    return weightGrad[stage];
  default:
    return 0;
  }
}


void Generator::finish(const Action &a) {
  int stage = s.modelStage(a);
  int i = idx(stage, a.microBatch);
  auto produce = [&](int to, Action::Kind send, std::vector<char> &local) {
    if (s.rankOf(to) == a.rank) {
      local[idx(to, a.microBatch)] = true;
      return;
    }
    outbox[a.rank].push_back(
        {send, a.rank, a.chunk, a.microBatch, s.rankOf(to)});
  };
  if (a.kind == Action::Forward) {
    forwardDone[i] = true;
    if (stage == numStages - 1)
      gradIn[i] = true;
    else
      produce(stage + 1, Action::SendActivation, activationIn);
  } else if (a.kind == Action::Backward || a.kind == Action::InputGrad) {
    inputGradDone[i] = true;
    if (stage > 0)
      produce(stage - 1, Action::SendGrad, gradIn);
  }
}

void Generator::exchange(double now) {
  double latency = costs.transferLatency;
  for (int r = 0; r < p; ++r) {
    // Per channel the order of production is kept: a message waits behind
    // an earlier one to the same peer.
    std::vector<char> blocked(p);
    for (auto it = outbox[r].begin(); it != outbox[r].end() && !busy[r];) {
      const Action send = *it;
      if (busy[send.peer] || blocked[send.peer]) {
        blocked[send.peer] = true;
        ++it;
        continue;
      }
      bool activation = send.kind == Action::SendActivation;
      int to = s.modelStage(send) + (activation ? 1 : -1);
      Action recv{activation ? Action::RecvActivation : Action::RecvGrad,
                  send.peer, s.chunkOf(to), send.microBatch, r};
      s.perRank[r].push_back(send);
      s.perRank[send.peer].push_back(recv);
      (activation ? activationIn : gradIn)[idx(to, send.microBatch)] = true;
      it = outbox[r].erase(it);
      if (latency > 0) {
        for (int q : {r, send.peer}) {
          busy[q] = true;
          hasRunning[q] = false;
          endTime[q] = now + latency;
        }
      }
    }
  }
}

bool Generator::run() {
  s.perRank.assign(p, {});
  outbox.assign(p, {});
  busy.assign(p, false);
  hasRunning.assign(p, false);
  endTime.assign(p, 0);
  running.assign(p, {});
  std::vector<size_t> next(p, 0);
  for (double now = 0;;) {
    // Sums of costs such as 1/3 round differently on different ranks;
    // ends this close count as simultaneous, or a message would wait for a
    // rank that is all but free.
    double tolerance = 1e-9 * std::max(1.0, now);
    for (int r = 0; r < p; ++r) {
      if (!busy[r] || endTime[r] > now + tolerance)
        continue;
      busy[r] = false;
      if (hasRunning[r])
        finish(running[r]);
    }
    exchange(now);
    for (int r = 0; r < p; ++r) {
      if (busy[r] || next[r] == order[r].size() || !ready(order[r][next[r]]))
        continue;
      const Action &a = order[r][next[r]++];
      s.perRank[r].push_back(a);
      running[r] = a;
      busy[r] = hasRunning[r] = true;
      endTime[r] = now + costs.of(s, a);
    }
    double soonest = std::numeric_limits<double>::infinity();
    for (int r = 0; r < p; ++r)
      if (busy[r])
        soonest = std::min(soonest, endTime[r]);
    if (soonest == std::numeric_limits<double>::infinity()) {
      for (int r = 0; r < p; ++r)
        if (next[r] != order[r].size() || !outbox[r].empty())
          return false;
      return true;
    }
    now = soonest;
  }
}

namespace {

Action compute(Action::Kind kind, int rank, int chunk, int mb) {
  return {kind, rank, chunk, mb, -1};
}

Order gpipe(int p, int m) {
  Order order(p);
  for (int r = 0; r < p; ++r) {
    for (int mb = 0; mb < m; ++mb)
      order[r].push_back(compute(Action::Forward, r, 0, mb));
    for (int mb = 0; mb < m; ++mb)
      order[r].push_back(compute(Action::Backward, r, 0, mb));
  }
  return order;
}

/// Rank r runs p-r-1 forwards ahead, then alternates one forward and one
/// backward, then drains: at most p-r micro-batches alive.
Order oneFOneB(int p, int m) {
  Order order(p);
  for (int r = 0; r < p; ++r) {
    int warmup = std::min(p - r - 1, m);
    for (int mb = 0; mb < warmup; ++mb)
      order[r].push_back(compute(Action::Forward, r, 0, mb));
    for (int i = 0; i < m - warmup; ++i) {
      order[r].push_back(compute(Action::Forward, r, 0, warmup + i));
      order[r].push_back(compute(Action::Backward, r, 0, i));
    }
    for (int mb = m - warmup; mb < m; ++mb)
      order[r].push_back(compute(Action::Backward, r, 0, mb));
  }
  return order;
}

/// Megatron-LM's interleaved 1F1B: the k-th forward of a rank is
/// micro-batch (k / pv) * p + k % p on chunk (k / p) % v, backwards run the
/// chunks in reverse; rank r warms up with 2(p-r-1) + (v-1)p forwards.
Order interleaved(int p, int m, int v) {
  int total = m * v;
  auto at = [&](int r, int k, bool forward) {
    int chunk = (k / p) % v;
    int mb = (k / (p * v)) * p + k % p;
    return forward ? compute(Action::Forward, r, chunk, mb)
                   : compute(Action::Backward, r, v - 1 - chunk, mb);
  };
  Order order(p);
  for (int r = 0; r < p; ++r) {
    int warmup = std::min((p - r - 1) * 2 + (v - 1) * p, total);
    for (int k = 0; k < warmup; ++k)
      order[r].push_back(at(r, k, true));
    for (int i = 0; i < total - warmup; ++i) {
      order[r].push_back(at(r, warmup + i, true));
      order[r].push_back(at(r, i, false));
    }
    for (int k = total - warmup; k < total; ++k)
      order[r].push_back(at(r, k, false));
  }
  return order;
}

/// ZB-H1: 1F1B with the backward split into I and W, where rank r starts
/// its weight gradients r steps late. Only I is on the path back to rank
/// 0, so the drain goes one I per rank instead of one B, and the r late
/// W's fill rank r's idle time at the end. Rank r keeps 1F1B's p-r-1
/// warm-up forwards, so it holds at most (p-r-1) + 1 + r = p micro-batches:
/// 1F1B's peak (rank 0's).
Order zeroBubble(int p, int m) {
  Order order(p);
  for (int r = 0; r < p; ++r) {
    std::vector<Action> &o = order[r];
    int warmup = std::min(p - r - 1, m), weightGrad = 0;
    for (int mb = 0; mb < warmup; ++mb)
      o.push_back(compute(Action::Forward, r, 0, mb));
    for (int i = 0; i < m - warmup; ++i) {
      o.push_back(compute(Action::Forward, r, 0, warmup + i));
      o.push_back(compute(Action::InputGrad, r, 0, i));
      if (i >= r)
        o.push_back(compute(Action::WeightGrad, r, 0, weightGrad++));
    }
    for (int mb = m - warmup; mb < m; ++mb) {
      o.push_back(compute(Action::InputGrad, r, 0, mb));
      o.push_back(compute(Action::WeightGrad, r, 0, weightGrad++));
    }
    while (weightGrad < m)
      o.push_back(compute(Action::WeightGrad, r, 0, weightGrad++));
  }
  return order;
}

} // namespace

const char *weft::pipeline::getScheduleKindName(ScheduleKind kind) {
  for (const KindName &k : kKindNames)
    if (k.kind == kind)
      return k.name;
  return "?";
}

Status weft::pipeline::parseScheduleKind(const std::string &name,
                                         ScheduleKind &kind) {
  std::string valid;
  for (const KindName &k : kKindNames) {
    if (name == k.name) {
      kind = k.kind;
      return Status::success();
    }
    valid += valid.empty() ? "" : ", ";
    valid += k.name;
  }
  return Status::error("unknown pipeline schedule '" + name +
                       "' (valid: " + valid + ")");
}

Status weft::pipeline::buildSchedule(ScheduleKind kind, int ranks,
                                     int microBatches, int virtualStages,
                                     Schedule &out) {
  int numStages = std::max(ranks, 0) * std::max(virtualStages, 0);
  return buildSchedule(kind, ranks, microBatches, virtualStages,
                       Costs::uniform(numStages, 1, 1, 1), out);
}

Status weft::pipeline::buildSchedule(ScheduleKind kind, int ranks,
                                     int microBatches, int virtualStages,
                                     const Costs &costs, Schedule &out) {
  std::string name = getScheduleKindName(kind);
  if (ranks < 1)
    return Status::error(name + " needs at least 1 pipeline rank (got " +
                         std::to_string(ranks) + ")");
  if (microBatches < 1)
    return Status::error(name + " needs at least 1 micro-batch (got " +
                         std::to_string(microBatches) + ")");
  if (kind == ScheduleKind::Interleaved) {
    if (virtualStages < 2)
      return Status::error(
          "interleaved needs at least 2 virtual stages per rank (got " +
          std::to_string(virtualStages) + "); with 1, use 1f1b");
    if (microBatches % ranks != 0)
      return Status::error("interleaved needs the micro-batch count (" +
                           std::to_string(microBatches) +
                           ") to be a multiple of the pipeline ranks (" +
                           std::to_string(ranks) + ")");
  } else if (virtualStages != 1) {
    return Status::error(name + " has 1 virtual stage per rank (got " +
                         std::to_string(virtualStages) +
                         "); use interleaved for more");
  }

  if (Status st = checkCosts(ranks * virtualStages, costs); !st.ok())
    return st;

  Schedule schedule;
  schedule.kind = kind;
  schedule.ranks = ranks;
  schedule.microBatches = microBatches;
  schedule.virtualStages = virtualStages;
  Order order;
  switch (kind) {
  case ScheduleKind::GPipe:
    order = gpipe(ranks, microBatches);
    break;
  case ScheduleKind::OneFOneB:
    order = oneFOneB(ranks, microBatches);
    break;
  case ScheduleKind::Interleaved:
    order = interleaved(ranks, microBatches, virtualStages);
    break;
  case ScheduleKind::ZeroBubble:
    order = zeroBubble(ranks, microBatches);
    break;
  }
  if (!Generator(schedule, costs, std::move(order)).run())
    return Status::error(name + " stalled for p=" + std::to_string(ranks) +
                         " m=" + std::to_string(microBatches) +
                         " v=" + std::to_string(virtualStages) +
                         " (a bug in its order of computations)");
  out = std::move(schedule);
  return Status::success();
}

const char *weft::pipeline::getActionKindName(Action::Kind kind) {
  static const char *const names[] = {"F",  "B",  "I",  "W",
                                      "SA", "RA", "SG", "RG"};
  return names[kind];
}

std::string weft::pipeline::describe(const Schedule &schedule,
                                     const Action &a) {
  std::string who = "rank " + std::to_string(a.rank) + " (stage " +
                    std::to_string(schedule.modelStage(a)) + ")";
  std::string mb = "micro-batch " + std::to_string(a.microBatch);
  std::string peer = "rank " + std::to_string(a.peer);
  switch (a.kind) {
  case Action::SendActivation:
    return who + " sends the activation of " + mb + " to " + peer;
  case Action::RecvActivation:
    return who + " receives the activation of " + mb + " from " + peer;
  case Action::SendGrad:
    return who + " sends the gradient of " + mb + " to " + peer;
  case Action::RecvGrad:
    return who + " receives the gradient of " + mb + " from " + peer;
  default:
    return who + " runs " + getActionKindName(a.kind) + " of " + mb;
  }
}
