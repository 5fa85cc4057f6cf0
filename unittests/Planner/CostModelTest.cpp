//===- CostModelTest.cpp - The cost model against hand calculations ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Each formula of the cost model on the shipped DGX A100 and CPU-host specs
// and on small handmade ones, compared with the number worked out by hand
// in the comment above each expectation; and the properties the search
// will rely on (hierarchical beats a flat ring across nodes, a tree beats a
// ring on small messages only, ZeRO stages shrink memory in order).
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/CostModel.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace weft::planner;

namespace {

ClusterSpec load(const std::string &file) {
  ClusterSpec spec;
  Status st = loadClusterSpec(std::string(WEFT_CLUSTER_EXAMPLES) + "/" + file,
                              spec);
  EXPECT_TRUE(st.ok()) << st.message;
  return spec;
}

/// `nodes` DGX A100 nodes: the shipped example with more nodes.
ClusterSpec dgxA100(int nodes) {
  ClusterSpec spec = load("dgx-a100-80gb.yaml");
  spec.nodes = nodes;
  return spec;
}

/// The same nodes at NVLink 3's line rate, 300 GB/s each way, for hand
/// calculations that should not move with the shipped spec's calibration
/// (230 GB/s, what NCCL reaches; ClusterSpecTest pins it).
ClusterSpec dgxA100LineRate(int nodes) {
  ClusterSpec spec = dgxA100(nodes);
  spec.intraNode.bandwidthGBps = 300;
  return spec;
}

/// Relative comparison: the numbers span microseconds to seconds.
void expectNear(double expected, double actual) {
  EXPECT_NEAR(expected, actual, 1e-9 * std::abs(expected) + 1e-15)
      << "expected " << expected << ", got " << actual;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

TEST(CostModelCompute, ComputeBoundMatMulRunsAtPeak) {
  ClusterSpec a100 = dgxA100(1);
  // Without a measured efficiency, the peak itself (the shipped spec has
  // one since the Megatron calibration; the formula is what is tested here).
  a100.device.efficiency.clear();
  // 4096^3 bf16 matmul: 2 * 4096^3 FLOPs, three 4096^2 bf16 matrices.
  double flops = 2.0 * 4096 * 4096 * 4096;
  double bytes = 3.0 * 4096 * 4096 * 2;
  // Compute: 1.374e11 / 312e12 = 440 us; memory: 1.0e8 / 2039e9 = 49 us.
  expectNear(flops / 312e12, computeSeconds(a100, flops, bytes, 2039, "bf16"));
  // fp32 has its own, much lower peak: 1.374e11 / 19.5e12.
  expectNear(flops / 19.5e12, computeSeconds(a100, flops, bytes, 2039, "fp32"));
}

TEST(CostModelCompute, ShippedA100RunsMatMulsAtTheMeasuredCeiling) {
  // examples/clusters/dgx-a100-80gb.yaml carries one calibration for the
  // device: bf16/fp16 matmuls at 267.9 of 312 TFLOP/s (the best measured
  // A100 SXM bf16 matmul, ml-engineering's MAMF table) and the datasheet's
  // 2039 GB/s. fp32 (no tensor cores) is not calibrated.
  ClusterSpec a100 = dgxA100(1);
  EXPECT_EQ(0.859, efficiencyFor(a100, "bf16"));
  EXPECT_EQ(0.859, efficiencyFor(a100, "fp16"));
  EXPECT_EQ(1.0, efficiencyFor(a100, "fp32"));
  EXPECT_EQ(2039, a100.device.memoryBandwidthGBps);
  double flops = 2.0 * 4096 * 4096 * 4096;
  // 1.374e11 / 268.0e12 = 513 us: compute-bound.
  expectNear(flops / (312e12 * 0.859),
             computeSeconds(a100, flops, 3.0 * 4096 * 4096 * 2,
                            a100.device.memoryBandwidthGBps, "bf16"));
}

TEST(CostModelCompute, ElementwiseIsMemoryBound) {
  ClusterSpec a100 = dgxA100(1);
  // 1e8-element bf16 add: 1e8 FLOPs (0.3 us at peak), two reads and one
  // write of 2 bytes: 6e8 bytes / 2039e9 B/s = 294 us.
  expectNear(6e8 / 2039e9, computeSeconds(a100, 1e8, 6e8, 2039, "bf16"));
}

TEST(CostModelCompute, UpdateAndAccumulationAreMemoryTraffic) {
  // 1e9 f32 parameters under AdamW (8 B of state each), 4 micro-batches,
  // 100 GB/s: 3 later micro-batches add 1e9 x 3 x 4 B = 36 GB, the update
  // reads and writes 1e9 x (2 x 4 + 4 + 2 x 8) = 28 GB: 0.64 s.
  expectNear(0.64, updateSeconds(1e9, 1e9, 4, 4, 4, 8, 100));
  // ZeRO-1 over 4 ranks updates a quarter: 0.36 + 0.07 s.
  expectNear(0.43, updateSeconds(1e9, 0.25e9, 4, 4, 4, 8, 100));
  // One micro-batch: nothing to accumulate.
  expectNear(0.28, updateSeconds(1e9, 1e9, 1, 4, 4, 8, 100));
  // No measured bandwidth: not priced.
  EXPECT_EQ(0.0, updateSeconds(1e9, 1e9, 4, 4, 4, 8, 0));
}

TEST(CostModelCompute, MeasuredEfficiencyScalesThePeak) {
  ClusterSpec spec = dgxA100(1);
  spec.device.efficiency["bf16"] = 0.7;
  EXPECT_EQ(0.7, efficiencyFor(spec, "bf16"));
  // A dtype without a measurement runs at its peak.
  spec.device.efficiency.erase("fp16");
  EXPECT_EQ(1.0, efficiencyFor(spec, "fp16"));
  // 1e12 FLOPs / (312e12 * 0.7) = 4.579 ms.
  expectNear(1e12 / (312e12 * 0.7),
             computeSeconds(spec, 1e12, 1.0, 2039, "bf16"));
}

TEST(CostModelCompute, UnknownDTypeIsRefused) {
  EXPECT_TRUE(checkDType("bf16").ok());
  Status st = checkDType("fp8");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message.find("'fp8'"), std::string::npos) << st.message;
  EXPECT_NE(st.message.find("fp32, bf16 or fp16"), std::string::npos);
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

TEST(CostModelMemory, ZeroStagesFor1BParamsAtDp8) {
  ModelSize model;
  model.params = 1e9; // f32 params and grads, AdamW's 8 bytes of state
  LayoutChoice layout;
  layout.dp = 8;
  // Stage 0: 4 GB params, 4 GB grads, 8 GB state = 16 GB.
  MemoryEstimate z0 = memoryPerDevice(model, layout);
  expectNear(4e9, z0.params);
  expectNear(4e9, z0.grads);
  expectNear(8e9, z0.optimizerState);
  expectNear(16e9, z0.total);
  // Stage 1: state / 8 = 1 GB: 4 + 4 + 1 = 9 GB.
  layout.zeroStage = 1;
  MemoryEstimate z1 = memoryPerDevice(model, layout);
  expectNear(1e9, z1.optimizerState);
  expectNear(9e9, z1.total);
  // Stage 2: grads / 8 too: 4 + 0.5 + 1 = 5.5 GB.
  layout.zeroStage = 2;
  MemoryEstimate z2 = memoryPerDevice(model, layout);
  expectNear(0.5e9, z2.grads);
  expectNear(5.5e9, z2.total);
  // Stage 3: params / 8 too: 0.5 + 0.5 + 1 = 2 GB = 16 GB / dp.
  layout.zeroStage = 3;
  MemoryEstimate z3 = memoryPerDevice(model, layout);
  expectNear(0.5e9, z3.params);
  expectNear(2e9, z3.total);
}

TEST(CostModelMemory, TensorAndPipelineSplitTheParameters) {
  ModelSize model;
  model.params = 1e9;
  model.optimizerBytesPerParam = 12; // bf16 training, f32 master + moments
  model.bytesPerParam = 2;
  model.bytesPerGrad = 2;
  LayoutChoice layout;
  layout.tp = 2;
  layout.pp = 4;
  // 1e9 / 8 = 1.25e8 params here: 0.25 GB + 0.25 GB + 1.5 GB = 2 GB.
  MemoryEstimate e = memoryPerDevice(model, layout);
  expectNear(0.25e9, e.params);
  expectNear(0.25e9, e.grads);
  expectNear(1.5e9, e.optimizerState);
  expectNear(2e9, e.total);
}

TEST(CostModelMemory, ActivationsInFlightPerSchedule) {
  ModelSize model;
  model.activationBytesPerMicroBatchPerStage = 1e9;
  LayoutChoice layout;
  layout.pp = 4;
  layout.microBatches = 8;
  // GPipe keeps all 8 micro-batches.
  layout.schedule = Schedule::GPipe;
  expectNear(8e9, memoryPerDevice(model, layout).activations);
  // 1F1B and ZB-H1: rank 0's p = 4 warm-up forwards.
  layout.schedule = Schedule::OneFOneB;
  expectNear(4e9, memoryPerDevice(model, layout).activations);
  layout.schedule = Schedule::ZeroBubble;
  expectNear(4e9, memoryPerDevice(model, layout).activations);
  // Interleaved, v = 2: 2*3 + 1*4 + 1 = 11 half-stage chunks = 5.5 stages,
  // Megatron's 4 * (1 + 3/8) = 5.5 (docs/pipeline.md's simulator: 11).
  layout.schedule = Schedule::Interleaved;
  layout.virtualStages = 2;
  expectNear(5.5e9, memoryPerDevice(model, layout).activations);
  // Fewer micro-batches than stages: 1F1B holds only m = 2.
  EXPECT_EQ(2.0, inFlightMicroBatches(Schedule::OneFOneB, 4, 2, 1));
  // Interleaved with m = 4, v = 2: min(11, 8) = 8 chunks = 4 stages.
  EXPECT_EQ(4.0, inFlightMicroBatches(Schedule::Interleaved, 4, 4, 2));
}

TEST(CostModelMemory, SequenceParallelSplitsWhatTensorParallelReplicates) {
  ModelSize model;
  model.activationBytesPerMicroBatchPerStage = 1e9;
  model.tpReplicatedActivationFraction = 0.3;
  LayoutChoice layout;
  layout.tp = 4;
  // 1 GB * (0.3 + 0.7 / 4) = 0.475 GB without sequence parallelism.
  expectNear(0.475e9, memoryPerDevice(model, layout).activations);
  // 1 GB / 4 with it.
  layout.sequenceParallel = true;
  expectNear(0.25e9, memoryPerDevice(model, layout).activations);
}

TEST(CostModelMemory, LayoutChecksNameTheField) {
  ClusterSpec a100 = dgxA100(1);
  LayoutChoice ok;
  ok.dp = 2;
  ok.tp = 2;
  ok.pp = 2;
  ok.microBatches = 4;
  EXPECT_TRUE(checkLayout(ok, a100).ok());

  auto message = [&](LayoutChoice l) {
    Status st = checkLayout(l, a100);
    EXPECT_FALSE(st.ok());
    return st.message;
  };
  LayoutChoice tooBig = ok;
  tooBig.dp = 4;
  EXPECT_EQ("layout: dp x tp x pp = 4 x 2 x 2 = 16 devices, but cluster "
            "'dgx-a100-80gb' has 8; shrink a degree or add nodes",
            message(tooBig));
  LayoutChoice zero = ok;
  zero.zeroStage = 4;
  EXPECT_EQ("layout: zeroStage must be 0, 1, 2 or 3, got 4", message(zero));
  LayoutChoice noV = ok;
  noV.schedule = Schedule::Interleaved;
  EXPECT_NE(message(noV).find("interleaved needs virtualStages >= 2"),
            std::string::npos);
  LayoutChoice oddM = noV;
  oddM.virtualStages = 2;
  oddM.microBatches = 3;
  EXPECT_EQ("layout: interleaved needs microBatches (3) to be a multiple of "
            "pp (2)",
            message(oddM));
  LayoutChoice vOn1f1b = ok;
  vOn1f1b.virtualStages = 2;
  EXPECT_NE(message(vOn1f1b).find("1f1b runs one stage per rank"),
            std::string::npos);
  LayoutChoice noDp = ok;
  noDp.dp = 0;
  EXPECT_EQ("layout: dp must be at least 1, got 0", message(noDp));
}


//===----------------------------------------------------------------------===//
// Communication
//===----------------------------------------------------------------------===//

TEST(CostModelComm, RingAllReduceOnNVLink) {
  ClusterSpec a100 = dgxA100LineRate(1);
  // 2 * 7/8 * 1e9 / 300e9 + 14 * 3e-6 = 5.8333 ms + 42 us = 5.8753 ms.
  expectNear(2.0 * 7 / 8 * 1e9 / 300e9 + 14 * 3e-6,
             collectiveSeconds(a100, Collective::AllReduce, 1e9, 8,
                               /*crossesNodes=*/false, Algorithm::Ring));
  expectNear(5.875333333e-3,
             collectiveSeconds(a100, Collective::AllReduce, 1e9, 8, false,
                               Algorithm::Ring));
}

TEST(CostModelComm, HalfCollectivesAndSendRecv) {
  ClusterSpec a100 = dgxA100LineRate(2);
  // All-gather / reduce-scatter: 7/8 * 1e9 / 300e9 + 7 * 3e-6 = 2.9377 ms,
  // half an all-reduce.
  double half = 7.0 / 8 * 1e9 / 300e9 + 7 * 3e-6;
  expectNear(half, collectiveSeconds(a100, Collective::AllGather, 1e9, 8,
                                     false, Algorithm::Ring));
  expectNear(half, collectiveSeconds(a100, Collective::ReduceScatter, 1e9, 8,
                                     false, Algorithm::Ring));
  expectNear(half, collectiveSeconds(a100, Collective::AllToAll, 1e9, 8, false,
                                     Algorithm::Ring));
  // Send/recv across nodes: 5 us + 1e8 / 25e9 = 4.005 ms.
  expectNear(5e-6 + 4e-3, collectiveSeconds(a100, Collective::SendRecv, 1e8, 2,
                                            true, Algorithm::Ring));
}

TEST(CostModelComm, TreeWinsOnSmallMessagesOnly) {
  ClusterSpec a100 = dgxA100LineRate(1);
  // Tree, depth log2 8 = 3: 2 * 3 * (3 us + 1e6 / 300e9) = 38 us.
  double tree = collectiveSeconds(a100, Collective::AllReduce, 1e6, 8, false,
                                  Algorithm::Tree);
  expectNear(2 * 3 * (3e-6 + 1e6 / 300e9), tree);
  expectNear(38e-6, tree);
  // Ring: 2 * 7/8 * 1e6 / 300e9 + 42 us = 47.8 us, slower.
  EXPECT_LT(tree, collectiveSeconds(a100, Collective::AllReduce, 1e6, 8, false,
                                    Algorithm::Ring));
  // At 1 GB the tree moves the whole buffer 6 times (20 ms), the ring
  // 1.75 times (5.9 ms).
  EXPECT_GT(collectiveSeconds(a100, Collective::AllReduce, 1e9, 8, false,
                              Algorithm::Tree),
            collectiveSeconds(a100, Collective::AllReduce, 1e9, 8, false,
                              Algorithm::Ring));
  // A group of 5 is a tree of depth ceil(log2 5) = 3.
  expectNear(2 * 3 * (3e-6 + 1e6 / 300e9),
             collectiveSeconds(a100, Collective::AllReduce, 1e6, 5, false,
                               Algorithm::Tree));
}

TEST(CostModelComm, HierarchicalOverTwoNodes) {
  ClusterSpec a100 = dgxA100LineRate(2);
  // Reduce-scatter and all-gather inside a node:
  //   2 * (7/8 * 1e9 / 300e9 + 7 * 3e-6) = 5.8753 ms;
  // all-reduce of 1e9 / 8 across 2 nodes:
  //   2 * 1/2 * 1.25e8 / 25e9 + 2 * 5e-6 = 5.01 ms; total 10.8853 ms.
  double hier = collectiveSeconds(a100, Collective::AllReduce, 1e9, 16, true,
                                  Algorithm::Hierarchical);
  expectNear(2 * (7.0 / 8 * 1e9 / 300e9 + 7 * 3e-6) +
                 (1.25e8 / 25e9 + 2 * 5e-6),
             hier);
  expectNear(10.885333333e-3, hier);
  // A flat ring over 16 on the network: 2 * 15/16 * 1e9 / 25e9 + 30 * 5 us
  // = 75.15 ms, about 7 times slower.
  double flat = collectiveSeconds(a100, Collective::AllReduce, 1e9, 16, true,
                                  Algorithm::Ring);
  expectNear(75.15e-3, flat);
  EXPECT_GT(flat, 6 * hier);
}

TEST(CostModelComm, DataParallelGroupsOnCpuNodes) {
  // 2 nodes of 2 CPU ranks joined by one 0.05 GB/s link per node, 4 GB/s
  // inside a node, no latency.
  ClusterSpec spec = dgxA100(2);
  spec.devicesPerNode = 2;
  spec.intraNode = {4, 0};
  spec.interNode = {0.05, 0};
  double b = 21e6;
  // NCCL, a NIC per device: dp = 4 is one ring crossing the network,
  // 2 * 3/4 * 21e6 / 5e7 = 630 ms.
  expectNear(0.630,
             groupCollectiveSeconds(spec, Collective::AllReduce, b, {4, 2, 1}));
  expectNear(0.630, collectiveSeconds(spec, Collective::AllReduce, b, 4, true,
                                      Algorithm::Ring));
  // Weft's gloo runtime: inside each node 2 * 1/2 * 21e6 / 4e9 = 5.25 ms,
  // between the two leaders 21e6 / 5e7 = 420 ms, the broadcast inside the
  // node 5.25 ms: 430.5 ms.
  spec.collectiveLibrary = ClusterSpec::Library::Gloo;
  spec.interNode.sharedByNode = true;
  expectNear(0.4305,
             groupCollectiveSeconds(spec, Collective::AllReduce, b, {4, 2, 1}));
  // dp = 2 over the nodes with tp = 2 inside them: two groups of one rank
  // per node, both crossing each node's one link: 10e6 / (5e7 / 2) =
  // 400 ms, twice a lone group's 200 ms.
  expectNear(0.400, groupCollectiveSeconds(spec, Collective::AllReduce, 10e6,
                                           {2, 1, 2}));
  spec.interNode.sharedByNode = false;
  expectNear(0.200, groupCollectiveSeconds(spec, Collective::AllReduce, 10e6,
                                           {2, 1, 2}));
  // ZeRO's reduce-scatter has no leaders' form: a ring, its link shared.
  spec.interNode.sharedByNode = true;
  expectNear(
      2 * 3.0 / 4 * b / 5e7,
      groupCollectiveSeconds(spec, Collective::ReduceScatter, b, {4, 2, 2}));
  // Inside one node nothing changes, and the overhead is paid once a call.
  spec.device.collectiveOverheadUs = 1000;
  expectNear(1e-3 + b / 4e9,
             groupCollectiveSeconds(spec, Collective::AllReduce, b, {2, 2, 1}));
  expectNear(0.4315,
             groupCollectiveSeconds(spec, Collective::AllReduce, b, {4, 2, 1}));
}

TEST(CostModelComm, MeasuredTableIsInterpolatedOnTheCpuHost) {
  ClusterSpec cpu = load("cpu-host.yaml");
  // The hand calculations below are on its all-reduces over TCP, from
  // 1 MiB; the smaller samples (shared memory) and the other collectives'
  // go.
  auto &ar = cpu.collectives.at("all_reduce");
  ar.erase(std::remove_if(ar.begin(), ar.end(),
                          [](const auto &m) { return m.bytes < 1048576; }),
           ar.end());
  ASSERT_EQ(ar.size(), 3u);
  cpu.collectives.erase("all_gather");
  cpu.collectives.erase("reduce_scatter");
  cpu.collectives.erase("send_recv");
  // And without the host's overhead per collective in a step.
  cpu.device.collectiveOverheadUs = 0;
  // Between the samples (1048576 B, 750 us) and (21.2e6 B, 11000 us):
  //   750 + (10e6 - 1048576) * 10250 / (21.2e6 - 1048576) = 5303.1 us.
  double between = collectiveSeconds(cpu, Collective::AllReduce, 10e6, 2,
                                     false, Algorithm::Ring);
  expectNear((750 + (10e6 - 1048576) * 10250 / (21.2e6 - 1048576)) * 1e-6,
             between);
  EXPECT_NEAR(5.3031e-3, between, 1e-7);
  // On a sample: its own time.
  expectNear(11e-3, collectiveSeconds(cpu, Collective::AllReduce, 21.2e6, 2,
                                      false, Algorithm::Ring));
  // Below the smallest: the line from the formula's latency alone at 0
  // bytes (2 ranks, 2 steps of 100 us) to the smallest sample:
  //   200 + 1000 * 550 / 1048576 = 200.52 us.
  expectNear((200 + 1000 * 550.0 / 1048576) * 1e-6,
             collectiveSeconds(cpu, Collective::AllReduce, 1000, 2, false,
                               Algorithm::Tree));
  // A table of small samples keeps its own floor: at most the smallest
  // sample's time, however slow the formula's links.
  ClusterSpec slowLinks = cpu;
  slowLinks.intraNode.latencyUs = 1e4;
  expectNear(750e-6, collectiveSeconds(slowLinks, Collective::AllReduce, 1000,
                                       2, false, Algorithm::Tree));
  // Above the largest: the line through the last two,
  //   11000 + (200e6 - 21.2e6) * 42000 / 79.5e6 = 105460.4 us.
  expectNear((11000 + (200e6 - 21.2e6) * 42000 / 79.5e6) * 1e-6,
             collectiveSeconds(cpu, Collective::AllReduce, 200e6, 2, false,
                               Algorithm::Ring));
  // No table for reduce-scatter: the formula, 1/2 * 1e6 / 1.9e9 + 100 us.
  expectNear(0.5 * 1e6 / 1.9e9 + 100e-6,
             collectiveSeconds(cpu, Collective::ReduceScatter, 1e6, 2, false,
                               Algorithm::Ring));
  // The formula and the measurement agree within 5% at 21.2 MB
  // (11.36 ms vs 11.0 ms): the spec's link numbers were fitted to them.
  ClusterSpec noTable = cpu;
  noTable.collectives.clear();
  double formula = collectiveSeconds(noTable, Collective::AllReduce, 21.2e6, 2,
                                     false, Algorithm::Ring);
  expectNear(21.2e6 / 1.9e9 + 200e-6, formula);
  EXPECT_NEAR(11e-3, formula, 0.05 * 11e-3);
}

TEST(CostModelComm, OneSampleExtrapolatesThroughTheOrigin) {
  ClusterSpec spec = dgxA100(1);
  spec.collectives["all_gather"] = {{8, 1e6, 100}};
  double seconds = 0;
  ASSERT_TRUE(
      measuredSeconds(spec, Collective::AllGather, 3e6, 8, seconds));
  expectNear(300e-6, seconds);
  // Other group sizes have no samples.
  EXPECT_FALSE(measuredSeconds(spec, Collective::AllGather, 3e6, 4, seconds));
}

TEST(CostModelComm, OverheadIsPaidOncePerCall) {
  ClusterSpec cpu = dgxA100(1);
  double idle = collectiveSeconds(cpu, Collective::AllGather, 1 << 20, 8, false,
                                  Algorithm::Ring);
  double p2p = collectiveSeconds(cpu, Collective::SendRecv, 4096, 2, false,
                                 Algorithm::Ring);
  cpu.device.collectiveOverheadUs = 250;
  expectNear(idle + 250e-6,
             collectiveSeconds(cpu, Collective::AllGather, 1 << 20, 8, false,
                               Algorithm::Ring));
  expectNear(p2p + 250e-6, collectiveSeconds(cpu, Collective::SendRecv, 4096, 2,
                                             false, Algorithm::Ring));
  // A measured table is of idle devices too: the overhead adds to it.
  cpu.collectives["all_reduce"] = {{8, 1 << 20, 100}};
  expectNear(350e-6, collectiveSeconds(cpu, Collective::AllReduce, 1 << 20, 8,
                                       false, Algorithm::Ring));
}

TEST(CostModelComm, SamplesOfANodeDoNotPriceAGroupAcrossNodes) {
  // Two nodes of 2 devices, the sample of 2 ranks taken inside a node: a
  // 2-rank group across the nodes (dp over them) is priced on the slow
  // link's formula, one inside a node on the sample.
  ClusterSpec s;
  s.nodes = 2;
  s.devicesPerNode = 2;
  s.intraNode = {4, 100};
  s.interNode = {0.05, 100};
  s.collectives["all_reduce"] = {{2, 1 << 20, 400}};
  expectNear(400e-6, collectiveSeconds(s, Collective::AllReduce, 1 << 20, 2,
                                       false, Algorithm::Ring));
  // Ring, n = 2: bytes / 0.05 GB/s + 2 x 100 us.
  expectNear(double(1 << 20) / 0.05e9 + 200e-6,
             collectiveSeconds(s, Collective::AllReduce, 1 << 20, 2, true,
                               Algorithm::Ring));
}

TEST(CostModelComm, CollectiveChecksNameTheFix) {
  ClusterSpec a100 = dgxA100(2);
  EXPECT_TRUE(checkCollective(a100, Collective::AllReduce, 16,
                              Algorithm::Hierarchical)
                  .ok());
  EXPECT_EQ("hierarchical all_reduce needs whole nodes (a multiple of 8 "
            "devices per node, at least 2 nodes), got a group of 12; use "
            "ring or tree",
            checkCollective(a100, Collective::AllReduce, 12,
                            Algorithm::Hierarchical)
                .message);
  EXPECT_FALSE(checkCollective(a100, Collective::AllReduce, 8,
                               Algorithm::Hierarchical)
                   .ok());
  EXPECT_NE(checkCollective(a100, Collective::AllGather, 16,
                            Algorithm::Hierarchical)
                .message.find("all_reduce only, not all_gather"),
            std::string::npos);
  EXPECT_FALSE(
      checkCollective(a100, Collective::AllReduce, 1, Algorithm::Ring).ok());
  EXPECT_EQ("send_recv is between 2 ranks, got a group of 4",
            checkCollective(a100, Collective::SendRecv, 4, Algorithm::Ring)
                .message);
}

//===----------------------------------------------------------------------===//
// Overlap and bubble
//===----------------------------------------------------------------------===//

TEST(CostModelStep, OnlyTheUnhiddenCommunicationCounts) {
  // 10 ms of reduction behind 6 ms of backward: 4 ms exposed, 24 ms step.
  expectNear(4e-3, exposedCommSeconds(10e-3, 6e-3));
  expectNear(24e-3, stepSeconds(20e-3, 10e-3, 6e-3));
  // Fully hidden: the compute alone.
  expectNear(0, exposedCommSeconds(5e-3, 6e-3));
  expectNear(20e-3, stepSeconds(20e-3, 5e-3, 6e-3));
}

TEST(CostModelBubble, ClosedFormsMatchThePipelineDocs) {
  // p = 4, m = 8 (docs/pipeline.md: 27.3%, 15.8%, 11.1%).
  expectNear(3.0 / 11, bubbleFraction(Schedule::GPipe, 4, 8, 1));
  expectNear(3.0 / 11, bubbleFraction(Schedule::OneFOneB, 4, 8, 1));
  expectNear(3.0 / 19, bubbleFraction(Schedule::Interleaved, 4, 8, 2));
  expectNear(3.0 / 27, bubbleFraction(Schedule::ZeroBubble, 4, 8, 1));
  // ZB-H1 with m = 2 < p = 4: makespan 2 * 6 - 1 = 11, work 6: 5/11.
  expectNear(5.0 / 11, bubbleFraction(Schedule::ZeroBubble, 4, 2, 1));
  // At m = p both zero-bubble forms agree: 3/15.
  expectNear(3.0 / 15, bubbleFraction(Schedule::ZeroBubble, 4, 4, 1));
  // One stage has no bubble.
  EXPECT_EQ(0.0, bubbleFraction(Schedule::OneFOneB, 1, 8, 1));
}

} // namespace
