//===- ModelSpec.cpp - Validating a compiled model's argument table -------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The table comes from generated code, so a failure here is a compiler bug
// or a runtime built for another ABI; the messages name the entry so that
// either is quick to find. The embedded weights image is read in place: the
// header is checked entry by entry against the compiled arguments and the
// bytes are copied straight into the step's buffers.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/ModelSpec.h"
#include "weft/Formats/SafeTensors.h"
#include "weft/Runtime/Checkpoint.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <set>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace weft::rt;
using json = nlohmann::ordered_json;

namespace {

constexpr int32_t kMaxDType = int32_t(DType::Bool);
constexpr int32_t kMaxRank = 64;


Status readInfo(const WeftTensorInfo &info, const char *what, int index,
                TensorSpec &out) {
  std::string where = std::string(what) + " " + std::to_string(index);
  if (!info.name || !*info.name)
    return Status::error("compiled model: " + where + " has no name");
  where += " " + quote(info.name);
  if (!info.kind)
    return Status::error("compiled model: " + where + " has no kind");
  if (info.dtype < 0 || info.dtype > kMaxDType)
    return Status::error("compiled model: " + where + " has unknown dtype " +
                         std::to_string(info.dtype));
  if (info.rank < 0 || info.rank > kMaxRank || (info.rank > 0 && !info.shape))
    return Status::error("compiled model: " + where + " has invalid rank " +
                         std::to_string(info.rank));
  out.name = info.name;
  out.kind = info.kind;
  out.dtype = DType(info.dtype);
  out.shape.assign(info.shape, info.shape + info.rank);
  if (!computeByteSize(out.dtype, out.shape, out.bytes))
    return Status::error("compiled model: " + where + " has invalid shape " +
                         formatShape(out.shape));
  return Status::success();
}

std::string describeTensor(const TensorSpec &t) {
  return quote(t.name) + " (" + t.kind + ", " + dtypeName(t.dtype) + " " +
         formatShape(t.shape) + ")";
}

/// "1,234,567": parameter counts are easier to read grouped.
std::string groupDigits(int64_t v) {
  std::string s = std::to_string(v), out;
  int n = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (n && n % 3 == 0 && *it != '-')
      out += ',';
    out += *it;
    ++n;
  }
  return std::string(out.rbegin(), out.rend());
}

std::string formatBytes(double bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), u ? "%.1f %s" : "%.0f %s", bytes, units[u]);
  return buf;
}

/// `hp.weight_decay` becomes `--weight-decay`.
std::string flagFor(const std::string &hpName) {
  std::string flag = "--" + hpName;
  for (char &c : flag)
    if (c == '_')
      c = '-';
  return flag;
}

/// Reads the model JSON's "mesh" and "shardings" (docs/runtime.md) and
/// checks every sharding against the slots it names: the axes exist, the
/// global shape divided by each dim's axes is the compiled shape, and a
/// stored shape is the global one with runs of consecutive dims merged.
Status readMesh(const json &root, ModelSpec &spec) {
  auto meshIt = root.find("mesh");
  auto shardIt = root.find("shardings");
  if (meshIt == root.end()) {
    if (shardIt != root.end())
      return Status::error("compiled model: the model JSON has \"shardings\" "
                           "but no \"mesh\"");
    return Status::success();
  }
  auto axesIt = meshIt->is_object() ? meshIt->find("axes") : meshIt->end();
  if (!meshIt->is_object() || axesIt == meshIt->end() || !axesIt->is_array() ||
      axesIt->empty())
    return Status::error("compiled model: the model JSON's \"mesh\" must be "
                         "{\"axes\": [{\"name\": ..., \"size\": ...}, ...]}");
  int64_t devices = 1;
  for (const json &axis : *axesIt) {
    auto name = axis.is_object() ? axis.find("name") : axis.end();
    auto size = axis.is_object() ? axis.find("size") : axis.end();
    if (name == axis.end() || !name->is_string() || size == axis.end() ||
        !size->is_number_unsigned() || size->get<uint64_t>() < 1 ||
        size->get<uint64_t>() > (1u << 20))
      return Status::error("compiled model: invalid mesh axis " + axis.dump());
    MeshAxisSpec a{name->get<std::string>(), int64_t(size->get<uint64_t>())};
    for (const MeshAxisSpec &b : spec.mesh)
      if (b.name == a.name)
        return Status::error("compiled model: the mesh names axis " +
                             quote(a.name) + " twice");
    devices *= a.size;
    if (devices > (1 << 24))
      return Status::error("compiled model: the mesh has too many devices");
    spec.mesh.push_back(std::move(a));
  }
  if (shardIt == root.end())
    return Status::success();
  if (!shardIt->is_object())
    return Status::error(
        "compiled model: the model JSON's \"shardings\" is not an object");
  for (auto it = shardIt->begin(); it != shardIt->end(); ++it) {
    std::string where = "compiled model: sharding of " + quote(it.key());
    const json &entry = it.value();
    auto shape = entry.is_object() ? entry.find("global_shape") : entry.end();
    auto dims = entry.is_object() ? entry.find("dims") : entry.end();
    if (shape == entry.end() || !shape->is_array() || dims == entry.end() ||
        !dims->is_array() || dims->size() != shape->size())
      return Status::error(where + " needs \"global_shape\" and \"dims\" "
                                   "of the same length");
    SlotSharding sh;
    for (const json &d : *shape) {
      if (!d.is_number_unsigned())
        return Status::error(where + " has an invalid global shape " +
                             shape->dump());
      sh.globalShape.push_back(int64_t(d.get<uint64_t>()));
    }
    std::vector<int64_t> divisors;
    for (const json &d : *dims) {
      std::vector<std::string> axes;
      int64_t divisor = 1;
      if (!d.is_array())
        return Status::error(where + " has invalid dims " + dims->dump());
      for (const json &a : d) {
        const MeshAxisSpec *axis = nullptr;
        for (const MeshAxisSpec &m : spec.mesh)
          if (a.is_string() && m.name == a.get<std::string>())
            axis = &m;
        if (!axis)
          return Status::error(where + " names " + a.dump() +
                               ", which is not an axis of the mesh");
        for (const std::vector<std::string> &seen : sh.dims)
          for (const std::string &n : seen)
            if (n == axis->name)
              return Status::error(where + " splits two dims over axis " +
                                   quote(n));
        axes.push_back(axis->name);
        divisor *= axis->size;
      }
      sh.dims.push_back(std::move(axes));
      divisors.push_back(divisor);
    }
    if (auto stored = entry.find("stored_shape"); stored != entry.end()) {
      bool valid = stored->is_array();
      for (size_t d = 0; valid && d < stored->size(); ++d)
        valid = (*stored)[d].is_number_unsigned() &&
                (*stored)[d].get<uint64_t>() <= uint64_t(INT64_MAX);
      if (!valid)
        return Status::error(where + " has an invalid stored_shape " +
                             stored->dump() + " (a list of sizes)");
      for (const json &d : *stored)
        sh.storedShape.push_back(int64_t(d.get<uint64_t>()));
      std::vector<size_t> runs;
      if (std::string why = storedDimRuns(sh.storedShape, sh.globalShape, runs);
          !why.empty())
        return Status::error(where + ": " + why);
    }
    bool found = false;
    for (const std::vector<TensorSpec> *list : {&spec.args, &spec.results})
      for (const TensorSpec &t : *list) {
        if (t.name != it.key())
          continue;
        found = true;
        bool matches = t.shape.size() == sh.globalShape.size();
        for (size_t d = 0; matches && d < t.shape.size(); ++d)
          matches = t.shape[d] * divisors[d] == sh.globalShape[d];
        if (!matches)
          return Status::error(where + ": global shape " +
                               formatShape(sh.globalShape) + " split as " +
                               dims->dump() + " is not the compiled " +
                               describeTensor(t));
      }
    if (!found)
      return Status::error(where + ": the step has no such slot");
    spec.shardings.emplace(it.key(), std::move(sh));
  }
  return Status::success();
}

