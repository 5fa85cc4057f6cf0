//===- ModelSpecTest.cpp - The mesh and shardings of a compiled model -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "TestModels.h"
#include "weft/Runtime/ModelSpec.h"

#include <gtest/gtest.h>

#include <algorithm>

using namespace weft::rt;
using namespace weft::rt::test;

namespace {

/// The per-rank table of a step partitioned over `mesh` JSON: param "w"
/// [4, 3] split along dim 0 over dp, and the batch `input` as given.
std::unique_ptr<TestModel> makeSharded(const std::string &meshJson,
                                       const std::string &shardingsJson,
                                       std::vector<int64_t> inputShape = {2, 3}) {
  std::vector<TestTensor> args = {{"w", "param", DType::F32, {2, 3}},
                                  {"input", "input", DType::F32, inputShape},
                                  {"step", "input", DType::I64, {}},
                                  {"lr", "input", DType::F32, {}}};
  std::vector<TestTensor> results = {{"w", "param", DType::F32, {2, 3}},
                                     {"loss", "output", DType::F32, {}}};
  std::string json = "{\"mesh\": " + meshJson +
                     (shardingsJson.empty() ? "" : ", \"shardings\": " +
                                                       shardingsJson) +
                     "}";
  return std::make_unique<TestModel>(
      args, results, json, std::vector<std::pair<std::string, HostArray>>{},
      [](TestModel &, void *const *, void *const *) {});
}

TEST(ModelSpecTest, ReadsMeshAndShardings) {
  auto m = makeSharded(
      R"({"axes": [{"name": "dp", "size": 2}]})",
      R"({"w": {"global_shape": [4, 3], "dims": [["dp"], []]},
          "input": {"global_shape": [4, 3], "dims": [["dp"], []]}})");
  ModelSpec spec;
  Status s = loadModelSpec(m->model(), spec);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(spec.mesh.size(), 1u);
  EXPECT_EQ(spec.mesh[0].name, "dp");
  EXPECT_EQ(spec.mesh[0].size, 2);
  EXPECT_EQ(spec.meshDevices(), 2);
  EXPECT_EQ(spec.describeMesh(), "dp=2");
  const SlotSharding *w = spec.findSharding("w");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->globalShape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(w->dims, (std::vector<std::vector<std::string>>{{"dp"}, {}}));
  EXPECT_EQ(spec.findSharding("loss"), nullptr);
  EXPECT_EQ(spec.batchSize, 2);
  EXPECT_EQ(spec.batchLayout.axes, std::vector<std::string>{"dp"});
  EXPECT_EQ(spec.batchLayout.microBatches, 1);
}

TEST(ModelSpecTest, ReadsStoredShapesOfViews) {
  // w is held as the view [4, 3] (split over dp) of a [12] tensor; the
  // input is replicated but viewed, an entry only a stored shape needs.
  auto m = makeSharded(
      R"({"axes": [{"name": "dp", "size": 2}]})",
      R"({"w": {"global_shape": [4, 3], "dims": [["dp"], []],
                "stored_shape": [12]},
          "input": {"global_shape": [2, 3], "dims": [[], []],
                    "stored_shape": [2, 1, 3]}})");
  ModelSpec spec;
  Status s = loadModelSpec(m->model(), spec);
  ASSERT_TRUE(s.ok()) << s.message;
  const SlotSharding *w = spec.findSharding("w");
  ASSERT_TRUE(w);
  EXPECT_EQ(w->globalShape, (std::vector<int64_t>{4, 3}));
  EXPECT_EQ(w->storedShape, (std::vector<int64_t>{12}));
  EXPECT_EQ(spec.findSharding("input")->storedShape,
            (std::vector<int64_t>{2, 1, 3}));
  EXPECT_TRUE(spec.batchLayout.axes.empty());
  EXPECT_EQ(spec.numParameters(), 12);
}

TEST(ModelSpecTest, NoMeshIsOneDevice) {
  auto m = makeLinearModel();
  ModelSpec spec;
  ASSERT_TRUE(loadModelSpec(m->model(), spec).ok());
  EXPECT_TRUE(spec.mesh.empty());
  EXPECT_EQ(spec.meshDevices(), 1);
  EXPECT_TRUE(spec.batchLayout.axes.empty());
}

