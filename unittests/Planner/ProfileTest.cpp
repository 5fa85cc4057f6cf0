//===- ProfileTest.cpp - Tests for measuring and recalibrating specs ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/Profile.h"
#include "weft/Planner/CostModel.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace weft::planner;

namespace {

void expectNearRel(double expected, double actual) {
  EXPECT_NEAR(expected, actual, 1e-12 * std::abs(expected))
      << "expected " << expected << ", got " << actual;
}

ClusterSpec oneDevice(double peakTFLOPs) {
  ClusterSpec s;
  s.name = "t";
  s.nodes = 1;
  s.devicesPerNode = 2;
  s.device.memoryGB = 10;
  for (const char *dt : kClusterDTypes)
    s.device.peakTFLOPs[dt] = peakTFLOPs;
  s.intraNode = {1, 100};
  s.interNode = {1, 100};
  return s;
}

/// A search in fp32 on `devices` devices, as the calibrations' runs are.
SearchOptions fp32On(int devices) {
  SearchOptions o;
  o.dtype = "fp32";
  o.devices = devices;
  return o;
}

TEST(ProfileSpec, ShapeClassesByFlops) {
  EXPECT_STREQ("small", gemmShapeClass(256, 256, 256));
  EXPECT_STREQ("medium", gemmShapeClass(257, 256, 256));
  EXPECT_STREQ("medium", gemmShapeClass(1024, 1024, 1024));
  EXPECT_STREQ("large", gemmShapeClass(1024, 1024, 1025));
  // A skinny product is classed by its work, not its longest side.
  EXPECT_STREQ("small", gemmShapeClass(65536, 16, 16));

  EXPECT_STREQ("small", gemmShapeClassOfFlops(2.0 * 256 * 256 * 256));
  EXPECT_STREQ("large", gemmShapeClassOfFlops(2.0 * 1024 * 1024 * 1025));

  ClusterSpec s = oneDevice(1);
  s.device.efficiency["fp32"] = 0.9;
  s.device.gemmEfficiency["fp32"]["small"] = 0.25;
  EXPECT_DOUBLE_EQ(0.25, gemmEfficiencyFor(s, "fp32", 2.0 * 64 * 64 * 64));
  // No measurement for the class, or for the dtype: no slowdown.
  EXPECT_DOUBLE_EQ(1.0, gemmEfficiencyFor(s, "fp32", 2.0 * 4096 * 4096 * 4096));
  EXPECT_DOUBLE_EQ(1.0, gemmEfficiencyFor(s, "bf16", 2.0 * 64 * 64 * 64));
  // The class slows the compute side on top of the dtype's efficiency:
  // 1e9 FLOPs at 1 TFLOP/s x 0.9 x 0.25; the memory side is unchanged
  // (1e9 bytes at 100 GB/s: 10 ms).
  expectNearRel(1e9 / (1e12 * 0.9 * 0.25),
                gemmSeconds(s, 1e9, 2.0 * 64 * 64 * 64, 0, 1, "fp32"));
  expectNearRel(0.01,
                gemmSeconds(s, 1e6, 2.0 * 64 * 64 * 64, 1e9, 100, "fp32"));
}

TEST(ProfileSpec, FitsLatencyAndBandwidth) {
  // t = 50 us + bytes / (2 GB/s): 2000 bytes per us.
  std::vector<CollectiveMeasurement> m;
  for (double bytes : {4096.0, 65536.0, 1048576.0, 16777216.0})
    m.push_back({"send_recv", 2, bytes, 50 + bytes / 2000});
  m.push_back({"all_reduce", 2, 4096, 1e6}); // Not a send/recv: ignored.
  double lat = 0, bw = 0;
  ASSERT_TRUE(fitLink(m, lat, bw));
  EXPECT_NEAR(50, lat, 1e-6);
  EXPECT_NEAR(2, bw, 1e-9);
  m.resize(1);
  EXPECT_FALSE(fitLink(m, lat, bw));
}

ProfileResult handResult() {
  ProfileResult r;
  r.gemms = {{"fp32", "small", 128, 128, 128, 50},
             {"fp32", "medium", 512, 512, 512, 180},
             {"fp32", "large", 2048, 2048, 2048, 200}};
  r.unmeasured["bf16"] = "no kernel";
  r.unmeasured["fp16"] = "no kernel";
  r.triadGBps = 20;
  r.hostMemoryBytes = 25.3e9;
  for (double bytes : {4096.0, 1048576.0}) {
    r.collectives.push_back({"send_recv", 2, bytes, 40 + bytes / 1000});
    r.collectives.push_back({"all_reduce", 2, bytes, 80 + bytes / 500});
  }
  return r;
}

TEST(ProfileSpec, SpecFromMeasurements) {
  ProfileOptions o;
  o.devices = 2;
  ClusterSpec s = specFromProfile(handResult(), o, "here");
  EXPECT_EQ("here", s.name);
  EXPECT_EQ(1, s.nodes);
  EXPECT_EQ(2, s.devicesPerNode);
  // 25.3 GB over 2 devices, rounded down to 0.1 GB.
  EXPECT_DOUBLE_EQ(12.6, s.device.memoryGB);
  // The fastest product is the peak; unmeasured dtypes take fp32's.
  EXPECT_DOUBLE_EQ(0.2, s.device.peakTFLOPs.at("fp32"));
  EXPECT_DOUBLE_EQ(0.2, s.device.peakTFLOPs.at("bf16"));
  EXPECT_DOUBLE_EQ(0.2, s.device.peakTFLOPs.at("fp16"));
  EXPECT_DOUBLE_EQ(0.25, s.device.gemmEfficiency.at("fp32").at("small"));
  EXPECT_DOUBLE_EQ(0.9, s.device.gemmEfficiency.at("fp32").at("medium"));
  EXPECT_DOUBLE_EQ(1.0, s.device.gemmEfficiency.at("fp32").at("large"));
  EXPECT_EQ(0u, s.device.gemmEfficiency.count("bf16"));
  EXPECT_DOUBLE_EQ(20, s.device.memoryBandwidthGBps);
  // 1000 bytes per us is 1 GB/s.
  EXPECT_NEAR(1.0, s.intraNode.bandwidthGBps, 1e-9);
  EXPECT_NEAR(40, s.intraNode.latencyUs, 1e-6);
  ASSERT_EQ(2u, s.collectives.at("all_reduce").size());
  EXPECT_EQ(2u, s.collectives.at("send_recv").size());
}

// `weftc --cluster local` once built its spec without reading the host's
// memory, so every device got the 0.1 GB floor and any model of more than
// that was refused; both tools now measure through measureLocalMachine.
TEST(ProfileSpec, HostMemoryIsRead) {
  ProfileOptions o;
  o.devices = 2;
  ProfileResult r;
  Status st = measureHostMemory(o, r);
  ASSERT_TRUE(st.ok()) << st.message;
  // Any machine that builds Weft has more than 1 GB.
  EXPECT_GT(r.hostMemoryBytes, 1e9);
  r.gemms = handResult().gemms;
  ClusterSpec s = specFromProfile(r, o, "here");
  EXPECT_GT(s.device.memoryGB, 0.4);
}

TEST(ProfileSpec, WrittenYamlReadsBackAndIsStable) {
  ProfileOptions o;
  o.devices = 2;
  ClusterSpec s = specFromProfile(handResult(), o, "here");
  s.device.efficiency["fp32"] = 0.5;
  s.device.collectiveOverheadUs = 812.5;
  s.device.opOverheadUs = 3.25;
  s.device.cacheMB = 1.048576;
  s.device.cacheBandwidthGBps = 25.5;
  std::string text =
      formatClusterSpec(s, {{"", "top\nsecond line"},
                            {"device.peak_TFLOPs.bf16", "not measured"}});
  EXPECT_EQ(0u, text.find("# top\n# second line\nname: here\n"));
  EXPECT_NE(std::string::npos,
            text.find("    # not measured\n    bf16: 0.2\n"));
  EXPECT_NE(std::string::npos,
            text.find("gemm_efficiency:\n    fp32: {small: 0.25, medium: "
                      "0.9, large: 1}\n"));
  ClusterSpec back;
  Status st = parseClusterSpec(text, "written.yaml", back);
  ASSERT_TRUE(st.ok()) << st.message << "\n" << text;
  EXPECT_EQ(s.device.peakTFLOPs, back.device.peakTFLOPs);
  EXPECT_EQ(s.device.efficiency, back.device.efficiency);
  EXPECT_EQ(s.device.gemmEfficiency, back.device.gemmEfficiency);
  EXPECT_EQ(s.device.memoryBandwidthGBps, back.device.memoryBandwidthGBps);
  EXPECT_EQ(s.device.commOverlap, back.device.commOverlap);
  EXPECT_EQ(812.5, back.device.collectiveOverheadUs);
  EXPECT_EQ(3.25, back.device.opOverheadUs);
  EXPECT_EQ(1.048576, back.device.cacheMB);
  EXPECT_EQ(25.5, back.device.cacheBandwidthGBps);
  EXPECT_EQ(s.intraNode.bandwidthGBps, back.intraNode.bandwidthGBps);
  EXPECT_EQ(s.intraNode.latencyUs, back.intraNode.latencyUs);
  // This host's ranks run gloo and share one network link.
  EXPECT_TRUE(back.interNode.sharedByNode);
  EXPECT_FALSE(back.intraNode.sharedByNode);
  EXPECT_EQ(ClusterSpec::Library::Gloo, back.collectiveLibrary);
  ASSERT_EQ(s.collectives.size(), back.collectives.size());
  for (const auto &[name, samples] : s.collectives)
    for (size_t i = 0; i < samples.size(); ++i) {
      EXPECT_EQ(samples[i].group, back.collectives[name][i].group);
      EXPECT_EQ(samples[i].bytes, back.collectives[name][i].bytes);
      EXPECT_EQ(samples[i].us, back.collectives[name][i].us);
    }
  // Written again, the same bytes: keys and samples in a fixed order.
  EXPECT_EQ(formatClusterSpec(back, {}), formatClusterSpec(s, {}));
}

TEST(ProfileSpec, NewFieldsAreChecked) {
  std::string head = "nodes: 1\ndevices_per_node: 1\ndevice:\n"
                     "  memory_GB: 1\n"
                     "  peak_TFLOPs: {fp32: 1, bf16: 1, fp16: 1}\n";
  std::string links = "intra_node: {bandwidth_GBps: 1, latency_us: 1}\n"
                      "inter_node: {bandwidth_GBps: 1, latency_us: 1}\n";
  ClusterSpec s;
  Status st = parseClusterSpec(
      head + "  gemm_efficiency: {fp32: {huge: 0.5}}\n" + links, "a.yaml", s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos,
            st.message.find("unknown key 'device.gemm_efficiency.fp32.huge'"))
      << st.message;
  st = parseClusterSpec(
      head + "  gemm_efficiency: {fp32: {small: 1.5}}\n" + links, "a.yaml", s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos,
            st.message.find("device.gemm_efficiency.fp32.small must be more "
                            "than 0 and at most 1"))
      << st.message;
  st = parseClusterSpec(head + "  memory_bandwidth_GBps: 0\n" + links, "a.yaml",
                        s);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos,
            st.message.find("device.memory_bandwidth_GBps must be a positive "
                            "number"))
      << st.message;
  // The cache: both fields, with the memory's rate, which is no faster.
  const std::pair<const char *, const char *> caches[] = {
      {"  memory_bandwidth_GBps: 10\n  cache_MB: 1\n",
       "device.cache_bandwidth_GBps is missing: the cache is priced by both"},
      {"  memory_bandwidth_GBps: 10\n  cache_bandwidth_GBps: 20\n",
       "device.cache_MB is missing"},
      {"  cache_MB: 1\n  cache_bandwidth_GBps: 20\n",
       "device.cache_MB needs device.memory_bandwidth_GBps too"},
      {"  memory_bandwidth_GBps: 30\n  cache_MB: 1\n  cache_bandwidth_GBps: "
       "20\n",
       "device.cache_bandwidth_GBps (20) is below "
       "device.memory_bandwidth_GBps (30)"},
      {"  memory_bandwidth_GBps: 10\n  cache_MB: 0\n  cache_bandwidth_GBps: "
       "20\n",
       "device.cache_MB must be a positive number"}};
  for (const auto &[fields, want] : caches) {
    st = parseClusterSpec(head + fields + links, "a.yaml", s);
    ASSERT_FALSE(st.ok()) << fields;
    EXPECT_NE(std::string::npos, st.message.find(want)) << st.message;
  }
  st = parseClusterSpec(head +
                            "  memory_bandwidth_GBps: 10\n  cache_MB: 1\n"
                            "  cache_bandwidth_GBps: 20\n" +
                            links,
                        "a.yaml", s);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(1, s.device.cacheMB);
}