/// How batch input `t` comes out of the global batch, and how many samples
/// of it this rank holds.
/// Reads the model JSON's "pipeline" (a pipeline executable's program:
/// docs/pipeline.md) into spec.pipeline.
Status readPipeline(const json &root, ModelSpec &spec) {
  auto it = root.find("pipeline");
  if (it == root.end())
    return Status::success();
  const json &p = *it;
  auto bad = [](const std::string &what) {
    return Status::error("compiled model: the model JSON's \"pipeline\" " +
                         what + "; rebuild the model with a matching weftc");
  };
  auto integer = [&](const char *key, int64_t &out, int64_t least) {
    auto v = p.find(key);
    if (v == p.end() || !v->is_number_integer() || v->get<int64_t>() < least)
      return false;
    out = v->get<int64_t>();
    return true;
  };
  PipelineSpec &out = spec.pipeline;
  if (!p.is_object() || !integer("ranks", out.ranks, 1) ||
      !integer("rank", out.rank, 0) || out.rank >= out.ranks ||
      !integer("micro_batches", out.microBatches, 1) ||
      !integer("virtual_stages", out.virtualStages, 1))
    return bad("needs 'rank' < 'ranks', 'micro_batches' and 'virtual_stages'");
  if (auto v = p.find("schedule"); v != p.end() && v->is_string())
    out.schedule = v->get<std::string>();
  if (auto v = p.find("predicted_bubble"); v != p.end() && v->is_number())
    out.predictedBubble = v->get<double>();
  if (auto v = p.find("predicted_rank_bubble"); v != p.end() && v->is_array())
    for (const json &b : *v)
      if (b.is_number())
        out.predictedRankBubble.push_back(b.get<double>());
  if (auto v = p.find("stages"); v != p.end() && v->is_array())
    for (const json &st : *v)
      if (st.is_number_integer())
        out.stages.push_back(st.get<int64_t>());
  auto tensors = p.find("tensors");
  if (tensors == p.end() || !tensors->is_array())
    return bad("lists no 'tensors'");
  for (const json &t : *tensors) {
    PipelineTensorSpec ts;
    bool ok = t.is_object() && t.contains("name") && t["name"].is_string() &&
              t.contains("kind") && t["kind"].is_string() &&
              t.contains("dtype") && t["dtype"].is_string() &&
              t.contains("shape") && t["shape"].is_array() &&
              t.contains("rank") && t["rank"].is_number_integer();
    bool known = false;
    if (ok) {
      ts.name = t["name"].get<std::string>();
      ts.kind = t["kind"].get<std::string>();
      ts.rank = t["rank"].get<int64_t>();
      for (int32_t d = 0; d <= kMaxDType; ++d)
        if (t["dtype"].get<std::string>() == dtypeName(DType(d))) {
          ts.dtype = DType(d);
          known = true;
        }
      for (const json &d : t["shape"])
        if (d.is_number_integer() && d.get<int64_t>() >= 0)
          ts.shape.push_back(d.get<int64_t>());
        else
          ok = false;
      if (auto dims = t.find("dims"); ok && dims != t.end()) {
        ok = dims->is_array() && dims->size() == ts.shape.size();
        for (const json &axes : ok ? *dims : json::array()) {
          auto &names = ts.dims.emplace_back();
          ok = ok && axes.is_array();
          for (const json &a : ok ? axes : json::array()) {
            ok = ok && a.is_string();
            if (ok)
              names.push_back(a.get<std::string>());
          }
        }
      }
      if (auto stored = t.find("stored_shape"); ok && stored != t.end()) {
        ok = stored->is_array();
        for (const json &d : ok ? *stored : json::array())
          if (d.is_number_integer() && d.get<int64_t>() >= 0)
            ts.storedShape.push_back(d.get<int64_t>());
          else
            ok = false;
      }
    }
    if (!ok || !known || ts.rank < 0 || ts.rank >= out.ranks)
      return bad("has a malformed tensor entry " + t.dump());
    out.tensors.push_back(std::move(ts));
  }
  return Status::success();
}

