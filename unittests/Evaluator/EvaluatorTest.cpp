//===- EvaluatorTest.cpp - Tests for the reference evaluator --------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Every expectation here is computed by hand (or from the op's closed form),
// never by a second implementation of the same loops: the evaluator is the
// oracle for everything else, so its own checks must be independent.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorTestFixture.h"

#include "llvm/ADT/APFloat.h"

#include <cmath>
#include <limits>
#include <random>

using namespace mlir;
using namespace weft;
using namespace weft::eval;
using namespace weft::eval::test;

namespace {

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, MatMulWithTransposes) {
  // A = [[1,2,3],[4,5,6]], B = [[7,8],[9,10],[11,12]]: A B =
  // [[58,64],[139,154]].
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor aT = f32({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor b = f32({3, 2}, {7, 8, 9, 10, 11, 12});
  Tensor bT = f32({2, 3}, {7, 9, 11, 8, 10, 12});
  const double expected[] = {58, 64, 139, 154};

  expectValues(runOne(R"mlir(
    func.func @f(%a: tensor<2x3xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {
      %r = weft.matmul %a, %b : (tensor<2x3xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
      return %r : tensor<2x2xf32>
    })mlir",
                      {a, b}),
               {2, 2}, expected);
  expectValues(runOne(R"mlir(
    func.func @f(%a: tensor<3x2xf32>, %b: tensor<3x2xf32>) -> tensor<2x2xf32> {
      %r = weft.matmul %a, %b {transpose_lhs = true}
          : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<2x2xf32>
      return %r : tensor<2x2xf32>
    })mlir",
                      {aT, b}),
               {2, 2}, expected);
  expectValues(runOne(R"mlir(
    func.func @f(%a: tensor<3x2xf32>, %b: tensor<2x3xf32>) -> tensor<2x2xf32> {
      %r = weft.matmul %a, %b {transpose_lhs = true, transpose_rhs = true}
          : (tensor<3x2xf32>, tensor<2x3xf32>) -> tensor<2x2xf32>
      return %r : tensor<2x2xf32>
    })mlir",
                      {aT, bT}),
               {2, 2}, expected);
}

TEST_F(EvaluatorTest, MatMulBroadcastsBatchAxes) {
  // lhs[b] = (b + 1) * I and rhs[c] = [[c, 1], [2, c]], so
  // result[b][c] = (b + 1) * rhs[c].
  Tensor lhs = f32({2, 1, 2, 2}, {1, 0, 0, 1, 2, 0, 0, 2});
  Tensor rhs = f32({3, 2, 2}, {0, 1, 2, 0, 1, 1, 2, 1, 2, 1, 2, 2});
  Tensor r = runOne(R"mlir(
    func.func @f(%a: tensor<2x1x2x2xf32>, %b: tensor<3x2x2xf32>) -> tensor<2x3x2x2xf32> {
      %r = weft.matmul %a, %b : (tensor<2x1x2x2xf32>, tensor<3x2x2xf32>) -> tensor<2x3x2x2xf32>
      return %r : tensor<2x3x2x2xf32>
    })mlir",
                    {lhs, rhs});
  expectValues(r, {2, 3, 2, 2}, {0, 1, 2, 0, 1, 1, 2, 1, 2, 1, 2, 2, //
                                 0, 2, 4, 0, 2, 2, 4, 2, 4, 2, 4, 4});
}

TEST_F(EvaluatorTest, Conv2DPaddingStrideAndBias) {
  // 3x3 input 1..9, a 2x2 filter of ones, one row and column of padding at
  // the top and left, stride 2: windows start at (-1|1, -1|1).
  Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor b = f32({1}, {0.5});
  Tensor r = runOne(R"mlir(
    func.func @f(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x2x2xf32>, %b: tensor<1xf32>)
        -> tensor<1x1x2x2xf32> {
      %r = weft.conv2d %x, %w, %b {strides = array<i64: 2, 2>,
                                   padding = array<i64: 1, 1, 0, 0>,
                                   dilations = array<i64: 1, 1>}
          : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>, tensor<1xf32>) -> tensor<1x1x2x2xf32>
      return %r : tensor<1x1x2x2xf32>
    })mlir",
                    {x, w, b});
  expectValues(r, {1, 1, 2, 2}, {1.5, 5.5, 11.5, 28.5});
}

