//===- GradCheckTest.cpp - Finite-difference checks of every gradient rule ===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Each case is a loss `sum(op(params) * weights)` over f64 tensors with
// seeded random values. --weft-autodiff builds its gradient function, the
// reference evaluator runs it, and every gradient element is compared with
// a central difference of the loss. In f64 with eps = 1e-6 the difference
// is good to about 1e-9, so a wrong rule (a dropped term, a missing
// broadcast reduction, a transposed operand) cannot hide under the
// tolerance. The evaluator is independent of the rules: the forward loops
// are the oracle for the backward IR.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"
#include "weft/Evaluator/Evaluator.h"
#include "weft/Transforms/Train/Passes.h"

#include "mlir/AsmParser/AsmParser.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FormatVariadic.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace mlir;
using namespace weft;
using namespace weft::eval;

namespace {

/// One argument of a case's loss function.
struct Arg {
  std::string name;
  std::string type;
  /// Trainable (gets a gradient) or a batch input (only perturbs the loss).
  bool param = true;
  /// Random values are drawn uniformly from [lo, hi).
  double lo = -2, hi = 2;
  /// A parameter that gets no gradient: autodiff must turn it into a buffer
  /// of the gradient function, and the loss must not depend on it.
  bool untrained = false;
};

Arg param(std::string name, std::string type, double lo = -2, double hi = 2) {
  return {std::move(name), std::move(type), true, lo, hi};
}
Arg input(std::string name, std::string type, double lo = -2, double hi = 2) {
  return {std::move(name), std::move(type), false, lo, hi};
}
Arg untrained(std::string name, std::string type) {
  return {std::move(name), std::move(type), true, -2, 2, true};
}

/// How closely the analytic gradient must match the central difference:
/// |analytic - numeric| <= atol + rtol * max(|analytic|, |numeric|).
struct Tolerance {
  double eps = 1e-6;
  double rtol = 1e-6;
  double atol = 1e-7;
};

class GradCheckTest : public ::testing::Test {
protected:
  GradCheckTest() {
    DialectRegistry registry;
    registry.insert<WeftDialect, func::FuncDialect>();
    context.appendDialectRegistry(registry);
    context.loadAllAvailableDialects();
  }

  /// Checks the gradient of `sum(y * weights)` where `body` computes `%y` of
  /// type `resultType` from `args`. Returns the largest absolute error.
  double check(ArrayRef<Arg> args, StringRef body, StringRef resultType,
               Tolerance tol = {}) {
    std::string ir = buildModule(args, body, resultType);
    std::string diagnostics;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      diagnostics += d.str() + "\n";
      return success();
    });
    module = parseSourceString<ModuleOp>(ir, ParserConfig(&context));
    if (!module) {
      ADD_FAILURE() << "cannot parse:\n" << ir << "\n" << diagnostics;
      return INFINITY;
    }
    PassManager pm(&context);
    pm.addPass(createAutodiffPass());
    if (failed(pm.run(*module))) {
      ADD_FAILURE() << "autodiff failed:\n" << diagnostics << "\n" << ir;
      return INFINITY;
    }
    auto lossFn = module->lookupSymbol<func::FuncOp>("loss");
    auto gradFn = module->lookupSymbol<func::FuncOp>("loss_grad");

    SmallVector<Tensor> values;
    for (auto [i, type] : llvm::enumerate(lossFn.getArgumentTypes())) {
      const Arg *spec = i < args.size() ? &args[i] : nullptr;
      values.push_back(random(cast<RankedTensorType>(type),
                              spec ? spec->lo : -1, spec ? spec->hi : 1));
    }
    FailureOr<SmallVector<Tensor>> grads = evaluateFunction(gradFn, values);
    FailureOr<SmallVector<Tensor>> loss = evaluateFunction(lossFn, values);
    if (failed(grads) || failed(loss)) {
      ADD_FAILURE() << "evaluation failed:\n" << diagnostics;
      return INFINITY;
    }
    EXPECT_EQ((*grads)[0].fp, (*loss)[0].fp) << "the loss changed";

    double worst = 0;
    unsigned result = 1;
    for (auto [i, arg] : llvm::enumerate(args)) {
      if (!arg.param)
        continue;
      if (arg.untrained) {
        EXPECT_TRUE(gradFn.getArgAttr(i, WeftDialect::kBufferAttrName))
            << arg.name << " should have become a buffer";
        for (int64_t k = 0, e = values[i].numElements(); k < e; ++k)
          EXPECT_EQ(centralDifference(lossFn, values, i, k, tol.eps), 0.0)
              << "the loss depends on " << arg.name;
        continue;
      }
      const Tensor &grad = (*grads)[result++];
      for (int64_t k = 0, e = grad.numElements(); k < e; ++k) {
        double numeric = centralDifference(lossFn, values, i, k, tol.eps);
        double analytic = grad.fp[k];
        double error = std::fabs(analytic - numeric);
        worst = std::max(worst, error);
        EXPECT_LE(error, tol.atol + tol.rtol * std::max(std::fabs(analytic),
                                                        std::fabs(numeric)))
            << "d loss / d " << arg.name << "[" << k << "]: analytic "
            << analytic << ", numeric " << numeric << "\n"
            << ir;
      }
    }
    EXPECT_EQ(result, grads->size());
    const ::testing::TestInfo *info =
        ::testing::UnitTest::GetInstance()->current_test_info();
    std::printf("[gradcheck] %-28s max |error| %.2e\n", info->name(), worst);
    return worst;
  }

  /// The gradient function's results for `values`, for exact checks.
  SmallVector<Tensor> gradients(ArrayRef<Arg> args, StringRef body,
                                StringRef resultType, ArrayRef<Tensor> values) {
    std::string ir = buildModule(args, body, resultType);
    module = parseSourceString<ModuleOp>(ir, ParserConfig(&context));
    PassManager pm(&context);
    pm.addPass(createAutodiffPass());
    if (!module || failed(pm.run(*module))) {
      ADD_FAILURE() << "cannot differentiate:\n" << ir;
      return {};
    }
    FailureOr<SmallVector<Tensor>> grads = evaluateFunction(
        module->lookupSymbol<func::FuncOp>("loss_grad"), values);
    if (failed(grads)) {
      ADD_FAILURE() << "evaluation failed";
      return {};
    }
    return *grads;
  }

  Tensor f64(ArrayRef<int64_t> shape, ArrayRef<double> values) {
    Tensor t =
        Tensor::zeros(RankedTensorType::get(shape, Float64Type::get(&context)));
    t.fp.assign(values.begin(), values.end());
    return t;
  }

