//===- CudaMeshCollectives.cpp - A mesh's collectives on NCCL -------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The `weft_rt_cuda_*` collectives a --target cuda step calls in place of
// MeshCollectives.cpp's (GpuMapStep maps the names), on device buffers.
//
// Each mesh-axis group gets a NCCL communicator on this rank's GPU at its
// first collective: every rank of the group reaches that collective in the
// same order, so the groups meet as they do on the host, in the store the
// gloo groups met in (AxisGroup::store), under the group's own prefix.
//
// Nothing waits on the host. A collective is queued on the communicator's
// stream behind what the step stream has queued (DeviceQueue::follow); a
// plain collective makes the step stream wait for it at once (join), as
// the host versions return only once it is done. A bucket's collective
// starts when its last member is in and is joined only where a member's
// result is first read, so the step's backward kernels run while the
// gradients of the layers after them travel. The trainer waits for the
// groups' streams once a step, through RuntimeContext::
// finishDeviceCollectives, which turns a dead peer into an error after the
// mesh's timeout rather than a hang.
//
// Layouts are the host's: where a split dim has dims before it, blocks are
// regrouped with strided device copies (BlockCopy) on the step stream.
//
//===----------------------------------------------------------------------===//

#include "CudaInternal.h"
#include "MeshInternal.h"

#include "weft/Runtime/Collectives.h"
#include "weft/Runtime/Cuda.h"

#ifdef WEFT_HAVE_NCCL
#include <cuda_runtime.h>
#endif

#include <cstdint>
#include <string>
#include <vector>

using namespace weft::rt;
using detail::bucketWhat;
using detail::kAllGather;
using detail::kAllReduce;
using detail::kReduceScatter;
using detail::meshCheck;
using detail::meshDie;

namespace {

#ifdef WEFT_HAVE_NCCL

/// A group's communicator on this GPU and the device memory its
/// collectives use.
struct NcclGroup : DeviceGroup {
  std::unique_ptr<Communicator> comm;
  DeviceQueue *queue = nullptr;
  /// Regrouped blocks in front of or behind a collective.
  cuda::detail::GrowingBuffer scratch;
  struct Bucket {
    cuda::detail::GrowingBuffer data, result;
    int64_t kind = 0, region = 0;
    /// Whether a member was put since the last start, and whether the
    /// collective is queued and not yet joined.
    bool filled = false, inFlight = false;
    /// Elements of the members' buffer (a reduce-scatter's holds every
    /// rank's block) and of the result (an all-gather's every rank's);
    /// an all-reduce's result is its buffer.
    size_t dataElements(size_t ranks) const {
      return (kind == kReduceScatter ? ranks : 1) * size_t(region);
    }
    size_t resultElements(size_t ranks) const {
      return (kind == kAllGather ? ranks : 1) * size_t(region);
    }
  };
  std::vector<Bucket> buckets;

