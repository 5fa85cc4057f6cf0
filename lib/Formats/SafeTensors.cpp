//===- SafeTensors.cpp - safetensors checkpoint reader and writer ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Validation follows the reference implementation (huggingface/safetensors):
// the header must fit in the file, every entry must be well formed, and the
// tensors' byte ranges must tile the data buffer with no gap or overlap.
// nlohmann/json is used without exceptions (the runtime may be built with
// -fno-exceptions): parsing reports failure as a discarded value, and every
// access is preceded by a type check.
//
//===----------------------------------------------------------------------===//

#include "weft/Formats/SafeTensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <set>
#include <tuple>

using namespace weft::rt;
using json = nlohmann::json;

namespace {

/// The reference reader's limit; it keeps a corrupt length from making us
/// allocate and parse gigabytes.
constexpr uint64_t kMaxHeaderLen = 100'000'000;
constexpr char kMetadataKey[] = "__metadata__";

constexpr DType kDTypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16,
                             DType::I64, DType::I32, DType::I16, DType::I8,
                             DType::U16, DType::U8,  DType::Bool};

bool parseDTypeName(const std::string &s, DType &out) {
  for (DType d : kDTypes) {
    if (s == dtypeName(d)) {
      out = d;
      return true;
    }
  }
  return false;
}


std::string range(uint64_t begin, uint64_t end) {
  return "[" + std::to_string(begin) + ", " + std::to_string(end) + ")";
}

/// Recovers nlohmann's description of a syntax error. The exception-free
/// parse only says that it failed, so on that (rare) path the text is parsed
/// again by this SAX handler, which receives the error as a value.
class ErrorCollector : public nlohmann::json_sax<json> {
public:
  std::string message = "invalid JSON";

  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t &) override { return true; }
  bool string(string_t &) override { return true; }
  bool binary(binary_t &) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t &) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t, const std::string &,
                   const nlohmann::detail::exception &ex) override {
    message = ex.what();
    return false;
  }
};

/// Whether brackets in `text` nest deeper than `limit`. A valid header nests
/// three deep; checking before parsing keeps a header of a million '['s from
/// costing the parser a million stack entries.
bool nestsDeeperThan(const std::string &text, int limit) {
  int depth = 0;
  bool inString = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (inString) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        inString = false;
    } else if (c == '"') {
      inString = true;
    } else if (c == '{' || c == '[') {
      if (++depth > limit)
        return true;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return false;
}

/// Reads a JSON array of non-negative integers that fit in int64.
bool getUIntArray(const json &j, std::vector<uint64_t> &out) {
  if (!j.is_array())
    return false;
  for (const json &e : j) {
    if (!e.is_number_unsigned())
      return false;
    uint64_t v = e.get<uint64_t>();
    if (v > uint64_t(INT64_MAX))
      return false;
    out.push_back(v);
  }
  return true;
}

/// A validated header entry, before its data is read.
struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

Status parseEntry(const std::string &path, const std::string &name,
                  const json &j, Entry &out) {
  auto bad = [&](const std::string &what) {
    return Status::error(path + ": tensor " + quote(name) + ": " + what);
  };
  if (!j.is_object())
    return bad("header entry is not an object");
  auto dtypeIt = j.find("dtype"), shapeIt = j.find("shape"),
       offsetsIt = j.find("data_offsets");
  if (dtypeIt == j.end() || !dtypeIt->is_string())
    return bad("missing or non-string 'dtype'");
  if (!parseDTypeName(dtypeIt->get_ref<const std::string &>(), out.dtype))
    return bad("unsupported dtype " +
               quote(dtypeIt->get_ref<const std::string &>()) +
               " (supported: F64 F32 F16 BF16 I64 I32 I16 I8 U16 U8 BOOL)");
  std::vector<uint64_t> dims, offsets;
  if (shapeIt == j.end() || !getUIntArray(*shapeIt, dims))
    return bad("missing 'shape' or it is not a list of non-negative integers");
  if (offsetsIt == j.end() || !getUIntArray(*offsetsIt, offsets) ||
      offsets.size() != 2)
    return bad("missing 'data_offsets' or it is not [begin, end]");
  out.name = name;
  out.shape.assign(dims.begin(), dims.end());
  out.begin = offsets[0];
  out.end = offsets[1];
  if (out.begin > out.end)
    return bad("data_offsets " + range(out.begin, out.end) + " are reversed");
  size_t bytes = 0;
  if (!computeByteSize(out.dtype, out.shape, bytes))
    return bad("shape " + formatShape(out.shape) + " is too large to address");
  if (out.end - out.begin != bytes)
    return bad("data_offsets " + range(out.begin, out.end) + " hold " +
               std::to_string(out.end - out.begin) + " bytes but " +
               formatShape(out.shape) + " " + dtypeName(out.dtype) + " needs " +
               std::to_string(bytes));
  return Status::success();
}