private:
  /// `@loss(args..., %weights) -> tensor<f64>` around `body`.
  std::string buildModule(ArrayRef<Arg> args, StringRef body,
                          StringRef resultType) {
    std::string signature;
    for (const Arg &arg : args)
      signature += llvm::formatv("%{0}: {1} {{weft.{2} = \"{0}\"}, ", arg.name,
                                 arg.type, arg.param ? "param" : "input");
    auto type = cast<RankedTensorType>(mlir::parseType(resultType, &context));
    std::string axes;
    for (int64_t d = 0; d < type.getRank(); ++d)
      axes += (d ? ", " : ": ") + std::to_string(d);
    return llvm::formatv(R"mlir(
func.func @loss({0}%weights: {1} {{weft.input = "weights"}) -> tensor<f64> {{
{2}
  %gc_weighted = weft.mul %y, %weights : ({1}, {1}) -> {1}
  %gc_loss = weft.reduce_sum %gc_weighted {{axes = array<i64{3}>}
      : ({1}) -> tensor<f64>
  return %gc_loss : tensor<f64>
}
)mlir",
                         signature, resultType, body, axes);
  }

  /// Seeded, portable uniform values: the same on every standard library.
  Tensor random(RankedTensorType type, double lo, double hi) {
    Tensor t = Tensor::zeros(type);
    for (double &v : t.fp)
      v = lo + (hi - lo) * static_cast<double>(rng() >> 11) * 0x1.0p-53;
    return t;
  }

  double centralDifference(func::FuncOp lossFn, ArrayRef<Tensor> values,
                           size_t arg, int64_t element, double eps) {
    SmallVector<Tensor> shifted(values.begin(), values.end());
    double x = values[arg].fp[element];
    shifted[arg].fp[element] = x + eps;
    double plus = evaluateFunction(lossFn, shifted)->front().fp[0];
    shifted[arg].fp[element] = x - eps;
    double minus = evaluateFunction(lossFn, shifted)->front().fp[0];
    return (plus - minus) / (2 * eps);
  }

  MLIRContext context;
  OwningOpRef<ModuleOp> module;
  std::mt19937_64 rng{20240611};
};

constexpr double kPositiveLo = 0.5, kPositiveHi = 2.0;

//===----------------------------------------------------------------------===//
// Binary elementwise, with broadcasting on both sides
//===----------------------------------------------------------------------===//

/// `%y = <op> %a, %b` with a: 2x1x4 and b: 3x1, so both operands broadcast.
std::string binaryBody(StringRef op) {
  return llvm::formatv("  %y = weft.{0} %a, %b : (tensor<2x1x4xf64>, "
                       "tensor<3x1xf64>) -> tensor<2x3x4xf64>",
                       op);
}

TEST_F(GradCheckTest, Add) {
  check({param("a", "tensor<2x1x4xf64>"), param("b", "tensor<3x1xf64>")},
        binaryBody("add"), "tensor<2x3x4xf64>");
}
TEST_F(GradCheckTest, Sub) {
  check({param("a", "tensor<2x1x4xf64>"), param("b", "tensor<3x1xf64>")},
        binaryBody("sub"), "tensor<2x3x4xf64>");
}
TEST_F(GradCheckTest, Mul) {
  check({param("a", "tensor<2x1x4xf64>"), param("b", "tensor<3x1xf64>")},
        binaryBody("mul"), "tensor<2x3x4xf64>");
}
TEST_F(GradCheckTest, Div) {
  check({param("a", "tensor<2x1x4xf64>"),
         param("b", "tensor<3x1xf64>", kPositiveLo, kPositiveHi)},
        binaryBody("div"), "tensor<2x3x4xf64>");
}
TEST_F(GradCheckTest, Pow) {
  check({param("a", "tensor<2x1x4xf64>", kPositiveLo, kPositiveHi),
         param("b", "tensor<3x1xf64>", -1.5, 1.5)},
        binaryBody("pow"), "tensor<2x3x4xf64>");
}
TEST_F(GradCheckTest, Max) {
  check({param("a", "tensor<2x1x4xf64>"), param("b", "tensor<3x1xf64>")},
        binaryBody("max"), "tensor<2x3x4xf64>");
}
TEST_F(GradCheckTest, Min) {
  check({param("a", "tensor<2x1x4xf64>"), param("b", "tensor<3x1xf64>")},
        binaryBody("min"), "tensor<2x3x4xf64>");
}

TEST_F(GradCheckTest, MaxAndMinSplitTies) {
  // max(x, x) and min(x, x): each side gets half, as torch.maximum.
  SmallVector<Tensor> grads = gradients(
      {param("a", "tensor<3xf64>"), param("b", "tensor<3xf64>")}, R"mlir(
  %hi = weft.max %a, %b : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %lo = weft.min %a, %b : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>
  %y = weft.add %hi, %lo : (tensor<3xf64>, tensor<3xf64>) -> tensor<3xf64>)mlir",
      "tensor<3xf64>",
      {f64({3}, {1, 2, 3}), f64({3}, {1, 0, 5}), f64({3}, {1, 1, 1})});
  ASSERT_EQ(grads.size(), 3u);
  EXPECT_EQ(grads[1].fp, std::vector<double>({1, 1, 1}));
  EXPECT_EQ(grads[2].fp, std::vector<double>({1, 1, 1}));
  grads = gradients(
      {param("a", "tensor<3xf64>"), param("b", "tensor<3xf64>")},
      "  %y = weft.max %a, %b : (tensor<3xf64>, tensor<3xf64>) -> "
      "tensor<3xf64>",
      "tensor<3xf64>",
      {f64({3}, {1, 2, 3}), f64({3}, {1, 0, 5}), f64({3}, {1, 1, 1})});
  ASSERT_EQ(grads.size(), 3u);
  EXPECT_EQ(grads[1].fp, std::vector<double>({0.5, 1, 0}));
  EXPECT_EQ(grads[2].fp, std::vector<double>({0.5, 0, 1}));
}

