//===- SearchTest.cpp - The layout search against hand and brute force ----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Each cost piece the search adds (stage cuts, tp and dp communication,
// in-flight micro-batches per rank, one whole plan) against numbers worked
// out by hand in the comments; the pruned search against evaluating every
// candidate, on small handmade models and clusters, including pins and a
// cluster where nothing fits; the plan file round trip and its errors.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/PlanFormat.h"
#include "weft/Planner/Search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <tuple>

using namespace weft::planner;
namespace pipeline = weft::pipeline;

namespace {

void expectNear(double expected, double actual) {
  EXPECT_NEAR(expected, actual, 1e-9 * std::abs(expected) + 1e-15)
      << "expected " << expected << ", got " << actual;
}

/// `nodes` x `perNode` devices: bf16 100 TFLOP/s, 80 GB, 100 GB/s links
/// (10 GB/s between nodes), no latency unless given.
ClusterSpec cluster(int nodes, int perNode, double memoryGB = 80,
                    double latencyUs = 0) {
  ClusterSpec s;
  s.name = "test";
  s.nodes = nodes;
  s.devicesPerNode = perNode;
  s.device.memoryGB = memoryGB;
  s.device.peakTFLOPs = {{"fp32", 50}, {"bf16", 100}, {"fp16", 100}};
  s.intraNode = {100, latencyUs};
  s.interNode = {10, latencyUs};
  return s;
}

//===----------------------------------------------------------------------===//
// Pieces
//===----------------------------------------------------------------------===//

TEST(SearchPieces, BalancedCutMatchesEveryComposition) {
  // Every way to cut n blocks into `parts` non-empty runs; the greedy's
  // largest stage must equal the best of them.
  auto worst = [](const std::vector<double> &c, double first, double last,
                  const std::vector<int> &cut) {
    double w = 0;
    size_t i = 0;
    for (size_t s = 0; s < cut.size(); ++s) {
      double sum = s == 0 ? first : 0;
      for (int k = 0; k < cut[s]; ++k, ++i)
        sum += c[i] + (i + 1 == c.size() ? last : 0);
      w = std::max(w, sum);
    }
    return w;
  };
  std::vector<std::vector<double>> models = {
      {1, 1, 1, 1, 1, 1, 1},
      {3, 1, 4, 1, 5, 9, 2, 6},
      {2, 2, 2, 2, 2, 2},
      {1, 7, 1, 1, 1, 1, 1, 7, 1}};
  for (const auto &c : models)
    for (double first : {0.0, 0.5, 3.0})
      for (double last : {0.0, 2.0, 10.0})
        for (int parts = 1; parts <= int(c.size()); ++parts) {
          double best = INFINITY;
          std::function<void(std::vector<int> &, int)> all =
              [&](std::vector<int> &cut, int left) {
                if (int(cut.size()) == parts - 1) {
                  cut.push_back(left);
                  best = std::min(best, worst(c, first, last, cut));
                  cut.pop_back();
                  return;
                }
                for (int k = 1; k <= left - (parts - 1 - int(cut.size())); ++k) {
                  cut.push_back(k);
                  all(cut, left - k);
                  cut.pop_back();
                }
              };
          std::vector<int> scratch;
          all(scratch, int(c.size()));
          std::vector<int> cut = balancedCut(c, first, last, parts);
          ASSERT_EQ(int(cut.size()), parts);
          int total = 0;
          for (int k : cut) {
            EXPECT_GE(k, 1);
            total += k;
          }
          EXPECT_EQ(total, int(c.size()));
          EXPECT_EQ(best, worst(c, first, last, cut));
        }
}

TEST(SearchPieces, BalancedCutPutsTheHeadOnAShortLastStage) {
  // 8 unit blocks, the last stage also pays 2 (the head): 10 over 3
  // stages needs a stage of at least 4. Even counts 3 | 3 | 2 (+2) reach
  // it, and so does the front-loaded 4 | 3 | 1 (+2), which the cut picks;
  // ignoring the head, 3 | 3 | 2 (+2) and 2 | 3 | 3 (+2 = 5) would tie.
  std::vector<int> cut = balancedCut(std::vector<double>(8, 1.0), 0, 2, 3);
  EXPECT_EQ(cut, (std::vector<int>{4, 3, 1}));
  // Without the head the larger stages go first: 3 | 3 | 2.
  EXPECT_EQ(balancedCut(std::vector<double>(8, 1.0), 0, 0, 3),
            (std::vector<int>{3, 3, 2}));
}

TEST(SearchPieces, InFlightPerRank) {
  // p = 4, m = 8: 1f1b rank r holds p - r; gpipe all m; interleaved v = 2
  // rank 0: min(2*3 + 4 + 1, 16) = 11 chunks of 1/2 = 5.5, rank 3:
  // min(0 + 4 + 1, 16) = 5 chunks = 2.5.
  EXPECT_EQ(4, inFlightMicroBatchesOnRank(Schedule::OneFOneB, 4, 8, 1, 0));
  EXPECT_EQ(1, inFlightMicroBatchesOnRank(Schedule::OneFOneB, 4, 8, 1, 3));
  EXPECT_EQ(2, inFlightMicroBatchesOnRank(Schedule::ZeroBubble, 4, 2, 1, 0));
  EXPECT_EQ(8, inFlightMicroBatchesOnRank(Schedule::GPipe, 4, 8, 1, 3));
  EXPECT_EQ(5.5, inFlightMicroBatchesOnRank(Schedule::Interleaved, 4, 8, 2, 0));
  EXPECT_EQ(2.5, inFlightMicroBatchesOnRank(Schedule::Interleaved, 4, 8, 2, 3));
  // Rank 0 is what inFlightMicroBatches always reported.
  EXPECT_EQ(inFlightMicroBatches(Schedule::Interleaved, 4, 8, 2),
            inFlightMicroBatchesOnRank(Schedule::Interleaved, 4, 8, 2, 0));
}

TEST(SearchPieces, TensorParallelCommunication) {
  ClusterSpec spec = cluster(1, 8, 80, /*latencyUs=*/3);
  // One 1 MB all-reduce over tp = 8 on 100 GB/s, 3 us: ring
  // 2 * 7/8 * 1e6 / 1e11 + 14 * 3e-6 = 17.5 us + 42 us = 59.5 us, forward
  // and backward: 119 us; recomputed forward too: 178.5 us.
  expectNear(119e-6, tpCommSeconds(spec, {1e6}, 8, false, false));
  expectNear(178.5e-6, tpCommSeconds(spec, {1e6}, 8, false, true));
  // Sequence parallel: reduce-scatter + all-gather, each 7/8 * 1e6/1e11 +
  // 7 * 3 us = 29.75 us: the same 59.5 us per all-reduce.
  expectNear(119e-6, tpCommSeconds(spec, {1e6}, 8, true, false));
  // Two tensors, and no communication at tp = 1.
  expectNear(238e-6, tpCommSeconds(spec, {1e6, 1e6}, 8, false, false));
  EXPECT_EQ(0, tpCommSeconds(spec, {1e6}, 1, false, false));
  // tp = 16 over 2 nodes crosses them: 2 * 15/16 * 1e6 / 1e10 + 30 * 3 us
  // = 187.5 + 90 = 277.5 us, twice.
  ClusterSpec two = cluster(2, 8, 80, 3);
  expectNear(555e-6, tpCommSeconds(two, {1e6}, 16, false, false));
}

TEST(SearchPieces, DataParallelExposure) {
  ClusterSpec spec = cluster(1, 8);
  // dp = 4 on 100 GB/s, 4 GB of gradients, 4 GB of parameters:
  // all-reduce 2 * 3/4 * 4e9 / 1e11 = 60 ms; reduce-scatter and
  // all-gather 30 ms each.
  double g = 4e9, p = 4e9;
  // ZeRO 0: 60 ms behind a 50 ms backward: 10 ms exposed.
  expectNear(0.010, dpExposedSeconds(spec, 0, {4, 4, 1}, g, p, 0.02, 0.05, 8));
  // ZeRO 1: the reduce-scatter hides, the 30 ms all-gather does not.
  expectNear(0.030, dpExposedSeconds(spec, 1, {4, 4, 1}, g, p, 0.02, 0.05, 8));
  // ZeRO 2 behind a 20 ms backward, 8 micro-batches: 8 * 10 ms + 30 ms.
  expectNear(0.110, dpExposedSeconds(spec, 2, {4, 4, 1}, g, p, 0.01, 0.02, 8));
  // ZeRO 3, forward 10 ms, backward 20 ms, 8 micro-batches:
  // 8 * ((30 - 10) + (30 - 20) + (30 - 20)) ms = 320 ms.
  expectNear(0.320, dpExposedSeconds(spec, 3, {4, 4, 1}, g, p, 0.01, 0.02, 8));
  // Nothing to reduce at dp = 1.
  EXPECT_EQ(0, dpExposedSeconds(spec, 3, {1, 1, 1}, g, p, 0.01, 0.02, 8));

  // CPU ranks (device.comm_overlap 0): nothing hides, every collective is
  // exposed: ZeRO 0's 60 ms, ZeRO 3's 8 * (30 + 30 + 30) ms.
  spec.device.commOverlap = 0;
  expectNear(0.060, dpExposedSeconds(spec, 0, {4, 4, 1}, g, p, 0.02, 0.05, 8));
  expectNear(0.720, dpExposedSeconds(spec, 3, {4, 4, 1}, g, p, 0.01, 0.02, 8));
  // Half: ZeRO 0's all-reduce behind 25 of the backward's 50 ms.
  spec.device.commOverlap = 0.5;
  expectNear(0.035, dpExposedSeconds(spec, 0, {4, 4, 1}, g, p, 0.02, 0.05, 8));
}

/// One block structure: 1 TFLOP forward per sample (tp splits it), 1e9
/// parameters, 1e6 saved elements (split), 1e5 input elements.
ModelStats simpleModel(int blocks, int64_t batch) {
  ModelStats m;
  m.batch = batch;
  m.seq = 4;
  m.normTokenDims = {4};
  LayerStats block;
  OpCost op;
  op.flops = 1e12;
  op.tpSplit = true;
  block.ops.push_back(op);
  block.params = 1e9;
  block.saved.split = 1e6;
  block.inputElements = 1e5;
  m.classes.push_back(block);
  m.blocks.assign(blocks, 0);
  return m;
}

TEST(SearchPieces, OnePlanByHand) {
  ModelStats model = simpleModel(4, 8);
  ClusterSpec spec = cluster(1, 4);
  SearchOptions o;
  LayoutChoice l;
  l.dp = 2, l.tp = 1, l.pp = 2, l.zeroStage = 1;
  Plan plan;
  Status st = evaluatePlan(model, spec, o, l, /*mbs=*/2, Recompute::None, plan);
  ASSERT_TRUE(st.ok()) << st.message;
  // m = 8 / (2 * 2) = 2. A block: 1e12 / 1e14 = 10 ms forward, 30 ms with
  // the backward; 2 blocks a rank, 2 samples: 120 ms per micro-batch.
  // Stage boundary: 2 samples * 1e5 * 2 B = 4e5 B at 100 GB/s = 4 us, a
  // send forward and one backward: 8 us. T = 120.008 ms.
  // 1F1B bubble 1/3: makespan 2 * T / (2/3) = 360.024 ms.
  // ZeRO 1, dp = 2: grads 2e9 * 2 B = 4 GB, reduce-scatter 1/2 * 4e9/1e11
  // = 20 ms behind an 80 ms backward (hidden); all-gather of 4 GB of
  // parameters 20 ms, exposed. The last stage all-reduces the loss (4
  // bytes) over dp: 2 * 1/2 * 4 B / 100 GB/s = 40 ps; then sends it to
  // rank 0, and each rank its part of the gradient norm to the other: 2
  // messages of 4 bytes, 80 ps. Step 380.024 ms.
  expectNear(0.380024 + 1.2e-10, plan.stepSeconds);
  expectNear(0.240, plan.computeSeconds);
  expectNear(0.020016 + 1.2e-10, plan.exposedCommSeconds);
  expectNear(0.120008, plan.bubbleSeconds);
  EXPECT_EQ(plan.layout.microBatches, 2);
  EXPECT_EQ(plan.blocksPerRank, (std::vector<int>{2, 2}));
  // Rank 0: 2e9 params * (2 + 2 + 12/2) B = 20 GB; activations 2 blocks *
  // 1e6 * 2 B per sample * 2 samples * 2 in flight = 16 MB.
  expectNear(4e9, plan.memory.params);
  expectNear(4e9, plan.memory.grads);
  expectNear(12e9, plan.memory.optimizerState);
  expectNear(16e6, plan.memory.activations);
  expectNear(20.016e9, plan.memory.total);
  EXPECT_EQ(plan.memoryRank, 0);
  // 3 * 4e12 FLOPs * 8 samples over 4 devices and 0.380024 s, of 100
  // TFLOP/s.
  const double step = 0.380024 + 1.2e-10;
  expectNear(9.6e13 / step / 4 / 1e12, plan.tflopsPerDevice);
  expectNear(9.6e13 / step / 4 / 1e14, plan.mfu);
  expectNear(8 * 4 / step, plan.tokensPerSecond);
  EXPECT_TRUE(plan.feasible);
}

/// simpleModel with its one op, its all-reduce of 1e6 elements, its
/// parameters and its saved activations in tensor-parallel part "blk"
/// (tp must divide 4 to split it); with `free`, a second part "free" of
/// one op costing nothing, which any tp splits.
ModelStats partModel(int blocks, int64_t batch, bool free = true) {
  ModelStats m = simpleModel(blocks, batch);
  LayerStats &block = m.classes[0];
  block.ops[0].tpPart = 0;
  block.tpAllReduceElements = {1e6};
  block.tpAllReducePart = {0};
  block.tpShares = {{0, 1e9, 1e6, 0}};
  m.tpParts = {{"blk", {"h.0.w"}, 4}};
  m.tpDivisor = 4;
  if (free) {
    block.ops.push_back({0, 0, true, false, 1});
    m.tpParts.push_back({"free", {"h.0.v"}, 0});
  }
  return m;
}

TEST(SearchPieces, ReplicatedPartByHand) {
  ModelStats model = partModel(1, 4);
  ClusterSpec spec = cluster(1, 2);
  LayoutChoice l;
  l.tp = 2;
  Plan split, whole;
  ASSERT_TRUE(evaluatePlan(model, spec, {}, l, 4, Recompute::None, split).ok());
  ASSERT_TRUE(evaluatePlan(model, spec, {}, l, 4, Recompute::None, whole, 0,
                           /*tpReplicatedMask=*/1)
                  .ok());
  // Split: 1e12 / 2 / 1e14 = 5 ms forward a sample, 15 ms with the
  // backward, 4 samples: 60 ms; the 1e6-element all-reduce of 4 samples in
  // bf16 (8 MB) forward and backward. Whole: 30 ms a sample, 120 ms, and
  // no communication. Either way the gradient norm sums over tp once a
  // step: 4 bytes, 2 * 1/2 * 4 / 100 GB/s = 40 ps.
  const double norm = collectiveSeconds(spec, Collective::AllReduce, 4, 2,
                                        false, Algorithm::Ring);
  expectNear(4e-11, norm);
  expectNear(0.060, split.computeSeconds);
  expectNear(tpCommSeconds(spec, {8e6}, 2, false, false) + norm,
             split.exposedCommSeconds);
  expectNear(0.120, whole.computeSeconds);
  expectNear(norm, whole.exposedCommSeconds);
  EXPECT_TRUE(split.tpReplicated.empty());
  EXPECT_EQ(whole.tpReplicated, (std::vector<std::string>{"blk"}));
  EXPECT_EQ(whole.tpReplicatedParams, (std::vector<std::string>{"h.0.w"}));
  // Parameters 1e9 * (2 + 2 + 12) B: 8 GB a tp rank split, 16 whole; the
  // 1e6 saved elements a sample, 2 B, 4 samples: 4 MB split, 8 whole.
  expectNear(1e9, split.memory.params);
  expectNear(2e9, whole.memory.params);
  expectNear(8e9 + 4e6, split.memory.total);
  expectNear(16e9 + 8e6, whole.memory.total);
  // With sequence parallelism a part that mixes tokens is not priced
  // whole. A token-wise one (an MLP) runs on the rank's half of the
  // tokens: the compute and the saved activations of the split part, no
  // activation collectives, and its 2 GB of bf16 gradients all-reduced
  // over tp once a step.
  l.sequenceParallel = true;
  EXPECT_FALSE(
      evaluatePlan(model, spec, {}, l, 4, Recompute::None, whole, 0, 1).ok());
  model.tpParts[0].tokenWise = true;
  ASSERT_TRUE(evaluatePlan(model, spec, {}, l, 4, Recompute::None, split).ok());
  ASSERT_TRUE(
      evaluatePlan(model, spec, {}, l, 4, Recompute::None, whole, 0, 1).ok());
  expectNear(split.computeSeconds, whole.computeSeconds);
  expectNear(tpCommSeconds(spec, {8e6}, 2, true, false) + norm,
             split.exposedCommSeconds);
  expectNear(collectiveSeconds(spec, Collective::AllReduce, 2e9, 2, false,
                               Algorithm::Ring) +
                 norm,
             whole.exposedCommSeconds);
  expectNear(1e9, split.memory.params);
  expectNear(2e9, whole.memory.params);
  expectNear(split.memory.activations, whole.memory.activations);
}

TEST(SearchExact, APartTpCannotSplitStaysWhole) {
  // tp = 8 does not divide the part's 4: it is whole in every plan, and a
  // pin splitting it says why; tp = 2 and 4 may split it.
  ModelStats model = partModel(2, 8, /*free=*/false);
  EXPECT_EQ(1u, forcedTpReplicated(model, 8));
  EXPECT_EQ(0u, forcedTpReplicated(model, 4));
  // Its only part with a matmul cannot split: tp = 8 splits nothing.
  EXPECT_FALSE(tpSplitsSomething(model, 8));
  EXPECT_TRUE(tpSplitsSomething(model, 4));
  SearchOptions o;
  o.tp = 8;
  SearchResult r;
  Status st = searchPlan(model, cluster(1, 8), o, r);
  EXPECT_NE(st.message.find("--mesh tp=8 splits none of the model's layers"),
            std::string::npos)
      << st.message;
  // With a second part tp = 8 can split, the first stays whole.
  model.classes[0].ops.push_back({1e12, 0, true, false, 1});
  model.classes[0].tpShares.push_back({1, 1e9, 0, 0});
  model.tpParts.push_back({"mlp", {"h.0.fc"}, 64});
  ASSERT_TRUE(searchPlan(model, cluster(1, 8), o, r).ok());
  EXPECT_EQ(r.best.tpReplicatedMask & 1u, 1u);
  o.tpReplicated = std::vector<std::string>{};
  st = searchPlan(model, cluster(1, 8), o, r);
  EXPECT_EQ(st.message,
            "--tp-replicated: tp=8 cannot split tensor-parallel part 'blk' "
            "(its heads and widths have 4 as common divisor): keep it "
            "replicated or pick a tp dividing it");
  o.tpReplicated = std::vector<std::string>{"blk", "mlp"};
  EXPECT_NE(searchPlan(model, cluster(1, 8), o, r)
                .message.find("every layer with a matmul replicated"),
            std::string::npos);
  o.tpReplicated = std::vector<std::string>{"attn"};
  EXPECT_EQ(searchPlan(model, cluster(1, 8), o, r).message,
            "--tp-replicated: the model has no tensor-parallel part 'attn'; "
            "its parts are blk, mlp (weft-plan stats lists them)");
}

TEST(SearchPieces, OpOverheadPerMicroBatchAndRank) {
  // OnePlanByHand's plan with 3 ms a step per op and micro-batch: each
  // rank runs 2 blocks of one op, so a micro-batch costs 6 ms more
  // whatever its size (2 ms of it forward); 2 micro-batches: compute +12
  // ms, and the 1F1B makespan 3 T grows by 18 ms.
  ModelStats model = simpleModel(4, 8);
  ClusterSpec spec = cluster(1, 4);
  LayoutChoice l;
  l.dp = 2, l.tp = 1, l.pp = 2, l.zeroStage = 1;
  Plan bare, over;
  ASSERT_TRUE(evaluatePlan(model, spec, {}, l, 2, Recompute::None, bare).ok());
  spec.device.opOverheadUs = 3000;
  ASSERT_TRUE(evaluatePlan(model, spec, {}, l, 2, Recompute::None, over).ok());
  expectNear(bare.computeSeconds + 0.012, over.computeSeconds);
  expectNear(bare.stepSeconds + 0.018, over.stepSeconds);
  // One device, the whole batch: 4 ops once, 12 ms; in micro-batches of
  // 2, four times. Full recomputation reruns each op's forward third.
  ClusterSpec one = cluster(1, 1);
  one.device.opOverheadUs = 3000;
  LayoutChoice single;
  SearchOptions o;
  o.devices = 1;
  Plan whole, quarters, recomputed;
  ClusterSpec oneBare = cluster(1, 1);
  Plan wholeBare, quartersBare, recomputedBare;
  for (auto [s, w, q, r] :
       {std::tuple{&one, &whole, &quarters, &recomputed},
        std::tuple{&oneBare, &wholeBare, &quartersBare, &recomputedBare}}) {
    ASSERT_TRUE(
        evaluatePlan(model, *s, o, single, 8, Recompute::None, *w).ok());
    ASSERT_TRUE(
        evaluatePlan(model, *s, o, single, 2, Recompute::None, *q).ok());
    ASSERT_TRUE(
        evaluatePlan(model, *s, o, single, 8, Recompute::Full, *r).ok());
  }
  expectNear(wholeBare.computeSeconds + 0.012, whole.computeSeconds);
  expectNear(quartersBare.computeSeconds + 0.048, quarters.computeSeconds);
  expectNear(recomputedBare.computeSeconds + 0.016, recomputed.computeSeconds);
}

TEST(SearchPieces, SequenceParallelOnlyWhereANormSplits) {
  // weftc's sequence parallelism splits layer norms along their tokens: a
  // model without one (RMSNorm written out) is searched without it, and
  // pinning it says why; a norm over 6 tokens splits at tp=2, not at 4.
  ModelStats model = partModel(2, 8);
  model.tpDivisor = 2;
  model.tpParts[0].divisor = 2;
  model.normTokenDims = {6};
  EXPECT_TRUE(model.sequenceParallelSplits(2));
  EXPECT_FALSE(model.sequenceParallelSplits(4));
  model.normTokenDims.clear();
  EXPECT_FALSE(model.sequenceParallelSplits(2));
  SearchOptions o;
  o.tp = 2;
  SearchResult r;
  ASSERT_TRUE(searchPlan(model, cluster(1, 2), o, r).ok());
  EXPECT_FALSE(r.best.layout.sequenceParallel);
  for (const Plan &alt : r.alternatives)
    EXPECT_FALSE(alt.layout.sequenceParallel);
  o.sequenceParallel = true;
  EXPECT_EQ(searchPlan(model, cluster(1, 2), o, r).message,
            "--sequence-parallel=on: sequence parallelism splits layer norms "
            "along the sequence, and the model has none whose sequence "
            "divides by tp=2; leave it out");
  LayoutChoice l;
  l.tp = 2;
  l.sequenceParallel = true;
  Plan p;
  EXPECT_FALSE(
      evaluatePlan(model, cluster(1, 2), {}, l, 8, Recompute::None, p).ok());
}

TEST(SearchExact, ReplicationWhereCommunicationCostsMore) {
  // Pinned tp = 2, 4 samples: splitting the part saves 60 ms of compute
  // (ReplicatedPartByHand) for two all-reduces of 8 MB, 160 us on 100 GB/s
  // links: split. With 40 ms of latency a collective step they cost more
  // than that: whole.
  ModelStats model = partModel(1, 4);
  SearchOptions o;
  o.tp = 2;
  SearchResult fast, slow;
  ASSERT_TRUE(searchPlan(model, cluster(1, 2), o, fast).ok());
  EXPECT_EQ(0u, fast.best.tpReplicatedMask);
  ASSERT_TRUE(searchPlan(model, cluster(1, 2, 80, 40000), o, slow).ok());
  EXPECT_EQ(1u, slow.best.tpReplicatedMask);
  EXPECT_FALSE(slow.best.layout.sequenceParallel);
}

TEST(SearchPieces, GradientReductionAfterTheBackwardInFp32) {
  // OnePlanByHand's layout with ZeRO 0: the 4 GB gradient all-reduce of dp = 2,
  // 2 * 1/2 * 4e9 / 1e11 = 40 ms, hides behind the 80 ms backward.
  ModelStats model = simpleModel(4, 8);
  ClusterSpec spec = cluster(1, 4);
  LayoutChoice l;
  l.dp = 2, l.tp = 1, l.pp = 2, l.zeroStage = 0;
  SearchOptions o;
  Plan overlapped, after, afterFp32;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 2, Recompute::None, overlapped)
                  .ok());
  // Reduced after the backward, all 40 ms are exposed.
  o.dpOverlap = false;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 2, Recompute::None, after).ok());
  expectNear(0.040, after.stepSeconds - overlapped.stepSeconds);
  // In fp32 (4 bytes a gradient instead of bf16's 2): 80 ms.
  o.fp32GradReduce = true;
  ASSERT_TRUE(
      evaluatePlan(model, spec, o, l, 2, Recompute::None, afterFp32).ok());
  expectNear(0.080, afterFp32.stepSeconds - overlapped.stepSeconds);
}

