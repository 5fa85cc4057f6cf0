//===- PlanFormat.cpp - Plans as a table, as JSON, and diffs --------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Planner/PlanFormat.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace weft {
namespace planner {

namespace json = llvm::json;

namespace {

std::string fmt(const char *format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value);
  return buf;
}

std::string gbs(double bytes) { return fmt("%.1f", bytes / 1e9); }

/// "7, 6 x 14, 5": runs of equal counts.
std::string runs(const std::vector<int> &counts) {
  std::string s;
  for (size_t i = 0; i < counts.size();) {
    size_t j = i;
    while (j < counts.size() && counts[j] == counts[i])
      ++j;
    if (!s.empty())
      s += ", ";
    s += std::to_string(counts[i]);
    if (j - i > 1)
      s += " x " + std::to_string(j - i);
    i = j;
  }
  return s;
}

std::string scheduleText(const Plan &p) {
  std::string s = pipeline::getScheduleKindName(p.layout.schedule);
  if (p.layout.schedule == Schedule::Interleaved)
    s += ", " + std::to_string(p.layout.virtualStages) + " virtual stages";
  if (p.layout.pp == 1)
    s += " (one stage: no pipeline)";
  return s;
}

/// How the plan lays layers out over tp.
std::string tpShardingText(const Plan &p) {
  if (p.layout.tp < 2)
    return "none (tp=1)";
  std::string text = "Megatron's (column- then row-parallel, heads and "
                     "vocabulary split)";
  if (p.tpReplicated.empty())
    return text;
  return text + ", but " + llvm::join(p.tpReplicated, ", ") +
         " replicated on every tp rank";
}

/// The replicated parts for a table row or a diff: "-" if none.
std::string replicatedText(const Plan &p) {
  return p.tpReplicated.empty() ? "nothing" : llvm::join(p.tpReplicated, ",");
}

std::string meshText(const LayoutChoice &l) {
  return "dp=" + std::to_string(l.dp) + " x tp=" + std::to_string(l.tp) +
         " x pp=" + std::to_string(l.pp);
}

std::string paramsText(double params) {
  if (params >= 1e9)
    return fmt("%.1fB", params / 1e9);
  if (params >= 1e6)
    return fmt("%.1fM", params / 1e6);
  return fmt("%.0f", params);
}

/// The executable's parts of the memory (MemoryEstimate::stepOutputs and
/// on), by their JSON names; written only when the search counted them.
std::vector<std::pair<const char *, double *>> executableParts(Plan &p) {
  return {{"step_outputs", &p.memory.stepOutputs},
          {"weight_image", &p.memory.weightImage},
          {"loss_buffers", &p.memory.lossBuffers},
          {"comm_buffers", &p.memory.commBuffers}};
}

/// ", step outputs 0.1, weight image 0.0, ... GB" where counted.
std::string executableText(const Plan &p) {
  Plan copy = p;
  std::string text;
  for (auto &[name, value] : executableParts(copy))
    if (*value > 0) {
      std::string label = name;
      std::replace(label.begin(), label.end(), '_', ' ');
      text += ", " + label + " " + fmt("%.2f", *value / 1e9);
    }
  return text.empty() ? "" : text + " GB";
}

json::Object planObject(const Plan &p) {
  const LayoutChoice &l = p.layout;
  json::Object memory{{"params", p.memory.params},
                      {"grads", p.memory.grads},
                      {"optimizer", p.memory.optimizerState},
                      {"activations", p.memory.activations}};
  Plan copy = p;
  auto extra = executableParts(copy);
  bool counted = false;
  for (auto &[name, value] : extra)
    counted |= *value > 0;
  if (counted)
    for (auto &[name, value] : extra)
      memory[name] = *value;
  json::Array stages;
  for (int b : p.blocksPerRank)
    stages.push_back(b);
  return json::Object{
      {"mesh", json::Object{{"dp", l.dp}, {"tp", l.tp}, {"pp", l.pp}}},
      {"micro_batch_size", p.microBatchSize},
      {"micro_batches", l.microBatches},
      {"zero_stage", l.zeroStage},
      {"schedule", pipeline::getScheduleKindName(l.schedule)},
      {"virtual_stages", l.virtualStages},
      {"sequence_parallel", l.sequenceParallel},
      {"recompute", recomputeName(p.recompute)},
      {"recompute_blocks", p.recomputeBlocks},
      {"blocks_per_stage", std::move(stages)},
      {"tp_replicated", json::Array(p.tpReplicated)},
      {"tp_replicated_params", json::Array(p.tpReplicatedParams)},
      {"tp_row_split_params", json::Array(p.tpRowSplitParams)},
      {"feasible", p.feasible},
      {"predicted", json::Object{{"step_time_s", p.stepSeconds},
                                 {"compute_s", p.computeSeconds},
                                 {"exposed_comm_s", p.exposedCommSeconds},
                                 {"bubble_s", p.bubbleSeconds},
                                 {"tokens_per_s", p.tokensPerSecond},
                                 {"tflops_per_device", p.tflopsPerDevice},
                                 {"mfu", p.mfu},
                                 {"memory_bytes_per_device", p.memory.total},
                                 {"memory_rank", p.memoryRank},
                                 {"memory_bytes", std::move(memory)}}}};
}

/// Reads fields of one JSON object, remembering the first error with its
/// path.
class Reader {
public:
  Reader(std::string &error, std::string path, const json::Object *obj)
      : error(error), path(std::move(path)), obj(obj) {}