TEST_F(GradCheckTest, Where) {
  check({param("t", "tensor<3x4xf64>"), param("f", "tensor<4xf64>"),
         input("m", "tensor<3x4xf64>")},
        R"mlir(
  %zero = weft.constant dense<0.0> : tensor<f64>
  %c = weft.cmp gt, %m, %zero : (tensor<3x4xf64>, tensor<f64>) -> tensor<3x4xi1>
  %y = weft.where %c, %t, %f
      : (tensor<3x4xi1>, tensor<3x4xf64>, tensor<4xf64>) -> tensor<3x4xf64>)mlir",
        "tensor<3x4xf64>");
}

//===----------------------------------------------------------------------===//
// Unary elementwise
//===----------------------------------------------------------------------===//

class UnaryGradCheckTest : public GradCheckTest {
protected:
  void checkUnary(StringRef op, double lo = -2, double hi = 2,
                  StringRef suffix = "") {
    check({param("x", "tensor<3x5xf64>", lo, hi)},
          llvm::formatv("  %y = weft.{0} %x{1} : tensor<3x5xf64>", op, suffix)
              .str(),
          "tensor<3x5xf64>");
  }
};

TEST_F(UnaryGradCheckTest, Neg) { checkUnary("neg"); }
TEST_F(UnaryGradCheckTest, Abs) { checkUnary("abs"); }
TEST_F(UnaryGradCheckTest, Relu) { checkUnary("relu"); }
TEST_F(UnaryGradCheckTest, Tanh) { checkUnary("tanh"); }
TEST_F(UnaryGradCheckTest, Sigmoid) { checkUnary("sigmoid"); }
TEST_F(UnaryGradCheckTest, Exp) { checkUnary("exp"); }
TEST_F(UnaryGradCheckTest, Log) { checkUnary("log", kPositiveLo, kPositiveHi); }
TEST_F(UnaryGradCheckTest, Sqrt) {
  checkUnary("sqrt", kPositiveLo, kPositiveHi);
}
TEST_F(UnaryGradCheckTest, Rsqrt) {
  checkUnary("rsqrt", kPositiveLo, kPositiveHi);
}
TEST_F(UnaryGradCheckTest, Erf) { checkUnary("erf"); }
TEST_F(UnaryGradCheckTest, Cos) { checkUnary("cos"); }
TEST_F(UnaryGradCheckTest, Sin) { checkUnary("sin"); }
TEST_F(UnaryGradCheckTest, Gelu) { checkUnary("gelu", -3, 3); }
TEST_F(UnaryGradCheckTest, GeluTanh) {
  checkUnary("gelu", -3, 3, " approximate = tanh");
}

TEST_F(GradCheckTest, CastRoundTrip) {
  // Through f32 and back: the difference quotient sees f32 rounding, so the
  // step and tolerance are coarser than elsewhere.
  check({param("x", "tensor<3x4xf64>")}, R"mlir(
  %h = weft.cast %x : tensor<3x4xf64> -> tensor<3x4xf32>
  %s = weft.tanh %h : tensor<3x4xf32>
  %y = weft.cast %s : tensor<3x4xf32> -> tensor<3x4xf64>)mlir",
        "tensor<3x4xf64>", Tolerance{1e-2, 1e-3, 1e-3});
}

TEST_F(GradCheckTest, CausalMaskThenSoftmax) {
  check({param("x", "tensor<2x4x5xf64>")}, R"mlir(
  %m = weft.causal_mask %x {diagonal = 1 : i64} : tensor<2x4x5xf64>
  %y = weft.softmax %m {axis = 2 : i64} : tensor<2x4x5xf64>)mlir",
        "tensor<2x4x5xf64>");
}

TEST_F(GradCheckTest, CausalMaskWithFill) {
  check({param("x", "tensor<3x3xf64>")},
        "  %y = weft.causal_mask %x {fill = 2.5 : f64} : tensor<3x3xf64>",
        "tensor<3x3xf64>");
}

//===----------------------------------------------------------------------===//
// Matmul
//===----------------------------------------------------------------------===//

class MatMulGradCheckTest : public GradCheckTest {
protected:
  /// lhs' is a 2x1 batch of 3x4, rhs' a batch of 3 4x5 matrices: the result
  /// is 2x3x3x5 and both batch reductions are exercised. The stored shapes
  /// follow the transpose flags.
  void checkMatMul(bool ta, bool tb) {
    std::string lhs = ta ? "tensor<2x1x4x3xf64>" : "tensor<2x1x3x4xf64>";
    std::string rhs = tb ? "tensor<3x5x4xf64>" : "tensor<3x4x5xf64>";
    check({param("a", lhs), param("b", rhs)},
          llvm::formatv("  %y = weft.matmul %a, %b {{transpose_lhs = {0}, "
                        "transpose_rhs = {1}} : ({2}, {3}) -> "
                        "tensor<2x3x3x5xf64>",
                        ta ? "true" : "false", tb ? "true" : "false", lhs, rhs)
              .str(),
          "tensor<2x3x3x5xf64>");
  }
};

TEST_F(MatMulGradCheckTest, Plain) { checkMatMul(false, false); }
TEST_F(MatMulGradCheckTest, TransposeLhs) { checkMatMul(true, false); }
TEST_F(MatMulGradCheckTest, TransposeRhs) { checkMatMul(false, true); }
TEST_F(MatMulGradCheckTest, TransposeBoth) { checkMatMul(true, true); }

TEST_F(MatMulGradCheckTest, SharedWeights) {
  check({param("x", "tensor<2x3x4xf64>"), param("w", "tensor<4x5xf64>")},
        "  %y = weft.matmul %x, %w : (tensor<2x3x4xf64>, tensor<4x5xf64>) "
        "-> tensor<2x3x5xf64>",
        "tensor<2x3x5xf64>");
}

//===----------------------------------------------------------------------===//
// Normalization and reductions
//===----------------------------------------------------------------------===//

