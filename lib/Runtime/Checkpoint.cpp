//===- Checkpoint.cpp - Crash-safe training checkpoints -------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The safetensors files are written straight from the run's buffers (no
// copy of the model is made) in the layout SafeTensors.cpp reads, and their
// FNV-1a checksums are computed from the same bytes on the way out.
// Restoring checksums every file and reads its header first, and copies
// into the run's buffers only when everything has verified, so a damaged
// checkpoint never leaves the model half restored.
//
// Both formats are read as tensors made of blocks, each in some file: a
// single-process checkpoint is one file holding one block per tensor. A
// tensor is assembled for any target layout by copying from every block
// it overlaps, so resharding is the ordinary load path, not a special
// case. Tensor data is read from the files only after every file's size,
// checksum and header and every tensor's block coverage have verified.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Checkpoint.h"

#include "weft/Formats/SafeTensors.h"
#include "weft/Formats/StepContract.h"

#include <nlohmann/json.hpp>

#include <cmath>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <thread>

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

/// One block of a tensor: where it lies in the global tensor and which
/// file holds it (under the tensor's name). The file's entry may be bigger
/// than the block (a rank's block of a view is several boxes of the stored
/// tensor): the block then lies at `at` in an entry of shape `entryShape`.
struct ManifestBlock {
  std::string file;
  std::vector<int64_t> offsets, shape;
  /// Zeros and `shape` when the manifest omits them (the entry is the
  /// block, as format version 2 always has it).
  std::vector<int64_t> at, entryShape;
};

/// A manifest's entry for one tensor. `shape` is the global (stored) shape.
struct ManifestTensor {
  std::string name, kind, dtype;
  std::vector<int64_t> shape;
  /// The view the writing run held it in, when it had one; `dims` split
  /// it.
  std::vector<int64_t> viewShape;
  std::vector<std::vector<std::string>> dims;
  std::vector<ManifestBlock> blocks;
};

struct ManifestFile {
  std::string file;
  uint64_t bytes = 0;
  std::string checksum;
};

/// Both formats in one shape: a version 1 manifest reads as one file
/// holding one block per tensor, so everything after parsing is shared.
struct Manifest {
  int64_t step = 0;
  int version = 0;
  std::vector<ShardLayout::Axis> mesh;
  std::vector<ManifestTensor> tensors;
  std::vector<ManifestFile> files;
  std::string dataLoaderState;
  json model;
};

bool readShape(const json &j, std::vector<int64_t> &out) {
  if (!j.is_array())
    return false;
  out.clear();
  for (const json &d : j) {
    if (!d.is_number_unsigned() || d.get<uint64_t>() > uint64_t(INT64_MAX))
      return false;
    out.push_back(int64_t(d.get<uint64_t>()));
  }
  return true;
}

bool readDims(const json &j, std::vector<std::vector<std::string>> &out) {
  if (!j.is_array())
    return false;
  out.clear();
  for (const json &d : j) {
    if (!d.is_array())
      return false;
    out.emplace_back();
    for (const json &a : d) {
      if (!a.is_string())
        return false;
      out.back().push_back(a.get<std::string>());
    }
  }
  return true;
}

bool readMesh(const json &j, std::vector<ShardLayout::Axis> &out) {
  auto axes = j.find("axes");
  if (!j.is_object() || axes == j.end() || !axes->is_array())
    return false;
  out.clear();
  for (const json &a : *axes) {
    if (!a.is_object() || !a.contains("name") || !a["name"].is_string() ||
        !a.contains("size") || !a["size"].is_number_unsigned() ||
        a["size"].get<uint64_t>() == 0 ||
        a["size"].get<uint64_t>() > uint64_t(INT32_MAX))
      return false;
    out.push_back({a["name"].get<std::string>(),
                   int64_t(a["size"].get<uint64_t>())});
  }
  return true;
}

json meshJson(const std::vector<ShardLayout::Axis> &mesh) {
  json axes = json::array();
  for (const ShardLayout::Axis &a : mesh)
    axes.push_back({{"name", a.name}, {"size", a.size}});
  return {{"axes", std::move(axes)}};
}

bool readFileEntry(const json &j, ManifestFile &f) {
  if (!j.is_object() || !j.contains("bytes") || !j["bytes"].is_number_unsigned() ||
      !j.contains("fnv1a64") || !j["fnv1a64"].is_string())
    return false;
  f.bytes = j["bytes"].get<uint64_t>();
  f.checksum = j["fnv1a64"].get<std::string>();
  return true;
}

