//===- TestModels.h - Hand-written compiled models for runtime tests -----===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Stand-ins for what weftc generates: WeftModel tables whose step is plain
// C++, so the runtime's loop, data loader and checkpoints can be tested
// without the compiler. Each step also records what it was given (batches,
// step index, learning rate, hyperparameters) for the tests to inspect.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_UNITTESTS_RUNTIME_TESTMODELS_H
#define WEFT_UNITTESTS_RUNTIME_TESTMODELS_H

#include "weft/Formats/HostArray.h"
#include "weft/Runtime/ModelABI.h"

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace weft {
namespace rt {
namespace test {

struct TestTensor {
  std::string name, kind;
  DType dtype;
  std::vector<int64_t> shape;
};

/// What one call of the step saw.
struct StepRecord {
  int64_t step = 0;
  float lr = 0;
  /// Values of every `hp.*` input, in argument order.
  std::vector<double> hyperParams;
  /// Each batch input's bytes, in argument order.
  std::vector<std::vector<uint8_t>> batch;
};

/// A WeftModel built from tables; its step calls `step`.
class TestModel {
public:
  using StepFn =
      std::function<void(TestModel &, void *const *args, void *const *res)>;

  TestModel(std::vector<TestTensor> args, std::vector<TestTensor> results,
            std::string json,
            std::vector<std::pair<std::string, HostArray>> weights,
            StepFn step);
  TestModel(const TestModel &) = delete;

  /// The table; makes this the model whose step runs.
  const WeftModel &model();
  /// Sets the table's deviceType (WEFT_DEVICE_CPU by default). A CUDA
  /// model's step receives device pointers: it copies its arguments to the
  /// host (Cuda.h), runs the same hand-written step there and copies the
  /// results back, so the trainer's device path runs against the CPU's.
  void setDeviceType(int32_t deviceType) { table.deviceType = deviceType; }

  int arg(const std::string &name) const;
  int result(const std::string &name) const;

  std::vector<StepRecord> records;
  /// The context each step received, in order.
  std::vector<WeftRuntimeContext> contexts;
  /// The argument pointers each step received, in order.
  std::vector<std::vector<void *>> argPointers;
  /// Called at the start of every step with the step index (tests use it
  /// to raise signals).
  std::function<void(int64_t)> onStep;

private:
  std::vector<TestTensor> args, results;
  std::vector<WeftTensorInfo> argInfo, resultInfo;
  std::string json;
  std::vector<uint8_t> weights;
  StepFn step;
  WeftModel table;

  static void trampoline(const WeftRuntimeContext *ctx, void *const *args,
                         void *const *results, void *ws);
  void runOnDevice(const WeftRuntimeContext &ctx, void *const *args,
                   void *const *results);
  void record(void *const *args);
};

/// y = x w + b trained by SGD with momentum (hp.momentum, compiled default
/// 0.5) on batches of `batch` samples of `features` f32 features; MSE loss;
/// the scheduled lr is half the base lr for steps 0 and 1. Params "w"
/// [features, 1] and "b" [1], state "momentum_buffer.w/b".
std::unique_ptr<TestModel> makeLinearModel(int64_t features = 3,
                                           int64_t batch = 4);

/// A token model: inputs "input" and "labels" I64 [batch, seq]; param "emb"
/// [vocab]; loss mean((emb[x] - y / vocab)^2) with plain SGD. Its model
/// JSON sets "vocab_size".
std::unique_ptr<TestModel> makeTokenModel(int64_t batch = 2, int64_t seq = 4,
                                          int64_t vocab = 50);

/// A classifier-shaped test model for label range checks (its step reports
/// loss 0): "input" F32 [batch, 2], "labels" I64 [batch],
/// "num_classes": classes, param "w" [2, classes], loss 0.
std::unique_ptr<TestModel> makeClassifierModel(int64_t batch = 4,
                                               int64_t classes = 3);

} // namespace test
} // namespace rt
} // namespace weft

#endif // WEFT_UNITTESTS_RUNTIME_TESTMODELS_H
