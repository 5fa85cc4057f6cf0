// conv2d and its adjoints, lowered and executed against weft-eval on the
// same random inputs (test/lib/check_lowering.py).
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// CHECK: OK @conv2d
func.func @conv2d(%x: tensor<2x3x7x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>,
                  %w2: tensor<4x3x3x2xf32>, %x3: tensor<1x2x9x9xf32>,
                  %w3: tensor<3x2x3x3xf32>)
    -> (tensor<2x4x7x8xf32>, tensor<2x4x3x4xf32>, tensor<1x3x9x4xf32>) {
  %0 = weft.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x3x7x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x7x8xf32>
  %1 = weft.conv2d %x, %w2 {strides = array<i64: 2, 2>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 1>} : (tensor<2x3x7x8xf32>, tensor<4x3x3x2xf32>) -> tensor<2x4x3x4xf32>
  %2 = weft.conv2d %x3, %w3 {strides = array<i64: 1, 2>, padding = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 3>} : (tensor<1x2x9x9xf32>, tensor<3x2x3x3xf32>) -> tensor<1x3x9x4xf32>
  return %0, %1, %2 : tensor<2x4x7x8xf32>, tensor<2x4x3x4xf32>, tensor<1x3x9x4xf32>
}

// CHECK: OK @conv2d_groups
func.func @conv2d_groups(%x: tensor<2x4x6x6xf32>, %w: tensor<6x2x3x3xf32>, %b: tensor<6xf32>,
                         %d: tensor<1x4x5x5xf32>, %dw: tensor<4x1x3x3xf32>)
    -> (tensor<2x6x4x4xf32>, tensor<1x4x3x3xf32>) {
  %0 = weft.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x4x6x6xf32>, tensor<6x2x3x3xf32>, tensor<6xf32>) -> tensor<2x6x4x4xf32>
  %1 = weft.conv2d %d, %dw {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 4 : i64} : (tensor<1x4x5x5xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x3x3xf32>
  return %0, %1 : tensor<2x6x4x4xf32>, tensor<1x4x3x3xf32>
}

// Strides leaving trailing input rows unread, dilation, groups, and padding
// wider than the filter (the transposed convolution crops).
// CHECK: OK @conv2d_backward_input
func.func @conv2d_backward_input(%g1: tensor<2x4x3x4xf32>, %w1: tensor<4x3x3x2xf32>,
                                 %g2: tensor<1x3x9x4xf32>, %w2: tensor<3x2x3x3xf32>,
                                 %g3: tensor<2x6x4x4xf32>, %w3: tensor<6x2x3x3xf32>,
                                 %g4: tensor<1x4x3x3xf32>, %w4: tensor<4x1x3x3xf32>,
                                 %g5: tensor<1x3x6x6xf32>, %w5: tensor<3x2x1x1xf32>)
    -> (tensor<2x3x7x8xf32>, tensor<1x2x9x9xf32>, tensor<2x4x6x6xf32>,
        tensor<1x4x5x5xf32>, tensor<1x2x4x4xf32>) {
  %0 = weft.conv2d_backward_input %g1, %w1 {strides = array<i64: 2, 2>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 1>} : (tensor<2x4x3x4xf32>, tensor<4x3x3x2xf32>) -> tensor<2x3x7x8xf32>
  %1 = weft.conv2d_backward_input %g2, %w2 {strides = array<i64: 1, 2>, padding = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 3>} : (tensor<1x3x9x4xf32>, tensor<3x2x3x3xf32>) -> tensor<1x2x9x9xf32>
  %2 = weft.conv2d_backward_input %g3, %w3 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x6x4x4xf32>, tensor<6x2x3x3xf32>) -> tensor<2x4x6x6xf32>
  %3 = weft.conv2d_backward_input %g4, %w4 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 4 : i64} : (tensor<1x4x3x3xf32>, tensor<4x1x3x3xf32>) -> tensor<1x4x5x5xf32>
  %4 = weft.conv2d_backward_input %g5, %w5 {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<1x3x6x6xf32>, tensor<3x2x1x1xf32>) -> tensor<1x2x4x4xf32>
  return %0, %1, %2, %3, %4 : tensor<2x3x7x8xf32>, tensor<1x2x9x9xf32>,
      tensor<2x4x6x6xf32>, tensor<1x4x5x5xf32>, tensor<1x2x4x4xf32>
}

// CHECK: OK @conv2d_backward_filter
func.func @conv2d_backward_filter(%g1: tensor<2x4x3x4xf32>, %x1: tensor<2x3x7x8xf32>,
                                  %g2: tensor<1x3x9x4xf32>, %x2: tensor<1x2x9x9xf32>,
                                  %g3: tensor<2x6x4x4xf32>, %x3: tensor<2x4x6x6xf32>,
                                  %g4: tensor<1x4x3x3xf32>, %x4: tensor<1x4x5x5xf32>)
    -> (tensor<4x3x3x2xf32>, tensor<3x2x3x3xf32>, tensor<6x2x3x3xf32>,
        tensor<4x1x3x3xf32>) {
  %0 = weft.conv2d_backward_filter %g1, %x1 {strides = array<i64: 2, 2>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 1>} : (tensor<2x4x3x4xf32>, tensor<2x3x7x8xf32>) -> tensor<4x3x3x2xf32>
  %1 = weft.conv2d_backward_filter %g2, %x2 {strides = array<i64: 1, 2>, padding = array<i64: 2, 2, 2, 2>, dilations = array<i64: 2, 3>} : (tensor<1x3x9x4xf32>, tensor<1x2x9x9xf32>) -> tensor<3x2x3x3xf32>
  %2 = weft.conv2d_backward_filter %g3, %x3 {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x6x4x4xf32>, tensor<2x4x6x6xf32>) -> tensor<6x2x3x3xf32>
  %3 = weft.conv2d_backward_filter %g4, %x4 {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>, groups = 4 : i64} : (tensor<1x4x3x3xf32>, tensor<1x4x5x5xf32>) -> tensor<4x1x3x3xf32>
  return %0, %1, %2, %3 : tensor<4x3x3x2xf32>, tensor<3x2x3x3xf32>,
      tensor<6x2x3x3xf32>, tensor<4x1x3x3xf32>
}