TEST(SearchPieces, RecomputationTradesTimeForMemory) {
  ModelStats model = simpleModel(4, 8);
  model.classes[0].saved = {8e6, 2e6};
  model.classes[0].attentionSaved = {4e6, 0};
  model.classes[0].ops[0].attentionCore = false;
  OpCost core;
  core.flops = 0.5e12;
  core.tpSplit = true;
  core.attentionCore = true;
  model.classes[0].ops.push_back(core);
  ClusterSpec spec = cluster(1, 2);
  SearchOptions o;
  LayoutChoice l;
  l.tp = 2;
  Plan none, sel, full;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 8, Recompute::None, none).ok());
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 8, Recompute::Selective, sel).ok());
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 8, Recompute::Full, full).ok());
  // Per sample and block at tp = 2: forward 1.5e12 / 2 / 1e14 = 7.5 ms.
  // none: 3 x 7.5 = 22.5 ms; selective adds the core's 2.5 ms; full the
  // whole 7.5 ms. 4 blocks, 8 samples.
  expectNear(32 * 0.0225, none.computeSeconds);
  expectNear(32 * 0.025, sel.computeSeconds);
  expectNear(32 * 0.030, full.computeSeconds);
  // Saved bytes per sample and block (2 B each): none 8e6/2 + 2e6 = 6e6
  // elements; selective drops 4e6/2: 4e6; full keeps the 1e5 input and
  // rematerializes one block's 6e6 while it runs back.
  expectNear(8 * 4 * 6e6 * 2, none.memory.activations);
  expectNear(8 * (4 * 4e6 + 2e6) * 2, sel.memory.activations);
  expectNear(8 * (4 * 1e5 + 6e6) * 2, full.memory.activations);
  // Sequence parallel splits the replicated 2e6 as well.
  l.sequenceParallel = true;
  Plan sp;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 8, Recompute::None, sp).ok());
  expectNear(8 * 4 * 5e6 * 2, sp.memory.activations);
}

