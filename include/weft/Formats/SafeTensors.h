//===- SafeTensors.h - safetensors reader and writer ------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Checkpoints use the safetensors format: an 8-byte little-endian header
// length N, N bytes of JSON
//   {"__metadata__": {"k": "v"},
//    "w": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]}, ...}
// padded with spaces to a multiple of 8, then the tensors' bytes. Offsets are
// relative to the end of the header and must tile the buffer exactly.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_FORMATS_SAFETENSORS_H
#define WEFT_FORMATS_SAFETENSORS_H

#include "weft/Formats/HostArray.h"

#include <string>
#include <utility>
#include <vector>

namespace weft {
namespace rt {

/// The contents of a safetensors file. Both lists keep their order: the
/// writer lays tensors out in this order, and the reader returns them in the
/// order the header lists them, so a write/read round trip is the identity
/// and output files are deterministic.
struct SafeTensorsFile {
  std::vector<std::pair<std::string, HostArray>> tensors;
  std::vector<std::pair<std::string, std::string>> metadata;
};

/// Reads and validates the safetensors file at `path`. `out` is left
/// untouched on error.
Status readSafeTensors(const std::string &path, SafeTensorsFile &out);

/// Writes `f` to `path` atomically (see writeFileAtomic). Names and metadata
/// must be valid UTF-8 and unique; no tensor may be called "__metadata__".
Status writeSafeTensors(const std::string &path, const SafeTensorsFile &f);

/// A tensor in memory someone else owns: `bytes` dense bytes at `data`.
struct TensorView {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  const void *data = nullptr;
  size_t bytes = 0;
};

/// A safetensors file as pieces to write in order: the length, the header
/// (owned here) and the tensors' bytes (borrowed from the views), so a
/// large file is written without a copy of its data.
struct SafeTensorsImage {
  uint8_t length[8] = {};
  std::string header;
  std::vector<std::pair<const void *, size_t>> pieces;
};

/// Lays out `metadata` and `tensors` as writeSafeTensors does, with the
/// same checks (and each view's byte count must fit its dtype and shape).
/// `image` must not move while its pieces are in use.
Status encodeSafeTensors(
    const std::vector<std::pair<std::string, std::string>> &metadata,
    const std::vector<TensorView> &tensors, SafeTensorsImage &image);

/// A weights file kept beside an executable records a checksum of every
/// chunk of its data section in its metadata (under these keys: the chunk
/// size in bytes, and the FNV-1a hashes as 16 hex digits each, in order),
/// so a rank that reads a slice checks only the chunks the slice touches.
constexpr uint64_t kWeightsChunkBytes = uint64_t(4) << 20;
constexpr const char *kWeightsChunkBytesKey = "weft.chunk_bytes";
constexpr const char *kWeightsChunkHashesKey = "weft.chunk_fnv1a64";

} // namespace rt
} // namespace weft

#endif // WEFT_FORMATS_SAFETENSORS_H
