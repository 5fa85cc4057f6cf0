//===- RecurrentCostTest.cpp - Planner costs of the recurrences -----------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The planner weighs a recurrence by CostOpInterface: per step, the
// `[B, H] x [H, gates*H]` product (2 B gates H^2, what a matmul of those
// shapes costs) plus the pointwise gate work, times T. Counted by hand
// here for T = 7, B = 3, H = 6.
//
//===----------------------------------------------------------------------===//

#include "weft/Dialect/Weft/IR/WeftDialect.h"
#include "weft/Dialect/Weft/IR/WeftOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace weft;

namespace {

constexpr const char *kIr = R"mlir(
func.func @f(%xg: tensor<7x3x24xf32>, %r: tensor<24x6xf32>, %h: tensor<3x6xf32>,
             %xg3: tensor<7x3x18xf32>, %r3: tensor<18x6xf32>, %rb: tensor<18xf32>) {
  %y, %c, %g = weft.lstm %xg, %r, %h, %h : (tensor<7x3x24xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>)
  %dx, %dh, %dc = weft.lstm_grad %y, %c, %r, %h, %h, %y, %c, %g : (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>) -> (tensor<7x3x24xf32>, tensor<3x6xf32>, tensor<3x6xf32>)
  %gy, %gg = weft.gru %xg3, %r3, %rb, %h : (tensor<7x3x18xf32>, tensor<18x6xf32>, tensor<18xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x24xf32>)
  %gdx, %gdp, %gdh = weft.gru_grad %gy, %r3, %h, %gy, %gg : (tensor<7x3x6xf32>, tensor<18x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>) -> (tensor<7x3x18xf32>, tensor<7x3x18xf32>, tensor<3x6xf32>)
  return
}
)mlir";

TEST(RecurrentCostTest, FlopsPerStepTimesSteps) {
  MLIRContext context;
  context.loadDialect<WeftDialect, func::FuncDialect>();
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(kIr, &context);
  ASSERT_TRUE(module);
  double steps = 7 * 3; // T * B
  auto flops = [&](auto op) {
    return cast<CostOpInterface>(op.getOperation()).getFlops();
  };
  int seen = 0;
  module->walk([&](Operation *op) {
    if (auto lstm = dyn_cast<LstmOp>(op)) {
      // h @ R^T: 2 * 24 * 6 per row; 13 pointwise per unit (3 sigmoids,
      // 2 tanh, 4 adds, 4 products, as the loop body).
      EXPECT_EQ(flops(lstm), steps * (2 * 24 * 6 + 13 * 6));
      ++seen;
    } else if (auto grad = dyn_cast<LstmGradOp>(op)) {
      // dA @ R per row, 26 pointwise per unit.
      EXPECT_EQ(flops(grad), steps * (2 * 24 * 6 + 26 * 6));
      ++seen;
    } else if (auto gru = dyn_cast<GruOp>(op)) {
      EXPECT_EQ(flops(gru), steps * (2 * 18 * 6 + 13 * 6));
      ++seen;
    } else if (auto grad = dyn_cast<GruGradOp>(op)) {
      EXPECT_EQ(flops(grad), steps * (2 * 18 * 6 + 24 * 6));
      ++seen;
    }
  });
  EXPECT_EQ(seen, 4);
}

} // namespace