TEST(SearchPieces, MemoryBoundOpsWithABandwidth) {
  // One op per block: 1e9 FLOPs and 1e9 elements of traffic per sample.
  ModelStats model = simpleModel(1, 8);
  model.classes[0].ops[0] = {1e9, 1e9, false, false};
  ClusterSpec spec = cluster(1, 1);
  LayoutChoice l;
  Plan atPeak, bound;
  SearchOptions o;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 8, Recompute::None, atPeak).ok());
  // Compute side only: 1e9 / 1e14 = 10 us forward, 30 us with the
  // backward, 8 samples: 240 us.
  expectNear(240e-6, atPeak.computeSeconds);
  // 1000 GB/s: 2e9 bytes (bf16) take 2 ms forward, 6 ms with the
  // backward, 8 samples: 48 ms. The optimizer's update now has a price
  // too: 1e9 parameters x 30 B (bf16 weight written and gradient read;
  // f32 master weight and two moments read and written) = 30 ms.
  o.memoryBandwidthGBps = 1000;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 8, Recompute::None, bound).ok());
  expectNear(0.048 + 0.030, bound.computeSeconds);
  expectNear(0.078, bound.stepSeconds);
  // Two micro-batches of 4: the second's gradients join the first's
  // (3 x 2 B per parameter): 6 ms more. ZeRO-1 over dp = 2 halves the
  // update (15 ms) of each rank.
  spec = cluster(1, 2);
  l.dp = 2;
  l.zeroStage = 1;
  l.microBatches = 2;
  Plan accumulated;
  ASSERT_TRUE(
      evaluatePlan(model, spec, o, l, 2, Recompute::None, accumulated).ok());
  expectNear(2 * 2 * 0.006 + 0.006 + 0.015, accumulated.computeSeconds);
}

