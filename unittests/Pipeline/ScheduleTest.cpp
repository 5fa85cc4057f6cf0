//===- ScheduleTest.cpp - Pipeline schedules: build, verify, simulate -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The known results with equal costs (F = B = W = 1, no latency), measured
// by the simulator on the schedules the builder makes: GPipe and 1F1B idle
// (p-1)/(m+p-1) of the time, interleaved 1F1B (p-1)/(vm+p-1) (bubble over
// work (p-1)/(vm), Megatron's number), ZB-H1 (p-1)/(3m+p-1) for m >= p
// (a third of 1F1B's idle time); 1F1B's rank r holds min(p-r, m)
// micro-batches where GPipe holds m. Broken schedules are refused with
// messages naming ranks, stages and micro-batches.
//
//===----------------------------------------------------------------------===//

#include "weft/Transforms/Pipeline/Schedule.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace weft::pipeline;

namespace {

constexpr ScheduleKind kAllKinds[] = {
    ScheduleKind::GPipe, ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
    ScheduleKind::ZeroBubble};

struct Case {
  ScheduleKind kind;
  int p, m, v;
};

std::string name(const Case &c) {
  return std::string(getScheduleKindName(c.kind)) +
         " p=" + std::to_string(c.p) + " m=" + std::to_string(c.m) +
         " v=" + std::to_string(c.v);
}

/// p in 1..4, m in 1..8, v in {2, 3} for interleaved (m a multiple of p).
std::vector<Case> grid() {
  std::vector<Case> cases;
  for (ScheduleKind kind : kAllKinds) {
    for (int p = 1; p <= 4; ++p) {
      for (int m = 1; m <= 8; ++m) {
        if (kind != ScheduleKind::Interleaved) {
          cases.push_back({kind, p, m, 1});
          continue;
        }
        if (m % p != 0)
          continue;
        for (int v : {2, 3})
          cases.push_back({kind, p, m, v});
      }
    }
  }
  return cases;
}

Schedule build(const Case &c) {
  Schedule s;
  Status st = buildSchedule(c.kind, c.p, c.m, c.v, s);
  EXPECT_TRUE(st.ok()) << name(c) << ": " << st.message;
  return s;
}

SimResult run(const Schedule &s, double f = 1, double b = 1, double w = 1,
              double latency = 0) {
  SimResult sim;
  Status st =
      simulate(s, Costs::uniform(s.numModelStages(), f, b, w, latency), sim);
  EXPECT_TRUE(st.ok()) << st.message;
  return sim;
}

int count(const Schedule &s, int rank, Action::Kind kind) {
  return std::count_if(s.perRank[rank].begin(), s.perRank[rank].end(),
                       [&](const Action &a) { return a.kind == kind; });
}

/// Idle time of each rank over its compute time, averaged.
double idleOverWork(const SimResult &sim) {
  return sim.bubble / (1 - sim.bubble);
}

/// Index of the first action of `rank` equal to `a`.
size_t find(const Schedule &s, int rank, Action a) {
  auto &program = s.perRank[rank];
  size_t i = std::find(program.begin(), program.end(), a) - program.begin();
  EXPECT_LT(i, program.size());
  return i;
}

Action comm(Action::Kind kind, int rank, int mb, int peer, int chunk = 0) {
  return {kind, rank, chunk, mb, peer};
}
Action op(Action::Kind kind, int rank, int mb, int chunk = 0) {
  return {kind, rank, chunk, mb, -1};
}

//===----------------------------------------------------------------------===//
// Names and shapes
//===----------------------------------------------------------------------===//

TEST(PipelineKindTest, NamesRoundTrip) {
  for (ScheduleKind kind : kAllKinds) {
    ScheduleKind parsed = ScheduleKind::GPipe;
    ASSERT_TRUE(parseScheduleKind(getScheduleKindName(kind), parsed).ok());
    EXPECT_EQ(parsed, kind);
  }
  EXPECT_STREQ(getScheduleKindName(ScheduleKind::OneFOneB), "1f1b");
  EXPECT_STREQ(getScheduleKindName(ScheduleKind::ZeroBubble), "zero-bubble");
}

TEST(PipelineKindTest, UnknownNameListsValidOnes) {
  ScheduleKind kind = ScheduleKind::Interleaved;
  Status st = parseScheduleKind("zb-h1", kind);
  EXPECT_EQ(st.message, "unknown pipeline schedule 'zb-h1' (valid: gpipe, "
                        "1f1b, interleaved, zero-bubble)");
  EXPECT_EQ(kind, ScheduleKind::Interleaved);
}

TEST(PipelineBuildTest, RefusesBadShapes) {
  Schedule s;
  auto error = [&](ScheduleKind kind, int p, int m, int v) {
    return buildSchedule(kind, p, m, v, s).message;
  };
  EXPECT_EQ(error(ScheduleKind::GPipe, 0, 4, 1),
            "gpipe needs at least 1 pipeline rank (got 0)");
  EXPECT_EQ(error(ScheduleKind::OneFOneB, 2, 0, 1),
            "1f1b needs at least 1 micro-batch (got 0)");
  EXPECT_EQ(error(ScheduleKind::Interleaved, 2, 4, 1),
            "interleaved needs at least 2 virtual stages per rank (got 1); "
            "with 1, use 1f1b");
  EXPECT_EQ(error(ScheduleKind::Interleaved, 4, 6, 2),
            "interleaved needs the micro-batch count (6) to be a multiple of "
            "the pipeline ranks (4)");
  EXPECT_EQ(error(ScheduleKind::ZeroBubble, 2, 4, 2),
            "zero-bubble has 1 virtual stage per rank (got 2); use "
            "interleaved for more");
  Costs wrong = Costs::uniform(3, 1, 1, 1);
  EXPECT_EQ(buildSchedule(ScheduleKind::GPipe, 2, 2, 1, wrong, s).message,
            "forward costs are given for 3 stages; the schedule has 2");
}

//===----------------------------------------------------------------------===//
// Every schedule on the grid
//===----------------------------------------------------------------------===//

TEST(PipelineBuildTest, EveryScheduleVerifies) {
  for (const Case &c : grid()) {
    Schedule s = build(c);
    Status st = verifySchedule(s);
    EXPECT_TRUE(st.ok()) << name(c) << ": " << st.message;
    // Placed for other costs, with latency, the schedule is still safe.
    Costs costs = Costs::uniform(c.p * c.v, 1, 2, 0.5, 0.25);
    ASSERT_TRUE(buildSchedule(c.kind, c.p, c.m, c.v, costs, s).ok());
    st = verifySchedule(s);
    EXPECT_TRUE(st.ok()) << name(c) << " (costs 1/2/0.5/0.25): " << st.message;
  }
}

TEST(PipelineBuildTest, ActionCounts) {
  for (const Case &c : grid()) {
    Schedule s = build(c);
    ASSERT_EQ((int)s.perRank.size(), c.p) << name(c);
    bool split = c.kind == ScheduleKind::ZeroBubble;
    int messages = 0;
    for (int r = 0; r < c.p; ++r) {
      SCOPED_TRACE(name(c) + " rank " + std::to_string(r));
      EXPECT_EQ(count(s, r, Action::Forward), c.v * c.m);
      EXPECT_EQ(count(s, r, Action::Backward), split ? 0 : c.v * c.m);
      EXPECT_EQ(count(s, r, Action::InputGrad), split ? c.m : 0);
      EXPECT_EQ(count(s, r, Action::WeightGrad), split ? c.m : 0);
      // Each of the rank's stages with a neighbour on another rank sends
      // and receives one message per micro-batch each way.
      int down = 0, up = 0;
      for (int chunk = 0; chunk < c.v && c.p > 1; ++chunk) {
        int stage = chunk * c.p + r;
        down += stage + 1 < c.p * c.v;
        up += stage > 0;
      }
      EXPECT_EQ(count(s, r, Action::SendActivation), down * c.m);
      EXPECT_EQ(count(s, r, Action::RecvGrad), down * c.m);
      EXPECT_EQ(count(s, r, Action::RecvActivation), up * c.m);
      EXPECT_EQ(count(s, r, Action::SendGrad), up * c.m);
      messages += count(s, r, Action::SendActivation);
    }
    // One activation and one gradient per micro-batch per stage boundary
    // that crosses ranks (none when one rank holds every stage).
    EXPECT_EQ(messages, c.p > 1 ? (c.p * c.v - 1) * c.m : 0) << name(c);
  }
}

TEST(PipelineBuildTest, Deterministic) {
  for (const Case &c : grid()) {
    Schedule a = build(c), b = build(c);
    EXPECT_EQ(a.perRank, b.perRank) << name(c);
  }
}

//===----------------------------------------------------------------------===//
// Bubbles and memory with equal costs
//===----------------------------------------------------------------------===//

TEST(PipelineSimulateTest, GPipeAndOneFOneBBubble) {
  for (const Case &c : grid()) {
    if (c.kind != ScheduleKind::GPipe && c.kind != ScheduleKind::OneFOneB)
      continue;
    SimResult sim = run(build(c));
    EXPECT_DOUBLE_EQ(sim.makespan, 3.0 * (c.m + c.p - 1)) << name(c);
    EXPECT_NEAR(sim.bubble, double(c.p - 1) / (c.m + c.p - 1), 1e-12)
        << name(c);
  }
}

TEST(PipelineSimulateTest, InterleavedBubble) {
  for (const Case &c : grid()) {
    if (c.kind != ScheduleKind::Interleaved)
      continue;
    SimResult sim = run(build(c));
    EXPECT_NEAR(sim.bubble, double(c.p - 1) / (c.v * c.m + c.p - 1), 1e-12)
        << name(c);
    EXPECT_NEAR(idleOverWork(sim), double(c.p - 1) / (c.v * c.m), 1e-12)
        << name(c);
    if (c.p > 1) {
      SimResult oneFOneB = run(build({ScheduleKind::OneFOneB, c.p, c.m, 1}));
      EXPECT_LT(sim.bubble, oneFOneB.bubble) << name(c);
    }
  }
}

TEST(PipelineSimulateTest, ZeroBubbleBubble) {
  for (const Case &c : grid()) {
    if (c.kind != ScheduleKind::ZeroBubble)
      continue;
    SimResult sim = run(build(c));
    // m >= p: 3m of work and p-1 idle, the F's filling the first ranks'
    // wait. m < p: the last micro-batch's F down and I back, 2(m+p)-1.
    double makespan = c.m >= c.p ? 3 * c.m + c.p - 1 : 2 * (c.m + c.p) - 1;
    EXPECT_DOUBLE_EQ(sim.makespan, makespan) << name(c);
    if (c.p > 1) {
      SimResult oneFOneB = run(build({ScheduleKind::OneFOneB, c.p, c.m, 1}));
      EXPECT_LT(sim.bubble, oneFOneB.bubble) << name(c);
      // A third of 1F1B's idle time, (p-1)(F+B-W) against (p-1)(F+B+W).
      if (c.m >= c.p) {
        EXPECT_NEAR(sim.bubble * sim.makespan,
                    oneFOneB.bubble * oneFOneB.makespan / 3, 1e-9)
            << name(c);
      }
    }
  }
}

TEST(PipelineSimulateTest, PeakActivations) {
  for (const Case &c : grid()) {
    SimResult sim = run(build(c));
    for (int r = 0; r < c.p; ++r) {
      SCOPED_TRACE(name(c) + " rank " + std::to_string(r));
      int peak = sim.peakActivations[r];
      switch (c.kind) {
      case ScheduleKind::GPipe:
        EXPECT_EQ(peak, c.m);
        break;
      case ScheduleKind::OneFOneB:
        EXPECT_EQ(peak, std::min(c.p - r, c.m));
        break;
      case ScheduleKind::Interleaved:
        // Megatron's warm-up plus one, counted in chunks.
        EXPECT_EQ(peak,
                  std::min(2 * (c.p - r - 1) + (c.v - 1) * c.p + 1, c.v * c.m));
        break;
      case ScheduleKind::ZeroBubble:
        // Never above 1F1B's peak (rank 0's); later ranks hold back W's.
        EXPECT_EQ(peak, std::min(c.p, c.m));
        break;
      }
    }
  }
}

TEST(PipelineSimulateTest, ZeroBubbleNeedsWeightGradientsToWin) {
  auto makespan = [](ScheduleKind kind, double f, double b, double w) {
    Costs costs = Costs::uniform(4, f, b, w);
    Schedule s;
    EXPECT_TRUE(buildSchedule(kind, 4, 8, 1, costs, s).ok());
    SimResult sim;
    EXPECT_TRUE(simulate(s, costs, sim).ok());
    return sim.makespan;
  };
  // Without W the split changes nothing; with W, ZB-H1's idle time is
  // (p-1)(F+B-W) where 1F1B's is (p-1)(F+B+W).
  EXPECT_EQ(makespan(ScheduleKind::ZeroBubble, 1, 1, 0), 22);
  EXPECT_EQ(makespan(ScheduleKind::OneFOneB, 1, 1, 0), 22);
  EXPECT_EQ(makespan(ScheduleKind::ZeroBubble, 1, 2, 1), 32 + 3 * 2);
  EXPECT_EQ(makespan(ScheduleKind::OneFOneB, 1, 2, 1), 32 + 3 * 4);
  EXPECT_EQ(makespan(ScheduleKind::ZeroBubble, 2, 1, 1), 32 + 3 * 2);
  EXPECT_EQ(makespan(ScheduleKind::OneFOneB, 2, 1, 1), 32 + 3 * 4);
}

/// The table in docs/pipeline.md: p=4, m=8, F = B = W = 1 per rank's work
/// (an interleaved chunk holds 1/v of it).
TEST(PipelineSimulateTest, DocumentedTable) {
  struct Row {
    ScheduleKind kind;
    int v;
    double makespan, bubble;
    std::vector<int> peak;
  };
  const Row rows[] = {
      {ScheduleKind::GPipe, 1, 33, 9.0 / 33, {8, 8, 8, 8}},
      {ScheduleKind::OneFOneB, 1, 33, 9.0 / 33, {4, 3, 2, 1}},
      {ScheduleKind::Interleaved, 2, 28.5, 3.0 / 19, {11, 9, 7, 5}},
      {ScheduleKind::ZeroBubble, 1, 27, 3.0 / 27, {4, 4, 4, 4}},
  };
  for (const Row &row : rows) {
    double unit = 1.0 / row.v;
    Costs costs = Costs::uniform(4 * row.v, unit, unit, unit);
    Schedule s;
    ASSERT_TRUE(buildSchedule(row.kind, 4, 8, row.v, costs, s).ok());
    SimResult sim;
    ASSERT_TRUE(simulate(s, costs, sim).ok());
    SCOPED_TRACE(getScheduleKindName(row.kind));
    EXPECT_DOUBLE_EQ(sim.makespan, row.makespan);
    EXPECT_NEAR(sim.bubble, row.bubble, 1e-12);
    EXPECT_EQ(sim.peakActivations, row.peak);
  }
}

TEST(PipelineSimulateTest, LatencyHoldsBothRanks) {
  // F0 on rank 0 [0,1], the transfer [1,1.5], F0 and B0 on rank 1
  // [1.5,4.5], the gradient [4.5,5], B0 on rank 0 [5,7].
  Schedule s = build({ScheduleKind::GPipe, 2, 1, 1});
  SimResult sim = run(s, 1, 1, 1, 0.5);
  EXPECT_DOUBLE_EQ(sim.makespan, 7);
  EXPECT_NEAR(sim.rankBubble[0], 4.0 / 7, 1e-12);
  EXPECT_NEAR(sim.rankBubble[1], 4.0 / 7, 1e-12);
}

TEST(PipelineSimulateTest, RefusesBadCosts) {
  Schedule s = build({ScheduleKind::OneFOneB, 2, 2, 1});
  SimResult sim;
  Costs costs = Costs::uniform(2, 1, 1, 1);
  costs.weightGrad[1] = -1;
  EXPECT_EQ(simulate(s, costs, sim).message,
            "weight-gradient cost of stage 1 must be finite and not negative");
  costs = Costs::uniform(2, 1, 1, 1, -0.5);
  EXPECT_EQ(simulate(s, costs, sim).message,
            "transfer latency must be finite and not negative");
}

//===----------------------------------------------------------------------===//
// Broken schedules
//===----------------------------------------------------------------------===//

TEST(PipelineVerifyTest, SwappedSendOrder) {
  // Rank 0 sends micro-batch 1's activation before micro-batch 0's.
  Schedule s = build({ScheduleKind::GPipe, 2, 4, 1});
  std::vector<Action> &rank0 = s.perRank[0];
  Action send0 = comm(Action::SendActivation, 0, 0, 1);
  rank0.erase(rank0.begin() + find(s, 0, send0));
  rank0.insert(rank0.begin() +
                   find(s, 0, comm(Action::SendActivation, 0, 1, 1)) + 1,
               send0);
  EXPECT_EQ(verifySchedule(s).message,
            "rank 1 (stage 1) waits to receive the activation of micro-batch "
            "0 from rank 0, which sends the activation of micro-batch 1 of "
            "stage 0 next (channel rank 0 -> rank 1)");
  SimResult sim;
  EXPECT_FALSE(simulate(s, Costs::uniform(2, 1, 1, 1), sim).ok());
}

TEST(PipelineVerifyTest, MissingRecv) {
  Schedule s = build({ScheduleKind::OneFOneB, 3, 4, 1});
  std::vector<Action> &rank1 = s.perRank[1];
  rank1.erase(rank1.begin() +
              find(s, 1, comm(Action::RecvActivation, 1, 2, 0)));
  EXPECT_EQ(verifySchedule(s).message,
            "rank 1 (stage 1) runs F of micro-batch 2 before receiving its "
            "input activation from rank 0");
}

TEST(PipelineVerifyTest, MissingSend) {
  // Rank 0 still receives the gradient; the per-stage check names the
  // missing send before the channels are compared.
  Schedule s = build({ScheduleKind::ZeroBubble, 2, 2, 1});
  s.perRank[1].erase(s.perRank[1].begin() +
                     find(s, 1, comm(Action::SendGrad, 1, 1, 0)));
  EXPECT_EQ(verifySchedule(s).message,
            "rank 1 (stage 1) never sends the gradient of micro-batch 1 to "
            "rank 0");
}

TEST(PipelineVerifyTest, RecvFromWrongPeer) {
  Schedule s = build({ScheduleKind::GPipe, 3, 2, 1});
  s.perRank[2][find(s, 2, comm(Action::RecvActivation, 2, 0, 1))].peer = 0;
  EXPECT_EQ(verifySchedule(s).message,
            "rank 2 (stage 2) receives the activation of micro-batch 0 from "
            "rank 0, but the neighbouring stage 1 is on rank 1");
}

TEST(PipelineVerifyTest, NaiveOneFOneBDeadlocks) {
  // Each send right after its computation, each receive right before its
  // use: with blocking sends, rank 0 sends micro-batch 1 forward while
  // rank 1 sends micro-batch 0's gradient back, and both wait forever.
  Schedule s;
  s.kind = ScheduleKind::OneFOneB;
  s.ranks = 2;
  s.microBatches = 2;
  s.perRank = {
      {op(Action::Forward, 0, 0), comm(Action::SendActivation, 0, 0, 1),
       op(Action::Forward, 0, 1), comm(Action::SendActivation, 0, 1, 1),
       comm(Action::RecvGrad, 0, 0, 1), op(Action::Backward, 0, 0),
       comm(Action::RecvGrad, 0, 1, 1), op(Action::Backward, 0, 1)},
      {comm(Action::RecvActivation, 1, 0, 0), op(Action::Forward, 1, 0),
       op(Action::Backward, 1, 0), comm(Action::SendGrad, 1, 0, 0),
       comm(Action::RecvActivation, 1, 1, 0), op(Action::Forward, 1, 1),
       op(Action::Backward, 1, 1), comm(Action::SendGrad, 1, 1, 0)},
  };
  EXPECT_EQ(verifySchedule(s).message,
            "deadlock: rank 0 (stage 0) waits to send the activation of "
            "micro-batch 1 to rank 1, while rank 1 (stage 1) waits to send "
            "the gradient of micro-batch 0 to rank 0");
  SimResult sim;
  EXPECT_EQ(simulate(s, Costs::uniform(2, 1, 1, 1), sim).message,
            verifySchedule(s).message);
  // The builder's 1F1B receives micro-batch 1 before sending the gradient.
  Schedule built = build({ScheduleKind::OneFOneB, 2, 2, 1});
  EXPECT_LT(find(built, 1, comm(Action::RecvActivation, 1, 1, 0)),
            find(built, 1, comm(Action::SendGrad, 1, 0, 0)));
}

TEST(PipelineVerifyTest, OrderOfComputations) {
  Case c{ScheduleKind::ZeroBubble, 1, 2, 1};
  Schedule s = build(c);
  std::swap(s.perRank[0][find(s, 0, op(Action::InputGrad, 0, 1))],
            s.perRank[0][find(s, 0, op(Action::WeightGrad, 0, 1))]);
  EXPECT_EQ(verifySchedule(s).message,
            "rank 0 (stage 0) runs W of micro-batch 1 before its input "
            "gradient (I)");

  s = build(c);
  s.perRank[0].erase(s.perRank[0].begin() +
                     find(s, 0, op(Action::WeightGrad, 0, 0)));
  EXPECT_EQ(verifySchedule(s).message,
            "rank 0 (stage 0) runs I of micro-batch 0 but never W");

  s = build({ScheduleKind::GPipe, 1, 2, 1});
  s.perRank[0].insert(s.perRank[0].begin(), op(Action::Backward, 0, 1));
  EXPECT_EQ(verifySchedule(s).message,
            "rank 0 (stage 0) runs B of micro-batch 1 before its forward (F)");

  s = build({ScheduleKind::GPipe, 1, 2, 1});
  s.perRank[0].push_back(op(Action::Forward, 0, 1));
  EXPECT_EQ(verifySchedule(s).message,
            "rank 0 (stage 0) runs F of micro-batch 1 a second time");
}

TEST(PipelineVerifyTest, InterleavedMessagesNameModelStages) {
  // p=2, v=2: rank 1 holds stages 1 and 3 (chunks 0 and 1).
  Schedule s = build({ScheduleKind::Interleaved, 2, 2, 2});
  s.perRank[1].erase(s.perRank[1].begin() +
                     find(s, 1, comm(Action::RecvActivation, 1, 1, 0, 1)));
  EXPECT_EQ(verifySchedule(s).message,
            "rank 1 (stage 3) runs F of micro-batch 1 before receiving its "
            "input activation from rank 0");
}

TEST(PipelineVerifyTest, MalformedSchedules) {
  Schedule s = build({ScheduleKind::GPipe, 2, 2, 1});
  s.perRank.pop_back();
  EXPECT_EQ(verifySchedule(s).message,
            "schedule has 2 ranks but programs for 1");
  s.perRank = {{}, {}};
  EXPECT_EQ(verifySchedule(s).message,
            "schedule has 0 actions, fewer than the 4 forwards of 2 stages "
            "and 2 micro-batches");
  s = build({ScheduleKind::GPipe, 2, 2, 1});
  s.perRank[1][0].microBatch = 7;
  EXPECT_EQ(verifySchedule(s).message,
            "action 0 of rank 1 names micro-batch 7 of 2");
  s = build({ScheduleKind::GPipe, 2, 2, 1});
  s.perRank[1].push_back(comm(Action::SendActivation, 1, 0, 0));
  EXPECT_EQ(verifySchedule(s).message,
            "rank 1 (stage 1) sends the activation of micro-batch 0 to rank "
            "0, but stage 1 is the last stage");
}

//===----------------------------------------------------------------------===//
// Rendering
//===----------------------------------------------------------------------===//

TEST(PipelineRenderTest, TimelineGolden) {
  Schedule s = build({ScheduleKind::GPipe, 2, 2, 1});
  SimResult sim = run(s);
  EXPECT_EQ(renderTimeline(s, sim),
            "gpipe p=2 m=2 v=1: makespan 9, bubble 33.3%\n"
            "rank 0 | F0 F1 .  .  .  B0 -  B1 -\n"
            "rank 1 | .  F0 F1 B0 -  B1 -  .  .\n");
}

TEST(PipelineRenderTest, TimelineOfInterleavedNamesChunks) {
  Schedule s = build({ScheduleKind::Interleaved, 2, 2, 2});
  std::string text = renderTimeline(s, run(s, 1, 1, 0));
  EXPECT_EQ(text.substr(0, text.find('\n', text.find('\n') + 1)),
            "interleaved p=2 m=2 v=2: makespan 10, bubble 20.0%\n"
            "rank 0 | F0:0 F1:0 F0:1 F1:1 .    B0:1 .    B1:1 B0:0 B1:0");
}

TEST(PipelineRenderTest, SvgBoxesAndLegend) {
  Schedule s = build({ScheduleKind::ZeroBubble, 4, 8, 1});
  SimResult sim = run(s);
  std::string svg = renderSvg(s, sim);
  auto occurrences = [&](const std::string &needle) {
    int n = 0;
    for (size_t at = svg.find(needle); at != std::string::npos;
         at = svg.find(needle, at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_EQ(occurrences("<rect class=\"act "), 4 * 8 * 3);
  EXPECT_EQ(occurrences("<rect class=\"act F\""), 4 * 8);
  EXPECT_EQ(occurrences("<rect class=\"act I\""), 4 * 8);
  EXPECT_EQ(occurrences("<rect class=\"act W\""), 4 * 8);
  EXPECT_EQ(occurrences("<rect class=\"idle\""), 4);
  EXPECT_EQ(occurrences("<rect class=\"legend\""), 4);
  for (const char *entry :
       {">F forward<", ">I input gradient<", ">W weight gradient<", ">idle<"})
    EXPECT_EQ(occurrences(entry), 1) << entry;
  EXPECT_EQ(occurrences("backward (input + weight gradient)"), 0);
  EXPECT_EQ(occurrences("zero-bubble p=4 m=8 v=1: makespan 27, bubble 11.1%"),
            1);
  EXPECT_EQ(svg, renderSvg(s, sim));

  Schedule gpipe = build({ScheduleKind::GPipe, 2, 3, 1});
  svg = renderSvg(gpipe, run(gpipe));
  EXPECT_EQ(occurrences("<rect class=\"act B\""), 2 * 3);
  EXPECT_EQ(occurrences(">B backward (input + weight gradient)<"), 1);
  EXPECT_EQ(occurrences(">I input gradient<"), 0);
}

} // namespace
