//===- Bf16.h - bf16 bits to and from f32 -----------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// bf16 is stored as uint16_t, the upper half of an f32, wherever the runtime
// meets it (GEMM operands and results, attention, checkpoints): the
// conversions every runtime kernel shares, with the step's rounding.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_BF16_H
#define WEFT_RUNTIME_BF16_H

#include <cstdint>
#include <cstring>

namespace weft::rt {

/// f32 to bf16 rounded to nearest, ties to even (as arith.truncf); a NaN
/// stays a (quiet) NaN. Branch-free, so loops over it vectorize.
inline uint16_t floatToBf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  uint32_t rounded = bits + 0x7FFFu + ((bits >> 16) & 1u);
  bool isNan = (bits & 0x7FFFFFFFu) > 0x7F800000u;
  return uint16_t(isNan ? (bits >> 16) | 0x40u : rounded >> 16);
}

/// bf16 to f32: exact (a shift).
inline float bf16ToFloat(uint16_t h) {
  uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

} // namespace weft::rt

#endif // WEFT_RUNTIME_BF16_H
