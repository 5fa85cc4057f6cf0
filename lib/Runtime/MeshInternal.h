//===- MeshInternal.h - What the mesh's two collective sides share -*- C++
//-*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The host collectives (MeshCollectives.cpp) and their GPU versions
// (CudaMeshCollectives.cpp, in WeftRuntimeNccl) find a group and fail
// alike.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_RUNTIME_MESHINTERNAL_H
#define WEFT_LIB_RUNTIME_MESHINTERNAL_H

#include "weft/Runtime/Collectives.h"
#include "weft/Runtime/ModelABI.h"

#include <cstdint>
#include <string>
#include <vector>

namespace weft::rt::detail {

/// Ends the process with an error naming the collective, the axes and the
/// rank: the other ranks would wait forever on one that went on.
[[noreturn]] void meshDie(const WeftRuntimeContext *ctx, const char *what,
                          int64_t axisMask, const std::string &why);

/// The group of `axisMask` (bit i: ctx->axes[i]); a mask the context does
/// not have ends the process (meshDie).
AxisGroup &meshGroup(const WeftRuntimeContext *ctx, const char *what,
                     int64_t axisMask);

/// What a bucket's kind argument (weft_rt_bucket_put_f32) says it reduces.
enum BucketKind : int64_t {
  kAllReduce = 0,
  kReduceScatter = 1,
  kAllGather = 2
};

/// "bucketed all_reduce": how errors name a bucket's collective.
inline const char *bucketWhat(int64_t kind) {
  return kind == kReduceScatter ? "bucketed reduce_scatter"
         : kind == kAllGather   ? "bucketed all_gather"
                                : "bucketed all_reduce";
}

/// Ends the process with `s`'s error, if it is one (meshDie).
inline void meshCheck(const WeftRuntimeContext *ctx, const char *what,
                      int64_t axisMask, const Status &s) {
  if (!s.ok())
    meshDie(ctx, what, axisMask, s.message);
}

/// An all_to_all sends blocks of splitOuter x splitInner elements and
/// receives blocks of concatOuter x concatInner: the same size.
inline void meshCheckAllToAll(const WeftRuntimeContext *ctx, int64_t axisMask,
                              int64_t splitOuter, int64_t splitInner,
                              int64_t concatOuter, int64_t concatInner) {
  if (splitOuter < 0 || splitInner < 0 || concatOuter < 0 || concatInner < 0 ||
      splitOuter * splitInner != concatOuter * concatInner)
    meshDie(ctx, "all_to_all", axisMask,
            "a block of " + std::to_string(splitOuter) + " x " +
                std::to_string(splitInner) + " elements is sent and one of " +
                std::to_string(concatOuter) + " x " +
                std::to_string(concatInner) + " received");
}

/// A member put into bucket `id` (weft_rt_bucket_put_f32): the bucket is
/// not in flight, its kind is known and the member lies in its region.
inline void meshCheckBucketPut(const WeftRuntimeContext *ctx, int64_t axisMask,
                               int64_t id, bool inFlight, int64_t kind,
                               int64_t region, int64_t offset, int64_t outer,
                               int64_t inner) {
  if (inFlight)
    meshDie(ctx, bucketWhat(kind), axisMask,
            "bucket " + std::to_string(id) +
                " is filled again before its results were taken");
  if (kind < kAllReduce || kind > kAllGather || offset < 0 || outer < 0 ||
      inner < 0 || offset + outer * inner > region)
    meshDie(ctx, bucketWhat(kind), axisMask,
            "member at " + std::to_string(offset) + " of " +
                std::to_string(outer * inner) +
                " elements does not fit bucket " + std::to_string(id) + " (" +
                std::to_string(region) + " elements, kind " +
                std::to_string(kind) + ")");
}

/// Bucket `id` starts with its members in (`ready`), once.
inline void meshCheckBucketStart(const WeftRuntimeContext *ctx,
                                 int64_t axisMask, int64_t id, int64_t kind,
                                 bool ready) {
  if (!ready)
    meshDie(ctx, bucketWhat(kind), axisMask,
            "bucket " + std::to_string(id) +
                " starts without its members, or twice");
}

/// A read of `block` elements at `offset` of bucket `id`'s result of
/// `region` elements (per rank), which exists when `started`.
inline void meshCheckBucketGet(const WeftRuntimeContext *ctx, int64_t axisMask,
                               int64_t id, int64_t kind, bool started,
                               int64_t offset, int64_t outer, int64_t inner,
                               size_t region) {
  if (!started || offset < 0 || outer < 0 || inner < 0 ||
      size_t(offset) + size_t(outer) * size_t(inner) > region)
    meshDie(ctx, bucketWhat(kind), axisMask,
            "bucket " + std::to_string(id) + " has no result at " +
                std::to_string(offset) + " of " +
                std::to_string(size_t(outer) * size_t(inner)) +
                " elements (was it started?)");
}

/// Bucket `id` of `buckets` (the host's or the GPU's), made on first use;
/// ids are small and dense, so one above 2^20 ends the process.
template <typename Bucket>
Bucket &meshBucket(const WeftRuntimeContext *ctx, int64_t axisMask,
                   std::vector<Bucket> &buckets, int64_t id) {
  if (id < 0 || id > (int64_t(1) << 20))
    meshDie(ctx, "bucket", axisMask,
            "bucket id " + std::to_string(id) + " is out of range");
  if (size_t(id) >= buckets.size())
    buckets.resize(size_t(id) + 1);
  return buckets[size_t(id)];
}

} // namespace weft::rt::detail

#endif // WEFT_LIB_RUNTIME_MESHINTERNAL_H