TEST_F(GradCheckTest, Softmax) {
  check({param("x", "tensor<2x3x4xf64>")},
        "  %y = weft.softmax %x {axis = 1 : i64} : tensor<2x3x4xf64>",
        "tensor<2x3x4xf64>");
}

TEST_F(GradCheckTest, LogSoftmax) {
  check({param("x", "tensor<2x3x4xf64>")},
        "  %y = weft.log_softmax %x {axis = 2 : i64} : tensor<2x3x4xf64>",
        "tensor<2x3x4xf64>");
}

TEST_F(GradCheckTest, LayerNorm) {
  check({param("x", "tensor<2x3x4xf64>"), param("g", "tensor<3x4xf64>"),
         param("b", "tensor<3x4xf64>")},
        R"mlir(
  %y = weft.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<2x3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>)
      -> tensor<2x3x4xf64>)mlir",
        "tensor<2x3x4xf64>");
}

TEST_F(GradCheckTest, LayerNormWholeTensor) {
  check({param("x", "tensor<3x4xf64>"), param("g", "tensor<3x4xf64>"),
         param("b", "tensor<3x4xf64>")},
        R"mlir(
  %y = weft.layer_norm %x, %g, %b {axis = 0 : i64, epsilon = 1.0e-03 : f64}
      : (tensor<3x4xf64>, tensor<3x4xf64>, tensor<3x4xf64>)
      -> tensor<3x4xf64>)mlir",
        "tensor<3x4xf64>");
}

TEST_F(GradCheckTest, ReduceSum) {
  check({param("x", "tensor<2x3x4xf64>")},
        "  %y = weft.reduce_sum %x {axes = array<i64: 0, 2>} "
        ": (tensor<2x3x4xf64>) -> tensor<3xf64>",
        "tensor<3xf64>");
}

TEST_F(GradCheckTest, ReduceMean) {
  check({param("x", "tensor<2x3x4xf64>")},
        "  %y = weft.reduce_mean %x {axes = array<i64: 1>, keep_dims = true} "
        ": (tensor<2x3x4xf64>) -> tensor<2x1x4xf64>",
        "tensor<2x1x4xf64>");
}

TEST_F(GradCheckTest, ReduceMax) {
  check({param("x", "tensor<2x3x4xf64>")},
        "  %y = weft.reduce_max %x {axes = array<i64: 1, 2>} "
        ": (tensor<2x3x4xf64>) -> tensor<2xf64>",
        "tensor<2xf64>");
}

TEST_F(GradCheckTest, ReduceMaxSplitsTies) {
  // As torch.amax: tied maxima share the gradient evenly.
  SmallVector<Tensor> grads = gradients(
      {param("x", "tensor<2x3xf64>")},
      "  %y = weft.reduce_max %x {axes = array<i64: 1>} "
      ": (tensor<2x3xf64>) -> tensor<2xf64>",
      "tensor<2xf64>", {f64({2, 3}, {1, 3, 3, 2, 2, 2}), f64({2}, {1, 6})});
  ASSERT_EQ(grads.size(), 2u);
  EXPECT_EQ(grads[1].fp, std::vector<double>({0, 0.5, 0.5, 2, 2, 2}));
}

TEST_F(GradCheckTest, CrossEntropy) {
  check({param("z", "tensor<2x3x5xf64>")}, R"mlir(
  %labels = weft.constant dense<[[0, 4, 2], [1, 1, 3]]> : tensor<2x3xi64>
  %y = weft.cross_entropy %z, %labels
      : (tensor<2x3x5xf64>, tensor<2x3xi64>) -> tensor<f64>)mlir",
        "tensor<f64>");
}

TEST_F(GradCheckTest, Mse) {
  check({param("p", "tensor<3x4xf64>"), param("t", "tensor<3x4xf64>")},
        "  %y = weft.mse %p, %t : (tensor<3x4xf64>, tensor<3x4xf64>) -> "
        "tensor<f64>",
        "tensor<f64>");
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

TEST_F(GradCheckTest, GatherRepeatedIndices) {
  // Rows 0 and 2 are read twice, row 4 also through index -1; row 3 never.
  check({param("table", "tensor<5x3xf64>")}, R"mlir(
  %i = weft.constant dense<[[0, 2, 2], [4, 0, -1]]> : tensor<2x3xi64>
  %y = weft.gather %table, %i {axis = 0 : i64}
      : (tensor<5x3xf64>, tensor<2x3xi64>) -> tensor<2x3x3xf64>)mlir",
        "tensor<2x3x3xf64>");
}

TEST_F(GradCheckTest, GatherInnerAxis) {
  check({param("x", "tensor<3x5xf64>")}, R"mlir(
  %i = weft.constant dense<[1, 1, 3, 0]> : tensor<4xi32>
  %y = weft.gather %x, %i {axis = 1 : i64}
      : (tensor<3x5xf64>, tensor<4xi32>) -> tensor<3x4xf64>)mlir",
        "tensor<3x4xf64>");
}

TEST_F(GradCheckTest, Reshape) {
  check({param("x", "tensor<2x6xf64>")},
        "  %y = weft.reshape %x : tensor<2x6xf64> -> tensor<3x4xf64>",
        "tensor<3x4xf64>");
}

TEST_F(GradCheckTest, Broadcast) {
  check({param("x", "tensor<3x1xf64>")},
        "  %y = weft.broadcast %x : tensor<3x1xf64> -> tensor<2x3x4xf64>",
        "tensor<2x3x4xf64>");
}

TEST_F(GradCheckTest, Transpose) {
  check({param("x", "tensor<2x3x4xf64>")},
        "  %y = weft.transpose %x {permutation = array<i64: 2, 0, 1>} "
        ": (tensor<2x3x4xf64>) -> tensor<4x2x3xf64>",
        "tensor<4x2x3xf64>");
}