  Status finish() override { return queue->finish(); }
};

/// The group of `axisMask`, with its NCCL communicator (made on first use).
NcclGroup &deviceGroupOf(const WeftRuntimeContext *ctx, const char *what,
                         int64_t axisMask) {
  AxisGroup &group = detail::meshGroup(ctx, what, axisMask);
  if (group.device)
    return static_cast<NcclGroup &>(*group.device);
  if (ctx->deviceType != WEFT_DEVICE_CUDA || !ctx->stream)
    meshDie(ctx, what, axisMask,
            "the step runs on a GPU but the runtime context has no CUDA "
            "device");
  if (!group.store)
    meshDie(ctx, what, axisMask,
            "the group did not meet in a store (RuntimeContext::joinMesh)");
  auto device = std::make_unique<NcclGroup>();
  // "weft/axis/dp/0" met on gloo; its NCCL id lives beside it.
  if (Status s = createNcclCommunicator(
          *group.store, group.prefix + "/nccl", group.comm->rank(),
          group.comm->size(), ctx->deviceIndex, group.timeout, device->comm);
      !s.ok())
    meshDie(ctx, what, axisMask, s.message);
  device->queue = device->comm->deviceQueue();
  group.device = std::move(device);
  return static_cast<NcclGroup &>(*group.device);
}

/// Queues `blocks` from `src` to `dst` (device memory) on the step stream.
void copyBlocksOnDevice(const WeftRuntimeContext *ctx, const char *what,
                        int64_t axisMask, const RankBlocks &blocks,
                        const float *src, float *dst) {
  auto stream = static_cast<cudaStream_t>(ctx->stream);
  for (size_t g = 0; g < blocks.n; ++g) {
    BlockCopy c = blocks.copy(g);
    if (c.width == 0 || c.height == 0)
      continue;
    cudaError_t e = cudaMemcpy2DAsync(
        dst + c.dstOffset, c.dstPitch * sizeof(float), src + c.srcOffset,
        c.srcPitch * sizeof(float), c.width * sizeof(float), c.height,
        cudaMemcpyDeviceToDevice, stream);
    if (e != cudaSuccess)
      meshDie(ctx, what, axisMask,
              std::string("regrouping its blocks on the GPU failed (") +
                  cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")");
  }
  cuda::detail::noteQueued(what, "regrouped blocks");
}

float *scratchOf(NcclGroup &group, size_t elements, const char *what) {
  return static_cast<float *>(
      group.scratch.atLeast(elements * sizeof(float), what, "scratch"));
}

/// Queues one collective behind the step's work and makes the step wait
/// for it.
template <typename Queue>
void runJoined(const WeftRuntimeContext *ctx, const char *what,
               int64_t axisMask, NcclGroup &group, Queue &&queue) {
  meshCheck(ctx, what, axisMask, group.queue->follow(ctx->stream));
  meshCheck(ctx, what, axisMask, queue());
  meshCheck(ctx, what, axisMask, group.queue->join(ctx->stream));
  cuda::detail::noteQueued(what, "NCCL");
}

/// Page-locked host memory (cuda::allocatePinned) of at least `elements`
/// floats that a pipeline transfer passes through: one buffer, as the
/// step's transfers run one at a time on its thread, grown as needed and
/// kept for the process's life (released at exit by the driver, not by a
/// static destructor running after it).
float *hostStage(const WeftRuntimeContext *ctx, const char *what,
                 int64_t axisMask, size_t elements) {
  static void *data = nullptr;
  static size_t capacity = 0;
  if (elements <= capacity)
    return static_cast<float *>(data);
  // The last transfer's copy was waited for: nothing uses the old buffer.
  cuda::releasePinned(data);
  data = nullptr;
  capacity = 0;
  meshCheck(ctx, what, axisMask,
            cuda::allocatePinned(elements * sizeof(float), &data));
  capacity = elements;
  return static_cast<float *>(data);
}

/// Copies between the step's device buffer and the host stage on the step
/// stream, after what it queued, and waits for the copy: the stage is
/// reused by the next transfer, and the host side of a send reads it next.
void copyThroughStage(const WeftRuntimeContext *ctx, const char *what,
                      int64_t axisMask, void *dst, const void *src,
                      size_t bytes, cudaMemcpyKind kind) {
  auto stream = static_cast<cudaStream_t>(ctx->stream);
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, kind, stream);
  if (e == cudaSuccess)
    e = cudaStreamSynchronize(stream);
  if (e != cudaSuccess)
    meshDie(ctx, what, axisMask,
            std::string("copying the transfer's ") + std::to_string(bytes) +
                " bytes " + (kind == cudaMemcpyDeviceToHost ? "off" : "onto") +
                " the GPU failed (" + cudaGetErrorName(e) + ": " +
                cudaGetErrorString(e) + ")");
}

#endif // WEFT_HAVE_NCCL

} // namespace

#ifdef WEFT_HAVE_NCCL

