//===- DataLoader.cpp - Training batches from .npy arrays and tokens ------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A SampleSource knows how to read any set of samples into batch buffers;
// the DataLoader decides which samples (from the seed, epoch and position)
// and runs the source on a background thread. Sources keep files open and
// read only what a batch needs, with one positioned read per run of
// consecutive samples.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/DataLoader.h"
#include "weft/Formats/Npy.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <mutex>
#include <thread>

#include <dirent.h>
#include <glob.h>
#include <sys/stat.h>

using namespace weft::rt;
using json = nlohmann::json;

//===----------------------------------------------------------------------===//
// Randomness
//===----------------------------------------------------------------------===//

uint64_t SplitMix64::next() {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

Xoshiro256::Xoshiro256(uint64_t seed) {
  SplitMix64 sm(seed);
  for (uint64_t &word : s)
    word = sm.next();
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t Xoshiro256::next() {
  uint64_t result = rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = rotl(s[3], 45);
  return result;
}

uint64_t Xoshiro256::below(uint64_t bound) {
  // Values under `threshold` would make some residues more likely.
  uint64_t threshold = (0 - bound) % bound;
  for (;;) {
    uint64_t r = next();
    if (r >= threshold)
      return r % bound;
  }
}

std::vector<uint32_t> weft::rt::epochOrder(uint64_t seed, int64_t epoch,
                                           uint32_t n) {
  std::vector<uint32_t> order(n);
  for (uint32_t i = 0; i < n; ++i)
    order[i] = i;
  // Mixing the epoch through SplitMix64 first keeps the streams of
  // neighbouring (seed, epoch) pairs unrelated.
  SplitMix64 mix(seed);
  uint64_t epochSeed = mix.next() ^ SplitMix64(uint64_t(epoch)).next();
  Xoshiro256 rng(epochSeed);
  for (uint32_t i = n; i > 1; --i)
    std::swap(order[i - 1], order[rng.below(i)]);
  return order;
}

//===----------------------------------------------------------------------===//
// DataLoaderState
//===----------------------------------------------------------------------===//

std::string DataLoaderState::toJson() const {
  json j;
  j["seed"] = std::to_string(seed);
  j["epoch"] = epoch;
  j["samples_consumed"] = samplesConsumed;
  j["num_samples"] = numSamples;
  j["shuffle"] = shuffle;
  return j.dump();
}

Status DataLoaderState::fromJson(const std::string &text,
                                 DataLoaderState &out) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  auto bad = [](const std::string &what) {
    return Status::error("data loader state: " + what);
  };
  if (!j.is_object())
    return bad("not a JSON object");
  DataLoaderState st;
  auto seed = j.find("seed");
  if (seed == j.end() || !seed->is_string())
    return bad("missing 'seed'");
  const std::string &seedText = seed->get_ref<const std::string &>();
  if (seedText.empty() || seedText.size() > 20 ||
      seedText.find_first_not_of("0123456789") != std::string::npos)
    return bad("'seed' is not a decimal integer");
  st.seed = std::strtoull(seedText.c_str(), nullptr, 10);
  for (auto [key, dst] :
       {std::pair<const char *, int64_t *>{"epoch", &st.epoch},
        {"samples_consumed", &st.samplesConsumed},
        {"num_samples", &st.numSamples}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_number_unsigned() ||
        it->get<uint64_t>() > uint64_t(INT64_MAX))
      return bad(std::string("missing or invalid '") + key + "'");
    *dst = int64_t(it->get<uint64_t>());
  }
  auto shuffle = j.find("shuffle");
  if (shuffle == j.end() || !shuffle->is_boolean())
    return bad("missing 'shuffle'");
  st.shuffle = shuffle->get<bool>();
  out = st;
  return Status::success();
}

//===----------------------------------------------------------------------===//
// Element conversion
//===----------------------------------------------------------------------===//

namespace {

bool isFloat(DType d) {
  return d == DType::F64 || d == DType::F32 || d == DType::F16 ||
         d == DType::BF16;
}
bool isInt(DType d) { return !isFloat(d) && d != DType::Bool; }

/// Whether file elements of type `from` can fill an input of type `to`:
/// numbers widen to f32/f64, integers (and bools) to any integer type (range
/// checked per element), anything else only to itself.
bool canConvert(DType from, DType to) {
  if (from == to)
    return true;
  if (to == DType::F32 || to == DType::F64)
    return from != DType::BF16;
  if (isInt(to))
    return isInt(from) || from == DType::Bool;
  return false;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f,
           mant = h & 0x3ff;
  float mag;
  if (exp == 0)
    mag = std::ldexp(float(mant), -24);
  else if (exp == 31)
    mag = mant ? std::numeric_limits<float>::quiet_NaN()
               : std::numeric_limits<float>::infinity();
  else
    mag = std::ldexp(float(mant | 0x400), int(exp) - 25);
  return sign ? -mag : mag;
}

template <typename T> T load(const uint8_t *p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}
template <typename T> void store(uint8_t *p, T v) {
  std::memcpy(p, &v, sizeof(T));
}

int64_t loadInt(const uint8_t *p, DType d) {
  switch (d) {
  case DType::I64:
    return load<int64_t>(p);
  case DType::I32:
    return load<int32_t>(p);
  case DType::I16:
    return load<int16_t>(p);
  case DType::I8:
    return load<int8_t>(p);
  case DType::U16:
    return load<uint16_t>(p);
  case DType::U8:
    return load<uint8_t>(p);
  case DType::Bool:
    return *p != 0;
  default:
    return 0;
  }
}

double loadFloat(const uint8_t *p, DType d) {
  switch (d) {
  case DType::F64:
    return load<double>(p);
  case DType::F32:
    return load<float>(p);
  case DType::F16:
    return halfToFloat(load<uint16_t>(p));
  default:
    return double(loadInt(p, d));
  }
}

/// Range of integer type `d`.
void intRange(DType d, int64_t &lo, int64_t &hi) {
  switch (d) {
  case DType::I32:
    lo = INT32_MIN, hi = INT32_MAX;
    return;
  case DType::I16:
    lo = INT16_MIN, hi = INT16_MAX;
    return;
  case DType::I8:
    lo = INT8_MIN, hi = INT8_MAX;
    return;
  case DType::U16:
    lo = 0, hi = UINT16_MAX;
    return;
  case DType::U8:
    lo = 0, hi = UINT8_MAX;
    return;
  default:
    lo = INT64_MIN, hi = INT64_MAX;
  }
}

/// Converts `n` elements (canConvert(from, to) holds). Returns the index of
/// the first integer that does not fit `to`, or `n` when all do.
size_t convertElements(const uint8_t *src, DType from, uint8_t *dst, DType to,
                       size_t n) {
  if (from == to) {
    std::memcpy(dst, src, n * dtypeSize(to));
    return n;
  }
  size_t fs = dtypeSize(from), ts = dtypeSize(to);
  if (to == DType::F32) {
    for (size_t i = 0; i < n; ++i)
      store<float>(dst + i * ts, float(loadFloat(src + i * fs, from)));
    return n;
  }
  if (to == DType::F64) {
    for (size_t i = 0; i < n; ++i)
      store<double>(dst + i * ts, loadFloat(src + i * fs, from));
    return n;
  }
  int64_t lo, hi;
  intRange(to, lo, hi);
  for (size_t i = 0; i < n; ++i) {
    int64_t v = loadInt(src + i * fs, from);
    if (v < lo || v > hi)
      return i;
    uint8_t *p = dst + i * ts;
    switch (to) {
    case DType::I64:
      store<int64_t>(p, v);
      break;
    case DType::I32:
      store<int32_t>(p, int32_t(v));
      break;
    case DType::I16:
      store<int16_t>(p, int16_t(v));
      break;
    case DType::U16:
      store<uint16_t>(p, uint16_t(v));
      break;
    default:
      *p = uint8_t(v);
    }
  }
  return n;
}

/// Flat index `flat` of an array of `shape` as "[3, 5]", or "17" for 1-D
/// arrays.
std::string formatIndex(uint64_t flat, const std::vector<int64_t> &shape) {
  if (shape.size() <= 1)
    return std::to_string(flat);
  std::vector<uint64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    uint64_t dim = uint64_t(std::max<int64_t>(shape[d], 1));
    idx[d] = flat % dim;
    flat /= dim;
  }
  std::string out = "[";
  for (size_t d = 0; d < idx.size(); ++d)
    out += (d ? ", " : "") + std::to_string(idx[d]);
  return out + "]";
}


//===----------------------------------------------------------------------===//
// Sample sources
//===----------------------------------------------------------------------===//

class SampleSource {
public:
  virtual ~SampleSource() = default;
  virtual int64_t numSamples() const = 0;
  /// Reads samples `idx[0..n)` into rows 0..n of each buffer in `dst` (one
  /// per batch input, in DataLoaderOptions order).
  virtual Status read(const int64_t *idx, size_t n,
                      const std::vector<uint8_t *> &dst) = 0;
  virtual std::string describe() const = 0;
  /// Tokens per sample for token streams, 0 otherwise.
  virtual int64_t tokensPerSample() const { return 0; }
};

/// One .npy file per batch input.
class ArraySource : public SampleSource {
public:
  struct Input {
    std::string path;
    std::unique_ptr<InputFile> file;
    NpyHeader layout;
    DType to;
    size_t sampleElems;
    std::string name;
  };
  std::vector<Input> inputs;
  int64_t count = 0;
  std::vector<uint8_t> scratch;

  int64_t numSamples() const override { return count; }

  Status read(const int64_t *idx, size_t n,
              const std::vector<uint8_t *> &dst) override {
    constexpr size_t kChunk = 4 << 20;
    for (size_t k = 0; k < inputs.size(); ++k) {
      Input &in = inputs[k];
      size_t srcSample = in.sampleElems * dtypeSize(in.layout.dtype);
      size_t dstSample = in.sampleElems * dtypeSize(in.to);
      size_t maxRun =
          std::max<size_t>(1, kChunk / std::max<size_t>(srcSample, 1));
      for (size_t i = 0; i < n;) {
        // Consecutive samples (always, without shuffling) are one read.
        size_t run = 1;
        while (i + run < n && run < maxRun &&
               idx[i + run] == idx[i] + int64_t(run))
          ++run;
        scratch.resize(run * srcSample);
        if (Status s = in.file->readAt(in.layout.dataOffset +
                                           uint64_t(idx[i]) * srcSample,
                                       scratch.data(), scratch.size());
            !s.ok())
          return s;
        size_t total = run * in.sampleElems;
        size_t done = convertElements(scratch.data(), in.layout.dtype,
                                      dst[k] + i * dstSample, in.to, total);
        if (done != total) {
          uint64_t flat = uint64_t(idx[i]) * in.sampleElems + done;
          int64_t v =
              loadInt(scratch.data() + done * dtypeSize(in.layout.dtype),
                      in.layout.dtype);
          return Status::error(
              in.path + ": value " + std::to_string(v) + " at index " +
              formatIndex(flat, in.layout.shape) + " does not fit input " +
              quote(in.name) + " (" + dtypeName(in.to) + ")");
        }
        // NaN or Inf in the data would make every later step non-finite;
        // name the sample rather than let the loss say it steps later.
        if (in.to == DType::F32 || in.to == DType::F64) {
          const uint8_t *base = dst[k] + i * dstSample;
          for (size_t e = 0; e < total; ++e) {
            double v = in.to == DType::F32
                           ? double(reinterpret_cast<const float *>(base)[e])
                           : reinterpret_cast<const double *>(base)[e];
            if (std::isfinite(v))
              continue;
            int64_t sample = idx[i] + int64_t(e / in.sampleElems);
            uint64_t flat = uint64_t(idx[i]) * in.sampleElems + e;
            return Status::error(
                in.path + ": sample " + std::to_string(sample) + " holds " +
                (std::isnan(v) ? "NaN" : "an infinity") + " at index " +
                formatIndex(flat, in.layout.shape) +
                "; clean the data (training on it would make the loss "
                "non-finite)");
          }
        }
        i += run;
      }
    }
    return Status::success();
  }

  std::string describe() const override {
    std::string out = std::to_string(count) + " samples:";
    for (size_t k = 0; k < inputs.size(); ++k)
      out += std::string(k ? "," : "") + " " + inputs[k].name + " <- " +
             inputs[k].path + " (" + dtypeName(inputs[k].layout.dtype) + " " +
             formatShape(inputs[k].layout.shape) + ")";
    return out;
  }
};

/// Token shards read as one stream of uint16 tokens.
class TokenSource : public SampleSource {
public:
  struct Shard {
    std::string path;
    std::unique_ptr<InputFile> file;
    uint64_t dataStart = 0;
    uint64_t numTokens = 0;
    /// Index of its first token in the stream.
    uint64_t first = 0;
    bool llmc = false;
  };
  std::vector<Shard> shards;
  uint64_t totalTokens = 0;
  int64_t seqLen = 0;
  int64_t numClasses = 0;
  size_t inputIdx = 0, labelsIdx = 1;
  DType inputType = DType::I64, labelsType = DType::I64;
  std::vector<uint16_t> window;

  int64_t tokensPerSample() const override { return seqLen; }
  int64_t numSamples() const override {
    return totalTokens == 0 ? 0 : int64_t((totalTokens - 1) / uint64_t(seqLen));
  }

  /// Reads tokens [start, start + count) of the stream.
  Status readTokens(uint64_t start, size_t count, uint16_t *out) {
    auto it = std::upper_bound(
        shards.begin(), shards.end(), start,
        [](uint64_t v, const Shard &s) { return v < s.first; });
    size_t shard = size_t(it - shards.begin()) - 1;
    while (count > 0) {
      Shard &s = shards[shard];
      uint64_t local = start - s.first;
      size_t take = size_t(std::min<uint64_t>(count, s.numTokens - local));
      if (take > 0) {
        if (Status st = s.file->readAt(s.dataStart + local * 2, out, take * 2);
            !st.ok())
          return st;
        if (numClasses > 0)
          for (size_t j = 0; j < take; ++j)
            if (int64_t(out[j]) >= numClasses)
              return Status::error(
                  s.path + ": token " + std::to_string(out[j]) +
                  " at byte offset " +
                  std::to_string(s.dataStart + (local + j) * 2) + " (token " +
                  std::to_string(local + j) +
                  " of the file) is outside the vocabulary [0, " +
                  std::to_string(numClasses) + ")");
      }
      out += take;
      start += take;
      count -= take;
      ++shard;
    }
    return Status::success();
  }

  Status read(const int64_t *idx, size_t n,
              const std::vector<uint8_t *> &dst) override {
    size_t t = size_t(seqLen);
    window.resize(t + 1);
    for (size_t i = 0; i < n; ++i) {
      if (Status s = readTokens(uint64_t(idx[i]) * t, t + 1, window.data());
          !s.ok())
        return s;
      for (size_t j = 0; j < t; ++j) {
        size_t row = i * t + j;
        if (inputType == DType::I64)
          store<int64_t>(dst[inputIdx] + row * 8, window[j]);
        else
          store<int32_t>(dst[inputIdx] + row * 4, window[j]);
        if (labelsType == DType::I64)
          store<int64_t>(dst[labelsIdx] + row * 8, window[j + 1]);
        else
          store<int32_t>(dst[labelsIdx] + row * 4, window[j + 1]);
      }
    }
    return Status::success();
  }

  std::string describe() const override {
    std::string out = std::to_string(totalTokens) + " tokens in " +
                      std::to_string(shards.size()) + " shard" +
                      (shards.size() == 1 ? "" : "s") + " (" +
                      shards.front().path +
                      (shards.size() > 1 ? " ... " + shards.back().path : "") +
                      "): " + std::to_string(numSamples()) + " windows of " +
                      std::to_string(seqLen) + "+1 tokens";
    return out;
  }
};

constexpr int32_t kLlmcMagic = 20240520;
constexpr uint64_t kLlmcHeaderBytes = 256 * 4;

Status openShard(const std::string &path, TokenSource::Shard &out) {
  out.path = path;
  out.file = std::make_unique<InputFile>();
  if (Status s = out.file->open(path); !s.ok())
    return s;
  uint64_t size = out.file->size();
  int32_t head[3] = {0, 0, 0};
  if (size >= 4)
    if (Status s = out.file->readAt(0, head, size >= 12 ? 12 : 4); !s.ok())
      return s;
  if (head[0] == kLlmcMagic) {
    out.llmc = true;
    if (size < kLlmcHeaderBytes)
      return Status::error(path +
                           ": llm.c token file is truncated inside its " +
                           std::to_string(kLlmcHeaderBytes) + "-byte header");
    if (head[1] != 1)
      return Status::error(path + ": llm.c token file version " +
                           std::to_string(head[1]) +
                           " is not supported (only version 1, uint16 tokens)");
    if (head[2] < 0)
      return Status::error(path +
                           ": llm.c header gives a negative token count");
    out.dataStart = kLlmcHeaderBytes;
    out.numTokens = uint64_t(head[2]);
    uint64_t expect = kLlmcHeaderBytes + 2 * out.numTokens;
    if (size != expect)
      return Status::error(path + ": llm.c header announces " +
                           std::to_string(out.numTokens) + " tokens (" +
                           std::to_string(expect) +
                           " bytes) but the file has " + std::to_string(size) +
                           " bytes" + (size < expect ? " (truncated)" : ""));
    return Status::success();
  }
  // A header laid out as llm.c's (version 1, a token count that matches
  // the size) under another magic number is a damaged or foreign file, not
  // raw tokens that happen to look like one.
  if (size >= kLlmcHeaderBytes && head[1] == 1 && head[2] >= 0 &&
      size == kLlmcHeaderBytes + 2 * uint64_t(head[2]))
    return Status::error(path + ": llm.c token file header has magic number " +
                         std::to_string(head[0]) + ", expected " +
                         std::to_string(kLlmcMagic) +
                         " (the file is damaged or not an llm.c shard)");
  if (size % 2 != 0)
    return Status::error(path + ": raw uint16 token file has an odd size (" +
                         std::to_string(size) + " bytes)");
  out.dataStart = 0;
  out.numTokens = size / 2;
  return Status::success();
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string describeInput(const BatchInputSpec &in) {
  return quote(in.name) + " (" + dtypeName(in.dtype) + " " +
         formatShape(in.shape) + ")";
}

Status openArrays(const DataLoaderOptions &opt,
                  std::unique_ptr<SampleSource> &out) {
  auto src = std::make_unique<ArraySource>();
  for (const BatchInputSpec &spec : opt.inputs) {
    const std::string *path = nullptr;
    for (const auto &[name, p] : opt.arrays)
      if (name == spec.name)
        path = &p;
    if (!path)
      return Status::error("no data file for input " + describeInput(spec));
    ArraySource::Input in;
    in.path = *path;
    in.name = spec.name;
    in.to = spec.dtype;
    in.file = std::make_unique<InputFile>();
    if (Status s = in.file->open(in.path); !s.ok())
      return s;
    if (Status s = readNpyHeader(*in.file, in.path, in.layout); !s.ok())
      return s;
    const std::vector<int64_t> &shape = in.layout.shape;
    std::vector<int64_t> want(spec.shape.begin() + 1, spec.shape.end());
    if (shape.empty())
      return Status::error(in.path + ": a 0-d array has no samples; input " +
                           describeInput(spec) + " needs samples along axis 0");
    std::vector<int64_t> have(shape.begin() + 1, shape.end());
    if (have != want)
      return Status::error(in.path + ": samples have shape " +
                           formatShape(have) + " (array " + formatShape(shape) +
                           ") but input " + describeInput(spec) +
                           " takes samples of shape " + formatShape(want) +
                           " (axis 0 is the batch)");
    if (!canConvert(in.layout.dtype, spec.dtype))
      return Status::error(in.path + ": " + dtypeName(in.layout.dtype) +
                           " data cannot feed input " + describeInput(spec) +
                           (isInt(spec.dtype) ? " (integer inputs need integer "
                                                "data)"
                                              : ""));
    int64_t n = shape[0];
    if (!src->inputs.empty() && n != src->count)
      return Status::error(in.path + " has " + std::to_string(n) +
                           " samples but " + src->inputs[0].path + " has " +
                           std::to_string(src->count) +
                           "; every data file needs the same number");
    src->count = n;
    in.sampleElems = 1;
    for (int64_t d : want)
      in.sampleElems *= size_t(d);

    // Labels are checked up front, a chunk at a time, so a bad label stops
    // the run before training starts rather than at some later step.
    if (spec.name == opt.labelsName && opt.numClasses > 0 &&
        isInt(spec.dtype) &&
        (isInt(in.layout.dtype) || in.layout.dtype == DType::Bool)) {
      size_t es = dtypeSize(in.layout.dtype);
      uint64_t total = uint64_t(n) * in.sampleElems;
      std::vector<uint8_t> buf;
      constexpr uint64_t kChunkElems = 1 << 18;
      for (uint64_t start = 0; start < total; start += kChunkElems) {
        size_t cnt = size_t(std::min(kChunkElems, total - start));
        buf.resize(cnt * es);
        if (Status s = in.file->readAt(in.layout.dataOffset + start * es,
                                       buf.data(), buf.size());
            !s.ok())
          return s;
        for (size_t j = 0; j < cnt; ++j) {
          int64_t v = loadInt(buf.data() + j * es, in.layout.dtype);
          if (v < 0 || v >= opt.numClasses)
            return Status::error(
                in.path + ": label " + std::to_string(v) + " at index " +
                formatIndex(start + j, shape) + " is outside [0, " +
                std::to_string(opt.numClasses) + ") (the model has " +
                std::to_string(opt.numClasses) + " classes)");
        }
      }
    }
    src->inputs.push_back(std::move(in));
  }
  for (const auto &[name, p] : opt.arrays) {
    bool known = false;
    for (const BatchInputSpec &spec : opt.inputs)
      known |= spec.name == name;
    if (!known) {
      std::string names;
      for (const BatchInputSpec &spec : opt.inputs)
        names += (names.empty() ? "" : ", ") + quote(spec.name);
      return Status::error(p + ": the model has no batch input " + quote(name) +
                           " (its batch inputs: " + names + ")");
    }
  }
  out = std::move(src);
  return Status::success();
}

Status openTokens(const DataLoaderOptions &opt,
                  std::unique_ptr<SampleSource> &out) {
  auto src = std::make_unique<TokenSource>();
  auto shapeError = [&]() {
    std::string have;
    for (const BatchInputSpec &in : opt.inputs)
      have += (have.empty() ? "" : ", ") + describeInput(in);
    return Status::error(
        "token data needs a model whose batch inputs are a token tensor and " +
        quote(opt.labelsName) +
        ", both integer with shape [batch, sequence length]; this model "
        "takes " +
        have);
  };
  if (opt.inputs.size() != 2)
    return shapeError();
  src->labelsIdx = opt.inputs[0].name == opt.labelsName ? 0 : 1;
  src->inputIdx = 1 - src->labelsIdx;
  const BatchInputSpec &tok = opt.inputs[src->inputIdx],
                       &lab = opt.inputs[src->labelsIdx];
  auto intType = [](DType d) { return d == DType::I64 || d == DType::I32; };
  if (lab.name != opt.labelsName || tok.shape.size() != 2 ||
      tok.shape != lab.shape || !intType(tok.dtype) || !intType(lab.dtype) ||
      tok.shape[1] <= 0)
    return shapeError();
  src->seqLen = tok.shape[1];
  src->inputType = tok.dtype;
  src->labelsType = lab.dtype;
  src->numClasses = opt.numClasses;
  if (opt.tokenShards.empty())
    return Status::error("no token files given");
  for (const std::string &path : opt.tokenShards) {
    TokenSource::Shard shard;
    if (Status s = openShard(path, shard); !s.ok())
      return s;
    shard.first = src->totalTokens;
    src->totalTokens += shard.numTokens;
    if (shard.numTokens > 0)
      src->shards.push_back(std::move(shard));
  }
  if (src->shards.empty())
    return Status::error(
        opt.tokenShards.front() +
        (opt.tokenShards.size() > 1 ? " and the other shards" : "") +
        ": no tokens");
  out = std::move(src);
  return Status::success();
}

} // namespace

//===----------------------------------------------------------------------===//
// DataLoader
//===----------------------------------------------------------------------===//

struct DataLoader::Impl {
  DataLoaderOptions options;
  std::unique_ptr<SampleSource> source;
  /// Samples in the data set; this rank's batch (the inputs' axis 0); the
  /// global batch, every rank's together, which the order and the state
  /// count in.
  int64_t n = 0, batch = 0, globalBatch = 0;
  std::vector<size_t> sampleBytes;

  // Producer side (background thread only).
  DataLoaderState cursor;
  std::vector<uint32_t> order;
  int64_t orderEpoch = -1;
  std::vector<int64_t> indices;

  // Shared.
  struct Item {
    Batch batch;
    Status status;
  };
  std::mutex mutex;
  std::condition_variable notFull, notEmpty;
  std::deque<Item> queue;
  bool stop = false;
  std::thread thread;

  // Consumer side.
  DataLoaderState consumed;
  Status failed;

  /// Moves to the next epoch once fewer than a batch is left in this one.
  void normalize(DataLoaderState &st) const {
    if (st.samplesConsumed + globalBatch > n) {
      ++st.epoch;
      st.samplesConsumed = 0;
    }
  }

  Status makeBatch(Batch &out) {
    if (options.shuffle && orderEpoch != cursor.epoch) {
      order = epochOrder(cursor.seed, cursor.epoch, uint32_t(n));
      orderEpoch = cursor.epoch;
    }
    indices.resize(size_t(batch));
    // This rank's block of each micro-batch of the global batch (of the
    // whole batch when there is one): the global order does not depend on
    // the number of ranks, so 1 and N ranks see the same batches.
    int64_t k = options.microBatches;
    int64_t rows = batch / k, micro = globalBatch / k;
    for (int64_t j = 0; j < batch; ++j) {
      int64_t pos = cursor.samplesConsumed + (j / rows) * micro +
                    options.rank * rows + j % rows;
      indices[size_t(j)] = options.shuffle ? int64_t(order[size_t(pos)]) : pos;
    }
    out.inputs.clear();
    std::vector<uint8_t *> dst;
    for (size_t k = 0; k < options.inputs.size(); ++k) {
      AlignedBuffer buf;
      if (!buf.allocate(sampleBytes[k] * size_t(batch)))
        return Status::error("out of memory allocating a batch of input " +
                             quote(options.inputs[k].name));
      dst.push_back(buf.data());
      out.inputs.push_back(std::move(buf));
    }
    if (Status s = source->read(indices.data(), indices.size(), dst); !s.ok())
      return s;
    cursor.samplesConsumed += globalBatch;
    normalize(cursor);
    out.stateAfter = cursor;
    return Status::success();
  }

  void produce() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        notFull.wait(lock, [&] {
          return stop || queue.size() < size_t(options.prefetch);
        });
        if (stop)
          return;
      }
      Item item;
#if defined(__cpp_exceptions)
      // An exception must not escape the thread (that would terminate the
      // process); it becomes the batch's error.
      try {
        item.status = makeBatch(item.batch);
      } catch (const std::exception &e) {
        item.status = Status::error(std::string("data loader: ") + e.what());
      }
#else
      item.status = makeBatch(item.batch);
#endif
      bool ok = item.status.ok();
      {
        std::lock_guard<std::mutex> lock(mutex);
        queue.push_back(std::move(item));
      }
      notEmpty.notify_one();
      if (!ok)
        return;
    }
  }
};

