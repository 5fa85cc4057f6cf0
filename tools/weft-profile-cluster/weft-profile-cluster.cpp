//===- weft-profile-cluster.cpp - Measure this machine into a spec --------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
//   weft-profile-cluster [--devices N] [--quick] [--name NAME] [-o FILE]
//   weft-profile-cluster --from-metrics RUN.jsonl --model M.mlir
//       --spec IN.yaml [--mesh dp=A,tp=B,pp=C] [--zero K]
//       [--micro-batch-size B] [--dtype D]
//       [--fit efficiency|collective-overhead|op-overhead|update-bandwidth|
//              memory-bandwidth|cache-bandwidth]
//       [-o FILE]
//
// Maps flags onto lib/Planner/Profile.h and writes what it returns; the
// measurements and the calibration method live in the library.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/CostModel.h"
#include "weft/Planner/Profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include <unistd.h>

using namespace weft::planner;

namespace {

const char *const kUsage =
    "usage: weft-profile-cluster [--devices N] [--quick] [--name NAME] "
    "[-o FILE]\n"
    "       weft-profile-cluster --from-metrics RUN.jsonl --model M.mlir "
    "--spec IN.yaml\n"
    "           [--mesh dp=A,tp=B,pp=C] [--zero K] [--micro-batch-size B]\n"
    "           [--dtype D] [--fit efficiency|collective-overhead|"
    "op-overhead|\n"
    "           update-bandwidth|memory-bandwidth|cache-bandwidth]\n"
    "           [-o FILE]\n"
    "       weft-profile-cluster --inter-node --spec IN.yaml [--quick] "
    "[-o FILE]\n"
    "\n"
    "Measures this machine and writes a cluster spec (YAML; weft-cluster\n"
    "check reads it): GEMM throughput per dtype and shape class (the\n"
    "runtime's GEMMs, as executables run them: oneDNN where libdnnl.so.2\n"
    "loads, else OpenBLAS; one thread), memory bandwidth (STREAM triad), and "
    "all-reduce,\n"
    "all-gather, reduce-scatter (2..N ranks) and send/recv (2 ranks) over\n"
    "gloo on 127.0.0.1. Progress on stderr.\n"
    "  --devices N     ranks this machine runs, one core each (default: its\n"
    "                  cores)\n"
    "  --quick         tiny sizes, few repetitions (a smoke test, seconds)\n"
    "  --name NAME     the spec's name (default: local)\n"
    "  -o FILE         write there instead of stdout\n"
    "\n"
    "--from-metrics: set the spec's device.efficiency.<dtype> so that the\n"
    "plan of the run's layout predicts the run's median step time (the\n"
    "executable's --metrics file; the first step is left out when there are\n"
    "three or more). M.mlir is the model in the weft dialect (weftc\n"
    "model.onnx --emit=weft, or weft-modelgen); the layout defaults to one\n"
    "device with the whole batch; --dtype defaults to fp32.\n"
    "  --fit collective-overhead  instead set device.collective_overhead_us,\n"
    "                  what each collective or transfer costs a step beyond\n"
    "                  its time on idle devices, from a run of 2 or more\n"
    "                  ranks (--mesh; its efficiency calibrated first from a\n"
    "                  1-rank run)\n"
    "  --fit op-overhead  instead set device.op_overhead_us, what a step\n"
    "                  spends per op of the forward pass and micro-batch\n"
    "                  beyond its FLOPs and bytes, from a 1-rank run of a\n"
    "                  small model (whose step is mostly that)\n"
    "  --fit update-bandwidth  instead set device.update_bandwidth_GBps, the\n"
    "                  rate of the optimizer's once-a-step pass over the\n"
    "                  parameters, from a 1-rank run at a batch other than\n"
    "                  the efficiency's (half of it); refit the efficiency\n"
    "                  after, as each fit holds the other fixed\n"
    "  --fit memory-bandwidth  instead set device.memory_bandwidth_GBps, the\n"
    "                  rate the ops' memory traffic is priced at, from a\n"
    "                  1-rank run faster than the plan at the full peak (the\n"
    "                  efficiency fit refuses it: the ops' data stayed in\n"
    "                  cache, faster than the measured triad)\n"
    "  --fit cache-bandwidth  instead set device.cache_bandwidth_GBps, the\n"
    "                  rate of the traffic of ops whose data for a\n"
    "                  micro-batch fits in device.cache_MB (this host's L2\n"
    "                  per core where the spec has none), from a run of a\n"
    "                  small model at a batch other than the op overhead's;\n"
    "                  needs device.memory_bandwidth_GBps for the rest\n"
    "\n"
    "--inter-node: measure the network between nodes and write IN.yaml with\n"
    "its inter_node link set to what was measured (send/recv ping-pong\n"
    "between the first two nodes, fitted as latency + bytes / bandwidth) and\n"
    "nodes to at least the nodes taking part. Run one process per node under\n"
    "a launcher, e.g. on node I of 2:\n"
    "  weftrun --nnodes 2 --node-rank I --nproc-per-node 1 --master-addr "
    "HOST \\\n"
    "      weft-profile-cluster --inter-node --spec local.yaml -o two.yaml\n"
    "Rank 0 writes the spec; the others write nothing.\n";

int usageError(const std::string &msg) {
  std::cerr << "weft-profile-cluster: " << msg << "\n"
            << "run weft-profile-cluster --help for the options\n";
  return 2;
}

bool parseInt(const std::string &text, int &out) {
  char *end = nullptr;
  long v = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || v <= 0 || v > 1 << 20)
    return false;
  out = int(v);
  return true;
}