TEST_F(EvaluatorTest, Conv2DGroupsAndDilation) {
  // Two groups: filters 0-1 see channel 0 (all ones), filters 2-3 see
  // channel 1 (all twos).
  Tensor x = f32({1, 2, 2, 2}, {1, 1, 1, 1, 2, 2, 2, 2});
  Tensor w = f32({4, 1, 1, 1}, {1, 2, 3, 4});
  Tensor grouped = runOne(R"mlir(
    func.func @f(%x: tensor<1x2x2x2xf32>, %w: tensor<4x1x1x1xf32>) -> tensor<1x4x2x2xf32> {
      %r = weft.conv2d %x, %w {strides = array<i64: 1, 1>,
                               padding = array<i64: 0, 0, 0, 0>,
                               dilations = array<i64: 1, 1>, groups = 2 : i64}
          : (tensor<1x2x2x2xf32>, tensor<4x1x1x1xf32>) -> tensor<1x4x2x2xf32>
      return %r : tensor<1x4x2x2xf32>
    })mlir",
                          {x, w});
  expectValues(grouped, {1, 4, 2, 2},
               {1, 1, 1, 1, 2, 2, 2, 2, 6, 6, 6, 6, 8, 8, 8, 8});

  // Dilation 2 spreads a 2x2 filter of ones over the corners of 3x3.
  Tensor x3 = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor ones = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor dilated = runOne(R"mlir(
    func.func @f(%x: tensor<1x1x3x3xf32>, %w: tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32> {
      %r = weft.conv2d %x, %w {strides = array<i64: 1, 1>,
                               padding = array<i64: 0, 0, 0, 0>,
                               dilations = array<i64: 2, 2>}
          : (tensor<1x1x3x3xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x1x1xf32>
      return %r : tensor<1x1x1x1xf32>
    })mlir",
                          {x3, ones});
  expectValues(dilated, {1, 1, 1, 1}, {20});
}

//===----------------------------------------------------------------------===//
// Pooling
//===----------------------------------------------------------------------===//

/// A 2x2 window with stride 1 over [[1,2],[3,4]] padded by one row at the top
/// and one column at the left: the windows hold 1, 2, 2 and 4 real cells.
constexpr const char *kAvgPool = R"mlir(
  func.func @f(%x: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
    %r = weft.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>,
                             padding = array<i64: 1, 1, 0, 0>, count_include_pad = %s}
        : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
    return %r : tensor<1x1x2x2xf32>
  })mlir";

TEST_F(EvaluatorTest, AvgPoolCountIncludePad) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  std::string include = kAvgPool, exclude = kAvgPool;
  include.replace(include.find("%s"), 2, "true");
  exclude.replace(exclude.find("%s"), 2, "false");
  // Sums 1, 3, 4, 10 over the full kernel area of 4 ...
  expectValues(runOne(include, {x}), {1, 1, 2, 2}, {0.25, 0.75, 1, 2.5});
  // ... or over the 1, 2, 2 and 4 cells inside the input.
  expectValues(runOne(exclude, {x}), {1, 1, 2, 2}, {1, 1.5, 2, 2.5});
}

TEST_F(EvaluatorTest, MaxPoolPaddingNeverWins) {
  // All values negative: a zero-valued pad would win every border window.
  Tensor x = f32({1, 1, 2, 2}, {-1, -2, -3, -4});
  Tensor r = runOne(R"mlir(
    func.func @f(%x: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
      %r = weft.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>,
                               padding = array<i64: 1, 1, 0, 0>}
          : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
      return %r : tensor<1x1x2x2xf32>
    })mlir",
                    {x});
  expectValues(r, {1, 1, 2, 2}, {-1, -1, -1, -1});
}

TEST_F(EvaluatorTest, GlobalAvgPool) {
  Tensor x = f32({1, 2, 2, 2}, {1, 2, 3, 4, 10, 20, 30, 40});
  Tensor r = runOne(R"mlir(
    func.func @f(%x: tensor<1x2x2x2xf32>) -> tensor<1x2x1x1xf32> {
      %r = weft.global_avg_pool %x : (tensor<1x2x2x2xf32>) -> tensor<1x2x1x1xf32>
      return %r : tensor<1x2x1x1xf32>
    })mlir",
                    {x});
  expectValues(r, {1, 2, 1, 1}, {2.5, 25});
}

