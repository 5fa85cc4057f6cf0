//===- ClusterSpecTest.cpp - Reading and checking cluster specs -----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Every shipped example reads back the numbers it states; every way a spec
// can be wrong (a field missing, misspelt, of the wrong type, out of range,
// or the YAML itself broken) is refused with a message naming the field by
// its path and, where a file has one, the line and column.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/ClusterSpec.h"

#include <gtest/gtest.h>

using namespace weft::planner;

namespace {

/// A valid spec, one field per line so tests can drop or change a line.
const char *const kValid = "nodes: 2\n"              // line 1
                           "devices_per_node: 4\n"   // 2
                           "device:\n"               // 3
                           "  memory_GB: 80\n"       // 4
                           "  peak_TFLOPs:\n"        // 5
                           "    fp32: 19.5\n"        // 6
                           "    bf16: 312\n"         // 7
                           "    fp16: 312\n"         // 8
                           "intra_node:\n"           // 9
                           "  bandwidth_GBps: 300\n" // 10
                           "  latency_us: 3\n"       // 11
                           "inter_node:\n"           // 12
                           "  bandwidth_GBps: 25\n"  // 13
                           "  latency_us: 5\n";      // 14

/// kValid with the first line containing `needle` replaced by `replacement`
/// (or dropped when it is empty). Fails the test if nothing matched.
std::string edit(const std::string &needle, const std::string &replacement) {
  std::string in = kValid, out;
  bool found = false;
  size_t pos = 0;
  while (pos < in.size()) {
    size_t end = in.find('\n', pos);
    std::string line = in.substr(pos, end - pos);
    pos = end + 1;
    if (line.find(needle) != std::string::npos && !found) {
      found = true;
      if (!replacement.empty())
        out += replacement + "\n";
      continue;
    }
    out += line + "\n";
  }
  EXPECT_TRUE(found) << needle;
  return out;
}

/// The error parsing `text` gives; empty (and a test failure) if it parses.
std::string errorOf(const std::string &text) {
  ClusterSpec spec;
  Status s = parseClusterSpec(text, "cluster.yaml", spec);
  EXPECT_FALSE(s.ok()) << "accepted:\n" << text;
  return s.message;
}

ClusterSpec loadExample(const std::string &file) {
  ClusterSpec spec;
  Status s =
      loadClusterSpec(std::string(WEFT_CLUSTER_EXAMPLES) + "/" + file, spec);
  EXPECT_TRUE(s.ok()) << s.message;
  return spec;
}

TEST(ClusterSpec, ParsesValidSpec) {
  ClusterSpec spec;
  Status s = parseClusterSpec(kValid, "dir/my-cluster.yaml", spec);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(spec.name, "my-cluster"); // No `name`: the file's stem.
  EXPECT_EQ(spec.nodes, 2);
  EXPECT_EQ(spec.devicesPerNode, 4);
  EXPECT_EQ(spec.numDevices(), 8);
  EXPECT_EQ(spec.device.memoryGB, 80);
  EXPECT_EQ(spec.device.peakTFLOPs.at("fp32"), 19.5);
  EXPECT_EQ(spec.device.peakTFLOPs.at("bf16"), 312);
  EXPECT_EQ(spec.device.peakTFLOPs.at("fp16"), 312);
  EXPECT_TRUE(spec.device.efficiency.empty());
  EXPECT_EQ(spec.intraNode.bandwidthGBps, 300);
  EXPECT_EQ(spec.intraNode.latencyUs, 3);
  EXPECT_EQ(spec.interNode.bandwidthGBps, 25);
  EXPECT_EQ(spec.interNode.latencyUs, 5);
  EXPECT_TRUE(spec.collectives.empty());
  EXPECT_EQ(spec.describe(),
            "my-cluster: 2 nodes x 4 devices, 80 GB, TFLOP/s fp32 19.5 bf16 "
            "312 fp16 312, intra-node 300 GB/s 3 us, inter-node 25 GB/s 5 us");
}

TEST(ClusterSpec, ExamplesHoldTheirNumbers) {
  ClusterSpec a100 = loadExample("dgx-a100-80gb.yaml");
  EXPECT_EQ(a100.name, "dgx-a100-80gb");
  EXPECT_EQ(a100.numDevices(), 8);
  EXPECT_EQ(a100.device.memoryGB, 80);
  EXPECT_EQ(a100.device.peakTFLOPs.at("fp32"), 19.5);
  EXPECT_EQ(a100.device.peakTFLOPs.at("bf16"), 312);
  EXPECT_EQ(a100.intraNode.bandwidthGBps, 230); // NCCL reaches this of 300 GB/s
  EXPECT_EQ(a100.interNode.bandwidthGBps, 25);

  ClusterSpec h100 = loadExample("dgx-h100.yaml");
  EXPECT_EQ(h100.numDevices(), 8);
  EXPECT_EQ(h100.device.peakTFLOPs.at("fp32"), 67);
  EXPECT_EQ(h100.device.peakTFLOPs.at("bf16"), 989);
  EXPECT_EQ(h100.device.peakTFLOPs.at("fp16"), 989);
  EXPECT_EQ(h100.intraNode.bandwidthGBps, 370); // of the 450 GB/s line rate
  EXPECT_EQ(h100.interNode.bandwidthGBps, 50);

  ClusterSpec h200 = loadExample("h200.yaml");
  EXPECT_EQ(h200.numDevices(), 1);
  EXPECT_EQ(h200.device.memoryGB, 141);
  EXPECT_EQ(h200.device.peakTFLOPs, h100.device.peakTFLOPs);

  ClusterSpec cpu = loadExample("cpu-host.yaml");
  EXPECT_EQ(cpu.nodes, 1);
  EXPECT_EQ(cpu.devicesPerNode, 2);
  EXPECT_EQ(cpu.device.peakTFLOPs.at("fp32"), 0.267);
  EXPECT_EQ(cpu.intraNode.bandwidthGBps, 1.9);
  EXPECT_EQ(cpu.intraNode.latencyUs, 100);
  ASSERT_EQ(cpu.collectives.count("all_reduce"), 1u);
  const auto &ar = cpu.collectives.at("all_reduce");
  ASSERT_EQ(ar.size(), 6u);
  EXPECT_EQ(ar[0].group, 2);
  EXPECT_EQ(ar[0].bytes, 4096);
  EXPECT_EQ(ar[0].us, 1.5);
  EXPECT_EQ(ar[3].bytes, 1048576);
  EXPECT_EQ(ar[3].us, 750);
  EXPECT_EQ(ar[5].bytes, 100700000);
  EXPECT_EQ(cpu.collectives.at("reduce_scatter").size(), 4u);
  EXPECT_EQ(cpu.collectives.at("send_recv").size(), 4u);
  EXPECT_EQ(cpu.device.commOverlap, 0);
  EXPECT_EQ(cpu.device.opOverheadUs, 3.8);
  EXPECT_EQ(cpu.device.collectiveOverheadUs, 20);
  EXPECT_EQ(cpu.device.cacheMB, 1.048576);
  EXPECT_EQ(cpu.device.cacheBandwidthGBps, 25);
}

TEST(ClusterSpec, EachMissingFieldIsNamed) {
  const std::pair<const char *, const char *> cases[] = {
      {"nodes:", "cluster.yaml:1:1: nodes is missing (number of nodes"},
      {"devices_per_node:", "devices_per_node is missing (devices per node"},
      {"memory_GB", "device.memory_GB is missing (memory of one device in GB"},
      {"fp32", "device.peak_TFLOPs.fp32 is missing (peak dense throughput"},
      {"bf16", "cluster.yaml:6:5: device.peak_TFLOPs.bf16 is missing (peak "
               "dense throughput in TFLOP/s per device, e.g. 312 for an "
               "A100)"},
      {"fp16", "device.peak_TFLOPs.fp16 is missing"},
      {"300", "intra_node.bandwidth_GBps is missing (one direction, GB/s"},
      {"latency_us: 3", "intra_node.latency_us is missing (microseconds"},
      {"25", "inter_node.bandwidth_GBps is missing"},
      {"latency_us: 5", "inter_node.latency_us is missing"},
  };
  for (auto &[line, expected] : cases)
    EXPECT_NE(errorOf(edit(line, "")).find(expected), std::string::npos)
        << "dropping '" << line << "' gave: " << errorOf(edit(line, ""));
}

TEST(ClusterSpec, MissingSectionIsNamed) {
  std::string text = kValid;
  text = text.substr(0, text.find("inter_node:"));
  EXPECT_NE(errorOf(text).find("inter_node is missing (a mapping with "
                               "bandwidth_GBps and latency_us"),
            std::string::npos);
}

TEST(ClusterSpec, WrongTypesAreRefused) {
  EXPECT_EQ(errorOf(edit("nodes:", "nodes: eight")),
            "cluster.yaml:1:8: nodes must be a number (number of nodes, e.g. "
            "1), got 'eight'");
  EXPECT_EQ(errorOf(edit("memory_GB", "  memory_GB: \"80\"")),
            "cluster.yaml:4:14: device.memory_GB must be a number, got the "
            "string '80'; remove the quotes");
  EXPECT_NE(errorOf(edit("memory_GB", "  memory_GB: [80]"))
                .find("device.memory_GB must be a number (memory of one "
                      "device in GB, e.g. 80), got a list"),
            std::string::npos);
  // A section given as a number.
  std::string text = kValid;
  text = text.substr(0, text.find("inter_node:")) + "inter_node: 25\n";
  EXPECT_NE(errorOf(text).find("inter_node must be a mapping with keys "
                               "bandwidth_GBps, latency_us, shared_by_node, "
                               "got '25'"),
            std::string::npos);
  EXPECT_NE(errorOf(edit("latency_us: 5", "  latency_us:"))
                .find("inter_node.latency_us has no value"),
            std::string::npos);
  EXPECT_NE(errorOf("- 1\n- 2\n").find("a cluster spec must be a mapping"),
            std::string::npos);
}

TEST(ClusterSpec, OutOfRangeValuesAreRefused) {
  EXPECT_EQ(errorOf(edit("300", "  bandwidth_GBps: -3")),
            "cluster.yaml:10:19: intra_node.bandwidth_GBps must be a positive "
            "number (one direction, GB/s per device, e.g. 300), got -3");
  EXPECT_NE(errorOf(edit("nodes:", "nodes: 0"))
                .find("nodes must be a positive integer (number of nodes, "
                      "e.g. 1), got 0"),
            std::string::npos);
  EXPECT_NE(errorOf(edit("devices_per_node:", "devices_per_node: 2.5"))
                .find("devices_per_node must be a positive integer"),
            std::string::npos);
  EXPECT_NE(errorOf(edit("fp16", "    fp16: 0"))
                .find("device.peak_TFLOPs.fp16 must be a positive number"),
            std::string::npos);
  EXPECT_NE(errorOf(edit("latency_us: 3", "  latency_us: -1"))
                .find("intra_node.latency_us must be zero or more"),
            std::string::npos);
  EXPECT_NE(errorOf(edit("memory_GB", "  memory_GB: .nan"))
                .find("device.memory_GB must be a number"),
            std::string::npos);
  EXPECT_NE(errorOf(edit("fp16", "    fp16: 312\n  comm_overlap: 1.5"))
                .find("device.comm_overlap must be from 0 to 1"),
            std::string::npos);
  EXPECT_NE(errorOf(edit("fp16", "    fp16: 312\n  collective_overhead_us: -5"))
                .find("device.collective_overhead_us must be zero or more"),
            std::string::npos);
  EXPECT_NE(errorOf(edit("fp16", "    fp16: 312\n  op_overhead_us: -1"))
                .find("device.op_overhead_us must be zero or more"),
            std::string::npos);
  {
    ClusterSpec cpu;
    Status s = parseClusterSpec(
        edit("fp16", "    fp16: 312\n  op_overhead_us: 4.5"), "c.yaml", cpu);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(cpu.device.opOverheadUs, 4.5);
  }
  {
    ClusterSpec cpu;
    Status s = parseClusterSpec(
        edit("fp16", "    fp16: 312\n  comm_overlap: 0"), "c.yaml", cpu);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(cpu.device.commOverlap, 0);
  }
  {
    ClusterSpec cpu;
    Status s = parseClusterSpec(
        edit("fp16", "    fp16: 312\n  collective_overhead_us: 850"), "c.yaml",
        cpu);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(cpu.device.collectiveOverheadUs, 850);
  }
  {
    ClusterSpec cpu;
    Status s = parseClusterSpec(
        edit("fp16", "    fp16: 312\n  update_bandwidth_GBps: 13.5"), "c.yaml",
        cpu);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(cpu.device.updateBandwidthGBps, 13.5);
    EXPECT_NE(errorOf(edit("fp16", "    fp16: 312\n  update_bandwidth_GBps: 0"))
                  .find("device.update_bandwidth_GBps must be a positive"),
              std::string::npos);
  }
  // Zero latency is allowed (an idealized link).
  ClusterSpec spec;
  EXPECT_TRUE(
      parseClusterSpec(edit("latency_us: 3", "  latency_us: 0"), "c.yaml", spec)
          .ok());
}

TEST(ClusterSpec, SharedLinksAndTheCollectiveLibrary) {
  ClusterSpec spec;
  ASSERT_TRUE(parseClusterSpec(kValid, "c.yaml", spec).ok());
  EXPECT_FALSE(spec.interNode.sharedByNode);
  EXPECT_EQ(ClusterSpec::Library::Nccl, spec.collectiveLibrary);
  std::string text = edit("latency_us: 5", "  latency_us: 5\n"
                                           "  shared_by_node: true\n"
                                           "collective_library: gloo");
  Status st = parseClusterSpec(text, "c.yaml", spec);
  ASSERT_TRUE(st.ok()) << st.message;
  EXPECT_TRUE(spec.interNode.sharedByNode);
  EXPECT_EQ(ClusterSpec::Library::Gloo, spec.collectiveLibrary);
  EXPECT_NE(spec.describe().find("25 GB/s per node 5 us, gloo"),
            std::string::npos)
      << spec.describe();
  EXPECT_EQ(errorOf(edit("latency_us: 5",
                         "  latency_us: 5\ncollective_library: mpi")),
            "cluster.yaml:15:21: collective_library must be nccl (GPUs) or "
            "gloo (CPU ranks), got 'mpi'");
  EXPECT_EQ(
      errorOf(edit("latency_us: 5", "  latency_us: 5\n  shared_by_node: yes")),
      "cluster.yaml:15:19: inter_node.shared_by_node must be true (one "
      "link per node, shared by its devices) or false (one per "
      "device), got 'yes'");
  // A node's own devices share no network link.
  EXPECT_NE(
      errorOf(edit("latency_us: 3", "  latency_us: 3\n  shared_by_node: true"))
          .find("unknown key 'intra_node.shared_by_node'"),
      std::string::npos);
}

TEST(ClusterSpec, UnknownKeysAreRefusedWithSuggestion) {
  EXPECT_EQ(errorOf(edit("devices_per_node:", "devices_per_nod: 4")),
            "cluster.yaml:2:1: unknown key 'devices_per_nod'; did you mean "
            "'devices_per_node'? (valid keys: name, nodes, devices_per_node, "
            "device, intra_node, inter_node, collective_library, "
            "collectives)");
  // Nested: the path names the section, the suggestion the key in it.
  EXPECT_NE(errorOf(edit("fp32", "    tf32: 156"))
                .find("unknown key 'device.peak_TFLOPs.tf32'; did you mean "
                      "'fp32'? (valid keys in device.peak_TFLOPs: fp32, "
                      "bf16, fp16)"),
            std::string::npos);
  EXPECT_NE(errorOf(edit("memory_GB", "  memory_gb: 80"))
                .find("did you mean 'memory_GB'?"),
            std::string::npos);
  // Nothing close: no guess, but the valid keys.
  std::string far = errorOf(std::string(kValid) + "colour: blue\n");
  EXPECT_NE(far.find("unknown key 'colour' (valid keys: name,"),
            std::string::npos)
      << far;
  EXPECT_NE(errorOf(std::string(kValid) + "nodes: 3\n")
                .find("cluster.yaml:15:1: nodes is given twice; keep one"),
            std::string::npos);
}

TEST(ClusterSpec, SyntaxErrorsGiveLineAndColumn) {
  std::string err = errorOf(edit("bf16", "    bf16: [312"));
  EXPECT_EQ(err.rfind("cluster.yaml:", 0), 0u) << err;
  EXPECT_NE(err.find(": not valid YAML: "), std::string::npos) << err;
  // The position is a real one: "cluster.yaml:<line>:<column>: ...".
  unsigned line = 0, column = 0;
  EXPECT_EQ(std::sscanf(err.c_str(), "cluster.yaml:%u:%u:", &line, &column), 2)
      << err;
  EXPECT_GE(line, 7u);
  EXPECT_GE(column, 1u);

  err = errorOf("nodes: 1\n  devices_per_node: 2\n");
  EXPECT_EQ(err.rfind("cluster.yaml:2:", 0), 0u) << err;
  EXPECT_NE(err.find("not valid YAML"), std::string::npos) << err;
}

TEST(ClusterSpec, EmptyAndUnreadableFiles) {
  EXPECT_NE(errorOf("").find("cluster.yaml: the cluster spec is empty"),
            std::string::npos);
  EXPECT_NE(errorOf("# only a comment\n").find("is empty"), std::string::npos);
  ClusterSpec spec;
  Status s = loadClusterSpec("/nonexistent/cluster.yaml", spec);
  EXPECT_NE(s.message.find("cannot open cluster spec "
                           "'/nonexistent/cluster.yaml': No such file"),
            std::string::npos)
      << s.message;
}

TEST(ClusterSpec, OptionalSectionsParse) {
  std::string text = std::string("name: lab\n") + kValid +
                     "  efficiency:\n" // Wrong place: under inter_node.
                     "    bf16: 0.7\n";
  EXPECT_NE(errorOf(text).find("unknown key 'inter_node.efficiency'"),
            std::string::npos);

  text = std::string("name: lab\n") +
         edit("fp16", "    fp16: 312\n"
                      "  efficiency:\n"
                      "    bf16: 0.7\n"
                      "    fp32: 1") +
         "collectives:\n"
         "  all_reduce:\n"
         "    - {group: 8, bytes: 1048576, us: 120}\n"
         "    - {group: 2, bytes: 4096, us: 20.5}\n"
         "  send_recv:\n"
         "    - group: 2\n"
         "      bytes: 65536\n"
         "      us: 9\n";
  ClusterSpec spec;
  Status s = parseClusterSpec(text, "c.yaml", spec);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(spec.name, "lab");
  EXPECT_EQ(spec.device.efficiency.size(), 2u);
  EXPECT_EQ(spec.device.efficiency.at("bf16"), 0.7);
  EXPECT_EQ(spec.device.efficiency.at("fp32"), 1);
  ASSERT_EQ(spec.collectives.at("all_reduce").size(), 2u);
  EXPECT_EQ(spec.collectives.at("all_reduce")[0].group, 8);
  EXPECT_EQ(spec.collectives.at("all_reduce")[1].us, 20.5);
  EXPECT_EQ(spec.collectives.at("send_recv")[0].bytes, 65536);
  EXPECT_NE(spec.describe().find(", 3 measured collectives"),
            std::string::npos);

  auto withEfficiency = [&](const std::string &line) {
    return edit("fp16", "    fp16: 312\n  efficiency:\n" + line);
  };
  EXPECT_NE(errorOf(withEfficiency("    bf16: 1.5"))
                .find("device.efficiency.bf16 must be more than 0 and at "
                      "most 1"),
            std::string::npos);
  EXPECT_NE(errorOf(withEfficiency("    int8: 0.5"))
                .find("unknown key 'device.efficiency.int8'"),
            std::string::npos);

  std::string base = kValid;
  EXPECT_NE(errorOf(base + "collectives:\n  all_reduce:\n"
                           "    - {group: 16, bytes: 1, us: 1}\n")
                .find("collectives.all_reduce[0].group is 16; a collective "
                      "needs 2 to 8 ranks"),
            std::string::npos);
  EXPECT_NE(errorOf(base + "collectives:\n  all_reduce:\n"
                           "    - {group: 2, bytes: 1}\n")
                .find("collectives.all_reduce[0].us is missing"),
            std::string::npos);
  EXPECT_NE(errorOf(base + "collectives:\n  allreduce: []\n")
                .find("did you mean 'all_reduce'?"),
            std::string::npos);
  EXPECT_NE(errorOf(base + "collectives:\n  all_reduce: 5\n")
                .find("collectives.all_reduce must be a list of {group, "
                      "bytes, us}"),
            std::string::npos);
}

} // namespace