TEST(ProfileMeasure, QuickMeasurementsAreSane) {
  ProfileOptions o;
  o.devices = 2;
  o.quick = true;
  int lines = 0;
  o.progress = [&](const std::string &) { ++lines; };
  ProfileResult r;
  ASSERT_TRUE(measureGemms(o, r).ok());
  ASSERT_TRUE(measureTriad(o, r).ok());
  Status st = measureCollectives(o, r);
  ASSERT_TRUE(st.ok()) << st.message;
  int fp32 = 0, bf16 = 0;
  for (const GemmMeasurement &g : r.gemms) {
    fp32 += g.dtype == "fp32";
    bf16 += g.dtype == "bf16";
    // Anything from a slow emulator to a large server core.
    EXPECT_GT(g.gflops, 0.01) << g.shapeClass;
    EXPECT_LT(g.gflops, 1e4) << g.shapeClass;
    EXPECT_STREQ(g.shapeClass.c_str(), gemmShapeClass(g.m, g.n, g.k));
  }
  EXPECT_EQ(3, fp32);
  // bf16 goes through the runtime's bf16 GEMM, which always exists.
  EXPECT_EQ(3, bf16);
  EXPECT_EQ(0u, r.unmeasured.count("bf16"));
  EXPECT_EQ(1u, r.unmeasured.count("fp16"));
  EXPECT_GT(r.triadGBps, 0.1);
  // 3 collectives and send/recv, 2 sizes each, for the one group of 2.
  ASSERT_EQ(8u, r.collectives.size());
  for (const CollectiveMeasurement &m : r.collectives) {
    EXPECT_EQ(2, m.group);
    EXPECT_GT(m.us, 0) << m.collective;
  }
  // One line names the GEMM library, one per product, one for the triad
  // and one per collective.
  EXPECT_EQ(int(1 + r.gemms.size() + 1 + r.collectives.size()), lines);
}

