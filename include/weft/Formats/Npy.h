//===- Npy.h - NumPy .npy reader and writer ---------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Training data and reference outputs arrive as .npy files written by NumPy.
// The reader accepts format versions 1.0, 2.0 and 3.0 with little-endian (or
// byte-order-free) float64/32/16, int64/32/16/8, uint16/8 and bool arrays in C
// order, including 0-d arrays. Anything else, and every kind of damage, is
// reported as a Status naming the file, never a crash.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_FORMATS_NPY_H
#define WEFT_FORMATS_NPY_H

#include "weft/Formats/HostArray.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft {
namespace rt {

/// Reads the .npy file at `path` into `out`. `out` is left untouched on error.
Status readNpy(const std::string &path, HostArray &out);

/// What an .npy header says: the array's element type and shape, and where
/// its data starts; the data runs from there to the end of the file.
struct NpyHeader {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t dataOffset = 0;
};

/// Reads and checks the preamble and header of the open .npy `file` (named
/// `path` in messages) without reading its data. Fails, with readNpy's
/// messages, on everything readNpy refuses, including a data size that does
/// not match the header. `out` is left untouched on error.
Status readNpyHeader(const InputFile &file, const std::string &path,
                     NpyHeader &out);

/// Parses an in-memory .npy image (e.g. a member of an .npz archive).
/// `nameForErrors` stands in for the file name in messages.
Status parseNpy(const uint8_t *bytes, size_t size,
                const std::string &nameForErrors, HostArray &out);

/// Writes `a` to `path` atomically (see writeFileAtomic). BF16 has no NumPy
/// dtype and is refused rather than silently widened.
Status writeNpy(const std::string &path, const HostArray &a);

/// Serializes `a` into an in-memory .npy image, with the same checks as
/// writeNpy.
Status serializeNpy(const HostArray &a, const std::string &nameForErrors,
                    std::vector<uint8_t> &out);

} // namespace rt
} // namespace weft

#endif // WEFT_FORMATS_NPY_H
