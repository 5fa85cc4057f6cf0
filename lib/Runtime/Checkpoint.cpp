//===- Checkpoint.cpp - Crash-safe training checkpoints -------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The safetensors file is written straight from the run's buffers (no copy
// of the model is made) in the layout SafeTensors.cpp reads, and its FNV-1a
// checksum is computed from the same bytes on the way out. Restoring reads
// the file twice — once for the checksum, once through readSafeTensors —
// and copies into the run's buffers only when everything has verified, so
// a damaged checkpoint never leaves the model half restored.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Checkpoint.h"

#include "weft/Formats/SafeTensors.h"
#include "weft/Formats/StepContract.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace weft::rt;
using json = nlohmann::ordered_json;

namespace {

constexpr char kManifest[] = "manifest.json";
constexpr char kTensors[] = "model.safetensors";
constexpr char kPrefix[] = "step-";


std::string join(const std::string &dir, const std::string &name) {
  return dir.empty() || dir.back() == '/' ? dir + name : dir + "/" + name;
}

std::string errnoText() { return std::strerror(errno); }

Status fsyncDir(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(dir + ": cannot open to sync: " + errnoText());
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  if (rc != 0)
    return Status::error(dir + ": fsync failed: " + std::strerror(err));
  return Status::success();
}

/// mkdir -p.
Status makeDirs(const std::string &dir) {
  std::string partial;
  size_t pos = 0;
  while (pos != std::string::npos) {
    pos = dir.find('/', pos + 1);
    partial = dir.substr(0, pos);
    if (partial.empty())
      continue;
    if (::mkdir(partial.c_str(), 0777) != 0 && errno != EEXIST)
      return Status::error(partial +
                           ": cannot create directory: " + errnoText());
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Status::error(dir + ": not a directory");
  return Status::success();
}

/// rm -rf of a checkpoint directory (files only one level deep).
Status removeTree(const std::string &path) {
  if (DIR *d = ::opendir(path.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..")
        continue;
      std::string child = join(path, name);
      struct stat st;
      if (::lstat(child.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
        if (Status s = removeTree(child); !s.ok()) {
          ::closedir(d);
          return s;
        }
      } else if (::unlink(child.c_str()) != 0) {
        ::closedir(d);
        return Status::error(child + ": cannot delete: " + errnoText());
      }
    }
    ::closedir(d);
  }
  if (::rmdir(path.c_str()) != 0 && errno != ENOENT)
    return Status::error(path + ": cannot delete: " + errnoText());
  return Status::success();
}

bool exists(const std::string &path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

/// Parses "step-<digits>" (at least 8 digits).
bool parseName(const std::string &name, int64_t &step) {
  size_t n = std::strlen(kPrefix);
  if (name.compare(0, n, kPrefix) != 0 || name.size() < n + 8 ||
      name.size() > n + 18)
    return false;
  step = 0;
  for (size_t i = n; i < name.size(); ++i) {
    if (name[i] < '0' || name[i] > '9')
      return false;
    step = step * 10 + (name[i] - '0');
  }
  return true;
}

std::string hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof(buf), "%016" PRIx64, v);
  return buf;
}

std::string describe(DType dtype, const std::vector<int64_t> &shape) {
  return std::string(dtypeName(dtype)) + " " + formatShape(shape);
}

/// A manifest's entry for one tensor.
struct ManifestTensor {
  std::string name, kind, dtype;
  std::vector<int64_t> shape;
};

struct Manifest {
  int64_t step = 0;
  int version = 0;
  std::vector<ManifestTensor> tensors;
  uint64_t bytes = 0;
  std::string checksum;
  std::string dataLoaderState;
  json model;
};

/// Parses the manifest; a failure means the checkpoint is damaged.
Status parseManifest(const std::string &path, Manifest &m) {
  InputFile file;
  if (Status s = file.open(path); !s.ok())
    return s;
  std::string text(size_t(file.size()), '\0');
  if (Status s = file.readAt(0, text.data(), text.size()); !s.ok())
    return s;
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [&](const std::string &what) {
    return Status::error(path + ": " + what);
  };
  if (j.is_discarded())
    return bad("not valid JSON (truncated?)");
  if (!j.is_object())
    return bad("not a JSON object");
  auto version = j.find("format_version");
  if (version == j.end() || !version->is_number_unsigned())
    return bad("missing 'format_version'");
  m.version = int(std::min<uint64_t>(version->get<uint64_t>(), INT32_MAX));
  if (m.version > kCheckpointFormatVersion)
    return Status::success(); // The caller refuses it with a clear message.
  auto step = j.find("step");
  if (step == j.end() || !step->is_number_unsigned() ||
      step->get<uint64_t>() > uint64_t(INT64_MAX))
    return bad("missing or invalid 'step'");
  m.step = int64_t(step->get<uint64_t>());
  auto tensors = j.find("tensors");
  if (tensors == j.end() || !tensors->is_array())
    return bad("missing 'tensors'");
  for (const json &t : *tensors) {
    ManifestTensor mt;
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() ||
        !t.contains("kind") || !t["kind"].is_string() || !t.contains("dtype") ||
        !t["dtype"].is_string() || !t.contains("shape") ||
        !t["shape"].is_array())
      return bad("a 'tensors' entry lacks name, kind, dtype or shape");
    mt.name = t["name"].get<std::string>();
    mt.kind = t["kind"].get<std::string>();
    mt.dtype = t["dtype"].get<std::string>();
    for (const json &d : t["shape"]) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
        return bad("tensor " + quote(mt.name) + " has an invalid shape");
      mt.shape.push_back(int64_t(d.get<uint64_t>()));
    }
    m.tensors.push_back(std::move(mt));
  }
  auto st = j.find("safetensors");
  if (st == j.end() || !st->is_object() || !st->contains("bytes") ||
      !(*st)["bytes"].is_number_unsigned() || !st->contains("fnv1a64") ||
      !(*st)["fnv1a64"].is_string())
    return bad("missing 'safetensors' {bytes, fnv1a64}");
  m.bytes = (*st)["bytes"].get<uint64_t>();
  m.checksum = (*st)["fnv1a64"].get<std::string>();
  auto dl = j.find("data_loader");
  if (dl == j.end() || !dl->is_object())
    return bad("missing 'data_loader'");
  m.dataLoaderState = dl->dump();
  auto model = j.find("model");
  if (model != j.end())
    m.model = *model;
  return Status::success();
}

