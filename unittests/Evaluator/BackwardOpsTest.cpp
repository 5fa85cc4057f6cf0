//===- BackwardOpsTest.cpp - Tests for evaluating the adjoint ops ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The backward ops are checked two ways: small cases worked out by hand,
// and the dot-product identity <A x, g> = <x, A^T g> against the forward op,
// which holds for any inputs whatever the loops look like.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorTestFixture.h"

#include <cmath>
#include <random>

using namespace mlir;
using namespace weft;
using namespace weft::eval;
using namespace weft::eval::test;

namespace {

double dot(const Tensor &a, const Tensor &b) {
  EXPECT_EQ(a.fp.size(), b.fp.size());
  double sum = 0;
  for (size_t i = 0; i < a.fp.size(); ++i)
    sum += a.fp[i] * b.fp[i];
  return sum;
}

TEST_F(EvaluatorTest, ScatterAddAccumulatesRepeatedIndices) {
  Tensor zeros = f32({3, 2}, {0, 0, 0, 0, 0, 0});
  Tensor updates = f32({3, 2}, {1, 2, 3, 4, 5, 6});
  Tensor r = runOne(R"mlir(
    func.func @f(%x: tensor<3x2xf32>, %i: tensor<3xi64>, %u: tensor<3x2xf32>)
        -> tensor<3x2xf32> {
      %r = weft.scatter_add %x, %i, %u {axis = 0 : i64}
          : (tensor<3x2xf32>, tensor<3xi64>, tensor<3x2xf32>) -> tensor<3x2xf32>
      return %r : tensor<3x2xf32>
    })mlir",
                    {zeros, i64({3}, {2, 0, -1}), updates});
  // Rows 0 and 2 of `updates` both land in row 2 (index -1 wraps to 2).
  expectValues(r, {3, 2}, {3, 4, 0, 0, 6, 8});
}

TEST_F(EvaluatorTest, PadPutsValueAtEndsAndBetween) {
  Tensor x = f32({3}, {1, 2, 3});
  Tensor r = runOne(R"mlir(
    func.func @f(%x: tensor<3xf32>) -> tensor<8xf32> {
      %r = weft.pad %x {low = array<i64: 1>, high = array<i64: 2>,
                        interior = array<i64: 1>, value = 9.0 : f64}
          : (tensor<3xf32>) -> tensor<8xf32>
      return %r : tensor<8xf32>
    })mlir",
                    {x});
  expectValues(r, {8}, {9, 1, 9, 2, 9, 3, 9, 9});
}

TEST_F(EvaluatorTest, OneHotChecksRange) {
  constexpr const char *oneHot = R"mlir(
    func.func @f(%i: tensor<2xi64>) -> tensor<2x3xf32> {
      %r = weft.one_hot %i : tensor<2xi64> -> tensor<2x3xf32>
      return %r : tensor<2x3xf32>
    })mlir";
  expectValues(runOne(oneHot, {i64({2}, {2, 0})}), {2, 3}, {0, 0, 1, 1, 0, 0});
  EXPECT_TRUE(failed(run(oneHot, {i64({2}, {0, 3})})));
  EXPECT_NE(diagnostics.find("index 3"), std::string::npos) << diagnostics;
}

TEST_F(EvaluatorTest, SinAndCos) {
  Tensor x = f64({2}, {0, M_PI / 2});
  FailureOr<SmallVector<Tensor>> r = run(R"mlir(
    func.func @f(%x: tensor<2xf64>) -> (tensor<2xf64>, tensor<2xf64>) {
      %s = weft.sin %x : tensor<2xf64>
      %c = weft.cos %x : tensor<2xf64>
      return %s, %c : tensor<2xf64>, tensor<2xf64>
    })mlir",
                                         {x});
  ASSERT_TRUE(succeeded(r)) << diagnostics;
  expectValues((*r)[0], {2}, {0, 1}, 1e-15);
  expectValues((*r)[1], {2}, {1, 0}, 1e-15);
}

