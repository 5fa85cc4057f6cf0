//===- MeshCollectivesTest.cpp - What generated code calls, across ranks --===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Real processes (fork), as in a job: each fills a RuntimeContext for the
// mesh through joinMesh and calls the weft_rt_* functions a partitioned
// step calls, through the WeftRuntimeContext it would receive.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Context.h"
#include "weft/Runtime/Kernels.h"

#include "RankProcesses.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <vector>

#include <unistd.h>

using namespace weft::rt;
using weft::rt::test::freePort;
using weft::rt::test::runRanks;
using namespace std::chrono_literals;

namespace {

LaunchInfo launchOf(int rank, int size, int port) {
  LaunchInfo info;
  info.rank = rank;
  info.worldSize = size;
  info.localRank = rank;
  info.localWorldSize = size;
  info.launcher = "torchrun";
  info.masterPort = port;
  return info;
}

TEST(MeshCollectivesTest, CollectivesThroughTheContext) {
  int port = freePort();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(2, [&](int rank) {
    RuntimeContext context(launchOf(rank, 2, port), 1);
    Status s = context.joinMesh({{"dp", 2}}, 20s);
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message.c_str());
      return 2;
    }
    const WeftRuntimeContext *ctx = context.get();
    if (ctx->numAxes != 1 || std::string(ctx->axes[0].name) != "dp" ||
        ctx->axes[0].size != 2 || ctx->axes[0].index != rank)
      return 3;
    float r = float(rank);
    // all_reduce: [1+r, 2+r] summed over both ranks.
    float in[6] = {1 + r, 2 + r}, out[12] = {};
    weft_rt_all_reduce_f32(ctx, 1, in, out, 2);
    if (out[0] != 3 || out[1] != 5)
      return 4;
    // all_gather along dim 1 of a [2, 3] block: rows interleave the ranks.
    for (int i = 0; i < 6; ++i)
      in[i] = 10 * r + float(i);
    weft_rt_all_gather_f32(ctx, 1, in, out, 2, 3);
    float gathered[12] = {0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15};
    for (int i = 0; i < 12; ++i)
      if (out[i] != gathered[i])
        return 5;
    // reduce_scatter along dim 1 of [2, 4]: rank r keeps columns 2r, 2r+1
    // of the sum (every rank holds 0..7 times (r + 1)).
    float full[8];
    for (int i = 0; i < 8; ++i)
      full[i] = float(i) * (r + 1);
    weft_rt_reduce_scatter_f32(ctx, 1, full, out, 2, 2);
    for (int o = 0; o < 2; ++o)
      for (int i = 0; i < 2; ++i)
        if (out[o * 2 + i] != 3 * float(o * 4 + rank * 2 + i))
          return 6;
    // reduce_scatter along dim 0 (outer 1): rank r keeps elements 2r, 2r+1.
    weft_rt_reduce_scatter_f32(ctx, 1, full, out, 1, 4);
    for (int i = 0; i < 4; ++i)
      if (out[i] != 3 * float(rank * 4 + i))
        return 7;
    if (weft_rt_axis_index(ctx, 1) != rank)
      return 8;
    return 0;
  }, &errs);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(codes[r], 0) << "rank " << r << ": " << errs[r];
}

TEST(MeshCollectivesTest, BucketsOfEveryKind) {
  // What a step with buckets calls: put each member, start, go on (a
  // synchronous collective meanwhile queues behind the bucket), get.
  int port = freePort();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(2, [&](int rank) {
    RuntimeContext context(launchOf(rank, 2, port), 1);
    if (!context.joinMesh({{"dp", 2}}, 20s).ok())
      return 2;
    const WeftRuntimeContext *ctx = context.get();
    float r = float(rank);
    for (int step = 0; step < 2; ++step) {
      // All-reduce bucket 0: members of 2 and 3 elements.
      float a[2] = {1 + r, 2 + r}, b[3] = {r, 10 * r, 100 + r};
      weft_rt_bucket_put_f32(ctx, 1, 0, 0, 5, 0, a, 1, 2);
      weft_rt_bucket_put_f32(ctx, 1, 0, 0, 5, 2, b, 1, 3);
      weft_rt_bucket_start(ctx, 1, 0, 0, 5);
      // Reduce-scatter bucket 1: a [2, 4] member split along dim 1 (outer
      // 2, inner 2) and a [4] member along dim 0; region 4 + 2 = 6.
      float full[8], vec[4];
      for (int i = 0; i < 8; ++i)
        full[i] = float(i) * (r + 1);
      for (int i = 0; i < 4; ++i)
        vec[i] = float(i + step) * (r + 1);
      weft_rt_bucket_put_f32(ctx, 1, 1, 1, 6, 0, full, 2, 2);
      weft_rt_bucket_put_f32(ctx, 1, 1, 1, 6, 4, vec, 1, 2);
      weft_rt_bucket_start(ctx, 1, 1, 1, 6);
      // All-gather bucket 2: a [2, 3] block along dim 1.
      float block[6];
      for (int i = 0; i < 6; ++i)
        block[i] = 10 * r + float(i);
      weft_rt_bucket_put_f32(ctx, 1, 2, 2, 6, 0, block, 2, 3);
      weft_rt_bucket_start(ctx, 1, 2, 2, 6);
      float one[1] = {r + 1}, sum[1] = {};
      weft_rt_all_reduce_f32(ctx, 1, one, sum, 1);
      if (sum[0] != 3)
        return 3;

      float out[12] = {};
      weft_rt_bucket_get_f32(ctx, 1, 2, 0, out, 2, 3);
      float gathered[12] = {0, 1, 2, 10, 11, 12, 3, 4, 5, 13, 14, 15};
      for (int i = 0; i < 12; ++i)
        if (out[i] != gathered[i])
          return 4;
      weft_rt_bucket_get_f32(ctx, 1, 0, 2, out, 1, 3);
      if (out[0] != 1 || out[1] != 10 || out[2] != 201)
        return 5;
      weft_rt_bucket_get_f32(ctx, 1, 0, 0, out, 1, 2);
      if (out[0] != 3 || out[1] != 5)
        return 6;
      weft_rt_bucket_get_f32(ctx, 1, 1, 0, out, 2, 2);
      for (int o = 0; o < 2; ++o)
        for (int i = 0; i < 2; ++i)
          if (out[o * 2 + i] != 3 * float(o * 4 + rank * 2 + i))
            return 7;
      weft_rt_bucket_get_f32(ctx, 1, 1, 4, out, 1, 2);
      for (int i = 0; i < 2; ++i)
        if (out[i] != 3 * float(rank * 2 + i + step))
          return 8;
    }
    return 0;
  }, &errs);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(codes[r], 0) << "rank " << r << ": " << errs[r];
}