/// The first difference between a checkpoint's tensors and the model's, or
/// an empty string.
std::string firstMismatch(const Manifest &m,
                          const std::vector<CheckpointTensor> &tensors) {
  std::map<std::string, const ManifestTensor *> byName;
  for (const ManifestTensor &t : m.tensors)
    byName[t.name] = &t;
  for (const CheckpointTensor &t : tensors) {
    auto it = byName.find(t.name);
    if (it == byName.end())
      return "it has no tensor " + quote(t.name) + " (" + t.kind + ", " +
             describe(t.dtype, t.shape) + " in this model)";
    const ManifestTensor &c = *it->second;
    if (c.kind != t.kind || c.dtype != dtypeName(t.dtype) || c.shape != t.shape)
      return "tensor " + quote(t.name) + " is " + c.kind + " " + c.dtype + " " +
             formatShape(c.shape) + " in the checkpoint but " + t.kind + " " +
             describe(t.dtype, t.shape) + " in this model";
    byName.erase(it);
  }
  if (!byName.empty())
    return "it has tensor " + quote(byName.begin()->first) +
           ", which this model lacks";
  return "";
}

Status checksumFile(const std::string &path, uint64_t &size, uint64_t &hash) {
  InputFile file;
  if (Status s = file.open(path); !s.ok())
    return s;
  size = file.size();
  hash = fnv1a64(nullptr, 0);
  std::vector<uint8_t> buf(1 << 20);
  for (uint64_t off = 0; off < size;) {
    size_t n = size_t(std::min<uint64_t>(buf.size(), size - off));
    if (Status s = file.readAt(off, buf.data(), n); !s.ok())
      return s;
    hash = fnv1a64(buf.data(), n, hash);
    off += n;
  }
  return Status::success();
}

