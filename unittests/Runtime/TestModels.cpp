//===- TestModels.cpp - Hand-written compiled models for runtime tests ----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "TestModels.h"

#include "weft/Formats/SafeTensors.h"
#include "weft/Runtime/AlignedBuffer.h"
#include "weft/Runtime/Cuda.h"
#include "weft/Runtime/Kernels.h"

#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include <unistd.h>

using namespace weft::rt;
using namespace weft::rt::test;

namespace {

TestModel *gActiveModel = nullptr;

std::vector<uint8_t> safetensorsImage(
    const std::vector<std::pair<std::string, HostArray>> &tensors) {
  std::string path =
      "/tmp/weft_test_weights_" + std::to_string(::getpid()) + ".safetensors";
  SafeTensorsFile f;
  f.tensors = tensors;
  Status s = writeSafeTensors(path, f);
  if (!s.ok())
    throw std::runtime_error(s.message);
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
  ::unlink(path.c_str());
  return bytes;
}

HostArray f32(std::vector<int64_t> shape, std::vector<float> values) {
  HostArray a = HostArray::zeros(DType::F32, std::move(shape));
  std::memcpy(a.data.data(), values.data(), values.size() * sizeof(float));
  return a;
}

float &at(void *const *bufs, int i, int64_t k = 0) {
  return static_cast<float *>(bufs[i])[k];
}

} // namespace

TestModel::TestModel(std::vector<TestTensor> argsIn,
                     std::vector<TestTensor> resultsIn, std::string jsonIn,
                     std::vector<std::pair<std::string, HostArray>> weightsIn,
                     StepFn stepIn)
    : args(std::move(argsIn)), results(std::move(resultsIn)),
      json(std::move(jsonIn)), weights(safetensorsImage(weightsIn)),
      step(std::move(stepIn)) {
  auto info = [](const TestTensor &t) {
    return WeftTensorInfo{t.name.c_str(), t.kind.c_str(), int32_t(t.dtype),
                          int32_t(t.shape.size()), t.shape.data()};
  };
  for (const TestTensor &t : args)
    argInfo.push_back(info(t));
  for (const TestTensor &t : results)
    resultInfo.push_back(info(t));
  table = {};
  table.abiVersion = WEFT_MODEL_ABI_VERSION;
  table.modelJson = json.c_str();
  table.numArgs = int32_t(argInfo.size());
  table.args = argInfo.data();
  table.numResults = int32_t(resultInfo.size());
  table.results = resultInfo.data();
  table.weights = weights.data();
  table.weightsSize = weights.size();
  table.workspaceBytes = 256;
  table.trainStep = &TestModel::trampoline;
}

const WeftModel &TestModel::model() {
  gActiveModel = this;
  return table;
}

int TestModel::arg(const std::string &name) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].name == name)
      return int(i);
  throw std::runtime_error("no argument " + name);
}

int TestModel::result(const std::string &name) const {
  for (size_t i = 0; i < results.size(); ++i)
    if (results[i].name == name)
      return int(i);
  throw std::runtime_error("no result " + name);
}

void TestModel::record(void *const *a) {
  StepRecord r;
  r.step = *static_cast<const int64_t *>(a[arg("step")]);
  r.lr = *static_cast<const float *>(a[arg("lr")]);
  for (size_t i = 0; i < args.size(); ++i) {
    const TestTensor &t = args[i];
    if (t.kind != "input" || t.name == "step" || t.name == "lr")
      continue;
    if (t.name.rfind("hp.", 0) == 0) {
      r.hyperParams.push_back(*static_cast<const float *>(a[i]));
      continue;
    }
    size_t bytes = 0;
    computeByteSize(t.dtype, t.shape, bytes);
    const uint8_t *p = static_cast<const uint8_t *>(a[i]);
    r.batch.emplace_back(p, p + bytes);
  }
  records.push_back(std::move(r));
}

