//===- DataLoaderTest.cpp - Tests for the training data loader ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Runtime/DataLoader.h"
#include "weft/Formats/Npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include <unistd.h>

using namespace weft::rt;
namespace fs = std::filesystem;

namespace {

class DataLoaderTest : public ::testing::Test {
protected:
  std::string dir;

  void SetUp() override {
    dir = ::testing::TempDir() + "weft_dl_" + std::to_string(::getpid()) + "_" +
          ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string path(const std::string &name) { return dir + "/" + name; }

  /// x[i] = (i, i + 0.5) as `dtype`, y[i] = i % 3 as int64.
  void writeArrays(int64_t n, DType xType = DType::F32,
                   DType yType = DType::I64) {
    HostArray x = HostArray::zeros(xType, {n, 2});
    HostArray y = HostArray::zeros(yType, {n});
    for (int64_t i = 0; i < n; ++i) {
      x.setFromDouble(2 * i, double(i));
      x.setFromDouble(2 * i + 1, double(i) + 0.5);
      y.setFromDouble(i, double(i % 3));
    }
    ASSERT_TRUE(writeNpy(path("x.npy"), x).ok());
    ASSERT_TRUE(writeNpy(path("y.npy"), y).ok());
  }

  DataLoaderOptions arrayOptions(int64_t batch, bool shuffle = true) {
    DataLoaderOptions o;
    o.inputs = {{"input", DType::F32, {batch, 2}},
                {"labels", DType::I64, {batch}}};
    o.arrays = {{"input", path("x.npy")}, {"labels", path("y.npy")}};
    o.shuffle = shuffle;
    o.numClasses = 3;
    return o;
  }
};

/// The sample indices of an array batch (x[i][0] == i).
std::vector<int64_t> samplesOf(const Batch &b, int64_t batch) {
  std::vector<int64_t> out;
  const float *x = reinterpret_cast<const float *>(b.inputs[0].data());
  for (int64_t i = 0; i < batch; ++i)
    out.push_back(int64_t(x[2 * i]));
  return out;
}

TEST(RandomTest, SplitMix64MatchesReference) {
  // The first outputs of the reference implementation seeded with 0.
  SplitMix64 sm(0);
  EXPECT_EQ(sm.next(), 0xe220a8397b1dcdafULL);
  EXPECT_EQ(sm.next(), 0x6e789e6aa1b965f4ULL);
}

TEST(RandomTest, EpochOrderIsADeterministicPermutation) {
  std::vector<uint32_t> a = epochOrder(1, 0, 1000);
  EXPECT_EQ(a, epochOrder(1, 0, 1000));
  EXPECT_NE(a, epochOrder(1, 1, 1000));
  EXPECT_NE(a, epochOrder(2, 0, 1000));
  std::set<uint32_t> seen(a.begin(), a.end());
  EXPECT_EQ(seen.size(), 1000u);
  EXPECT_EQ(*seen.rbegin(), 999u);
  EXPECT_TRUE(epochOrder(5, 3, 0).empty());
  EXPECT_EQ(epochOrder(5, 3, 1), std::vector<uint32_t>{0});
  // Pinned so that a change of the generator (which would silently change
  // every run's data order, and break resuming old checkpoints) is noticed.
  EXPECT_EQ(epochOrder(1, 0, 10),
            (std::vector<uint32_t>{9, 5, 6, 1, 0, 7, 8, 4, 3, 2}));
}

TEST(RandomTest, BelowIsUniformEnough) {
  Xoshiro256 rng(7);
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < 30000; ++i)
    ++counts[rng.below(3)];
  for (int c : counts)
    EXPECT_NEAR(c, 10000, 500);
}

TEST(DataLoaderStateTest, RoundTripsThroughJson) {
  DataLoaderState st;
  st.seed = 0xfedcba9876543210ULL; // Above 2^53: kept exact as a string.
  st.epoch = 4;
  st.samplesConsumed = 12;
  st.numSamples = 30;
  st.shuffle = false;
  DataLoaderState back;
  ASSERT_TRUE(DataLoaderState::fromJson(st.toJson(), back).ok());
  EXPECT_EQ(back.seed, st.seed);
  EXPECT_EQ(back.epoch, 4);
  EXPECT_EQ(back.samplesConsumed, 12);
  EXPECT_EQ(back.numSamples, 30);
  EXPECT_FALSE(back.shuffle);
  EXPECT_FALSE(DataLoaderState::fromJson("{\"seed\": 1}", back).ok());
  EXPECT_FALSE(DataLoaderState::fromJson("nonsense", back).ok());
}

TEST_F(DataLoaderTest, NoShuffleVisitsFileOrderAndDropsPartialBatch) {
  writeArrays(10);
  std::unique_ptr<DataLoader> dl;
  ASSERT_TRUE(DataLoader::open(arrayOptions(4, false), {}, dl).ok());
  EXPECT_EQ(dl->numSamples(), 10);
  EXPECT_EQ(dl->batchesPerEpoch(), 2);
  std::vector<std::vector<int64_t>> want = {
      {0, 1, 2, 3}, {4, 5, 6, 7}, {0, 1, 2, 3}, {4, 5, 6, 7}};
  for (size_t k = 0; k < want.size(); ++k) {
    Batch b;
    ASSERT_TRUE(dl->next(b).ok());
    EXPECT_EQ(samplesOf(b, 4), want[k]) << "batch " << k;
    const int64_t *y = reinterpret_cast<const int64_t *>(b.inputs[1].data());
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(y[i], want[k][i] % 3);
    EXPECT_GE(b.waitSeconds, 0);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.inputs[0].data()) % 64, 0u);
  }
  EXPECT_EQ(dl->state().epoch, 2);
  EXPECT_EQ(dl->state().samplesConsumed, 0);
}

