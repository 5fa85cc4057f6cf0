//===- CudaAttention.cpp - Launching the GPU attention kernels ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The weft_rt_cuda_attention* entry points (Cuda.h) launch the kernels of
// CudaAttention.cu. nvcc builds those into a fatbin that the build embeds
// here (WEFT_CUDA_ATTENTION_FATBIN, a header bin2c writes); it is registered
// and launched through the same mgpu* functions as generated kernels, so it
// loads lazily, raises its shared-memory limit as they do, shows up in
// WEFT_CUDA_PROFILE under its kernels' names, and its errors name them.
// Built without nvcc, the entry points end the process saying so.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Cuda.h"

#include "CudaAttentionLayout.h"
#include "CudaInternal.h"

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#ifdef WEFT_CUDA_ATTENTION_FATBIN
#include WEFT_CUDA_ATTENTION_FATBIN
#endif

using namespace weft::rt::cuda;
namespace layout = weft::rt::cuda::attention;

namespace {

void *attentionModule([[maybe_unused]] const char *call) {
#ifdef WEFT_CUDA_ATTENTION_FATBIN
  static std::once_flag once;
  static void *module = nullptr;
  std::call_once(once, [] {
    module = detail::loadEmbeddedFatbin(weftAttentionFatbin,
                                        sizeof(weftAttentionFatbin));
  });
  return module;
#else
  detail::fatal(call, "this runtime was built without nvcc (the CUDA "
                      "toolkit's compiler), so it has no attention kernels: "
                      "rebuild Weft where /usr/local/cuda/bin/nvcc exists, or "
                      "compile the model with --fused-attention=off");
#endif
}

/// The sizes every kernel takes, checked, and the padded head width that
/// picks its instance.
struct Shape {
  int64_t heads;
  int t, s, d, dv, dp;
};

Shape checkShape(const char *call, int64_t heads, int64_t t, int64_t s,
                 int64_t d, int64_t dv, int elementBytes) {
  auto fail = [&](const std::string &why) { detail::fatal(call, why); };
  if (heads < 0 || t < 0 || s < 1 || d < 1 || dv < 1)
    fail("sizes out of range: heads " + std::to_string(heads) + ", t " +
         std::to_string(t) + ", s " + std::to_string(s) + ", d " +
         std::to_string(d) + ", dv " + std::to_string(dv));
  int64_t widest = d > dv ? d : dv;
  if (widest > layout::maxHeadDim(elementBytes))
    fail("head dimension " + std::to_string(widest) +
         " is over the GPU attention kernels' " +
         std::to_string(layout::maxHeadDim(elementBytes)) + " for " +
         (elementBytes == 4 ? "f32" : "bf16") +
         " operands: compile with --fused-attention=off (attention then "
         "runs as GEMMs and kernels)");
  if (t > INT32_MAX / 2 || s > INT32_MAX / 2)
    fail("sequence length over 2^30");
  int dp = 0;
  for (int candidate : layout::kHeadDims)
    if (!dp && widest <= candidate)
      dp = candidate;
  return {heads, int(t), int(s), int(d), int(dv), dp};
}

enum class Kind { Forward, GradKeys, GradQueries };

/// The instance of `kind` for `elementBytes` and `dp` (CudaAttention.cu's
/// entry points). String literals: mgpuModuleGetFunction keeps the pointer
/// to find the kernel again.
const char *kernelName(Kind kind, int elementBytes, int dp) {
  static const char *const names[3][2][2] = {
      {{"weft_attention_forward_f32_64", "weft_attention_forward_f32_128"},
       {"weft_attention_forward_bf16_64", "weft_attention_forward_bf16_128"}},
      {{"weft_attention_grad_keys_f32_64", "weft_attention_grad_keys_f32_128"},
       {"weft_attention_grad_keys_bf16_64",
        "weft_attention_grad_keys_bf16_128"}},
      {{"weft_attention_grad_queries_f32_64",
        "weft_attention_grad_queries_f32_128"},
       {"weft_attention_grad_queries_bf16_64",
        "weft_attention_grad_queries_bf16_128"}}};
  return names[int(kind)][elementBytes == 4 ? 0 : 1][dp == 64 ? 0 : 1];
}

/// Launches `kind` over heads x (ownRows / 64) blocks, passing the sizes
/// and then `pointers`.
template <size_t N>
void launch(const char *call, Kind kind, const Shape &shape, int64_t ownRows,
            float scale, int32_t causal, int elementBytes,
            const void *(&&pointers)[N]) {
  int blocks = int((ownRows + layout::kRows - 1) / layout::kRows);
  int64_t grid = shape.heads * blocks;
  if (grid == 0)
    return;
  if (grid / shape.heads != blocks || grid > INT32_MAX)
    detail::fatal(call, "too many heads and rows for one launch");
  const char *name = kernelName(kind, elementBytes, shape.dp);
  detail::requireInitialized(call, name);
  void *function = mgpuModuleGetFunction(attentionModule(call), name);
  layout::Layout l = layout::Layout::of(elementBytes, shape.dp);
  using R = layout::RegisterLayout;
  int sharedBytes;
  if (layout::inRegisters(elementBytes, shape.dp))
    sharedBytes = kind == Kind::Forward    ? R::forward
                  : kind == Kind::GradKeys ? R::gradKeys
                                           : R::gradQueries;
  else
    sharedBytes = kind == Kind::Forward    ? l.forward()
                  : kind == Kind::GradKeys ? l.gradKeys()
                                           : l.gradQueries();
  if (sharedBytes > detail::sharedMemoryOptIn())
    detail::fatal(call, std::string(name) + " needs " +
                            std::to_string(sharedBytes) +
                            " bytes of shared memory for head dimension " +
                            std::to_string(shape.dp) + "; this GPU allows " +
                            std::to_string(detail::sharedMemoryOptIn()) +
                            ": compile with --fused-attention=off (attention "
                            "then runs as GEMMs and kernels)");
  int t = shape.t, s = shape.s, d = shape.d, dv = shape.dv;
  void *params[7 + N] = {&t, &s, &d, &dv, &scale, &causal, &blocks};
  for (size_t i = 0; i < N; ++i)
    params[7 + i] = const_cast<void **>(&pointers[i]);
  mgpuLaunchKernel(function, intptr_t(grid), 1, 1, layout::kThreads, 1, 1,
                   sharedBytes, nullptr, params, nullptr, 7 + N);
}

template <typename E>
void forward(const char *call, int64_t heads, int64_t t, int64_t s, int64_t d,
             int64_t dv, float scale, int32_t causal, const E *q, const E *k,
             const E *v, E *out, float *lse) {
  Shape shape = checkShape(call, heads, t, s, d, dv, sizeof(E));
  launch(call, Kind::Forward, shape, t, scale, causal, sizeof(E),
         {q, k, v, out, lse});
}

/// Device memory for D = rowsum(dO * O), one float per query row.
float *rowTermsBuffer(const char *call, int64_t rows) {
  static std::mutex mutex;
  static detail::GrowingBuffer buffer;
  std::lock_guard<std::mutex> lock(mutex);
  return static_cast<float *>(buffer.atLeast(size_t(rows) * sizeof(float), call,
                                             "the attention's row terms"));
}

template <typename E>
void backward(const char *call, int64_t heads, int64_t t, int64_t s, int64_t d,
              int64_t dv, float scale, int32_t causal, const E *dout,
              const E *q, const E *k, const E *v, const E *out,
              const float *lse, E *dq, E *dk, E *dvOut) {
  Shape shape = checkShape(call, heads, t, s, d, dv, sizeof(E));
  int64_t rows = heads * t;
  float *rowD = nullptr;
  if (rows > 0) {
    detail::requireInitialized(call, nullptr);
    rowD = rowTermsBuffer(call, rows);
    constexpr int64_t perBlock = layout::kThreads / 32;
    const char *name = sizeof(E) == 4 ? "weft_attention_row_terms_f32"
                                      : "weft_attention_row_terms_bf16";
    void *function = mgpuModuleGetFunction(attentionModule(call), name);
    int dvInt = int(dv);
    const void *pointers[] = {dout, out, rowD};
    void *params[] = {&rows, &dvInt, const_cast<void **>(&pointers[0]),
                      const_cast<void **>(&pointers[1]),
                      const_cast<void **>(&pointers[2])};
    mgpuLaunchKernel(function, intptr_t((rows + perBlock - 1) / perBlock), 1, 1,
                     layout::kThreads, 1, 1, 0, nullptr, params, nullptr, 5);
  }
  launch(call, Kind::GradKeys, shape, s, scale, causal, sizeof(E),
         {dout, q, k, v, lse, rowD, dk, dvOut});
  launch(call, Kind::GradQueries, shape, t, scale, causal, sizeof(E),
         {dout, q, k, v, lse, rowD, dq});
}

} // namespace