int writeOut(const std::string &path, const std::string &text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return 0;
  }
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    std::cerr << "weft-profile-cluster: cannot write " << path << "\n";
    return 1;
  }
  return 0;
}

std::string readFile(const std::string &path, bool &ok) {
  std::ifstream in(path, std::ios::binary);
  ok = bool(in);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string fixed(const char *format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, v);
  return buf;
}

int profile(int devices, bool quick, const std::string &name,
            const std::string &outPath, const std::string &commandLine) {
  ProfileOptions o;
  o.devices = devices;
  o.quick = quick;
  o.progress = [](const std::string &line) {
    std::cerr << "weft-profile-cluster: " << line << "\n" << std::flush;
  };
  ProfileResult r;
  if (Status s = measureLocalMachine(o, r); !s.ok()) {
    std::cerr << "weft-profile-cluster: " << s.message << "\n";
    return 1;
  }
  ClusterSpec spec = specFromProfile(r, o, name);

  std::map<std::string, std::string> notes;
  notes[""] = "Measured by weft-profile-cluster" +
              std::string(quick ? " --quick (tiny sizes: a smoke test, not "
                                  "numbers to plan with)"
                                : "") +
              ".\n" + commandLine +
              "\nA device is one core running one rank; numbers per device.";
  notes["device.memory_GB"] =
      "An even share of the host's " + fixed("%.1f", r.hostMemoryBytes / 1e9) +
      " GB over " + std::to_string(devices) + " devices.";
  notes["device.memory_bandwidth_GBps"] =
      "STREAM triad on one thread, three arrays, no write-allocate counted.";
  notes["device.comm_overlap"] =
      "A device is a core: its collectives run on the cores that compute.";
  notes["collective_library"] =
      "The ranks run Weft's gloo runtime; a host's cores share its network "
      "link (inter_node.shared_by_node).";
  for (const char *dt : kClusterDTypes) {
    std::string path = std::string("device.peak_TFLOPs.") + dt;
    auto un = r.unmeasured.find(dt);
    notes[path] = un != r.unmeasured.end()
                      ? "Not measured: " + un->second + "."
                      : "Measured: the fastest of the shape classes' "
                        "products on one thread.";
  }
  notes["device.gemm_efficiency"] =
      "Per shape class, against the peak above: small 2MNK <= 2*256^3, "
      "medium <= 2*1024^3, large above.";
  bool fitted = false;
  for (const CollectiveMeasurement &m : r.collectives)
    fitted |= m.collective == "send_recv";
  double latency = 0, bandwidth = 0;
  fitted = fitted && fitLink(r.collectives, latency, bandwidth);
  notes["intra_node"] =
      fitted ? "Fitted t = latency + bytes / bandwidth to gloo send/recv "
               "between 2 ranks over 127.0.0.1 (ping-pong)."
             : "Not measured (one device, or too few send/recv sizes): "
               "1 GB/s and 100 us are assumed, because the spec needs a "
               "link. One device never uses it; measure without --quick "
               "before planning for several.";
  notes["inter_node"] =
      "Not measured: one host has no link to another node; the loopback "
      "numbers stand in.";
  notes["collectives"] = "Gloo over 127.0.0.1, one thread per rank; bytes as "
                         "the cost model counts them (all-reduce buffer, "
                         "all-gather output, reduce-scatter input, "
                         "message); median of three batches.";
  return writeOut(outPath, formatClusterSpec(spec, notes));
}

