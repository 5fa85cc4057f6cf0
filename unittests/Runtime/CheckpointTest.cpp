//===- CheckpointTest.cpp - Tests for checkpoint files --------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The library-level behaviour; TrainMainTest covers resuming through the
// training loop.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/Checkpoint.h"
#include "weft/Runtime/ModelSpec.h"

#include "TestModels.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>

#include <unistd.h>

#include <limits>

using namespace weft::rt;
namespace fs = std::filesystem;

namespace {

class CheckpointTest : public ::testing::Test {
protected:
  std::string dir;
  std::vector<float> w = {1, 2, 3, 4, 5, 6};
  std::vector<float> m = {0.5f, -0.5f};
  std::vector<int64_t> mask = {7};

  void SetUp() override {
    dir = ::testing::TempDir() + "weft_ckpt_" + std::to_string(::getpid()) +
          "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  std::vector<CheckpointTensor> tensors() {
    return {{"w", "param", DType::F32, {2, 3}, w.data()},
            {"exp_avg.b", "state", DType::F32, {2}, m.data()},
            {"mask", "buffer", DType::I64, {1}, mask.data()}};
  }

  std::string write(int64_t step, int keep = 3) {
    CheckpointMeta meta;
    meta.step = step;
    meta.dataLoaderState = "{\"epoch\": 1}";
    meta.modelJson = "{\"source\": \"test\"}";
    std::string path;
    Status s = writeCheckpoint(dir, meta, tensors(), keep, path);
    EXPECT_TRUE(s.ok()) << s.message;
    return path;
  }
};

TEST(CheckpointNamesTest, Fnv1aMatchesReference) {
  EXPECT_EQ(fnv1a64("", 0), 0xcbf29ce484222325ULL);
  EXPECT_EQ(fnv1a64("a", 1), 0xaf63dc4c8601ec8cULL);
  EXPECT_EQ(fnv1a64("foobar", 6), 0x85944171f73967e8ULL);
  EXPECT_EQ(checkpointName(42), "step-00000042");
  EXPECT_EQ(checkpointName(123456789), "step-123456789");
}

TEST_F(CheckpointTest, RoundTripsTensorsAndMeta) {
  std::string path = write(7);
  EXPECT_EQ(path, dir + "/step-00000007");
  EXPECT_FALSE(fs::exists(dir + "/.tmp-step-00000007"));
  std::vector<float> w0 = w;
  w.assign(6, 0);
  m.assign(2, 0);
  mask = {0};
  RestoreResult r;
  Status s =
      restoreLatestCheckpoint(dir, tensors(), "{\"source\": \"test\"}", r);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_TRUE(r.found);
  EXPECT_EQ(r.path, path);
  EXPECT_EQ(r.meta.step, 7);
  EXPECT_EQ(nlohmann::json::parse(r.meta.dataLoaderState)["epoch"], 1);
  EXPECT_TRUE(r.warnings.empty());
  EXPECT_EQ(w, w0);
  EXPECT_EQ(m, (std::vector<float>{0.5f, -0.5f}));
  EXPECT_EQ(mask, std::vector<int64_t>{7});
}

TEST_F(CheckpointTest, RefusesNonFiniteTensorsAndKeepsTheGoodOnes) {
  std::string good = write(5);
  w[4] = std::numeric_limits<float>::quiet_NaN();
  CheckpointMeta meta;
  meta.step = 6;
  meta.dataLoaderState = "{}";
  std::string path;
  Status s = writeCheckpoint(dir, meta, tensors(), 3, path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("not writing the checkpoint of step 6: param 'w' "
                           "holds a non-finite value at element 4"),
            std::string::npos)
      << s.message;
  EXPECT_TRUE(fs::exists(good));
  EXPECT_FALSE(fs::exists(dir + "/step-00000006"));
}

TEST_F(CheckpointTest, EmptyOrMissingDirectoryIsAFreshStart) {
  RestoreResult r;
  ASSERT_TRUE(restoreLatestCheckpoint(dir, tensors(), "", r).ok());
  EXPECT_FALSE(r.found);
}

TEST_F(CheckpointTest, ReplacesACheckpointOfTheSameStep) {
  write(3);
  w[0] = 42;
  write(3);
  w[0] = 0;
  RestoreResult r;
  ASSERT_TRUE(restoreLatestCheckpoint(dir, tensors(), "", r).ok());
  EXPECT_EQ(w[0], 42);
  EXPECT_EQ(listCheckpoints(dir).size(), 1u);
}

TEST_F(CheckpointTest, WarnsWhenTheModelDescriptionChanged) {
  write(3);
  RestoreResult r;
  ASSERT_TRUE(
      restoreLatestCheckpoint(dir, tensors(), "{\"source\": \"other\"}", r)
          .ok());
  ASSERT_EQ(r.warnings.size(), 1u);
  EXPECT_NE(r.warnings[0].find("different description"), std::string::npos);
}

TEST_F(CheckpointTest, ResumingUnderAnotherLayoutIsNotAnotherModel) {
  write(3);
  RestoreResult r;
  ASSERT_TRUE(restoreLatestCheckpoint(
                  dir, tensors(),
                  "{\"source\": \"test\", \"mesh\": {\"tp\": 2}, "
                  "\"zero\": 1, \"tp_plan\": \"megatron\", "
                  "\"sequence_parallel\": true, \"peak_bytes\": 9, "
                  "\"shardings\": {\"w\": {}}}",
                  r)
                  .ok());
  EXPECT_TRUE(r.warnings.empty());
}

TEST_F(CheckpointTest, RefusesExtraTensorsAndNewerFormats) {
  write(3);
  std::vector<CheckpointTensor> fewer = tensors();
  fewer.pop_back();
  RestoreResult r;
  Status s = restoreLatestCheckpoint(dir, fewer, "", r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("it has tensor 'mask', which this model lacks"),
            std::string::npos)
      << s.message;

  std::string manifest = dir + "/step-00000003/manifest.json";
  std::ifstream in(manifest);
  nlohmann::json j = nlohmann::json::parse(in);
  j["format_version"] = kCheckpointFormatVersion + 1;
  std::ofstream(manifest) << j.dump();
  s = restoreLatestCheckpoint(dir, tensors(), "", r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("is newer than this runtime's"), std::string::npos)
      << s.message;
}

TEST_F(CheckpointTest, RemovesStaleTemporaries) {
  fs::create_directories(dir + "/.tmp-step-00000005");
  std::ofstream(dir + "/.tmp-step-00000005/model.safetensors") << "partial";
  write(5);
  EXPECT_FALSE(fs::exists(dir + "/.tmp-step-00000005"));
  EXPECT_TRUE(fs::exists(dir + "/step-00000005/manifest.json"));

  fs::create_directories(dir + "/.tmp-step-00000009");
  fs::create_directories(dir + "/.old-step-00000004");
  std::ofstream(dir + "/notes.txt") << "kept";
  ASSERT_TRUE(prepareCheckpointDir(dir).ok());
  EXPECT_FALSE(fs::exists(dir + "/.tmp-step-00000009"));
  EXPECT_FALSE(fs::exists(dir + "/.old-step-00000004"));
  EXPECT_TRUE(fs::exists(dir + "/notes.txt"));
  EXPECT_TRUE(fs::exists(dir + "/step-00000005"));
}

TEST_F(CheckpointTest, PrepareCreatesTheDirectory) {
  ASSERT_TRUE(prepareCheckpointDir(dir + "/a/b").ok());
  EXPECT_TRUE(fs::is_directory(dir + "/a/b"));
  std::ofstream(dir + "/file") << "x";
  EXPECT_FALSE(prepareCheckpointDir(dir + "/file").ok());
}

//===----------------------------------------------------------------------===//
// Sharded checkpoints
//===----------------------------------------------------------------------===//

/// A small model's global tensors, and the blocks ranks hold of them under
/// a layout, written and restored through the library with rank and world
/// given directly (no processes).
class ShardedCheckpointTest : public CheckpointTest {
protected:
  struct Global {
    std::string name, kind;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Global> globals;

