//===- ClusterSpec.cpp - Read and check a cluster spec --------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// yaml-cpp reports syntax errors and bad conversions by throwing, so this
// one file is built with exceptions (lib/Planner/CMakeLists.txt) and no
// exception leaves it: parseClusterSpec catches them and returns a Status.
// Inside, a field that fails its check throws SpecError too, which keeps
// each check one line instead of a return-and-propagate at every level.
//
// Numbers are read from the scalar text with strtod/strtoll rather than
// yaml-cpp's as<double>(), which would take "80" in quotes or "0x50" and
// say nothing about where the value was.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/ClusterSpec.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

namespace weft {
namespace planner {

const char *const kClusterDTypes[3] = {"fp32", "bf16", "fp16"};
const char *const kClusterCollectives[5] = {
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"};
const char *const kGemmShapeClasses[3] = {"small", "medium", "large"};

namespace {

/// A field that failed its check; the message is complete.
struct SpecError {
  std::string message;
};

/// A key a mapping may hold, with what to write there when it is missing.
struct Key {
  const char *name;
  bool required;
  const char *hint;
};

/// Levenshtein distance, for "did you mean" on misspelt keys.
size_t editDistance(const std::string &a, const std::string &b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min(
          {row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string join(const std::string &path, const std::string &key) {
  return path.empty() ? key : path + "." + key;
}

/// Formats numbers as a person wrote them: 19.5, 312, 0.0021.
std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

class Reader {
public:
  explicit Reader(std::string source) : source(std::move(source)) {}

  /// "file:line:column" of `node`, or "file" where yaml-cpp has no mark.
  std::string where(const YAML::Node &node) const {
    YAML::Mark mark = node.Mark();
    if (mark.is_null())
      return source;
    return source + ":" + std::to_string(mark.line + 1) + ":" +
           std::to_string(mark.column + 1);
  }

  [[noreturn]] void fail(const YAML::Node &at, const std::string &msg) const {
    throw SpecError{where(at) + ": " + msg};
  }

  /// Checks that `node` (at `path`) is a mapping whose keys are all in
  /// `keys`, each once, and that the required ones are there. Returns the
  /// children by key.
  std::map<std::string, YAML::Node> fields(const YAML::Node &node,
                                           const std::string &path,
                                           const std::vector<Key> &keys) {
    std::string listed;
    for (const Key &k : keys)
      listed += std::string(listed.empty() ? "" : ", ") + k.name;
    if (!node.IsMap())
      fail(node, (path.empty() ? std::string("a cluster spec") : path) +
                     " must be a mapping with keys " + listed + ", got " +
                     kind(node));
    std::map<std::string, YAML::Node> out;
    for (auto it = node.begin(); it != node.end(); ++it) {
      // Copies: the iterator's -> hands out a temporary pair.
      YAML::Node keyNode = it->first;
      YAML::Node value = it->second;
      if (!keyNode.IsScalar())
        fail(keyNode, "a key in " + (path.empty() ? "the top level" : path) +
                          " is not a name; valid keys: " + listed);
      std::string key = keyNode.Scalar();
      auto known = std::find_if(keys.begin(), keys.end(),
                                [&](const Key &k) { return key == k.name; });
      if (known == keys.end()) {
        std::string msg = "unknown key " + rt::quote(join(path, key));
        const Key *best = nullptr;
        size_t bestDistance = 3; // At most two edits away.
        for (const Key &k : keys) {
          size_t d = editDistance(key, k.name);
          if (d < bestDistance) {
            bestDistance = d;
            best = &k;
          }
        }
        if (best)
          msg += "; did you mean " + rt::quote(best->name) + "?";
        fail(keyNode, msg + " (valid keys" +
                          (path.empty() ? "" : " in " + path) + ": " + listed +
                          ")");
      }
      if (!out.emplace(key, value).second)
        fail(keyNode, join(path, key) + " is given twice; keep one");
    }
    for (const Key &k : keys)
      if (k.required && !out.count(k.name))
        fail(node, join(path, k.name) + " is missing (" + k.hint + ")");
    return out;
  }

  /// The value at `path` as a finite number; `hint` says what belongs there.
  double number(const YAML::Node &node, const std::string &path,
                const char *hint) {
    if (node.IsNull())
      fail(node, path + " has no value (" + hint + ")");
    if (!node.IsScalar())
      fail(node, path + " must be a number (" + hint + "), got " + kind(node));
    const std::string &text = node.Scalar();
    // yaml-cpp tags quoted scalars "!": "80" in quotes is a string.
    if (node.Tag() == "!")
      fail(node, path + " must be a number, got the string " + rt::quote(text) +
                     "; remove the quotes");
    errno = 0;
    char *end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (text.empty() || end != text.c_str() + text.size() || errno ||
        !std::isfinite(v))
      fail(node,
           path + " must be a number (" + hint + "), got " + rt::quote(text));
    return v;
  }

  double positive(const YAML::Node &node, const std::string &path,
                  const char *hint) {
    double v = number(node, path, hint);
    if (!(v > 0))
      fail(node, path + " must be a positive number (" + hint + "), got " +
                     node.Scalar());
    return v;
  }

  double nonNegative(const YAML::Node &node, const std::string &path,
                     const char *hint) {
    double v = number(node, path, hint);
    if (v < 0)
      fail(node,
           path + " must be zero or more (" + hint + "), got " + node.Scalar());
    return v;
  }

  int64_t positiveInteger(const YAML::Node &node, const std::string &path,
                          const char *hint) {
    number(node, path, hint);
    const std::string &text = node.Scalar();
    errno = 0;
    char *end = nullptr;
    long long i = std::strtoll(text.c_str(), &end, 10);
    if (end != text.c_str() + text.size() || errno || i <= 0)
      fail(node,
           path + " must be a positive integer (" + hint + "), got " + text);
    return i;
  }

  std::string string(const YAML::Node &node, const std::string &path) {
    if (!node.IsScalar())
      fail(node, path + " must be a string, got " + kind(node));
    return node.Scalar();
  }

  static std::string kind(const YAML::Node &node) {
    if (node.IsMap())
      return "a mapping";
    if (node.IsSequence())
      return "a list";
    if (node.IsNull())
      return "nothing";
    return rt::quote(node.Scalar());
  }

private:
  std::string source;
};

ClusterSpec::Link readLink(Reader &r, const YAML::Node &node,
                           const std::string &path, const char *example,
                           bool mayBeShared) {
  std::string bwHint =
      std::string("one direction, GB/s per device, e.g. ") + example;
  const char *latHint = "microseconds for a small message, e.g. 5";
  std::vector<Key> keys = {{"bandwidth_GBps", true, bwHint.c_str()},
                           {"latency_us", true, latHint}};
  if (mayBeShared)
    keys.push_back({"shared_by_node", false, ""});
  auto f = r.fields(node, path, keys);
  ClusterSpec::Link link;
  link.bandwidthGBps = r.positive(f["bandwidth_GBps"],
                                  join(path, "bandwidth_GBps"), bwHint.c_str());
  link.latencyUs =
      r.nonNegative(f["latency_us"], join(path, "latency_us"), latHint);
  if (f.count("shared_by_node")) {
    const YAML::Node &shared = f["shared_by_node"];
    std::string v = shared.IsScalar() ? shared.Scalar() : "";
    if (v != "true" && v != "false")
      r.fail(shared, join(path, "shared_by_node") +
                         " must be true (one link per node, shared by its "
                         "devices) or false (one per device), got " +
                         Reader::kind(shared));
    link.sharedByNode = v == "true";
  }
  return link;
}

ClusterSpec::Device readDevice(Reader &r, const YAML::Node &node) {
  auto f = r.fields(node, "device",
                    {{"memory_GB", true, "memory of one device in GB, e.g. 80"},
                     {"peak_TFLOPs", true,
                      "peak dense TFLOP/s per device for fp32, bf16 and fp16"},
                     {"efficiency", false, ""},
                     {"gemm_efficiency", false, ""},
                     {"memory_bandwidth_GBps", false, ""},
                     {"update_bandwidth_GBps", false, ""},
                     {"comm_overlap", false, ""},
                     {"collective_overhead_us", false, ""},
                     {"op_overhead_us", false, ""},
                     {"cache_MB", false, ""},
                     {"cache_bandwidth_GBps", false, ""}});
  ClusterSpec::Device device;
  device.memoryGB = r.positive(f["memory_GB"], "device.memory_GB",
                               "memory of one device in GB, e.g. 80");

  const char *peakHint =
      "peak dense throughput in TFLOP/s per device, e.g. 312 for an A100";
  std::vector<Key> dtypeKeys;
  for (const char *dt : kClusterDTypes)
    dtypeKeys.push_back({dt, true, peakHint});
  auto peaks = r.fields(f["peak_TFLOPs"], "device.peak_TFLOPs", dtypeKeys);
  for (const char *dt : kClusterDTypes)
    device.peakTFLOPs[dt] =
        r.positive(peaks[dt], join("device.peak_TFLOPs", dt), peakHint);

  if (f.count("efficiency")) {
    for (Key &k : dtypeKeys)
      k.required = false;
    auto effs = r.fields(f["efficiency"], "device.efficiency", dtypeKeys);
    const char *effHint =
        "measured fraction of the peak, more than 0 and at most 1";
    for (auto &[dt, node] : effs) {
      std::string path = join("device.efficiency", dt);
      double e = r.number(node, path, effHint);
      if (!(e > 0 && e <= 1))
        r.fail(node, path + " must be more than 0 and at most 1 (" + effHint +
                         "), got " + node.Scalar());
      device.efficiency[dt] = e;
    }
  }
  if (f.count("gemm_efficiency")) {
    for (Key &k : dtypeKeys)
      k.required = false;
    std::vector<Key> classKeys;
    for (const char *c : kGemmShapeClasses)
      classKeys.push_back({c, false, ""});
    const char *effHint = "measured fraction of the peak for GEMMs of this "
                          "shape class, more than 0 and at most 1";
    auto byDType =
        r.fields(f["gemm_efficiency"], "device.gemm_efficiency", dtypeKeys);
    for (auto &[dt, classes] : byDType) {
      std::string dtPath = join("device.gemm_efficiency", dt);
      for (auto &[cls, node] : r.fields(classes, dtPath, classKeys)) {
        std::string path = join(dtPath, cls);
        double e = r.number(node, path, effHint);
        if (!(e > 0 && e <= 1))
          r.fail(node, path + " must be more than 0 and at most 1 (" +
                           effHint + "), got " + node.Scalar());
        device.gemmEfficiency[dt][cls] = e;
      }
    }
  }
  if (f.count("memory_bandwidth_GBps"))
    device.memoryBandwidthGBps =
        r.positive(f["memory_bandwidth_GBps"], "device.memory_bandwidth_GBps",
                   "measured memory bandwidth of one device in GB/s, e.g. "
                   "2039 for an A100 80GB");
  if (f.count("update_bandwidth_GBps"))
    device.updateBandwidthGBps = r.positive(
        f["update_bandwidth_GBps"], "device.update_bandwidth_GBps",
        "GB/s at which one device's optimizer update moves its bytes, e.g. "
        "13.5 (weft-profile-cluster --fit update-bandwidth measures it)");
  if (f.count("comm_overlap")) {
    const char *hint = "fraction of the computation that overlapped "
                       "communication hides behind, from 0 (CPU ranks) to 1";
    double o = r.number(f["comm_overlap"], "device.comm_overlap", hint);
    if (!(o >= 0 && o <= 1))
      r.fail(f["comm_overlap"],
             std::string("device.comm_overlap must be from 0 to 1 (") + hint +
                 "), got " + f["comm_overlap"].Scalar());
    device.commOverlap = o;
  }
  if (f.count("collective_overhead_us")) {
    const char *hint = "microseconds each collective costs a step beyond "
                       "its time on idle devices, zero or more";
    double o = r.number(f["collective_overhead_us"],
                        "device.collective_overhead_us", hint);
    if (!(o >= 0))
      r.fail(f["collective_overhead_us"],
             std::string("device.collective_overhead_us must be zero or "
                         "more (") +
                 hint + "), got " + f["collective_overhead_us"].Scalar());
    device.collectiveOverheadUs = o;
  }
  if (f.count("op_overhead_us")) {
    const char *hint = "microseconds a step spends per op of the forward "
                       "pass and micro-batch beyond its FLOPs and bytes, "
                       "zero or more";
    double o = r.number(f["op_overhead_us"], "device.op_overhead_us", hint);
    if (!(o >= 0))
      r.fail(f["op_overhead_us"],
             std::string("device.op_overhead_us must be zero or more (") +
                 hint + "), got " + f["op_overhead_us"].Scalar());
    device.opOverheadUs = o;
  }
  // The cache's two fields come together, and price only the ops that
  // fit: the others need the memory's rate, which is no faster.
  const char *cacheHint =
      "device.cache_MB (data per op and micro-batch that stays in cache, "
      "e.g. 1 for a core's L2) and device.cache_bandwidth_GBps (the rate "
      "such ops move it at; weft-profile-cluster --fit cache-bandwidth)";
  if (f.count("cache_MB"))
    device.cacheMB = r.positive(f["cache_MB"], "device.cache_MB", cacheHint);
  if (f.count("cache_bandwidth_GBps"))
    device.cacheBandwidthGBps = r.positive(
        f["cache_bandwidth_GBps"], "device.cache_bandwidth_GBps", cacheHint);
  if (f.count("cache_MB") != f.count("cache_bandwidth_GBps")) {
    bool size = f.count("cache_MB");
    r.fail(
        f[size ? "cache_MB" : "cache_bandwidth_GBps"],
        std::string(size ? "device.cache_bandwidth_GBps" : "device.cache_MB") +
            " is missing: the cache is priced by both, " + cacheHint);
  }
  if (device.cacheMB > 0 && !(device.memoryBandwidthGBps > 0))
    r.fail(f["cache_MB"],
           "device.cache_MB needs device.memory_bandwidth_GBps too: the "
           "ops whose data does not fit in cache move it at that rate");
  if (device.cacheMB > 0 && device.memoryBandwidthGBps > 0 &&
      device.cacheBandwidthGBps < device.memoryBandwidthGBps)
    r.fail(f["cache_bandwidth_GBps"],
           "device.cache_bandwidth_GBps (" +
               f["cache_bandwidth_GBps"].Scalar() +
               ") is below device.memory_bandwidth_GBps (" +
               f["memory_bandwidth_GBps"].Scalar() +
               "): data in cache moves at least as fast as in memory");
  return device;
}

void readCollectives(Reader &r, const YAML::Node &node, ClusterSpec &spec) {
  std::vector<Key> keys;
  for (const char *c : kClusterCollectives)
    keys.push_back({c, false, ""});
  auto tables = r.fields(node, "collectives", keys);
  for (auto &[name, table] : tables) {
    std::string path = join("collectives", name);
    if (!table.IsSequence())
      r.fail(table, path + " must be a list of {group, bytes, us}, got " +
                        Reader::kind(table));
    std::vector<ClusterSpec::CollectiveSample> &samples =
        spec.collectives[name];
    for (size_t i = 0; i < table.size(); ++i) {
      std::string at = path + "[" + std::to_string(i) + "]";
      const char *groupHint = "ranks taking part, e.g. 8";
      const char *bytesHint = "bytes per rank, e.g. 1048576";
      const char *usHint = "measured microseconds, e.g. 850";
      auto f = r.fields(table[i], at,
                        {{"group", true, groupHint},
                         {"bytes", true, bytesHint},
                         {"us", true, usHint}});
      ClusterSpec::CollectiveSample s;
      s.group = r.positiveInteger(f["group"], at + ".group", groupHint);
      if (s.group < 2 || s.group > spec.numDevices())
        r.fail(f["group"], at + ".group is " + std::to_string(s.group) +
                               "; a collective needs 2 to " +
                               std::to_string(spec.numDevices()) +
                               " ranks on this cluster (nodes x "
                               "devices_per_node)");
      s.bytes = r.positive(f["bytes"], at + ".bytes", bytesHint);
      s.us = r.positive(f["us"], at + ".us", usHint);
      samples.push_back(s);
    }
  }
}

void readSpec(Reader &r, const YAML::Node &root, ClusterSpec &spec) {
  auto f = r.fields(
      root, "",
      {{"name", false, ""},
       {"nodes", true, "number of nodes, e.g. 1"},
       {"devices_per_node", true,
        "devices per node (GPUs, or CPU cores run as one rank each), e.g. 8"},
       {"device", true, "a mapping with memory_GB and peak_TFLOPs"},
       {"intra_node", true,
        "a mapping with bandwidth_GBps and latency_us between two devices "
        "of one node"},
       {"inter_node", true,
        "a mapping with bandwidth_GBps and latency_us between devices of "
        "two nodes"},
       {"collective_library", false, ""},
       {"collectives", false, ""}});
  if (f.count("name"))
    spec.name = r.string(f["name"], "name");
  spec.nodes =
      r.positiveInteger(f["nodes"], "nodes", "number of nodes, e.g. 1");
  spec.devicesPerNode = r.positiveInteger(
      f["devices_per_node"], "devices_per_node", "devices per node, e.g. 8");
  spec.device = readDevice(r, f["device"]);
  spec.intraNode = readLink(r, f["intra_node"], "intra_node", "300", false);
  spec.interNode = readLink(r, f["inter_node"], "inter_node", "25", true);
  if (f.count("collective_library")) {
    std::string lib = r.string(f["collective_library"], "collective_library");
    if (lib != "nccl" && lib != "gloo")
      r.fail(f["collective_library"],
             "collective_library must be nccl (GPUs) or gloo (CPU ranks), "
             "got " +
                 rt::quote(lib));
    spec.collectiveLibrary =
        lib == "gloo" ? ClusterSpec::Library::Gloo : ClusterSpec::Library::Nccl;
  }
  if (f.count("collectives"))
    readCollectives(r, f["collectives"], spec);
}

/// "path/to/dgx-h100.yaml" -> "dgx-h100".
std::string stem(const std::string &path) {
  size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  size_t dot = base.find_last_of('.');
  return dot == std::string::npos || dot == 0 ? base : base.substr(0, dot);
}

} // namespace

std::string ClusterSpec::describe() const {
  std::ostringstream os;
  os << name << ": " << nodes << (nodes == 1 ? " node" : " nodes") << " x "
     << devicesPerNode << (devicesPerNode == 1 ? " device" : " devices") << ", "
     << num(device.memoryGB) << " GB, TFLOP/s";
  for (const char *dt : kClusterDTypes) {
    auto it = device.peakTFLOPs.find(dt);
    os << " " << dt << " "
       << num(it == device.peakTFLOPs.end() ? 0 : it->second);
  }
  os << ", intra-node " << num(intraNode.bandwidthGBps) << " GB/s "
     << num(intraNode.latencyUs) << " us, inter-node "
     << num(interNode.bandwidthGBps) << " GB/s "
     << (interNode.sharedByNode ? "per node " : "") << num(interNode.latencyUs)
     << " us";
  if (collectiveLibrary == Library::Gloo)
    os << ", gloo";
  size_t samples = 0;
  for (const auto &entry : collectives)
    samples += entry.second.size();
  if (samples)
    os << ", " << samples << " measured collective"
       << (samples == 1 ? "" : "s");
  return os.str();
}

Status parseClusterSpec(const std::string &yamlText,
                        const std::string &sourceName, ClusterSpec &out) {
  ClusterSpec spec;
  spec.name = stem(sourceName);
  Reader reader(sourceName);
  try {
    YAML::Node root = YAML::Load(yamlText);
    if (!root.IsDefined() || root.IsNull())
      return Status::error(
          sourceName + ": the cluster spec is empty; it needs nodes, "
                       "devices_per_node, device, intra_node and inter_node "
                       "(see examples/clusters/)");
    readSpec(reader, root, spec);
  } catch (const SpecError &e) {
    return Status::error(e.message);
  } catch (const YAML::Exception &e) {
    std::string at = sourceName;
    if (!e.mark.is_null())
      at += ":" + std::to_string(e.mark.line + 1) + ":" +
            std::to_string(e.mark.column + 1);
    return Status::error(at + ": not valid YAML: " + e.msg);
  }
  out = std::move(spec);
  return Status::success();
}

Status loadClusterSpec(const std::string &path, ClusterSpec &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return Status::error("cannot open cluster spec " + rt::quote(path) + ": " +
                         std::strerror(errno) +
                         " (examples are in examples/clusters/)");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad())
    return Status::error("cannot read cluster spec " + rt::quote(path) + ": " +
                         std::strerror(errno));
  return parseClusterSpec(text.str(), path, out);
}

} // namespace planner
} // namespace weft