//===----------------------------------------------------------------------===//
// Normalization, activations, losses
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, LayerNormUsesBiasedVariance) {
  // Mean 2.5, biased variance (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25.
  Tensor x = f64({1, 4}, {1, 2, 3, 4});
  Tensor scale = f64({4}, {1, 1, 2, 2});
  Tensor bias = f64({4}, {0, 0, 0, 1});
  Tensor r = runOne(R"mlir(
    func.func @f(%x: tensor<1x4xf64>, %g: tensor<4xf64>, %b: tensor<4xf64>) -> tensor<1x4xf64> {
      %r = weft.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64}
          : (tensor<1x4xf64>, tensor<4xf64>, tensor<4xf64>) -> tensor<1x4xf64>
      return %r : tensor<1x4xf64>
    })mlir",
                    {x, scale, bias});
  double rstd = 1 / std::sqrt(1.25 + 1e-5);
  expectValues(r, {1, 4},
               {-1.5 * rstd, -0.5 * rstd, 2 * 0.5 * rstd, 2 * 1.5 * rstd + 1},
               1e-15);
}

TEST_F(EvaluatorTest, SoftmaxOfLargeValuesIsStable) {
  // exp(1000) overflows; the max-subtracted form sees exp(-2), exp(-1), 1.
  Tensor x = f32({1, 3}, {1000, 1001, 1002});
  Tensor r = runOne(R"mlir(
    func.func @f(%x: tensor<1x3xf32>) -> tensor<1x3xf32> {
      %r = weft.softmax %x {axis = 1 : i64} : tensor<1x3xf32>
      return %r : tensor<1x3xf32>
    })mlir",
                    {x});
  double sum = std::exp(-2.0) + std::exp(-1.0) + 1;
  expectValues(r, {1, 3},
               {float(std::exp(-2.0) / sum), float(std::exp(-1.0) / sum),
                float(1 / sum)});

  Tensor y = f32({2, 2}, {1e4, 1e4, -1e4, 0});
  Tensor logs = runOne(R"mlir(
    func.func @f(%x: tensor<2x2xf32>) -> tensor<2x2xf32> {
      %r = weft.log_softmax %x {axis = 0 : i64} : tensor<2x2xf32>
      return %r : tensor<2x2xf32>
    })mlir",
                       {y});
  // Column 0: log_softmax(1e4, -1e4) = (0, -2e4) up to exp(-2e4) = 0.
  // Column 1: log_softmax(1e4, 0) = (0, -1e4).
  expectValues(logs, {2, 2}, {0, 0, -2e4, -1e4});
}

TEST_F(EvaluatorTest, GeluMatchesClosedForms) {
  const double xs[] = {-3, -1, -0.5, 0, 0.5, 1, 3};
  Tensor x = f64({7}, xs);
  Tensor exact = runOne(R"mlir(
    func.func @f(%x: tensor<7xf64>) -> tensor<7xf64> {
      %r = weft.gelu %x : tensor<7xf64>
      return %r : tensor<7xf64>
    })mlir",
                        {x});
  Tensor approx = runOne(R"mlir(
    func.func @f(%x: tensor<7xf64>) -> tensor<7xf64> {
      %r = weft.gelu %x approximate = tanh : tensor<7xf64>
      return %r : tensor<7xf64>
    })mlir",
                         {x});
  SmallVector<double> wantExact, wantApprox;
  for (double v : xs) {
    wantExact.push_back(v * (1 + std::erf(v / std::sqrt(2.0))) / 2);
    wantApprox.push_back(
        v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))) /
        2);
  }
  expectValues(exact, {7}, wantExact, 1e-15);
  expectValues(approx, {7}, wantApprox, 1e-15);
  // Published values of GELU(1): Phi(1) = 0.8413447460685429 and PyTorch's
  // tanh approximation 0.8411919906082768.
  EXPECT_NEAR(exact.fp[5], 0.8413447460685429, 1e-15);
  EXPECT_NEAR(approx.fp[5], 0.8411919906082768, 1e-15);
}

constexpr const char *kCrossEntropy = R"mlir(
  func.func @f(%l: tensor<2x3xf64>, %t: tensor<2xi64>) -> tensor<f64> {
    %r = weft.cross_entropy %l, %t : (tensor<2x3xf64>, tensor<2xi64>) -> tensor<f64>
    return %r : tensor<f64>
  })mlir";

