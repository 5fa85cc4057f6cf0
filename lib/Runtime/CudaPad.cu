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

template <typename T>
__device__ void padCopy(const T *src, long long srcRows, long long srcCols,
                        long long srcLd, T *dst, long long dstRows,
                        long long dstCols, long long dstLd) {
  long long step = (long long)gridDim.x * blockDim.x;
  for (long long r = blockIdx.y; r < dstRows; r += gridDim.y)
    for (long long c = (long long)blockIdx.x * blockDim.x + threadIdx.x;
         c < dstCols; c += step)
      dst[r * dstLd + c] =
          r < srcRows && c < srcCols ? src[r * srcLd + c] : T(0);
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
