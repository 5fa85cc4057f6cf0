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
#include "weft/Runtime/Trace.h"

#include "RankProcesses.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <tuple>
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

/// One all-to-all of a test: the input's shape, the dim split among the
/// group and the dim the received blocks are concatenated along.
struct AllToAllCase {
  std::vector<int64_t> shape;
  int split, concat;
};

int64_t product(const std::vector<int64_t> &dims, size_t from, size_t to) {
  int64_t n = 1;
  for (size_t d = from; d < to; ++d)
    n *= dims[d];
  return n;
}

/// The value at flat index `flat` of the input of global rank `rank`:
/// distinct over ranks and elements.
float inputValue(int rank, int64_t flat) { return float(1000 * rank + flat); }

/// Runs weft_rt_all_to_all_f32 as --weft-lower-collectives calls it for
/// `c` over the group of `mask` (n ranks, this one `index`; `members[g]`
/// the global rank of group rank g), and checks every element of the result
/// against its definition: out[.., concat = q * size + j, .., split = k, ..]
/// is rank q's input at [.., concat = j, .., split = index * (size / n) +
/// k, ..]. An empty string when it matches, else what differs.
std::string checkAllToAll(const WeftRuntimeContext *ctx, int64_t mask, int rank,
                          const std::vector<int> &members, int index,
                          const AllToAllCase &c) {
  int n = int(members.size());
  const std::vector<int64_t> &in = c.shape;
  size_t numDims = in.size();
  std::vector<int64_t> block = in, out = in;
  block[c.split] /= n;
  out[c.split] /= n;
  out[c.concat] *= n;
  std::vector<float> input(size_t(product(in, 0, numDims))),
      output(input.size(), -1.0f);
  for (size_t i = 0; i < input.size(); ++i)
    input[i] = inputValue(rank, int64_t(i));
  weft_rt_all_to_all_f32(
      ctx, mask, input.data(), output.data(),
      product(block, 0, c.split), product(block, c.split, numDims),
      product(block, 0, c.concat), product(block, c.concat, numDims));
  std::vector<int64_t> at(numDims, 0);
  for (size_t flat = 0; flat < output.size(); ++flat) {
    // at: the output's multi-index of `flat`, row-major.
    int64_t rest = int64_t(flat);
    for (size_t d = numDims; d-- > 0;) {
      at[d] = rest % out[d];
      rest /= out[d];
    }
    std::vector<int64_t> from = at;
    int q = int(at[c.concat] / in[c.concat]);
    from[c.concat] = at[c.concat] % in[c.concat];
    from[c.split] = at[c.split] + index * block[c.split];
    int64_t source = 0;
    for (size_t d = 0; d < numDims; ++d)
      source = source * in[d] + from[d];
    float want = inputValue(members[size_t(q)], source);
    if (output[flat] != want)
      return "mask " + std::to_string(mask) + ", split " +
             std::to_string(c.split) + ", concat " + std::to_string(c.concat) +
             ": element " + std::to_string(flat) + " is " +
             std::to_string(output[flat]) + ", not " + std::to_string(want);
  }
  return "";
}

/// Two-, three-dimensional cases whose split dims divide by 2 and 4:
/// the split after, before the concatenated dim, neither the first.
std::vector<AllToAllCase> allToAllCases(int n) {
  std::vector<AllToAllCase> cases = {
      {{4, 8}, 1, 0}, {{8, 4}, 0, 1}, {{2, 4, 8}, 2, 1},
      {{4, 2, 8}, 0, 2}, {{2, 8, 4}, 1, 0}, {{3, 4, 2, 4}, 3, 1}};
  if (n == 2) {
    cases.push_back({{4, 6}, 1, 0});
    cases.push_back({{6, 4}, 0, 1});
  }
  return cases;
}

/// The strided copies that regroup blocks (on the host here; the GPU runs
/// the same list as cudaMemcpy2DAsync) against the layouts by index:
/// [outer][n][inner] -> block g at g * stride as [outer][inner], and back.
TEST(MeshCollectivesTest, BlockCopiesRegroupByRank) {
  for (auto [n, outer, inner] : {std::tuple<size_t, size_t, size_t>{2, 3, 5},
                                 {3, 1, 4},
                                 {4, 2, 1},
                                 {1, 3, 2}}) {
    size_t block = outer * inner, stride = block + 3; // padding between
    std::vector<float> in(outer * n * inner);
    for (size_t i = 0; i < in.size(); ++i)
      in[i] = float(i);
    std::vector<float> grouped(n * stride, -1);
    RankBlocks{n, outer, inner, stride, true}.run(in.data(), grouped.data());
    for (size_t g = 0; g < n; ++g)
      for (size_t o = 0; o < outer; ++o)
        for (size_t i = 0; i < inner; ++i)
          ASSERT_EQ(grouped[g * stride + o * inner + i],
                    in[(o * n + g) * inner + i])
              << "n " << n << " g " << g << " o " << o << " i " << i;
    // The padding between blocks is untouched.
    for (size_t g = 0; g < n; ++g)
      for (size_t p = block; p < stride; ++p)
        ASSERT_EQ(grouped[g * stride + p], -1);
    std::vector<float> back(in.size(), -1);
    RankBlocks{n, outer, inner, stride, false}.run(grouped.data(), back.data());
    EXPECT_EQ(back, in) << "n " << n << " outer " << outer;
  }
}