TEST(ProfileMetrics, MedianLeavesOutWarmUpAndSkippedSteps) {
  RunMetrics run;
  std::string text =
      "{\"step\":1,\"step_time_s\":9.0,\"peak_rss_bytes\":100}\n"
      "{\"step\":2,\"step_time_s\":0.30,\"peak_rss_bytes\":300,"
      "\"baseline_rss_bytes\":20}\n"
      "{\"step\":3,\"step_time_s\":0.10,\"skipped\":true}\n"
      "\n"
      "{\"step\":4,\"step_time_s\":0.20,\"peak_rss_bytes\":200}\n"
      "{\"step\":5,\"step_time_s\":0.40}\n";
  Status st = readRunMetrics(text, "run.jsonl", run);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_EQ(5, run.steps);
  // Steps 2, 4, 5 (1 is the warm-up, 3 was skipped): median 0.30.
  EXPECT_EQ(3, run.used);
  EXPECT_DOUBLE_EQ(0.30, run.medianStepSeconds);
  EXPECT_DOUBLE_EQ(300, run.peakRssBytes);
  EXPECT_DOUBLE_EQ(20, run.baselineRssBytes);

  // Two steps: both kept (no warm-up to spare), the mean of the middle two.
  ASSERT_TRUE(
      readRunMetrics("{\"step_time_s\":1}\n{\"step_time_s\":3}\n", "r", run)
          .ok());
  EXPECT_DOUBLE_EQ(2.0, run.medianStepSeconds);

  st = readRunMetrics("{\"step\":1}\n", "run.jsonl", run);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(0u, st.message.find("run.jsonl:1: not a metrics line"))
      << st.message;
  st = readRunMetrics("", "run.jsonl", run);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos, st.message.find("no completed steps"));
}