  void SetUp() override {
    CheckpointTest::SetUp();
    auto add = [&](std::string name, std::string kind, DType dtype,
                   std::vector<int64_t> shape) {
      Global g{name, kind, dtype, shape, {}};
      size_t n = 0;
      ASSERT_TRUE(computeByteSize(dtype, shape, n));
      g.bytes.resize(n);
      // Distinct, finite values: every byte pattern tells where it came
      // from.
      for (size_t i = 0; i < n / dtypeSize(dtype); ++i) {
        if (dtype == DType::F32) {
          float v = float(globals.size() * 1000 + i) + 0.25f;
          std::memcpy(g.bytes.data() + i * 4, &v, 4);
        } else {
          int64_t v = int64_t(globals.size() * 1000 + i);
          std::memcpy(g.bytes.data() + i * 8, &v, 8);
        }
      }
      globals.push_back(std::move(g));
    };
    add("fc.weight", "param", DType::F32, {4, 6});
    add("fc.bias", "param", DType::F32, {6});
    add("exp_avg.fc.weight", "state", DType::F32, {4, 6});
    add("exp_avg.fc.bias", "state", DType::F32, {6});
    add("mask", "buffer", DType::I64, {2});
    add("step_count", "state", DType::F32, {});
  }

  static ShardLayout layout(std::string modelJson) {
    ShardLayout l;
    Status s = parseShardLayout(modelJson, l);
    EXPECT_TRUE(s.ok()) << s.message;
    return l;
  }

  /// ZeRO-3 at dp=2: params and optimizer state split along dim 0.
  static ShardLayout zero3() {
    return layout(R"({"mesh": {"axes": [{"name": "dp", "size": 2}]},
      "shardings": {
        "fc.weight": {"global_shape": [4, 6], "dims": [["dp"], []]},
        "fc.bias": {"global_shape": [6], "dims": [["dp"]]},
        "exp_avg.fc.weight": {"global_shape": [4, 6], "dims": [["dp"], []]},
        "exp_avg.fc.bias": {"global_shape": [6], "dims": [["dp"]]}}})");
  }