TEST(MeshCollectivesTest, AllToAllOnOneAxis) {
  for (int size : {2, 4}) {
    int port = freePort();
    std::vector<std::string> errs;
    std::vector<int> codes = runRanks(size, [&](int rank) {
      RuntimeContext context(launchOf(rank, size, port), 1);
      if (Status s = context.joinMesh({{"tp", size}}, 20s); !s.ok()) {
        std::fprintf(stderr, "%s\n", s.message.c_str());
        return 2;
      }
      std::vector<int> members;
      for (int g = 0; g < size; ++g)
        members.push_back(g);
      for (const AllToAllCase &c : allToAllCases(size)) {
        std::string why =
            checkAllToAll(context.get(), 1, rank, members, rank, c);
        if (!why.empty()) {
          std::fprintf(stderr, "%s\n", why.c_str());
          return 3;
        }
      }
      return 0;
    }, &errs);
    for (int r = 0; r < size; ++r)
      EXPECT_EQ(codes[r], 0)
          << size << " ranks, rank " << r << ": " << errs[r];
  }
}

TEST(MeshCollectivesTest, AllToAllOverOneAxisOfTwo) {
  // dp=2 x tp=2, rank = 2 * dp + tp: over dp the group of rank r is
  // {r % 2, r % 2 + 2}, over tp {r - r % 2, r - r % 2 + 1}, over both all
  // four ranks in rank order.
  int port = freePort();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(4, [&](int rank) {
    RuntimeContext context(launchOf(rank, 4, port), 1);
    if (Status s = context.joinMesh({{"dp", 2}, {"tp", 2}}, 20s); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.message.c_str());
      return 2;
    }
    int dp = rank / 2, tp = rank % 2;
    struct Group {
      int64_t mask;
      std::vector<int> members;
      int index;
    };
    std::vector<Group> groups = {{1, {tp, tp + 2}, dp},
                                 {2, {2 * dp, 2 * dp + 1}, tp},
                                 {3, {0, 1, 2, 3}, rank}};
    for (const Group &g : groups)
      for (const AllToAllCase &c : allToAllCases(int(g.members.size()))) {
        std::string why = checkAllToAll(context.get(), g.mask, rank,
                                        g.members, g.index, c);
        if (!why.empty()) {
          std::fprintf(stderr, "%s\n", why.c_str());
          return 3;
        }
      }
    return 0;
  }, &errs);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(codes[r], 0) << "rank " << r << ": " << errs[r];
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

TEST(MeshCollectivesTest, MisusedBucketsAndBlocksEndTheRankSayingWhy) {
  // The checks the host's and the GPU's versions share (MeshInternal.h).
  struct Case {
    const char *name, *expected;
    std::function<void(const WeftRuntimeContext *)> call;
  };
  float in[8] = {}, out[8];
  std::vector<Case> cases = {
      {"a member past its bucket",
       "bucketed all_reduce over mesh axis dp failed: member at 4 of 2 "
       "elements does not fit bucket 0 (5 elements, kind 0)",
       [&](const WeftRuntimeContext *ctx) {
         weft_rt_bucket_put_f32(ctx, 1, 0, 0, 5, 4, in, 1, 2);
       }},
      {"a start without members",
       "bucketed all_gather over mesh axis dp failed: bucket 3 starts "
       "without its members, or twice",
       [&](const WeftRuntimeContext *ctx) {
         weft_rt_bucket_start(ctx, 1, 3, 2, 4);
       }},
      {"a read before the start",
       "bucket 0 has no result at 0 of 2 elements (was it started?)",
       [&](const WeftRuntimeContext *ctx) {
         weft_rt_bucket_put_f32(ctx, 1, 0, 0, 2, 0, in, 1, 2);
         weft_rt_bucket_get_f32(ctx, 1, 0, 0, out, 1, 2);
       }},
      {"blocks of two sizes",
       "all_to_all over mesh axis dp failed: a block of 2 x 2 elements is "
       "sent and one of 3 x 1 received",
       [&](const WeftRuntimeContext *ctx) {
         weft_rt_all_to_all_f32(ctx, 1, in, out, 2, 2, 3, 1);
       }},
  };
  for (const Case &c : cases) {
    int port = freePort();
    std::vector<std::string> errs;
    std::vector<int> codes = runRanks(
        1,
        [&](int rank) {
          RuntimeContext context(launchOf(rank, 1, port), 1);
          if (!context.joinMesh({{"dp", 1}}, 20s).ok())
            return 2;
          c.call(context.get());
          return 0; // Not reached: the call exits.
        },
        &errs);
    EXPECT_EQ(codes[0], 1) << c.name << ": " << errs[0];
    EXPECT_NE(errs[0].find(c.expected), std::string::npos)
        << c.name << ": " << errs[0];
  }
}