void TestModel::trampoline(const WeftRuntimeContext *ctx, void *const *a,
                           void *const *res, void *ws) {
  TestModel &m = *gActiveModel;
  // Every step runs in the context the runtime built for the run.
  if (!ctx || ctx->abiVersion != WEFT_MODEL_ABI_VERSION || !ctx->parallelFor)
    throw std::runtime_error("step called without a runtime context");
  m.contexts.push_back(*ctx);
  m.argPointers.emplace_back(a, a + m.args.size());
  // The runtime promises a 64-byte aligned workspace and buffers.
  if (reinterpret_cast<uintptr_t>(ws) % 64 != 0)
    throw std::runtime_error("unaligned workspace");
  for (size_t i = 0; i < m.args.size(); ++i)
    if (reinterpret_cast<uintptr_t>(a[i]) % 64 != 0)
      throw std::runtime_error("unaligned argument " + m.args[i].name);
  if (m.table.deviceType == WEFT_DEVICE_CUDA) {
    m.runOnDevice(*ctx, a, res);
    return;
  }
  m.record(a);
  if (m.onStep)
    m.onStep(m.records.back().step);
  m.step(m, a, res);
}

void TestModel::runOnDevice(const WeftRuntimeContext &ctx, void *const *a,
                            void *const *res) {
  if (ctx.deviceType != WEFT_DEVICE_CUDA || !cuda::initialized() ||
      ctx.stream != cuda::stream() || !ctx.stream)
    throw std::runtime_error("a CUDA step called without its device in the "
                             "context");
  auto bytes = [](const TestTensor &t) {
    size_t n = 0;
    computeByteSize(t.dtype, t.shape, n);
    return n;
  };
  auto check = [](Status s) {
    if (!s.ok())
      throw std::runtime_error(s.message);
  };
  std::vector<AlignedBuffer> hostArgs(args.size()), hostResults(results.size());
  std::vector<void *> argPtrs, resultPtrs;
  for (size_t i = 0; i < args.size(); ++i) {
    hostArgs[i].allocate(bytes(args[i]));
    check(cuda::copyToHost(hostArgs[i].data(), a[i], bytes(args[i])));
    argPtrs.push_back(hostArgs[i].data());
  }
  for (size_t r = 0; r < results.size(); ++r) {
    hostResults[r].allocate(bytes(results[r]));
    resultPtrs.push_back(hostResults[r].data());
  }
  record(argPtrs.data());
  if (onStep)
    onStep(records.back().step);
  step(*this, argPtrs.data(), resultPtrs.data());
  for (size_t r = 0; r < results.size(); ++r)
    check(cuda::copyToDevice(res[r], resultPtrs[r], bytes(results[r])));
}

std::unique_ptr<TestModel> weft::rt::test::makeLinearModel(int64_t d,
                                                           int64_t batch) {
  std::vector<TestTensor> args = {
      {"w", "param", DType::F32, {d, 1}},
      {"b", "param", DType::F32, {1}},
      {"momentum_buffer.w", "state", DType::F32, {d, 1}},
      {"momentum_buffer.b", "state", DType::F32, {1}},
      {"input", "input", DType::F32, {batch, d}},
      {"labels", "input", DType::F32, {batch, 1}},
      {"step", "input", DType::I64, {}},
      {"lr", "input", DType::F32, {}},
      {"hp.momentum", "input", DType::F32, {}},
  };
  std::vector<TestTensor> results = {
      {"w", "param", DType::F32, {d, 1}},
      {"b", "param", DType::F32, {1}},
      {"momentum_buffer.w", "state", DType::F32, {d, 1}},
      {"momentum_buffer.b", "state", DType::F32, {1}},
      {"loss", "output", DType::F32, {}},
      {"lr", "output", DType::F32, {}},
  };
  std::vector<float> w0;
  for (int64_t j = 0; j < d; ++j)
    w0.push_back(0.1f * float(j % 3 == 1 ? -(j + 1) : (j + 1)));
  auto step = [d, batch](TestModel &m, void *const *a, void *const *r) {
    const float *x = static_cast<const float *>(a[m.arg("input")]);
    const float *y = static_cast<const float *>(a[m.arg("labels")]);
    const float *w = static_cast<const float *>(a[m.arg("w")]);
    int64_t stepIdx = *static_cast<const int64_t *>(a[m.arg("step")]);
    float lr = at(a, m.arg("lr")), mom = at(a, m.arg("hp.momentum"));
    float lrT = stepIdx < 2 ? 0.5f * lr : lr;
    std::vector<float> pred(static_cast<size_t>(batch));
    weft_rt_sgemm(1, 0, 0, batch, 1, d, x, d, 0, w, 1, 0, pred.data(), 1, 0);
    float b = at(a, m.arg("b")), loss = 0, gb = 0;
    std::vector<float> gw(size_t(d), 0.0f);
    for (int64_t i = 0; i < batch; ++i) {
      float e = pred[size_t(i)] + b - y[i];
      loss += e * e;
      gb += 2 * e / float(batch);
      for (int64_t j = 0; j < d; ++j)
        gw[size_t(j)] += 2 * e * x[i * d + j] / float(batch);
    }
    for (int64_t j = 0; j < d; ++j) {
      float buf = mom * at(a, m.arg("momentum_buffer.w"), j) + gw[size_t(j)];
      at(r, m.result("momentum_buffer.w"), j) = buf;
      at(r, m.result("w"), j) = w[j] - lrT * buf;
    }
    float bufB = mom * at(a, m.arg("momentum_buffer.b")) + gb;
    at(r, m.result("momentum_buffer.b")) = bufB;
    at(r, m.result("b")) = b - lrT * bufB;
    at(r, m.result("loss")) = loss / float(batch);
    at(r, m.result("lr")) = lrT;
  };
  return std::make_unique<TestModel>(
      args, results,
      R"({"source": "linear-test", "loss": "mse", "optimizer": "sgd", )"
      R"("hyperparameters": {"momentum": 0.5}})",
      std::vector<std::pair<std::string, HostArray>>{{"w", f32({d, 1}, w0)},
                                                     {"b", f32({1}, {0.05f})}},
      step);
}

