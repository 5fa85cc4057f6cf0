//===- HostArray.h - Dense arrays shared by runtime and tools ---*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// lib/Formats is the only runtime code the compiler links: host arrays,
// dtypes, Status, .npy and safetensors. It knows nothing of MLIR, LLVM, BLAS
// or threads, so the file formats (npy, safetensors) and the ONNX
// initializer reader exchange data through this plain struct. Its types
// live in namespace weft::rt, the runtime's, which uses them everywhere.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_FORMATS_HOSTARRAY_H
#define WEFT_FORMATS_HOSTARRAY_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace weft {
namespace rt {

/// Element types that cross file boundaries.
enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U16, U8, Bool };

/// Size of one element in bytes.
size_t dtypeSize(DType dtype);
/// Short name as numpy / safetensors spell it ("F32", "I64", ...), used in
/// error messages and safetensors headers.
const char *dtypeName(DType dtype);

/// `'name'` with control characters and bytes that are not valid UTF-8
/// escaped as \xNN: names in messages come from files, which may be
/// damaged, and must not reach a terminal raw.
std::string quote(const std::string &name);

/// FNV-1a (64-bit) of `n` bytes, continuing from `hash`: the checksum of
/// checkpoints and of weights files kept beside an executable.
uint64_t fnv1a64(const void *data, size_t n,
                 uint64_t hash = 0xcbf29ce484222325ULL);

/// Error-carrying result: `ok()` or a message that names the file and what is
/// wrong. The runtime is built without exceptions in mind, so errors are
/// values.
struct Status {
  std::string message;
  bool ok() const { return message.empty(); }
  static Status success() { return {}; }
  static Status error(std::string msg) { return {std::move(msg)}; }
};

/// Computes the byte size of a `dtype` array of `shape` into `bytes`. Returns
/// false when a dimension is negative or the size overflows size_t, so readers
/// can reject absurd headers before allocating anything.
bool computeByteSize(DType dtype, const std::vector<int64_t> &shape,
                     size_t &bytes);

/// Formats a shape for error messages: "4x48", or "scalar" for rank 0.
std::string formatShape(const std::vector<int64_t> &shape);

/// A dense row-major array in host memory. `data` holds exactly
/// numElements() * dtypeSize(dtype) bytes in little-endian order.
struct HostArray {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> data;

  int64_t numElements() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
  /// Element `i` converted to double (bf16/f16 widened exactly).
  double getAsDouble(int64_t i) const;
  /// Element `i` converted to int64 (floats truncated toward zero, saturated
  /// to the int64 range; NaN gives 0).
  int64_t getAsInt(int64_t i) const;
  /// Stores `v` into element `i`: floats round to nearest even (bf16 and f16
  /// directly from the double, so there is no double rounding through f32),
  /// integers round toward zero and saturate, Bool stores `v != 0`.
  void setFromDouble(int64_t i, double v);

  /// A zero-filled array (all-zero bits are 0.0 / 0 / false for every dtype).
  static HostArray zeros(DType dtype, std::vector<int64_t> shape);

  /// Checks that the shape is non-negative and `data` holds exactly the bytes
  /// it implies. Writers call this first; the message does not name a file.
  Status checkLayout() const;
};

//===----------------------------------------------------------------------===//
// File helpers shared by the format readers and writers
//===----------------------------------------------------------------------===//

/// A read-only file for bounded random access. The readers check every offset
/// a header claims against size() before reading, so a corrupt file can never
/// make them read or allocate past its end.
class InputFile {
public:
  InputFile() = default;
  InputFile(const InputFile &) = delete;
  InputFile &operator=(const InputFile &) = delete;
  ~InputFile();

  Status open(const std::string &path);
  uint64_t size() const { return fileSize; }
  /// Reads exactly `n` bytes at `offset`; a short read is an error.
  Status readAt(uint64_t offset, void *dst, size_t n) const;

private:
  int fd = -1;
  uint64_t fileSize = 0;
  std::string filePath;
};

/// Writes the concatenation of `pieces` to `path` so that a crash leaves
/// either the old file or the complete new one: the bytes go to
/// `path.tmp.<pid>`, which is fsynced, renamed over `path`, and then the
/// directory is fsynced so the rename itself is durable.
Status
writeFileAtomic(const std::string &path,
                const std::vector<std::pair<const void *, size_t>> &pieces);

} // namespace rt
} // namespace weft

#endif // WEFT_FORMATS_HOSTARRAY_H