/// Checks that the entries' ranges tile [0, bufferLen) exactly, as the
/// reference reader requires: a gap or an overlap means a corrupt header.
Status checkTiling(const std::string &path, std::vector<const Entry *> sorted,
                   uint64_t bufferLen) {
  std::stable_sort(
      sorted.begin(), sorted.end(), [](const Entry *a, const Entry *b) {
        return std::tie(a->begin, a->end) < std::tie(b->begin, b->end);
      });
  uint64_t covered = 0;
  const Entry *prev = nullptr;
  for (const Entry *e : sorted) {
    if (e->end > bufferLen)
      return Status::error(path + ": tensor " + quote(e->name) +
                           ": data_offsets " + range(e->begin, e->end) +
                           " run past the " + std::to_string(bufferLen) +
                           "-byte data buffer");
    if (e->begin < covered)
      return Status::error(path + ": tensors " + quote(prev->name) + " " +
                           range(prev->begin, prev->end) + " and " +
                           quote(e->name) + " " + range(e->begin, e->end) +
                           " overlap");
    if (e->begin > covered)
      return Status::error(path + ": bytes " + range(covered, e->begin) +
                           " of the data buffer belong to no tensor");
    covered = e->end;
    prev = e;
  }
  if (covered != bufferLen)
    return Status::error(path + ": bytes " + range(covered, bufferLen) +
                         " of the data buffer belong to no tensor");
  return Status::success();
}

/// Parses the header JSON into validated entries (in header order) and
/// metadata. nlohmann's objects are sorted maps, so the order of keys is
/// recorded by a parser callback as they are read.
Status parseHeaderJson(const std::string &path, const std::string &text,
                       std::vector<Entry> &entries,
                       std::vector<std::pair<std::string, std::string>> &meta) {
  // Unknown fields may nest, so allow more than the three levels needed.
  constexpr int kMaxDepth = 32;
  if (nestsDeeperThan(text, kMaxDepth))
    return Status::error(path + ": header nests deeper than " +
                         std::to_string(kMaxDepth) + " levels");
  std::vector<std::string> topKeys, metaKeys;
  bool inMetadata = false;
  auto recordKeys = [&](int depth, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::key && parsed.is_string()) {
      const auto &key = parsed.get_ref<const std::string &>();
      if (depth == 1) {
        inMetadata = key == kMetadataKey;
        topKeys.push_back(key);
      } else if (depth == 2 && inMetadata) {
        metaKeys.push_back(key);
      }
    }
    return true;
  };
  json root = json::parse(text, recordKeys, /*allow_exceptions=*/false);
  if (root.is_discarded()) {
    ErrorCollector collector;
    json::sax_parse(text, &collector);
    return Status::error(path +
                         ": header is not valid JSON: " + collector.message);
  }
  if (!root.is_object())
    return Status::error(path + ": header is not a JSON object");
  // Duplicate keys collapse to the last value; the key lists still count
  // them, so a size mismatch exposes them.
  if (topKeys.size() != root.size()) {
    std::set<std::string> seen;
    for (const std::string &k : topKeys)
      if (!seen.insert(k).second)
        return Status::error(path + ": header lists " + quote(k) + " twice");
  }

  for (const std::string &key : topKeys) {
    auto it = root.find(key);
    if (it == root.end())
      continue; // Unreachable: the callback saw only the root's keys.
    const json &value = *it;
    if (key != kMetadataKey) {
      entries.emplace_back();
      if (Status s = parseEntry(path, key, value, entries.back()); !s.ok())
        return s;
      continue;
    }
    if (!value.is_object())
      return Status::error(path + ": __metadata__ is not an object");
    if (metaKeys.size() != value.size())
      return Status::error(path + ": __metadata__ repeats a key");
    for (const std::string &k : metaKeys) {
      auto vIt = value.find(k);
      if (vIt == value.end() || !vIt->is_string())
        return Status::error(path + ": __metadata__ value for " + quote(k) +
                             " is not a string");
      meta.emplace_back(k, vIt->get<std::string>());
    }
  }
  return Status::success();
}

} // namespace