std::unique_ptr<TestModel>
weft::rt::test::makeTokenModel(int64_t batch, int64_t seq, int64_t vocab) {
  std::vector<TestTensor> args = {
      {"emb", "param", DType::F32, {vocab}},
      {"input", "input", DType::I64, {batch, seq}},
      {"labels", "input", DType::I64, {batch, seq}},
      {"step", "input", DType::I64, {}},
      {"lr", "input", DType::F32, {}},
  };
  std::vector<TestTensor> results = {
      {"emb", "param", DType::F32, {vocab}},
      {"loss", "output", DType::F32, {}},
      {"lr", "output", DType::F32, {}},
  };
  auto step = [batch, seq, vocab](TestModel &m, void *const *a,
                                  void *const *r) {
    const int64_t *x = static_cast<const int64_t *>(a[m.arg("input")]);
    const int64_t *y = static_cast<const int64_t *>(a[m.arg("labels")]);
    const float *emb = static_cast<const float *>(a[m.arg("emb")]);
    float *out = static_cast<float *>(r[m.result("emb")]);
    float lr = at(a, m.arg("lr")), loss = 0;
    std::memcpy(out, emb, size_t(vocab) * sizeof(float));
    int64_t n = batch * seq;
    for (int64_t i = 0; i < n; ++i) {
      float diff = emb[x[i]] - float(y[i]) / float(vocab);
      loss += diff * diff / float(n);
      out[x[i]] -= lr * 2 * diff / float(n);
    }
    at(r, m.result("loss")) = loss;
    at(r, m.result("lr")) = lr;
  };
  return std::make_unique<TestModel>(
      args, results,
      R"({"source": "token-test", "vocab_size": )" + std::to_string(vocab) +
          "}",
      std::vector<std::pair<std::string, HostArray>>{
          {"emb", HostArray::zeros(DType::F32, {vocab})}},
      step);
}

std::unique_ptr<TestModel>
weft::rt::test::makeClassifierModel(int64_t batch, int64_t classes) {
  std::vector<TestTensor> args = {
      {"w", "param", DType::F32, {2, classes}},
      {"input", "input", DType::F32, {batch, 2}},
      {"labels", "input", DType::I64, {batch}},
      {"step", "input", DType::I64, {}},
      {"lr", "input", DType::F32, {}},
  };
  std::vector<TestTensor> results = {
      {"w", "param", DType::F32, {2, classes}},
      {"loss", "output", DType::F32, {}},
  };
  auto step = [classes](TestModel &m, void *const *a, void *const *r) {
    std::memcpy(r[m.result("w")], a[m.arg("w")],
                size_t(2 * classes) * sizeof(float));
    at(r, m.result("loss")) = 0;
  };
  return std::make_unique<TestModel>(
      args, results,
      R"({"source": "classifier-test", "num_classes": )" +
          std::to_string(classes) + "}",
      std::vector<std::pair<std::string, HostArray>>{
          {"w", HostArray::zeros(DType::F32, {2, classes})}},
      step);
}