/// One block: 1e11 forward FLOPs per sample, nothing else; batch 2.
ModelStats computeOnlyModel() {
  ModelStats m;
  m.batch = 2;
  m.seq = 4;
  LayerStats block;
  OpCost op;
  op.flops = 1e11;
  op.tpSplit = true;
  block.ops.push_back(op);
  block.params = 1000;
  block.saved.split = 10;
  block.inputElements = 10;
  m.classes.push_back(block);
  m.blocks.assign(1, 0);
  return m;
}

/// computeOnlyModel whose block's op also moves 1e10 elements a sample.
ModelStats trafficModel() {
  ModelStats m = computeOnlyModel();
  m.classes[0].ops[0].elements = 1e10;
  return m;
}

TEST(ProfileMetrics, CalibratedEfficiencyReproducesTheRun) {
  ModelStats model = computeOnlyModel();
  ClusterSpec spec = oneDevice(1); // 1 TFLOP/s
  SearchOptions o = fp32On(1);
  LayoutChoice l;
  // One device: forward + backward = 3 * 1e11 * 2 samples = 6e11 FLOPs,
  // 0.6 s at the peak. Measured 2.4 s: efficiency 0.25 by hand.
  RunMetrics run;
  run.medianStepSeconds = 2.4;
  Calibration c;
  Status st = calibrateEfficiency(model, spec, o, l, 2, run, c);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_NEAR(0.25, c.efficiency, 1e-9);
  EXPECT_NEAR(0.25, spec.device.efficiency.at("fp32"), 1e-9);
  EXPECT_DOUBLE_EQ(1.0, c.previous);
  EXPECT_NEAR(0.6, c.predictedBefore, 1e-9);
  EXPECT_NEAR(2.4, c.predictedAfter, 1e-6);

  // Up to 2 % faster than the peak allows is the peak's own noise: the
  // run is at the peak.
  run.medianStepSeconds = 0.59;
  st = calibrateEfficiency(model, spec, o, l, 2, run, c);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_DOUBLE_EQ(1.0, c.efficiency);
  EXPECT_NEAR(0.6, c.predictedAfter, 1e-9);

  // Faster than the peak allows: the peak is wrong, and the error says so.
  run.medianStepSeconds = 0.5;
  st = calibrateEfficiency(model, spec, o, l, 2, run, c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos,
            st.message.find("device.peak_TFLOPs.fp32 (1) is understated"))
      << st.message;
}