DataLoader::DataLoader(std::unique_ptr<Impl> impl) : impl(std::move(impl)) {}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(impl->mutex);
    impl->stop = true;
  }
  impl->notFull.notify_all();
  if (impl->thread.joinable())
    impl->thread.join();
}

Status DataLoader::open(const DataLoaderOptions &options,
                        const DataLoaderState &start,
                        std::unique_ptr<DataLoader> &out) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->options.prefetch = std::max(1, options.prefetch);
  if (options.inputs.empty())
    return Status::error("the model takes no batch inputs");
  if (options.numRanks < 1 || options.rank < 0 ||
      options.rank >= options.numRanks)
    return Status::error("data: rank " + std::to_string(options.rank) +
                         " is not one of " + std::to_string(options.numRanks) +
                         " ranks");
  impl->batch =
      options.inputs[0].shape.empty() ? 0 : options.inputs[0].shape[0];
  for (const BatchInputSpec &in : options.inputs) {
    size_t bytes = 0;
    if (in.shape.empty() || in.shape[0] != impl->batch || impl->batch <= 0 ||
        !computeByteSize(in.dtype, in.shape, bytes))
      return Status::error("input " + describeInput(in) +
                           " has no valid batch axis");
    impl->sampleBytes.push_back(bytes / size_t(impl->batch));
  }
  if (options.microBatches < 1 || impl->batch % options.microBatches != 0)
    return Status::error("data: a batch of " + std::to_string(impl->batch) +
                         " samples is not " +
                         std::to_string(options.microBatches) +
                         " micro-batches");
  impl->globalBatch = impl->batch * options.numRanks;
  bool tokens = !options.tokenShards.empty();
  if (tokens && !options.arrays.empty())
    return Status::error("give either .npy arrays or token files, not both");
  if (Status s = tokens ? openTokens(options, impl->source)
                        : openArrays(options, impl->source);
      !s.ok())
    return s;
  impl->n = impl->source->numSamples();
  if (impl->n < impl->globalBatch)
    return Status::error(
        impl->source->describe() + ": fewer samples than the batch size " +
        std::to_string(impl->globalBatch) +
        (options.numRanks > 1 ? " (" + std::to_string(impl->batch) + " on each of " +
                                    std::to_string(options.numRanks) + " ranks)"
                              : std::string()));
  if (options.shuffle && uint64_t(impl->n) > UINT32_MAX)
    return Status::error(impl->source->describe() +
                         ": too many samples to shuffle (at most 2^32-1)");

  DataLoaderState st = start;
  st.numSamples = impl->n;
  st.shuffle = options.shuffle;
  // A state saved for a larger data set may point past this one's end.
  if (st.samplesConsumed % impl->globalBatch != 0)
    st.samplesConsumed -= st.samplesConsumed % impl->globalBatch;
  impl->normalize(st);
  impl->cursor = st;
  impl->consumed = st;
  Impl *raw = impl.get();
  impl->thread = std::thread([raw] { raw->produce(); });
  out.reset(new DataLoader(std::move(impl)));
  return Status::success();
}