extern "C" void weft_rt_cuda_attention_f32(int64_t heads, int64_t t, int64_t s,
                                           int64_t d, int64_t dv, float scale,
                                           int32_t causal, const float *q,
                                           const float *k, const float *v,
                                           float *out, float *lse) {
  forward("weft_rt_cuda_attention_f32", heads, t, s, d, dv, scale, causal, q, k,
          v, out, lse);
}

extern "C" void weft_rt_cuda_attention_bf16(int64_t heads, int64_t t, int64_t s,
                                            int64_t d, int64_t dv, float scale,
                                            int32_t causal, const uint16_t *q,
                                            const uint16_t *k,
                                            const uint16_t *v, uint16_t *out,
                                            float *lse) {
  forward("weft_rt_cuda_attention_bf16", heads, t, s, d, dv, scale, causal, q,
          k, v, out, lse);
}

extern "C" void weft_rt_cuda_attention_grad_f32(
    int64_t heads, int64_t t, int64_t s, int64_t d, int64_t dv, float scale,
    int32_t causal, const float *dout, const float *q, const float *k,
    const float *v, const float *out, const float *lse, float *dq, float *dk,
    float *dvOut) {
  backward("weft_rt_cuda_attention_grad_f32", heads, t, s, d, dv, scale, causal,
           dout, q, k, v, out, lse, dq, dk, dvOut);
}

extern "C" void weft_rt_cuda_attention_grad_bf16(
    int64_t heads, int64_t t, int64_t s, int64_t d, int64_t dv, float scale,
    int32_t causal, const uint16_t *dout, const uint16_t *q, const uint16_t *k,
    const uint16_t *v, const uint16_t *out, const float *lse, uint16_t *dq,
    uint16_t *dk, uint16_t *dvOut) {
  backward("weft_rt_cuda_attention_grad_bf16", heads, t, s, d, dv, scale,
           causal, dout, q, k, v, out, lse, dq, dk, dvOut);
}