/// A plain file name inside the checkpoint: nothing that leaves it.
bool isPlainName(const std::string &name) {
  return !name.empty() && name.find('/') == std::string::npos &&
         name != "." && name != "..";
}

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
  bool sharded = m.version >= 2;
  if (sharded) {
    auto mesh = j.find("mesh");
    if (mesh == j.end() || !readMesh(*mesh, m.mesh))
      return bad("missing or invalid 'mesh' {axes: [{name, size}]}");
    auto files = j.find("files");
    if (files == j.end() || !files->is_array())
      return bad("missing 'files'");
    for (const json &f : *files) {
      ManifestFile mf;
      if (!readFileEntry(f, mf) || !f.contains("file") ||
          !f["file"].is_string() ||
          !isPlainName(mf.file = f["file"].get<std::string>()))
        return bad("a 'files' entry lacks file, bytes or fnv1a64");
      m.files.push_back(std::move(mf));
    }
  } else {
    auto st = j.find("safetensors");
    ManifestFile mf;
    mf.file = kTensors;
    if (st == j.end() || !readFileEntry(*st, mf))
      return bad("missing 'safetensors' {bytes, fnv1a64}");
    m.files.push_back(std::move(mf));
  }
  auto tensors = j.find("tensors");
  if (tensors == j.end() || !tensors->is_array())
    return bad("missing 'tensors'");
  for (const json &t : *tensors) {
    ManifestTensor mt;
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string() ||
        !t.contains("kind") || !t["kind"].is_string() || !t.contains("dtype") ||
        !t["dtype"].is_string() || !t.contains("shape"))
      return bad("a 'tensors' entry lacks name, kind, dtype or shape");
    mt.name = t["name"].get<std::string>();
    mt.kind = t["kind"].get<std::string>();
    mt.dtype = t["dtype"].get<std::string>();
    if (!readShape(t["shape"], mt.shape))
      return bad("tensor " + quote(mt.name) + " has an invalid shape");
    if (!sharded) {
      std::vector<int64_t> zeros(mt.shape.size(), 0);
      mt.blocks.push_back({kTensors, zeros, mt.shape, zeros, mt.shape});
      m.tensors.push_back(std::move(mt));
      continue;
    }
    if (t.contains("dims") && !readDims(t["dims"], mt.dims))
      return bad("tensor " + quote(mt.name) + " has invalid 'dims'");
    if (t.contains("view_shape") && !readShape(t["view_shape"], mt.viewShape))
      return bad("tensor " + quote(mt.name) + " has an invalid 'view_shape'");
    auto blocks = t.find("blocks");
    if (blocks == t.end() || !blocks->is_array() || blocks->empty())
      return bad("tensor " + quote(mt.name) + " lists no 'blocks'");
    for (const json &b : *blocks) {
      ManifestBlock mb;
      if (!b.is_object() || !b.contains("file") || !b["file"].is_string() ||
          !b.contains("offsets") || !readShape(b["offsets"], mb.offsets) ||
          !b.contains("shape") || !readShape(b["shape"], mb.shape))
        return bad("tensor " + quote(mt.name) +
                   " has a block without file, offsets or shape");
      if (b.contains("at") ? !readShape(b["at"], mb.at)
                           : (mb.at.assign(mb.shape.size(), 0), false))
        return bad("tensor " + quote(mt.name) +
                   " has a block with an invalid 'at'");
      if (b.contains("entry_shape")
              ? !readShape(b["entry_shape"], mb.entryShape)
              : (mb.entryShape = mb.shape, false))
        return bad("tensor " + quote(mt.name) +
                   " has a block with an invalid 'entry_shape'");
      mb.file = b["file"].get<std::string>();
      mt.blocks.push_back(std::move(mb));
    }
    m.tensors.push_back(std::move(mt));
  }
  auto dl = j.find("data_loader");
  if (dl == j.end() || !dl->is_object())
    return bad("missing 'data_loader'");
  m.dataLoaderState = dl->dump();
  auto model = j.find("model");
  if (model != j.end())
    m.model = *model;
  return Status::success();
}

int64_t volume(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// Checks that a tensor's blocks lie inside it, do not overlap and cover
/// it; a failure means a damaged (or hand-edited) manifest.
std::string checkBlocks(const ManifestTensor &t) {
  int64_t covered = 0;
  for (size_t i = 0; i < t.blocks.size(); ++i) {
    const ManifestBlock &b = t.blocks[i];
    if (b.offsets.size() != t.shape.size() || b.shape.size() != t.shape.size())
      return "tensor " + quote(t.name) + ": a block's rank differs from " +
             formatShape(t.shape);
    for (size_t d = 0; d < t.shape.size(); ++d)
      if (b.offsets[d] > t.shape[d] || b.shape[d] > t.shape[d] - b.offsets[d])
        return "tensor " + quote(t.name) + ": block " +
               formatShape(b.shape) + " at " + formatShape(b.offsets) +
               " lies outside " + formatShape(t.shape);
    bool inEntry =
        b.at.size() == b.shape.size() && b.entryShape.size() == b.shape.size();
    for (size_t d = 0; inEntry && d < b.shape.size(); ++d)
      inEntry =
          b.at[d] <= b.entryShape[d] && b.shape[d] <= b.entryShape[d] - b.at[d];
    if (!inEntry)
      return "tensor " + quote(t.name) + ": block " + formatShape(b.shape) +
             " at " + formatShape(b.offsets) + " lies outside its entry in " +
             b.file + " ('at' " + json(b.at).dump() + ", 'entry_shape' " +
             json(b.entryShape).dump() + ")";
    for (size_t k = 0; k < i; ++k) {
      const ManifestBlock &o = t.blocks[k];
      bool overlap = volume(b.shape) > 0 && volume(o.shape) > 0;
      for (size_t d = 0; d < t.shape.size() && overlap; ++d)
        overlap = b.offsets[d] < o.offsets[d] + o.shape[d] &&
                  o.offsets[d] < b.offsets[d] + b.shape[d];
      if (overlap)
        return "tensor " + quote(t.name) + ": blocks at " +
               formatShape(o.offsets) + " and " + formatShape(b.offsets) +
               " overlap";
    }
    covered += volume(b.shape);
  }
  if (covered != volume(t.shape))
    return "tensor " + quote(t.name) + ": its blocks hold " +
           std::to_string(covered) + " of its " +
           std::to_string(volume(t.shape)) + " elements";
  return "";
}

/// The first difference between a checkpoint's tensors and the model's
/// (whose shapes are global), or an empty string.
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
             describe(t.dtype, t.shape) + " in this model" +
             (m.mesh.empty() ? "" : " (global shapes)");
    byName.erase(it);
  }
  if (!byName.empty())
    return "it has tensor " + quote(byName.begin()->first) +
           ", which this model lacks";
  return "";
}