TEST(SearchPieces, ProductsPricedByShapeClass) {
  // One block of two products, 1e9 FLOPs each per sample: `a` with a
  // weight (a micro-batch of b samples is one product of b x 1e9 FLOPs),
  // `s` of two activations (products of 1e6 FLOPs, however many samples).
  ModelStats model = simpleModel(1, 8);
  OpCost a, s;
  a.flops = s.flops = 1e9;
  a.productFlops = 1e9;
  a.foldsBatch = true;
  s.productFlops = 1e6;
  model.classes[0].ops = {a, s};
  ClusterSpec spec = cluster(1, 1);
  SearchOptions o;
  LayoutChoice l;
  auto step = [&](int mbs) {
    Plan plan;
    l.microBatches = int(8 / mbs);
    Status st = evaluatePlan(model, spec, o, l, mbs, Recompute::None, plan);
    EXPECT_TRUE(st.ok()) << st.message;
    return plan.stepSeconds;
  };
  // No table: both at the peak, 10 us each forward, 60 us a sample with
  // the backward, 8 samples: 480 us, whatever the micro-batch.
  expectNear(480e-6, step(1));
  expectNear(480e-6, step(8));
  // Small products at a quarter of the peak, medium at half, large at it.
  spec.device.gemmEfficiency["bf16"] = {{"small", 0.25}, {"medium", 0.5}};
  // Micro-batches of 1: `a` is one 1e9-FLOP product, medium (at most
  // 2 x 1024^3): 20 us; `s` small: 40 us. 3 x 60 x 8 = 1440 us.
  expectNear(1440e-6, step(1));
  // Of 4: `a` is a 4e9-FLOP product, large: 10 us; `s` still 40 us.
  // 3 x 50 x 8 = 1200 us.
  expectNear(1200e-6, step(4));
  // The search prices the plan it picks as evaluatePlan does, and on one
  // device picks the micro-batch of the largest products.
  SearchResult r;
  ASSERT_TRUE(searchPlan(model, spec, o, r).ok());
  EXPECT_GE(r.best.microBatchSize, 4);
  expectNear(1200e-6, r.best.stepSeconds);
  // Another dtype's table prices nothing.
  spec.device.gemmEfficiency.erase("bf16");
  spec.device.gemmEfficiency["fp32"] = {{"small", 0.25}};
  expectNear(480e-6, step(1));
}

TEST(SearchPieces, BatchNormStatisticsAllReduceOverDp) {
  // Two BatchNorms of 8 channels in the block: every micro-batch each
  // all-reduces its mean and variance (f32, 32 bytes) over dp and their
  // gradients in the backward, nothing hiding them. 10 us latency: a ring
  // of 2 takes 2 * 10 us + 32 B / 100 GB/s each.
  ModelStats model = simpleModel(2, 8);
  ClusterSpec spec = cluster(1, 2, 80, 10);
  LayoutChoice l;
  l.dp = 2;
  l.microBatches = 2;
  Plan plain, normed;
  ASSERT_TRUE(evaluatePlan(model, spec, {}, l, 2, Recompute::None, plain).ok());
  model.classes[0].batchNormChannels = {8, 8};
  ASSERT_TRUE(
      evaluatePlan(model, spec, {}, l, 2, Recompute::None, normed).ok());
  double one = 20e-6 + 32 / 1e11;
  // 2 blocks x 2 BatchNorms x 4 all-reduces x 2 micro-batches.
  expectNear(plain.stepSeconds + 2 * 2 * 4 * 2 * one, normed.stepSeconds);
  expectNear(plain.exposedCommSeconds + 32 * one, normed.exposedCommSeconds);
  // One rank reduces nothing.
  l.dp = 1;
  l.microBatches = 4;
  ASSERT_TRUE(
      evaluatePlan(model, spec, {}, l, 2, Recompute::None, normed).ok());
  model.classes[0].batchNormChannels.clear();
  ASSERT_TRUE(evaluatePlan(model, spec, {}, l, 2, Recompute::None, plain).ok());
  EXPECT_EQ(plain.stepSeconds, normed.stepSeconds);
}

TEST(SearchPieces, APipelineWiderThanANodeSendsOverTheSlowLink) {
  // pp = 4 over 2 nodes of 2: stages 1 and 2 are on different nodes, so
  // the boundaries are paced by the inter-node link (10 GB/s, not 100):
  // 2 samples x 1e5 x 2 B = 4e5 B, 40 us each way, 4 micro-batches; and
  // after the schedule 4 messages of 4 B (the loss, the norm's parts).
  ModelStats model = simpleModel(4, 8);
  ClusterSpec spec = cluster(2, 2);
  SearchOptions o;
  LayoutChoice l;
  l.pp = 4;
  l.microBatches = 4;
  Plan plan;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 2, Recompute::None, plan).ok());
  expectNear(4 * 2 * 4e5 / 10e9 + 4 * 4 / 10e9, plan.exposedCommSeconds);
  // Inside one node of 4 the same pipeline sends at 100 GB/s.
  ClusterSpec one = cluster(1, 4);
  ASSERT_TRUE(evaluatePlan(model, one, o, l, 2, Recompute::None, plan).ok());
  expectNear(4 * 2 * 4e5 / 100e9 + 4 * 4 / 100e9, plan.exposedCommSeconds);
}