Status weft::rt::readSafeTensors(const std::string &path,
                                 SafeTensorsFile &out) {
  InputFile file;
  if (Status s = file.open(path); !s.ok())
    return s;
  uint8_t lenBytes[8];
  if (file.size() < sizeof(lenBytes))
    return Status::error(path + ": not a safetensors file: only " +
                         std::to_string(file.size()) +
                         " bytes, too short for the header length");
  if (Status s = file.readAt(0, lenBytes, sizeof(lenBytes)); !s.ok())
    return s;
  uint64_t headerLen = 0;
  for (int i = 0; i < 8; ++i)
    headerLen |= uint64_t(lenBytes[i]) << (8 * i);
  uint64_t afterLen = file.size() - sizeof(lenBytes);
  if (headerLen > afterLen)
    return Status::error(path + ": header length " + std::to_string(headerLen) +
                         " exceeds the " + std::to_string(afterLen) +
                         " bytes that follow it (truncated or not a "
                         "safetensors file)");
  if (headerLen > kMaxHeaderLen)
    return Status::error(path + ": header length " + std::to_string(headerLen) +
                         " exceeds the limit of " +
                         std::to_string(kMaxHeaderLen) + " bytes");

  std::string text(size_t(headerLen), '\0');
  if (Status s = file.readAt(sizeof(lenBytes), text.data(), text.size());
      !s.ok())
    return s;
  std::vector<Entry> entries;
  SafeTensorsFile result;
  if (Status s = parseHeaderJson(path, text, entries, result.metadata); !s.ok())
    return s;

  uint64_t dataStart = sizeof(lenBytes) + headerLen;
  std::vector<const Entry *> ptrs;
  for (const Entry &e : entries)
    ptrs.push_back(&e);
  if (Status s = checkTiling(path, ptrs, file.size() - dataStart); !s.ok())
    return s;

  // The tiling check bounds the total allocation by the file size.
  for (Entry &e : entries) {
    HostArray a;
    a.dtype = e.dtype;
    a.shape = std::move(e.shape);
    a.data.resize(size_t(e.end - e.begin));
    if (Status s =
            file.readAt(dataStart + e.begin, a.data.data(), a.data.size());
        !s.ok())
      return s;
    result.tensors.emplace_back(std::move(e.name), std::move(a));
  }
  out = std::move(result);
  return Status::success();
}

