//===- Verify.cpp - Proving a pipeline schedule correct and safe ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The checks run from local to global, so that each failure is reported by
// the check that can name it best: a receive that is missing is reported as
// a computation without its input, not as a mispaired channel; a channel
// is compared message by message before execution, so a wrong pairing is
// an error naming both messages, never a hang.
//
//===----------------------------------------------------------------------===//

#include "Rendezvous.h"

#include <algorithm>

using namespace weft;
using namespace weft::pipeline;

namespace {

std::string str(int i) { return std::to_string(i); }

/// "the activation of micro-batch 3" or "the gradient of micro-batch 3".
std::string payload(const Action &a) {
  bool activation =
      a.kind == Action::SendActivation || a.kind == Action::RecvActivation;
  return std::string(activation ? "the activation" : "the gradient") +
         " of micro-batch " + str(a.microBatch);
}

std::string who(const Schedule &s, const Action &a) {
  return "rank " + str(a.rank) + " (stage " + str(s.modelStage(a)) + ")";
}

/// What one (model stage, micro-batch) has done so far.
struct Progress {
  bool forward = false, backward = false, inputGrad = false, weightGrad = false;
  bool activationRecv = false, gradRecv = false;
  bool activationSent = false, gradSent = false;
};

class Checker {
public:
  explicit Checker(const Schedule &s)
      : s(s), m(s.microBatches), numStages(s.numModelStages()) {}

  Status checkShape() const;
  Status checkPrograms();
  Status checkCompleteness() const;
  Status checkChannels() const;

private:
  Progress &at(const Action &a) {
    return progress[(size_t)s.modelStage(a) * m + a.microBatch];
  }
  Status checkAction(const Action &a);
  /// The model stage at the other end of a send or receive.
  int neighbour(const Action &a) const {
    bool down = a.kind == Action::SendActivation || a.kind == Action::RecvGrad;
    return s.modelStage(a) + (down ? 1 : -1);
  }

  const Schedule &s;
  int m, numStages;
  std::vector<Progress> progress;
};

} // namespace

Status Checker::checkShape() const {
  if (s.ranks < 1 || s.microBatches < 1 || s.virtualStages < 1)
    return Status::error("schedule has " + str(s.ranks) + " ranks, " +
                         str(s.microBatches) + " micro-batches and " +
                         str(s.virtualStages) +
                         " virtual stages; each must be at least 1");
  if ((int)s.perRank.size() != s.ranks)
    return Status::error("schedule has " + str(s.ranks) +
                         " ranks but programs for " +
                         str((int)s.perRank.size()));
  // Checked before anything is sized by stages x micro-batches.
  size_t actions = 0, forwards = (size_t)numStages * m;
  for (const std::vector<Action> &program : s.perRank)
    actions += program.size();
  if (actions < forwards)
    return Status::error("schedule has " + std::to_string(actions) +
                         " actions, fewer than the " +
                         std::to_string(forwards) + " forwards of " +
                         str(numStages) + " stages and " + str(m) +
                         " micro-batches");
  for (int r = 0; r < s.ranks; ++r) {
    for (size_t i = 0; i < s.perRank[r].size(); ++i) {
      const Action &a = s.perRank[r][i];
      std::string where =
          "action " + std::to_string(i) + " of rank " + str(r) + " ";
      if (a.kind < Action::Forward || a.kind > Action::RecvGrad)
        return Status::error(where + "has an unknown kind");
      if (a.rank != r)
        return Status::error(where + "says it runs on rank " + str(a.rank));
      if (a.chunk < 0 || a.chunk >= s.virtualStages)
        return Status::error(where + "names chunk " + str(a.chunk) + " of " +
                             str(s.virtualStages));
      if (a.microBatch < 0 || a.microBatch >= m)
        return Status::error(where + "names micro-batch " + str(a.microBatch) +
                             " of " + str(m));
      if (a.isCompute())
        continue;
      int other = neighbour(a);
      if (other < 0 || other >= numStages)
        return Status::error(describe(s, a) + ", but stage " +
                             str(s.modelStage(a)) + " is the " +
                             (other < 0 ? "first" : "last") + " stage");
      if (s.rankOf(other) == r)
        return Status::error(describe(s, a) + ", but the neighbouring stage " +
                             str(other) + " is on the same rank");
      if (a.peer != s.rankOf(other))
        return Status::error(describe(s, a) + ", but the neighbouring stage " +
                             str(other) + " is on rank " +
                             str(s.rankOf(other)));
    }
  }
  return Status::success();
}