Status DataLoader::next(Batch &out) {
  if (!impl->failed.ok())
    return impl->failed;
  auto t0 = std::chrono::steady_clock::now();
  Impl::Item item;
  {
    std::unique_lock<std::mutex> lock(impl->mutex);
    impl->notEmpty.wait(lock, [&] { return !impl->queue.empty(); });
    item = std::move(impl->queue.front());
    impl->queue.pop_front();
  }
  impl->notFull.notify_one();
  double wait =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
          .count();
  if (!item.status.ok()) {
    impl->failed = item.status;
    return item.status;
  }
  impl->consumed = item.batch.stateAfter;
  out = std::move(item.batch);
  out.waitSeconds = wait;
  return Status::success();
}

DataLoaderState DataLoader::state() const { return impl->consumed; }
int64_t DataLoader::numSamples() const { return impl->n; }
int64_t DataLoader::batchSize() const { return impl->batch; }
int64_t DataLoader::globalBatchSize() const { return impl->globalBatch; }
int64_t DataLoader::batchesPerEpoch() const {
  return impl->n / impl->globalBatch;
}
int64_t DataLoader::tokensPerSample() const {
  return impl->source->tokensPerSample();
}
std::string DataLoader::description() const { return impl->source->describe(); }

//===----------------------------------------------------------------------===//
// Paths
//===----------------------------------------------------------------------===//