int fromMetrics(const std::string &metricsPath, const std::string &modelPath,
                const std::string &specPath, const SearchOptions &options,
                int microBatchSize, const std::string &fit,
                const std::string &outPath) {
  bool ok = false;
  std::string text = readFile(metricsPath, ok);
  if (!ok)
    return usageError("cannot read --from-metrics file " + metricsPath);
  RunMetrics run;
  ClusterSpec spec;
  ModelStats model;
  for (Status s :
       {readRunMetrics(text, metricsPath, run), loadClusterSpec(specPath, spec),
        loadModelStats(modelPath, model)})
    if (!s.ok()) {
      std::cerr << "weft-profile-cluster: " << s.message << "\n";
      return 1;
    }
  LayoutChoice layout;
  layout.dp = std::max(options.dp, 1);
  layout.tp = std::max(options.tp, 1);
  layout.pp = std::max(options.pp, 1);
  layout.zeroStage = std::max(options.zeroStage, 0);
  if (model.batch % layout.dp != 0)
    return usageError("dp=" + std::to_string(layout.dp) +
                      " does not divide the model's batch of " +
                      std::to_string(model.batch));
  int mbs = microBatchSize ? microBatchSize : int(model.batch / layout.dp);
  if (model.batch % (int64_t(layout.dp) * mbs) != 0)
    return usageError("--micro-batch-size " + std::to_string(mbs) +
                      " times dp=" + std::to_string(layout.dp) +
                      " does not divide the model's batch of " +
                      std::to_string(model.batch));
  layout.microBatches = int(model.batch / (int64_t(layout.dp) * mbs));
  SearchOptions o = options;
  o.devices = layout.dp * layout.tp * layout.pp;
  std::map<std::string, std::string> notes;
  notes[""] = "Recalibrated by weft-profile-cluster --from-metrics " +
              metricsPath + " from " + specPath +
              " (its comments are not carried over).";
  // What the fit set: the spec's field, its value before and after, the
  // plan's step before and after, and what the field's comment says.
  // `bounded`: why the update's fit stopped short of the run.
  std::string field, why, bounded;
  double before = 0, after = 0, predictedBefore = 0, predictedAfter = 0;
  Status s = Status::success();
  if (fit == "update-bandwidth" || fit == "memory-bandwidth" ||
      fit == "cache-bandwidth") {
    BandwidthCalibration c;
    if (fit == "update-bandwidth") {
      s = calibrateUpdateBandwidth(model, spec, o, layout, mbs, run, c);
      field = "device.update_bandwidth_GBps";
    } else if (fit == "cache-bandwidth") {
      s = calibrateCacheBandwidth(model, spec, o, layout, mbs, run, c);
      field = "device.cache_bandwidth_GBps";
      if (s.ok() && c.cacheMBSet > 0)
        notes["device.cache_MB"] =
            "This host's L2 per core (the spec had no cache).";
    } else {
      s = calibrateMemoryBandwidth(model, spec, o, layout, mbs, run, c);
      field = "device.memory_bandwidth_GBps";
    }
    why = " (batch " + std::to_string(model.batch) + ")";
    before = c.previousGBps, after = c.gbps;
    predictedBefore = c.predictedBefore, predictedAfter = c.predictedAfter;
    if (c.capped)
      bounded = "capped at the device's memory bandwidth: the run implied a "
                "faster update, which is the noise of the runs";
    if (c.floored)
      bounded = "raised to a quarter of the device's memory bandwidth: the "
                "run implied a slower update, which is the noise of the runs "
                "(fit again from quieter ones)";
    if (!bounded.empty())
      why += ", " + bounded;
  } else if (fit == "op-overhead" || fit == "collective-overhead") {
    OverheadCalibration c;
    if (fit == "op-overhead") {
      s = calibrateOpOverhead(model, spec, o, layout, mbs, run, c);
      field = "device.op_overhead_us";
      why = " (1 device, batch " + std::to_string(model.batch) + ")";
    } else {
      s = calibrateCollectiveOverhead(model, spec, o, layout, mbs, run, c);
      field = "device.collective_overhead_us";
      why = " (" + std::to_string(layout.dp) + " x " +
            std::to_string(layout.tp) + " x " + std::to_string(layout.pp) +
            " dp x tp x pp)";
    }
    before = c.previousUs, after = c.overheadUs;
    predictedBefore = c.predictedBefore, predictedAfter = c.predictedAfter;
  } else {
    Calibration c;
    s = calibrateEfficiency(model, spec, o, layout, mbs, run, c);
    field = "device.efficiency." + c.dtype;
    before = c.previous, after = c.efficiency;
    predictedBefore = c.predictedBefore, predictedAfter = c.predictedAfter;
  }
  if (!s.ok()) {
    std::cerr << "weft-profile-cluster: " << s.message << "\n";
    return 1;
  }
  std::cerr << "weft-profile-cluster: " << metricsPath << ": median step "
            << fixed("%.6g", run.medianStepSeconds) << " s over " << run.used
            << " of " << run.steps << " steps; "
            << field.substr(std::string("device.").size()) << " "
            << fixed("%.4g", before) << " -> " << fixed("%.4g", after)
            << " (predicted step " << fixed("%.6g", predictedBefore) << " -> "
            << fixed("%.6g", predictedAfter) << " s)\n";
  if (!bounded.empty())
    std::cerr << "weft-profile-cluster: warning: the update's bandwidth was "
              << bounded << "\n";
  notes[field] = "So that the plan of the run's layout" + why +
                 " predicts its median step of " +
                 fixed("%.6g", run.medianStepSeconds) + " s.";
  return writeOut(outPath, formatClusterSpec(spec, notes));
}

} // namespace