TEST(ProfileMetrics, CalibratedMemoryBandwidthReproducesTheRun) {
  // The block's op also moves 1e10 elements a sample, 4 B each: 8e10 B for
  // 2 samples in the forward, 2.4e11 B with the backward's twice that, 2.4
  // s at 100 GB/s; its 6e11 FLOPs take 0.6 s at the 1 TFLOP/s peak, so the
  // roofline prices 2.4 s (and AdamW's update of 1000 parameters, 28 kB,
  // 0.28 us). Measured 1.2 s: faster than the full peak, with the traffic
  // at 2.4e11 B / 1.2 s = 200 GB/s by hand.
  ModelStats model = trafficModel();
  ClusterSpec spec = oneDevice(1);
  spec.device.memoryBandwidthGBps = 100;
  SearchOptions o = fp32On(1);
  LayoutChoice l;
  RunMetrics run;
  run.medianStepSeconds = 1.2;
  Calibration e;
  Status st = calibrateEfficiency(model, spec, o, l, 2, run, e);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos, st.message.find("--fit memory-bandwidth"))
      << st.message;
  EXPECT_EQ(std::string::npos, st.message.find("set device.efficiency"))
      << st.message;
  EXPECT_EQ(100.0, spec.device.memoryBandwidthGBps);

  BandwidthCalibration c;
  st = calibrateMemoryBandwidth(model, spec, o, l, 2, run, c);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_NEAR(200, c.gbps, 1e-3);
  EXPECT_NEAR(200, spec.device.memoryBandwidthGBps, 1e-3);
  EXPECT_EQ(100.0, c.previousGBps);
  EXPECT_NEAR(2.4 + 0.28e-6, c.predictedBefore, 1e-9);
  EXPECT_NEAR(1.2, c.predictedAfter, 1e-5);

  // An efficiency below 1 from an earlier fit: the refusal says to lift it.
  spec.device.memoryBandwidthGBps = 100;
  spec.device.efficiency["fp32"] = 0.9;
  st = calibrateEfficiency(model, spec, o, l, 2, run, e);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos,
            st.message.find("set device.efficiency.fp32 to 1"))
      << st.message;

  // Faster than the products alone: the efficiency is off, not the memory.
  spec.device.efficiency["fp32"] = 1.0;
  run.medianStepSeconds = 0.5;
  st = calibrateMemoryBandwidth(model, spec, o, l, 2, run, c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos, st.message.find("--fit efficiency"))
      << st.message;
  // And where the products at the peak do not fit in the run either, the
  // efficiency's refusal names the peak.
  st = calibrateEfficiency(model, spec, o, l, 2, run, e);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos,
            st.message.find("device.peak_TFLOPs.fp32 (1) is understated"))
      << st.message;
}