/// copyBox, with `src` holding the source's elements from flat index
/// `srcFirst` on (a span read from a file rather than the whole array).
void copyBoxFrom(const uint8_t *src, int64_t srcFirst,
                 const std::vector<int64_t> &srcShape,
                 const std::vector<int64_t> &srcStart, uint8_t *dst,
                 const std::vector<int64_t> &dstShape,
                 const std::vector<int64_t> &dstStart,
                 const std::vector<int64_t> &box, size_t es) {
  size_t rank = box.size();
  if (rank == 0) {
    std::memcpy(dst, src, es);
    return;
  }
  for (int64_t d : box)
    if (d <= 0)
      return;
  // Rows along the last dimension are contiguous in both arrays: walk the
  // box's other dimensions like an odometer and copy a row at a time.
  std::vector<int64_t> idx(rank, 0);
  size_t row = size_t(box[rank - 1]) * es;
  while (true) {
    int64_t s = 0, t = 0;
    for (size_t d = 0; d < rank; ++d) {
      s = s * srcShape[d] + srcStart[d] + idx[d];
      t = t * dstShape[d] + dstStart[d] + idx[d];
    }
    std::memcpy(dst + size_t(t) * es, src + size_t(s - srcFirst) * es, row);
    size_t d = rank - 1;
    while (d > 0) {
      if (++idx[d - 1] < box[d - 1])
        break;
      idx[d - 1] = 0;
      --d;
    }
    if (d == 0)
      return;
  }
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


/// A verified tensor file of a checkpoint, open for reading its blocks.
struct Part {
  std::string path;
  std::unique_ptr<InputFile> file;
  struct Entry {
    std::string dtype;
    std::vector<int64_t> shape;
    /// Absolute byte range in the file.
    uint64_t begin = 0, end = 0;
  };
  std::map<std::string, Entry> entries;
};

/// Reads the safetensors header of `part.path` (whose size and checksum
/// have been checked): the entries and where their bytes lie.
std::string readPartHeader(Part &part) {
  part.file = std::make_unique<InputFile>();
  if (Status s = part.file->open(part.path); !s.ok())
    return s.message;
  uint64_t size = part.file->size();
  uint8_t len[8];
  if (size < 8 || !part.file->readAt(0, len, 8).ok())
    return part.path + ": shorter than a safetensors header";
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i)
    headerLen |= uint64_t(len[i]) << (8 * i);
  if (headerLen > size - 8)
    return part.path + ": header length exceeds the file";
  std::string text(size_t(headerLen), '\0');
  if (Status s = part.file->readAt(8, text.data(), text.size()); !s.ok())
    return s.message;
  json header = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!header.is_object())
    return part.path + ": the safetensors header is not a JSON object";
  uint64_t dataStart = 8 + headerLen;
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (it.key() == "__metadata__")
      continue;
    const json &e = it.value();
    Part::Entry entry;
    if (!e.is_object() || !e.contains("dtype") || !e["dtype"].is_string() ||
        !e.contains("shape") || !readShape(e["shape"], entry.shape) ||
        !e.contains("data_offsets") || !e["data_offsets"].is_array() ||
        e["data_offsets"].size() != 2 ||
        !e["data_offsets"][0].is_number_unsigned() ||
        !e["data_offsets"][1].is_number_unsigned())
      return part.path + ": tensor " + quote(it.key()) +
             " has an invalid header entry";
    entry.dtype = e["dtype"].get<std::string>();
    uint64_t b = e["data_offsets"][0].get<uint64_t>(),
             en = e["data_offsets"][1].get<uint64_t>();
    if (b > en || en > size - dataStart)
      return part.path + ": tensor " + quote(it.key()) +
             " has data_offsets outside the file";
    entry.begin = dataStart + b;
    entry.end = dataStart + en;
    part.entries[it.key()] = std::move(entry);
  }
  return "";
}

DType dtypeFromName(const std::string &name, bool &ok) {
  for (int d = 0; d <= int(DType::Bool); ++d)
    if (name == dtypeName(DType(d))) {
      ok = true;
      return DType(d);
    }
  ok = false;
  return DType::F32;
}

/// Checks checkpoint `path` against `tensors` (the compiled model's, with
/// global shapes), or, with `tensors` null, against its own manifest: the
/// manifest, every file's size and checksum, every block's presence in its
/// file and that the blocks cover each tensor. A damaged checkpoint leaves
/// `damage` set; errors mean it must not be used at all. `parts` are left
/// open for assembling tensors.
Status verify(const std::string &path,
              const std::vector<CheckpointTensor> *tensors, Manifest &m,
              std::map<std::string, Part> &parts, std::string &damage) {
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
  for (const ManifestFile &f : m.files) {
    Part &part = parts[f.file];
    part.path = join(path, f.file);
    uint64_t size = 0, hash = 0;
    if (Status s = checksumFile(part.path, size, hash); !s.ok()) {
      damage = s.message;
      return Status::success();
    }
    if (size != f.bytes) {
      damage = part.path + ": " + std::to_string(size) +
               " bytes but the manifest says " + std::to_string(f.bytes) +
               (size < f.bytes ? " (truncated)" : "");
      return Status::success();
    }
    if (hex64(hash) != f.checksum) {
      damage = part.path + ": checksum " + hex64(hash) +
               " does not match the manifest's " + f.checksum + " (corrupted)";
      return Status::success();
    }
    if (std::string e = readPartHeader(part); !e.empty()) {
      damage = e;
      return Status::success();
    }
  }
  for (const ManifestTensor &t : m.tensors) {
    bool known = false;
    (void)dtypeFromName(t.dtype, known);
    if (!known) {
      damage = join(path, kManifest) + ": tensor " + quote(t.name) +
               " has unknown dtype " + quote(t.dtype);
      return Status::success();
    }
    if (std::string e = checkBlocks(t); !e.empty()) {
      damage = join(path, kManifest) + ": " + e;
      return Status::success();
    }
    for (const ManifestBlock &b : t.blocks) {
      auto part = parts.find(b.file);
      if (part == parts.end()) {
        damage = join(path, kManifest) + ": tensor " + quote(t.name) +
                 " has a block in " + b.file + ", which 'files' does not list";
        return Status::success();
      }
      auto e = part->second.entries.find(t.name);
      size_t bytes = 0;
      bool known = false;
      DType dtype = dtypeFromName(t.dtype, known);
      if (e == part->second.entries.end() || e->second.dtype != t.dtype ||
          e->second.shape != b.entryShape ||
          !computeByteSize(dtype, b.entryShape, bytes) ||
          e->second.end - e->second.begin != bytes) {
        damage = part->second.path + ": tensor " + quote(t.name) +
                 " is missing or differs from the manifest";
        return Status::success();
      }
    }
  }
  return Status::success();
}