int interNode(bool quick, const std::string &specPath,
              const std::string &outPath, const std::string &commandLine) {
  if (specPath.empty())
    return usageError("--inter-node needs --spec IN.yaml: the spec whose "
                      "inter_node link it measures (weft-profile-cluster "
                      "writes one for a node)");
  ClusterSpec spec;
  if (Status s = loadClusterSpec(specPath, spec); !s.ok()) {
    std::cerr << "weft-profile-cluster: " << s.message << "\n";
    return 1;
  }
  ProfileOptions o;
  o.quick = quick;
  o.progress = [](const std::string &line) {
    std::cerr << "weft-profile-cluster: " << line << "\n" << std::flush;
  };
  ClusterSpec::Link link;
  bool measured = false;
  int nodes = 0;
  if (Status s = measureInterNode(
          o, [](const char *name) { return std::getenv(name); }, link, measured,
          nodes);
      !s.ok()) {
    std::cerr << "weft-profile-cluster: " << s.message << "\n";
    return 1;
  }
  if (!measured)
    return 0;
  spec.interNode.bandwidthGBps = link.bandwidthGBps;
  spec.interNode.latencyUs = link.latencyUs;
  spec.nodes = std::max<int64_t>(spec.nodes, nodes);
  std::map<std::string, std::string> notes;
  notes[""] = "The spec of " + specPath +
              " (its comments are not carried over) with its inter-node "
              "link measured by weft-profile-cluster --inter-node" +
              (quick ? " --quick (tiny sizes: a smoke test)" : "") + ".\n" +
              commandLine;
  notes["inter_node"] = "Measured: send/recv between the first two of " +
                        std::to_string(nodes) +
                        " nodes, fitted as latency + bytes / bandwidth.";
  std::cerr << "weft-profile-cluster: inter-node link "
            << fixed("%.4g", link.bandwidthGBps) << " GB/s, "
            << fixed("%.4g", link.latencyUs) << " us\n";
  return writeOut(outPath, formatClusterSpec(spec, notes));
}