/// Verifies one checkpoint. `damage` is set (and OK returned) when it is
/// unusable but may be skipped; errors are returned for a checkpoint that
/// must stop the run.
/// Checks checkpoint `path` against `tensors` (the compiled model's), or,
/// with `tensors` null, against its own manifest. A damaged checkpoint
/// leaves `damage` set; errors mean it must not be used at all.
Status verify(const std::string &path,
              const std::vector<CheckpointTensor> *tensors, Manifest &m,
              SafeTensorsFile &file, std::string &damage) {
  std::string manifestPath = join(path, kManifest);
  if (!exists(manifestPath)) {
    damage = manifestPath + ": missing";
    return Status::success();
  }
  if (Status s = parseManifest(manifestPath, m); !s.ok()) {
    damage = s.message;
    return Status::success();
  }
  if (m.version > kCheckpointFormatVersion)
    return Status::error(manifestPath + ": checkpoint format version " +
                         std::to_string(m.version) +
                         " is newer than this runtime's (" +
                         std::to_string(kCheckpointFormatVersion) +
                         "); resume it with the newer runtime");
  if (std::string diff = tensors ? firstMismatch(m, *tensors) : "";
      !diff.empty())
    return Status::error(
        path + " is a checkpoint of a different model: " + diff +
        ". Use another --checkpoint-dir, or remove the old checkpoints to "
        "start over");
  std::string tensorsPath = join(path, kTensors);
  uint64_t size = 0, hash = 0;
  if (Status s = checksumFile(tensorsPath, size, hash); !s.ok()) {
    damage = s.message;
    return Status::success();
  }
  if (size != m.bytes) {
    damage = tensorsPath + ": " + std::to_string(size) +
             " bytes but the manifest says " + std::to_string(m.bytes) +
             (size < m.bytes ? " (truncated)" : "");
    return Status::success();
  }
  if (hex64(hash) != m.checksum) {
    damage = tensorsPath + ": checksum " + hex64(hash) +
             " does not match the manifest's " + m.checksum + " (corrupted)";
    return Status::success();
  }
  if (Status s = readSafeTensors(tensorsPath, file); !s.ok()) {
    damage = s.message;
    return Status::success();
  }
  for (const ManifestTensor &t : m.tensors) {
    auto it = std::find_if(file.tensors.begin(), file.tensors.end(),
                           [&](const auto &e) { return e.first == t.name; });
    if (it == file.tensors.end() || dtypeName(it->second.dtype) != t.dtype ||
        it->second.shape != t.shape) {
      damage = tensorsPath + ": tensor " + quote(t.name) +
               " is missing or differs from the manifest";
      return Status::success();
    }
  }
  return Status::success();
}

} // namespace

std::string weft::rt::checkpointName(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s%08" PRId64, kPrefix, step);
  return buf;
}

std::vector<std::pair<int64_t, std::string>>
weft::rt::listCheckpoints(const std::string &dir) {
  std::vector<std::pair<int64_t, std::string>> out;
  DIR *d = ::opendir(dir.c_str());
  if (!d)
    return out;
  while (dirent *e = ::readdir(d)) {
    int64_t step;
    std::string path = join(dir, e->d_name);
    struct stat st;
    if (parseName(e->d_name, step) && ::stat(path.c_str(), &st) == 0 &&
        S_ISDIR(st.st_mode))
      out.emplace_back(step, path);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(),
            [](const auto &a, const auto &b) { return a.first > b.first; });
  return out;
}

Status weft::rt::prepareCheckpointDir(const std::string &dir) {
  if (Status s = makeDirs(dir); !s.ok())
    return s;
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return Status::error(
        dir + ": checkpoint directory is not writable: " + errnoText());
  std::vector<std::string> stale;
  if (DIR *d = ::opendir(dir.c_str())) {
    while (dirent *e = ::readdir(d)) {
      std::string name = e->d_name;
      int64_t step;
      for (const char *prefix : {".tmp-", ".old-"})
        if (name.rfind(prefix, 0) == 0 && parseName(name.substr(5), step))
          stale.push_back(join(dir, name));
    }
    ::closedir(d);
  }
  for (const std::string &path : stale)
    if (Status s = removeTree(path); !s.ok())
      return s;
  return Status::success();
}