Status readBatchLayout(const ModelSpec &spec, const TensorSpec &t,
                       BatchLayout &layout, int64_t &samples) {
  samples = t.shape[0];
  const SlotSharding *sh = spec.findSharding(t.name);
  if (!sh)
    return Status::success();
  size_t splitDim = 0;
  if (sh->dims[0].empty() && sh->dims.size() > 1 && !sh->dims[1].empty()) {
    // [K, m, ...] with m split: K micro-batches.
    splitDim = 1;
    layout.microBatches = t.shape[0];
    samples = t.shape[0] * t.shape[1];
  }
  layout.axes = sh->dims[splitDim];
  for (size_t d = 0; d < sh->dims.size(); ++d)
    if (d != splitDim && !sh->dims[d].empty())
      return Status::error("compiled model: batch input " + describeTensor(t) +
                           " is split along dim " + std::to_string(d) +
                           "; the data loader splits only its batch");
  return Status::success();
}

} // namespace

int64_t ModelSpec::meshDevices() const {
  int64_t n = 1;
  for (const MeshAxisSpec &a : mesh)
    n *= a.size;
  return n;
}

std::string ModelSpec::describeMesh() const {
  std::string out;
  for (const MeshAxisSpec &a : mesh)
    out += (out.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
  return out;
}

const SlotSharding *ModelSpec::findSharding(const std::string &name) const {
  auto it = shardings.find(name);
  return it == shardings.end() ? nullptr : &it->second;
}

int64_t ModelSpec::numParameters() const {
  int64_t n = 0;
  if (pipeline.ranks > 0) {
    for (const PipelineTensorSpec &t : pipeline.tensors)
      if (t.kind == "param") {
        int64_t values = 1;
        for (int64_t d : t.shape)
          values *= d;
        n += values;
      }
    return n;
  }
  for (int i : paramArgs) {
    // The model's count, not this rank's share of it.
    if (const SlotSharding *split = findSharding(args[i].name)) {
      int64_t global = 1;
      for (int64_t d : split->globalShape)
        global *= d;
      n += global;
      continue;
    }
    n += args[i].numElements();
  }
  return n;
}

int ModelSpec::findArg(const std::string &name, const std::string &kind) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == name && args[i].kind == kind)
      return int(i);
  return -1;
}

DeviceArenaPlan weft::rt::planDeviceArena(const ModelSpec &spec) {
  DeviceArenaPlan plan;
  plan.argOffsets.assign(spec.args.size(), 0);
  plan.resultOffsets.assign(spec.results.size(), 0);
  plan.scalarArg.assign(spec.args.size(), false);
  plan.outputResult.assign(spec.results.size(), true);
  std::set<int> batch(spec.batchArgs.begin(), spec.batchArgs.end());
  for (size_t i = 0; i < spec.args.size(); ++i) {
    plan.scalarArg[i] = spec.signature.args[i].role == contract::Role::Input &&
                        !batch.count(int(i));
    if (int r = spec.resultForArg[i]; r >= 0)
      plan.outputResult[size_t(r)] = false;
  }
  uint64_t end = 0;
  auto place = [&](uint64_t bytes) {
    uint64_t offset = (end + DeviceArenaPlan::kAlignment - 1) /
                      DeviceArenaPlan::kAlignment *
                      DeviceArenaPlan::kAlignment;
    end = offset + bytes;
    return offset;
  };
  auto align = [&] { return place(0); };
  plan.scalarsBegin = align();
  for (size_t i = 0; i < spec.args.size(); ++i)
    if (plan.scalarArg[i])
      plan.argOffsets[i] = place(spec.args[i].bytes);
  plan.scalarsEnd = end;
  plan.outputsBegin = align();
  for (size_t r = 0; r < spec.results.size(); ++r)
    if (plan.outputResult[r])
      plan.resultOffsets[r] = place(spec.results[r].bytes);
  plan.outputsEnd = end;
  for (const std::vector<int> *group :
       {&spec.paramArgs, &spec.stateArgs, &spec.bufferArgs})
    for (int i : *group)
      plan.argOffsets[size_t(i)] = place(spec.args[size_t(i)].bytes);
  for (size_t r = 0; r < spec.results.size(); ++r)
    if (!plan.outputResult[r])
      plan.resultOffsets[r] = place(spec.results[r].bytes);
  for (int i : spec.batchArgs)
    plan.argOffsets[size_t(i)] = place(spec.args[size_t(i)].bytes);
  plan.workspaceOffset = place(spec.workspaceBytes);
  plan.totalBytes = align();
  return plan;
}