  bool fail(const std::string &field, const std::string &what) {
    if (error.empty())
      error = path + field + ": " + what;
    return false;
  }
  const json::Value *get(const std::string &field) {
    const json::Value *v = obj->get(field);
    if (!v)
      fail(field, "missing");
    return v;
  }
  bool integer(const std::string &field, int64_t &out, int64_t min) {
    const json::Value *v = get(field);
    if (!v)
      return false;
    auto n = v->getAsInteger();
    if (!n || *n < min)
      return fail(field, "expected an integer of at least " +
                             std::to_string(min));
    out = *n;
    return true;
  }
  template <typename T> bool integer(const std::string &field, T &out, int64_t min) {
    int64_t n = 0;
    if (!integer(field, n, min))
      return false;
    out = T(n);
    return true;
  }
  bool number(const std::string &field, double &out) {
    const json::Value *v = get(field);
    if (!v)
      return false;
    auto n = v->getAsNumber();
    if (!n || *n < 0 || !std::isfinite(*n))
      return fail(field, "expected a number of at least 0");
    out = *n;
    return true;
  }
  bool boolean(const std::string &field, bool &out) {
    const json::Value *v = get(field);
    if (!v)
      return false;
    auto b = v->getAsBoolean();
    if (!b)
      return fail(field, "expected true or false");
    out = *b;
    return true;
  }
  bool string(const std::string &field, std::string &out) {
    const json::Value *v = get(field);
    if (!v)
      return false;
    auto s = v->getAsString();
    if (!s)
      return fail(field, "expected a string");
    out = s->str();
    return true;
  }
  bool object(const std::string &field, const json::Object *&out) {
    const json::Value *v = get(field);
    if (!v)
      return false;
    out = v->getAsObject();
    if (!out)
      return fail(field, "expected an object");
    return true;
  }