TEST_F(EvaluatorTest, Conv2DBackwardFilterByHand) {
  // The padded stride-2 convolution of Conv2DPaddingStrideAndBias with a
  // gradient of ones: filter tap (i, j) collects the input cells it read,
  // 5; 4 + 6; 2 + 8; 1 + 3 + 7 + 9.
  Tensor g = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor x = f32({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor r = runOne(R"mlir(
    func.func @f(%g: tensor<1x1x2x2xf32>, %x: tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32> {
      %r = weft.conv2d_backward_filter %g, %x {strides = array<i64: 2, 2>,
                                               padding = array<i64: 1, 1, 0, 0>,
                                               dilations = array<i64: 1, 1>}
          : (tensor<1x1x2x2xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
      return %r : tensor<1x1x2x2xf32>
    })mlir",
                    {g, x});
  expectValues(r, {1, 1, 2, 2}, {5, 10, 10, 20});
}

TEST_F(EvaluatorTest, Conv2DAdjointsSatisfyDotProductIdentity) {
  // Groups, stride, dilation and uneven padding together; float64 so the
  // identity holds to rounding.
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> uniform(-1, 1);
  auto random = [&](ArrayRef<int64_t> shape) {
    Tensor t =
        Tensor::zeros(RankedTensorType::get(shape, Float64Type::get(&context)));
    for (double &v : t.fp)
      v = uniform(rng);
    return t;
  };
  Tensor x = random({2, 4, 7, 6});
  Tensor w = random({6, 2, 3, 2});
  Tensor g = random({2, 6, 2, 3});
  FailureOr<SmallVector<Tensor>> r = run(R"mlir(
    func.func @f(%x: tensor<2x4x7x6xf64>, %w: tensor<6x2x3x2xf64>, %g: tensor<2x6x2x3xf64>)
        -> (tensor<2x6x2x3xf64>, tensor<2x4x7x6xf64>, tensor<6x2x3x2xf64>) {
      %y = weft.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 0, 0, 1>,
                               dilations = array<i64: 2, 1>, groups = 2 : i64}
          : (tensor<2x4x7x6xf64>, tensor<6x2x3x2xf64>) -> tensor<2x6x2x3xf64>
      %dx = weft.conv2d_backward_input %g, %w {strides = array<i64: 2, 2>,
                                               padding = array<i64: 1, 0, 0, 1>,
                                               dilations = array<i64: 2, 1>, groups = 2 : i64}
          : (tensor<2x6x2x3xf64>, tensor<6x2x3x2xf64>) -> tensor<2x4x7x6xf64>
      %dw = weft.conv2d_backward_filter %g, %x {strides = array<i64: 2, 2>,
                                                padding = array<i64: 1, 0, 0, 1>,
                                                dilations = array<i64: 2, 1>, groups = 2 : i64}
          : (tensor<2x6x2x3xf64>, tensor<2x4x7x6xf64>) -> tensor<6x2x3x2xf64>
      return %y, %dx, %dw : tensor<2x6x2x3xf64>, tensor<2x4x7x6xf64>, tensor<6x2x3x2xf64>
    })mlir",
                                         {x, w, g});
  ASSERT_TRUE(succeeded(r)) << diagnostics;
  double forward = dot((*r)[0], g);
  EXPECT_NEAR(dot(x, (*r)[1]), forward, 1e-12 * std::abs(forward) + 1e-12);
  EXPECT_NEAR(dot(w, (*r)[2]), forward, 1e-12 * std::abs(forward) + 1e-12);
}

TEST_F(EvaluatorTest, MaxPoolGradGoesToFirstMaximum) {
  // The windows of MaxPoolPaddingNeverWins over [[1,5],[3,2]] pick cells
  // (0,0), (0,1), (1,0) and (0,1); over a constant input, the first cell of
  // each window wins the tie.
  Tensor g = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  constexpr const char *grad = R"mlir(
    func.func @f(%g: tensor<1x1x2x2xf32>, %x: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
      %r = weft.max_pool2d_grad %g, %x {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>,
                                        padding = array<i64: 1, 1, 0, 0>}
          : (tensor<1x1x2x2xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
      return %r : tensor<1x1x2x2xf32>
    })mlir";
  expectValues(runOne(grad, {g, f32({1, 1, 2, 2}, {1, 5, 3, 2})}), {1, 1, 2, 2},
               {1, 6, 3, 0});
  expectValues(runOne(grad, {g, f32({1, 1, 2, 2}, {7, 7, 7, 7})}), {1, 1, 2, 2},
               {1 + 2 + 3 + 4, 0, 0, 0});
}

constexpr const char *kAvgPoolGrad = R"mlir(
  func.func @f(%g: tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32> {
    %r = weft.avg_pool2d_grad %g {kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>,
                                  padding = array<i64: 1, 1, 0, 0>, count_include_pad = %s}
        : (tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
    return %r : tensor<1x1x2x2xf32>
  })mlir";

TEST_F(EvaluatorTest, AvgPoolGradSpreadsOverRealCells) {
  // The windows of AvgPoolCountIncludePad hold 1, 2, 2 and 4 real cells.
  Tensor g = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  std::string include = kAvgPoolGrad, exclude = kAvgPoolGrad;
  include.replace(include.find("%s"), 2, "true");
  exclude.replace(exclude.find("%s"), 2, "false");
  // Divisors 1, 2, 2, 4: (0,0) gets 1 + 1 + 1.5 + 1.
  expectValues(runOne(exclude, {g}), {1, 1, 2, 2}, {4.5, 2, 2.5, 1});
  // Divisor 4 throughout: (0,0) gets 0.25 + 0.5 + 0.75 + 1.
  expectValues(runOne(include, {g}), {1, 1, 2, 2}, {2.5, 1.5, 1.75, 1});
}

} // namespace