/// Fills the box at `start` of shape `shape` of tensor `t` (global
/// coordinates) from the blocks that overlap it into the dense array `dst`
/// of shape `dstShape`, at `dstStart`. Each block is read from the first
/// to the last byte the box needs, so a rank reads little more than its
/// own share.
Status assemble(const ManifestTensor &t, std::map<std::string, Part> &parts,
                const std::vector<int64_t> &start,
                const std::vector<int64_t> &shape, void *dst,
                const std::vector<int64_t> &dstShape,
                const std::vector<int64_t> &dstStart) {
  bool known = false;
  DType dtype = dtypeFromName(t.dtype, known);
  size_t es = dtypeSize(dtype);
  size_t rank = t.shape.size();
  std::vector<uint8_t> buf;
  for (const ManifestBlock &b : t.blocks) {
    std::vector<int64_t> lo(rank), box(rank), inBlock(rank), inDst(rank);
    bool empty = false;
    for (size_t d = 0; d < rank; ++d) {
      lo[d] = std::max(start[d], b.offsets[d]);
      int64_t hi = std::min(start[d] + shape[d], b.offsets[d] + b.shape[d]);
      if (hi <= lo[d])
        empty = true;
      box[d] = hi - lo[d];
      inBlock[d] = b.at[d] + lo[d] - b.offsets[d];
      inDst[d] = dstStart[d] + lo[d] - start[d];
    }
    if (empty)
      continue;
    // Linear element indices (in the file's entry) of the box's first and
    // last elements: the byte span to read.
    int64_t first = 0, last = 0;
    for (size_t d = 0; d < rank; ++d) {
      first = first * b.entryShape[d] + inBlock[d];
      last = last * b.entryShape[d] + inBlock[d] + box[d] - 1;
    }
    Part &part = parts.at(b.file);
    const Part::Entry &e = part.entries.at(t.name);
    size_t n = size_t(last - first + 1) * es;
    buf.resize(n);
    if (Status s = part.file->readAt(e.begin + uint64_t(first) * es,
                                     buf.data(), n);
        !s.ok())
      return Status::error("tensor " + quote(t.name) + ": " + s.message);
    copyBoxFrom(buf.data(), first, b.entryShape, inBlock,
                static_cast<uint8_t *>(dst), dstShape, inDst, box, es);
  }
  return Status::success();
}

/// A checkpoint of NaN or Inf weights would replace a good one and make
/// every resume fail: refuse it before touching the folder. (Buffers may
/// hold -inf by design: attention masks.)
Status checkFinite(const std::string &dir, int64_t step,
                   const std::vector<CheckpointTensor> &tensors) {
  for (const CheckpointTensor &t : tensors) {
    if ((t.dtype != DType::F32 && t.dtype != DType::F64) || !t.data ||
        t.kind == weft::contract::roleName(weft::contract::Role::Buffer))
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
                             std::to_string(step) + ": " + t.kind + " " +
                             quote(t.name) + " holds a non-finite value " +
                             "at element " + std::to_string(i) +
                             "; the checkpoints in " + dir +
                             " stay as they were");
    }
  }
  return Status::success();
}

/// The manifest's fields every format shares.
json manifestHead(const CheckpointMeta &meta, int version) {
  json manifest;
  manifest["format"] = "weft-checkpoint";
  manifest["format_version"] = version;
  manifest["step"] = meta.step;
  return manifest;
}

void manifestTail(const CheckpointMeta &meta, json &manifest) {
  json dl = json::parse(meta.dataLoaderState, nullptr, false);
  manifest["data_loader"] = dl.is_object() ? dl : json::object();
  json model = json::parse(meta.modelJson, nullptr, false);
  manifest["model"] = model.is_discarded() ? json(meta.modelJson) : model;
}

/// Moves the complete checkpoint in `tmp` to its final name (replacing a
/// checkpoint of the same step only once the new one is complete) and
/// keeps the newest `keep`.
Status commit(const std::string &dir, const std::string &name,
              const std::string &tmp, int keep, std::string &path) {
  std::string finalPath = join(dir, name), old = join(dir, ".old-" + name);
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

/// "rank-00001-of-00002".
std::string partStem(int64_t rank, int64_t world) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "rank-%05" PRId64 "-of-%05" PRId64, rank,
                world);
  return buf;
}

/// The model's tensors with global (stored) shapes, and where this rank's
/// block of each lies; an error means the layout and the tensors disagree.
Status globalView(const std::vector<CheckpointTensor> &tensors,
                  const ShardLayout &layout, int64_t rank,
                  std::vector<CheckpointTensor> &global,
                  std::vector<ShardLayout::StoredBlock> &blocks) {
  global = tensors;
  blocks.assign(tensors.size(), {});
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (Status s = layout.storedBlockOf(tensors[i].name, tensors[i].shape, rank,
                                        blocks[i]);
        !s.ok())
      return s;
    global[i].shape = blocks[i].globalShape;
  }
  return Status::success();
}

/// A model description without what only the layout decides (the mesh,
/// the shards, ZeRO, the tensor-parallel plan, planned memory): resuming
/// under another layout is what sharded checkpoints are for, so it is not
/// a different model.
static json withoutLayout(json model) {
  if (model.is_object())
    for (const char *key : {"mesh", "shardings", "zero", "tp_plan",
                            "sequence_parallel", "workspace_bytes",
                            "peak_bytes", "pipeline", "entry", "prediction",
                            "num_args", "num_results"})
      model.erase(key);
  return model;
}