  std::string &error;
  std::string path;
  const json::Object *obj;
};

bool readPlan(Reader &r, Plan &p) {
  LayoutChoice &l = p.layout;
  const json::Object *mesh = nullptr, *predicted = nullptr, *mem = nullptr;
  std::string schedule, recompute;
  if (!r.object("mesh", mesh))
    return false;
  Reader m(r.error, r.path + "mesh.", mesh);
  if (!m.integer("dp", l.dp, 1) || !m.integer("tp", l.tp, 1) ||
      !m.integer("pp", l.pp, 1))
    return false;
  if (!r.integer("micro_batch_size", p.microBatchSize, 1) ||
      !r.integer("micro_batches", l.microBatches, 1) ||
      !r.integer("zero_stage", l.zeroStage, 0) ||
      !r.string("schedule", schedule) ||
      !r.integer("virtual_stages", l.virtualStages, 1) ||
      !r.boolean("sequence_parallel", l.sequenceParallel) ||
      !r.string("recompute", recompute) || !r.boolean("feasible", p.feasible))
    return false;
  if (l.zeroStage > 3)
    return r.fail("zero_stage", "expected 0, 1, 2 or 3");
  if (Status st = pipeline::parseScheduleKind(schedule, l.schedule); !st.ok())
    return r.fail("schedule", st.message);
  if (Status st = parseRecompute(recompute, p.recompute); !st.ok())
    return r.fail("recompute", st.message);
  // Plans written before per-block recomputation have no count: all.
  if (r.obj->get("recompute_blocks") &&
      !r.integer("recompute_blocks", p.recomputeBlocks, 0))
    return false;
  if (p.recomputeBlocks > 0 && p.recompute != Recompute::Full)
    return r.fail("recompute_blocks",
                  "counts blocks recomputed in full; it needs \"recompute\": "
                  "\"full\" (or 0)");
  const json::Value *stages = r.get("blocks_per_stage");
  if (!stages)
    return false;
  const json::Array *arr = stages->getAsArray();
  if (!arr || arr->size() != size_t(l.pp))
    return r.fail("blocks_per_stage", "expected an array of pp = " +
                                          std::to_string(l.pp) + " integers");
  for (const json::Value &v : *arr) {
    auto n = v.getAsInteger();
    if (!n || *n < 1)
      return r.fail("blocks_per_stage", "expected positive integers");
    p.blocksPerRank.push_back(int(*n));
  }
  // Plans written before per-part tensor parallelism split every part.
  for (auto [field, out] : {std::pair<const char *, std::vector<std::string> *>{
                                "tp_replicated", &p.tpReplicated},
                            {"tp_replicated_params", &p.tpReplicatedParams},
                            {"tp_row_split_params", &p.tpRowSplitParams}}) {
    const json::Value *v = r.obj->get(field);
    if (!v)
      continue;
    const json::Array *names = v->getAsArray();
    if (!names)
      return r.fail(field, "expected an array of names");
    for (const json::Value &name : *names) {
      auto text = name.getAsString();
      if (!text || text->empty())
        return r.fail(field, "expected non-empty strings");
      out->push_back(text->str());
    }
  }
  if (p.tpReplicated.empty() != p.tpReplicatedParams.empty())
    return r.fail("tp_replicated_params",
                  "lists the parameters of the parts in tp_replicated: both "
                  "are empty or neither is");
  if (!r.object("predicted", predicted))
    return false;
  Reader pr(r.error, r.path + "predicted.", predicted);
  if (!pr.number("step_time_s", p.stepSeconds) ||
      !pr.number("compute_s", p.computeSeconds) ||
      !pr.number("exposed_comm_s", p.exposedCommSeconds) ||
      !pr.number("bubble_s", p.bubbleSeconds) ||
      !pr.number("tokens_per_s", p.tokensPerSecond) ||
      !pr.number("tflops_per_device", p.tflopsPerDevice) ||
      !pr.number("mfu", p.mfu) ||
      !pr.number("memory_bytes_per_device", p.memory.total) ||
      !pr.integer("memory_rank", p.memoryRank, 0) ||
      !pr.object("memory_bytes", mem))
    return false;
  Reader mr(r.error, r.path + "predicted.memory_bytes.", mem);
  if (!mr.number("params", p.memory.params) ||
      !mr.number("grads", p.memory.grads) ||
      !mr.number("optimizer", p.memory.optimizerState) ||
      !mr.number("activations", p.memory.activations))
    return false;
  // Optional: only plans searched with the executable's memory have them.
  for (auto &[name, value] : executableParts(p))
    if (mem->get(name) && !mr.number(name, *value))
      return false;
  return true;
}

} // namespace