TEST(ModelSpecTest, DeviceArenaHoldsEverySlotOnceAligned) {
  auto m = makeLinearModel(/*features=*/5, /*batch=*/3);
  ModelSpec spec;
  ASSERT_TRUE(loadModelSpec(m->model(), spec).ok());
  DeviceArenaPlan plan = planDeviceArena(spec);
  // [offset, end) of every slot: aligned, inside the arena, disjoint.
  std::vector<std::pair<uint64_t, uint64_t>> slots;
  for (size_t i = 0; i < spec.args.size(); ++i)
    slots.emplace_back(plan.argOffsets[i],
                       plan.argOffsets[i] + spec.args[i].bytes);
  for (size_t r = 0; r < spec.results.size(); ++r)
    slots.emplace_back(plan.resultOffsets[r],
                       plan.resultOffsets[r] + spec.results[r].bytes);
  slots.emplace_back(plan.workspaceOffset,
                     plan.workspaceOffset + spec.workspaceBytes);
  std::sort(slots.begin(), slots.end());
  for (size_t k = 0; k < slots.size(); ++k) {
    EXPECT_EQ(slots[k].first % DeviceArenaPlan::kAlignment, 0u);
    EXPECT_LE(slots[k].second, plan.totalBytes);
    if (k > 0)
      EXPECT_LE(slots[k - 1].second, slots[k].first);
  }
  EXPECT_EQ(plan.totalBytes % DeviceArenaPlan::kAlignment, 0u);

  // The scalars (step, lr, hp.momentum) and the outputs (loss, lr) are
  // each one block, holding exactly those slots.
  auto inBlock = [](uint64_t offset, uint64_t bytes, uint64_t begin,
                    uint64_t end) {
    return offset >= begin && offset + bytes <= end;
  };
  for (size_t i = 0; i < spec.args.size(); ++i) {
    bool scalar = spec.args[i].kind == "input" && spec.args[i].shape.empty();
    EXPECT_EQ(bool(plan.scalarArg[i]), scalar) << spec.args[i].name;
    EXPECT_EQ(inBlock(plan.argOffsets[i], spec.args[i].bytes,
                      plan.scalarsBegin, plan.scalarsEnd),
              scalar)
        << spec.args[i].name;
  }
  for (size_t r = 0; r < spec.results.size(); ++r) {
    bool output = spec.results[r].kind == "output";
    EXPECT_EQ(bool(plan.outputResult[r]), output) << spec.results[r].name;
    EXPECT_EQ(inBlock(plan.resultOffsets[r], spec.results[r].bytes,
                      plan.outputsBegin, plan.outputsEnd),
              output)
        << spec.results[r].name;
  }
  EXPECT_EQ(plan.scalarsEnd - plan.scalarsBegin,
            2 * DeviceArenaPlan::kAlignment + 4);
  EXPECT_EQ(plan.outputsEnd - plan.outputsBegin,
            DeviceArenaPlan::kAlignment + 4);
}

TEST(ModelSpecTest, MicroBatchLayout) {
  // Two micro-batches of 4 rows each, split over dp=2: the rank holds
  // [2, 2, 3], 4 samples.
  auto m = makeSharded(
      R"({"axes": [{"name": "dp", "size": 2}]})",
      R"({"input": {"global_shape": [2, 4, 3], "dims": [[], ["dp"], []]}})",
      {2, 2, 3});
  ModelSpec spec;
  Status s = loadModelSpec(m->model(), spec);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(spec.batchSize, 4);
  EXPECT_EQ(spec.batchLayout.microBatches, 2);
  EXPECT_EQ(spec.batchLayout.axes, std::vector<std::string>{"dp"});
}

TEST(ModelSpecTest, ReadsTheDeviceTypeAndRefusesUnknownOnes) {
  auto m = makeSharded(R"({"axes": [{"name": "dp", "size": 1}]})", "");
  ModelSpec cpu;
  ASSERT_TRUE(loadModelSpec(m->model(), cpu).ok());
  EXPECT_EQ(cpu.deviceType, WEFT_DEVICE_CPU);
  m->setDeviceType(WEFT_DEVICE_CUDA);
  ModelSpec cuda;
  Status s = loadModelSpec(m->model(), cuda);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(cuda.deviceType, WEFT_DEVICE_CUDA);
  m->setDeviceType(7);
  ModelSpec unknown;
  s = loadModelSpec(m->model(), unknown);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message, "compiled model runs on device type 7, which this "
                       "runtime does not know (it runs 0: the CPU, 1: NVIDIA "
                       "GPUs); rebuild the model with a matching weftc");
}