TEST(MeshCollectivesTest, SendAndRecvBetweenPipelineStages) {
  // dp=2 x pp=2 on 4 ranks, rank = 2 * dp + pp: stage 0 of each dp replica
  // sends its activations to stage 1 of the same replica (peer 1 on pp,
  // its own coordinate on dp), which sends back twice them as the
  // gradient, as a pipeline step's forward and backward would.
  int port = freePort();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(4, [&](int rank) {
    RuntimeContext context(launchOf(rank, 4, port), 1);
    if (Status s = context.joinMesh({{"dp", 2}, {"pp", 2}}, 20s); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.message.c_str());
      return 2;
    }
    const WeftRuntimeContext *ctx = context.get();
    const int64_t pp = 2, n = 6;
    int dp = rank / 2, stage = rank % 2;
    float activations[n], gradients[n];
    if (stage == 0) {
      for (int i = 0; i < n; ++i)
        activations[i] = float(100 * dp + i);
      weft_rt_send_f32(ctx, pp, activations, n, 1, 0);
      weft_rt_recv_f32(ctx, pp, gradients, n, 1, 1);
      for (int i = 0; i < n; ++i)
        if (gradients[i] != 2 * float(100 * dp + i))
          return 3;
      return 0;
    }
    weft_rt_recv_f32(ctx, pp, activations, n, 0, 0);
    for (int i = 0; i < n; ++i)
      gradients[i] = 2 * activations[i];
    weft_rt_send_f32(ctx, pp, gradients, n, 0, 1);
    return 0;
  }, &errs);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(codes[r], 0) << "rank " << r << ": " << errs[r];
}

/// Three steps of a pipeline boundary on pp=2: stage 0 sends, stage 1
/// sleeps `sleepMs` into the step before its recv op. Returns, on rank 0,
/// 10 + the step (1-3) whose send waited less than half the sleep, or
/// 20 + the step whose send waited it out; 0 when steps 2 and 3 waited
/// less than half and step 1 more (`ahead`), or every step more.
int stageSendWaits(int rank, int port, bool ahead, int sleepMs) {
  if (!ahead)
    ::setenv("WEFT_RECV_AHEAD", "0", 1);
  RuntimeContext context(launchOf(rank, 2, port), 1);
  if (!context.joinMesh({{"pp", 2}}, 20s).ok())
    return 2;
  const int64_t n = 5;
  for (int step = 1; step <= 3; ++step) {
    context.beginStep();
    // Both ranks in the step before stage 0 sends, as a pipeline's
    // stages are (its sends depend on what the step before received).
    float sync = 0;
    weft_rt_all_reduce_f32(context.get(), 1, &sync, &sync, 1);
    float x[n];
    if (rank == 0) {
      for (int i = 0; i < n; ++i)
        x[i] = float(10 * step + i);
      auto start = std::chrono::steady_clock::now();
      weft_rt_send_f32(context.get(), 1, x, n, 1, 7);
      // Returns once stage 1 has taken the data.
      if (!context.drainTransfers().ok())
        return 4;
      double ms = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      bool waited = ms > sleepMs / 2;
      if (waited != (!ahead || step == 1))
        return (waited ? 20 : 10) + step;
      continue;
    }
    ::usleep(useconds_t(sleepMs) * 1000);
    weft_rt_recv_f32(context.get(), 1, x, n, 0, 7);
    for (int i = 0; i < n; ++i)
      if (x[i] != float(10 * step + i))
        return 5;
    if (!context.drainTransfers().ok())
      return 4;
  }
  return 0;
}

