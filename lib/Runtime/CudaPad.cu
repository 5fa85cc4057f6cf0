//===- CudaPad.cu - A matrix copied into a wider one, zeros around it -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// cuBLASLt runs GEMMs several times slower at a dimension like GPT-2's
// vocabulary, 50257, than at the next multiple of 64 (bench/RESULTS.md,
// "the logits GEMMs"). CudaBlas.cpp pads such a GEMM: its operands copied
// into scratch matrices with zero rows and columns around them, and the
// product's block copied back out. One kernel does both copies: dst[r][c]
// = src[r][c] inside src, 0 outside.
//
//===----------------------------------------------------------------------===//

namespace {

/// Whether every row of a matrix at `p` with row stride `ld` elements
/// starts on a 16-byte boundary.
template <typename T> __device__ bool rowsAligned(const T *p, long long ld) {
  return reinterpret_cast<unsigned long long>(p) % 16 == 0 &&
         (ld * (long long)sizeof(T)) % 16 == 0;
}

/// Each thread moves 16 bytes of a row: one vector load where the source's
/// rows are 16-byte aligned and one vector store where the destination's
/// are, element by element otherwise. The padded side of a copy always is
/// (its stride a multiple of 64 elements, scratch from cuMemAlloc); GPT-2's
/// 50257-wide side is not. An element per thread, as before, ran at a
/// third of the device's bandwidth (1.4 ms for a 50304 x 8192 bf16 copy on
/// an H200).
template <typename T>
__device__ void padCopy(const T *src, long long srcRows, long long srcCols,
                        long long srcLd, T *dst, long long dstRows,
                        long long dstCols, long long dstLd) {
  constexpr int kVec = 16 / sizeof(T);
  union Chunk {
    uint4 v;
    T e[kVec];
  };
  bool loadVec = rowsAligned(src, srcLd), storeVec = rowsAligned(dst, dstLd);
  long long chunks = (dstCols + kVec - 1) / kVec;
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long r = blockIdx.y; r < dstRows; r += gridDim.y) {
    const T *from = src + r * srcLd;
    T *to = dst + r * dstLd;
    long long cols = r < srcRows ? srcCols : 0;
    for (long long g = (long long)blockIdx.x * blockDim.x + threadIdx.x;
         g < chunks; g += step) {
      long long c = g * kVec;
      Chunk x;
      if (loadVec && c + kVec <= cols) {
        x.v = *reinterpret_cast<const uint4 *>(from + c);
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          x.e[j] = c + j < cols ? from[c + j] : T(0);
      }
      if (storeVec && c + kVec <= dstCols) {
        *reinterpret_cast<uint4 *>(to + c) = x.v;
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          if (c + j < dstCols)
            to[c + j] = x.e[j];
      }
    }
  }
}

} // namespace

/// 2-byte elements (bf16).
extern "C" __global__ void
weft_pad_copy_16(const unsigned short *src, long long srcRows,
                 long long srcCols, long long srcLd, unsigned short *dst,
                 long long dstRows, long long dstCols, long long dstLd) {
  padCopy(src, srcRows, srcCols, srcLd, dst, dstRows, dstCols, dstLd);
}

/// 4-byte elements (f32).
extern "C" __global__ void
weft_pad_copy_32(const unsigned *src, long long srcRows, long long srcCols,
                 long long srcLd, unsigned *dst, long long dstRows,
                 long long dstCols, long long dstLd) {
  padCopy(src, srcRows, srcCols, srcLd, dst, dstRows, dstCols, dstLd);
}