int main(int argc, char **argv) {
  int devices = int(std::thread::hardware_concurrency());
  if (devices <= 0)
    devices = 1;
  bool quick = false;
  std::string name = "local", outPath, metrics, model, specPath;
  SearchOptions search;
  search.dtype = "fp32";
  int mbs = 0;
  bool interNodeMode = false;
  std::string fit = "efficiency";
  std::string commandLine = "Command:";
  for (int i = 0; i < argc; ++i)
    commandLine += std::string(" ") + argv[i];

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--quick") {
      quick = true;
      continue;
    }
    if (arg == "--inter-node") {
      interNodeMode = true;
      continue;
    }
    if (i + 1 >= argc)
      return usageError(arg == "--devices" || arg == "--name" || arg == "-o" ||
                                arg == "--from-metrics" || arg == "--model" ||
                                arg == "--spec" || arg == "--mesh" ||
                                arg == "--zero" || arg == "--dtype" ||
                                arg == "--micro-batch-size" || arg == "--fit"
                            ? arg + " needs a value"
                            : "unknown argument '" + arg + "'");
    std::string value = argv[++i];
    if (arg == "--devices") {
      if (!parseInt(value, devices))
        return usageError("--devices takes a positive integer, got '" + value +
                          "'");
    } else if (arg == "--name") {
      name = value;
    } else if (arg == "-o") {
      outPath = value;
    } else if (arg == "--from-metrics") {
      metrics = value;
    } else if (arg == "--model") {
      model = value;
    } else if (arg == "--spec") {
      specPath = value;
    } else if (arg == "--dtype") {
      if (Status s = checkDType(value); !s.ok())
        return usageError("--dtype: " + s.message);
      search.dtype = value;
    } else if (arg == "--zero") {
      if (value.size() != 1 || value[0] < '0' || value[0] > '3')
        return usageError("--zero takes 0, 1, 2 or 3, got '" + value + "'");
      search.zeroStage = value[0] - '0';
    } else if (arg == "--micro-batch-size") {
      if (!parseInt(value, mbs))
        return usageError("--micro-batch-size takes a positive integer, got '" +
                          value + "'");
    } else if (arg == "--fit") {
      if (value != "efficiency" && value != "collective-overhead" &&
          value != "op-overhead" && value != "update-bandwidth" &&
          value != "memory-bandwidth" && value != "cache-bandwidth")
        return usageError("--fit takes efficiency, collective-overhead, "
                          "op-overhead, update-bandwidth, memory-bandwidth or "
                          "cache-bandwidth, got '" +
                          value + "'");
      fit = value;
    } else if (arg == "--mesh") {
      std::stringstream parts(value);
      std::string part;
      while (std::getline(parts, part, ',')) {
        size_t eq = part.find('=');
        std::string key = part.substr(0, eq);
        int v = 0;
        int *slot = key == "dp"   ? &search.dp
                    : key == "tp" ? &search.tp
                    : key == "pp" ? &search.pp
                                  : nullptr;
        if (eq == std::string::npos || !slot ||
            !parseInt(part.substr(eq + 1), v))
          return usageError("--mesh takes dp=A,tp=B,pp=C (any of them), got '" +
                            value + "'");
        *slot = v;
      }
    } else {
      return usageError("unknown argument '" + arg + "'");
    }
  }

  if (interNodeMode) {
    if (!metrics.empty() || !model.empty())
      return usageError("--inter-node measures the network; recalibrate "
                        "(--from-metrics) in a separate run");
    return interNode(quick, specPath, outPath, commandLine);
  }
  if (!metrics.empty() || !model.empty() || !specPath.empty()) {
    if (metrics.empty() || model.empty() || specPath.empty())
      return usageError("recalibration needs all of --from-metrics RUN.jsonl, "
                        "--model M.mlir and --spec IN.yaml");
    return fromMetrics(metrics, model, specPath, search, mbs, fit, outPath);
  }
  return profile(devices, quick, name, outPath, commandLine);
}