TEST(ProfileMetrics, CacheRatePricesTheOpsThatFit) {
  // The block's op moves 1e10 elements a sample, 4 B each (as in
  // CalibratedMemoryBandwidthReproducesTheRun): 2.4e11 B a step of 2
  // samples with the backward, 8e10 B of it one micro-batch's forward.
  // With a cache of 1e6 MB that fits: 2.4e11 B at 300 GB/s is 0.8 s,
  // over the FLOPs' 0.6 s (and the update's 0.28 us at the memory's 100
  // GB/s). Measured 1.2 s: 2.4e11 B / 1.2 s = 200 GB/s by hand.
  ModelStats model = trafficModel();
  ClusterSpec spec = oneDevice(1);
  spec.device.memoryBandwidthGBps = 100;
  spec.device.cacheMB = 1e6;
  spec.device.cacheBandwidthGBps = 300;
  SearchOptions o = fp32On(1);
  LayoutChoice l;
  RunMetrics run;
  run.medianStepSeconds = 1.2;
  BandwidthCalibration c;
  Status st = calibrateCacheBandwidth(model, spec, o, l, 2, run, c);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_NEAR(0.8 + 0.28e-6, c.predictedBefore, 1e-9);
  EXPECT_NEAR(200, c.gbps, 1e-3);
  EXPECT_NEAR(200, spec.device.cacheBandwidthGBps, 1e-3);
  EXPECT_NEAR(1.2, c.predictedAfter, 1e-5);
  EXPECT_EQ(0, c.cacheMBSet);

  // A cache of 10 MB does not hold it: the memory's 2.4 s, which no
  // cache rate moves.
  spec.device.cacheMB = 10;
  st = calibrateCacheBandwidth(model, spec, o, l, 2, run, c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos,
            st.message.find("with the in-cache traffic free"))
      << st.message;

  // Slower than at the memory's rate: not the traffic's time.
  spec.device.cacheMB = 1e6;
  run.medianStepSeconds = 3.0;
  st = calibrateCacheBandwidth(model, spec, o, l, 2, run, c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos, st.message.find("below the memory's 100 GB/s"))
      << st.message;

  // No memory rate for the rest of the traffic.
  spec.device.memoryBandwidthGBps = 0;
  st = calibrateCacheBandwidth(model, spec, o, l, 2, run, c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos,
            st.message.find("need device.memory_bandwidth_GBps"))
      << st.message;
}