Status restoreImpl(const std::string &dir,
                   const std::vector<CheckpointTensor> &tensors,
                   const ShardLayout &layout, int64_t rank,
                   const std::string &modelJson, RestoreResult &result) {
  result = RestoreResult();
  std::vector<CheckpointTensor> global;
  std::vector<ShardLayout::StoredBlock> blocks;
  if (Status s = globalView(tensors, layout, rank, global, blocks); !s.ok())
    return s;
  auto all = listCheckpoints(dir);
  if (all.empty())
    return Status::success();
  std::vector<std::string> damaged;
  for (const auto &[step, path] : all) {
    Manifest m;
    std::map<std::string, Part> parts;
    std::string damage;
    if (Status s = verify(path, &global, m, parts, damage); !s.ok())
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
    for (size_t i = 0; i < tensors.size(); ++i) {
      const CheckpointTensor &t = tensors[i];
      if (!t.data)
        continue;
      auto mt = std::find_if(m.tensors.begin(), m.tensors.end(),
                             [&](const auto &c) { return c.name == t.name; });
      for (const ShardLayout::Box &box : blocks[i].boxes)
        if (Status s = assemble(*mt, parts, box.offsets, box.shape, t.data,
                                blocks[i].localShape, box.localOffsets);
            !s.ok())
          return Status::error(path + ": " + s.message);
    }
    result.found = true;
    result.path = path;
    result.meta.step = m.step;
    result.meta.dataLoaderState = m.dataLoaderState;
    result.meta.modelJson =
        m.model.is_string() ? m.model.get<std::string>() : m.model.dump();
    json current = json::parse(modelJson, nullptr, false);
    bool same = current.is_discarded()
                    ? m.model == json(modelJson)
                    : withoutLayout(m.model) == withoutLayout(current);
    if (!same)
      result.warnings.push_back(
          "warning: " + path +
          " was written by a model compiled with a different description "
          "(model JSON); its tensors match, so training resumes from it");
    // Every rank reaches the same verdict on the same files, but only one
    // may rename them.
    for (const std::string &bad : damaged) {
      if (rank != 0)
        break;
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
    if (!damaged.empty() && rank == 0)
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

} // namespace

int64_t ShardLayout::numRanks() const {
  int64_t n = 1;
  for (const Axis &a : mesh)
    n *= a.size;
  return n;
}

std::string ShardLayout::describeMesh() const {
  if (mesh.empty())
    return "none";
  std::string out;
  for (const Axis &a : mesh)
    out += (out.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
  return out;
}

Status ShardLayout::blockOf(const std::string &name,
                            const std::vector<int64_t> &localShape,
                            int64_t rank, std::vector<int64_t> &offsets,
                            std::vector<int64_t> &globalShape) const {
  offsets.assign(localShape.size(), 0);
  globalShape = localShape;
  auto it = shardings.find(name);
  if (it == shardings.end())
    return Status::success();
  const Split &split = it->second;
  auto bad = [&](const std::string &what) {
    return Status::error("sharding of " + quote(name) + ": " + what +
                         "; weftc and this runtime disagree on the layout");
  };
  if (split.globalShape.size() != localShape.size() ||
      split.dims.size() != localShape.size())
    return bad("global shape " + formatShape(split.globalShape) + " and " +
               std::to_string(split.dims.size()) +
               " split dims do not match the local shape " +
               formatShape(localShape));
  // The rank's coordinate on each axis, row-major (the last axis varies
  // fastest).
  std::map<std::string, std::pair<int64_t, int64_t>> coord;
  int64_t rest = rank;
  for (auto a = mesh.rbegin(); a != mesh.rend(); ++a) {
    coord[a->name] = {rest % a->size, a->size};
    rest /= a->size;
  }
  for (size_t d = 0; d < localShape.size(); ++d) {
    int64_t index = 0, parts = 1;
    for (const std::string &axis : split.dims[d]) {
      auto c = coord.find(axis);
      if (c == coord.end())
        return bad("dim " + std::to_string(d) + " is split over axis " +
                   quote(axis) + ", which the mesh " + describeMesh() +
                   " lacks");
      index = index * c->second.second + c->second.first;
      parts *= c->second.second;
    }
    if (split.globalShape[d] % parts != 0 ||
        split.globalShape[d] / parts != localShape[d])
      return bad("dim " + std::to_string(d) + " of global size " +
                 std::to_string(split.globalShape[d]) + " split " +
                 std::to_string(parts) + " ways is not the local size " +
                 std::to_string(localShape[d]));
    offsets[d] = index * localShape[d];
  }
  globalShape = split.globalShape;
  return Status::success();
}

Status ShardLayout::storedBlockOf(const std::string &name,
                                  const std::vector<int64_t> &localShape,
                                  int64_t rank, StoredBlock &out) const {
  out = StoredBlock();
  std::vector<int64_t> offsets, view;
  if (Status s = blockOf(name, localShape, rank, offsets, view); !s.ok())
    return s;
  auto it = shardings.find(name);
  if (it == shardings.end() || it->second.storedShape.empty() ||
      it->second.storedShape == view) {
    out.globalShape = view;
    out.localShape = localShape;
    out.boxes.push_back(
        {offsets, localShape, std::vector<int64_t>(localShape.size(), 0)});
    return Status::success();
  }
  const std::vector<int64_t> &stored = it->second.storedShape;
  auto bad = [&](const std::string &what) {
    return Status::error("sharding of " + quote(name) + ": " + what +
                         "; weftc and this runtime disagree on the layout");
  };
  std::vector<size_t> runs;
  if (std::string e = storedDimRuns(stored, view, runs); !e.empty())
    return bad(e);
  out.globalShape = stored;
  size_t rankStored = stored.size();
  // Per stored dim, where each range of the block starts (stored global
  // and local coordinates); the ranges of one dim share an extent.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> starts(rankStored);
  std::vector<int64_t> extent(rankStored);
  // A pathological view could make a block millions of boxes; refuse it
  // before enumerating them.
  constexpr int64_t kMaxBoxes = 1 << 20;
  int64_t count = 1;
  for (size_t j = 0; j < rankStored; ++j) {
    size_t a = runs[j], c = runs[j + 1];
    int64_t local = 1;
    for (size_t d = a; d < c; ++d)
      local *= localShape[d];
    out.localShape.push_back(local);
    // View dims inside the innermost split one are whole, so each index
    // of the split one and the dims outside it is one contiguous range.
    size_t k = c;
    for (size_t d = c; d-- > a;)
      if (localShape[d] < view[d]) {
        k = d;
        break;
      }
    if (k == c) {
      starts[j] = {{0, 0}};
      extent[j] = stored[j];
      continue;
    }
    int64_t inner = 1;
    for (size_t d = k + 1; d < c; ++d)
      inner *= view[d];
    extent[j] = localShape[k] * inner;
    for (size_t d = a; d < k; ++d)
      count = localShape[d] > kMaxBoxes
                  ? kMaxBoxes + 1
                  : std::min(count * localShape[d], kMaxBoxes + 1);
    if (count > kMaxBoxes)
      return bad("a rank's block of the view " + formatShape(view) +
                 " is over " + std::to_string(kMaxBoxes) +
                 " separate boxes of the stored shape " + formatShape(stored));
    std::vector<int64_t> idx(k - a, 0);
    while (count > 0) {
      int64_t g = 0, l = 0;
      for (size_t d = a; d < k; ++d) {
        g = g * view[d] + offsets[d] + idx[d - a];
        l = l * localShape[d] + idx[d - a];
      }
      starts[j].push_back(
          {(g * view[k] + offsets[k]) * inner, l * localShape[k] * inner});
      size_t d = k;
      while (d > a && ++idx[d - 1 - a] == localShape[d - 1])
        idx[--d - a] = 0;
      if (d == a)
        break;
    }
  }
  if (volume(localShape) == 0) {
    // An empty block: one empty box keeps the rank's entry in the
    // checkpoint, as without a view.
    out.boxes.push_back({std::vector<int64_t>(rankStored, 0), out.localShape,
                         std::vector<int64_t>(rankStored, 0)});
    return Status::success();
  }
  std::vector<size_t> pick(rankStored, 0);
  while (true) {
    Box box;
    for (size_t j = 0; j < rankStored; ++j) {
      box.offsets.push_back(starts[j][pick[j]].first);
      box.localOffsets.push_back(starts[j][pick[j]].second);
    }
    box.shape = extent;
    out.boxes.push_back(std::move(box));
    size_t j = rankStored;
    while (j > 0 && ++pick[j - 1] == starts[j - 1].size())
      pick[--j] = 0;
    if (j == 0)
      break;
  }
  return Status::success();
}

std::string weft::rt::storedDimRuns(const std::vector<int64_t> &storedShape,
                                    const std::vector<int64_t> &viewShape,
                                    std::vector<size_t> &runs) {
  auto text = [](const std::vector<int64_t> &shape) {
    return json(shape).dump();
  };
  auto count = [](const std::vector<int64_t> &shape, int64_t &n) {
    n = 1;
    for (int64_t d : shape)
      if (d < 0 || __builtin_mul_overflow(n, d, &n))
        return false;
    return true;
  };
  int64_t storedCount = 0, viewCount = 0;
  if (!count(storedShape, storedCount) || !count(viewShape, viewCount) ||
      storedCount != viewCount)
    return "stored_shape " + text(storedShape) + " has " +
           std::to_string(storedCount) + " elements but global_shape " +
           text(viewShape) + " has " + std::to_string(viewCount);
  std::string notMerge =
      "stored_shape " + text(storedShape) +
      " is not a merge of consecutive dims of global_shape " + text(viewShape) +
      " (each stored dim must be the " + "product of a run of them, in order)";
  runs.assign(1, 0);
  size_t cursor = 0;
  for (int64_t size : storedShape) {
    // The shortest run: size-1 view dims between runs join the next one.
    int64_t product = 1;
    while (product != size) {
      if (cursor == viewShape.size() || (size != 0 && product > size) ||
          __builtin_mul_overflow(product, viewShape[cursor], &product))
        return notMerge;
      ++cursor;
    }
    runs.push_back(cursor);
  }
  // What is left has one element (or the tensor none): it joins the last
  // run.
  if (!storedShape.empty())
    runs.back() = viewShape.size();
  return "";
}

bool ShardLayout::storesBlock(const std::string &name, int64_t rank) const {
  std::set<std::string> used;
  if (auto it = shardings.find(name); it != shardings.end())
    for (const auto &axes : it->second.dims)
      used.insert(axes.begin(), axes.end());
  auto stage = pipelineRank.find(name);
  int64_t rest = rank;
  for (auto a = mesh.rbegin(); a != mesh.rend(); ++a) {
    int64_t coord = rest % a->size;
    if (stage != pipelineRank.end() && a->name == "pp") {
      if (coord != stage->second)
        return false;
    } else if (!used.count(a->name) && coord != 0) {
      return false;
    }
    rest /= a->size;
  }
  return true;
}

Status weft::rt::parseShardLayout(const std::string &modelJson,
                                  ShardLayout &out) {
  out = ShardLayout();
  json root = json::parse(modelJson, nullptr, /*allow_exceptions=*/false);
  if (!root.is_object())
    return Status::success();
  auto mesh = root.find("mesh");
  if (mesh != root.end() && !readMesh(*mesh, out.mesh))
    return Status::error("model JSON: 'mesh' must be {\"axes\": [{\"name\": "
                         "..., \"size\": N > 0}, ...]}");
  std::set<std::string> axes;
  for (const ShardLayout::Axis &a : out.mesh)
    if (!axes.insert(a.name).second)
      return Status::error("model JSON: mesh axis " + quote(a.name) +
                           " appears twice");
  auto shardings = root.find("shardings");
  if (shardings == root.end())
    return Status::success();
  if (!shardings->is_object())
    return Status::error("model JSON: 'shardings' must be an object");
  for (auto it = shardings->begin(); it != shardings->end(); ++it) {
    ShardLayout::Split split;
    const json &e = it.value();
    if (!e.is_object() || !e.contains("global_shape") ||
        !readShape(e["global_shape"], split.globalShape) ||
        !e.contains("dims") || !readDims(e["dims"], split.dims) ||
        split.dims.size() != split.globalShape.size())
      return Status::error("model JSON: sharding of " + quote(it.key()) +
                           " needs 'global_shape' and one 'dims' entry (a "
                           "list of mesh axes) per dimension");
    for (const auto &d : split.dims)
      for (const std::string &a : d)
        if (!axes.count(a))
          return Status::error("model JSON: sharding of " + quote(it.key()) +
                               " uses mesh axis " + quote(a) +
                               ", which 'mesh' does not define");
    if (auto stored = e.find("stored_shape"); stored != e.end()) {
      std::vector<size_t> runs;
      if (!readShape(*stored, split.storedShape))
        return Status::error("model JSON: sharding of " + quote(it.key()) +
                             ": 'stored_shape' must be a list of sizes");
      if (std::string why =
              storedDimRuns(split.storedShape, split.globalShape, runs);
          !why.empty())
        return Status::error("model JSON: sharding of " + quote(it.key()) +
                             ": " + why);
    }
    out.shardings[it.key()] = std::move(split);
  }
  return Status::success();
}

void weft::rt::copyBox(const uint8_t *src, const std::vector<int64_t> &srcShape,
                       const std::vector<int64_t> &srcStart, uint8_t *dst,
                       const std::vector<int64_t> &dstShape,
                       const std::vector<int64_t> &dstStart,
                       const std::vector<int64_t> &box, size_t elemSize) {
  copyBoxFrom(src, 0, srcShape, srcStart, dst, dstShape, dstStart, box,
              elemSize);
}

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

Status weft::rt::prepareCheckpointDir(const std::string &dir, int64_t rank) {
  if (Status s = makeDirs(dir); !s.ok())
    return s;
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return Status::error(
        dir + ": checkpoint directory is not writable: " + errnoText());
  if (rank != 0)
    return Status::success();
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
  if (Status s = checkFinite(dir, meta.step, tensors); !s.ok())
    return s;
  if (Status s = makeDirs(dir); !s.ok())
    return s;
  std::string name = checkpointName(meta.step);
  std::string tmp = join(dir, ".tmp-" + name);
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

  // A single-process checkpoint stays format version 1, which runtimes
  // older than meshes read too.
  json manifest = manifestHead(meta, kSingleFileCheckpointFormatVersion);
  manifest["tensors"] = std::move(manifestTensors);
  manifest["safetensors"] = {
      {"file", kTensors}, {"bytes", total}, {"fnv1a64", hex64(hash)}};
  manifestTail(meta, manifest);
  std::string text = manifest.dump(2) + "\n";
  if (Status s =
          writeFileAtomic(join(tmp, kManifest), {{text.data(), text.size()}});
      !s.ok())
    return s;
  if (Status s = fsyncDir(tmp); !s.ok())
    return s;
  return commit(dir, name, tmp, keep, path);
}

Status weft::rt::writeCheckpoint(const std::string &dir,
                                 const CheckpointMeta &meta,
                                 const std::vector<CheckpointTensor> &tensors,
                                 const ShardLayout &layout, int64_t rank,
                                 int64_t world, int keep, std::string &path,
                                 double waitSeconds) {
  if (layout.mesh.empty()) {
    if (world != 1 || rank != 0)
      return Status::error(
          "checkpoint: rank " + std::to_string(rank) + " of " +
          std::to_string(world) +
          " has no mesh layout; a multi-rank run needs the model's mesh");
    // Without a mesh every block is the whole tensor, but a viewed one is
    // still saved in its stored shape.
    std::vector<CheckpointTensor> stored = tensors;
    for (CheckpointTensor &t : stored) {
      ShardLayout::StoredBlock block;
      if (Status s = layout.storedBlockOf(t.name, t.shape, 0, block); !s.ok())
        return s;
      t.shape = block.localShape;
    }
    return writeCheckpoint(dir, meta, stored, keep, path);
  }
  if (world != layout.numRanks() || rank < 0 || rank >= world)
    return Status::error("checkpoint: rank " + std::to_string(rank) + " of " +
                         std::to_string(world) + " does not fit the mesh " +
                         layout.describeMesh() + " (" +
                         std::to_string(layout.numRanks()) + " ranks)");
  if (Status s = checkFinite(dir, meta.step, tensors); !s.ok())
    return s;
  if (Status s = makeDirs(dir); !s.ok())
    return s;
  std::string name = checkpointName(meta.step);
  std::string tmp = join(dir, ".tmp-" + name);
  // Every rank may be first: the folder is shared, never removed here (a
  // leftover one was cleared by rank 0's prepareCheckpointDir at start).
  if (::mkdir(tmp.c_str(), 0777) != 0 && errno != EEXIST)
    return Status::error(tmp + ": cannot create directory: " + errnoText());

  // This rank's part: the blocks it is the one to store.
  std::vector<TensorView> views;
  json stored = json::array();
  for (const CheckpointTensor &t : tensors) {
    size_t bytes = 0;
    if (!computeByteSize(t.dtype, t.shape, bytes))
      return Status::error("checkpoint: tensor " + quote(t.name) +
                           " has an invalid shape");
    ShardLayout::StoredBlock block;
    if (Status s = layout.storedBlockOf(t.name, t.shape, rank, block); !s.ok())
      return s;
    if (!layout.storesBlock(t.name, rank))
      continue;
    // The rank's bytes as they are, in the stored rank: every box of the
    // block is a box of this entry.
    views.push_back({t.name, t.dtype, block.localShape, t.data, bytes});
    stored.push_back(t.name);
  }
  SafeTensorsImage image;
  if (Status s = encodeSafeTensors({{"format", "weft-checkpoint-part"},
                                    {"step", std::to_string(meta.step)},
                                    {"rank", std::to_string(rank)}},
                                   views, image);
      !s.ok())
    return Status::error("checkpoint: " + s.message);
  uint64_t hash = fnv1a64(nullptr, 0), total = 0;
  for (const auto &[ptr, n] : image.pieces) {
    hash = fnv1a64(ptr, n, hash);
    total += n;
  }
  std::string stem = partStem(rank, world);
  if (Status s = writeFileAtomic(join(tmp, stem + ".safetensors"),
                                 image.pieces);
      !s.ok())
    return s;
  // The part's directory entry is durable before the description says the
  // part is complete.
  if (Status s = fsyncDir(tmp); !s.ok())
    return s;
  // The description goes last: its presence tells rank 0 the part is
  // complete and durable.
  json desc = {{"step", meta.step},     {"rank", rank},
               {"world", world},        {"bytes", total},
               {"fnv1a64", hex64(hash)}, {"tensors", std::move(stored)}};
  std::string descText = desc.dump() + "\n";
  if (Status s = writeFileAtomic(join(tmp, stem + ".json"),
                                 {{descText.data(), descText.size()}});
      !s.ok())
    return s;
  path = join(dir, name);
  if (rank != 0) {
    // Once the description exists rank 0 may commit, renaming `tmp`; its
    // own syncs of the folder then cover this entry too, so a folder gone
    // here is no error.
    if (Status s = fsyncDir(tmp); !s.ok() && exists(tmp))
      return s;
    return Status::success();
  }

  // Rank 0 waits for the others' parts through the file system, so
  // checkpointing needs no communicator (and works when one is broken).
  std::vector<json> descs;
  descs.resize(size_t(world));
  descs[0] = desc;
  auto deadline = std::chrono::steady_clock::now() +
                  std::chrono::duration<double>(std::max(waitSeconds, 0.0));
  auto pause = std::chrono::milliseconds(5);
  for (int64_t r = 1; r < world; ++r) {
    std::string descPath = join(tmp, partStem(r, world) + ".json");
    while (!exists(descPath)) {
      if (std::chrono::steady_clock::now() >= deadline) {
        std::string missing;
        for (int64_t q = r; q < world; ++q)
          if (!exists(join(tmp, partStem(q, world) + ".json")))
            missing += (missing.empty() ? "" : ", ") + std::to_string(q);
        char secs[32];
        std::snprintf(secs, sizeof(secs), "%g", waitSeconds);
        return Status::error(
            "checkpoint of step " + std::to_string(meta.step) +
            ": waited " + secs + " s for the parts of rank(s) " + missing +
            " in " + tmp + " (" + partStem(r, world) +
            ".json and .safetensors); those ranks failed or cannot reach this "
            "folder: the checkpoint folder must be shared by all ranks. The "
            "previous checkpoints are untouched");
      }
      std::this_thread::sleep_for(pause);
      pause = std::min(pause * 2, std::chrono::milliseconds(200));
    }
    Status rs = Status::success();
    InputFile f;
    std::string text;
    if (rs = f.open(descPath); rs.ok()) {
      text.assign(size_t(f.size()), '\0');
      rs = f.readAt(0, text.data(), text.size());
    }
    if (!rs.ok())
      return rs;
    descs[size_t(r)] = json::parse(text, nullptr, false);
  }

  // Check each part against what rank 0 expects of it: a rank running
  // another layout must not slip into the manifest.
  json files = json::array();
  for (int64_t r = 0; r < world; ++r) {
    const json &d = descs[size_t(r)];
    std::string descPath = join(tmp, partStem(r, world) + ".json");
    std::set<std::string> expected, got;
    for (const CheckpointTensor &t : tensors)
      if (layout.storesBlock(t.name, r))
        expected.insert(t.name);
    ManifestFile mf;
    bool ok = d.is_object() && readFileEntry(d, mf) && d.contains("step") &&
              d["step"] == meta.step && d.contains("tensors") &&
              d["tensors"].is_array();
    if (ok)
      for (const json &n : d["tensors"])
        ok = ok && n.is_string() && got.insert(n.get<std::string>()).second;
    if (!ok || got != expected)
      return Status::error(
          descPath + ": rank " + std::to_string(r) +
          "'s part is not the one expected for step " +
          std::to_string(meta.step) + " under mesh " + layout.describeMesh() +
          " (another step, or another layout); remove " + tmp +
          " and make every rank run the same executable");
    files.push_back({{"file", partStem(r, world) + ".safetensors"},
                     {"bytes", mf.bytes},
                     {"fnv1a64", mf.checksum}});
  }

  json manifestTensors = json::array();
  // Blocks inside bigger entries would be misread by version 2 readers.
  bool boxesInEntries = false;
  for (const CheckpointTensor &t : tensors) {
    ShardLayout::StoredBlock block;
    json blocks = json::array();
    for (int64_t r = 0; r < world; ++r) {
      if (Status s = layout.storedBlockOf(t.name, t.shape, r, block); !s.ok())
        return s;
      if (!layout.storesBlock(t.name, r))
        continue;
      for (const ShardLayout::Box &box : block.boxes) {
        json b = {{"file", partStem(r, world) + ".safetensors"},
                  {"offsets", box.offsets},
                  {"shape", box.shape}};
        if (box.shape != block.localShape ||
            box.localOffsets != std::vector<int64_t>(box.shape.size(), 0)) {
          b["at"] = box.localOffsets;
          b["entry_shape"] = block.localShape;
          boxesInEntries = true;
        }
        blocks.push_back(std::move(b));
      }
    }
    json entry = {{"name", t.name},
                  {"kind", t.kind},
                  {"dtype", dtypeName(t.dtype)},
                  {"shape", block.globalShape}};
    auto split = layout.shardings.find(t.name);
    if (split != layout.shardings.end() &&
        block.globalShape != split->second.globalShape)
      entry["view_shape"] = split->second.globalShape;
    entry["dims"] = split != layout.shardings.end()
                        ? json(split->second.dims)
                        : json(std::vector<std::vector<std::string>>(
                              t.shape.size()));
    entry["blocks"] = std::move(blocks);
    manifestTensors.push_back(std::move(entry));
  }
  json manifest =
      manifestHead(meta, boxesInEntries ? kCheckpointFormatVersion
                                        : kShardedCheckpointFormatVersion);
  manifest["mesh"] = meshJson(layout.mesh);
  manifest["tensors"] = std::move(manifestTensors);
  manifest["files"] = std::move(files);
  manifestTail(meta, manifest);
  std::string text = manifest.dump(2) + "\n";
  if (Status s =
          writeFileAtomic(join(tmp, kManifest), {{text.data(), text.size()}});
      !s.ok())
    return s;
  if (Status s = fsyncDir(tmp); !s.ok())
    return s;
  return commit(dir, name, tmp, keep, path);
}

Status weft::rt::restoreLatestCheckpoint(
    const std::string &dir, const std::vector<CheckpointTensor> &tensors,
    const std::string &modelJson, RestoreResult &result) {
  return restoreImpl(dir, tensors, ShardLayout(), 0, modelJson, result);
}

Status weft::rt::restoreLatestCheckpoint(
    const std::string &dir, const std::vector<CheckpointTensor> &tensors,
    const ShardLayout &layout, int64_t rank, const std::string &modelJson,
    RestoreResult &result) {
  return restoreImpl(dir, tensors, layout, rank, modelJson, result);
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
    std::map<std::string, Part> parts;
    std::string damage;
    if (Status s = verify(candidate, nullptr, m, parts, damage); !s.ok())
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
    out.mesh = m.mesh;
    out.numFiles = int(m.files.size());
    for (const ManifestTensor &t : m.tensors) {
      bool known = false;
      HostArray array = HostArray::zeros(dtypeFromName(t.dtype, known), t.shape);
      std::vector<int64_t> zeros(t.shape.size(), 0);
      if (Status s = assemble(t, parts, zeros, t.shape, array.data.data(),
                              t.shape, zeros);
          !s.ok())
        return Status::error(candidate + ": " + s.message);
      // A rank's block of a view is several boxes in one file: count
      // files, as the writer's ranks stored them.
      std::set<std::string> files;
      for (const ManifestBlock &b : t.blocks)
        files.insert(b.file);
      out.tensors.push_back({t.name, t.kind, std::move(array), t.dims,
                             t.viewShape, int(files.size())});
    }
    return Status::success();
  }
  return Status::error(path + ": no usable checkpoint (all " +
                       std::to_string(candidates.size()) + " are damaged)");
}