TEST(ModelSpecTest, Errors) {
  struct Case {
    const char *mesh, *shardings, *message;
  } cases[] = {
      {R"({"axes": []})", "", "must be"},
      {R"({"axes": [{"name": "dp", "size": 0}]})", "", "invalid mesh axis"},
      {R"({"axes": [{"name": "dp", "size": 2}, {"name": "dp", "size": 2}]})",
       "", "twice"},
      {R"({"axes": [{"name": "dp", "size": 2}]})",
       R"({"w": {"global_shape": [4, 3], "dims": [["tp"], []]}})",
       "not an axis of the mesh"},
      {R"({"axes": [{"name": "dp", "size": 2}]})",
       R"({"w": {"global_shape": [8, 3], "dims": [["dp"], []]}})",
       "is not the compiled"},
      {R"({"axes": [{"name": "dp", "size": 2}]})",
       R"({"v": {"global_shape": [4, 3], "dims": [["dp"], []]}})",
       "no such slot"},
      {R"({"axes": [{"name": "dp", "size": 2}, {"name": "tp", "size": 3}]})",
       R"({"input": {"global_shape": [4, 9], "dims": [["dp"], ["tp"]]}})",
       "splits only its batch"},
      {R"({"axes": [{"name": "dp", "size": 2}]})",
       R"({"w": {"global_shape": [4, 3], "dims": [["dp"], ["dp"]]}})",
       "two dims"},
      {R"({"axes": [{"name": "dp", "size": 2}]})",
       R"({"w": {"global_shape": [4, 3], "dims": [["dp"], []],
                 "stored_shape": [3, 4]}})",
       "sharding of 'w': stored_shape [3,4] is not a merge of consecutive "
       "dims of global_shape [4,3]"},
      {R"({"axes": [{"name": "dp", "size": 2}]})",
       R"({"w": {"global_shape": [4, 3], "dims": [["dp"], []],
                 "stored_shape": [13]}})",
       "sharding of 'w': stored_shape [13] has 13 elements but global_shape "
       "[4,3] has 12"},
      {R"({"axes": [{"name": "dp", "size": 2}]})",
       R"({"w": {"global_shape": [4, 3], "dims": [["dp"], []],
                 "stored_shape": "12"}})",
       "invalid stored_shape"},
  };
  for (const Case &c : cases) {
    auto m = makeSharded(c.mesh, c.shardings);
    ModelSpec spec;
    Status s = loadModelSpec(m->model(), spec);
    ASSERT_FALSE(s.ok()) << c.mesh << " " << c.shardings;
    EXPECT_NE(s.message.find(c.message), std::string::npos) << s.message;
  }
}

} // namespace

namespace {
std::optional<bool> cpuWithAvx2WithoutFma(const std::string &feature) {
  if (feature == "avx2")
    return true;
  if (feature == "fma")
    return false;
  return std::nullopt;
}
} // namespace

TEST(CpuFeatures, RefusesMissingExtensionsNamingTheFix) {
  weft::rt::Status s = weft::rt::checkCpuFeatures(
      R"({"target": {"cpu": "x86-64-v3", "requested_cpu": "default",
                     "cpu_features": ["avx2", "fma", "unknown-ext"]}})",
      cpuWithAvx2WithoutFma);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message.find("compiled for CPU 'x86-64-v3' (weftc "
                             "--cpu=default)"),
            std::string::npos)
      << s.message;
  EXPECT_NE(s.message.find("lacks: fma;"), std::string::npos)
      << s.message;
  EXPECT_NE(s.message.find("--cpu=generic"), std::string::npos);
}

TEST(CpuFeatures, AcceptsPresentOrUntestableExtensionsAndNoTarget) {
  EXPECT_TRUE(weft::rt::checkCpuFeatures(
                  R"({"target": {"cpu": "x", "cpu_features": ["avx2",
                      "unknown-ext"]}})",
                  cpuWithAvx2WithoutFma)
                  .ok());
  EXPECT_TRUE(weft::rt::checkCpuFeatures(R"({"source": "m.onnx"})", cpuWithAvx2WithoutFma)
                  .ok());
  EXPECT_TRUE(weft::rt::checkCpuFeatures("not json", cpuWithAvx2WithoutFma).ok());
}

TEST(CpuFeatures, ThisCpuHasWhatTheDefaultTargetNeeds) {
  // The test machines are x86-64-v3 or newer; a runtime on one that is not
  // would refuse every executable weftc builds by default.
#if defined(__x86_64__)
  for (const char *feature : {"avx", "avx2", "fma", "bmi2", "f16c"}) {
    std::optional<bool> has = weft::rt::cpuSupports(feature);
    ASSERT_TRUE(has.has_value()) << feature;
  }
#endif
}