TEST_F(EvaluatorTest, CrossEntropyIsMeanOfLogSumExpMinusLogit) {
  Tensor logits = f64({2, 3}, {1, 2, 3, 1, 1, 1});
  Tensor r = runOne(kCrossEntropy, {logits, i64({2}, {2, 0})});
  // Row 0: log(e + e^2 + e^3) - 3; row 1: log(3 e) - 1 = log 3.
  double row0 = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0)) - 3;
  double row1 = std::log(3.0);
  expectValues(r, {}, {(row0 + row1) / 2}, 1e-15);
  EXPECT_NEAR(r.fp[0], 0.7531091, 1e-7);
}

TEST_F(EvaluatorTest, CrossEntropyRejectsLabelsOutOfRange) {
  Tensor logits = f64({2, 3}, {1, 2, 3, 1, 1, 1});
  EXPECT_TRUE(failed(run(kCrossEntropy, {logits, i64({2}, {0, 3})})));
  EXPECT_NE(diagnostics.find("label 3"), std::string::npos) << diagnostics;
  EXPECT_NE(diagnostics.find("3 classes"), std::string::npos) << diagnostics;
  EXPECT_TRUE(failed(run(kCrossEntropy, {logits, i64({2}, {-100, 0})})));
  EXPECT_NE(diagnostics.find("ignore_index"), std::string::npos) << diagnostics;
}

TEST_F(EvaluatorTest, MseAndReductions) {
  Tensor p = f32({2, 2}, {1, 2, 3, 4});
  Tensor t = f32({2, 2}, {1, 0, 0, 0});
  expectValues(runOne(R"mlir(
    func.func @f(%p: tensor<2x2xf32>, %t: tensor<2x2xf32>) -> tensor<f32> {
      %r = weft.mse %p, %t : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<f32>
      return %r : tensor<f32>
    })mlir",
                      {p, t}),
               {}, {(4 + 9 + 16) / 4.0});

  Tensor x = f32({2, 3}, {1, 5, 3, -4, -2, -6});
  FailureOr<SmallVector<Tensor>> r = run(R"mlir(
    func.func @f(%x: tensor<2x3xf32>) -> (tensor<2x1xf32>, tensor<3xf32>, tensor<2xf32>) {
      %s = weft.reduce_sum %x {axes = array<i64: 1>, keep_dims = true}
          : (tensor<2x3xf32>) -> tensor<2x1xf32>
      %m = weft.reduce_mean %x {axes = array<i64: 0>} : (tensor<2x3xf32>) -> tensor<3xf32>
      %x2 = weft.reduce_max %x {axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>
      return %s, %m, %x2 : tensor<2x1xf32>, tensor<3xf32>, tensor<2xf32>
    })mlir",
                                         {x});
  ASSERT_TRUE(succeeded(r)) << diagnostics;
  expectValues((*r)[0], {2, 1}, {9, -12});
  expectValues((*r)[1], {3}, {-1.5, 1.5, -1.5});
  expectValues((*r)[2], {2}, {5, -2});
}

//===----------------------------------------------------------------------===//
// Rounding and integers
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, Bf16AddRoundsToNearestEven) {
  // bf16 keeps 7 mantissa bits: 2^-8 is half an ulp at 1. 1 + 2^-8 ties
  // between 1 (even) and 1 + 2^-7; 1 + 3 * 2^-8 ties between 1 + 2^-7 (odd)
  // and 1 + 2^-6 (even). 1 + 2^-8 + 2^-9 is past the tie and rounds up.
  Type bf16 = BFloat16Type::get(&context);
  Tensor a = make(bf16, {3}, {1, 1 + 0x1p-7, 1});
  Tensor b = make(bf16, {3}, {0x1p-8, 0x1p-8, 0x1.8p-8});
  Tensor r = runOne(R"mlir(
    func.func @f(%a: tensor<3xbf16>, %b: tensor<3xbf16>) -> tensor<3xbf16> {
      %r = weft.add %a, %b : (tensor<3xbf16>, tensor<3xbf16>) -> tensor<3xbf16>
      return %r : tensor<3xbf16>
    })mlir",
                    {a, b});
  expectValues(r, {3}, {1, 1 + 0x1p-6, 1 + 0x1p-7});
}