std::optional<bool> weft::rt::cpuSupports(const std::string &feature) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  // __builtin_cpu_supports takes a literal, hence one line per name.
#define WEFT_CPU_FEATURE(name)                                                 \
  if (feature == name)                                                         \
    return __builtin_cpu_supports(name) != 0;
  WEFT_CPU_FEATURE("avx")
  WEFT_CPU_FEATURE("avx2")
  WEFT_CPU_FEATURE("avx512bf16")
  WEFT_CPU_FEATURE("avx512bw")
  WEFT_CPU_FEATURE("avx512dq")
  WEFT_CPU_FEATURE("avx512f")
  WEFT_CPU_FEATURE("avx512vl")
  WEFT_CPU_FEATURE("avx512vnni")
  WEFT_CPU_FEATURE("bmi")
  WEFT_CPU_FEATURE("bmi2")
  WEFT_CPU_FEATURE("f16c")
  WEFT_CPU_FEATURE("fma")
  WEFT_CPU_FEATURE("popcnt")
  WEFT_CPU_FEATURE("sse4.1")
  WEFT_CPU_FEATURE("sse4.2")
#undef WEFT_CPU_FEATURE
#endif
  return std::nullopt;
}

namespace {
/// checkCpuFeatures on an already parsed model JSON.
Status checkTarget(
    const json &root,
    const std::function<std::optional<bool>(const std::string &)> &supports) {
  if (!root.is_object())
    return Status::success();
  auto target = root.find("target");
  if (target == root.end() || !target->is_object())
    return Status::success();
  auto text = [&](const char *key) {
    auto it = target->find(key);
    return it != target->end() && it->is_string() ? it->get<std::string>()
                                                  : std::string();
  };
  // A name this runtime cannot test is not held against the CPU.
  std::vector<std::string> missing;
  if (auto list = target->find("cpu_features");
      list != target->end() && list->is_array())
    for (const json &item : *list) {
      if (!item.is_string())
        continue;
      std::string feature = item.get<std::string>();
      std::optional<bool> has = supports(feature);
      if (has && !*has)
        missing.push_back(feature);
    }
  if (missing.empty())
    return Status::success();
  std::string names;
  for (const std::string &feature : missing)
    names += (names.empty() ? "" : ", ") + feature;
  std::string cpu = text("cpu"), requested = text("requested_cpu");
  return Status::error(
      "this executable was compiled for CPU '" + cpu + "'" +
      (requested.empty() || requested == cpu
           ? std::string()
           : " (weftc --cpu=" + requested + ")") +
      ", whose instructions this CPU lacks: " + names +
      "; recompile the model with weftc --cpu=generic (any x86-64) or "
      "--cpu=native on this machine");
}
} // namespace

Status weft::rt::checkCpuFeatures(
    const std::string &modelJson,
    const std::function<std::optional<bool>(const std::string &)> &supports) {
  return checkTarget(
      json::parse(modelJson, nullptr, /*allow_exceptions=*/false), supports);
}