Status weft::rt::writeCheckpoint(const std::string &dir,
                                 const CheckpointMeta &meta,
                                 const std::vector<CheckpointTensor> &tensors,
                                 int keep, std::string &path) {
  // A checkpoint of NaN or Inf weights would replace a good one and make
  // every resume fail: refuse it before touching the folder. (Buffers may
  // hold -inf by design: attention masks.)
  for (const CheckpointTensor &t : tensors) {
    if ((t.dtype != DType::F32 && t.dtype != DType::F64) || t.kind == contract::roleName(contract::Role::Buffer))
      continue;
    size_t bytes = 0;
    if (!computeByteSize(t.dtype, t.shape, bytes))
      continue;
    size_t n = bytes / dtypeSize(t.dtype);
    for (size_t i = 0; i < n; ++i) {
      double v = t.dtype == DType::F32
                     ? double(static_cast<const float *>(t.data)[i])
                     : static_cast<const double *>(t.data)[i];
      if (!std::isfinite(v))
        return Status::error("not writing the checkpoint of step " +
                             std::to_string(meta.step) + ": " + t.kind + " " +
                             quote(t.name) + " holds a non-finite value " +
                             "at element " + std::to_string(i) +
                             "; the checkpoints in " + dir +
                             " stay as they were");
    }
  }
  if (Status s = makeDirs(dir); !s.ok())
    return s;
  std::string name = checkpointName(meta.step);
  std::string finalPath = join(dir, name), tmp = join(dir, ".tmp-" + name);
  if (exists(tmp))
    if (Status s = removeTree(tmp); !s.ok())
      return s;
  if (::mkdir(tmp.c_str(), 0777) != 0)
    return Status::error(tmp + ": cannot create directory: " + errnoText());

  // The safetensors file, written straight from the run's buffers.
  std::vector<TensorView> views;
  json manifestTensors = json::array();
  for (const CheckpointTensor &t : tensors) {
    size_t bytes = 0;
    if (!computeByteSize(t.dtype, t.shape, bytes))
      return Status::error("checkpoint: tensor " + quote(t.name) +
                           " has an invalid shape");
    views.push_back({t.name, t.dtype, t.shape, t.data, bytes});
    manifestTensors.push_back({{"name", t.name},
                               {"kind", t.kind},
                               {"dtype", dtypeName(t.dtype)},
                               {"shape", t.shape}});
  }
  SafeTensorsImage image;
  if (Status s = encodeSafeTensors(
          {{"format", "weft-checkpoint"}, {"step", std::to_string(meta.step)}},
          views, image);
      !s.ok())
    return Status::error("checkpoint: " + s.message);
  const auto &pieces = image.pieces;
  uint64_t hash = fnv1a64(nullptr, 0), total = 0;
  for (const auto &[ptr, n] : pieces) {
    hash = fnv1a64(ptr, n, hash);
    total += n;
  }
  if (Status s = writeFileAtomic(join(tmp, kTensors), pieces); !s.ok())
    return s;

  json manifest;
  manifest["format"] = "weft-checkpoint";
  manifest["format_version"] = kCheckpointFormatVersion;
  manifest["step"] = meta.step;
  manifest["tensors"] = std::move(manifestTensors);
  manifest["safetensors"] = {
      {"file", kTensors}, {"bytes", total}, {"fnv1a64", hex64(hash)}};
  json dl = json::parse(meta.dataLoaderState, nullptr, false);
  manifest["data_loader"] = dl.is_object() ? dl : json::object();
  json model = json::parse(meta.modelJson, nullptr, false);
  manifest["model"] = model.is_discarded() ? json(meta.modelJson) : model;
  std::string text = manifest.dump(2) + "\n";
  if (Status s =
          writeFileAtomic(join(tmp, kManifest), {{text.data(), text.size()}});
      !s.ok())
    return s;
  if (Status s = fsyncDir(tmp); !s.ok())
    return s;

  // Replace a checkpoint of the same step (say, a damaged one) only once
  // the new one is complete.
  std::string old = join(dir, ".old-" + name);
  bool replaced = false;
  if (exists(finalPath)) {
    if (exists(old))
      (void)removeTree(old);
    if (::rename(finalPath.c_str(), old.c_str()) != 0)
      return Status::error(finalPath + ": cannot move aside: " + errnoText());
    replaced = true;
  }
  if (::rename(tmp.c_str(), finalPath.c_str()) != 0)
    return Status::error(tmp + ": cannot rename to " + finalPath + ": " +
                         errnoText());
  if (Status s = fsyncDir(dir); !s.ok())
    return s;
  if (replaced)
    if (Status s = removeTree(old); !s.ok())
      return s;
  path = finalPath;

  auto all = listCheckpoints(dir);
  for (size_t i = size_t(std::max(keep, 1)); i < all.size(); ++i)
    if (Status s = removeTree(all[i].second); !s.ok())
      return s;
  return fsyncDir(dir);
}