TEST_F(EvaluatorTest, NarrowRoundingAgreesWithAPFloat) {
  // Random doubles over the whole bf16/f16 range, including subnormals,
  // ties and overflow, against LLVM's reference implementation.
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> mantissa(-2, 2);
  std::uniform_int_distribution<int> exponent(-150, 130);
  FloatType types[] = {BFloat16Type::get(&context), Float16Type::get(&context),
                       Float32Type::get(&context)};
  const char *names[] = {"bf16", "f16", "f32"};
  for (int i = 0; i < 20000; ++i) {
    double v = std::ldexp(mantissa(rng), exponent(rng));
    if (i % 2 == 0) {
      // Exact ties: an odd significand one bit longer than bf16's (9 bits)
      // or f16's (12 bits).
      int bits = i % 4 == 0 ? 9 : 12;
      double odd = std::ldexp(1.0, bits - 1) +
                   2 * double(rng() % (uint64_t(1) << (bits - 2))) + 1;
      v = std::ldexp(rng() % 2 ? odd : -odd, exponent(rng) / 4 - bits);
    }
    for (int k = 0; k < 3; ++k) {
      llvm::APFloat ref(v);
      bool losesInfo;
      ref.convert(types[k].getFloatSemantics(),
                  llvm::APFloat::rmNearestTiesToEven, &losesInfo);
      ASSERT_EQ(roundToFloat(types[k], v), ref.convertToDouble())
          << "v = " << v << " to " << names[k];
    }
  }
  EXPECT_TRUE(std::isinf(roundToFloat(types[1], 65520.0)));
  EXPECT_EQ(roundToFloat(types[1], 65519.0), 65504.0);
}

TEST_F(EvaluatorTest, IntegerDivisionTruncatesAndChecksZero) {
  constexpr const char *div = R"mlir(
    func.func @f(%a: tensor<4xi64>, %b: tensor<4xi64>) -> tensor<4xi64> {
      %r = weft.div %a, %b : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>
      return %r : tensor<4xi64>
    })mlir";
  expectValues(
      runOne(div, {i64({4}, {7, -7, 7, -7}), i64({4}, {2, 2, -2, -2})}), {4},
      {3, -3, -3, 3});
  EXPECT_TRUE(
      failed(run(div, {i64({4}, {1, 2, 3, 4}), i64({4}, {1, 0, 1, 1})})));
  EXPECT_NE(diagnostics.find("division by zero"), std::string::npos)
      << diagnostics;

  // i32 results wrap like int32_t arithmetic.
  Type i32 = IntegerType::get(&context, 32);
  Tensor big = make(i32, {1}, {2147483647});
  Tensor one = make(i32, {1}, {1});
  expectValues(runOne(R"mlir(
    func.func @f(%a: tensor<1xi32>, %b: tensor<1xi32>) -> tensor<1xi32> {
      %r = weft.add %a, %b : (tensor<1xi32>, tensor<1xi32>) -> tensor<1xi32>
      return %r : tensor<1xi32>
    })mlir",
                      {big, one}),
               {1}, {-2147483648.0});
}

TEST_F(EvaluatorTest, CastTruncatesAndTestsNonZero) {
  Tensor x = f32({4}, {2.7, -2.7, 0, 0.5});
  FailureOr<SmallVector<Tensor>> r = run(R"mlir(
    func.func @f(%x: tensor<4xf32>) -> (tensor<4xi64>, tensor<4xi1>, tensor<4xbf16>) {
      %i = weft.cast %x : tensor<4xf32> -> tensor<4xi64>
      %b = weft.cast %x : tensor<4xf32> -> tensor<4xi1>
      %h = weft.cast %x : tensor<4xf32> -> tensor<4xbf16>
      return %i, %b, %h : tensor<4xi64>, tensor<4xi1>, tensor<4xbf16>
    })mlir",
                                         {x});
  ASSERT_TRUE(succeeded(r)) << diagnostics;
  expectValues((*r)[0], {4}, {2, -2, 0, 0});
  expectValues((*r)[1], {4}, {1, 1, 0, 1});
  // 2.7f is 0x402CCCCD; bf16 keeps 0x402D = 2.703125.
  expectValues((*r)[2], {4}, {2.703125, -2.703125, 0, 0.5});
}