Status weft::rt::loadModelSpec(const WeftModel &model, ModelSpec &out) {
  if (model.abiVersion != WEFT_MODEL_ABI_VERSION)
    return Status::error("compiled model uses ABI version " +
                         std::to_string(model.abiVersion) +
                         " but this runtime implements version " +
                         std::to_string(WEFT_MODEL_ABI_VERSION) +
                         "; rebuild the model with a matching weftc");
  if (!model.trainStep)
    return Status::error("compiled model has no step function");
  if (model.numArgs < 0 || model.numResults < 0 ||
      (model.numArgs && !model.args) || (model.numResults && !model.results))
    return Status::error("compiled model has an invalid argument table");
  if (model.weightsSize && !model.weights)
    return Status::error("compiled model has no weights image");
  if (model.deviceType != WEFT_DEVICE_CPU &&
      model.deviceType != WEFT_DEVICE_CUDA)
    return Status::error("compiled model runs on device type " +
                         std::to_string(model.deviceType) +
                         ", which this runtime does not know (it runs " +
                         std::to_string(WEFT_DEVICE_CPU) + ": the CPU, " +
                         std::to_string(WEFT_DEVICE_CUDA) +
                         ": NVIDIA GPUs); rebuild the model with a matching "
                         "weftc");

  ModelSpec spec;
  spec.modelJson = model.modelJson ? model.modelJson : "";
  spec.workspaceBytes = model.workspaceBytes;
  spec.deviceType = model.deviceType;
  std::set<std::string> argNames, resultNames;
  for (int i = 0; i < model.numArgs; ++i) {
    TensorSpec t;
    if (Status s = readInfo(model.args[i], "argument", i, t); !s.ok())
      return s;
    if (!argNames.insert(t.name).second)
      return Status::error("compiled model: two arguments are named " +
                           quote(t.name));
    spec.args.push_back(std::move(t));
  }
  for (int i = 0; i < model.numResults; ++i) {
    TensorSpec t;
    if (Status s = readInfo(model.results[i], "result", i, t); !s.ok())
      return s;
    if (!resultNames.insert(t.name).second)
      return Status::error("compiled model: two results are named " +
                           quote(t.name));
    spec.results.push_back(std::move(t));
  }

  json root = json::parse(spec.modelJson, nullptr, /*allow_exceptions=*/false);
  if (Status s = checkTarget(root, cpuSupports); !s.ok())
    return s;
  const json *hyper = nullptr;
  if (root.is_object()) {
    for (const char *key : {"num_classes", "vocab_size"}) {
      auto it = root.find(key);
      if (spec.numClasses == 0 && it != root.end() && it->is_number_unsigned())
        spec.numClasses = int64_t(it->get<uint64_t>());
    }
    auto it = root.find("hyperparameters");
    if (it != root.end() && it->is_object())
      hyper = &*it;
    if (Status s = readMesh(root, spec); !s.ok())
      return s;
    if (Status s = readPipeline(root, spec); !s.ok())
      return s;
    if (auto p = root.find("prediction"); p != root.end() && p->is_object()) {
      auto num = [&](const char *key, double &out) {
        auto v = p->find(key);
        if (v != p->end() && v->is_number())
          out = v->get<double>();
      };
      num("step_time_s", spec.prediction.stepTimeS);
      num("exposed_comm_s", spec.prediction.exposedCommS);
      num("bubble_s", spec.prediction.bubbleS);
      num("memory_bytes_per_device", spec.prediction.memoryBytesPerDevice);
      if (auto v = p->find("layout"); v != p->end() && v->is_string())
        spec.prediction.layout = v->get<std::string>();
    }
  }

  // Roles by the step contract (weft/Formats/StepContract.h), then every
  // lookup by role and name, never by position.
  using contract::Role;
  contract::StepSignature &signature = spec.signature;
  for (const TensorSpec &t : spec.args) {
    std::optional<Role> role = contract::parseRole(t.kind);
    if (!role || *role == Role::Grad || *role == Role::Output)
      return Status::error("compiled model: argument " + quote(t.name) +
                           " has unknown kind " + quote(t.kind));
    signature.args.push_back({*role, t.name});
  }
  for (const TensorSpec &t : spec.results) {
    std::optional<Role> role = contract::parseRole(t.kind);
    if (!role || *role == Role::Grad || *role == Role::Input)
      return Status::error("compiled model: result " + quote(t.name) +
                           " has unknown kind " + quote(t.kind));
    signature.results.push_back({*role, t.name});
  }

  spec.resultForArg.assign(spec.args.size(), -1);
  for (size_t i = 0; i < spec.args.size(); ++i) {
    const TensorSpec &t = spec.args[i];
    int idx = int(i);
    Role role = signature.args[i].role;
    spec.resultForArg[i] = signature.nextValueOf(idx);
    if (int r = spec.resultForArg[i]; r >= 0) {
      const TensorSpec &res = spec.results[r];
      if (res.dtype != t.dtype || res.shape != t.shape)
        return Status::error("compiled model: argument " + describeTensor(t) +
                             " comes back as " + describeTensor(res));
    }
    if (role == Role::Param || role == Role::State) {
      (role == Role::Param ? spec.paramArgs : spec.stateArgs).push_back(idx);
      if (spec.resultForArg[i] < 0)
        return Status::error("compiled model: argument " + describeTensor(t) +
                             " has no result carrying its new value");
    } else if (role == Role::Buffer) {
      // A buffer the step updates (BatchNorm's running statistics) comes
      // back as a result of the same name; a frozen one does not.
      spec.bufferArgs.push_back(idx);
    } else if (t.name == contract::kStepInput) {
      if (t.dtype != DType::I64 || !t.shape.empty())
        return Status::error("compiled model: " + describeTensor(t) +
                             " must be a scalar I64");
      spec.stepArg = idx;
    } else if (t.name == contract::kSeedInput) {
      if (t.dtype != DType::I64 || !t.shape.empty())
        return Status::error("compiled model: " + describeTensor(t) +
                             " must be a scalar I64");
      spec.seedArg = idx;
    } else if (t.name == contract::kLrInput) {
      if (t.dtype != DType::F32 || !t.shape.empty())
        return Status::error("compiled model: " + describeTensor(t) +
                             " must be a scalar F32");
      spec.lrArg = idx;
    } else if (t.name.rfind(contract::kHyperPrefix, 0) == 0) {
      size_t prefix = sizeof(contract::kHyperPrefix) - 1;
      if (!t.shape.empty() || t.dtype == DType::Bool || t.name.size() == prefix)
        return Status::error("compiled model: hyperparameter " +
                             describeTensor(t) +
                             " must be a named numeric scalar");
      HyperParamSpec hp;
      hp.arg = idx;
      hp.name = t.name.substr(prefix);
      hp.flag = flagFor(hp.name);
      if (hyper) {
        auto it = hyper->find(hp.name);
        if (it != hyper->end() && it->is_number()) {
          hp.hasDefault = true;
          hp.defaultValue = it->get<double>();
        }
      }
      spec.hyperParams.push_back(std::move(hp));
    } else {
      if (t.shape.empty() || t.shape[0] <= 0)
        return Status::error("compiled model: batch input " +
                             describeTensor(t) +
                             " needs a non-empty batch axis 0");
      BatchLayout layout;
      int64_t samples = 0;
      if (Status s = readBatchLayout(spec, t, layout, samples); !s.ok())
        return s;
      if (!spec.batchArgs.empty() &&
          (samples != spec.batchSize ||
           layout.axes != spec.batchLayout.axes ||
           layout.microBatches != spec.batchLayout.microBatches))
        return Status::error(
            "compiled model: batch inputs disagree on the batch size or its "
            "split over the mesh: " +
            describeTensor(spec.args[spec.batchArgs[0]]) + " and " +
            describeTensor(t));
      spec.batchSize = samples;
      spec.batchLayout = layout;
      spec.batchArgs.push_back(idx);
    }
  }
  if (spec.stepArg < 0 || spec.lrArg < 0)
    return Status::error("compiled model: the step must take the inputs "
                         "'step' (I64 scalar) and 'lr' (F32 scalar)");
  // A pipeline rank between the first and the last reads no data: its
  // inputs come from the previous stage.
  if (spec.batchArgs.empty() && spec.pipeline.ranks == 0)
    return Status::error("compiled model: the step takes no batch input");

  for (size_t r = 0; r < spec.results.size(); ++r) {
    const TensorSpec &t = spec.results[r];
    const contract::Slot &slot = signature.results[r];
    if (slot.role != Role::Output) {
      if (signature.findArg(slot.role, slot.name) < 0)
        return Status::error("compiled model: result " + describeTensor(t) +
                             " matches no argument");
      continue;
    }
    bool isScalarF32 = t.dtype == DType::F32 && t.shape.empty();
    int *index = t.name == contract::kLossOutput       ? &spec.lossResult
                 : t.name == contract::kLrOutput       ? &spec.lrResult
                 : t.name == contract::kGradNormOutput ? &spec.gradNormResult
                                                       : nullptr;
    if (!index)
      continue;
    if (!isScalarF32)
      return Status::error("compiled model: result " + describeTensor(t) +
                           " must be a scalar F32");
    *index = int(r);
  }
  if (spec.lossResult < 0)
    return Status::error("compiled model: the step returns no 'loss'");
  out = std::move(spec);
  return Status::success();
}

