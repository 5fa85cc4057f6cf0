//===- CudaAttentionLayout.h - Shared memory of the attention kernels -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The tile sizes and shared-memory layout of the GPU attention kernels
// (CudaAttention.cu), in one place for the kernels and for the host code
// that launches them (CudaAttention.cpp) and must ask for the same number
// of bytes. Plain constexpr C++: nvcc and g++ both compile it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_RUNTIME_CUDAATTENTIONLAYOUT_H
#define WEFT_LIB_RUNTIME_CUDAATTENTIONLAYOUT_H

namespace weft::rt::cuda::attention {

/// Rows a block owns (queries of the forward and dQ kernels, keys of the dK/dV
/// kernel) and rows of the other side it meets per step. Equal, so that a
/// causal key block starts exactly at a query block's start.
constexpr int kRows = 64;
constexpr int kThreads = 128; ///< Four warps of 16 rows each.
/// Head dimensions are padded up to one of these (the kernels' template
/// argument); larger heads are refused. f32 operands stop at 64: at 128 the
/// dK/dV kernel's tiles (170 KB) pass an A100's 163 KB.
constexpr int kHeadDims[] = {64, 128};
constexpr int maxHeadDim(int elementBytes) {
  return elementBytes == 4 ? 64 : 128;
}

/// Leading dimensions in elements. Tiles of operands (2- or 4-byte
/// elements) are padded by 16 bytes, f32 tiles by 4 elements: WMMA wants
/// multiples of 16 bytes, and the offset rows spread over the banks.
constexpr int operandLd(int width, int elementBytes) {
  return width + 16 / elementBytes;
}
constexpr int floatLd(int width) { return width + 4; }

/// Bytes of `rows` x `ld` elements, rounded up to 128 so that every tile
/// starts 128-byte aligned (WMMA loads want 32).
constexpr int tileBytes(int ld, int elementBytes) {
  return (kRows * ld * elementBytes + 127) / 128 * 128;
}

/// The three kernels' tiles, in the order they are laid out. `e` is the
/// element size of the operands (4: f32, 2: bf16); `dp` the padded head
/// dimension. A probabilities tile holds operands (P, dS); with f32 operands
/// the forward's P overwrites the scores in place, and so does the
/// backward's dS overwrite dP, which leaves out one tile each.
struct Layout {
  int e, operand, scores, probs, accum, rowStats;
  static constexpr Layout of(int e, int dp) {
    return {e,
            tileBytes(operandLd(dp, e), e),
            tileBytes(floatLd(kRows), 4),
            tileBytes(operandLd(kRows, e), e),
            tileBytes(floatLd(dp), 4),
            kRows * 4};
  }
  /// Bytes of the tiles that are separate only with narrow operands.
  constexpr int narrowOnly() const { return e == 4 ? 0 : probs; }
  /// Q, K, V; the scores; P; the output; max, sum, rescale.
  constexpr int forward() const {
    return 3 * operand + scores + narrowOnly() + accum + 3 * rowStats;
  }
  /// K, V, Q, dO; the scores, then dP; P; dS; lse, D. (dK and dV are in
  /// registers, staged through the operand tiles at the end.)
  constexpr int gradKeys() const {
    return 4 * operand + scores + probs + narrowOnly() + 2 * rowStats;
  }
  /// Q, dO, K, V; the scores, then dP; P; dS; lse, D (dQ as dK above).
  constexpr int gradQueries() const { return gradKeys(); }
};

/// bf16 heads up to 64 wide run kernels whose products stay in registers
/// (mma.sync fragments, CudaAttention.cu's `mma`): shared memory holds only
/// 64-row tiles of operands, [64][kLd] bf16, the other side's in two stages.
struct RegisterLayout {
  static constexpr int kLd = operandLd(64, 2);
  static constexpr int kTile = kRows * kLd * 2;
  /// Q; K and V twice.
  static constexpr int forward = 5 * kTile;
  /// K, V; Q and dO twice; lse and D twice.
  static constexpr int gradKeys = 6 * kTile + 4 * kRows * 4;
  /// Q, dO; K and V twice.
  static constexpr int gradQueries = 6 * kTile;
};
constexpr bool inRegisters(int elementBytes, int dp) {
  return elementBytes == 2 && dp == 64;
}

} // namespace weft::rt::cuda::attention

#endif // WEFT_LIB_RUNTIME_CUDAATTENTIONLAYOUT_H