TEST_F(EvaluatorTest, CastToI64SaturatesAtBothEnds) {
  Tensor x = f32({3}, {INFINITY, -INFINITY, 1e30});
  FailureOr<SmallVector<Tensor>> r = run(R"mlir(
    func.func @f(%x: tensor<3xf32>) -> tensor<3xi64> {
      %i = weft.cast %x : tensor<3xf32> -> tensor<3xi64>
      return %i : tensor<3xi64>
    })mlir",
                                         {x});
  ASSERT_TRUE(succeeded(r)) << diagnostics;
  EXPECT_EQ((*r)[0].ints[0], std::numeric_limits<int64_t>::max());
  EXPECT_EQ((*r)[0].ints[1], std::numeric_limits<int64_t>::min());
  EXPECT_EQ((*r)[0].ints[2], std::numeric_limits<int64_t>::max());
}

TEST_F(EvaluatorTest, CmpAndWhereBroadcast) {
  Tensor x = f32({2, 2}, {1, -2, -3, 4});
  Tensor zero = f32({}, {0});
  Tensor r = runOne(R"mlir(
    func.func @f(%x: tensor<2x2xf32>, %z: tensor<f32>) -> tensor<2x2xf32> {
      %m = weft.cmp gt, %x, %z : (tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xi1>
      %r = weft.where %m, %x, %z : (tensor<2x2xi1>, tensor<2x2xf32>, tensor<f32>) -> tensor<2x2xf32>
      return %r : tensor<2x2xf32>
    })mlir",
                    {x, zero});
  expectValues(r, {2, 2}, {1, 0, 0, 4});
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

constexpr const char *kGather = R"mlir(
  func.func @f(%t: tensor<3x2xf32>, %i: tensor<2xi64>) -> tensor<2x2xf32> {
    %r = weft.gather %t, %i {axis = 0 : i64} : (tensor<3x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
    return %r : tensor<2x2xf32>
  })mlir";

TEST_F(EvaluatorTest, GatherWrapsNegativeIndicesOnce) {
  Tensor table = f32({3, 2}, {0, 1, 2, 3, 4, 5});
  expectValues(runOne(kGather, {table, i64({2}, {-1, 0})}), {2, 2},
               {4, 5, 0, 1});
  EXPECT_TRUE(failed(run(kGather, {table, i64({2}, {0, 3})})));
  EXPECT_NE(diagnostics.find("index 3"), std::string::npos) << diagnostics;
  EXPECT_NE(diagnostics.find("axis 0 of size 3"), std::string::npos)
      << diagnostics;
  EXPECT_TRUE(failed(run(kGather, {table, i64({2}, {-4, 0})})));
  EXPECT_NE(diagnostics.find("index -4"), std::string::npos) << diagnostics;
}

TEST_F(EvaluatorTest, SliceWithStrides) {
  // 3x4 matrix 0..11: rows 0 and 2, columns 1 and 3.
  Tensor x = f32({3, 4}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11});
  Tensor r = runOne(R"mlir(
    func.func @f(%x: tensor<3x4xf32>) -> tensor<2x2xf32> {
      %r = weft.slice %x {starts = array<i64: 0, 1>, limits = array<i64: 3, 4>,
                          strides = array<i64: 2, 2>}
          : (tensor<3x4xf32>) -> tensor<2x2xf32>
      return %r : tensor<2x2xf32>
    })mlir",
                    {x});
  expectValues(r, {2, 2}, {1, 3, 9, 11});
}

TEST_F(EvaluatorTest, TransposeConcatBroadcastReshape) {
  Tensor x = f32({2, 3}, {0, 1, 2, 3, 4, 5});
  Tensor row = f32({1, 3}, {7, 8, 9});
  FailureOr<SmallVector<Tensor>> r = run(R"mlir(
    func.func @f(%x: tensor<2x3xf32>, %row: tensor<1x3xf32>)
        -> (tensor<3x2xf32>, tensor<3x3xf32>, tensor<2x2x3xf32>, tensor<6xf32>) {
      %t = weft.transpose %x {permutation = array<i64: 1, 0>}
          : (tensor<2x3xf32>) -> tensor<3x2xf32>
      %c = weft.concat %x, %row {axis = 0 : i64}
          : (tensor<2x3xf32>, tensor<1x3xf32>) -> tensor<3x3xf32>
      %b = weft.broadcast %row : tensor<1x3xf32> -> tensor<2x2x3xf32>
      %s = weft.reshape %x : tensor<2x3xf32> -> tensor<6xf32>
      return %t, %c, %b, %s : tensor<3x2xf32>, tensor<3x3xf32>, tensor<2x2x3xf32>, tensor<6xf32>
    })mlir",
                                         {x, row});
  ASSERT_TRUE(succeeded(r)) << diagnostics;
  expectValues((*r)[0], {3, 2}, {0, 3, 1, 4, 2, 5});
  expectValues((*r)[1], {3, 3}, {0, 1, 2, 3, 4, 5, 7, 8, 9});
  expectValues((*r)[2], {2, 2, 3}, {7, 8, 9, 7, 8, 9, 7, 8, 9, 7, 8, 9});
  expectValues((*r)[3], {6}, {0, 1, 2, 3, 4, 5});
}