TEST_F(GradCheckTest, SliceWithStrides) {
  check({param("x", "tensor<5x7xf64>")},
        "  %y = weft.slice %x {starts = array<i64: 1, 0>, limits = array<i64: "
        "5, 7>, strides = array<i64: 2, 3>} : (tensor<5x7xf64>) -> "
        "tensor<2x3xf64>",
        "tensor<2x3xf64>");
  check({param("x", "tensor<4x6x3xf64>")},
        "  %y = weft.slice %x {starts = array<i64: 0, 1, 0>, limits = "
        "array<i64: 4, 5, 3>, strides = array<i64: 1, 2, 2>} : "
        "(tensor<4x6x3xf64>) -> tensor<4x2x2xf64>",
        "tensor<4x2x2xf64>");
}

TEST_F(GradCheckTest, PadConstantWithInterior) {
  // The padding value is an attribute: only the input's cells get gradient.
  check({param("x", "tensor<2x3xf64>")},
        "  %y = weft.pad %x {low = array<i64: 1, 0>, high = array<i64: 0, 2>, "
        "interior = array<i64: 0, 1>, value = 0.5 : f64} : (tensor<2x3xf64>) "
        "-> tensor<3x7xf64>",
        "tensor<3x7xf64>");
}

TEST_F(GradCheckTest, ScatterAdd) {
  // Row 2 is written twice and row 4 through -1 as well; row 3 never.
  check({param("x", "tensor<5x3xf64>"), param("u", "tensor<2x3x3xf64>")},
        R"mlir(
  %i = weft.constant dense<[[0, 2, 2], [4, 1, -1]]> : tensor<2x3xi64>
  %y = weft.scatter_add %x, %i, %u {axis = 0 : i64}
      : (tensor<5x3xf64>, tensor<2x3xi64>, tensor<2x3x3xf64>) -> tensor<5x3xf64>)mlir",
        "tensor<5x3xf64>");
}

TEST_F(GradCheckTest, Concat) {
  check({param("a", "tensor<2x3xf64>"), param("b", "tensor<2x1xf64>"),
         param("c", "tensor<2x2xf64>")},
        "  %y = weft.concat %a, %b, %c {axis = 1 : i64} : (tensor<2x3xf64>, "
        "tensor<2x1xf64>, tensor<2x2xf64>) -> tensor<2x6xf64>",
        "tensor<2x6xf64>");
}

//===----------------------------------------------------------------------===//
// Convolution and pooling
//===----------------------------------------------------------------------===//

TEST_F(GradCheckTest, Conv2DStridedPaddedDilatedGrouped) {
  // H: (6 + 1 + 1 - 3) / 2 + 1 = 3, leaving the last padded row unread;
  // W: (5 + 0 + 2 - 5) / 1 + 1 = 3 with dilation 2.
  check({param("x", "tensor<2x4x6x5xf64>"), param("w", "tensor<6x2x3x3xf64>"),
         param("b", "tensor<6xf64>")},
        R"mlir(
  %y = weft.conv2d %x, %w, %b {strides = array<i64: 2, 1>,
                               padding = array<i64: 1, 0, 1, 2>,
                               dilations = array<i64: 1, 2>, groups = 2 : i64}
      : (tensor<2x4x6x5xf64>, tensor<6x2x3x3xf64>, tensor<6xf64>)
      -> tensor<2x6x3x3xf64>)mlir",
        "tensor<2x6x3x3xf64>");
}

TEST_F(GradCheckTest, Conv2DNoBias) {
  check({param("x", "tensor<1x3x5x5xf64>"), param("w", "tensor<2x3x2x2xf64>")},
        R"mlir(
  %y = weft.conv2d %x, %w {strides = array<i64: 1, 1>,
                           padding = array<i64: 0, 0, 0, 0>,
                           dilations = array<i64: 1, 1>}
      : (tensor<1x3x5x5xf64>, tensor<2x3x2x2xf64>) -> tensor<1x2x4x4xf64>)mlir",
        "tensor<1x2x4x4xf64>");
}

// The backward ops are forward ops too: ConvTranspose legalizes to
// conv2d_backward_input. Same window as Conv2DStridedPaddedDilatedGrouped.
TEST_F(GradCheckTest, Conv2DBackwardInput) {
  check({param("g", "tensor<2x6x3x3xf64>"), param("w", "tensor<6x2x3x3xf64>")},
        R"mlir(
  %y = weft.conv2d_backward_input %g, %w {strides = array<i64: 2, 1>,
                                          padding = array<i64: 1, 0, 1, 2>,
                                          dilations = array<i64: 1, 2>,
                                          groups = 2 : i64}
      : (tensor<2x6x3x3xf64>, tensor<6x2x3x3xf64>) -> tensor<2x4x6x5xf64>)mlir",
        "tensor<2x4x6x5xf64>");
}

TEST_F(GradCheckTest, Conv2DBackwardFilter) {
  check({param("g", "tensor<2x6x3x3xf64>"), param("x", "tensor<2x4x6x5xf64>")},
        R"mlir(
  %y = weft.conv2d_backward_filter %g, %x {strides = array<i64: 2, 1>,
                                           padding = array<i64: 1, 0, 1, 2>,
                                           dilations = array<i64: 1, 2>,
                                           groups = 2 : i64}
      : (tensor<2x6x3x3xf64>, tensor<2x4x6x5xf64>) -> tensor<6x2x3x3xf64>)mlir",
        "tensor<6x2x3x3xf64>");
}

TEST_F(GradCheckTest, AvgPool2DGrad) {
  for (StringRef includePad : {"false", "true"})
    check({param("g", "tensor<2x3x3x3xf64>")},
          llvm::formatv(R"mlir(
  %y = weft.avg_pool2d_grad %g {{kernel = array<i64: 3, 2>,
                                strides = array<i64: 2, 2>,
                                padding = array<i64: 1, 1, 1, 0>,
                                count_include_pad = {0}}
      : (tensor<2x3x3x3xf64>) -> tensor<2x3x5x5xf64>)mlir",
                        includePad)
              .str(),
          "tensor<2x3x5x5xf64>");
}

TEST_F(GradCheckTest, MaxPool2DOverlappingPadded) {
  check({param("x", "tensor<2x3x5x5xf64>")}, R"mlir(
  %y = weft.max_pool2d %x {kernel = array<i64: 3, 3>, strides = array<i64: 2, 2>,
                           padding = array<i64: 1, 1, 1, 1>}
      : (tensor<2x3x5x5xf64>) -> tensor<2x3x3x3xf64>)mlir",
        "tensor<2x3x3x3xf64>");
}