  /// dp=2 x tp=2: weight split along both dims, bias over tp only, the
  /// optimizer state over both axes along dim 0.
  static ShardLayout mesh2x2() {
    return layout(R"({"mesh": {"axes": [{"name": "dp", "size": 2},
                                        {"name": "tp", "size": 2}]},
      "shardings": {
        "fc.weight": {"global_shape": [4, 6], "dims": [["tp"], ["dp"]]},
        "fc.bias": {"global_shape": [6], "dims": [["tp"]]},
        "exp_avg.fc.weight": {"global_shape": [4, 6], "dims": [["dp", "tp"], []]}}})");
  }

  /// tp=2 with the weights and their state held as views split on an
  /// inner dim (a fused q/k/v weight's layout): fc.weight [4, 6] as
  /// [4, 3, 2] split on dim 2, so a rank's block is 3 column boxes; the
  /// bias [6] as [3, 2] on dim 1; the mask replicated but viewed.
  static ShardLayout tpView() {
    return layout(R"({"mesh": {"axes": [{"name": "tp", "size": 2}]},
      "shardings": {
        "fc.weight": {"global_shape": [4, 3, 2], "dims": [[], [], ["tp"]],
                      "stored_shape": [4, 6]},
        "exp_avg.fc.weight": {"global_shape": [4, 3, 2],
                              "dims": [[], [], ["tp"]], "stored_shape": [4, 6]},
        "fc.bias": {"global_shape": [3, 2], "dims": [[], ["tp"]],
                    "stored_shape": [6]},
        "mask": {"global_shape": [1, 2], "dims": [[], []],
                 "stored_shape": [2]}}})");
  }

  /// dp=2 x tp=2 with views whose stored dims both hold split view dims:
  /// fc.weight [4, 6] as [2, 2, 3, 2] split on dims 0 (dp) and 3 (tp);
  /// exp_avg.fc.bias [6] as [3, 2] split over dp, so stored by tp 0 only.
  static ShardLayout meshView2x2() {
    return layout(R"({"mesh": {"axes": [{"name": "dp", "size": 2},
                                        {"name": "tp", "size": 2}]},
      "shardings": {
        "fc.weight": {"global_shape": [2, 2, 3, 2],
                      "dims": [["dp"], [], [], ["tp"]], "stored_shape": [4, 6]},
        "exp_avg.fc.weight": {"global_shape": [4, 3, 2],
                              "dims": [["dp"], [], ["tp"]],
                              "stored_shape": [4, 6]},
        "exp_avg.fc.bias": {"global_shape": [3, 2], "dims": [[], ["dp"]],
                            "stored_shape": [6]}}})");
  }

  /// dp=2 with every tensor replicated.
  static ShardLayout dpReplicated() {
    return layout(R"({"mesh": {"axes": [{"name": "dp", "size": 2}]}})");
  }

  /// Rank `rank`'s blocks under `l`, in buffers the returned tensors point
  /// into.
  std::vector<CheckpointTensor> local(const ShardLayout &l, int64_t rank,
                                      std::vector<std::vector<uint8_t>> &bufs,
                                      bool fill = true) {
    std::vector<CheckpointTensor> out;
    bufs.assign(globals.size(), {});
    for (size_t i = 0; i < globals.size(); ++i) {
      const Global &g = globals[i];
      // A view has the global tensor's bytes, so its blocks are cut from
      // them in view coordinates, independently of storedBlockOf.
      std::vector<int64_t> shape = g.shape;
      auto it = l.shardings.find(g.name);
      if (it != l.shardings.end())
        shape = it->second.globalShape;
      if (it != l.shardings.end())
        for (size_t d = 0; d < shape.size(); ++d) {
          int64_t parts = 1;
          for (const std::string &axis : it->second.dims[d])
            for (const ShardLayout::Axis &a : l.mesh)
              if (a.name == axis)
                parts *= a.size;
          shape[d] /= parts;
        }
      std::vector<int64_t> offsets, global;
      Status s = l.blockOf(g.name, shape, rank, offsets, global);
      EXPECT_TRUE(s.ok()) << s.message;
      size_t n = 0;
      EXPECT_TRUE(computeByteSize(g.dtype, shape, n));
      bufs[i].assign(n, 0xAB);
      if (fill)
        copyBox(g.bytes.data(), global, offsets, bufs[i].data(), shape,
                std::vector<int64_t>(shape.size(), 0), shape,
                dtypeSize(g.dtype));
      out.push_back({g.name, g.kind, g.dtype, shape, bufs[i].data()});
    }
    return out;
  }

  CheckpointMeta meta(int64_t step) {
    CheckpointMeta m;
    m.step = step;
    m.dataLoaderState = "{\"epoch\": 1}";
    m.modelJson = "{\"source\": \"test\"}";
    return m;
  }

  /// Writes step `step` as every rank of `l` would, the last rank first so
  /// that rank 0 finds the others' parts in place.
  void writeAll(const ShardLayout &l, int64_t step) {
    int64_t world = l.numRanks();
    for (int64_t r = world - 1; r >= 0; --r) {
      std::vector<std::vector<uint8_t>> bufs;
      std::string path;
      Status s = writeCheckpoint(dir, meta(step), local(l, r, bufs), l, r,
                                 world, 3, path, 5.0);
      ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s.message;
      EXPECT_EQ(path, dir + "/" + checkpointName(step));
    }
  }

  /// Restores at every rank of `l` and compares each block with the global
  /// tensors, bit for bit.
  void expectRestores(const ShardLayout &l) {
    for (int64_t r = 0; r < l.numRanks(); ++r) {
      std::vector<std::vector<uint8_t>> got, want;
      std::vector<CheckpointTensor> tensors = local(l, r, got, false);
      (void)local(l, r, want);
      RestoreResult result;
      Status s = restoreLatestCheckpoint(dir, tensors, l, r,
                                         "{\"source\": \"test\"}", result);
      ASSERT_TRUE(s.ok()) << "rank " << r << ": " << s.message;
      ASSERT_TRUE(result.found);
      EXPECT_TRUE(result.warnings.empty());
      for (size_t i = 0; i < globals.size(); ++i)
        EXPECT_EQ(got[i], want[i]) << globals[i].name << " at rank " << r
                                   << " of mesh " << l.describeMesh();
    }
  }
};

TEST_F(ShardedCheckpointTest, BlocksFollowTheMeshRowMajor) {
  ShardLayout l = mesh2x2();
  EXPECT_EQ(l.numRanks(), 4);
  EXPECT_EQ(l.describeMesh(), "dp=2,tp=2");
  std::vector<int64_t> offsets, global;
  // Rank 1 is dp 0, tp 1: weight rows 2..3 (tp), columns 0..2 (dp).
  ASSERT_TRUE(l.blockOf("fc.weight", {2, 3}, 1, offsets, global).ok());
  EXPECT_EQ(offsets, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(global, (std::vector<int64_t>{4, 6}));
  // Split over dp then tp: rank 2 (dp 1, tp 0) holds block 2 of 4.
  ASSERT_TRUE(
      l.blockOf("exp_avg.fc.weight", {1, 6}, 2, offsets, global).ok());
  EXPECT_EQ(offsets, (std::vector<int64_t>{2, 0}));
  // The bias is replicated over dp: only dp 0 stores it.
  EXPECT_TRUE(l.storesBlock("fc.bias", 1));
  EXPECT_FALSE(l.storesBlock("fc.bias", 3));
  EXPECT_TRUE(l.storesBlock("mask", 0));
  EXPECT_FALSE(l.storesBlock("mask", 2));
  Status s = l.blockOf("fc.weight", {4, 3}, 0, offsets, global);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("'fc.weight'"), std::string::npos) << s.message;
}

/// The boxes of rank `rank`'s block, as (offsets, shape, localOffsets).
using BoxList = std::vector<std::vector<std::vector<int64_t>>>;
BoxList boxesOf(const ShardLayout &l, const std::string &name,
                const std::vector<int64_t> &localShape, int64_t rank,
                std::vector<int64_t> *localStored = nullptr) {
  ShardLayout::StoredBlock block;
  Status s = l.storedBlockOf(name, localShape, rank, block);
  EXPECT_TRUE(s.ok()) << s.message;
  if (localStored)
    *localStored = block.localShape;
  BoxList out;
  for (const ShardLayout::Box &b : block.boxes)
    out.push_back({b.offsets, b.shape, b.localOffsets});
  return out;
}

