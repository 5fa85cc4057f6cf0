//===- DataLoader.h - Training batches from .npy arrays and tokens -*- C++ -*-//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The loader turns files into the compiled step's batch inputs:
//
//  * .npy arrays, one per batch input, samples along axis 0;
//  * token streams (llm.c .bin shards with their 256-int32 header, or raw
//    uint16 nanoGPT .bin files), cut into non-overlapping windows of the
//    compiled sequence length T: sample i is tokens [iT, iT+T) as the input
//    and [iT+1, iT+T+1) as the labels.
//
// Files are read with positioned reads, sample by sample, so their size is
// bounded by the disk, not by memory. Sample order is a pure function of
// (seed, epoch) computed with PRNGs implemented here, so it is the same on
// every platform and standard library, and resuming from a saved
// DataLoaderState yields exactly the batches an uninterrupted run would
// have seen. A background thread keeps a few batches ready.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_DATALOADER_H
#define WEFT_RUNTIME_DATALOADER_H

#include "weft/Runtime/AlignedBuffer.h"
#include "weft/Formats/HostArray.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace weft {
namespace rt {

//===----------------------------------------------------------------------===//
// Deterministic randomness
//===----------------------------------------------------------------------===//

/// SplitMix64 (Steele, Lea, Flood 2014): seeds the generator below.
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next();

private:
  uint64_t state;
};

/// xoshiro256** 1.0 (Blackman, Vigna 2018), seeded through SplitMix64.
class Xoshiro256 {
public:
  explicit Xoshiro256(uint64_t seed);
  uint64_t next();
  /// Uniform in [0, bound) without modulo bias (rejection sampling);
  /// `bound` must be positive.
  uint64_t below(uint64_t bound);

private:
  uint64_t s[4];
};

/// The order in which epoch `epoch` visits samples [0, n): a Fisher-Yates
/// shuffle driven by Xoshiro256 seeded from (seed, epoch).
std::vector<uint32_t> epochOrder(uint64_t seed, int64_t epoch, uint32_t n);

//===----------------------------------------------------------------------===//
// The loader
//===----------------------------------------------------------------------===//

/// Where the loader is in the data: enough to continue exactly. Batches
/// never straddle epochs, so `samplesConsumed` is a multiple of the batch
/// size, and an epoch ends once fewer than a batch of samples is left (the
/// rest of that epoch is dropped).
struct DataLoaderState {
  uint64_t seed = 0;
  int64_t epoch = 0;
  /// Samples of `epoch` already handed out.
  int64_t samplesConsumed = 0;
  /// Informational, for resuming: the data set's size and whether it was
  /// shuffled when the state was saved (0 / true when unknown).
  int64_t numSamples = 0;
  bool shuffle = true;

  /// A JSON object {"seed": ..., "epoch": ..., "samples_consumed": ...,
  /// "num_samples": ..., "shuffle": ...}. The seed is written as a decimal
  /// string, as JSON readers may round integers above 2^53.
  std::string toJson() const;
  static Status fromJson(const std::string &text, DataLoaderState &out);
};

/// A batch input as compiled: axis 0 is the batch.
struct BatchInputSpec {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
};

struct DataLoaderOptions {
  /// The step's batch inputs; batches hold one buffer per entry, in order.
  std::vector<BatchInputSpec> inputs;
  /// Array data: one (input name, .npy path) pair per input...
  std::vector<std::pair<std::string, std::string>> arrays;
  /// ...or token data: shards read as one stream, in this order.
  std::vector<std::string> tokenShards;
  /// The input that holds labels (range-checked; derived from the token
  /// stream for token data).
  std::string labelsName = "labels";
  /// When > 0, integer labels and all tokens must lie in [0, numClasses).
  int64_t numClasses = 0;
  bool shuffle = true;
  /// This rank among the data-parallel ranks: each global batch is
  /// `numRanks` times the inputs' axis 0, in an order that does not depend
  /// on `numRanks`, and this rank reads slice `rank` of it. The state counts
  /// global samples, so a run resumes at another number of ranks.
  int rank = 0, numRanks = 1;
  /// Micro-batches K per global batch (gradient accumulation over a
  /// partitioned step): the global batch is K micro-batches of m rows, and
  /// this rank's batch is, for each k, rows [k m + rank m/R, k m + (rank+1)
  /// m/R) of it, stacked. With K = 1 that is slice `rank` of the batch.
  int64_t microBatches = 1;
  /// Ready batches kept by the background thread.
  int prefetch = 2;
};

/// One batch, ready to be passed to the step.
struct Batch {
  /// One buffer per DataLoaderOptions::inputs entry, shaped as compiled.
  std::vector<AlignedBuffer> inputs;
  /// The loader's state once this batch has been consumed.
  DataLoaderState stateAfter;
  /// How long next() waited for this batch.
  double waitSeconds = 0;
};

class DataLoader {
public:
  /// Opens and checks every file (shapes, dtypes, sample counts, labels),
  /// then starts the prefetch thread at `start`. The seed and position come
  /// from `start`; its numSamples and shuffle fields are ignored.
  static Status open(const DataLoaderOptions &options,
                     const DataLoaderState &start,
                     std::unique_ptr<DataLoader> &out);
  ~DataLoader();

  /// The next batch; blocks until the prefetch thread has one. Read errors
  /// (say, an out-of-range token) are returned here, and again on every
  /// later call.
  Status next(Batch &out);
  /// The state after the last batch next() returned (the start state before
  /// the first).
  DataLoaderState state() const;

  int64_t numSamples() const;
  /// This rank's batch (the inputs' axis 0), and every rank's together.
  int64_t batchSize() const;
  int64_t globalBatchSize() const;
  int64_t batchesPerEpoch() const;
  /// Tokens per sample for token data (T), 0 for arrays.
  int64_t tokensPerSample() const;
  /// One line: what was opened ("60000 samples: input <- x.npy, ...").
  std::string description() const;

  struct Impl;

private:
  explicit DataLoader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl;
};

/// Expands a token data argument into shard paths: a directory gives its
/// `*.bin` files, a pattern with `*`, `?` or `[` the files it matches (both
/// sorted by name, bytewise), anything else the file itself, which must
/// exist.
Status expandDataPath(const std::string &arg, std::vector<std::string> &out);

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_DATALOADER_H