TEST(SearchPieces, OnGlooPipelineTransfersHideBehindTheStages) {
  // The same pp = 4 over 2 nodes with Weft's gloo runtime, which posts
  // each recv ahead of its op: the boundaries (40 us across the nodes, 4
  // us inside them) hide behind 60 ms of work a micro-batch, but for the
  // fill and the drain, which wait through the 3 hops each way.
  ModelStats model = simpleModel(4, 8);
  ClusterSpec spec = cluster(2, 2);
  spec.collectiveLibrary = ClusterSpec::Library::Gloo;
  SearchOptions o;
  LayoutChoice l;
  l.pp = 4;
  l.microBatches = 4;
  Plan plan;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 2, Recompute::None, plan).ok());
  double inside = 4e5 / 100e9;
  const double scalars = 4 * 4 / 10e9;
  expectNear(2 * (4e5 / 10e9 + 2 * inside) + scalars, plan.exposedCommSeconds);
  // 4 micro-batches of 60 ms, 1F1B's bubble 3/7 of the makespan.
  expectNear(4 * 0.060 * 7 / 4 + plan.exposedCommSeconds, plan.stepSeconds);
  // A link slower than a stage's work paces the steady state: at 1 MB/s
  // the crossing boundary takes 0.4 s against 60 ms of work, so each
  // micro-batch waits 0.34 s more.
  spec.interNode.bandwidthGBps = 1e-3;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 2, Recompute::None, plan).ok());
  expectNear(4 * (0.4 - 0.060) + 2 * (0.4 + 2 * inside) + 4 * 4 / 1e6,
             plan.exposedCommSeconds);
  // Interleaved, v = 2 on one node: the chain runs through 7 chunks.
  ClusterSpec one = cluster(1, 4);
  one.collectiveLibrary = ClusterSpec::Library::Gloo;
  ModelStats eight = simpleModel(8, 8);
  l.schedule = Schedule::Interleaved;
  l.virtualStages = 2;
  ASSERT_TRUE(evaluatePlan(eight, one, o, l, 2, Recompute::None, plan).ok());
  expectNear(2 * 7 * inside + 4 * 4 / 100e9, plan.exposedCommSeconds);
}

TEST(SearchPieces, UnevenStagesIdleAsTheirScheduleRuns) {
  // 3 blocks and a head costing half a block over pp = 2: the cut gives
  // the stages 2 and 1.5 blocks' work, which the textbook bubble (even
  // stages, each the slowest's) does not see. Small schedules are run with
  // each rank's costs instead.
  ModelStats model = simpleModel(3, 8);
  OpCost head;
  head.flops = 0.5e12;
  head.tpSplit = true;
  model.epilogue.ops.push_back(head);
  ClusterSpec spec = cluster(1, 2);
  spec.collectiveLibrary = ClusterSpec::Library::Gloo;
  SearchOptions o;
  LayoutChoice l;
  l.pp = 2;
  l.microBatches = 4;
  l.schedule = Schedule::ZeroBubble;
  Plan plan;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 2, Recompute::None, plan).ok());
  ASSERT_EQ(plan.blocksPerRank, (std::vector<int>{2, 1}));
  // Per micro-batch of 2 samples at fp32's 50 TFLOP/s: rank 0 forwards 2
  // blocks (40 ms), rank 1 a block and the head (30 ms); the input and
  // the weight gradient each cost a forward.
  pipeline::Schedule zb;
  ASSERT_TRUE(pipeline::buildSchedule(Schedule::ZeroBubble, 2, 4, 1, zb).ok());
  pipeline::Costs costs;
  costs.forward = costs.inputGrad = costs.weightGrad = {0.040, 0.030};
  pipeline::SimResult sim;
  ASSERT_TRUE(pipeline::simulate(zb, costs, sim).ok());
  // The fill and the drain wait one 4 us hop each.
  double hops = 2 * 4e5 / 100e9;
  expectNear(sim.makespan + hops, plan.stepSeconds);
  expectNear(4 * 0.120, plan.computeSeconds);
  expectNear(sim.makespan - 4 * 0.120, plan.bubbleSeconds);
  // Not the formula's (p - 1) / (3m + p - 1) of the slowest rank's work:
  // the lighter rank 1 closes part of the gap.
  double formula = 4 * 0.120 / (1 - 1.0 / 13);
  EXPECT_LT(sim.makespan, formula * 0.99);
  // Even stages keep the formula's number (the other tests' plans).
  costs.forward = costs.inputGrad = costs.weightGrad = {0.040, 0.040};
  ASSERT_TRUE(pipeline::simulate(zb, costs, sim).ok());
  expectNear(4 * 0.120 / (1 - 1.0 / 13), sim.makespan);
}

TEST(SearchPieces, PipelineStagesSwapATiedParameterGradient) {
  // GPT's embedding and head: 1e8 elements the prologue owns and the
  // epilogue reads. At pp = 2 the first and last ranks swap their bf16
  // gradient shares once a step: 2e8 B at 100 GB/s = 2 ms, exposed.
  ModelStats model = simpleModel(2, 8);
  ClusterSpec spec = cluster(1, 2);
  SearchOptions o;
  LayoutChoice l;
  l.pp = 2;
  l.microBatches = 8;
  Plan untied, tied;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 1, Recompute::None, untied).ok());
  model.tiedElements = 1e8;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 1, Recompute::None, tied).ok());
  expectNear(0.002, tied.exposedCommSeconds - untied.exposedCommSeconds);
  expectNear(0.002, tied.stepSeconds - untied.stepSeconds);
  // At pp = 2 x dp = 2 each rank swaps its own half, as weftc compiles
  // it: 1e8 B each, 1 ms. Before, it reduce-scatters the gradient over dp
  // (2e8 B, half of it moving: 1 ms); after, at ZeRO 0, it gathers the
  // summed gradient and updates the whole parameter (2e8 B, half moving:
  // 1 ms). The rest of the dp all-reduce hides behind the backward either
  // way.
  ClusterSpec four = cluster(1, 4);
  l.dp = 2;
  l.microBatches = 4;
  ASSERT_TRUE(evaluatePlan(model, four, o, l, 1, Recompute::None, tied).ok());
  model.tiedElements = 0;
  ASSERT_TRUE(evaluatePlan(model, four, o, l, 1, Recompute::None, untied).ok());
  expectNear(0.001 + 0.001 + 0.001, tied.stepSeconds - untied.stepSeconds);
  // ZeRO 1 keeps the optimizer state sharded: the blocks are updated
  // there and the parameter gathered back (2e8 B of bf16 weights, 1 ms),
  // as every parameter's is at ZeRO 1, tied or not; the swap (1 ms) and
  // the reduce-scatter (1 ms, which the untied step hides behind the
  // backward) are what the tie adds.
  l.zeroStage = 1;
  model.tiedElements = 1e8;
  ASSERT_TRUE(evaluatePlan(model, four, o, l, 1, Recompute::None, tied).ok());
  model.tiedElements = 0;
  ASSERT_TRUE(evaluatePlan(model, four, o, l, 1, Recompute::None, untied).ok());
  expectNear(0.001 + 0.001, tied.stepSeconds - untied.stepSeconds);
  l.zeroStage = 0;
  model.tiedElements = 1e8;
  l.dp = 1;
  l.microBatches = 8;
  // One rank holds both ends: nothing crosses.
  l.pp = 1;
  Plan one;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 1, Recompute::None, one).ok());
  model.tiedElements = 0;
  Plan oneUntied;
  ASSERT_TRUE(
      evaluatePlan(model, spec, o, l, 1, Recompute::None, oneUntied).ok());
  expectNear(oneUntied.stepSeconds, one.stepSeconds);
}

TEST(SearchPieces, InterleavedChunksAndTheirMemory) {
  // 8 blocks, p = 2, v = 2: chunks of 2 blocks, rank 0 holds chunks 0 and
  // 2 (blocks 0, 1, 4, 5). m = 16 / 4 = 4; rank 0 keeps
  // min(2 + 2 + 1, 8) = 5 chunks = 2.5 stages' worth of its 4 blocks'
  // 1e6 elements (2 B) per sample, 4 samples a micro-batch: 80 MB.
  ModelStats model = simpleModel(8, 16);
  ClusterSpec spec = cluster(1, 2);
  LayoutChoice l;
  l.pp = 2;
  l.schedule = Schedule::Interleaved;
  l.virtualStages = 2;
  Plan plan;
  SearchOptions o;
  Status st = evaluatePlan(model, spec, o, l, 4, Recompute::None, plan);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(plan.blocksPerRank, (std::vector<int>{4, 4}));
  expectNear(4 * 4 * 1e6 * 2 * 2.5, plan.memory.activations);
  // Bubble (p-1)/(vm+p-1) = 1/9 of the makespan: busy time is 4 micro-
  // batches of 4 samples x 4 blocks x 30 ms plus 4 boundary sends each
  // (4 x 1e5 x 2 B at 100 GB/s = 8 us): 4 x 0.480032 s.
  double busy = 4 * (0.48 + 4 * 8e-6);
  expectNear(busy / 8, plan.bubbleSeconds);
  // 7 blocks cannot be cut into 2 x 2 equal chunks.
  ModelStats odd = simpleModel(7, 16);
  EXPECT_FALSE(evaluatePlan(odd, spec, o, l, 4, Recompute::None, plan).ok());
}

//===----------------------------------------------------------------------===//
// Exactness: pruned search == brute force
//===----------------------------------------------------------------------===//

