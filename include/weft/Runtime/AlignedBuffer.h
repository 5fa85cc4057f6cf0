//===- AlignedBuffer.h - Zeroed 64-byte aligned host memory -----*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Every buffer the runtime hands a compiled step (arguments, results,
// workspace, batches) is 64-byte aligned, so generated code may use aligned
// vector loads on any of them.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_ALIGNEDBUFFER_H
#define WEFT_RUNTIME_ALIGNEDBUFFER_H

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace weft {
namespace rt {

/// Owning, move-only, zero-filled memory aligned to kAlignment bytes. The
/// allocation is rounded up to a whole number of alignment units (and to at
/// least one), so even an empty buffer has a valid, aligned pointer.
class AlignedBuffer {
public:
  static constexpr size_t kAlignment = 64;

  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer &) = delete;
  AlignedBuffer &operator=(const AlignedBuffer &) = delete;
  AlignedBuffer(AlignedBuffer &&other) noexcept
      : ptr(std::exchange(other.ptr, nullptr)),
        bytes(std::exchange(other.bytes, 0)) {}
  AlignedBuffer &operator=(AlignedBuffer &&other) noexcept {
    if (this != &other) {
      std::free(ptr);
      ptr = std::exchange(other.ptr, nullptr);
      bytes = std::exchange(other.bytes, 0);
    }
    return *this;
  }
  ~AlignedBuffer() { std::free(ptr); }

  /// Replaces the contents with `n` zero bytes. Returns false (leaving the
  /// buffer empty) when the memory cannot be had.
  bool allocate(size_t n) {
    std::free(ptr);
    ptr = nullptr;
    bytes = 0;
    if (n > SIZE_MAX - kAlignment)
      return false;
    size_t rounded =
        (std::max<size_t>(n, 1) + kAlignment - 1) / kAlignment * kAlignment;
    ptr = static_cast<uint8_t *>(std::aligned_alloc(kAlignment, rounded));
    if (!ptr)
      return false;
    std::memset(ptr, 0, rounded);
    bytes = n;
    return true;
  }

  uint8_t *data() { return ptr; }
  const uint8_t *data() const { return ptr; }
  /// The size asked for (the allocation may be larger).
  size_t size() const { return bytes; }
  void swap(AlignedBuffer &other) {
    std::swap(ptr, other.ptr);
    std::swap(bytes, other.bytes);
  }

private:
  uint8_t *ptr = nullptr;
  size_t bytes = 0;
};

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_ALIGNEDBUFFER_H