TEST_F(EvaluatorTest, CausalMaskWithDiagonal) {
  Tensor x = f32({3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  expectValues(runOne(R"mlir(
    func.func @f(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
      %r = weft.causal_mask %x {diagonal = 1 : i64, fill = -1.0 : f64} : tensor<3x3xf32>
      return %r : tensor<3x3xf32>
    })mlir",
                      {x}),
               {3, 3}, {1, 1, -1, 1, 1, 1, 1, 1, 1});
  double inf = std::numeric_limits<double>::infinity();
  expectValues(runOne(R"mlir(
    func.func @f(%x: tensor<3x3xf32>) -> tensor<3x3xf32> {
      %r = weft.causal_mask %x {diagonal = -1 : i64} : tensor<3x3xf32>
      return %r : tensor<3x3xf32>
    })mlir",
                      {x}),
               {3, 3}, {-inf, -inf, -inf, 1, -inf, -inf, 1, 1, -inf});
}

TEST_F(EvaluatorTest, ConstantsRoundTripThroughAttributes) {
  FailureOr<SmallVector<Tensor>> r = run(R"mlir(
    func.func @f() -> (tensor<2x2xf32>, tensor<3xi1>, tensor<2xbf16>, tensor<2xi32>) {
      %a = weft.constant dense<1.5> : tensor<2x2xf32>
      %b = weft.constant dense<[true, false, true]> : tensor<3xi1>
      %c = weft.constant dense<[1.0, -3.5]> : tensor<2xbf16>
      %d = weft.constant dense<[-7, 2147483647]> : tensor<2xi32>
      return %a, %b, %c, %d : tensor<2x2xf32>, tensor<3xi1>, tensor<2xbf16>, tensor<2xi32>
    })mlir",
                                         {});
  ASSERT_TRUE(succeeded(r)) << diagnostics;
  expectValues((*r)[0], {2, 2}, {1.5, 1.5, 1.5, 1.5});
  expectValues((*r)[1], {3}, {1, 0, 1});
  expectValues((*r)[2], {2}, {1, -3.5});
  expectValues((*r)[3], {2}, {-7, 2147483647});
  for (const Tensor &t : *r) {
    Tensor back = Tensor::fromAttr(t.toAttr());
    EXPECT_EQ(back.getType(), t.getType());
    EXPECT_EQ(back.fp, t.fp);
    EXPECT_EQ(back.ints, t.ints);
  }
}

TEST_F(EvaluatorTest, ConstantsFromDenseResources) {
  // A resource blob starts with its alignment (4), then little-endian f32s.
  Tensor r = runOne(R"mlir(
    func.func @f() -> tensor<2xf32> {
      %c = weft.constant dense_resource<blob> : tensor<2xf32>
      return %c : tensor<2xf32>
    }
    {-#
      dialect_resources: {
        builtin: {
          blob: "0x040000000000803F00002040"
        }
      }
    #-})mlir",
                    {});
  expectValues(r, {2}, {1, 2.5});

  EXPECT_TRUE(failed(run(R"mlir(
    func.func @f() -> tensor<2xf32> {
      %c = weft.constant dense_resource<__elided__> : tensor<2xf32>
      return %c : tensor<2xf32>
    })mlir",
                         {})));
  EXPECT_NE(diagnostics.find("has no data"), std::string::npos) << diagnostics;
}

//===----------------------------------------------------------------------===//
// Calls and errors
//===----------------------------------------------------------------------===//