Status weft::rt::restoreLatestCheckpoint(
    const std::string &dir, const std::vector<CheckpointTensor> &tensors,
    const std::string &modelJson, RestoreResult &result) {
  result = RestoreResult();
  auto all = listCheckpoints(dir);
  if (all.empty())
    return Status::success();
  std::vector<std::string> damaged;
  for (const auto &[step, path] : all) {
    Manifest m;
    SafeTensorsFile file;
    std::string damage;
    if (Status s = verify(path, &tensors, m, file, damage); !s.ok())
      return s;
    if (damage.empty() && m.step != step)
      damage = join(path, kManifest) + ": records step " +
               std::to_string(m.step) + ", not the directory's " +
               std::to_string(step);
    if (!damage.empty()) {
      result.warnings.push_back("warning: skipping damaged checkpoint " + path +
                                ": " + damage);
      damaged.push_back(path);
      continue;
    }
    for (const CheckpointTensor &t : tensors)
      for (const auto &[name, array] : file.tensors)
        if (name == t.name)
          std::memcpy(t.data, array.data.data(), array.data.size());
    result.found = true;
    result.path = path;
    result.meta.step = m.step;
    result.meta.dataLoaderState = m.dataLoaderState;
    result.meta.modelJson =
        m.model.is_string() ? m.model.get<std::string>() : m.model.dump();
    json current = json::parse(modelJson, nullptr, false);
    bool same = current.is_discarded() ? m.model == json(modelJson)
                                       : m.model == current;
    if (!same)
      result.warnings.push_back(
          "warning: " + path +
          " was written by a model compiled with a different description "
          "(model JSON); its tensors match, so training resumes from it");
    for (const std::string &bad : damaged) {
      std::string base = bad.substr(bad.find_last_of('/') + 1);
      std::string aside = join(dir, "corrupt-" + base);
      if (exists(aside))
        result.warnings.push_back("warning: could not move " + bad +
                                  " aside: " + aside + " exists");
      else if (::rename(bad.c_str(), aside.c_str()) != 0)
        result.warnings.push_back("warning: could not move " + bad +
                                  " aside: " + errnoText());
      else
        result.warnings.push_back("warning: moved damaged checkpoint " + bad +
                                  " to " + aside);
    }
    if (!damaged.empty())
      (void)fsyncDir(dir);
    return Status::success();
  }
  std::string list;
  for (const std::string &w : result.warnings)
    list += "\n  " + w;
  return Status::error(dir + ": no usable checkpoint (all " +
                       std::to_string(all.size()) +
                       " are damaged); move them away to start over:" + list);
}

Status weft::rt::readCheckpoint(const std::string &path,
                                StoredCheckpoint &out) {
  out = StoredCheckpoint();
  std::vector<std::pair<int64_t, std::string>> candidates;
  if (exists(join(path, kManifest)))
    candidates.push_back({-1, path});
  else
    candidates = listCheckpoints(path);
  if (candidates.empty())
    return Status::error(path + ": neither a checkpoint (no " +
                         std::string(kManifest) +
                         ") nor a folder of checkpoints (no step-* inside)");
  for (const auto &[step, candidate] : candidates) {
    Manifest m;
    SafeTensorsFile file;
    std::string damage;
    if (Status s = verify(candidate, nullptr, m, file, damage); !s.ok())
      return s;
    if (!damage.empty()) {
      if (candidates.size() == 1 && step < 0)
        return Status::error(candidate + " is damaged: " + damage);
      out.warnings.push_back("warning: skipping damaged checkpoint " +
                             candidate + ": " + damage);
      continue;
    }
    out.path = candidate;
    out.meta.step = m.step;
    out.meta.dataLoaderState = m.dataLoaderState;
    out.meta.modelJson =
        m.model.is_string() ? m.model.get<std::string>() : m.model.dump();
    for (const ManifestTensor &t : m.tensors)
      for (auto &[name, array] : file.tensors)
        if (name == t.name)
          out.tensors.push_back({t.name, t.kind, std::move(array)});
    return Status::success();
  }
  return Status::error(path + ": no usable checkpoint (all " +
                       std::to_string(candidates.size()) + " are damaged)");
}