/// Two alternating block structures (attention-like and MLP-like), an
/// embedding and a head, tp all-reduces: a small model every part of the
/// cost touches.
ModelStats mixedModel(int blocks, int64_t batch) {
  ModelStats m;
  m.batch = batch;
  m.seq = 64;
  m.normTokenDims = {64};
  m.tpDivisor = 8;
  LayerStats a, b;
  a.ops = {{2e11, 1e8, true, false}, {4e10, 4e8, true, true},
           {1e7, 2e8, false, false}};
  a.params = 3e8;
  a.saved = {6e6, 2e6};
  a.attentionSaved = {3e6, 0};
  a.inputElements = 5e5;
  a.tpAllReduceElements = {5e5};
  b.ops = {{4e11, 2e8, true, false}, {1e7, 2e8, false, false}};
  b.params = 6e8;
  b.saved = {8e6, 1e6};
  b.inputElements = 5e5;
  b.tpAllReduceElements = {5e5};
  m.classes = {a, b};
  for (int i = 0; i < blocks; ++i)
    m.blocks.push_back(i % 2);
  m.prologue.ops = {{1e8, 1e8, true, false}};
  m.prologue.params = 2e8;
  m.prologue.tpAllReduceElements = {5e5};
  m.epilogue.ops = {{3e11, 3e8, true, false}};
  m.epilogue.params = 1e8;
  m.epilogue.saved = {1e7, 5e5};
  m.epilogue.inputElements = 5e5;
  return m;
}

void expectSamePlan(const Plan &a, const Plan &b) {
  EXPECT_EQ(a.layout.dp, b.layout.dp);
  EXPECT_EQ(a.layout.tp, b.layout.tp);
  EXPECT_EQ(a.layout.pp, b.layout.pp);
  EXPECT_EQ(a.layout.zeroStage, b.layout.zeroStage);
  EXPECT_EQ(a.layout.sequenceParallel, b.layout.sequenceParallel);
  EXPECT_EQ(a.layout.schedule, b.layout.schedule);
  EXPECT_EQ(a.layout.virtualStages, b.layout.virtualStages);
  EXPECT_EQ(a.layout.microBatches, b.layout.microBatches);
  EXPECT_EQ(a.microBatchSize, b.microBatchSize);
  EXPECT_EQ(a.recompute, b.recompute);
  EXPECT_EQ(a.recomputeBlocks, b.recomputeBlocks);
  EXPECT_EQ(a.blocksPerRank, b.blocksPerRank);
  EXPECT_EQ(a.tpReplicatedMask, b.tpReplicatedMask);
  EXPECT_EQ(a.tpReplicated, b.tpReplicated);
  // Bit for bit: both come from the same evaluator.
  EXPECT_EQ(a.stepSeconds, b.stepSeconds);
  EXPECT_EQ(a.memory.total, b.memory.total);
  EXPECT_EQ(a.feasible, b.feasible);
  EXPECT_EQ(a.why, b.why);
}

struct Case {
  ModelStats model;
  ClusterSpec spec;
  SearchOptions options;
};

void expectPrunedEqualsBruteForce(const Case &c) {
  SearchOptions pruned = c.options, brute = c.options;
  pruned.prune = true;
  brute.prune = false;
  SearchResult rp, rb;
  Status sp = searchPlan(c.model, c.spec, pruned, rp);
  Status sb = searchPlan(c.model, c.spec, brute, rb);
  EXPECT_EQ(sp.message, sb.message);
  expectSamePlan(rp.best, rb.best);
  ASSERT_EQ(rp.alternatives.size(), rb.alternatives.size());
  for (size_t i = 0; i < rp.alternatives.size(); ++i)
    expectSamePlan(rp.alternatives[i], rb.alternatives[i]);
  // Pruning must have something to prune for the test to mean anything.
  EXPECT_LE(rp.evaluated, rb.evaluated);
}

TEST(SearchExact, PrunedEqualsBruteForceAcrossClustersAndMemory) {
  int cases = 0, pruning = 0;
  for (int blocks : {4, 6, 8})
    for (int64_t batch : {8, 16})
      for (auto [nodes, perNode] : {std::pair{1, 4}, {2, 4}, {1, 8}})
        for (double memoryGB : {4.0, 8.0, 16.0, 80.0}) {
          Case c{mixedModel(blocks, batch),
                 cluster(nodes, perNode, memoryGB, 2), {}};
          SCOPED_TRACE(::testing::Message()
                       << blocks << " blocks, batch " << batch << ", "
                       << nodes << "x" << perNode << ", " << memoryGB
                       << " GB");
          expectPrunedEqualsBruteForce(c);
          SearchResult rp, rb;
          c.options.prune = true;
          (void)searchPlan(c.model, c.spec, c.options, rp);
          c.options.prune = false;
          (void)searchPlan(c.model, c.spec, c.options, rb);
          pruning += rp.evaluated < rb.evaluated;
          ++cases;
        }
  // Most cases prune something; none may change the answer.
  EXPECT_GT(pruning, cases / 2);
}

/// mixedModel with tensor-parallel parts: the embedding and head (tied,
/// no constraint), block a's attention (4 heads) and block b's MLP.
ModelStats mixedModelWithParts(int blocks, int64_t batch) {
  ModelStats m = mixedModel(blocks, batch);
  m.tpParts = {{"wte", {"wte"}, 0},
               {"attn", {"a.q", "a.o"}, 4},
               {"mlp", {"b.fc", "b.proj"}, 16}};
  m.tpParts[2].tokenWise = true;
  m.tpDivisor = 4;
  m.outputTpPart = 0;
  LayerStats &a = m.classes[0], &b = m.classes[1];
  a.ops[0].tpPart = a.ops[1].tpPart = 1;
  a.tpAllReducePart = {1};
  a.tpShares = {{1, 2e8, 5e6, 3e6}};
  b.ops[0].tpPart = 2;
  b.tpAllReducePart = {2};
  b.tpShares = {{2, 5e8, 7e6, 0}};
  m.prologue.ops[0].tpPart = 0;
  m.prologue.tpAllReducePart = {0};
  m.prologue.tpShares = {{0, 2e8, 0, 0}};
  m.epilogue.ops[0].tpPart = 0;
  m.epilogue.tpShares = {{0, 0, 1e7, 0}};
  return m;
}

TEST(SearchExact, PrunedEqualsBruteForceWithTensorParallelParts) {
  // Collective latency from 2 us to 2 ms: from splitting every part to
  // keeping most whole.
  int cases = 0, replicating = 0;
  for (int blocks : {4, 8})
    for (auto [nodes, perNode] : {std::pair{1, 4}, {2, 4}, {1, 8}})
      for (double memoryGB : {8.0, 80.0})
        for (double latencyUs : {2.0, 200.0, 2000.0})
          for (int tp : {0, 2, 8}) {
            Case c{mixedModelWithParts(blocks, 16),
                   cluster(nodes, perNode, memoryGB, latencyUs),
                   {}};
            c.options.tp = tp;
            if (tp > perNode * nodes)
              continue;
            SCOPED_TRACE(::testing::Message()
                         << blocks << " blocks, " << nodes << "x" << perNode
                         << ", " << memoryGB << " GB, " << latencyUs
                         << " us, tp " << tp);
            expectPrunedEqualsBruteForce(c);
            SearchResult r;
            if (searchPlan(c.model, c.spec, c.options, r).ok()) {
              replicating += r.best.tpReplicatedMask != 0;
              // Sequence parallel plans keep only token-wise parts whole.
              EXPECT_FALSE(r.best.layout.sequenceParallel &&
                           (r.best.tpReplicatedMask & ~4u));
            }
            ++cases;
          }
  EXPECT_GT(replicating, 0);
  EXPECT_LT(replicating, cases);
}

// GEMM shape classes make a rank's per-sample compute depend on the
// micro-batch; the bounds that prune take the fastest class, so they stay
// below every plan.
TEST(SearchExact, PrunedEqualsBruteForceWithShapeClasses) {
  for (int blocks : {4, 8})
    for (double memoryGB : {8.0, 80.0}) {
      Case c{mixedModelWithParts(blocks, 16), cluster(2, 4, memoryGB, 2), {}};
      for (LayerStats *s : {&c.model.classes[0], &c.model.classes[1],
                            &c.model.prologue, &c.model.epilogue})
        for (OpCost &op : s->ops) {
          op.productFlops = op.flops / 8;
          op.foldsBatch = !op.attentionCore;
        }
      c.spec.device.gemmEfficiency["bf16"] = {
          {"small", 0.3}, {"medium", 0.6}, {"large", 0.9}};
      SCOPED_TRACE(::testing::Message()
                   << blocks << " blocks, " << memoryGB << " GB");
      expectPrunedEqualsBruteForce(c);
      SearchResult r;
      ASSERT_TRUE(searchPlan(c.model, c.spec, c.options, r).ok());
      Plan again;
      ASSERT_TRUE(evaluatePlan(c.model, c.spec, c.options, r.best.layout,
                               r.best.microBatchSize, r.best.recompute, again,
                               r.best.recomputeBlocks, r.best.tpReplicatedMask)
                      .ok());
      EXPECT_EQ(r.best.stepSeconds, again.stepSeconds);
    }
}