std::string formatPlanTable(const SearchResult &result) {
  const PlanContext &c = result.context;
  const Plan &p = result.best;
  const LayoutChoice &l = p.layout;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << "Plan for " << paramsText(c.params) << " parameters, " << c.numBlocks
     << " blocks, batch " << c.globalBatch << " x seq " << c.seq << ", "
     << c.dtype << ", on " << c.devices << " devices of " << c.cluster << " ("
     << c.devicesPerNode << " per node)\n";
  if (!p.feasible)
    os << "  DOES NOT FIT: the closest plan is shown\n";
  auto row = [&](const char *label, const std::string &value) {
    os << llvm::formatv("  {0,-19}{1}\n", label, value);
  };
  row("mesh", meshText(l));
  row("stages", std::to_string(l.pp) + ", blocks per stage " +
                    runs(p.blocksPerRank));
  row("micro-batches", std::to_string(l.microBatches) + " of " +
                           std::to_string(p.microBatchSize) + " per dp rank");
  row("schedule", scheduleText(p));
  row("ZeRO", "stage " + std::to_string(l.zeroStage));
  row("recomputation", recomputeText(p));
  row("sequence parallel", l.sequenceParallel ? "on" : "off");
  row("tp shardings", tpShardingText(p));
  row("memory/device",
      gbs(p.memory.total) + " GB of " + gbs(c.deviceMemoryBytes) +
          " GB (pipeline rank " + std::to_string(p.memoryRank) +
          "): params " + gbs(p.memory.params) + ", grads " +
          gbs(p.memory.grads) + ", optimizer " +
          gbs(p.memory.optimizerState) + ", activations " +
          gbs(p.memory.activations) + " GB" + executableText(p));
  row("step time", fmt("%.4g s", p.stepSeconds) + " = compute " +
                       fmt("%.4g s", p.computeSeconds) + " + exposed comm " +
                       fmt("%.4g s", p.exposedCommSeconds) + " + bubble " +
                       fmt("%.4g s", p.bubbleSeconds));
  row("throughput", fmt("%.0f tokens/s, ", p.tokensPerSecond) +
                        fmt("%.1f TFLOP/s per device, ", p.tflopsPerDevice) +
                        fmt("MFU %.1f %%", 100 * p.mfu));
  if (result.oneDeviceStepSeconds > 0)
    row("one device", fmt("%.4g s a step: ", result.oneDeviceStepSeconds) +
                          "faster than this plan on " +
                          std::to_string(c.devices) +
                          " devices; the model is too small to gain from "
                          "them");
  if (!result.alternatives.empty()) {
    os << "\nAlternatives (the best of other meshes):\n";
    os << llvm::formatv("  {0,-24}{1,-5}{2,-6}{3,-11}{4,-4}{5,-18}{6,-11}{7,-12}{8}\n",
                        "mesh", "mbs", "zero", "recompute", "sp", "schedule",
                        "step (s)", "memory (GB)", "why");
    // Which parts each keeps replicated, when any plan keeps some.
    bool anyReplicated = !p.tpReplicated.empty();
    for (const Plan &a : result.alternatives)
      anyReplicated |= !a.tpReplicated.empty();
    for (const Plan &a : result.alternatives) {
      std::string sched = pipeline::getScheduleKindName(a.layout.schedule);
      if (a.layout.schedule == Schedule::Interleaved)
        sched += " v=" + std::to_string(a.layout.virtualStages);
      os << llvm::formatv(
          "  {0,-24}{1,-5}{2,-6}{3,-11}{4,-4}{5,-18}{6,-11}{7,-12}{8}\n",
          meshText(a.layout), a.microBatchSize, a.layout.zeroStage,
          recomputeText(a, /*brief=*/true),
          a.layout.sequenceParallel ? "on" : "off", sched,
          fmt("%.4g", a.stepSeconds), gbs(a.memory.total),
          a.why + (anyReplicated && a.layout.tp > 1
                       ? "; tp replicates " + replicatedText(a)
                       : std::string()));
    }
  }
  return s;
}