namespace {
/// A read-only mapping of the initial weights kept outside the model's
/// code: a file beside the executable, or the tail of the executable
/// itself (weightsFile ""), where weftc appends them after the link.
struct MappedWeights {
  const uint8_t *data = nullptr;
  uint64_t size = 0;
  void *mapping = nullptr;
  size_t mappingSize = 0;
  ~MappedWeights() {
    if (mapping)
      ::munmap(mapping, mappingSize);
  }

  /// Maps the weights `model` names and checks that they are the ones
  /// weftc wrote (size and header checksum).
  Status open(const WeftModel &model, std::string &path) {
    char exe[4096];
    ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    std::string self = n > 0 ? std::string(exe, size_t(n)) : std::string();
    bool appended = model.weightsFile[0] == '\0';
    std::string dir = ".";
    size_t slash = self.find_last_of('/');
    if (slash != std::string::npos)
      dir = self.substr(0, slash);
    path = appended ? (self.empty() ? std::string("/proc/self/exe") : self)
                    : dir + "/" + model.weightsFile;
    // /proc/self/exe is this process's executable even if it was renamed
    // or replaced since.
    int fd = ::open(appended ? "/proc/self/exe" : path.c_str(),
                    O_RDONLY | O_CLOEXEC);
    if (fd < 0)
      return Status::error(
          appended ? "cannot open this executable (" + path + ") to read " +
                         "the initial weights appended to it: " +
                         std::strerror(errno)
                   : "the initial weights of this executable live in " +
                         path + ", which cannot be opened (" +
                         std::strerror(errno) + "); weftc wrote it next to " +
                         "the executable: keep the two together");
    struct stat st;
    bool sized = ::fstat(fd, &st) == 0;
    uint64_t fileSize = sized ? uint64_t(st.st_size) : 0;
    if (!sized || (appended ? fileSize < model.weightsFileSize
                            : fileSize != model.weightsFileSize)) {
      ::close(fd);
      return Status::error(
          appended
              ? path + ": " + std::to_string(fileSize) + " bytes, too short " +
                    "for the " + std::to_string(model.weightsFileSize) +
                    " bytes of initial weights weftc appended to it; the " +
                    "executable was truncated or stripped: compile again"
              : path + ": " + std::to_string(fileSize) +
                    " bytes, but the executable was compiled with " +
                    std::to_string(model.weightsFileSize) +
                    "; it is not this executable's weights file");
    }
    void *p = fileSize ? ::mmap(nullptr, size_t(fileSize), PROT_READ,
                                MAP_PRIVATE, fd, 0)
                       : MAP_FAILED;
    ::close(fd);
    if (p == MAP_FAILED)
      return Status::error(path + ": cannot map: " + std::strerror(errno));
    mapping = p;
    mappingSize = size_t(fileSize);
    // Appended weights end the executable.
    size = model.weightsFileSize;
    data = static_cast<const uint8_t *>(p) + (fileSize - size);
    // Only the header here: the data is checked chunk by chunk as slices
    // are read, so a rank pages in its own slices and no more.
    uint64_t headerLen = 0;
    for (int i = 0; i < 8 && size >= 8; ++i)
      headerLen |= uint64_t(data[i]) << (8 * i);
    if (size < 8 || headerLen > size - 8 ||
        fnv1a64(data, size_t(8 + headerLen)) != model.weightsFileChecksum)
      return Status::error(
          appended ? path + ": the initial weights at its end differ from "
                            "the ones weftc appended (header checksum); the "
                            "executable was truncated, stripped or damaged: "
                            "compile again"
                   : path + ": header checksum differs from the one "
                            "the executable was compiled with; it is "
                            "not this executable's weights file "
                            "(damaged, or from another build)");
    return Status::success();
  }
};

/// Checks the chunks of a weights file's data section that a read touches,
/// each once, against the hashes its header records.
class ChunkChecker {
public:
  Status init(const json &header, const uint8_t *data, uint64_t dataLen,
              const std::string &path) {
    this->data = data;
    this->dataLen = dataLen;
    this->path = path;
    auto meta = header.find("__metadata__");
    const json *bytes = nullptr, *hashes = nullptr;
    if (meta != header.end() && meta->is_object()) {
      auto b = meta->find(kWeightsChunkBytesKey);
      auto h = meta->find(kWeightsChunkHashesKey);
      bytes = b != meta->end() && b->is_string() ? &*b : nullptr;
      hashes = h != meta->end() && h->is_string() ? &*h : nullptr;
    }
    if (!bytes || !hashes)
      return Status::error(path + ": no chunk checksums in its metadata; it "
                                  "was not written by this weftc");
    chunk = std::strtoull(bytes->get<std::string>().c_str(), nullptr, 10);
    const std::string &text = hashes->get_ref<const std::string &>();
    uint64_t count = chunk ? (dataLen + chunk - 1) / chunk : 0;
    if (!chunk || text.size() != count * 16)
      return Status::error(path + ": chunk checksums do not cover its " +
                           std::to_string(dataLen) + "-byte data section");
    for (uint64_t c = 0; c < count; ++c)
      expected.push_back(
          std::strtoull(text.substr(size_t(c) * 16, 16).c_str(), nullptr, 16));
    checked.assign(size_t(count), false);
    return Status::success();
  }