TEST(ProfileMetrics, CalibratedOverheadReproducesAMultiRankRun) {
  // The block all-reduces two tensors over tp in the forward and two in
  // the backward, and the gradient norm sums over tp once: at tp=2, one
  // micro-batch, a step makes 5 calls.
  ModelStats model = computeOnlyModel();
  model.classes[0].tpAllReduceElements = {10, 10};
  ClusterSpec spec = oneDevice(1);
  SearchOptions o = fp32On(2);
  LayoutChoice l;
  l.tp = 2;
  Plan idle;
  ASSERT_TRUE(evaluatePlan(model, spec, o, l, 2, Recompute::None, idle).ok());
  // Measured 2.5 ms more than the plan without overhead: 500 us a call.
  RunMetrics run;
  run.medianStepSeconds = idle.stepSeconds + 5 * 500e-6;
  OverheadCalibration c;
  Status st = calibrateCollectiveOverhead(model, spec, o, l, 2, run, c);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_NEAR(500, c.overheadUs, 0.1);
  EXPECT_NEAR(500, spec.device.collectiveOverheadUs, 0.1);
  EXPECT_EQ(0.0, c.previousUs);
  EXPECT_NEAR(idle.stepSeconds, c.predictedBefore, 1e-12);
  EXPECT_NEAR(run.medianStepSeconds, c.predictedAfter, 1e-6);

  // Faster than the plan with no overhead: the compute side is off.
  spec.device.collectiveOverheadUs = 0;
  run.medianStepSeconds = idle.stepSeconds * 0.9;
  st = calibrateCollectiveOverhead(model, spec, o, l, 2, run, c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos, st.message.find("--fit efficiency"))
      << st.message;

  // One device runs no collectives.
  LayoutChoice one;
  o.devices = 1;
  st = calibrateCollectiveOverhead(model, spec, o, one, 2, run, c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos, st.message.find("2 or more ranks"))
      << st.message;
}