Status Checker::checkAction(const Action &a) {
  Progress &p = at(a);
  int stage = s.modelStage(a);
  auto fail = [&](const std::string &why) {
    return Status::error(describe(s, a) + " " + why);
  };
  // Where this stage's input activation or output gradient comes from.
  auto source = [&](int other, const char *what) {
    if (s.rankOf(other) == a.rank)
      return "before stage " + str(other) + " on this rank computes " + what;
    return "before receiving " + std::string(what) + " from rank " +
           str(s.rankOf(other));
  };
  switch (a.kind) {
  case Action::Forward: {
    if (p.forward)
      return fail("a second time");
    bool input = stage == 0 || p.activationRecv ||
                 (s.rankOf(stage - 1) == a.rank &&
                  progress[(stage - 1) * m + a.microBatch].forward);
    if (!input)
      return fail(source(stage - 1, "its input activation"));
    p.forward = true;
    return Status::success();
  }
  case Action::Backward:
  case Action::InputGrad: {
    if (p.backward || p.inputGrad)
      return fail("after its backward already ran");
    if (!p.forward)
      return fail("before its forward (F)");
    bool grad = stage == numStages - 1 || p.gradRecv ||
                (s.rankOf(stage + 1) == a.rank &&
                 (progress[(stage + 1) * m + a.microBatch].backward ||
                  progress[(stage + 1) * m + a.microBatch].inputGrad));
    if (!grad)
      return fail(source(stage + 1, "its output gradient"));
    (a.kind == Action::Backward ? p.backward : p.inputGrad) = true;
    return Status::success();
  }
  case Action::WeightGrad:
    if (p.weightGrad)
      return fail("a second time");
    if (p.backward)
      return fail("after a full backward (B), which computed it already");
    if (!p.inputGrad)
      return fail("before its input gradient (I)");
    p.weightGrad = true;
    return Status::success();
  case Action::SendActivation:
    if (p.activationSent)
      return fail("a second time");
    if (!p.forward)
      return fail("before computing it (F)");
    p.activationSent = true;
    return Status::success();
  case Action::SendGrad:
    if (p.gradSent)
      return fail("a second time");
    if (!p.backward && !p.inputGrad)
      return fail("before computing it (B or I)");
    p.gradSent = true;
    return Status::success();
  case Action::RecvActivation:
  case Action::RecvGrad: {
    bool &received =
        a.kind == Action::RecvActivation ? p.activationRecv : p.gradRecv;
    if (received)
      return fail("a second time");
    received = true;
    return Status::success();
  }
  }
  return Status::success();
}

Status Checker::checkPrograms() {
  progress.assign((size_t)numStages * m, Progress());
  for (const std::vector<Action> &program : s.perRank)
    for (const Action &a : program)
      if (Status st = checkAction(a); !st.ok())
        return st;
  return Status::success();
}

Status Checker::checkCompleteness() const {
  for (int stage = 0; stage < numStages; ++stage) {
    int r = s.rankOf(stage);
    std::string name = "rank " + str(r) + " (stage " + str(stage) + ") ";
    bool sendsDown = stage + 1 < numStages && s.rankOf(stage + 1) != r;
    bool sendsUp = stage > 0 && s.rankOf(stage - 1) != r;
    for (int mb = 0; mb < m; ++mb) {
      const Progress &p = progress[stage * m + mb];
      std::string of = " of micro-batch " + str(mb);
      if (!p.forward)
        return Status::error(name + "never runs F" + of);
      if (p.inputGrad && !p.weightGrad)
        return Status::error(name + "runs I" + of + " but never W");
      if (!p.backward && !p.inputGrad)
        return Status::error(name + "never runs the backward (B, or I and W)" +
                             of);
      if (sendsDown && !p.activationSent)
        return Status::error(name + "never sends the activation" + of +
                             " to rank " + str(s.rankOf(stage + 1)));
      if (sendsUp && !p.gradSent)
        return Status::error(name + "never sends the gradient" + of +
                             " to rank " + str(s.rankOf(stage - 1)));
    }
  }
  return Status::success();
}