// A pipeline's sends and receives go through the host: the step's data is
// copied into pinned memory and travels as the CPU's does (gloo, the send
// thread, receives posted ahead: MeshCollectives.cpp), so the host checks
// and timeouts hold, and two stages may share a GPU. Each transfer waits
// for the step stream: the stages' steps still overlap each other, but a
// stage's kernels do not overlap its own transfers (NCCL's send and recv
// on a stream of their own would; not done yet).
extern "C" void weft_rt_cuda_send_f32(const WeftRuntimeContext *ctx,
                                      int64_t axisMask, const float *in,
                                      int64_t count, int64_t peer,
                                      int64_t tag) {
  if (count < 0)
    meshDie(ctx, "send", axisMask, "negative element count");
  float *stage = hostStage(ctx, "send", axisMask, size_t(count));
  copyThroughStage(ctx, "send", axisMask, stage, in,
                   size_t(count) * sizeof(float), cudaMemcpyDeviceToHost);
  // The host send takes its own copy before it returns.
  weft_rt_send_f32(ctx, axisMask, stage, count, peer, tag);
}

extern "C" void weft_rt_cuda_recv_f32(const WeftRuntimeContext *ctx,
                                      int64_t axisMask, float *out,
                                      int64_t count, int64_t peer,
                                      int64_t tag) {
  if (count < 0)
    meshDie(ctx, "recv", axisMask, "negative element count");
  float *stage = hostStage(ctx, "recv", axisMask, size_t(count));
  weft_rt_recv_f32(ctx, axisMask, stage, count, peer, tag);
  copyThroughStage(ctx, "recv", axisMask, out, stage,
                   size_t(count) * sizeof(float), cudaMemcpyHostToDevice);
}

extern "C" void weft_rt_cuda_all_reduce_f32(const WeftRuntimeContext *ctx,
                                            int64_t axisMask, const float *in,
                                            float *out, int64_t count) {
  NcclGroup &group = deviceGroupOf(ctx, "all_reduce", axisMask);
  runJoined(ctx, "all_reduce", axisMask, group, [&] {
    return group.queue->queueAllReduceSum(in, out, size_t(count));
  });
}

extern "C" void weft_rt_cuda_all_gather_f32(const WeftRuntimeContext *ctx,
                                            int64_t axisMask, const float *in,
                                            float *out, int64_t outer,
                                            int64_t inner) {
  const char *what = "all_gather";
  NcclGroup &group = deviceGroupOf(ctx, what, axisMask);
  size_t n = size_t(group.comm->size()), block = size_t(outer) * size_t(inner);
  if (outer == 1) {
    runJoined(ctx, what, axisMask, group,
              [&] { return group.queue->queueAllGather(in, block, out); });
    return;
  }
  // NCCL gathers whole buffers in rank order ([g][o][i]); the gathered dim
  // is inside, so interleave ([o][g][i]).
  float *gathered = scratchOf(group, n * block, what);
  runJoined(ctx, what, axisMask, group,
            [&] { return group.queue->queueAllGather(in, block, gathered); });
  copyBlocksOnDevice(
      ctx, what, axisMask,
      RankBlocks{n, size_t(outer), size_t(inner), block, false}, gathered,
      out);
}

extern "C" void weft_rt_cuda_reduce_scatter_f32(const WeftRuntimeContext *ctx,
                                                int64_t axisMask,
                                                const float *in, float *out,
                                                int64_t outer, int64_t inner) {
  const char *what = "reduce_scatter";
  NcclGroup &group = deviceGroupOf(ctx, what, axisMask);
  size_t n = size_t(group.comm->size()), block = size_t(outer) * size_t(inner);
  const float *blocks = in;
  if (outer != 1) {
    float *grouped = scratchOf(group, n * block, what);
    copyBlocksOnDevice(
        ctx, what, axisMask,
        RankBlocks{n, size_t(outer), size_t(inner), block, true}, in,
        grouped);
    blocks = grouped;
  }
  runJoined(ctx, what, axisMask, group, [&] {
    return group.queue->queueReduceScatterSum(blocks, block, out);
  });
}

