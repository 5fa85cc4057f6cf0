// Convolutions through im2col + GEMM (no groups) with stride 2, padding 1,
// dilation 2 and non-square kernels, lowered and executed against weft-eval
// on the same random inputs (test/lib/check_lowering.py).
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// CHECK: OK @forward
func.func @forward(%x: tensor<2x3x9x10xf32>, %w: tensor<4x3x3x2xf32>, %b: tensor<4xf32>,
                   %w2: tensor<5x3x2x3xf32>, %w3: tensor<4x3x1x1xf32>)
    -> (tensor<2x4x4x5xf32>, tensor<2x5x5x3xf32>, tensor<2x4x6x6xf32>) {
  %0 = weft.conv2d %x, %w, %b {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>} : (tensor<2x3x9x10xf32>, tensor<4x3x3x2xf32>, tensor<4xf32>) -> tensor<2x4x4x5xf32>
  %1 = weft.conv2d %x, %w2 {strides = array<i64: 2, 3>, padding = array<i64: 1, 0, 0, 2>, dilations = array<i64: 1, 2>} : (tensor<2x3x9x10xf32>, tensor<5x3x2x3xf32>) -> tensor<2x5x5x3xf32>
  %2 = weft.conv2d %x, %w3 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x3x9x10xf32>, tensor<4x3x1x1xf32>) -> tensor<2x4x6x6xf32>
  return %0, %1, %2 : tensor<2x4x4x5xf32>, tensor<2x5x5x3xf32>, tensor<2x4x6x6xf32>
}

// CHECK: OK @backward_input
func.func @backward_input(%g: tensor<2x4x4x5xf32>, %w: tensor<4x3x3x2xf32>,
                          %g2: tensor<2x5x5x3xf32>, %w2: tensor<5x3x2x3xf32>)
    -> (tensor<2x3x9x10xf32>, tensor<2x3x9x10xf32>) {
  %0 = weft.conv2d_backward_input %g, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>} : (tensor<2x4x4x5xf32>, tensor<4x3x3x2xf32>) -> tensor<2x3x9x10xf32>
  %1 = weft.conv2d_backward_input %g2, %w2 {strides = array<i64: 2, 3>, padding = array<i64: 1, 0, 0, 2>, dilations = array<i64: 1, 2>} : (tensor<2x5x5x3xf32>, tensor<5x3x2x3xf32>) -> tensor<2x3x9x10xf32>
  return %0, %1 : tensor<2x3x9x10xf32>, tensor<2x3x9x10xf32>
}

// CHECK: OK @backward_filter
func.func @backward_filter(%g: tensor<2x4x4x5xf32>, %x: tensor<2x3x9x10xf32>,
                           %g2: tensor<2x5x5x3xf32>)
    -> (tensor<4x3x3x2xf32>, tensor<5x3x2x3xf32>) {
  %0 = weft.conv2d_backward_filter %g, %x {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>} : (tensor<2x4x4x5xf32>, tensor<2x3x9x10xf32>) -> tensor<4x3x3x2xf32>
  %1 = weft.conv2d_backward_filter %g2, %x {strides = array<i64: 2, 3>, padding = array<i64: 1, 0, 0, 2>, dilations = array<i64: 1, 2>} : (tensor<2x5x5x3xf32>, tensor<2x3x9x10xf32>) -> tensor<5x3x2x3xf32>
  return %0, %1 : tensor<4x3x3x2xf32>, tensor<5x3x2x3xf32>
}

// bf16: the GEMM sums bf16 products in f32 and rounds once.
// CHECK: OK @bf16
func.func @bf16(%x: tensor<2x3x9x10xbf16>, %w: tensor<4x3x3x2xbf16>, %g: tensor<2x4x4x5xbf16>)
    -> (tensor<2x4x4x5xbf16>, tensor<2x3x9x10xbf16>, tensor<4x3x3x2xbf16>) {
  %0 = weft.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>} : (tensor<2x3x9x10xbf16>, tensor<4x3x3x2xbf16>) -> tensor<2x4x4x5xbf16>
  %1 = weft.conv2d_backward_input %g, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>} : (tensor<2x4x4x5xbf16>, tensor<4x3x3x2xbf16>) -> tensor<2x3x9x10xbf16>
  %2 = weft.conv2d_backward_filter %g, %x {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>} : (tensor<2x4x4x5xbf16>, tensor<2x3x9x10xbf16>) -> tensor<4x3x3x2xbf16>
  return %0, %1, %2 : tensor<2x4x4x5xbf16>, tensor<2x3x9x10xbf16>, tensor<4x3x3x2xbf16>
}