Status weft::rt::expandDataPath(const std::string &arg,
                                std::vector<std::string> &out) {
  std::vector<std::string> found;
  if (arg.find_first_of("*?[") != std::string::npos) {
    glob_t g;
    int rc = ::glob(arg.c_str(), 0, nullptr, &g);
    if (rc == 0)
      for (size_t i = 0; i < g.gl_pathc; ++i)
        found.push_back(g.gl_pathv[i]);
    ::globfree(&g);
    if (found.empty())
      return Status::error(arg + ": no files match this pattern");
  } else {
    struct stat st;
    if (::stat(arg.c_str(), &st) != 0)
      return Status::error(arg + ": " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) {
      DIR *dir = ::opendir(arg.c_str());
      if (!dir)
        return Status::error(arg + ": " + std::strerror(errno));
      while (dirent *e = ::readdir(dir)) {
        std::string name = e->d_name;
        if (name.empty() || name[0] == '.' || !endsWith(name, ".bin"))
          continue;
        std::string path = arg + (endsWith(arg, "/") ? "" : "/") + name;
        struct stat fst;
        if (::stat(path.c_str(), &fst) == 0 && S_ISREG(fst.st_mode))
          found.push_back(path);
      }
      ::closedir(dir);
      if (found.empty())
        return Status::error(arg + ": directory holds no .bin token files");
    } else {
      found.push_back(arg);
    }
  }
  std::sort(found.begin(), found.end());
  out.insert(out.end(), found.begin(), found.end());
  return Status::success();
}