TEST(MeshCollectivesTest, RecvsArePostedAheadFromTheSecondStep) {
  // gloo moves a message once its recv is posted. From the second step on
  // a group posts the step's recvs when it begins, so a stage's send is
  // taken while its peer still computes; the first step, and every step
  // with WEFT_RECV_AHEAD=0, waits for the peer's recv op.
  for (bool ahead : {true, false}) {
    int port = freePort();
    std::vector<std::string> errs;
    std::vector<int> codes = runRanks(
        2, [&](int rank) { return stageSendWaits(rank, port, ahead, 400); },
        &errs);
    for (int r = 0; r < 2; ++r)
      EXPECT_EQ(codes[r], 0) << (ahead ? "ahead" : "WEFT_RECV_AHEAD=0")
                             << ", rank " << r << ": " << errs[r];
  }
}

TEST(MeshCollectivesTest, RecvsThatChangeBetweenStepsAreAnError) {
  // A step whose recvs are not the last step's would have the ones posted
  // ahead take messages meant for others: the recv op stops the rank,
  // naming both.
  int port = freePort();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(
      2,
      [&](int rank) {
        RuntimeContext context(launchOf(rank, 2, port), 1);
        if (!context.joinMesh({{"pp", 2}}, 20s).ok())
          return 2;
        float x[3] = {1, 2, 3};
        context.beginStep();
        if (rank == 0) {
          weft_rt_send_f32(context.get(), 1, x, 3, 1, 7);
          return context.drainTransfers().ok() ? 0 : 4;
        }
        weft_rt_recv_f32(context.get(), 1, x, 3, 0, 7);
        if (!context.drainTransfers().ok())
          return 4;
        context.beginStep();
        weft_rt_recv_f32(context.get(), 1, x, 3, 0, 8);
        return 0; // Not reached: the call exits.
      },
      &errs);
  EXPECT_EQ(codes[0], 0) << errs[0];
  EXPECT_EQ(codes[1], 1) << errs[1];
  EXPECT_NE(errs[1].find("this step's receives differ from the step "
                         "before's: expected recv of 12 bytes with tag 7 on "
                         "rank 1 from rank 0 of 2, got recv of 12 bytes with "
                         "tag 8"),
            std::string::npos)
      << errs[1];
}

TEST(MeshCollectivesTest, TraceShowsWaitsAndTheThreadsWork) {
  // WEFT_TRACE=DIR: each rank writes DIR/rank<N>.json, a Chrome trace of
  // what its step waited for (lane 0, named by op and axes) and what its
  // communication threads ran, with the bytes.
  char dir[] = "/tmp/weft-trace-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  int port = freePort();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(
      2,
      [&](int rank) {
        ::setenv("WEFT_TRACE", dir, 1);
        RuntimeContext context(launchOf(rank, 2, port), 1);
        if (!context.joinMesh({{"dp", 2}}, 20s).ok())
          return 2;
        float x[6] = {1, 2, 3, 4, 5, 6};
        weft_rt_all_reduce_f32(context.get(), 1, x, x, 6);
        return trace::write(rank).ok() ? 0 : 3;
      },
      &errs);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(codes[r], 0) << "rank " << r << ": " << errs[r];
    std::string path = std::string(dir) + "/rank" + std::to_string(r) + ".json";
    std::FILE *f = std::fopen(path.c_str(), "r");
    ASSERT_NE(f, nullptr) << path;
    std::string text;
    char buf[4096];
    for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;)
      text.append(buf, n);
    std::fclose(f);
    std::remove(path.c_str());
    EXPECT_EQ(text.rfind("{\"traceEvents\":[", 0), 0u) << text;
    EXPECT_NE(text.find("{\"name\":\"all_reduce dp\",\"ph\":\"X\",\"pid\":" +
                        std::to_string(r) + ",\"tid\":0,"),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("{\"name\":\"all_reduce\",\"ph\":\"X\""),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("\"args\":{\"bytes\":24}"), std::string::npos) << text;
  }
  ::rmdir(dir);
}

TEST(MeshCollectivesTest, SendToItselfIsAnErrorNamingTheRanks) {
  // A step that names this rank's own stage as the peer: the process ends
  // with the op, the axis and both ranks, rather than waiting for ever.
  int port = freePort();
  std::vector<std::string> errs;
  std::vector<int> codes = runRanks(2, [&](int rank) {
    RuntimeContext context(launchOf(rank, 2, port), 1);
    if (!context.joinMesh({{"pp", 2}}, 20s).ok())
      return 2;
    if (rank == 1)
      return 0;
    float x[3] = {};
    weft_rt_send_f32(context.get(), 1, x, 3, 0, 4);
    return 0; // Not reached: the call exits.
  }, &errs);
  EXPECT_EQ(codes[0], 1) << errs[0];
  EXPECT_NE(errs[0].find("error: rank 0: send over mesh axis pp failed: send "
                         "of 12 bytes with tag 4 from rank 0 to rank 0 of 2: "
                         "a rank cannot send to or receive from itself"),
            std::string::npos)
      << errs[0];
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
