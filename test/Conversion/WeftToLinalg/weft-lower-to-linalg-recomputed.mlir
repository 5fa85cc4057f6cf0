// A recomputed op (--weft-recompute) lowers to ops that keep its
// weft.recomputed mark, so CSE does not fold them into the forward's
// (which would keep the activation alive again). Unmarked copies do fold.
// RUN: weft-opt %s --weft-lower-to-linalg --cse | FileCheck %s

// CHECK-LABEL: func.func @marked
func.func @marked(%x: tensor<2x4xf32>, %w: tensor<4x4xf32>)
    -> (tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  // CHECK: %[[A:.*]] = linalg.matmul ins
  // CHECK: %[[T:.*]] = linalg.generic {{.*}} ins(%[[A]] : tensor<2x4xf32>) outs(%{{.*}} : tensor<2x4xf32>) {
  // CHECK: linalg.fill {weft.recomputed}
  // CHECK: %[[RA:.*]] = linalg.matmul {weft.recomputed}
  // CHECK: %[[RT:.*]] = linalg.generic {{.*}} ins(%[[RA]] : {{.*}} attrs = {weft.recomputed}
  // The unmarked copy folded into the first.
  // CHECK: return %[[T]], %[[RT]], %[[T]]
  %a = weft.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t = weft.tanh %a : tensor<2x4xf32>
  %ra = weft.matmul %x, %w {weft.recomputed} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %rt = weft.tanh %ra {weft.recomputed} : tensor<2x4xf32>
  %ca = weft.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %ct = weft.tanh %ca : tensor<2x4xf32>
  return %t, %rt, %ct : tensor<2x4xf32>, tensor<2x4xf32>, tensor<2x4xf32>
}