TEST_F(ShardedCheckpointTest, AViewSplitOnAnInnerDimIsStridedBoxes) {
  // Stored [2, 6] viewed [2, 3, 2], split on dim 2 over tp=2: rank r holds
  // columns r, 2 + r and 4 + r, one box each.
  ShardLayout l = layout(R"({"mesh": {"axes": [{"name": "tp", "size": 2}]},
    "shardings": {"w": {"global_shape": [2, 3, 2], "dims": [[], [], ["tp"]],
                        "stored_shape": [2, 6]}}})");
  std::vector<int64_t> local;
  EXPECT_EQ(boxesOf(l, "w", {2, 3, 1}, 0, &local),
            (BoxList{{{0, 0}, {2, 1}, {0, 0}},
                     {{0, 2}, {2, 1}, {0, 1}},
                     {{0, 4}, {2, 1}, {0, 2}}}));
  EXPECT_EQ(local, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(boxesOf(l, "w", {2, 3, 1}, 1), (BoxList{{{0, 1}, {2, 1}, {0, 0}},
                                                    {{0, 3}, {2, 1}, {0, 1}},
                                                    {{0, 5}, {2, 1}, {0, 2}}}));

  // With dp splitting dim 0 too (dp=2 x tp=2): rank 3 is dp 1, tp 1.
  l = layout(R"({"mesh": {"axes": [{"name": "dp", "size": 2},
                                    {"name": "tp", "size": 2}]},
    "shardings": {"w": {"global_shape": [2, 3, 2],
                        "dims": [["dp"], [], ["tp"]], "stored_shape": [2, 6]}}})");
  EXPECT_EQ(boxesOf(l, "w", {1, 3, 1}, 3, &local),
            (BoxList{{{1, 1}, {1, 1}, {0, 0}},
                     {{1, 3}, {1, 1}, {0, 1}},
                     {{1, 5}, {1, 1}, {0, 2}}}));
  EXPECT_EQ(local, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(boxesOf(l, "w", {1, 3, 1}, 2), (BoxList{{{1, 0}, {1, 1}, {0, 0}},
                                                    {{1, 2}, {1, 1}, {0, 1}},
                                                    {{1, 4}, {1, 1}, {0, 2}}}));

  // Viewed but not split: one box, the whole tensor.
  l = layout(R"({"mesh": {"axes": [{"name": "tp", "size": 2}]},
    "shardings": {"w": {"global_shape": [2, 3, 2], "dims": [[], [], []],
                        "stored_shape": [2, 6]}}})");
  EXPECT_EQ(boxesOf(l, "w", {2, 3, 2}, 1, &local),
            (BoxList{{{0, 0}, {2, 6}, {0, 0}}}));
  EXPECT_EQ(local, (std::vector<int64_t>{2, 6}));

  // The transposed case: stored [6, 2] viewed [3, 2, 2], split on dim 1:
  // rank r holds rows r, 2 + r and 4 + r.
  l = layout(R"({"mesh": {"axes": [{"name": "tp", "size": 2}]},
    "shardings": {"w": {"global_shape": [3, 2, 2], "dims": [[], ["tp"], []],
                        "stored_shape": [6, 2]}}})");
  EXPECT_EQ(boxesOf(l, "w", {3, 1, 2}, 1, &local),
            (BoxList{{{1, 0}, {1, 2}, {0, 0}},
                     {{3, 0}, {1, 2}, {1, 0}},
                     {{5, 0}, {1, 2}, {2, 0}}}));
  EXPECT_EQ(local, (std::vector<int64_t>{3, 2}));

  // Splitting the outermost dim of a run keeps the block one box.
  l = layout(R"({"mesh": {"axes": [{"name": "tp", "size": 2}]},
    "shardings": {"w": {"global_shape": [2, 3, 2], "dims": [[], ["tp"], []],
                        "stored_shape": [2, 6]}}})");
  EXPECT_FALSE(l.storedBlockOf("w", {2, 3, 2}, 0, *new ShardLayout::StoredBlock)
                   .ok()); // 3 does not split 2 ways
  l = layout(R"({"mesh": {"axes": [{"name": "tp", "size": 2}]},
    "shardings": {"w": {"global_shape": [2, 4, 2], "dims": [[], ["tp"], []],
                        "stored_shape": [2, 8]}}})");
  EXPECT_EQ(boxesOf(l, "w", {2, 2, 2}, 1), (BoxList{{{0, 4}, {2, 4}, {0, 0}}}));

  // Without a stored shape the block is blockOf's.
  EXPECT_EQ(boxesOf(mesh2x2(), "fc.weight", {2, 3}, 1, &local),
            (BoxList{{{2, 0}, {2, 3}, {0, 0}}}));
  EXPECT_EQ(local, (std::vector<int64_t>{2, 3}));
}