TEST(MeshCollectivesTest, TwoAxes) {
  // dp=2 x tp=1: each rank's tp group is itself, its dp group both ranks.
  int port = freePort();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(2, [&](int rank) {
    RuntimeContext context(launchOf(rank, 2, port), 1);
    if (!context.joinMesh({{"dp", 2}, {"tp", 1}}, 20s).ok())
      return 2;
    const WeftRuntimeContext *ctx = context.get();
    float in[1] = {float(rank + 1)}, out[2] = {};
    weft_rt_all_reduce_f32(ctx, 2, in, out, 1);
    if (out[0] != float(rank + 1))
      return 3;
    weft_rt_all_reduce_f32(ctx, 1, in, out, 1);
    if (out[0] != 3)
      return 4;
    return weft_rt_axis_index(ctx, 3) == rank ? 0 : 5;
  }, &errs);
  for (int r = 0; r < 2; ++r)
    EXPECT_EQ(codes[r], 0) << "rank " << r << ": " << errs[r];
}

TEST(MeshCollectivesTest, GroupsOverEverySetOfAxes) {
  // dp=2 x tp=2 on 4 ranks, rank = 2 * dp + tp: the dp group of rank r is
  // {r % 2, r % 2 + 2}, its tp group {r - r % 2, r - r % 2 + 1}, and the
  // group over both axes all four ranks, numbered row-major (= rank).
  int port = freePort();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(4, [&](int rank) {
    LaunchInfo info = launchOf(rank, 4, port);
    RuntimeContext context(info, 1);
    if (!context.joinMesh({{"dp", 2}, {"tp", 2}}, 20s).ok())
      return 2;
    const WeftRuntimeContext *ctx = context.get();
    float in[1] = {float(1 << rank)}, out[4] = {};
    weft_rt_all_reduce_f32(ctx, 1, in, out, 1);
    if (out[0] != float((1 << (rank % 2)) + (1 << (rank % 2 + 2))))
      return 3;
    weft_rt_all_reduce_f32(ctx, 2, in, out, 1);
    int base = rank - rank % 2;
    if (out[0] != float((1 << base) + (1 << (base + 1))))
      return 4;
    weft_rt_all_reduce_f32(ctx, 3, in, out, 1);
    if (out[0] != 15)
      return 5;
    // A gather over both axes lays the blocks out in rank order.
    weft_rt_all_gather_f32(ctx, 3, in, out, 1, 1);
    for (int r = 0; r < 4; ++r)
      if (out[r] != float(1 << r))
        return 6;
    if (weft_rt_axis_index(ctx, 3) != rank ||
        weft_rt_axis_index(ctx, 1) != rank / 2 ||
        weft_rt_axis_index(ctx, 2) != rank % 2)
      return 7;
    return 0;
  }, &errs);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(codes[r], 0) << "rank " << r << ": " << errs[r];
}

TEST(MeshCollectivesTest, DeadPeerIsAnErrorNamingTheCollective) {
  int port = freePort();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(2, [&](int rank) {
    RuntimeContext context(launchOf(rank, 2, port), 1);
    if (!context.joinMesh({{"dp", 2}}, 20s).ok())
      return 2;
    // One collective together, so both have finished joining before rank
    // 1 leaves (else rank 0's join, not its collective, sees it go).
    float in[4] = {}, out[4];
    weft_rt_all_reduce_f32(context.get(), 1, in, out, 4);
    if (rank == 1)
      return 0; // Gone without its part of the next all-reduce.
    weft_rt_all_reduce_f32(context.get(), 1, in, out, 4);
    return 0; // Not reached: the call exits.
  }, &errs);
  EXPECT_EQ(codes[1], 0);
  EXPECT_EQ(codes[0], 1);
  std::string err = errs[0];
  EXPECT_NE(err.find("error: rank 0: all_reduce over mesh axis dp failed"),
            std::string::npos)
      << err;
}

TEST(MeshCollectivesTest, WorldSizeMustMatchTheMesh) {
  RuntimeContext context(launchOf(0, 4, 1), 1);
  Status s = context.joinMesh({{"dp", 2}}, 1s);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("torchrun's environment says 4 ranks, but this "
                           "executable was compiled for the mesh dp=2 (2 "
                           "ranks): start 2 ranks"),
            std::string::npos)
      << s.message;
  EXPECT_NE(s.message.find("recompile with --mesh dp=4"), std::string::npos);
}

} // namespace