TEST(SearchExact, PrunedEqualsBruteForceWithPins) {
  Case base{mixedModelWithParts(8, 16), cluster(2, 4, 16, 2), {}};
  std::vector<std::function<void(SearchOptions &)>> pins = {
      [](SearchOptions &o) { o.tp = 2; },
      [](SearchOptions &o) { o.pp = 4; },
      [](SearchOptions &o) { o.dp = 2, o.tp = 2, o.pp = 2; },
      [](SearchOptions &o) { o.zeroStage = 3; },
      [](SearchOptions &o) { o.schedule = Schedule::Interleaved; },
      [](SearchOptions &o) { o.microBatchSize = 1; },
      [](SearchOptions &o) { o.recompute = Recompute::Full; },
      [](SearchOptions &o) {
        o.recompute = Recompute::Full;
        o.recomputeBlocks = 2;
      },
      [](SearchOptions &o) { o.devices = 4; },
      [](SearchOptions &o) { o.alternatives = 0; },
      [](SearchOptions &o) { o.tpReplicated = std::vector<std::string>{}; },
      [](SearchOptions &o) {
        o.tp = 2;
        o.tpReplicated = std::vector<std::string>{"attn"};
      },
  };
  for (size_t i = 0; i < pins.size(); ++i) {
    SCOPED_TRACE(i);
    Case c = base;
    pins[i](c.options);
    expectPrunedEqualsBruteForce(c);
  }
}

TEST(SearchExact, PinsAreHonoured) {
  ModelStats model = mixedModel(8, 16);
  ClusterSpec spec = cluster(2, 4, 80, 2);
  SearchOptions o;
  o.dp = 2, o.tp = 2, o.pp = 2, o.zeroStage = 2, o.microBatchSize = 2;
  o.schedule = Schedule::GPipe;
  SearchResult r;
  ASSERT_TRUE(searchPlan(model, spec, o, r).ok());
  EXPECT_EQ(r.best.layout.dp, 2);
  EXPECT_EQ(r.best.layout.tp, 2);
  EXPECT_EQ(r.best.layout.pp, 2);
  EXPECT_EQ(r.best.layout.zeroStage, 2);
  EXPECT_EQ(r.best.microBatchSize, 2);
  EXPECT_EQ(r.best.layout.schedule, Schedule::GPipe);
  // One mesh only: no alternatives of other meshes.
  EXPECT_TRUE(r.alternatives.empty());
}

TEST(SearchExact, RecomputationWhereMemoryDecides) {
  // Activations 50 times mixedModel's, so that memory decides.
  ModelStats model = mixedModel(8, 16);
  for (LayerStats &c : model.classes) {
    c.saved.split *= 50, c.saved.replicated *= 50;
    c.attentionSaved.split *= 50, c.attentionSaved.replicated *= 50;
  }
  auto recomputes = [](const SearchResult &r) {
    int n = r.best.recompute != Recompute::None;
    for (const Plan &p : r.alternatives)
      n += p.recompute != Recompute::None;
    return n;
  };
  // Four 20 GB devices: some of the best plans of several devices
  // recompute; pinned to none, none does.
  ClusterSpec spec = cluster(1, 4, 20, 2);
  SearchOptions free, none;
  free.alternatives = none.alternatives = 20;
  none.recompute = Recompute::None;
  SearchResult rf, rn;
  ASSERT_TRUE(searchPlan(model, spec, free, rf).ok());
  ASSERT_TRUE(searchPlan(model, spec, none, rn).ok());
  EXPECT_GT(recomputes(rf), 0);
  EXPECT_GT(int64_t(rf.best.layout.dp) * rf.best.layout.tp * rf.best.layout.pp,
            1);
  EXPECT_EQ(recomputes(rn), 0);
  EXPECT_LE(rf.best.stepSeconds, rn.best.stepSeconds);
  // One 66 GB device: the step fits only with full recomputation.
  free.devices = 1;
  spec.device.memoryGB = 66;
  ASSERT_TRUE(searchPlan(model, spec, free, rf).ok());
  EXPECT_EQ(Recompute::Full, rf.best.recompute);
}

TEST(SearchExact, PerBlockRecomputationIsTheFewestBlocksThatFit) {
  // Activations 50 times mixedModel's on one 8-block device: keeping
  // everything needs more than the device has, so the search recomputes
  // the first k blocks, k the fewest that fit: k - 1 does not, and the
  // plan is faster than recomputing all eight.
  ModelStats model = mixedModel(8, 16);
  for (LayerStats &c : model.classes) {
    c.saved.split *= 50, c.saved.replicated *= 50;
    c.attentionSaved.split *= 50, c.attentionSaved.replicated *= 50;
  }
  ClusterSpec spec = cluster(1, 1, 20, 2);
  SearchOptions o;
  o.devices = 1;
  o.microBatchSize = 16;
  LayoutChoice l;
  Plan none, all;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 16, Recompute::None, none).ok());
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 16, Recompute::Full, all).ok());
  // Fit between the two.
  spec.device.memoryGB = (none.memory.total + all.memory.total) / 2 / 1e9;
  SearchResult r;
  ASSERT_TRUE(searchPlan(model, spec, o, r).ok());
  const Plan &p = r.best;
  ASSERT_EQ(Recompute::Full, p.recompute);
  ASSERT_GT(p.recomputeBlocks, 1);
  ASSERT_LT(p.recomputeBlocks, 8);
  EXPECT_LT(p.stepSeconds, all.stepSeconds);
  EXPECT_GT(p.stepSeconds, none.stepSeconds);
  Plan fewer;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 16, Recompute::Full, fewer,
                           p.recomputeBlocks - 1)
                  .ok());
  EXPECT_FALSE(fewer.feasible);
  EXPECT_TRUE(p.feasible);
  EXPECT_EQ(recomputeText(p), "full, first " +
                                  std::to_string(p.recomputeBlocks) +
                                  " blocks of each stage");
  EXPECT_EQ(recomputeText(p, /*brief=*/true),
            "full:" + std::to_string(p.recomputeBlocks));
  // The same plan the brute force finds.
  expectPrunedEqualsBruteForce({model, spec, o});
  // Pinned, the search leaves per-block recomputation out.
  o.recompute = Recompute::Full;
  ASSERT_TRUE(searchPlan(model, spec, o, r).ok());
  EXPECT_EQ(0, r.best.recomputeBlocks);
  // And the count is refused without full recomputation.
  EXPECT_FALSE(
      evaluatePlan(model, spec, o, l, 16, Recompute::Selective, fewer, 2).ok());
}

TEST(SearchExact, RecomputedBlocksAreEachRanksFirst) {
  // 6 blocks on 2 ranks cut 4 + 2: the first 3 of each rank are 0, 1, 2
  // and 4, 5 (all of the second rank's).
  Plan p;
  p.layout.pp = 2;
  p.blocksPerRank = {4, 2};
  p.recompute = Recompute::Full;
  p.recomputeBlocks = 3;
  EXPECT_EQ((std::vector<int>{0, 1, 2, 4, 5}), recomputedBlocks(p));
  p.recomputeBlocks = 0;
  EXPECT_EQ((std::vector<int>{0, 1, 2, 3, 4, 5}), recomputedBlocks(p));
  p.recompute = Recompute::Selective;
  EXPECT_TRUE(recomputedBlocks(p).empty());
  // Interleaved, 2 ranks x 2 virtual stages of 2 blocks: rank 0 holds
  // 0, 1, 4, 5 and rank 1 2, 3, 6, 7; the first of each: 0 and 2.
  p.recompute = Recompute::Full;
  p.recomputeBlocks = 1;
  p.layout.virtualStages = 2;
  p.blocksPerRank = {4, 4};
  EXPECT_EQ((std::vector<std::vector<int>>{{0, 1, 4, 5}, {2, 3, 6, 7}}),
            blocksOfRanks(p.blocksPerRank, 2, 2, 8));
  EXPECT_EQ((std::vector<int>{0, 2}), recomputedBlocks(p));
  // Counts that do not add up give nothing.
  EXPECT_TRUE(blocksOfRanks({4, 1}, 2, 1, 6).empty());
}