TEST_F(GradCheckTest, AvgPool2DPadded) {
  for (StringRef includePad : {"false", "true"})
    check({param("x", "tensor<2x3x5x5xf64>")},
          llvm::formatv(R"mlir(
  %y = weft.avg_pool2d %x {{kernel = array<i64: 3, 2>, strides = array<i64: 2, 2>,
                           padding = array<i64: 1, 1, 1, 0>,
                           count_include_pad = {0}}
      : (tensor<2x3x5x5xf64>) -> tensor<2x3x3x3xf64>)mlir",
                        includePad)
              .str(),
          "tensor<2x3x3x3xf64>");
}

TEST_F(GradCheckTest, GlobalAvgPool) {
  check({param("x", "tensor<2x3x4x4xf64>")},
        "  %y = weft.global_avg_pool %x : (tensor<2x3x4x4xf64>) -> "
        "tensor<2x3x1x1xf64>",
        "tensor<2x3x1x1xf64>");
}

//===----------------------------------------------------------------------===//
// Whole models: fan-out, tied parameters, unused parameters
//===----------------------------------------------------------------------===//

TEST_F(GradCheckTest, TiedEmbeddingLanguageModel) {
  // The embedding is read by gather and again, transposed, as the output
  // projection: its gradient is the sum of both paths.
  check({param("emb", "tensor<6x4xf64>"), param("g", "tensor<4xf64>"),
         param("bias", "tensor<4xf64>")},
        R"mlir(
  %tokens = weft.constant dense<[[1, 5, 5], [0, 2, 1]]> : tensor<2x3xi64>
  %labels = weft.constant dense<[[5, 5, 0], [2, 1, 3]]> : tensor<2x3xi64>
  %h = weft.gather %emb, %tokens {axis = 0 : i64}
      : (tensor<6x4xf64>, tensor<2x3xi64>) -> tensor<2x3x4xf64>
  %n = weft.layer_norm %h, %g, %bias {axis = 2 : i64, epsilon = 1.0e-05 : f64}
      : (tensor<2x3x4xf64>, tensor<4xf64>, tensor<4xf64>) -> tensor<2x3x4xf64>
  %a = weft.gelu %n : tensor<2x3x4xf64>
  %r = weft.add %a, %h : (tensor<2x3x4xf64>, tensor<2x3x4xf64>) -> tensor<2x3x4xf64>
  %logits = weft.matmul %r, %emb {transpose_rhs = true}
      : (tensor<2x3x4xf64>, tensor<6x4xf64>) -> tensor<2x3x6xf64>
  %y = weft.cross_entropy %logits, %labels
      : (tensor<2x3x6xf64>, tensor<2x3xi64>) -> tensor<f64>)mlir",
        "tensor<f64>");
}

TEST_F(GradCheckTest, TemporalConvNetWithPadding) {
  // Two Conv1d layers as PyTorch exports a TCN (NCL lifted to NC1L): a
  // causal one, left zero padding by (3 - 1) * 2 cells (weft.pad) before a
  // dilated conv; then reflect padding by 1 (a gather of constant indices,
  // as the ONNX legalizer builds it) before a plain one.
  check({param("x", "tensor<2x3x1x6xf64>"), param("w1", "tensor<4x3x1x3xf64>"),
         param("b1", "tensor<4xf64>"), param("w2", "tensor<2x4x1x3xf64>")},
        R"mlir(
  %p = weft.pad %x {low = array<i64: 0, 0, 0, 4>, high = array<i64: 0, 0, 0, 0>,
                    interior = array<i64: 0, 0, 0, 0>}
      : (tensor<2x3x1x6xf64>) -> tensor<2x3x1x10xf64>
  %c = weft.conv2d %p, %w1, %b1 {strides = array<i64: 1, 1>,
                                 padding = array<i64: 0, 0, 0, 0>,
                                 dilations = array<i64: 1, 2>}
      : (tensor<2x3x1x10xf64>, tensor<4x3x1x3xf64>, tensor<4xf64>)
      -> tensor<2x4x1x6xf64>
  %t = weft.tanh %c : tensor<2x4x1x6xf64>
  %i = weft.constant dense<[1, 0, 1, 2, 3, 4, 5, 4]> : tensor<8xi64>
  %r = weft.gather %t, %i {axis = 3 : i64}
      : (tensor<2x4x1x6xf64>, tensor<8xi64>) -> tensor<2x4x1x8xf64>
  %y = weft.conv2d %r, %w2 {strides = array<i64: 1, 1>,
                            padding = array<i64: 0, 0, 0, 0>,
                            dilations = array<i64: 1, 1>}
      : (tensor<2x4x1x8xf64>, tensor<2x4x1x3xf64>) -> tensor<2x2x1x6xf64>)mlir",
        "tensor<2x2x1x6xf64>");
}

TEST_F(GradCheckTest, FanOutAndUnusedParameter) {
  // %x feeds three uses; %unused never reaches the loss: it gets no
  // gradient result and becomes a buffer (weft-autodiff-no-gradient.mlir).
  check({param("x", "tensor<3x4xf64>"), untrained("unused", "tensor<2xf64>")},
        R"mlir(
  %sq = weft.mul %x, %x : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>
  %t = weft.tanh %x : tensor<3x4xf64>
  %y = weft.add %sq, %t : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>)mlir",
        "tensor<3x4xf64>");
}

//===----------------------------------------------------------------------===//
// Scans and selections
//===----------------------------------------------------------------------===//

TEST_F(GradCheckTest, CumSum) {
  check({param("x", "tensor<3x5xf64>")},
        "  %y = weft.cumsum %x {axis = 1 : i64} : tensor<3x5xf64>",
        "tensor<3x5xf64>");
}

TEST_F(GradCheckTest, CumSumExclusiveReverse) {
  check({param("x", "tensor<4x3x2xf64>")},
        "  %y = weft.cumsum %x {axis = 0 : i64, exclusive = true, "
        "reverse = true} : tensor<4x3x2xf64>",
        "tensor<4x3x2xf64>");
}

