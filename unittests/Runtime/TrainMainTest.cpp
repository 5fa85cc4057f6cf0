//===- TrainMainTest.cpp - End-to-end tests of the training loop ----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Drives runTraining — the code a compiled executable runs — with the
// hand-written models of TestModels.h, real files and real checkpoints.
//
//===----------------------------------------------------------------------===//

#include "TestModels.h"

#include "weft/Runtime/Checkpoint.h"
#include "weft/Runtime/Cuda.h"
#include "weft/Formats/Npy.h"
#include "weft/Formats/SafeTensors.h"
#include "weft/Runtime/TrainMain.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <unistd.h>

using namespace weft::rt;
using namespace weft::rt::test;
namespace fs = std::filesystem;

namespace {

struct RunResult {
  int code;
  std::string out, err;
};

RunResult train(TestModel &m, std::vector<std::string> args) {
  args.insert(args.begin(), "train");
  std::vector<const char *> argv;
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  std::ostringstream out, err;
  m.records.clear();
  int code = runTraining(m.model(), int(argv.size()), argv.data(), out, err);
  return {code, out.str(), err.str()};
}

bool contains(const std::string &haystack, const std::string &needle) {
  return haystack.find(needle) != std::string::npos;
}

std::string readFile(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<nlohmann::json> readJsonLines(const std::string &path) {
  std::vector<nlohmann::json> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    out.push_back(nlohmann::json::parse(line));
  return out;
}

class TrainTest : public ::testing::Test {
protected:
  std::string dir;

  void SetUp() override {
    dir = ::testing::TempDir() + "weft_train_" + std::to_string(::getpid()) +
          "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }
  std::string path(const std::string &name) { return dir + "/" + name; }

  /// Linear-regression data: x[i][j] = i + j / 10 (so x[i][0] names the
  /// sample), y[i] = sum_j x[i][j] / 4.
  void writeLinearData(int64_t n, int64_t d, const std::string &x = "x.npy",
                       const std::string &y = "y.npy") {
    HostArray xa = HostArray::zeros(DType::F32, {n, d});
    HostArray ya = HostArray::zeros(DType::F32, {n, 1});
    for (int64_t i = 0; i < n; ++i) {
      double sum = 0;
      for (int64_t j = 0; j < d; ++j) {
        double v = double(i) + double(j) / 10;
        xa.setFromDouble(i * d + j, v / 10);
        sum += v;
      }
      ya.setFromDouble(i, sum / 40);
    }
    ASSERT_TRUE(writeNpy(path(x), xa).ok());
    ASSERT_TRUE(writeNpy(path(y), ya).ok());
  }

  std::vector<std::string> linearArgs(int64_t steps) {
    return {"--data",      path("x.npy"), "--labels",
            path("y.npy"), "--steps",     std::to_string(steps),
            "--lr",        "0.05",        "--log-every",
            "1000"};
  }

  /// Writes tokens [first, last) as an llm.c shard or a raw uint16 file.
  void writeTokens(const std::string &name, int first, int last, bool llmc) {
    std::string bytes;
    if (llmc) {
      int32_t header[256] = {20240520, 1, last - first};
      bytes.append(reinterpret_cast<const char *>(header), sizeof(header));
    }
    for (int t = first; t < last; ++t) {
      uint16_t v = uint16_t(t);
      bytes.append(reinterpret_cast<const char *>(&v), 2);
    }
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
};

/// Sample indices of the linear model's recorded batches (x[i][0] * 10).
std::vector<int> linearSamples(const TestModel &m, int64_t d) {
  std::vector<int> out;
  for (const StepRecord &r : m.records) {
    const float *x = reinterpret_cast<const float *>(r.batch[0].data());
    size_t rows = r.batch[0].size() / sizeof(float) / size_t(d);
    for (size_t i = 0; i < rows; ++i)
      out.push_back(int(std::lround(x[i * d] * 10)));
  }
  return out;
}

//===----------------------------------------------------------------------===//
// Data order and the CLI
//===----------------------------------------------------------------------===//

TEST_F(TrainTest, EveryStepRunsInTheRunsContext) {
  writeLinearData(10, 3);
  auto m = makeLinearModel();
  m->contexts.clear();
  std::vector<std::string> args = linearArgs(3);
  args.insert(args.end(), {"--threads", "2"});
  RunResult r = train(*m, args);
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_EQ(m->contexts.size(), 3u);
  for (const WeftRuntimeContext &c : m->contexts) {
    EXPECT_EQ(c.rank, 0);
    EXPECT_EQ(c.worldSize, 1);
    EXPECT_EQ(c.numThreads, 2);
    EXPECT_EQ(c.deviceType, WEFT_DEVICE_CPU);
    EXPECT_EQ(c.threadPool, m->contexts[0].threadPool);
  }
}

TEST_F(TrainTest, RefusesSeveralProcessesAndBadLaunchVariables) {
  writeLinearData(10, 3);
  auto m = makeLinearModel();
  ::setenv("RANK", "0", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  RunResult several = train(*m, linearArgs(2));
  ::setenv("WORLD_SIZE", "two", 1);
  RunResult malformed = train(*m, linearArgs(2));
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  EXPECT_EQ(several.code, 1);
  EXPECT_TRUE(contains(several.err,
                       "torchrun's environment says this is rank 0 of 2, but "
                       "this executable was compiled for one process"))
      << several.err;
  EXPECT_EQ(malformed.code, 1);
  EXPECT_TRUE(contains(malformed.err, "WORLD_SIZE='two' must be an integer"))
      << malformed.err;
  EXPECT_TRUE(m->records.empty());
}

TEST_F(TrainTest, RefusesAModelOfAnotherAbi) {
  writeLinearData(10, 3);
  auto m = makeLinearModel();
  // An executable built before WeftModel.deviceType (version 4) has a
  // shorter table: reading it would read past its end.
  WeftModel old = m->model();
  old.abiVersion = 3;
  std::vector<std::string> args = linearArgs(1);
  args.insert(args.begin(), "train");
  std::vector<const char *> argv;
  for (const std::string &a : args)
    argv.push_back(a.c_str());
  std::ostringstream out, err;
  EXPECT_EQ(runTraining(old, int(argv.size()), argv.data(), out, err), 1);
  EXPECT_TRUE(contains(err.str(), "compiled model uses ABI version 3 but "
                                  "this runtime implements version 4"))
      << err.str();
  EXPECT_TRUE(m->records.empty());
}

TEST_F(TrainTest, NoShuffleTakesBatchesInFileOrder) {
  writeLinearData(10, 3);
  auto m = makeLinearModel();
  std::vector<std::string> args = linearArgs(5);
  args.push_back("--no-shuffle");
  RunResult r = train(*m, args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(linearSamples(*m, 3),
            (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 0, 1,
                              2, 3, 4, 5, 6, 7, 0, 1, 2, 3}));
  ASSERT_EQ(m->records.size(), 5u);
  for (int64_t s = 0; s < 5; ++s) {
    EXPECT_EQ(m->records[s].step, s);
    EXPECT_EQ(m->records[s].lr, 0.05f);
    // hp.momentum defaults to the model JSON's value.
    EXPECT_EQ(m->records[s].hyperParams, std::vector<double>{0.5});
  }
}

TEST_F(TrainTest, ShuffleIsDeterminedBySeed) {
  writeLinearData(12, 3);
  auto m = makeLinearModel();
  auto order = [&](const std::string &seed) {
    std::vector<std::string> args = linearArgs(6);
    args.insert(args.end(), {"--seed", seed});
    RunResult r = train(*m, args);
    EXPECT_EQ(r.code, 0) << r.err;
    return linearSamples(*m, 3);
  };
  std::vector<int> a = order("5");
  EXPECT_EQ(a, order("5"));
  EXPECT_NE(a, order("6"));
  std::vector<int> sorted(a.begin(), a.begin() + 12);
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
}

TEST_F(TrainTest, HyperparameterFlagsComeFromTheModel) {
  writeLinearData(8, 3);
  auto m = makeLinearModel();
  std::vector<std::string> args = linearArgs(2);
  args.insert(args.end(), {"--momentum", "0.25"});
  RunResult r = train(*m, args);
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(m->records[1].hyperParams, std::vector<double>{0.25});
}

TEST_F(TrainTest, HelpDescribesFlagsAndModel) {
  auto m = makeLinearModel();
  RunResult r = train(*m, {"--help"});
  EXPECT_EQ(r.code, 0);
  for (const char *text :
       {"--data", "--labels", "--steps", "--lr", "--seed", "--no-shuffle",
        "--metrics", "--checkpoint-dir", "--checkpoint-every",
        "--keep-checkpoints", "--log-every", "--threads", "--momentum",
        "input: F32 4x3", "labels: F32 4x1", "parameters: 4 in 2 tensors",
        "hyperparameter momentum (--momentum, default 0.5)",
        "source: \"linear-test\""})
    EXPECT_TRUE(contains(r.out, text)) << "missing " << text << " in\n"
                                       << r.out;
}

//===----------------------------------------------------------------------===//
// Metrics
//===----------------------------------------------------------------------===//

TEST_F(TrainTest, WritesMetricsAndProgressLines) {
  writeLinearData(8, 3);
  auto m = makeLinearModel();
  std::vector<std::string> args = linearArgs(5);
  args.insert(args.end(), {"--metrics", path("m.jsonl"), "--log-every", "2"});
  RunResult r = train(*m, args);
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<nlohmann::json> lines = readJsonLines(path("m.jsonl"));
  ASSERT_EQ(lines.size(), 5u);
  for (size_t i = 0; i < lines.size(); ++i) {
    const nlohmann::json &j = lines[i];
    EXPECT_EQ(j["step"], int(i + 1));
    EXPECT_TRUE(j["loss"].is_number());
    EXPECT_GT(j["loss"].get<double>(), 0);
    // The test model halves the lr for steps 0 and 1.
    EXPECT_FLOAT_EQ(j["lr"].get<float>(), i < 2 ? 0.025f : 0.05f);
    EXPECT_GE(j["step_time_s"].get<double>(), 0);
    EXPECT_GE(j["samples_per_s"].get<double>(), 0);
    EXPECT_GE(j["data_wait_s"].get<double>(), 0);
    EXPECT_FALSE(j.contains("tokens_per_s"));
  }
  EXPECT_LT(lines[4]["loss"].get<double>(), lines[0]["loss"].get<double>());
  EXPECT_TRUE(contains(r.out, "step 2/5 (40%) loss ")) << r.out;
  EXPECT_TRUE(contains(r.out, "step 4/5 (80%) loss ")) << r.out;
  EXPECT_TRUE(contains(r.out, "step 5/5 (100%) loss ")) << r.out;
  EXPECT_TRUE(contains(r.out, " samples/s eta ")) << r.out;
  EXPECT_FALSE(contains(r.out, "step 3/5")) << r.out;
}

//===----------------------------------------------------------------------===//
// Token streams
//===----------------------------------------------------------------------===//

/// Checks that the token model saw windows `first`, `first + 1`, ... of a
/// stream whose token i is i (seq 4, batch 2).
void expectWindows(const TestModel &m, std::vector<int> windows) {
  size_t k = 0;
  for (const StepRecord &r : m.records) {
    const int64_t *x = reinterpret_cast<const int64_t *>(r.batch[0].data());
    const int64_t *y = reinterpret_cast<const int64_t *>(r.batch[1].data());
    for (int row = 0; row < 2; ++row, ++k) {
      ASSERT_LT(k, windows.size());
      for (int j = 0; j < 4; ++j) {
        EXPECT_EQ(x[row * 4 + j], windows[k] * 4 + j) << "window " << k;
        EXPECT_EQ(y[row * 4 + j], windows[k] * 4 + j + 1) << "window " << k;
      }
    }
  }
  EXPECT_EQ(k, windows.size());
}

TEST_F(TrainTest, TokenWindowsFromBothBinFormats) {
  auto m = makeTokenModel();
  for (bool llmc : {true, false}) {
    // 43 tokens: windows need 4 + 1 tokens, so (43 - 1) / 4 = 10 windows.
    writeTokens("tokens.bin", 0, 43, llmc);
    RunResult r =
        train(*m, {"--data", path("tokens.bin"), "--steps", "6", "--lr", "0.1",
                   "--no-shuffle", "--metrics", path("m.jsonl")});
    ASSERT_EQ(r.code, 0) << r.err;
    expectWindows(*m, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0, 1});
    std::vector<nlohmann::json> lines = readJsonLines(path("m.jsonl"));
    ASSERT_EQ(lines.size(), 6u);
    EXPECT_TRUE(lines[0].contains("tokens_per_s"));
  }
}

TEST_F(TrainTest, TokenShardsFromADirectoryOrGlob) {
  fs::create_directories(path("shards"));
  // One stream of 0..42 split across formats and files; windows cross
  // shard boundaries.
  writeTokens("shards/part-0.bin", 0, 10, true);
  writeTokens("shards/part-1.bin", 10, 11, false);
  writeTokens("shards/part-2.bin", 11, 43, true);
  std::ofstream(path("shards/README")) << "not a shard";
  auto m = makeTokenModel();
  for (const std::string &data : {path("shards"), path("shards/*.bin")}) {
    RunResult r = train(
        *m, {"--data", data, "--steps", "5", "--lr", "0.1", "--no-shuffle"});
    ASSERT_EQ(r.code, 0) << r.err;
    expectWindows(*m, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
    EXPECT_TRUE(contains(r.out, "43 tokens in 3 shards")) << r.out;
  }
  // An unquoted glob reaches the program as several arguments.
  RunResult r = train(*m, {"--data", path("shards/part-0.bin"),
                           path("shards/part-1.bin"), path("shards/part-2.bin"),
                           "--steps", "5", "--lr", "0.1", "--no-shuffle"});
  ASSERT_EQ(r.code, 0) << r.err;
  expectWindows(*m, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
}

TEST_F(TrainTest, TokenErrorsNameTheFile) {
  auto m = makeTokenModel();
  // Odd-sized raw file.
  std::ofstream(path("odd.bin"), std::ios::binary) << "abc";
  RunResult r =
      train(*m, {"--data", path("odd.bin"), "--steps", "1", "--lr", "0.1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, path("odd.bin") + ": raw uint16 token file has "
                                                "an odd size"))
      << r.err;

  // Truncated llm.c shard.
  writeTokens("short.bin", 0, 20, true);
  fs::resize_file(path("short.bin"), 1024 + 30);
  r = train(*m, {"--data", path("short.bin"), "--steps", "1", "--lr", "0.1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "announces 20 tokens")) << r.err;
  EXPECT_TRUE(contains(r.err, "(truncated)")) << r.err;

  // A token past the vocabulary (50) in the third window.
  writeTokens("big.bin", 0, 43, false);
  {
    std::fstream f(path("big.bin"),
                   std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(2 * 9);
    uint16_t bad = 60;
    f.write(reinterpret_cast<const char *>(&bad), 2);
  }
  r = train(*m, {"--data", path("big.bin"), "--steps", "3", "--lr", "0.1",
                 "--no-shuffle"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, path("big.bin") +
                                  ": token 60 at byte offset 18 (token 9 of "
                                  "the file) is outside the vocabulary [0, "
                                  "50)"))
      << r.err;

  // Labels come from the stream.
  r = train(*m, {"--data", path("big.bin"), "--labels", path("big.bin"),
                 "--steps", "1", "--lr", "0.1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, "token data provides its own labels")) << r.err;
}

//===----------------------------------------------------------------------===//
// Errors
//===----------------------------------------------------------------------===//

TEST_F(TrainTest, ReportsBadArgumentsAndData) {
  writeLinearData(10, 3);
  auto m = makeLinearModel();
  auto expectError = [&](std::vector<std::string> args,
                         const std::string &text) {
    RunResult r = train(*m, args);
    EXPECT_EQ(r.code, 1) << "accepted " << ::testing::PrintToString(args);
    EXPECT_TRUE(contains(r.err, text)) << "expected '" << text << "' in\n"
                                       << r.err;
    EXPECT_TRUE(m->records.empty());
  };
  std::vector<std::string> ok = linearArgs(3);
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = ok;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  expectError({"--data", path("missing.npy"), "--labels", path("y.npy"),
               "--steps", "1", "--lr", "1"},
              path("missing.npy"));
  expectError({"--data", path("x.npy"), "--steps", "1", "--lr", "1"},
              "no data for the model's batch input 'labels': give --labels");
  expectError({"--labels", path("y.npy"), "--steps", "1", "--lr", "1"},
              "--data is required");
  expectError({"--data", path("x.npy"), "--labels", path("y.npy"), "--lr", "1"},
              "--steps");
  expectError(with({"--steps", "0"}), "--steps must be positive (got 0)");
  expectError(with({"--lr", "-1"}), "--lr must be a positive number");
  expectError(with({"--lr", "fast"}), "--lr");
  expectError(with({"--keep-checkpoints", "1"}),
              "--keep-checkpoints must be at least 2");
  expectError(with({"--checkpoint-every", "5"}),
              "--checkpoint-every needs --checkpoint-dir");
  expectError(with({"--log-every", "0"}), "--log-every must be positive");
  expectError(with({"--bogus"}), "--bogus");

  writeLinearData(10, 4, "x4.npy", "y4.npy");
  expectError({"--data", path("x4.npy"), "--labels", path("y.npy"), "--steps",
               "1", "--lr", "1"},
              path("x4.npy") + ": samples have shape 4 (array 10x4) but input "
                               "'input' (F32 4x3) takes samples of shape 3");
  writeLinearData(9, 3, "x9.npy", "y9.npy");
  expectError({"--data", path("x.npy"), "--labels", path("y9.npy"), "--steps",
               "1", "--lr", "1"},
              path("y9.npy") + " has 9 samples but " + path("x.npy") +
                  " has 10");
  expectError({"--data", "input=" + path("x.npy"), "--data",
               "input=" + path("x9.npy"), "--labels", path("y.npy"), "--steps",
               "1", "--lr", "1"},
              "input 'input' is given twice");
  expectError({"--data", path("x.npy"), "--labels", path("y.npy"), "--data",
               path("t.bin"), "--steps", "1", "--lr", "1"},
              "mixes .npy arrays with token files");
  expectError({"--data", "inputs=" + path("x.npy"), "--labels", path("y.npy"),
               "--steps", "1", "--lr", "1"},
              "the model has no batch input 'inputs' (its batch inputs: "
              "input, labels)");
}

TEST_F(TrainTest, ReportsLabelsOutOfRange) {
  auto m = makeClassifierModel(4, 3);
  HostArray x = HostArray::zeros(DType::F32, {8, 2});
  HostArray y = HostArray::zeros(DType::I64, {8});
  for (int i = 0; i < 8; ++i)
    y.setFromDouble(i, i % 3);
  y.setFromDouble(5, -1);
  ASSERT_TRUE(writeNpy(path("x.npy"), x).ok());
  ASSERT_TRUE(writeNpy(path("y.npy"), y).ok());
  RunResult r =
      train(*m, {"--data", "input=" + path("x.npy"), "--data",
                 "labels=" + path("y.npy"), "--steps", "1", "--lr", "1"});
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, path("y.npy") +
                                  ": label -1 at index 5 is outside [0, 3)"))
      << r.err;
}

//===----------------------------------------------------------------------===//
// Checkpoints
//===----------------------------------------------------------------------===//

class CheckpointTrainTest : public TrainTest {
protected:
  std::unique_ptr<TestModel> model = makeLinearModel();

  void SetUp() override {
    TrainTest::SetUp();
    writeLinearData(10, 3);
  }

  /// Trains to `steps` with checkpoints in `ckpt`, shuffled with seed 3.
  RunResult run(int64_t steps, const std::string &ckpt,
                std::vector<std::string> extra = {}) {
    return runModel(*model, steps, ckpt, std::move(extra));
  }
  RunResult runModel(TestModel &m, int64_t steps, const std::string &ckpt,
                     std::vector<std::string> extra = {}) {
    std::vector<std::string> args = linearArgs(steps);
    args.insert(args.end(), {"--seed", "3", "--checkpoint-dir", path(ckpt),
                             "--metrics", path(ckpt + ".jsonl")});
    args.insert(args.end(), extra.begin(), extra.end());
    return train(m, args);
  }

  std::string ckptPath(const std::string &ckpt, int64_t step) {
    return path(ckpt) + "/" + checkpointName(step);
  }

  /// Losses and lrs per step from a metrics file.
  std::vector<std::pair<double, double>> lossCurve(const std::string &ckpt) {
    std::vector<std::pair<double, double>> out;
    int64_t step = 0;
    for (const nlohmann::json &j : readJsonLines(path(ckpt + ".jsonl"))) {
      EXPECT_EQ(j["step"].get<int64_t>(), ++step);
      out.emplace_back(j["loss"].get<double>(), j["lr"].get<double>());
    }
    return out;
  }

  void expectSameTensors(const std::string &a, const std::string &b) {
    EXPECT_EQ(readFile(a + "/model.safetensors"),
              readFile(b + "/model.safetensors"))
        << a << " and " << b << " differ";
  }
};

TEST_F(CheckpointTrainTest, ResumeIsBitIdentical) {
  RunResult straight = run(20, "a");
  ASSERT_EQ(straight.code, 0) << straight.err;
  std::vector<int> straightOrder = linearSamples(*model, 3);

  RunResult first = run(10, "b");
  ASSERT_EQ(first.code, 0) << first.err;
  RunResult second = run(20, "b");
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_TRUE(contains(second.out,
                       "resuming from " + ckptPath("b", 10) + " at step 10"))
      << second.out;
  ASSERT_EQ(model->records.size(), 10u);
  EXPECT_EQ(model->records.front().step, 10);
  std::vector<int> resumedOrder = linearSamples(*model, 3);
  EXPECT_EQ(resumedOrder,
            std::vector<int>(straightOrder.begin() + 40, straightOrder.end()));

  expectSameTensors(ckptPath("a", 20), ckptPath("b", 20));
  EXPECT_EQ(lossCurve("a"), lossCurve("b"));
  EXPECT_EQ(lossCurve("a").size(), 20u);

  // The manifest records what resuming needs.
  nlohmann::json manifest =
      nlohmann::json::parse(readFile(ckptPath("b", 20) + "/manifest.json"));
  EXPECT_EQ(manifest["format_version"], kSingleFileCheckpointFormatVersion);
  EXPECT_EQ(manifest["step"], 20);
  EXPECT_EQ(manifest["data_loader"]["seed"], "3");
  EXPECT_EQ(manifest["data_loader"]["epoch"], 10);
  EXPECT_EQ(manifest["model"]["source"], "linear-test");
  EXPECT_EQ(manifest["tensors"].size(), 4u);
  EXPECT_EQ(manifest["tensors"][0]["name"], "w");
  EXPECT_EQ(manifest["tensors"][2]["kind"], "state");

  // Running again at the target does nothing.
  RunResult again = run(20, "b");
  EXPECT_EQ(again.code, 0);
  EXPECT_TRUE(contains(again.out, "nothing to do")) << again.out;
  EXPECT_TRUE(model->records.empty());
}

TEST_F(CheckpointTrainTest, SigintCheckpointsAndResumesExactly) {
  ASSERT_EQ(run(20, "a").code, 0);
  model->onStep = [](int64_t step) {
    if (step == 6)
      std::raise(SIGINT);
  };
  RunResult stopped = run(20, "b");
  model->onStep = nullptr;
  EXPECT_EQ(stopped.code, kExitInterrupted);
  EXPECT_TRUE(contains(stopped.err, "stopped by SIGINT after step 7"))
      << stopped.err;
  EXPECT_EQ(model->records.size(), 7u);
  EXPECT_TRUE(fs::exists(ckptPath("b", 7)));

  RunResult resumed = run(20, "b");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(model->records.front().step, 7);
  expectSameTensors(ckptPath("a", 20), ckptPath("b", 20));
  EXPECT_EQ(lossCurve("a"), lossCurve("b"));
}

// A closed terminal (SIGHUP) is a stop request like SIGTERM, not a kill
// that loses the steps since the last checkpoint.
TEST_F(CheckpointTrainTest, SighupCheckpointsAndResumesExactly) {
  ASSERT_EQ(run(12, "a").code, 0);
  model->onStep = [](int64_t step) {
    if (step == 4)
      std::raise(SIGHUP);
  };
  RunResult stopped = run(12, "b");
  model->onStep = nullptr;
  EXPECT_EQ(stopped.code, 128 + SIGHUP);
  EXPECT_TRUE(contains(stopped.err, "stopped by SIGHUP after step 5"))
      << stopped.err;
  EXPECT_TRUE(fs::exists(ckptPath("b", 5)));
  RunResult resumed = run(12, "b");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  expectSameTensors(ckptPath("a", 12), ckptPath("b", 12));
  EXPECT_EQ(lossCurve("a"), lossCurve("b"));
}

TEST_F(CheckpointTrainTest, DamagedNewestCheckpointFallsBack) {
  ASSERT_EQ(run(12, "a").code, 0);
  struct Damage {
    const char *name;
    std::function<void(const std::string &)> apply;
    const char *message;
  };
  std::vector<Damage> cases = {
      {"truncated",
       [](const std::string &p) {
         fs::resize_file(p + "/model.safetensors",
                         fs::file_size(p + "/model.safetensors") / 2);
       },
       "model.safetensors: 176 bytes but the manifest says 352 (truncated)"},
      {"flipped",
       [](const std::string &p) {
         std::string bytes = readFile(p + "/model.safetensors");
         bytes[bytes.size() - 3] ^= 0x40;
         std::ofstream(p + "/model.safetensors", std::ios::binary) << bytes;
       },
       "does not match the manifest's"},
      {"manifest",
       [](const std::string &p) { fs::resize_file(p + "/manifest.json", 20); },
       "manifest.json: not valid JSON (truncated?)"},
  };
  for (const Damage &d : cases) {
    SCOPED_TRACE(d.name);
    std::string ckpt = std::string("b-") + d.name;
    ASSERT_EQ(run(10, ckpt, {"--checkpoint-every", "5"}).code, 0);
    d.apply(ckptPath(ckpt, 10));
    RunResult r = run(12, ckpt);
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(contains(r.err, "warning: skipping damaged checkpoint " +
                                    ckptPath(ckpt, 10)))
        << r.err;
    EXPECT_TRUE(contains(r.err, d.message)) << r.err;
    EXPECT_TRUE(contains(r.out, "resuming from " + ckptPath(ckpt, 5))) << r.out;
    EXPECT_TRUE(fs::exists(path(ckpt) + "/corrupt-step-00000010"));
    expectSameTensors(ckptPath("a", 12), ckptPath(ckpt, 12));
    EXPECT_EQ(lossCurve("a"), lossCurve(ckpt));
  }
}

TEST_F(CheckpointTrainTest, RefusesWhenNoCheckpointIsUsable) {
  ASSERT_EQ(run(4, "b").code, 0);
  fs::resize_file(ckptPath("b", 4) + "/model.safetensors", 10);
  RunResult r = run(8, "b");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, path("b") + ": no usable checkpoint")) << r.err;
  EXPECT_TRUE(model->records.empty());
}

TEST_F(CheckpointTrainTest, RefusesACheckpointOfAnotherModel) {
  ASSERT_EQ(run(2, "b").code, 0);
  writeLinearData(10, 5);
  model = makeLinearModel(5);
  RunResult r = run(4, "b");
  EXPECT_EQ(r.code, 1);
  EXPECT_TRUE(contains(r.err, ckptPath("b", 2) +
                                  " is a checkpoint of a different model: "
                                  "tensor 'w' is param F32 3x1 in the "
                                  "checkpoint but param F32 5x1 in this model"))
      << r.err;
  EXPECT_TRUE(model->records.empty());
  EXPECT_TRUE(fs::exists(ckptPath("b", 2)));
}

//===----------------------------------------------------------------------===//
// A --target cuda model (deviceType CUDA)
//===----------------------------------------------------------------------===//

TEST_F(TrainTest, CudaModelWithoutAGpuStopsBeforeItsStep) {
  if (cuda::deviceCount() > 0)
    GTEST_SKIP() << "a CUDA device is visible; the DeviceStep tests run on it";
  writeLinearData(10, 3);
  auto m = makeLinearModel();
  m->setDeviceType(WEFT_DEVICE_CUDA);
  m->contexts.clear();
  RunResult r = train(*m, linearArgs(2));
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err.rfind("error: ", 0), 0u) << r.err;
  EXPECT_TRUE(contains(r.err, "this executable was compiled for NVIDIA GPUs "
                              "(weftc --target cuda)"))
      << r.err;
  EXPECT_TRUE(contains(r.err, "compile without --target cuda to train on "
                              "the CPU"))
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_TRUE(m->contexts.empty());
}

/// A --target cuda step runs one process per GPU: several processes of a
/// step compiled without a mesh are refused (here, without a GPU, already
/// at the device), as is a mesh's launch with fewer ranks than the mesh,
/// and a pipeline's step, whose sends have no GPU transport; none runs a
/// step.
TEST_F(TrainTest, CudaModelRunsAMeshOrAPipelineOnlyAsRanks) {
  writeLinearData(10, 3);
  auto m = makeLinearModel();
  m->setDeviceType(WEFT_DEVICE_CUDA);
  ::setenv("RANK", "1", 1);
  ::setenv("WORLD_SIZE", "2", 1);
  RunResult several = train(*m, linearArgs(2));
  ::unsetenv("RANK");
  ::unsetenv("WORLD_SIZE");
  EXPECT_EQ(several.code, 1);
  bool noGpu = contains(several.err, "compiled for NVIDIA GPUs") ||
               contains(several.err, "no NVIDIA GPU is visible");
  EXPECT_TRUE(noGpu || contains(several.err, "compiled for one process"))
      << several.err;

  std::vector<TestTensor> args = {{"w", "param", DType::F32, {2, 3}},
                                  {"input", "input", DType::F32, {2, 3}},
                                  {"step", "input", DType::I64, {}},
                                  {"lr", "input", DType::F32, {}}};
  std::vector<TestTensor> results = {{"w", "param", DType::F32, {2, 3}},
                                     {"loss", "output", DType::F32, {}}};
  // A mesh of two on one process: the device's error, or the mesh's.
  TestModel meshed(args, results,
                   R"({"mesh": {"axes": [{"name": "dp", "size": 2}]}})", {},
                   [](TestModel &, void *const *, void *const *) {});
  meshed.setDeviceType(WEFT_DEVICE_CUDA);
  RunResult mesh = train(meshed, {"--data", path("x.npy"), "--steps", "1",
                                  "--lr", "0.1"});
  EXPECT_EQ(mesh.code, 1);
  EXPECT_TRUE(noGpu ? contains(mesh.err, "compiled for NVIDIA GPUs") ||
                          contains(mesh.err, "no NVIDIA GPU is visible")
                    : contains(mesh.err, "start 2 ranks"))
      << mesh.err;
  EXPECT_FALSE(contains(mesh.err, "without a mesh")) << mesh.err;

  // A pipeline rank's too (its transfers go through host memory): the
  // device's error, or the mesh's.
  TestModel piped(
      args, results,
      R"({"mesh": {"axes": [{"name": "pp", "size": 2}]},
          "pipeline": {"ranks": 2, "rank": 0, "micro_batches": 1,
                       "virtual_stages": 1, "tensors": []}})",
      {}, [](TestModel &, void *const *, void *const *) {});
  piped.setDeviceType(WEFT_DEVICE_CUDA);
  RunResult pipe = train(piped, {"--data", path("x.npy"), "--steps", "1",
                                 "--lr", "0.1"});
  EXPECT_EQ(pipe.code, 1);
  EXPECT_TRUE(noGpu ? contains(pipe.err, "compiled for NVIDIA GPUs") ||
                          contains(pipe.err, "no NVIDIA GPU is visible")
                    : contains(pipe.err, "start 2 ranks"))
      << pipe.err;
  EXPECT_TRUE(m->contexts.empty());
  EXPECT_TRUE(meshed.contexts.empty());
  EXPECT_TRUE(piped.contexts.empty());
}

/// The linear model's step on the GPU (its buffers there, its arithmetic
/// on host copies): everything the trainer does on a device must give the
/// CPU run's numbers bit for bit.
class DeviceStepTest : public CheckpointTrainTest {
protected:
  std::unique_ptr<TestModel> device = makeLinearModel();

  void SetUp() override {
    if (cuda::deviceCount() == 0)
      GTEST_SKIP() << "no CUDA device: the trainer's device path is not run "
                      "(CudaModelWithoutAGpuStopsBeforeItsStep covers this "
                      "machine)";
    CheckpointTrainTest::SetUp();
    device->setDeviceType(WEFT_DEVICE_CUDA);
  }
};

TEST_F(DeviceStepTest, MatchesTheCpuStepAndCheckpointsAndResumes) {
  RunResult cpu = run(7, "cpu", {"--checkpoint-every", "3"});
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  device->contexts.clear();
  device->argPointers.clear();
  RunResult gpu = runModel(*device, 7, "gpu", {"--checkpoint-every", "3"});
  ASSERT_EQ(gpu.code, 0) << gpu.err;
  EXPECT_TRUE(contains(gpu.out, "(on GPU 0: ")) << gpu.out;
  EXPECT_EQ(lossCurve("cpu"), lossCurve("gpu"));
  for (int64_t step : {3, 6, 7})
    expectSameTensors(ckptPath("cpu", step), ckptPath("gpu", step));

  ASSERT_EQ(device->contexts.size(), 7u);
  for (const WeftRuntimeContext &c : device->contexts) {
    EXPECT_EQ(c.deviceType, WEFT_DEVICE_CUDA);
    EXPECT_EQ(c.deviceIndex, 0);
    EXPECT_EQ(c.stream, cuda::stream());
  }
  // Planned once, swapped by pointer: "w" alternates between two device
  // buffers, and the batch is always copied into the same one.
  int w = device->arg("w"), input = device->arg("input");
  std::set<void *> wPointers, inputPointers;
  for (size_t k = 0; k < device->argPointers.size(); ++k) {
    wPointers.insert(device->argPointers[k][w]);
    inputPointers.insert(device->argPointers[k][input]);
    if (k >= 2)
      EXPECT_EQ(device->argPointers[k][w], device->argPointers[k - 2][w]);
  }
  EXPECT_EQ(wPointers.size(), 2u);
  EXPECT_EQ(inputPointers.size(), 1u);

  // A resumed run uploads the checkpoint it restored.
  ASSERT_EQ(runModel(*device, 4, "resumed").code, 0);
  RunResult resumed = runModel(*device, 7, "resumed");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_TRUE(contains(resumed.out, "at step 4")) << resumed.out;
  expectSameTensors(ckptPath("cpu", 7), ckptPath("resumed", 7));
}

TEST_F(DeviceStepTest, SkipsNonFiniteStepsAsTheCpuDoes) {
  // --lr 1e30 sends the loss to infinity from the second step on: those
  // steps' results must not be swapped in, on the device either.
  std::vector<std::string> extra = {"--lr", "1e30", "--skip-nonfinite"};
  RunResult cpu = run(6, "cpu", extra);
  ASSERT_EQ(cpu.code, 0) << cpu.err;
  ASSERT_TRUE(contains(cpu.err, "warning: skipped step 2")) << cpu.err;
  RunResult gpu = runModel(*device, 6, "gpu", extra);
  ASSERT_EQ(gpu.code, 0) << gpu.err;
  EXPECT_EQ(cpu.err, gpu.err);
  expectSameTensors(ckptPath("cpu", 6), ckptPath("gpu", 6));
  std::vector<nlohmann::json> a = readJsonLines(path("cpu.jsonl")),
                              b = readJsonLines(path("gpu.jsonl"));
  ASSERT_EQ(a.size(), b.size());
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k]["loss"].dump(), b[k]["loss"].dump()) << k;
    EXPECT_EQ(a[k].value("skipped", false), b[k].value("skipped", false)) << k;
  }
}

TEST_F(CheckpointTrainTest, KeepsTheNewestK) {
  RunResult r =
      run(10, "b", {"--checkpoint-every", "2", "--keep-checkpoints", "3"});
  ASSERT_EQ(r.code, 0) << r.err;
  std::vector<std::string> names;
  for (const auto &e : fs::directory_iterator(path("b")))
    names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"step-00000006", "step-00000008",
                                             "step-00000010"}));
  auto listed = listCheckpoints(path("b"));
  ASSERT_EQ(listed.size(), 3u);
  EXPECT_EQ(listed[0].first, 10);
  EXPECT_EQ(listed[2].first, 6);
}

} // namespace
