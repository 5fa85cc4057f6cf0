//===- HostArray.h - Dense host arrays shared by runtime and tools -*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The runtime links into every training binary and knows nothing of MLIR or
// LLVM, so its file formats (npy, safetensors) and the ONNX initializer reader
// exchange data through this plain struct.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_HOSTARRAY_H
#define WEFT_RUNTIME_HOSTARRAY_H

#include <cstddef>
#include <cstdint>
#include <string>
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
  /// Element `i` converted to int64 (floats truncated toward zero).
  int64_t getAsInt(int64_t i) const;
};

/// Error-carrying result: `ok()` or a message that names the file and what is
/// wrong. The runtime is built without exceptions in mind, so errors are values.
struct Status {
  std::string message;
  bool ok() const { return message.empty(); }
  static Status success() { return {}; }
  static Status error(std::string msg) { return {std::move(msg)}; }
};

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_HOSTARRAY_H