  /// Bytes [begin, end) of the data section are about to be read.
  Status check(uint64_t begin, uint64_t end) {
    if (!data || begin >= end)
      return Status::success();
    for (uint64_t c = begin / chunk; c * chunk < end; ++c) {
      if (checked[size_t(c)])
        continue;
      uint64_t from = c * chunk, n = std::min(chunk, dataLen - from);
      if (fnv1a64(data + from, size_t(n)) != expected[size_t(c)])
        return Status::error(
            path + ": bytes " + std::to_string(from) + " to " +
            std::to_string(from + n) + " of its data differ from what weftc "
            "wrote (checksum mismatch): the file is damaged; compile again");
      checked[size_t(c)] = true;
    }
    return Status::success();
  }

private:
  const uint8_t *data = nullptr;
  uint64_t dataLen = 0, chunk = 0;
  std::string path;
  std::vector<uint64_t> expected;
  std::vector<bool> checked;
};

/// The bytes from a box's first element to its last, within a row-major
/// tensor of shape `global`: what copying the box reads.
std::pair<uint64_t, uint64_t> boxSpan(const std::vector<int64_t> &global,
                                      const std::vector<int64_t> &offsets,
                                      const std::vector<int64_t> &shape,
                                      size_t elementBytes) {
  uint64_t first = 0, last = 0;
  for (size_t d = 0; d < global.size(); ++d) {
    first = first * uint64_t(global[d]) + uint64_t(offsets[d]);
    last = last * uint64_t(global[d]) + uint64_t(offsets[d] + shape[d] - 1);
  }
  for (int64_t s : shape)
    if (s == 0)
      return {0, 0};
  return {first * elementBytes, (last + 1) * elementBytes};
}
} // namespace