TEST_F(ShardedCheckpointTest, BoxesOfAViewHoldExactlyTheRanksElements) {
  // For each layout, every rank's boxes copied out of the stored tensor
  // land where its view block (cut independently, in view coordinates)
  // holds them, and the stored blocks tile the tensor.
  struct Case {
    const char *json;
    std::vector<int64_t> stored;
  } cases[] = {
      {R"({"mesh": {"axes": [{"name": "dp", "size": 2}, {"name": "tp", "size": 2}]},
        "shardings": {"w": {"global_shape": [2, 2, 3, 2],
          "dims": [["dp"], [], [], ["tp"]], "stored_shape": [4, 6]}}})",
       {4, 6}},
      {R"({"mesh": {"axes": [{"name": "dp", "size": 2}, {"name": "tp", "size": 3}]},
        "shardings": {"w": {"global_shape": [2, 4, 1, 3, 2],
          "dims": [[], ["dp"], [], ["tp"], []], "stored_shape": [8, 6]}}})",
       {8, 6}},
      {R"({"mesh": {"axes": [{"name": "dp", "size": 2}, {"name": "tp", "size": 2}]},
        "shardings": {"w": {"global_shape": [3, 4, 2],
          "dims": [[], ["tp", "dp"], []], "stored_shape": [1, 24, 1]}}})",
       {1, 24, 1}},
      {R"({"mesh": {"axes": [{"name": "dp", "size": 2}, {"name": "tp", "size": 2}]},
        "shardings": {"w": {"global_shape": [3, 2, 1, 4],
          "dims": [[], ["tp"], [], ["dp"]], "stored_shape": [6, 4]}}})",
       {6, 4}},
  };
  auto count = [](const std::vector<int64_t> &shape) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return size_t(n);
  };
  for (const Case &c : cases) {
    ShardLayout l;
    Status s = parseShardLayout(c.json, l);
    ASSERT_TRUE(s.ok()) << s.message;
    const ShardLayout::Split &split = l.shardings.at("w");
    std::vector<int64_t> view = split.globalShape, local = view;
    for (size_t d = 0; d < view.size(); ++d)
      for (const std::string &axis : split.dims[d])
        for (const ShardLayout::Axis &a : l.mesh)
          if (a.name == axis)
            local[d] /= a.size;
    size_t n = count(view);
    std::vector<int32_t> stored(n);
    for (size_t i = 0; i < n; ++i)
      stored[i] = int32_t(i);
    std::vector<int> seen(n, 0);
    for (int64_t r = 0; r < l.numRanks(); ++r) {
      std::vector<int64_t> offsets, global;
      ASSERT_TRUE(l.blockOf("w", local, r, offsets, global).ok());
      std::vector<int32_t> want(count(local)), got(count(local), -1);
      copyBox(reinterpret_cast<const uint8_t *>(stored.data()), view, offsets,
              reinterpret_cast<uint8_t *>(want.data()), local,
              std::vector<int64_t>(local.size(), 0), local, 4);
      ShardLayout::StoredBlock block;
      ASSERT_TRUE(l.storedBlockOf("w", local, r, block).ok());
      EXPECT_EQ(block.globalShape, c.stored);
      for (const ShardLayout::Box &b : block.boxes) {
        copyBox(reinterpret_cast<const uint8_t *>(stored.data()), c.stored,
                b.offsets, reinterpret_cast<uint8_t *>(got.data()),
                block.localShape, b.localOffsets, b.shape, 4);
        if (l.storesBlock("w", r)) {
          std::vector<int32_t> box(count(b.shape));
          copyBox(reinterpret_cast<const uint8_t *>(stored.data()), c.stored,
                  b.offsets, reinterpret_cast<uint8_t *>(box.data()), b.shape,
                  std::vector<int64_t>(b.shape.size(), 0), b.shape, 4);
          for (int32_t v : box)
            ++seen[size_t(v)];
        }
      }
      EXPECT_EQ(got, want) << c.json << " rank " << r;
    }
    EXPECT_EQ(seen, std::vector<int>(n, 1)) << c.json;
  }
}

TEST_F(ShardedCheckpointTest, WritesAPartPerRankAndOneManifest) {
  ShardLayout l = zero3();
  writeAll(l, 4);
  std::string path = dir + "/step-00000004";
  EXPECT_TRUE(fs::exists(path + "/rank-00000-of-00002.safetensors"));
  EXPECT_TRUE(fs::exists(path + "/rank-00001-of-00002.safetensors"));
  EXPECT_FALSE(fs::exists(dir + "/.tmp-step-00000004"));
  std::ifstream in(path + "/manifest.json");
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["format_version"], kShardedCheckpointFormatVersion);
  EXPECT_EQ(j["mesh"]["axes"][0]["name"], "dp");
  EXPECT_EQ(j["files"].size(), 2u);
  for (const auto &t : j["tensors"]) {
    if (t["name"] == "exp_avg.fc.weight") {
      EXPECT_EQ(t["shape"], nlohmann::json({4, 6}));
      EXPECT_EQ(t["dims"], nlohmann::json::parse(R"([["dp"], []])"));
      ASSERT_EQ(t["blocks"].size(), 2u);
      EXPECT_EQ(t["blocks"][1]["file"], "rank-00001-of-00002.safetensors");
      EXPECT_EQ(t["blocks"][1]["offsets"], nlohmann::json({2, 0}));
    }
    // Replicated tensors are written once, by rank 0.
    if (t["name"] == "mask") {
      ASSERT_EQ(t["blocks"].size(), 1u);
      EXPECT_EQ(t["blocks"][0]["file"], "rank-00000-of-00002.safetensors");
    }
  }
}

TEST_F(ShardedCheckpointTest, ReshardsToOneRankAndOtherMeshes) {
  writeAll(zero3(), 4);
  expectRestores(ShardLayout()); // one rank, no mesh: concatenated
  expectRestores(zero3());       // the same layout
  expectRestores(mesh2x2());     // 4 ranks, split differently
}

TEST_F(ShardedCheckpointTest, SingleFileCheckpointsLoadSharded) {
  std::vector<std::vector<uint8_t>> bufs;
  std::string path;
  ASSERT_TRUE(writeCheckpoint(dir, meta(2), local(ShardLayout(), 0, bufs), 3,
                              path)
                  .ok());
  expectRestores(zero3());
  expectRestores(mesh2x2());
  // And a 2x2 checkpoint back at dp=2 and at one rank.
  fs::remove_all(dir);
  writeAll(mesh2x2(), 3);
  expectRestores(zero3());
  expectRestores(ShardLayout());
}

TEST_F(ShardedCheckpointTest, ReadsGlobalTensorsWithTheirLayout) {
  writeAll(mesh2x2(), 6);
  StoredCheckpoint ckpt;
  Status s = readCheckpoint(dir, ckpt);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(ckpt.meta.step, 6);
  ASSERT_EQ(ckpt.mesh.size(), 2u);
  EXPECT_EQ(ckpt.numFiles, 4);
  ASSERT_EQ(ckpt.tensors.size(), globals.size());
  for (size_t i = 0; i < globals.size(); ++i) {
    EXPECT_EQ(ckpt.tensors[i].name, globals[i].name);
    EXPECT_EQ(ckpt.tensors[i].array.shape, globals[i].shape);
    EXPECT_EQ(ckpt.tensors[i].array.data, globals[i].bytes) << globals[i].name;
  }
  EXPECT_EQ(ckpt.tensors[0].numBlocks, 4);
  EXPECT_EQ(ckpt.tensors[0].dims[0], std::vector<std::string>{"tp"});
}