TEST_F(DataLoaderTest, ShuffleCoversEachEpochAndDependsOnSeed) {
  writeArrays(12);
  auto collect = [&](uint64_t seed) {
    DataLoaderState st;
    st.seed = seed;
    std::unique_ptr<DataLoader> dl;
    EXPECT_TRUE(DataLoader::open(arrayOptions(4), st, dl).ok());
    std::vector<int64_t> all;
    for (int k = 0; k < 6; ++k) {
      Batch b;
      EXPECT_TRUE(dl->next(b).ok());
      for (int64_t s : samplesOf(b, 4))
        all.push_back(s);
    }
    return all;
  };
  std::vector<int64_t> a = collect(11);
  EXPECT_EQ(a, collect(11));
  EXPECT_NE(a, collect(12));
  for (int e = 0; e < 2; ++e) {
    std::set<int64_t> epoch(a.begin() + 12 * e, a.begin() + 12 * (e + 1));
    EXPECT_EQ(epoch.size(), 12u) << "epoch " << e;
  }
  EXPECT_NE(std::vector<int64_t>(a.begin(), a.begin() + 12),
            std::vector<int64_t>(a.begin() + 12, a.end()))
      << "epochs are reshuffled";
}

TEST_F(DataLoaderTest, ResumingFromAStateRepeatsTheSameBatches) {
  writeArrays(10);
  DataLoaderState start;
  start.seed = 99;
  std::unique_ptr<DataLoader> dl;
  ASSERT_TRUE(DataLoader::open(arrayOptions(3), start, dl).ok());
  std::vector<std::vector<int64_t>> batches;
  DataLoaderState mid;
  for (int k = 0; k < 8; ++k) {
    Batch b;
    ASSERT_TRUE(dl->next(b).ok());
    batches.push_back(samplesOf(b, 3));
    if (k == 3)
      mid = dl->state();
  }
  // 10 samples in batches of 3: three per epoch, so batch 4 is epoch 1's
  // second.
  EXPECT_EQ(mid.epoch, 1);
  EXPECT_EQ(mid.samplesConsumed, 3);
  DataLoaderState restored;
  ASSERT_TRUE(DataLoaderState::fromJson(mid.toJson(), restored).ok());
  std::unique_ptr<DataLoader> again;
  ASSERT_TRUE(DataLoader::open(arrayOptions(3), restored, again).ok());
  for (int k = 4; k < 8; ++k) {
    Batch b;
    ASSERT_TRUE(again->next(b).ok());
    EXPECT_EQ(samplesOf(b, 3), batches[k]) << "batch " << k;
  }
}