Status weft::rt::loadInitialWeights(const WeftModel &model,
                                    const ModelSpec &spec,
                                    const std::vector<void *> &argData,
                                    int64_t rank) {
  // The image holds global tensors; a rank copies only its block of a
  // sharded one, straight out of the mapping, so no rank reads (or pages
  // in) more than its rows of the others' data.
  ShardLayout layout;
  if (Status s = parseShardLayout(spec.modelJson, layout); !s.ok())
    return s;
  std::string name = "embedded weights";
  auto bad = [&](const std::string &what) {
    return Status::error(name + ": " + what);
  };
  std::vector<int> wanted = spec.paramArgs;
  wanted.insert(wanted.end(), spec.bufferArgs.begin(), spec.bufferArgs.end());
  if (wanted.empty())
    return Status::success();
  const uint8_t *image = model.weights;
  uint64_t size = model.weightsSize;
  MappedWeights mapped;
  if (!image && model.weightsFile) {
    if (Status s = mapped.open(model, name); !s.ok())
      return s;
    image = mapped.data;
    size = mapped.size;
  }
  if (!image || size < 8)
    return bad("image is missing or shorter than its 8-byte header length");
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i)
    headerLen |= uint64_t(image[i]) << (8 * i);
  if (headerLen > size - 8)
    return bad("header length " + std::to_string(headerLen) +
               " exceeds the image");
  const char *text = reinterpret_cast<const char *>(image + 8);
  json header =
      json::parse(text, text + headerLen, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object())
    return bad("header is not a JSON object");
  uint64_t dataStart = 8 + headerLen, dataLen = size - dataStart;
  ChunkChecker chunks;
  if (mapped.data)
    if (Status s = chunks.init(header, image + dataStart, dataLen, name);
        !s.ok())
      return s;

  for (int i : wanted) {
    const TensorSpec &t = spec.args[i];
    auto it = header.find(t.name);
    if (it == header.end() || !it->is_object())
      return bad("no tensor for " + describeTensor(t));
    const json &e = *it;
    auto dt = e.find("dtype"), sh = e.find("shape"),
         off = e.find("data_offsets");
    if (dt == e.end() || !dt->is_string() ||
        dt->get<std::string>() != dtypeName(t.dtype))
      return bad("tensor " + quote(t.name) + " has dtype " +
                 (dt != e.end() ? dt->dump() : "(none)") +
                 " but the step takes " + dtypeName(t.dtype));
    std::vector<int64_t> shape;
    bool shapeOk = sh != e.end() && sh->is_array();
    if (shapeOk)
      for (const json &d : *sh) {
        if (!d.is_number_unsigned()) {
          shapeOk = false;
          break;
        }
        shape.push_back(int64_t(d.get<uint64_t>()));
      }
    ShardLayout::StoredBlock block;
    if (Status s = layout.storedBlockOf(t.name, t.shape, rank, block); !s.ok())
      return s;
    const std::vector<int64_t> &global = block.globalShape;
    if (!shapeOk || shape != global) {
      const SlotSharding *split = spec.findSharding(t.name);
      std::string held = formatShape(t.shape) + " per rank";
      if (split && split->globalShape != global)
        held =
            "held as a view " + formatShape(split->globalShape) + ", " + held;
      return bad("tensor " + quote(t.name) + " has shape " +
                 (sh != e.end() ? sh->dump() : "(none)") +
                 " but the step takes " + formatShape(global) +
                 (global != t.shape ? " (global; " + held + ")" : ""));
    }
    size_t globalBytes = 0;
    if (!computeByteSize(t.dtype, global, globalBytes))
      return bad("tensor " + quote(t.name) + " has an invalid global shape");
    if (off == e.end() || !off->is_array() || off->size() != 2 ||
        !(*off)[0].is_number_unsigned() || !(*off)[1].is_number_unsigned())
      return bad("tensor " + quote(t.name) + " has no valid data_offsets");
    uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end || end > dataLen || end - begin != globalBytes)
      return bad("tensor " + quote(t.name) + " has data_offsets " +
                 off->dump() + " that do not hold its " +
                 std::to_string(globalBytes) + " bytes within the " +
                 std::to_string(dataLen) + "-byte data buffer");
    if (global == block.localShape) {
      if (Status s = chunks.check(begin, end); !s.ok())
        return s;
      std::memcpy(argData[i], image + dataStart + begin, t.bytes);
      continue;
    }
    // A block of a view is several boxes of the stored tensor, each read
    // (and its chunks checked) on its own.
    for (const ShardLayout::Box &box : block.boxes) {
      auto [spanBegin, spanEnd] =
          boxSpan(global, box.offsets, box.shape, dtypeSize(t.dtype));
      if (Status s = chunks.check(begin + spanBegin, begin + spanEnd); !s.ok())
        return s;
      copyBox(image + dataStart + begin, global, box.offsets,
              static_cast<uint8_t *>(argData[i]), block.localShape,
              box.localOffsets, box.shape, dtypeSize(t.dtype));
    }
  }
  return Status::success();
}

std::string weft::rt::describeModel(const ModelSpec &spec) {
  std::string out = "Compiled model:\n";
  out += "  batch inputs (batch size " + std::to_string(spec.batchSize) +
         ", axis 0):\n";
  for (int i : spec.batchArgs) {
    const TensorSpec &t = spec.args[i];
    out += "    " + t.name + ": " + dtypeName(t.dtype) + " " +
           formatShape(t.shape) + "\n";
  }
  int64_t stateElems = 0, bufferElems = 0;
  for (int i : spec.stateArgs)
    stateElems += spec.args[i].numElements();
  for (int i : spec.bufferArgs)
    bufferElems += spec.args[i].numElements();
  double paramBytes = 0;
  for (int i : spec.paramArgs)
    paramBytes += double(spec.args[i].bytes);
  out += "  parameters: " + groupDigits(spec.numParameters()) + " in " +
         std::to_string(spec.paramArgs.size()) + " tensors (" +
         formatBytes(paramBytes) + ")\n";
  out += "  optimizer state: " + groupDigits(stateElems) + " in " +
         std::to_string(spec.stateArgs.size()) +
         " tensors; frozen buffers: " + groupDigits(bufferElems) + " in " +
         std::to_string(spec.bufferArgs.size()) + " tensors\n";
  out += "  workspace: " + formatBytes(double(spec.workspaceBytes)) + "\n";
  if (spec.numClasses > 0)
    out += "  labels / tokens must lie in [0, " +
           std::to_string(spec.numClasses) + ")\n";
  for (const HyperParamSpec &hp : spec.hyperParams) {
    char buf[64] = "required";
    if (hp.hasDefault)
      std::snprintf(buf, sizeof(buf), "default %g", hp.defaultValue);
    out += "  hyperparameter " + hp.name + " (" + hp.flag + ", " + buf + ")\n";
  }

  json root = json::parse(spec.modelJson, nullptr, /*allow_exceptions=*/false);
  if (root.is_object()) {
    out += "  model JSON:\n";
    constexpr size_t kMaxValue = 72;
    for (auto it = root.begin(); it != root.end(); ++it) {
      std::string value = it.value().dump();
      if (value.size() > kMaxValue)
        value = value.substr(0, kMaxValue - 3) + "...";
      out += "    " + it.key() + ": " + value + "\n";
    }
  } else if (!spec.modelJson.empty()) {
    out += "  model JSON: (not a JSON object) " + spec.modelJson.substr(0, 72) +
           "\n";
  }
  return out;
}