TEST_F(ShardedCheckpointTest, AViewIsStoredInItsStoredShape) {
  writeAll(tpView(), 4);
  std::string path = dir + "/step-00000004";
  std::ifstream in(path + "/manifest.json");
  nlohmann::json j = nlohmann::json::parse(in);
  // Blocks inside bigger entries: version 2 readers must refuse it.
  EXPECT_EQ(j["format_version"], 3);
  for (const auto &t : j["tensors"]) {
    if (t["name"] == "fc.weight") {
      EXPECT_EQ(t["shape"], nlohmann::json({4, 6}));
      EXPECT_EQ(t["view_shape"], nlohmann::json({4, 3, 2}));
      EXPECT_EQ(t["dims"], nlohmann::json::parse(R"([[], [], ["tp"]])"));
      ASSERT_EQ(t["blocks"].size(), 6u);
      // Rank 1's second column: column 3 of the stored tensor, column 1
      // of its [4, 3] entry.
      const auto &b = t["blocks"][4];
      EXPECT_EQ(b["file"], "rank-00001-of-00002.safetensors");
      EXPECT_EQ(b["offsets"], nlohmann::json({0, 3}));
      EXPECT_EQ(b["shape"], nlohmann::json({4, 1}));
      EXPECT_EQ(b["at"], nlohmann::json({0, 1}));
      EXPECT_EQ(b["entry_shape"], nlohmann::json({4, 3}));
    }
    // Viewed but replicated: one whole block, stored shape, no "at".
    if (t["name"] == "mask") {
      EXPECT_EQ(t["shape"], nlohmann::json({2}));
      ASSERT_EQ(t["blocks"].size(), 1u);
      EXPECT_FALSE(t["blocks"][0].contains("at"));
      EXPECT_EQ(t["blocks"][0]["shape"], nlohmann::json({2}));
    }
  }
  StoredCheckpoint ckpt;
  Status s = readCheckpoint(path, ckpt);
  ASSERT_TRUE(s.ok()) << s.message;
  for (size_t i = 0; i < globals.size(); ++i) {
    EXPECT_EQ(ckpt.tensors[i].array.shape, globals[i].shape);
    EXPECT_EQ(ckpt.tensors[i].array.data, globals[i].bytes) << globals[i].name;
  }
  EXPECT_EQ(ckpt.tensors[0].viewShape, (std::vector<int64_t>{4, 3, 2}));
  EXPECT_EQ(ckpt.tensors[0].numBlocks, 2); // one per part file
}

TEST_F(ShardedCheckpointTest, ViewsReshardToAndFromPlainLayouts) {
  // Written with views at tp=2: back at tp=2, at one rank, at dp=2
  // (replicated and ZeRO-3) and under other views.
  writeAll(tpView(), 4);
  expectRestores(tpView());
  expectRestores(ShardLayout());
  expectRestores(dpReplicated());
  expectRestores(zero3());
  expectRestores(meshView2x2());
  // And the reverse: plain checkpoints restored into views.
  fs::remove_all(dir);
  writeAll(dpReplicated(), 5);
  expectRestores(tpView());
  expectRestores(meshView2x2());
  fs::remove_all(dir);
  writeAll(mesh2x2(), 6);
  expectRestores(tpView());
  fs::remove_all(dir);
  std::vector<std::vector<uint8_t>> bufs;
  std::string path;
  ASSERT_TRUE(
      writeCheckpoint(dir, meta(2), local(ShardLayout(), 0, bufs), 3, path)
          .ok());
  expectRestores(tpView());
  expectRestores(meshView2x2());
  // Views written on dp=2 x tp=2, restored plain and as other views.
  fs::remove_all(dir);
  writeAll(meshView2x2(), 7);
  expectRestores(ShardLayout());
  expectRestores(tpView());
  expectRestores(mesh2x2());
}

TEST_F(ShardedCheckpointTest, AViewedTensorWithoutAMeshIsSavedStored) {
  ShardLayout l = layout(R"({"shardings": {
    "fc.weight": {"global_shape": [4, 3, 2], "dims": [[], [], []],
                  "stored_shape": [4, 6]}}})");
  std::vector<std::vector<uint8_t>> bufs;
  std::string path;
  Status s = writeCheckpoint(dir, meta(3), local(l, 0, bufs), l, 0, 1, 3, path);
  ASSERT_TRUE(s.ok()) << s.message;
  std::ifstream in(path + "/manifest.json");
  nlohmann::json j = nlohmann::json::parse(in);
  EXPECT_EQ(j["format_version"], kSingleFileCheckpointFormatVersion);
  EXPECT_EQ(j["tensors"][0]["shape"], nlohmann::json({4, 6}));
  expectRestores(l);
  expectRestores(tpView());
}

TEST_F(ShardedCheckpointTest, RefusesBlocksOutsideTheirEntry) {
  std::string manifest = dir + "/step-00000004/manifest.json";
  auto damage = [&](const std::function<void(nlohmann::json &)> &edit) {
    fs::remove_all(dir);
    writeAll(tpView(), 4);
    nlohmann::json j;
    {
      std::ifstream in(manifest);
      j = nlohmann::json::parse(in);
    }
    edit(j["tensors"][0]["blocks"][1]);
    std::ofstream(manifest) << j.dump();
    StoredCheckpoint ckpt;
    return readCheckpoint(dir + "/step-00000004", ckpt);
  };
  // Column 2 of a 3-column entry is its last: one further is outside.
  Status s = damage([](nlohmann::json &b) { b["at"] = {0, 3}; });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("is damaged"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("tensor 'fc.weight': block 4x1 at 0x2 lies "
                           "outside its entry in "
                           "rank-00000-of-00002.safetensors ('at' [0,3], "
                           "'entry_shape' [4,3])"),
            std::string::npos)
      << s.message;
  s = damage([](nlohmann::json &b) { b["entry_shape"] = {4}; });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("lies outside its entry"), std::string::npos)
      << s.message;
  // Inside a bigger entry than the file holds.
  s = damage([](nlohmann::json &b) { b["entry_shape"] = {4, 4}; });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("tensor 'fc.weight' is missing or differs from "
                           "the manifest"),
            std::string::npos)
      << s.message;
  s = damage([](nlohmann::json &b) { b["at"] = "x"; });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("has a block with an invalid 'at'"),
            std::string::npos)
      << s.message;
  // Without "at" and "entry_shape" the block is read as its entry, which
  // here it is not.
  s = damage([](nlohmann::json &b) {
    b.erase("at");
    b.erase("entry_shape");
  });
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("differs from the manifest"), std::string::npos)
      << s.message;
}