extern "C" void weft_rt_cuda_all_to_all_f32(const WeftRuntimeContext *ctx,
                                            int64_t axisMask, const float *in,
                                            float *out, int64_t splitOuter,
                                            int64_t splitInner,
                                            int64_t concatOuter,
                                            int64_t concatInner) {
  const char *what = "all_to_all";
  NcclGroup &group = deviceGroupOf(ctx, what, axisMask);
  detail::meshCheckAllToAll(ctx, axisMask, splitOuter, splitInner, concatOuter,
                            concatInner);
  size_t n = size_t(group.comm->size()),
         block = size_t(splitOuter) * size_t(splitInner);
  // One scratch holds both regrouped sides: sent blocks, then received.
  bool regroupIn = splitOuter != 1, regroupOut = concatOuter != 1;
  float *scratch =
      regroupIn || regroupOut ? scratchOf(group, 2 * n * block, what) : nullptr;
  const float *send = in;
  if (regroupIn) {
    copyBlocksOnDevice(
        ctx, what, axisMask,
        RankBlocks{n, size_t(splitOuter), size_t(splitInner), block, true},
        in, scratch);
    send = scratch;
  }
  float *receive = regroupOut ? scratch + n * block : out;
  runJoined(ctx, what, axisMask, group,
            [&] { return group.queue->queueAllToAll(send, block, receive); });
  if (regroupOut)
    copyBlocksOnDevice(ctx, what, axisMask,
                       RankBlocks{n, size_t(concatOuter),
                                              size_t(concatInner), block, false},
                       receive, out);
}

extern "C" void weft_rt_cuda_bucket_put_f32(const WeftRuntimeContext *ctx,
                                            int64_t axisMask, int64_t id,
                                            int64_t kind, int64_t region,
                                            int64_t offset, const float *in,
                                            int64_t outer, int64_t inner) {
  NcclGroup &group = deviceGroupOf(ctx, "bucket", axisMask);
  NcclGroup::Bucket &bucket = detail::meshBucket(ctx, axisMask, group.buckets, id);
  const char *what = bucketWhat(kind);
  detail::meshCheckBucketPut(ctx, axisMask, id, bucket.inFlight, kind, region,
                             offset, outer, inner);
  // A reduce-scatter's input holds every rank's block; the others' only
  // this rank's.
  size_t n = kind == kReduceScatter ? size_t(group.comm->size()) : 1;
  bucket.kind = kind;
  bucket.region = region;
  bucket.filled = true;
  auto *data = static_cast<float *>(bucket.data.atLeast(
      bucket.dataElements(size_t(group.comm->size())) * sizeof(float), what, "bucket"));
  copyBlocksOnDevice(
      ctx, what, axisMask,
      RankBlocks{n, size_t(outer), size_t(inner), size_t(region), true}, in,
      data + offset);
}

extern "C" void weft_rt_cuda_bucket_start(const WeftRuntimeContext *ctx,
                                          int64_t axisMask, int64_t id,
                                          int64_t kind, int64_t region) {
  NcclGroup &group = deviceGroupOf(ctx, "bucket", axisMask);
  NcclGroup::Bucket &bucket = detail::meshBucket(ctx, axisMask, group.buckets, id);
  const char *what = bucketWhat(kind);
  size_t n = size_t(group.comm->size());
  detail::meshCheckBucketStart(ctx, axisMask, id, kind,
                               !bucket.inFlight && bucket.filled &&
                                   bucket.region == region &&
                                   bucket.kind == kind);
  auto *data = static_cast<float *>(bucket.data.ptr);
  meshCheck(ctx, what, axisMask, group.queue->follow(ctx->stream));
  auto *result = static_cast<float *>(
      kind == kAllReduce
          ? data
          : bucket.result.atLeast(bucket.resultElements(n) * sizeof(float),
                                  what, "bucket result"));
  Status s = kind == kReduceScatter
                 ? group.queue->queueReduceScatterSum(data, size_t(region),
                                                      result)
             : kind == kAllGather
                 ? group.queue->queueAllGather(data, size_t(region), result)
                 : group.queue->queueAllReduceSum(data, result,
                                                  size_t(region));
  meshCheck(ctx, what, axisMask, s);
  bucket.filled = false;
  bucket.inFlight = true;
}

