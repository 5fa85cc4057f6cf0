// Reductions, normalizations and losses, lowered and executed against
// weft-eval on the same random inputs (test/lib/check_lowering.py).
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// CHECK: OK @reduce
func.func @reduce(%x: tensor<3x4x5xf32>) -> (tensor<3x1x5xf32>, tensor<4xf32>,
    tensor<f32>, tensor<3x4x1xf32>, tensor<1x1x1xf32>, tensor<3x5xf32>) {
  %0 = weft.reduce_sum %x {axes = array<i64: 1>, keep_dims = true} : (tensor<3x4x5xf32>) -> tensor<3x1x5xf32>
  %1 = weft.reduce_mean %x {axes = array<i64: 0, 2>} : (tensor<3x4x5xf32>) -> tensor<4xf32>
  %2 = weft.reduce_max %x {axes = array<i64: 0, 1, 2>} : (tensor<3x4x5xf32>) -> tensor<f32>
  %3 = weft.reduce_max %x {axes = array<i64: 2>, keep_dims = true} : (tensor<3x4x5xf32>) -> tensor<3x4x1xf32>
  %4 = weft.reduce_mean %x {axes = array<i64: 0, 1, 2>, keep_dims = true} : (tensor<3x4x5xf32>) -> tensor<1x1x1xf32>
  %5 = weft.reduce_sum %x {axes = array<i64: 1>} : (tensor<3x4x5xf32>) -> tensor<3x5xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<3x1x5xf32>, tensor<4xf32>, tensor<f32>,
      tensor<3x4x1xf32>, tensor<1x1x1xf32>, tensor<3x5xf32>
}

// CHECK: OK @reduce_int
func.func @reduce_int(%x: tensor<3x4xi64> {check.range = [-100, 100]},
                      %y: tensor<3x4xi32> {check.range = [-100, 100]})
    -> (tensor<3xi64>, tensor<4xi64>, tensor<i32>, tensor<1x4xi32>) {
  %0 = weft.reduce_sum %x {axes = array<i64: 1>} : (tensor<3x4xi64>) -> tensor<3xi64>
  %1 = weft.reduce_max %x {axes = array<i64: 0>} : (tensor<3x4xi64>) -> tensor<4xi64>
  %2 = weft.reduce_sum %y {axes = array<i64: 0, 1>} : (tensor<3x4xi32>) -> tensor<i32>
  %3 = weft.reduce_max %y {axes = array<i64: 0>, keep_dims = true} : (tensor<3x4xi32>) -> tensor<1x4xi32>
  return %0, %1, %2, %3 : tensor<3xi64>, tensor<4xi64>, tensor<i32>, tensor<1x4xi32>
}

// CHECK: OK @global_avg_pool
func.func @global_avg_pool(%x: tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32> {
  %0 = weft.global_avg_pool %x : (tensor<2x3x4x5xf32>) -> tensor<2x3x1x1xf32>
  return %0 : tensor<2x3x1x1xf32>
}

// Inputs up to 40 check the max shift: exp(40) alone would lose digits.
// CHECK: OK @softmax
func.func @softmax(%x: tensor<3x4x6xf32> {check.range = [-40.0, 40.0]})
    -> (tensor<3x4x6xf32>, tensor<3x4x6xf32>, tensor<3x4x6xf32>, tensor<3x4x6xf32>) {
  %0 = weft.softmax %x {axis = 2 : i64} : tensor<3x4x6xf32>
  %1 = weft.softmax %x {axis = 0 : i64} : tensor<3x4x6xf32>
  %2 = weft.log_softmax %x {axis = 2 : i64} : tensor<3x4x6xf32>
  %3 = weft.log_softmax %x {axis = 1 : i64} : tensor<3x4x6xf32>
  return %0, %1, %2, %3 : tensor<3x4x6xf32>, tensor<3x4x6xf32>, tensor<3x4x6xf32>, tensor<3x4x6xf32>
}

// CHECK: OK @layer_norm
func.func @layer_norm(%x: tensor<2x3x8xf32>, %g: tensor<8xf32>, %b: tensor<8xf32>,
                      %g2: tensor<3x8xf32>, %b2: tensor<3x8xf32>)
    -> (tensor<2x3x8xf32>, tensor<2x3x8xf32>) {
  %0 = weft.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x3x8xf32>
  %1 = weft.layer_norm %x, %g2, %b2 {axis = 1 : i64, epsilon = 1.0e-02 : f64} : (tensor<2x3x8xf32>, tensor<3x8xf32>, tensor<3x8xf32>) -> tensor<2x3x8xf32>
  return %0, %1 : tensor<2x3x8xf32>, tensor<2x3x8xf32>
}

// CHECK: OK @cross_entropy
func.func @cross_entropy(%logits: tensor<2x3x7xf32> {check.range = [-5.0, 5.0]},
                         %labels: tensor<2x3xi64> {check.range = [0, 6]},
                         %l2: tensor<5x4xf32>, %y2: tensor<5xi32> {check.range = [0, 3]},
                         %l1: tensor<6xf32>, %y1: tensor<i64> {check.range = [0, 5]})
    -> (tensor<f32>, tensor<f32>, tensor<f32>) {
  %0 = weft.cross_entropy %logits, %labels : (tensor<2x3x7xf32>, tensor<2x3xi64>) -> tensor<f32>
  %1 = weft.cross_entropy %l2, %y2 : (tensor<5x4xf32>, tensor<5xi32>) -> tensor<f32>
  %2 = weft.cross_entropy %l1, %y1 : (tensor<6xf32>, tensor<i64>) -> tensor<f32>
  return %0, %1, %2 : tensor<f32>, tensor<f32>, tensor<f32>
}

// CHECK: OK @mse
func.func @mse(%p: tensor<4x6xf32>, %t: tensor<4x6xf32>) -> tensor<f32> {
  %0 = weft.mse %p, %t : (tensor<4x6xf32>, tensor<4x6xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