TEST_F(EvaluatorTest, CallsEvaluateTheCallee) {
  Tensor x = f32({2}, {1, -2});
  Tensor r = runOne(R"mlir(
    func.func private @double(%x: tensor<2xf32>) -> tensor<2xf32> {
      %r = weft.add %x, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      return %r : tensor<2xf32>
    }
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      %a = func.call @double(%x) : (tensor<2xf32>) -> tensor<2xf32>
      %b = func.call @double(%a) : (tensor<2xf32>) -> tensor<2xf32>
      %r = weft.sub %b, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      return %r : tensor<2xf32>
    })mlir",
                    {x});
  expectValues(r, {2}, {3, -6});
}

TEST_F(EvaluatorTest, RecursionIsBounded) {
  EXPECT_TRUE(failed(run(R"mlir(
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      %r = func.call @f(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %r : tensor<2xf32>
    })mlir",
                         {f32({2}, {1, 2})})));
  EXPECT_NE(diagnostics.find("calls nest deeper than 256"), std::string::npos)
      << diagnostics;
}

TEST_F(EvaluatorTest, UnlegalizedAndUnknownOpsAreErrors) {
  Tensor x = f32({2}, {1, 2});
  EXPECT_TRUE(failed(run(R"mlir(
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      %r = weft.onnx.node "Relu"(%x) {name = "/act/Relu", opset = 17 : i64}
          : (tensor<2xf32>) -> tensor<2xf32>
      return %r : tensor<2xf32>
    })mlir",
                         {x})));
  EXPECT_NE(diagnostics.find("op 'weft.onnx.node' (ONNX Relu) is not "
                             "legalized; run --weft-legalize-onnx first"),
            std::string::npos)
      << diagnostics;

  EXPECT_TRUE(failed(run(R"mlir(
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      %r = "foo.bar"(%x) : (tensor<2xf32>) -> tensor<2xf32>
      return %r : tensor<2xf32>
    })mlir",
                         {x})));
  EXPECT_NE(diagnostics.find("'foo.bar'"), std::string::npos) << diagnostics;
}

TEST_F(EvaluatorTest, ArgumentTypesAreChecked) {
  EXPECT_TRUE(failed(run(R"mlir(
    func.func @f(%x: tensor<2xf32>) -> tensor<2xf32> {
      return %x : tensor<2xf32>
    })mlir",
                         {f32({3}, {1, 2, 3})})));
  EXPECT_NE(diagnostics.find("tensor<3xf32>"), std::string::npos)
      << diagnostics;
}

TEST_F(EvaluatorTest, HostArraysConvertWithChecks) {
  rt::HostArray a = rt::HostArray::zeros(rt::DType::F64, {2});
  a.setFromDouble(0, 1 + 0x1p-30); // Not an f32: rounds on the way in.
  a.setFromDouble(1, -2);
  auto f32Type = RankedTensorType::get({2}, Float32Type::get(&context));
  // Errors are diagnostics at the location the caller gives.
  std::string error;
  ScopedDiagnosticHandler capture(&context, [&](Diagnostic &diag) {
    error = diag.str();
    return success();
  });
  Location loc = UnknownLoc::get(&context);
  FailureOr<Tensor> t = Tensor::fromHostArray(a, f32Type, "x", loc);
  ASSERT_TRUE(succeeded(t)) << error;
  expectValues(*t, {2}, {1, -2});
  rt::HostArray back = t->toHostArray();
  EXPECT_EQ(back.dtype, rt::DType::F32);
  EXPECT_EQ(back.getAsDouble(1), -2);

  auto wrongShape = RankedTensorType::get({3}, Float32Type::get(&context));
  EXPECT_TRUE(
      failed(Tensor::fromHostArray(a, wrongShape, "input 'x': x.npy", loc)));
  EXPECT_EQ(error, "input 'x': x.npy has shape 2 but the function expects "
                   "tensor<3xf32>");

  rt::HostArray big = rt::HostArray::zeros(rt::DType::I64, {1});
  big.setFromDouble(0, 1e10);
  auto i32Type = RankedTensorType::get({1}, IntegerType::get(&context, 32));
  EXPECT_TRUE(failed(Tensor::fromHostArray(big, i32Type, "y", loc)));
  EXPECT_NE(error.find("does not fit"), std::string::npos) << error;
}

} // namespace