extern "C" void weft_rt_cuda_bucket_get_f32(const WeftRuntimeContext *ctx,
                                            int64_t axisMask, int64_t id,
                                            int64_t offset, float *out,
                                            int64_t outer, int64_t inner) {
  NcclGroup &group = deviceGroupOf(ctx, "bucket", axisMask);
  NcclGroup::Bucket &bucket = detail::meshBucket(ctx, axisMask, group.buckets, id);
  const char *what = bucketWhat(bucket.kind);
  // The first member read waits for the bucket; the rest are behind it.
  if (bucket.inFlight) {
    meshCheck(ctx, what, axisMask, group.queue->join(ctx->stream));
    cuda::detail::noteQueued(what, "NCCL");
    bucket.inFlight = false;
  }
  size_t n = size_t(group.comm->size());
  size_t block = size_t(outer) * size_t(inner);
  bool gather = bucket.kind == kAllGather;
  const auto *from = static_cast<const float *>(
      bucket.kind == kAllReduce ? bucket.data.ptr : bucket.result.ptr);
  size_t region = size_t(bucket.region);
  detail::meshCheckBucketGet(ctx, axisMask, id, bucket.kind,
                             from && !bucket.filled, offset, outer, inner,
                             region);
  // Rank g's block sits at g * region of a gathered result.
  copyBlocksOnDevice(
      ctx, what, axisMask,
      gather ? RankBlocks{n, size_t(outer), size_t(inner), region, false}
             : RankBlocks{1, 1, block, block, true},
      from + offset, out);
}

#else // !WEFT_HAVE_NCCL

namespace {
[[noreturn]] void noNccl(const WeftRuntimeContext *ctx, const char *what,
                         int64_t axisMask) {
  meshDie(ctx, what, axisMask,
          "this runtime was built without NCCL, which a --target cuda step "
          "on a mesh needs (rebuild Weft with the CUDA toolkit and NCCL "
          "under /usr/local/cuda)");
}
} // namespace

extern "C" void weft_rt_cuda_all_reduce_f32(const WeftRuntimeContext *ctx,
                                            int64_t axisMask, const float *,
                                            float *, int64_t) {
  noNccl(ctx, "all_reduce", axisMask);
}
extern "C" void weft_rt_cuda_all_gather_f32(const WeftRuntimeContext *ctx,
                                            int64_t axisMask, const float *,
                                            float *, int64_t, int64_t) {
  noNccl(ctx, "all_gather", axisMask);
}
extern "C" void weft_rt_cuda_reduce_scatter_f32(const WeftRuntimeContext *ctx,
                                                int64_t axisMask, const float *,
                                                float *, int64_t, int64_t) {
  noNccl(ctx, "reduce_scatter", axisMask);
}
extern "C" void weft_rt_cuda_all_to_all_f32(const WeftRuntimeContext *ctx,
                                            int64_t axisMask, const float *,
                                            float *, int64_t, int64_t, int64_t,
                                            int64_t) {
  noNccl(ctx, "all_to_all", axisMask);
}
extern "C" void weft_rt_cuda_bucket_put_f32(const WeftRuntimeContext *ctx,
                                            int64_t axisMask, int64_t, int64_t,
                                            int64_t, int64_t, const float *,
                                            int64_t, int64_t) {
  noNccl(ctx, "bucket", axisMask);
}
extern "C" void weft_rt_cuda_bucket_start(const WeftRuntimeContext *ctx,
                                          int64_t axisMask, int64_t, int64_t,
                                          int64_t) {
  noNccl(ctx, "bucket", axisMask);
}
extern "C" void weft_rt_cuda_bucket_get_f32(const WeftRuntimeContext *ctx,
                                            int64_t axisMask, int64_t, int64_t,
                                            float *, int64_t, int64_t) {
  noNccl(ctx, "bucket", axisMask);
}
extern "C" void weft_rt_cuda_send_f32(const WeftRuntimeContext *ctx,
                                      int64_t axisMask, const float *, int64_t,
                                      int64_t, int64_t) {
  noNccl(ctx, "send", axisMask);
}
extern "C" void weft_rt_cuda_recv_f32(const WeftRuntimeContext *ctx,
                                      int64_t axisMask, float *, int64_t,
                                      int64_t, int64_t) {
  noNccl(ctx, "recv", axisMask);
}

#endif // WEFT_HAVE_NCCL
