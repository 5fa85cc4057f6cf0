//===- MemoryModelTest.cpp - The executable's memory, by hand -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// SearchOptions::executableMemory adds what a Weft executable holds beyond
// the textbook parts; bench/memory_model.py checks the sum against measured
// peaks, these tests check each part against a hand count.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/PlanFormat.h"
#include "weft/Planner/Search.h"

#include <gtest/gtest.h>

using namespace weft::planner;

namespace {

ClusterSpec host() {
  ClusterSpec s;
  s.name = "t";
  s.nodes = 1;
  s.devicesPerNode = 2;
  s.device.memoryGB = 10;
  for (const char *dt : kClusterDTypes)
    s.device.peakTFLOPs[dt] = 1;
  s.intraNode = {1, 100};
  s.interNode = {1, 100};
  return s;
}

/// One block of 1000 parameters saving 10 elements per sample; the model's
/// output is 50 elements per sample; batch 4.
ModelStats tiny() {
  ModelStats m;
  m.batch = 4;
  m.seq = 1;
  m.outputElements = 50;
  LayerStats block;
  OpCost op;
  op.flops = 1e6;
  op.tpSplit = true;
  block.ops.push_back(op);
  block.params = 1000;
  block.saved.split = 10;
  block.inputElements = 1;
  m.classes.push_back(block);
  m.blocks.assign(1, 0);
  return m;
}

Plan evaluate(int zero, bool executable) {
  SearchOptions o;
  o.dtype = "fp32";
  o.devices = 2;
  o.executableMemory = executable;
  LayoutChoice l;
  l.dp = 2;
  l.zeroStage = zero;
  l.microBatches = 1;
  Plan plan;
  Status st =
      evaluatePlan(tiny(), host(), o, l, /*mbs=*/2, Recompute::None, plan);
  EXPECT_TRUE(st.ok()) << st.message;
  return plan;
}

TEST(ExecutableMemory, PartsByHand) {
  // fp32 with AdamW: 4 bytes a parameter and a gradient, 8 of moments.
  // Textbook: 4000 + 4000 + 8000 + activations 2 samples * 10 * 4 = 80.
  Plan textbook = evaluate(0, false);
  EXPECT_DOUBLE_EQ(80, textbook.memory.activations);
  EXPECT_DOUBLE_EQ(0, textbook.memory.stepOutputs);
  EXPECT_DOUBLE_EQ(16080, textbook.memory.total);

  Plan z0 = evaluate(0, true);
  // Updated parameters and moments next to the old: 4000 + 8000.
  EXPECT_DOUBLE_EQ(12000, z0.memory.stepOutputs);
  // The embedded initial weights of the rank's layers: 4000.
  EXPECT_DOUBLE_EQ(4000, z0.memory.weightImage);
  // Logits and their gradient: 2 * 2 samples * 50 * 4 bytes.
  EXPECT_DOUBLE_EQ(800, z0.memory.lossBuffers);
  // ZeRO 0's all-reduce bucket: the whole gradient.
  EXPECT_DOUBLE_EQ(4000, z0.memory.commBuffers);
  EXPECT_DOUBLE_EQ(16080 + 12000 + 4000 + 800 + 4000, z0.memory.total);

  Plan z1 = evaluate(1, true);
  // Moments split over dp = 2: 4000 of them, and as many updated.
  EXPECT_DOUBLE_EQ(4000, z1.memory.optimizerState);
  EXPECT_DOUBLE_EQ(4000 + 4000, z1.memory.stepOutputs);
  // Reduce-scatter: the input (4000), its result (2000) and gloo's copy of
  // the input (4000); all-gather: input 2000 and result 4000.
  EXPECT_DOUBLE_EQ(16000, z1.memory.commBuffers);
  EXPECT_DOUBLE_EQ(4000 + 4000 + 4000 + 80 + 8000 + 4000 + 800 + 16000,
                   z1.memory.total);
}

TEST(ExecutableMemory, TableAndPlanFileCarryTheParts) {
  SearchResult r;
  r.context = {"t", 2, 2, 1e10, "fp32", 4, 1, 1, 1000};
  r.best = evaluate(1, true);
  r.best.feasible = true;
  r.best.memory.stepOutputs = 2.5e9; // Big enough to show in GB.
  std::string table = formatPlanTable(r);
  EXPECT_NE(std::string::npos,
            table.find("activations 0.0 GB, step outputs 2.50, weight image "
                       "0.00, loss buffers 0.00, comm buffers 0.00 GB"))
      << table;
  // The plan file reads back with them; one without them reads as before.
  std::string json = formatPlanJSON(r);
  SearchResult read;
  Status st = parsePlanJSON(json, "p.json", read);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_DOUBLE_EQ(2.5e9, read.best.memory.stepOutputs);
  EXPECT_DOUBLE_EQ(16000, read.best.memory.commBuffers);
  r.best = evaluate(1, false);
  r.best.feasible = true;
  ASSERT_TRUE(parsePlanJSON(formatPlanJSON(r), "p.json", read).ok());
  EXPECT_DOUBLE_EQ(0, read.best.memory.stepOutputs);
  EXPECT_EQ(std::string::npos, formatPlanJSON(r).find("step_outputs"));
}

TEST(ExecutableMemory, OneRankHasNoBuckets) {
  SearchOptions o;
  o.dtype = "fp32";
  o.devices = 1;
  o.executableMemory = true;
  LayoutChoice l;
  Plan plan;
  ASSERT_TRUE(
      evaluatePlan(tiny(), host(), o, l, 4, Recompute::None, plan).ok());
  EXPECT_DOUBLE_EQ(0, plan.memory.commBuffers);
  // All 4 samples in one micro-batch: 2 * 4 * 50 * 4.
  EXPECT_DOUBLE_EQ(1600, plan.memory.lossBuffers);
}

} // namespace