TEST_F(DataLoaderTest, RanksSplitEachMicroBatch) {
  // 2 micro-batches of 4 samples over 2 ranks: rank r holds, per
  // micro-batch, its 2 rows; stacked, the ranks' blocks are the 1-rank
  // global batch, micro-batch by micro-batch.
  writeArrays(20);
  DataLoaderState start;
  start.seed = 3;
  std::unique_ptr<DataLoader> one;
  ASSERT_TRUE(DataLoader::open(arrayOptions(8), start, one).ok());
  std::vector<std::unique_ptr<DataLoader>> ranks(2);
  for (int r = 0; r < 2; ++r) {
    DataLoaderOptions o = arrayOptions(4);
    o.rank = r;
    o.numRanks = 2;
    o.microBatches = 2;
    ASSERT_TRUE(DataLoader::open(o, start, ranks[r]).ok());
  }
  for (int step = 0; step < 5; ++step) {
    Batch whole, part0, part1;
    ASSERT_TRUE(one->next(whole).ok());
    ASSERT_TRUE(ranks[0]->next(part0).ok());
    ASSERT_TRUE(ranks[1]->next(part1).ok());
    std::vector<int64_t> w = samplesOf(whole, 8), a = samplesOf(part0, 4),
                         b = samplesOf(part1, 4);
    std::vector<int64_t> together = {a[0], a[1], b[0], b[1],
                                     a[2], a[3], b[2], b[3]};
    EXPECT_EQ(together, w) << "step " << step;
  }
  DataLoaderOptions bad = arrayOptions(3);
  bad.microBatches = 2;
  std::unique_ptr<DataLoader> refused;
  EXPECT_FALSE(DataLoader::open(bad, start, refused).ok());
}

TEST_F(DataLoaderTest, RanksSplitTheSameGlobalBatches) {
  // 3 ranks with 2 samples each see, together, exactly what 1 rank with
  // 6 does, step after step across epochs (20 samples: 3 global batches
  // per epoch), and every rank's state is that rank's state.
  writeArrays(20);
  DataLoaderState start;
  start.seed = 5;
  std::unique_ptr<DataLoader> one;
  ASSERT_TRUE(DataLoader::open(arrayOptions(6), start, one).ok());
  std::vector<std::unique_ptr<DataLoader>> ranks(3);
  for (int r = 0; r < 3; ++r) {
    DataLoaderOptions o = arrayOptions(2);
    o.rank = r;
    o.numRanks = 3;
    ASSERT_TRUE(DataLoader::open(o, start, ranks[r]).ok());
    EXPECT_EQ(ranks[r]->batchSize(), 2);
    EXPECT_EQ(ranks[r]->globalBatchSize(), 6);
    EXPECT_EQ(ranks[r]->batchesPerEpoch(), 3);
  }
  for (int step = 0; step < 7; ++step) {
    Batch whole;
    ASSERT_TRUE(one->next(whole).ok());
    std::vector<int64_t> together;
    for (int r = 0; r < 3; ++r) {
      Batch part;
      ASSERT_TRUE(ranks[r]->next(part).ok());
      for (int64_t s : samplesOf(part, 2))
        together.push_back(s);
      EXPECT_EQ(part.stateAfter.samplesConsumed,
                whole.stateAfter.samplesConsumed);
      EXPECT_EQ(part.stateAfter.epoch, whole.stateAfter.epoch);
    }
    EXPECT_EQ(together, samplesOf(whole, 6)) << "step " << step;
  }
  // A state saved by the 3 ranks resumes on 1 rank where they stopped.
  std::unique_ptr<DataLoader> resumed;
  ASSERT_TRUE(
      DataLoader::open(arrayOptions(6), ranks[0]->state(), resumed).ok());
  Batch next, expected;
  ASSERT_TRUE(resumed->next(next).ok());
  ASSERT_TRUE(one->next(expected).ok());
  EXPECT_EQ(samplesOf(next, 6), samplesOf(expected, 6));
}

