// bf16 and f16: computed in f32 inside each generic and rounded once, so
// results may differ from the evaluator (double, rounded once) by one
// rounding step of the element type (test/lib/check_lowering.py's rtol).
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// CHECK: OK @matmul_bf16
func.func @matmul_bf16(%a: tensor<6x16xbf16>, %b: tensor<5x16xbf16>,
                       %x: tensor<2x6x16xbf16>, %y: tensor<2x16x5xbf16>)
    -> (tensor<6x5xbf16>, tensor<2x6x5xbf16>, tensor<2x6x5xbf16>) {
  %0 = weft.matmul %a, %b {transpose_rhs = true} : (tensor<6x16xbf16>, tensor<5x16xbf16>) -> tensor<6x5xbf16>
  %1 = weft.matmul %x, %b {transpose_rhs = true} : (tensor<2x6x16xbf16>, tensor<5x16xbf16>) -> tensor<2x6x5xbf16>
  %2 = weft.matmul %x, %y : (tensor<2x6x16xbf16>, tensor<2x16x5xbf16>) -> tensor<2x6x5xbf16>
  return %0, %1, %2 : tensor<6x5xbf16>, tensor<2x6x5xbf16>, tensor<2x6x5xbf16>
}

// CHECK: OK @elementwise_bf16
func.func @elementwise_bf16(%a: tensor<4x8xbf16>, %b: tensor<8xbf16>)
    -> (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>,
        tensor<4x8xi1>, tensor<4x8xbf16>) {
  %0 = weft.add %a, %b : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  %1 = weft.mul %a, %b : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  %2 = weft.gelu %a approximate = tanh : tensor<4x8xbf16>
  %3 = weft.exp %a : tensor<4x8xbf16>
  %4 = weft.cmp lt, %a, %b : (tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xi1>
  %5 = weft.where %4, %a, %b : (tensor<4x8xi1>, tensor<4x8xbf16>, tensor<8xbf16>) -> tensor<4x8xbf16>
  return %0, %1, %2, %3, %4, %5 : tensor<4x8xbf16>, tensor<4x8xbf16>,
      tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xi1>, tensor<4x8xbf16>
}

// CHECK: OK @softmax_bf16
func.func @softmax_bf16(%a: tensor<3x10xbf16> {check.range = [-8.0, 8.0]})
    -> (tensor<3x10xbf16>, tensor<3x10xbf16>) {
  %0 = weft.softmax %a {axis = 1 : i64} : tensor<3x10xbf16>
  %1 = weft.log_softmax %a {axis = 1 : i64} : tensor<3x10xbf16>
  return %0, %1 : tensor<3x10xbf16>, tensor<3x10xbf16>
}

// CHECK: OK @normalization_bf16
func.func @normalization_bf16(%x: tensor<2x3x8xbf16>, %g: tensor<8xbf16>, %b: tensor<8xbf16>,
                              %labels: tensor<2x3xi64> {check.range = [0, 7]})
    -> (tensor<2x3x8xbf16>, tensor<2x8xbf16>, tensor<bf16>, tensor<2x3xbf16>) {
  %0 = weft.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x3x8xbf16>, tensor<8xbf16>, tensor<8xbf16>) -> tensor<2x3x8xbf16>
  %1 = weft.reduce_sum %x {axes = array<i64: 1>} : (tensor<2x3x8xbf16>) -> tensor<2x8xbf16>
  %2 = weft.cross_entropy %x, %labels : (tensor<2x3x8xbf16>, tensor<2x3xi64>) -> tensor<bf16>
  %3 = weft.reduce_max %x {axes = array<i64: 2>} : (tensor<2x3x8xbf16>) -> tensor<2x3xbf16>
  return %0, %1, %2, %3 : tensor<2x3x8xbf16>, tensor<2x8xbf16>, tensor<bf16>, tensor<2x3xbf16>
}

// CHECK: OK @conv_pool_bf16
func.func @conv_pool_bf16(%x: tensor<1x2x6x6xbf16>, %w: tensor<3x2x3x3xbf16>, %bias: tensor<3xbf16>,
                          %idx: tensor<4xi64> {check.range = [0, 5]}, %u: tensor<4x6xbf16>,
                          %t: tensor<6x6xbf16>)
    -> (tensor<1x3x6x6xbf16>, tensor<1x2x3x3xbf16>, tensor<1x2x3x3xbf16>, tensor<6x6xbf16>) {
  %0 = weft.conv2d %x, %w, %bias {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x2x6x6xbf16>, tensor<3x2x3x3xbf16>, tensor<3xbf16>) -> tensor<1x3x6x6xbf16>
  %1 = weft.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x2x6x6xbf16>) -> tensor<1x2x3x3xbf16>
  %2 = weft.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x2x6x6xbf16>) -> tensor<1x2x3x3xbf16>
  %3 = weft.scatter_add %t, %idx, %u {axis = 0 : i64} : (tensor<6x6xbf16>, tensor<4xi64>, tensor<4x6xbf16>) -> tensor<6x6xbf16>
  return %0, %1, %2, %3 : tensor<1x3x6x6xbf16>, tensor<1x2x3x3xbf16>, tensor<1x2x3x3xbf16>, tensor<6x6xbf16>
}

// CHECK: OK @f16
func.func @f16(%a: tensor<4x8xf16>, %b: tensor<8x3xf16>) -> (tensor<4x8xf16>, tensor<4x3xf16>, tensor<4x8xf16>) {
  %0 = weft.sigmoid %a : tensor<4x8xf16>
  %1 = weft.matmul %a, %b : (tensor<4x8xf16>, tensor<8x3xf16>) -> tensor<4x3xf16>
  %2 = weft.softmax %a {axis = 1 : i64} : tensor<4x8xf16>
  return %0, %1, %2 : tensor<4x8xf16>, tensor<4x3xf16>, tensor<4x8xf16>
}