TEST(SearchExact, StepTimesAnUlpApartTieAndLessComputeWins) {
  // A step bound by an exposed reduction is predicted the same with and
  // without recomputation, give or take an ulp of summation order: the
  // plan doing less compute goes first, whichever time is the lower ulp.
  Plan lean, busy;
  lean.stepSeconds = 0.0002662901338458506;
  busy.stepSeconds = std::nextafter(lean.stepSeconds, 0.0);
  lean.computeSeconds = 2.18e-05;
  busy.computeSeconds = 2.21e-05;
  lean.memory.total = 2e6;
  busy.memory.total = 1e6;
  EXPECT_TRUE(planBefore(lean, busy));
  EXPECT_FALSE(planBefore(busy, lean));
  // A real difference in time still decides first.
  busy.stepSeconds = lean.stepSeconds * 0.999;
  EXPECT_TRUE(planBefore(busy, lean));
}

TEST(SearchExact, NothingFitsNamesTheClosestPlan) {
  ModelStats model = mixedModel(8, 16);
  ClusterSpec spec = cluster(1, 4, /*memoryGB=*/1);
  SearchResult r;
  Status st = searchPlan(model, spec, SearchOptions(), r);
  ASSERT_FALSE(st.ok());
  EXPECT_FALSE(r.best.feasible);
  EXPECT_NE(st.message.find("per device at best ("), std::string::npos)
      << st.message;
  EXPECT_NE(st.message.find("the device has 1.0 GB"), std::string::npos)
      << st.message;
  // The least memory keeps no more than block inputs.
  EXPECT_EQ(r.best.recompute, Recompute::Full);
  EXPECT_GT(r.best.memory.total, 1e9);
  // It is the least of every candidate (brute force over the same space).
  SearchOptions brute;
  brute.prune = false;
  SearchResult rb;
  EXPECT_EQ(searchPlan(model, spec, brute, rb).message, st.message);
}

TEST(SearchExact, BadPinsNameTheFlag) {
  ModelStats model = mixedModel(8, 16);
  ClusterSpec spec = cluster(1, 4);
  auto error = [&](std::function<void(SearchOptions &)> pin) {
    SearchOptions o;
    pin(o);
    SearchResult r;
    return searchPlan(model, spec, o, r).message;
  };
  EXPECT_NE(error([](SearchOptions &o) { o.tp = 3; }).find("--mesh tp=3"),
            std::string::npos);
  EXPECT_NE(error([](SearchOptions &o) { o.dp = 2, o.tp = 1, o.pp = 1; })
                .find("is not the 4 devices"),
            std::string::npos);
  EXPECT_NE(error([](SearchOptions &o) { o.microBatchSize = 3; })
                .find("--micro-batch-size 3"),
            std::string::npos);
  EXPECT_NE(error([](SearchOptions &o) { o.devices = 16; }).find("--devices 16"),
            std::string::npos);
  EXPECT_NE(error([](SearchOptions &o) {
              o.pp = 1;
              o.schedule = Schedule::Interleaved;
            }).find("needs pp >= 2"),
            std::string::npos);
}

TEST(SearchExact, SaysWhenOneDeviceIsFaster) {
  // 1e6 FLOPs a sample on 4 devices: every split of it pays a collective
  // of 1 ms latency (dp's gradients, tp's activations, pp's messages)
  // that costs more than the 0.1 us of work it divides, so one device is
  // faster, and the plan says by how much; the table and the plan file
  // carry it. At 1e12 FLOPs a sample dividing the work wins: no note.
  ModelStats model = simpleModel(4, 8);
  for (OpCost &op : model.classes[0].ops)
    op.flops = 1e6;
  ClusterSpec spec = cluster(1, 4, 80, 1000);
  SearchResult r;
  ASSERT_TRUE(searchPlan(model, spec, {}, r).ok());
  Plan single;
  SearchOptions o;
  o.devices = 1;
  ASSERT_TRUE(
      evaluatePlan(model, spec, o, LayoutChoice(), 8, Recompute::None, single)
          .ok());
  EXPECT_LT(single.stepSeconds, r.best.stepSeconds);
  expectNear(single.stepSeconds, r.oneDeviceStepSeconds);
  EXPECT_NE(formatPlanTable(r).find("one device"), std::string::npos);
  SearchResult back;
  ASSERT_TRUE(parsePlanJSON(formatPlanJSON(r), "plan.json", back).ok());
  EXPECT_EQ(r.oneDeviceStepSeconds, back.oneDeviceStepSeconds);

  SearchResult big;
  ASSERT_TRUE(searchPlan(simpleModel(4, 8), cluster(1, 4), {}, big).ok());
  EXPECT_EQ(0, big.oneDeviceStepSeconds);
  EXPECT_EQ(formatPlanTable(big).find("one device"), std::string::npos);
  EXPECT_EQ(formatPlanJSON(big).find("one_device"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// Plan files
//===----------------------------------------------------------------------===//

TEST(PlanFile, RoundTripsAndIsDeterministic) {
  ModelStats model = mixedModel(8, 16);
  ClusterSpec spec = cluster(2, 4, 16, 2);
  SearchResult r1, r2, back;
  ASSERT_TRUE(searchPlan(model, spec, SearchOptions(), r1).ok());
  ASSERT_TRUE(searchPlan(model, spec, SearchOptions(), r2).ok());
  std::string json = formatPlanJSON(r1);
  EXPECT_EQ(json, formatPlanJSON(r2));
  Status st = parsePlanJSON(json, "plan.json", back);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(json, formatPlanJSON(back));
  EXPECT_FALSE(back.alternatives.empty());
  // A diff of a plan with itself changes no layout field.
  EXPECT_NE(formatPlanDiff(back, "a", back, "b").find("the same layout"),
            std::string::npos);
  // The per-block count round-trips, and a plan file without it (written
  // before it existed) reads as every block.
  SearchResult one = r1;
  one.best.recompute = Recompute::Full;
  one.best.recomputeBlocks = 3;
  json = formatPlanJSON(one);
  ASSERT_TRUE(parsePlanJSON(json, "plan.json", back).ok());
  EXPECT_EQ(3, back.best.recomputeBlocks);
  EXPECT_EQ(json, formatPlanJSON(back));
  std::string old = json;
  size_t at = old.rfind("\"recompute_blocks\": 3,");
  ASSERT_NE(at, std::string::npos);
  old.erase(at, std::string("\"recompute_blocks\": 3,").size());
  ASSERT_TRUE(parsePlanJSON(old, "plan.json", back).ok());
  EXPECT_EQ(0, back.best.recomputeBlocks);
  // The replicated parts and their parameters round-trip (weftc --plan
  // reads the parameters); one list without the other is refused.
  SearchResult rep = r1;
  rep.best.tpReplicated = {"attn"};
  rep.best.tpReplicatedParams = {"a.q", "a.o"};
  rep.best.tpRowSplitParams = {"wpe"};
  json = formatPlanJSON(rep);
  ASSERT_TRUE(parsePlanJSON(json, "plan.json", back).ok());
  EXPECT_EQ(back.best.tpReplicated, rep.best.tpReplicated);
  EXPECT_EQ(back.best.tpReplicatedParams, rep.best.tpReplicatedParams);
  EXPECT_EQ(back.best.tpRowSplitParams, rep.best.tpRowSplitParams);
  EXPECT_EQ(json, formatPlanJSON(back));
  std::string table = formatPlanTable(rep);
  EXPECT_NE(table.find("but attn replicated on every tp rank"),
            std::string::npos)
      << table;
  rep.best.tpReplicatedParams.clear();
  EXPECT_NE(parsePlanJSON(formatPlanJSON(rep), "plan.json", back)
                .message.find("tp_replicated_params: lists the parameters"),
            std::string::npos);
}

TEST(PlanFile, ErrorsNameTheField) {
  ModelStats model = mixedModel(8, 16);
  ClusterSpec spec = cluster(2, 4, 16, 2);
  SearchResult r, back;
  ASSERT_TRUE(searchPlan(model, spec, SearchOptions(), r).ok());
  std::string json = formatPlanJSON(r);
  auto errorAfter = [&](const std::string &from, const std::string &to) {
    std::string edited = json;
    // Keys are sorted, so the top-level plan's fields follow
    // `alternatives`: the last occurrence is the top-level one.
    size_t at = edited.rfind(from);
    EXPECT_NE(at, std::string::npos) << from;
    edited.replace(at, from.size(), to);
    return parsePlanJSON(edited, "p.json", back).message;
  };
  EXPECT_EQ(errorAfter("\"zero_stage\": " +
                           std::to_string(r.best.layout.zeroStage),
                       "\"zero_stage\": 7"),
            "p.json: zero_stage: expected 0, 1, 2 or 3");
  EXPECT_EQ(errorAfter("\"format\": \"weft-plan\"", "\"format\": \"x\""),
            "p.json: format: expected \"weft-plan\", got \"x\"");
  EXPECT_NE(errorAfter("\"schedule\"", "\"sched\"").find("p.json: schedule: missing"),
            std::string::npos);
  EXPECT_NE(parsePlanJSON("{", "p.json", back).message.find("not valid JSON"),
            std::string::npos);
}

} // namespace