Status Checker::checkChannels() const {
  for (int from = 0; from < s.ranks; ++from) {
    for (int to = 0; to < s.ranks; ++to) {
      std::vector<const Action *> sends, recvs;
      for (const Action &a : s.perRank[from])
        if (a.isSend() && a.peer == to)
          sends.push_back(&a);
      for (const Action &a : s.perRank[to])
        if (a.isRecv() && a.peer == from)
          recvs.push_back(&a);
      std::string channel =
          " (channel rank " + str(from) + " -> rank " + str(to) + ")";
      for (size_t k = 0; k < std::min(sends.size(), recvs.size()); ++k) {
        const Action &send = *sends[k], &recv = *recvs[k];
        bool sameKind = (send.kind == Action::SendActivation) ==
                        (recv.kind == Action::RecvActivation);
        if (sameKind && send.microBatch == recv.microBatch &&
            neighbour(send) == s.modelStage(recv))
          continue;
        return Status::error(who(s, recv) + " waits to receive " +
                             payload(recv) + " from rank " + str(from) +
                             ", which sends " + payload(send) + " of stage " +
                             str(s.modelStage(send)) + " next" + channel);
      }
      if (sends.size() != recvs.size())
        return Status::error("rank " + str(from) + " sends " +
                             str((int)sends.size()) + " messages to rank " +
                             str(to) + ", which receives " +
                             str((int)recvs.size()) + channel);
    }
  }
  return Status::success();
}

Status weft::pipeline::runRendezvous(
    const Schedule &s, const Costs &costs,
    std::vector<std::vector<SimResult::Span>> &spans) {
  int p = s.ranks;
  spans.assign(p, {});
  for (int r = 0; r < p; ++r)
    spans[r].resize(s.perRank[r].size());
  std::vector<size_t> pc(p, 0);
  std::vector<double> clock(p, 0);
  auto cost = [&](const Action &a) { return costs.of(s, a); };
  auto current = [&](int r) -> const Action * {
    return pc[r] < s.perRank[r].size() ? &s.perRank[r][pc[r]] : nullptr;
  };
  // Each rank runs as far as it can; a rendezvous moves both ranks. The
  // times do not depend on the order ranks are visited in: each action
  // starts when all it waits for has ended.
  for (bool moved = true; moved;) {
    moved = false;
    for (int r = 0; r < p; ++r) {
      while (const Action *a = current(r)) {
        if (a->isCompute()) {
          spans[r][pc[r]] = {clock[r], clock[r] + cost(*a)};
          clock[r] = spans[r][pc[r]++].end;
          moved = true;
          continue;
        }
        int q = a->peer;
        const Action *b = current(q);
        if (!b || b->peer != r || b->isCompute() || b->isSend() == a->isSend())
          break;
        double end = std::max(clock[r], clock[q]) + costs.transferLatency;
        spans[r][pc[r]++] = {clock[r], end};
        spans[q][pc[q]++] = {clock[q], end};
        clock[r] = clock[q] = end;
        moved = true;
      }
    }
  }

  int first = -1;
  for (int r = 0; r < p && first < 0; ++r)
    if (current(r))
      first = r;
  if (first < 0)
    return Status::success();
  // Every unfinished rank waits on one peer: follow the waits to a cycle.
  std::vector<int> seenAt(p, -1);
  std::vector<int> chain;
  int r = first;
  while (r >= 0 && seenAt[r] < 0 && current(r)) {
    seenAt[r] = (int)chain.size();
    chain.push_back(r);
    r = current(r)->peer;
  }
  std::string message = "deadlock: ";
  size_t begin = r >= 0 && seenAt[r] >= 0 ? seenAt[r] : 0;
  for (size_t i = begin; i < chain.size(); ++i) {
    const Action &a = *current(chain[i]);
    message += i == begin ? "" : ", while ";
    message += who(s, a) + " waits to " + (a.isSend() ? "send " : "receive ") +
               payload(a) + (a.isSend() ? " to rank " : " from rank ") +
               str(a.peer);
  }
  if (r >= 0 && !current(r))
    message += ", which has finished";
  return Status::error(message);
}

Status weft::pipeline::verifySchedule(const Schedule &schedule) {
  Checker checker(schedule);
  if (Status st = checker.checkShape(); !st.ok())
    return st;
  if (Status st = checker.checkPrograms(); !st.ok())
    return st;
  if (Status st = checker.checkCompleteness(); !st.ok())
    return st;
  if (Status st = checker.checkChannels(); !st.ok())
    return st;
  std::vector<std::vector<SimResult::Span>> spans;
  return runRendezvous(
      schedule, Costs::uniform(schedule.numModelStages(), 1, 1, 1), spans);
}