TEST_F(ShardedCheckpointTest, RefusesMissingOrDamagedParts) {
  writeAll(zero3(), 4);
  std::string part = dir + "/step-00000004/rank-00001-of-00002.safetensors";
  std::vector<std::vector<uint8_t>> bufs;
  auto restore = [&]() {
    RestoreResult r;
    return restoreLatestCheckpoint(dir, local(ShardLayout(), 0, bufs),
                                   ShardLayout(), 0, "{\"source\": \"test\"}",
                                   r);
  };
  // A flipped byte: the checksum names the part.
  {
    std::fstream f(part, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  StoredCheckpoint ckpt;
  Status s = readCheckpoint(dir + "/step-00000004", ckpt);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("rank-00001-of-00002.safetensors: checksum"),
            std::string::npos)
      << s.message;
  // Truncated.
  fs::resize_file(part, 40);
  s = readCheckpoint(dir + "/step-00000004", ckpt);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("rank-00001-of-00002.safetensors: 40 bytes but "
                           "the manifest says"),
            std::string::npos)
      << s.message;
  // Missing: the newest (only) checkpoint is unusable.
  fs::remove(part);
  s = restore();
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("no usable checkpoint"), std::string::npos);
  EXPECT_NE(s.message.find("rank-00001-of-00002.safetensors"),
            std::string::npos)
      << s.message;
}

TEST_F(ShardedCheckpointTest, FallsBackPastAnIncompleteNewerCheckpoint) {
  writeAll(zero3(), 4);
  writeAll(zero3(), 8);
  fs::remove(dir + "/step-00000008/rank-00000-of-00002.safetensors");
  std::vector<std::vector<uint8_t>> bufs;
  RestoreResult r;
  Status s = restoreLatestCheckpoint(dir, local(zero3(), 1, bufs, false),
                                     zero3(), 1, "{\"source\": \"test\"}", r);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(r.meta.step, 4);
  ASSERT_FALSE(r.warnings.empty());
  EXPECT_NE(r.warnings[0].find("rank-00000-of-00002.safetensors"),
            std::string::npos);
  // Only rank 0 moves damaged checkpoints aside.
  EXPECT_TRUE(fs::exists(dir + "/step-00000008"));
}

TEST_F(ShardedCheckpointTest, RankZeroWaitsForTheOthersThenGivesUp) {
  ShardLayout l = zero3();
  std::vector<std::vector<uint8_t>> bufs;
  std::string path;
  Status s = writeCheckpoint(dir, meta(5), local(l, 0, bufs), l, 0, 2, 3,
                             path, 0.05);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("rank(s) 1"), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("rank-00001-of-00002"), std::string::npos);
  EXPECT_TRUE(listCheckpoints(dir).empty());
  // Rank 1 arrives; rank 0 retries and commits.
  ASSERT_TRUE(writeCheckpoint(dir, meta(5), local(l, 1, bufs), l, 1, 2, 3,
                              path, 0.05)
                  .ok());
  EXPECT_TRUE(listCheckpoints(dir).empty()); // only rank 0 commits
  s = writeCheckpoint(dir, meta(5), local(l, 0, bufs), l, 0, 2, 3, path, 0.05);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(listCheckpoints(dir).size(), 1u);
}

TEST_F(ShardedCheckpointTest, RefusesOtherGlobalShapesAndWorldSizes) {
  writeAll(zero3(), 4);
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<CheckpointTensor> t = local(ShardLayout(), 0, bufs);
  std::vector<float> wide(4 * 8);
  t[0].shape = {4, 8};
  t[0].data = wide.data();
  RestoreResult r;
  Status s = restoreLatestCheckpoint(dir, t, ShardLayout(), 0, "", r);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("tensor 'fc.weight' is param F32 4x6 in the "
                           "checkpoint but param F32 4x8 in this model"),
            std::string::npos)
      << s.message;
  std::string path;
  s = writeCheckpoint(dir, meta(9), local(zero3(), 0, bufs), zero3(), 0, 4, 3,
                      path);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("does not fit the mesh dp=2"), std::string::npos)
      << s.message;
}

TEST_F(ShardedCheckpointTest, RejectsMalformedLayouts) {
  ShardLayout l;
  Status s = parseShardLayout(
      R"({"mesh": {"axes": [{"name": "dp", "size": 2}]},
          "shardings": {"w": {"global_shape": [4], "dims": [["tp"]]}}})",
      l);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("sharding of 'w' uses mesh axis 'tp'"),
            std::string::npos)
      << s.message;
  s = parseShardLayout(
      R"({"mesh": {"axes": [{"name": "tp", "size": 2}]},
          "shardings": {"qkv": {"global_shape": [4, 3, 2],
                                "dims": [[], [], ["tp"]],
                                "stored_shape": [6, 4]}}})",
      l);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("sharding of 'qkv': stored_shape [6,4] is not a "
                           "merge of consecutive dims of global_shape "
                           "[4,3,2]"),
            std::string::npos)
      << s.message;
  s = parseShardLayout(
      R"({"mesh": {"axes": [{"name": "tp", "size": 2}]},
          "shardings": {"qkv": {"global_shape": [4, 3, 2],
                                "dims": [[], [], ["tp"]],
                                "stored_shape": [4, 7]}}})",
      l);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("sharding of 'qkv': stored_shape [4,7] has 28 "
                           "elements but global_shape [4,3,2] has 24"),
            std::string::npos)
      << s.message;
  ASSERT_TRUE(parseShardLayout("{\"source\": \"x\"}", l).ok());
  EXPECT_TRUE(l.mesh.empty());
  EXPECT_EQ(l.numRanks(), 1);
}