TEST(ProfileMetrics, CalibratedOpOverheadReproducesTheRun) {
  // The block's one op and 1e5 FLOPs a sample: 0.6 us of compute at 1
  // TFLOP/s for 2 samples. Measured 40.6 us: 40 us of overhead on its one
  // op, whatever the batch.
  ModelStats model = computeOnlyModel();
  model.classes[0].ops[0].flops = 1e5;
  ClusterSpec spec = oneDevice(1);
  SearchOptions o = fp32On(1);
  LayoutChoice l;
  RunMetrics run;
  run.medianStepSeconds = 40.6e-6;
  OverheadCalibration c;
  Status st = calibrateOpOverhead(model, spec, o, l, 2, run, c);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_NEAR(40, c.overheadUs, 1e-3);
  EXPECT_NEAR(40, spec.device.opOverheadUs, 1e-3);
  EXPECT_NEAR(0.6e-6, c.predictedBefore, 1e-12);
  EXPECT_NEAR(40.6e-6, c.predictedAfter, 1e-9);

  // Faster than the FLOPs alone, or from two ranks: refused.
  spec.device.opOverheadUs = 0;
  run.medianStepSeconds = 0.3e-6;
  st = calibrateOpOverhead(model, spec, o, l, 2, run, c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos, st.message.find("no op overhead at all"))
      << st.message;
  LayoutChoice dp;
  dp.dp = 2;
  o.devices = 2;
  st = calibrateOpOverhead(model, spec, o, dp, 1, run, c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(std::string::npos, st.message.find("from a 1-rank run"))
      << st.message;
}

TEST(ProfileMetrics, CalibratedUpdateBandwidthReproducesTheRun) {
  // 1e8 fp32 parameters: AdamW's update reads the parameter, its gradient
  // and two moments and writes the parameter and the moments, 28 B each:
  // 2.8 GB a step. The computation is 0.6 s at the peak; measured 0.8 s,
  // so the update ran at 2.8 GB / 0.2 s = 14 GB/s.
  ModelStats model = computeOnlyModel();
  model.classes[0].params = 1e8;
  ClusterSpec spec = oneDevice(1);
  spec.device.memoryBandwidthGBps = 50;
  SearchOptions o = fp32On(1);
  LayoutChoice l;
  RunMetrics run;
  run.medianStepSeconds = 0.8;
  BandwidthCalibration c;
  Status st = calibrateUpdateBandwidth(model, spec, o, l, 2, run, c);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_NEAR(14, c.gbps, 1e-3);
  EXPECT_NEAR(14, spec.device.updateBandwidthGBps, 1e-3);
  // Before: the update at the memory bandwidth, 56 ms.
  EXPECT_EQ(50.0, c.previousGBps);
  EXPECT_NEAR(0.656, c.predictedBefore, 1e-9);
  EXPECT_NEAR(0.8, c.predictedAfter, 1e-5);
  // The memory side of the ops keeps the memory bandwidth: only the update
  // moves.
  EXPECT_EQ(50.0, spec.device.memoryBandwidthGBps);

  EXPECT_FALSE(c.capped);
  EXPECT_FALSE(c.floored);
  // A run whose update would have taken 2.8 GB in 10 ms (280 GB/s) is
  // faster than memory allows: the rate stops at the memory bandwidth.
  run.medianStepSeconds = 0.61;
  st = calibrateUpdateBandwidth(model, spec, o, l, 2, run, c);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_TRUE(c.capped);
  EXPECT_EQ(50.0, c.gbps);
  EXPECT_EQ(50.0, spec.device.updateBandwidthGBps);
  EXPECT_NEAR(0.656, c.predictedAfter, 1e-9);

  // A run whose update took 2.8 GB in 1 s (2.8 GB/s) is slower than a
  // stream through memory: the rate stops at a quarter of the bandwidth,
  // 12.5 GB/s, 224 ms.
  run.medianStepSeconds = 1.6;
  st = calibrateUpdateBandwidth(model, spec, o, l, 2, run, c);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_TRUE(c.floored);
  EXPECT_FALSE(c.capped);
  EXPECT_EQ(12.5, c.gbps);
  EXPECT_EQ(12.5, spec.device.updateBandwidthGBps);
  EXPECT_NEAR(0.824, c.predictedAfter, 1e-9);

  // Faster than the computation alone: the efficiency is off, not the
  // update.
  run.medianStepSeconds = 0.55;
  st = calibrateUpdateBandwidth(model, spec, o, l, 2, run, c);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(
      std::string::npos,
      st.message.find("faster than the plan predicts with the update free"))
      << st.message;
  EXPECT_NE(std::string::npos, st.message.find("--fit efficiency"))
      << st.message;
}

} // namespace