std::string formatPlanJSON(const SearchResult &result) {
  const PlanContext &c = result.context;
  json::Object root = planObject(result.best);
  root["format"] = "weft-plan";
  root["version"] = kPlanFormatVersion;
  root["cluster"] = c.cluster;
  root["devices"] = c.devices;
  root["devices_per_node"] = c.devicesPerNode;
  root["device_memory_bytes"] = c.deviceMemoryBytes;
  root["dtype"] = c.dtype;
  root["global_batch"] = c.globalBatch;
  root["seq"] = c.seq;
  root["blocks"] = c.numBlocks;
  root["params"] = c.params;
  json::Array alts;
  for (const Plan &a : result.alternatives) {
    json::Object o = planObject(a);
    o["why"] = a.why;
    alts.push_back(std::move(o));
  }
  root["alternatives"] = std::move(alts);
  if (result.oneDeviceStepSeconds > 0)
    root["one_device_step_time_s"] = result.oneDeviceStepSeconds;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << llvm::formatv("{0:2}", json::Value(std::move(root))) << "\n";
  return s;
}

Status parsePlanJSON(const std::string &text, const std::string &source,
                     SearchResult &out) {
  llvm::Expected<json::Value> parsed = json::parse(text);
  if (!parsed)
    return Status::error(source + ": not valid JSON: " +
                         llvm::toString(parsed.takeError()));
  const json::Object *root = parsed->getAsObject();
  if (!root)
    return Status::error(source + ": expected a JSON object (a weft-plan file)");
  std::string error;
  Reader r(error, "", root);
  SearchResult res;
  PlanContext &c = res.context;
  std::string format;
  int64_t version = 0;
  bool ok = r.string("format", format);
  if (ok && format != "weft-plan")
    ok = r.fail("format", "expected \"weft-plan\", got \"" + format + "\"");
  ok = ok && r.integer("version", version, 0);
  if (ok && version != kPlanFormatVersion)
    ok = r.fail("version", "this weft-plan reads version " +
                               std::to_string(kPlanFormatVersion) + ", got " +
                               std::to_string(version) +
                               "; write the plan again with this weft-plan");
  ok = ok && r.string("cluster", c.cluster) &&
       r.integer("devices", c.devices, 1) &&
       r.integer("devices_per_node", c.devicesPerNode, 1) &&
       r.number("device_memory_bytes", c.deviceMemoryBytes) &&
       r.string("dtype", c.dtype) && r.integer("global_batch", c.globalBatch, 1) &&
       r.integer("seq", c.seq, 0) && r.integer("blocks", c.numBlocks, 1) &&
       r.number("params", c.params) && readPlan(r, res.best);
  // Optional: only where one device is faster.
  if (ok && root->get("one_device_step_time_s"))
    ok = r.number("one_device_step_time_s", res.oneDeviceStepSeconds);
  const json::Value *alts = ok ? r.get("alternatives") : nullptr;
  if (ok && alts) {
    const json::Array *arr = alts->getAsArray();
    if (!arr) {
      r.fail("alternatives", "expected an array of plans");
    } else {
      for (size_t i = 0; i < arr->size() && error.empty(); ++i) {
        std::string path = "alternatives[" + std::to_string(i) + "].";
        const json::Object *o = (*arr)[i].getAsObject();
        if (!o) {
          error = path.substr(0, path.size() - 1) + ": expected an object";
          break;
        }
        Reader ar(error, path, o);
        Plan p;
        if (readPlan(ar, p) && ar.string("why", p.why))
          res.alternatives.push_back(p);
      }
    }
  }
  if (error.empty()) {
    const LayoutChoice &l = res.best.layout;
    if (int64_t(l.dp) * l.tp * l.pp != c.devices)
      error = "mesh: dp x tp x pp = " +
              std::to_string(int64_t(l.dp) * l.tp * l.pp) +
              ", but the plan is for devices = " + std::to_string(c.devices);
  }
  if (!error.empty())
    return Status::error(source + ": " + error);
  out = std::move(res);
  return Status::success();
}

