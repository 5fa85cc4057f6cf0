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