/// Whether `s` is well-formed UTF-8 (no overlongs, surrogates or values past
/// U+10FFFF). JSON strings must be, and nlohmann would otherwise refuse to
/// serialize them.
static bool isValidUtf8(const std::string &s) {
  size_t i = 0, n = s.size();
  while (i < n) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len;
    uint32_t cp;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c & 0xe0) == 0xc0) {
      len = 2, cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3, cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4, cp = c & 0x07;
    } else {
      return false;
    }
    if (n - i < len)
      return false;
    for (size_t k = 1; k < len; ++k) {
      unsigned char cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xc0) != 0x80)
        return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static const uint32_t kMinForLen[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLen[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

/// A JSON string literal for `s`, which must be valid UTF-8.
static std::string jsonString(const std::string &s) { return json(s).dump(); }

static std::string jsonUIntList(const std::vector<uint64_t> &values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i ? "," : "") + std::to_string(values[i]);
  return out + "]";
}

Status weft::rt::encodeSafeTensors(
    const std::vector<std::pair<std::string, std::string>> &metadata,
    const std::vector<TensorView> &tensors, SafeTensorsImage &image) {
  auto bad = [&](const std::string &what) { return Status::error(what); };
  // The header is assembled by hand rather than through a json object: its
  // maps are sorted (losing our order) or, ordered, take quadratic time to
  // build for checkpoints with many thousands of tensors.
  std::string &header = image.header;
  header = "{";
  if (!metadata.empty()) {
    std::set<std::string> seen;
    header += jsonString(kMetadataKey) + ":{";
    for (size_t i = 0; i < metadata.size(); ++i) {
      const auto &[key, value] = metadata[i];
      if (!isValidUtf8(key) || !isValidUtf8(value))
        return bad("metadata " + quote(key) + " is not valid UTF-8");
      if (!seen.insert(key).second)
        return bad("metadata key " + quote(key) + " appears twice");
      header += (i ? "," : "") + jsonString(key) + ":" + jsonString(value);
    }
    header += "}";
  }

  std::set<std::string> seen;
  image.pieces.assign(2, {nullptr, 0});
  uint64_t offset = 0;
  for (const TensorView &t : tensors) {
    if (!isValidUtf8(t.name))
      return bad("tensor name " + quote(t.name) + " is not valid UTF-8");
    if (t.name == kMetadataKey)
      return bad("a tensor may not be named __metadata__");
    if (!seen.insert(t.name).second)
      return bad("tensor " + quote(t.name) + " appears twice");
    size_t expected = 0;
    if (!computeByteSize(t.dtype, t.shape, expected) || expected != t.bytes)
      return bad("tensor " + quote(t.name) + ": " + std::to_string(t.bytes) +
                 " bytes do not fit a " + dtypeName(t.dtype) + " tensor of " +
                 "shape " + formatShape(t.shape));
    std::vector<uint64_t> shape(t.shape.begin(), t.shape.end());
    uint64_t end = offset + t.bytes;
    if (header.size() > 1)
      header += ",";
    header += jsonString(t.name) +
              ":{\"dtype\":" + jsonString(dtypeName(t.dtype)) +
              ",\"shape\":" + jsonUIntList(shape) +
              ",\"data_offsets\":" + jsonUIntList({offset, end}) + "}";
    offset = end;
    image.pieces.emplace_back(t.data, t.bytes);
  }
  header += "}";
  // Padding keeps the data buffer 8-byte aligned, as the reference does, so
  // readers can map it and view tensors in place.
  header.append((8 - header.size() % 8) % 8, ' ');
  for (int i = 0; i < 8; ++i)
    image.length[i] = uint8_t(uint64_t(header.size()) >> (8 * i));
  image.pieces[0] = {image.length, sizeof(image.length)};
  image.pieces[1] = {header.data(), header.size()};
  return Status::success();
}

Status weft::rt::writeSafeTensors(const std::string &path,
                                  const SafeTensorsFile &f) {
  std::vector<TensorView> views;
  for (const auto &[name, array] : f.tensors) {
    if (Status s = array.checkLayout(); !s.ok())
      return Status::error(path + ": cannot write: tensor " + quote(name) +
                           ": " + s.message);
    views.push_back({name, array.dtype, array.shape, array.data.data(),
                     array.data.size()});
  }
  SafeTensorsImage image;
  if (Status s = encodeSafeTensors(f.metadata, views, image); !s.ok())
    return Status::error(path + ": cannot write: " + s.message);
  return writeFileAtomic(path, image.pieces);
}