TEST(ShardedInitialWeightsTest, EachRankCopiesItsBlockOfTheGlobalImage) {
  // dp=2, ZeRO-3: w and its momentum are split along dim 0; b is
  // replicated. The weights image holds global w (4x1) and b.
  std::vector<test::TestTensor> args = {
      {"w", "param", DType::F32, {2, 1}},
      {"b", "param", DType::F32, {1}},
      {"momentum_buffer.w", "state", DType::F32, {2, 1}},
      {"input", "input", DType::F32, {2, 4}},
      {"step", "input", DType::I64, {}},
      {"lr", "input", DType::F32, {}},
  };
  std::vector<test::TestTensor> results = {
      {"w", "param", DType::F32, {2, 1}},
      {"b", "param", DType::F32, {1}},
      {"momentum_buffer.w", "state", DType::F32, {2, 1}},
      {"loss", "output", DType::F32, {}},
  };
  HostArray w = HostArray::zeros(DType::F32, {4, 1}),
            b = HostArray::zeros(DType::F32, {1});
  for (int i = 0; i < 4; ++i)
    w.setFromDouble(i, 1.5 + i);
  b.setFromDouble(0, -7);
  std::string json = R"({"mesh": {"axes": [{"name": "dp", "size": 2}]},
    "shardings": {
      "w": {"global_shape": [4, 1], "dims": [["dp"], []]},
      "momentum_buffer.w": {"global_shape": [4, 1], "dims": [["dp"], []]}}})";
  test::TestModel model(args, results, json, {{"w", w}, {"b", b}},
                        [](test::TestModel &, void *const *, void *const *) {});
  ModelSpec spec;
  Status s = loadModelSpec(model.model(), spec);
  ASSERT_TRUE(s.ok()) << s.message;
  for (int64_t rank = 0; rank < 2; ++rank) {
    std::vector<float> wl(2, -1), bl(1, -1), m(2, 0);
    std::vector<void *> data(args.size(), nullptr);
    data[0] = wl.data();
    data[1] = bl.data();
    data[2] = m.data();
    s = loadInitialWeights(model.model(), spec, data, rank);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(wl, (std::vector<float>{1.5f + 2 * rank, 2.5f + 2 * rank}));
    EXPECT_EQ(bl, std::vector<float>{-7});
    // Optimizer state is not in the image: it stays as allocated (zero).
    EXPECT_EQ(m, (std::vector<float>{0, 0}));
  }
  // An image whose tensor is not the global shape is refused by name.
  HostArray small = HostArray::zeros(DType::F32, {2, 1});
  test::TestModel wrong(args, results, json, {{"w", small}, {"b", b}},
                        [](test::TestModel &, void *const *, void *const *) {});
  ASSERT_TRUE(loadModelSpec(wrong.model(), spec).ok());
  std::vector<float> wl(2), bl(1), m(2);
  s = loadInitialWeights(wrong.model(), spec, {wl.data(), bl.data(), m.data()},
                         1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("tensor 'w' has shape [2,1] but the step takes "
                           "4x1 (global; 2x1 per rank)"),
            std::string::npos)
      << s.message;
}

TEST(ShardedInitialWeightsTest, ARankCopiesTheBoxesOfItsViewBlock) {
  // tp=2, w stored [2, 6] (a fused q/k/v weight) held as the view
  // [2, 3, 2] split on dim 2: rank r holds columns r, 2 + r and 4 + r. b
  // is replicated but held as [3, 2].
  std::vector<test::TestTensor> args = {
      {"w", "param", DType::F32, {2, 3, 1}},
      {"b", "param", DType::F32, {3, 2}},
      {"exp_avg.w", "state", DType::F32, {2, 3, 1}},
      {"input", "input", DType::F32, {2, 4}},
      {"step", "input", DType::I64, {}},
      {"lr", "input", DType::F32, {}},
  };
  std::vector<test::TestTensor> results = {
      {"w", "param", DType::F32, {2, 3, 1}},
      {"b", "param", DType::F32, {3, 2}},
      {"exp_avg.w", "state", DType::F32, {2, 3, 1}},
      {"loss", "output", DType::F32, {}},
  };
  HostArray w = HostArray::zeros(DType::F32, {2, 6}),
            b = HostArray::zeros(DType::F32, {6});
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 6; ++j)
      w.setFromDouble(i * 6 + j, 10 * i + j);
  for (int i = 0; i < 6; ++i)
    b.setFromDouble(i, -i);
  std::string json = R"({"mesh": {"axes": [{"name": "tp", "size": 2}]},
    "shardings": {
      "w": {"global_shape": [2, 3, 2], "dims": [[], [], ["tp"]],
            "stored_shape": [2, 6]},
      "exp_avg.w": {"global_shape": [2, 3, 2], "dims": [[], [], ["tp"]],
                    "stored_shape": [2, 6]},
      "b": {"global_shape": [3, 2], "dims": [[], []], "stored_shape": [6]}}})";
  test::TestModel model(args, results, json, {{"w", w}, {"b", b}},
                        [](test::TestModel &, void *const *, void *const *) {});
  ModelSpec spec;
  Status s = loadModelSpec(model.model(), spec);
  ASSERT_TRUE(s.ok()) << s.message;
  for (int64_t rank = 0; rank < 2; ++rank) {
    std::vector<float> wl(6, -1), bl(6, 1), m(6, 0);
    s = loadInitialWeights(model.model(), spec,
                           {wl.data(), bl.data(), m.data()}, rank);
    ASSERT_TRUE(s.ok()) << s.message;
    std::vector<float> want;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        want.push_back(float(10 * i + 2 * j + rank));
    EXPECT_EQ(wl, want) << "rank " << rank;
    EXPECT_EQ(bl, (std::vector<float>{0, -1, -2, -3, -4, -5}));
    EXPECT_EQ(m, std::vector<float>(6, 0));
  }
  // The image holds the stored shape, not the view.
  HostArray viewed = HostArray::zeros(DType::F32, {2, 3, 2});
  test::TestModel wrong(args, results, json, {{"w", viewed}, {"b", b}},
                        [](test::TestModel &, void *const *, void *const *) {});
  ASSERT_TRUE(loadModelSpec(wrong.model(), spec).ok());
  std::vector<float> wl(6), bl(6), m(6);
  s = loadInitialWeights(wrong.model(), spec, {wl.data(), bl.data(), m.data()},
                         1);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("tensor 'w' has shape [2,3,2] but the step takes "
                           "2x6 (global; held as a view 2x3x2, 2x3x1 per "
                           "rank)"),
            std::string::npos)
      << s.message;
}

} // namespace