TEST_F(GradCheckTest, TopKLastAxis) {
  check({param("x", "tensor<3x6xf64>")},
        "  %y = weft.top_k %x {axis = 1 : i64, k = 3 : i64} "
        ": (tensor<3x6xf64>) -> tensor<3x3xf64>",
        "tensor<3x3xf64>");
}

TEST_F(GradCheckTest, TopKSmallestInnerAxis) {
  check({param("x", "tensor<2x5x3xf64>")},
        "  %y = weft.top_k %x {axis = 1 : i64, k = 2 : i64, largest = false} "
        ": (tensor<2x5x3xf64>) -> tensor<2x2x3xf64>",
        "tensor<2x2x3xf64>");
}

TEST_F(GradCheckTest, RoundingPassesNoGradient) {
  // floor, ceil and round are flat between integers: only the direct path
  // of x reaches the loss, as torch.floor's zero gradient.
  check({param("x", "tensor<3x4xf64>", -3, 3)}, R"mlir(
  %f = weft.floor %x : tensor<3x4xf64>
  %c = weft.ceil %x : tensor<3x4xf64>
  %r = weft.round %x : tensor<3x4xf64>
  %fc = weft.add %f, %c : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>
  %fcr = weft.mul %fc, %r : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>
  %y = weft.mul %x, %fcr : (tensor<3x4xf64>, tensor<3x4xf64>) -> tensor<3x4xf64>)mlir",
        "tensor<3x4xf64>");
}

// Backpropagation through time: every operand of the recurrences (input
// gates, recurrent weights and bias, initial states) against central
// differences of a loss over all hidden states (and cell states), in both
// directions.
TEST_F(GradCheckTest, LstmHiddenAndCell) {
  check({param("xg", "tensor<4x2x12xf64>"), param("r", "tensor<12x3xf64>", -1, 1),
         param("h0", "tensor<2x3xf64>"), param("c0", "tensor<2x3xf64>")},
        R"mlir(
  %h, %c, %g = weft.lstm %xg, %r, %h0, %c0 : (tensor<4x2x12xf64>, tensor<12x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) -> (tensor<4x2x3xf64>, tensor<4x2x3xf64>, tensor<4x2x12xf64>)
  %y = weft.mul %h, %c : (tensor<4x2x3xf64>, tensor<4x2x3xf64>) -> tensor<4x2x3xf64>)mlir",
        "tensor<4x2x3xf64>");
}

TEST_F(GradCheckTest, LstmReverseHiddenOnly) {
  check({param("xg", "tensor<5x2x8xf64>"), param("r", "tensor<8x2xf64>", -1, 1),
         param("h0", "tensor<2x2xf64>"), param("c0", "tensor<2x2xf64>")},
        R"mlir(
  %y, %c, %g = weft.lstm %xg, %r, %h0, %c0 {reverse = true} : (tensor<5x2x8xf64>, tensor<8x2xf64>, tensor<2x2xf64>, tensor<2x2xf64>) -> (tensor<5x2x2xf64>, tensor<5x2x2xf64>, tensor<5x2x8xf64>))mlir",
        "tensor<5x2x2xf64>");
}

TEST_F(GradCheckTest, LstmOneStepLastCellOnly) {
  check({param("xg", "tensor<1x3x8xf64>"), param("r", "tensor<8x2xf64>", -1, 1),
         param("h0", "tensor<3x2xf64>"), param("c0", "tensor<3x2xf64>")},
        R"mlir(
  %h, %y, %g = weft.lstm %xg, %r, %h0, %c0 : (tensor<1x3x8xf64>, tensor<8x2xf64>, tensor<3x2xf64>, tensor<3x2xf64>) -> (tensor<1x3x2xf64>, tensor<1x3x2xf64>, tensor<1x3x8xf64>))mlir",
        "tensor<1x3x2xf64>");
}

TEST_F(GradCheckTest, Gru) {
  check({param("xg", "tensor<4x2x9xf64>"), param("r", "tensor<9x3xf64>", -1, 1),
         param("rb", "tensor<9xf64>"), param("h0", "tensor<2x3xf64>")},
        R"mlir(
  %y, %g = weft.gru %xg, %r, %rb, %h0 : (tensor<4x2x9xf64>, tensor<9x3xf64>, tensor<9xf64>, tensor<2x3xf64>) -> (tensor<4x2x3xf64>, tensor<4x2x12xf64>))mlir",
        "tensor<4x2x3xf64>");
}

TEST_F(GradCheckTest, GruReverse) {
  check({param("xg", "tensor<5x3x6xf64>"), param("r", "tensor<6x2xf64>", -1, 1),
         param("rb", "tensor<6xf64>"), param("h0", "tensor<3x2xf64>")},
        R"mlir(
  %y, %g = weft.gru %xg, %r, %rb, %h0 {reverse = true} : (tensor<5x3x6xf64>, tensor<6x2xf64>, tensor<6xf64>, tensor<3x2xf64>) -> (tensor<5x3x2xf64>, tensor<5x3x8xf64>))mlir",
        "tensor<5x3x2xf64>");
}

// Recompute mode (--weft-recurrent-activations): no stored gates; the
// adjoints recompute them from the input gates.
TEST_F(GradCheckTest, LstmRecomputeHiddenAndCell) {
  check({param("xg", "tensor<4x2x12xf64>"), param("r", "tensor<12x3xf64>", -1, 1),
         param("h0", "tensor<2x3xf64>"), param("c0", "tensor<2x3xf64>")},
        R"mlir(
  %h, %c = weft.lstm %xg, %r, %h0, %c0 {recompute} : (tensor<4x2x12xf64>, tensor<12x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) -> (tensor<4x2x3xf64>, tensor<4x2x3xf64>)
  %y = weft.mul %h, %c : (tensor<4x2x3xf64>, tensor<4x2x3xf64>) -> tensor<4x2x3xf64>)mlir",
        "tensor<4x2x3xf64>");
}

