//===- BufferPlace.h - Where a step's buffer lives ---------------*- C++
//-*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// What passes on planned buffers ask before they let one op write a buffer
// while it reads another (--weft-mark-disjoint-args, and on GPUs
// --weft-gpu-gemm-epilogue): whether the two can share memory.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_CODEGEN_BUFFERPLACE_H
#define WEFT_CODEGEN_BUFFERPLACE_H

#include <cstdint>

namespace weft {

/// Where a buffer lives: an allocation and, when known, a byte range in it.
struct BufferPlace {
  /// The step's arguments other than the workspace: callers may pass
  /// overlapping buffers.
  static constexpr int64_t kExternal = 1;
  /// The workspace, whose views the buffer planner placed.
  static constexpr int64_t kWorkspace = 2;

  /// 0: unknown (may be anywhere); kExternal; kWorkspace; above: one
  /// allocation or global each.
  int64_t root = 0;
  int64_t offset = -1, size = -1;

  /// Whether no byte of one can be a byte of the other.
  bool disjointFrom(const BufferPlace &o) const {
    if (root == 0 || o.root == 0)
      return false;
    if (root != o.root)
      return true;
    if (root == kExternal || offset < 0 || size < 0 || o.offset < 0 ||
        o.size < 0)
      return false;
    return offset + size <= o.offset || o.offset + o.size <= offset;
  }
};

} // namespace weft

#endif // WEFT_CODEGEN_BUFFERPLACE_H
