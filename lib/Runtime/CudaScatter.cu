//===- CudaScatter.cu - Adding rows into a table, in token order ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The embedding gradient: for each token t in order, table[ids[t]] +=
// updates[t]. Each element of the table must see its tokens' additions in
// token order (the CPU's order, so the same bits), which makes one thread
// per column walk every token: on GPT-2 (8192 tokens, 768 columns) that is
// 3.8 ms of dependent loads. Here the tokens are first sorted by (row,
// token) in one block's shared memory, then a block per run of equal rows
// adds that run's updates in token order, a thread per column.
//
//===----------------------------------------------------------------------===//

#include <cstdint>

namespace {

/// ids[t], negative ones counted from the end, clamped into the table (the
/// step's own gather and scatter do the same).
__device__ long long clampRow(long long r, long long rows) {
  if (r < 0)
    r += rows;
  return r < 0 ? 0 : (r > rows - 1 ? rows - 1 : r);
}

} // namespace

/// One block: keys (row << 32 | t) for t < tokens, padded with the largest
/// key to `n` (a power of two), bitonic-sorted in dynamic shared memory
/// (n * 8 bytes), the first `tokens` written to `sorted`.
extern "C" __global__ void weft_scatter_sort_rows(const long long *ids,
                                                  int tokens, int n,
                                                  long long rows,
                                                  unsigned long long *sorted) {
  extern __shared__ unsigned long long keys[];
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    keys[i] = i < tokens ? (unsigned long long)clampRow(ids[i], rows) << 32 |
                               unsigned(i)
                         : ~0ull;
  __syncthreads();
  for (int size = 2; size <= n; size <<= 1)
    for (int stride = size >> 1; stride > 0; stride >>= 1) {
      for (int i = threadIdx.x; i < n / 2; i += blockDim.x) {
        int lo = 2 * stride * (i / stride) + i % stride, hi = lo + stride;
        bool ascending = (lo & size) == 0;
        unsigned long long a = keys[lo], b = keys[hi];
        if ((a > b) == ascending) {
          keys[lo] = b;
          keys[hi] = a;
        }
      }
      __syncthreads();
    }
  for (int i = threadIdx.x; i < tokens; i += blockDim.x)
    sorted[i] = keys[i];
}

namespace {

__device__ float widen(float u) { return u; }
/// A bf16's bits as the f32 it is exactly.
__device__ float widen(unsigned short u) {
  return __uint_as_float(unsigned(u) << 16);
}

/// A block per sorted token; the first of each run of equal rows adds the
/// run's updates into its row in token order, a thread per column.
template <typename U>
__device__ void addRuns(const unsigned long long *sorted, int tokens,
                        float *table, const U *updates, long long cols) {
  int i = blockIdx.x;
  unsigned long long row = sorted[i] >> 32;
  if (i > 0 && sorted[i - 1] >> 32 == row)
    return;
  int end = i + 1;
  while (end < tokens && sorted[end] >> 32 == row)
    ++end;
  float *out = table + row * cols;
  for (long long c = threadIdx.x; c < cols; c += blockDim.x) {
    float acc = out[c];
    for (int j = i; j < end; ++j)
      acc += widen(updates[(sorted[j] & 0xffffffffull) * cols + c]);
    out[c] = acc;
  }
}

} // namespace

extern "C" __global__ void
weft_scatter_add_rows_f32(const unsigned long long *sorted, int tokens,
                          float *table, const float *updates, long long cols) {
  addRuns(sorted, tokens, table, updates, cols);
}

/// The same with bf16 updates, each widened to f32 before its addition.
extern "C" __global__ void
weft_scatter_add_rows_bf16(const unsigned long long *sorted, int tokens,
                           float *table, const unsigned short *updates,
                           long long cols) {
  addRuns(sorted, tokens, table, updates, cols);
}