TEST_F(GradCheckTest, GruReverseRecompute) {
  check({param("xg", "tensor<5x3x6xf64>"), param("r", "tensor<6x2xf64>", -1, 1),
         param("rb", "tensor<6xf64>"), param("h0", "tensor<3x2xf64>")},
        R"mlir(
  %y = weft.gru %xg, %r, %rb, %h0 {recompute, reverse = true} : (tensor<5x3x6xf64>, tensor<6x2xf64>, tensor<6xf64>, tensor<3x2xf64>) -> tensor<5x3x2xf64>)mlir",
        "tensor<5x3x2xf64>");
}

// With the input projection in the model, the adjoint gets it rebuilt
// (weft.recomputed copies) instead of the forward's input gates.
TEST_F(GradCheckTest, LstmRecomputeInputProjection) {
  check({param("x", "tensor<4x2x3xf64>"), param("w", "tensor<12x3xf64>", -1, 1),
         param("b", "tensor<12xf64>"), param("r", "tensor<12x3xf64>", -1, 1),
         param("h0", "tensor<2x3xf64>"), param("c0", "tensor<2x3xf64>")},
        R"mlir(
  %p = weft.matmul %x, %w {transpose_rhs = true} : (tensor<4x2x3xf64>, tensor<12x3xf64>) -> tensor<4x2x12xf64>
  %xg = weft.add %p, %b : (tensor<4x2x12xf64>, tensor<12xf64>) -> tensor<4x2x12xf64>
  %h, %c = weft.lstm %xg, %r, %h0, %c0 {recompute} : (tensor<4x2x12xf64>, tensor<12x3xf64>, tensor<2x3xf64>, tensor<2x3xf64>) -> (tensor<4x2x3xf64>, tensor<4x2x3xf64>)
  %y = weft.mul %h, %c : (tensor<4x2x3xf64>, tensor<4x2x3xf64>) -> tensor<4x2x3xf64>)mlir",
        "tensor<4x2x3xf64>");
}

TEST_F(GradCheckTest, GruRecomputeInputProjection) {
  check({param("x", "tensor<5x3x2xf64>"), param("w", "tensor<6x2xf64>", -1, 1),
         param("b", "tensor<6xf64>"), param("r", "tensor<6x2xf64>", -1, 1),
         param("rb", "tensor<6xf64>"), param("h0", "tensor<3x2xf64>")},
        R"mlir(
  %p = weft.matmul %x, %w {transpose_rhs = true} : (tensor<5x3x2xf64>, tensor<6x2xf64>) -> tensor<5x3x6xf64>
  %xg = weft.add %p, %b : (tensor<5x3x6xf64>, tensor<6xf64>) -> tensor<5x3x6xf64>
  %y = weft.gru %xg, %r, %rb, %h0 {recompute} : (tensor<5x3x6xf64>, tensor<6x2xf64>, tensor<6xf64>, tensor<3x2xf64>) -> tensor<5x3x2xf64>)mlir",
        "tensor<5x3x2xf64>");
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

/// weft.attention's rule (weft.attention_grad) for q, k and v, causal
/// with fewer keys than queries and not causal with more.
TEST_F(GradCheckTest, AttentionCausal) {
  check({param("q", "tensor<2x5x3xf64>"), param("k", "tensor<2x4x3xf64>"),
         param("v", "tensor<2x4x2xf64>")},
        R"mlir(  %y, %lse = weft.attention %q, %k, %v {scale = 0.6 : f64, causal}
      : (tensor<2x5x3xf64>, tensor<2x4x3xf64>, tensor<2x4x2xf64>)
      -> (tensor<2x5x2xf64>, tensor<2x5xf64>))mlir",
        "tensor<2x5x2xf64>");
}
TEST_F(GradCheckTest, Attention) {
  check({param("q", "tensor<1x2x3x2xf64>"), param("k", "tensor<1x2x5x2xf64>"),
         param("v", "tensor<1x2x5x3xf64>")},
        R"mlir(  %y, %lse = weft.attention %q, %k, %v {scale = 1.3 : f64}
      : (tensor<1x2x3x2xf64>, tensor<1x2x5x2xf64>, tensor<1x2x5x3xf64>)
      -> (tensor<1x2x3x3xf64>, tensor<1x2x3xf64>))mlir",
        "tensor<1x2x3x3xf64>");
}

/// Every weft op either has a gradient rule or is marked NotDifferentiable,
/// so whether gradients pass an op is typed, never guessed from a missing
/// rule. The exceptions are listed here, each with its reason; reaching one
/// on a path from a parameter to the loss is an error naming it.
TEST(GradientCoverageTest, EveryOpHasARuleOrIsNotDifferentiable) {
  MLIRContext context;
  context.loadDialect<WeftDialect>();
  const llvm::StringSet<> withoutRule = {
      // Not legalized yet: nothing is known about it.
      "weft.onnx.node",
      // Only ever built by max_pool2d's rule; a rule needs a select-by-argmax
      // op of its own, and no forward pass uses it.
      "weft.max_pool2d_grad",
      // Only ever built by lstm's and gru's rules: training needs first
      // derivatives, and a second-order rule would be a third loop.
      "weft.lstm_grad",
      "weft.gru_grad",
      // Only ever built by attention's rule, for first derivatives.
      "weft.attention_grad",
      // The parallel stage's ops: built only after the training step
      // exists (--weft-apply-mesh and --weft-partition run after autodiff),
      // so autodiff never meets them.
      "weft.all_reduce",
      "weft.all_gather",
      "weft.reduce_scatter",
      "weft.all_to_all",
      "weft.send",
      "weft.recv",
      "weft.shard_slice",
      "weft.shard_as",
      "weft.axis_index",
  };
  int ops = 0;
  for (RegisteredOperationName name : context.getRegisteredOperations()) {
    if (name.getDialectNamespace() != WeftDialect::getDialectNamespace())
      continue;
    ++ops;
    bool rule = name.hasInterface<GradientOpInterface>();
    bool stops = name.hasTrait<weft::OpTrait::NotDifferentiable>();
    std::string op = name.getStringRef().str();
    EXPECT_FALSE(rule && stops)
        << op << " both has a rule and is NotDifferentiable";
    EXPECT_EQ(rule || stops, !withoutRule.contains(op))
        << op << ": give it a gradient rule or the NotDifferentiable trait";
  }
  EXPECT_GT(ops, 40);
}

} // namespace