std::string formatPlanDiff(const SearchResult &ra, const std::string &nameA,
                           const SearchResult &rb, const std::string &nameB) {
  const Plan &a = ra.best, &b = rb.best;
  std::string s;
  llvm::raw_string_ostream os(s);
  os << nameA << " -> " << nameB << "\n";
  const PlanContext &ca = ra.context, &cb = rb.context;
  auto ctx = [&](const char *field, const std::string &x, const std::string &y) {
    if (x != y)
      os << "  note: different " << field << ": " << x << " -> " << y << "\n";
  };
  ctx("cluster", ca.cluster, cb.cluster);
  ctx("devices", std::to_string(ca.devices), std::to_string(cb.devices));
  ctx("model (params)", paramsText(ca.params), paramsText(cb.params));
  ctx("global batch", std::to_string(ca.globalBatch),
      std::to_string(cb.globalBatch));
  ctx("dtype", ca.dtype, cb.dtype);

  int changes = 0;
  auto field = [&](const char *name, const std::string &x, const std::string &y) {
    if (x == y)
      return;
    ++changes;
    os << llvm::formatv("  {0,-19}{1} -> {2}\n", name, x, y);
  };
  field("mesh", meshText(a.layout), meshText(b.layout));
  field("blocks per stage", runs(a.blocksPerRank), runs(b.blocksPerRank));
  field("micro-batch size", std::to_string(a.microBatchSize),
        std::to_string(b.microBatchSize));
  field("micro-batches", std::to_string(a.layout.microBatches),
        std::to_string(b.layout.microBatches));
  field("schedule", scheduleText(a), scheduleText(b));
  field("ZeRO stage", std::to_string(a.layout.zeroStage),
        std::to_string(b.layout.zeroStage));
  field("recomputation", recomputeText(a), recomputeText(b));
  field("sequence parallel", a.layout.sequenceParallel ? "on" : "off",
        b.layout.sequenceParallel ? "on" : "off");
  field("tp replicated", replicatedText(a), replicatedText(b));
  if (!changes)
    os << "  the same layout\n";

  auto seconds = [&](const char *name, double x, double y) {
    std::string pct = x > 0 ? fmt(" (%+.1f %%)", 100 * (y / x - 1)) : "";
    os << llvm::formatv("  {0,-19}{1} -> {2}{3}\n", name, fmt("%.4g s", x),
                        fmt("%.4g s", y), pct);
  };
  auto bytes = [&](const char *name, double x, double y) {
    os << llvm::formatv("  {0,-19}{1} -> {2} GB ({3} GB)\n", name, gbs(x),
                        gbs(y), fmt("%+.1f", (y - x) / 1e9));
  };
  os << "cost:\n";
  seconds("step time", a.stepSeconds, b.stepSeconds);
  seconds("  compute", a.computeSeconds, b.computeSeconds);
  seconds("  exposed comm", a.exposedCommSeconds, b.exposedCommSeconds);
  seconds("  bubble", a.bubbleSeconds, b.bubbleSeconds);
  bytes("memory/device", a.memory.total, b.memory.total);
  bytes("  params", a.memory.params, b.memory.params);
  bytes("  grads", a.memory.grads, b.memory.grads);
  bytes("  optimizer", a.memory.optimizerState, b.memory.optimizerState);
  bytes("  activations", a.memory.activations, b.memory.activations);
  os << llvm::formatv("  {0,-19}{1} -> {2}\n", "tokens/s",
                      fmt("%.0f", a.tokensPerSecond),
                      fmt("%.0f", b.tokensPerSecond));
  os << llvm::formatv("  {0,-19}{1} -> {2}\n", "fits", a.feasible ? "yes" : "no",
                      b.feasible ? "yes" : "no");
  return s;
}

} // namespace planner
} // namespace weft
