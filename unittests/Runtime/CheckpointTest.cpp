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

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

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

} // namespace