TEST_F(DataLoaderTest, RanksNeedAWholeGlobalBatch) {
  writeArrays(5);
  DataLoaderOptions o = arrayOptions(2);
  o.rank = 1;
  o.numRanks = 3;
  std::unique_ptr<DataLoader> dl;
  Status s = DataLoader::open(o, DataLoaderState(), dl);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message.find("fewer samples than the batch size 6 (2 on each "
                           "of 3 ranks)"),
            std::string::npos)
      << s.message;
  o.rank = 3;
  s = DataLoader::open(o, DataLoaderState(), dl);
  EXPECT_NE(s.message.find("rank 3 is not one of 3 ranks"), std::string::npos)
      << s.message;
}

TEST_F(DataLoaderTest, ConvertsCompatibleDtypes) {
  writeArrays(4, DType::F64, DType::U8);
  std::unique_ptr<DataLoader> dl;
  ASSERT_TRUE(DataLoader::open(arrayOptions(4, false), {}, dl).ok());
  Batch b;
  ASSERT_TRUE(dl->next(b).ok());
  const float *x = reinterpret_cast<const float *>(b.inputs[0].data());
  const int64_t *y = reinterpret_cast<const int64_t *>(b.inputs[1].data());
  EXPECT_EQ(x[3], 1.5f);
  EXPECT_EQ(y[2], 2);
}

TEST_F(DataLoaderTest, RefusesFloatsForIntegerInputs) {
  writeArrays(4, DType::F32, DType::F32);
  std::unique_ptr<DataLoader> dl;
  Status s = DataLoader::open(arrayOptions(4), {}, dl);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find(path("y.npy")), std::string::npos) << s.message;
  EXPECT_NE(s.message.find("cannot feed input 'labels'"), std::string::npos)
      << s.message;
}

TEST_F(DataLoaderTest, ReportsIntegersThatDoNotFit) {
  writeArrays(4);
  HostArray y = HostArray::zeros(DType::I64, {4});
  y.setFromDouble(2, 1e12);
  ASSERT_TRUE(writeNpy(path("y.npy"), y).ok());
  DataLoaderOptions o = arrayOptions(4, false);
  o.inputs[1].dtype = DType::I32;
  o.numClasses = 0;
  std::unique_ptr<DataLoader> dl;
  ASSERT_TRUE(DataLoader::open(o, {}, dl).ok());
  Batch b;
  Status s = dl->next(b);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("value 1000000000000 at index 2"), std::string::npos)
      << s.message;
  // The error sticks.
  EXPECT_FALSE(dl->next(b).ok());
}

TEST_F(DataLoaderTest, ReportsLabelsOutOfRangeUpFront) {
  writeArrays(6);
  HostArray y = HostArray::zeros(DType::I64, {6});
  y.setFromDouble(4, 7);
  ASSERT_TRUE(writeNpy(path("y.npy"), y).ok());
  std::unique_ptr<DataLoader> dl;
  Status s = DataLoader::open(arrayOptions(2), {}, dl);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message, path("y.npy") +
                           ": label 7 at index 4 is outside [0, 3) (the "
                           "model has 3 classes)");
}

TEST_F(DataLoaderTest, RejectsTooFewSamples) {
  writeArrays(3);
  std::unique_ptr<DataLoader> dl;
  Status s = DataLoader::open(arrayOptions(4), {}, dl);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("fewer samples than the batch size 4"),
            std::string::npos)
      << s.message;
}

TEST_F(DataLoaderTest, ExpandsDirectoriesAndGlobsInNameOrder) {
  for (const char *name : {"b.bin", "a.bin", "c.txt", "10.bin"})
    std::ofstream(path(name)) << "xx";
  std::vector<std::string> got;
  ASSERT_TRUE(expandDataPath(dir, got).ok());
  EXPECT_EQ(got, (std::vector<std::string>{path("10.bin"), path("a.bin"),
                                           path("b.bin")}));
  got.clear();
  ASSERT_TRUE(expandDataPath(dir + "/[ab].bin", got).ok());
  EXPECT_EQ(got, (std::vector<std::string>{path("a.bin"), path("b.bin")}));
  EXPECT_FALSE(expandDataPath(dir + "/*.nothing", got).ok());
  EXPECT_FALSE(expandDataPath(dir + "/missing.bin", got).ok());
}

} // namespace
