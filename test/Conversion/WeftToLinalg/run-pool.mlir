// Pooling and its adjoints, lowered and executed against weft-eval on the
// same random inputs (test/lib/check_lowering.py).
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// CHECK: OK @max_pool2d
func.func @max_pool2d(%x: tensor<2x3x6x7xf32>, %y: tensor<1x2x5x5xf32>)
    -> (tensor<2x3x3x3xf32>, tensor<1x2x5x3xf32>) {
  %0 = weft.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<2x3x6x7xf32>) -> tensor<2x3x3x3xf32>
  %1 = weft.max_pool2d %y {kernel = array<i64: 3, 3>, strides = array<i64: 1, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x2x5x5xf32>) -> tensor<1x2x5x3xf32>
  return %0, %1 : tensor<2x3x3x3xf32>, tensor<1x2x5x3xf32>
}

// CHECK: OK @avg_pool2d
func.func @avg_pool2d(%y: tensor<1x2x5x5xf32>, %z: tensor<1x2x6x5xf32>)
    -> (tensor<1x2x5x3xf32>, tensor<1x2x5x3xf32>, tensor<1x2x3x5xf32>, tensor<1x2x3x5xf32>) {
  %0 = weft.avg_pool2d %y {kernel = array<i64: 3, 3>, strides = array<i64: 1, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x2x5x5xf32>) -> tensor<1x2x5x3xf32>
  %1 = weft.avg_pool2d %y {kernel = array<i64: 3, 3>, strides = array<i64: 1, 2>, padding = array<i64: 1, 1, 1, 1>, count_include_pad = true} : (tensor<1x2x5x5xf32>) -> tensor<1x2x5x3xf32>
  %2 = weft.avg_pool2d %z {kernel = array<i64: 2, 3>, strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 2>} : (tensor<1x2x6x5xf32>) -> tensor<1x2x3x5xf32>
  %3 = weft.avg_pool2d %z {kernel = array<i64: 2, 3>, strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 2>, count_include_pad = true} : (tensor<1x2x6x5xf32>) -> tensor<1x2x3x5xf32>
  return %0, %1, %2, %3 : tensor<1x2x5x3xf32>, tensor<1x2x5x3xf32>, tensor<1x2x3x5xf32>, tensor<1x2x3x5xf32>
}

// Overlapping and padded windows; the tied inputs (small integers) check
// that each window's gradient goes to its first maximum.
// CHECK: OK @max_pool2d_grad
func.func @max_pool2d_grad(%g1: tensor<2x3x3x3xf32>, %x1: tensor<2x3x6x7xf32>,
                           %g2: tensor<1x2x5x3xf32>, %x2: tensor<1x2x5x5xf32>,
                           %t: tensor<1x2x5x5xi64> {check.range = [0, 2]})
    -> (tensor<2x3x6x7xf32>, tensor<1x2x5x5xf32>, tensor<1x2x5x5xf32>) {
  %0 = weft.max_pool2d_grad %g1, %x1 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<2x3x3x3xf32>, tensor<2x3x6x7xf32>) -> tensor<2x3x6x7xf32>
  %1 = weft.max_pool2d_grad %g2, %x2 {kernel = array<i64: 3, 3>, strides = array<i64: 1, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x2x5x3xf32>, tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32>
  %tied = weft.cast %t : tensor<1x2x5x5xi64> -> tensor<1x2x5x5xf32>
  %2 = weft.max_pool2d_grad %g2, %tied {kernel = array<i64: 3, 3>, strides = array<i64: 1, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x2x5x3xf32>, tensor<1x2x5x5xf32>) -> tensor<1x2x5x5xf32>
  return %0, %1, %2 : tensor<2x3x6x7xf32>, tensor<1x2x5x5xf32>, tensor<1x2x5x5xf32>
}

// Windows that tile the input (kernel <= stride, no padding, exact fit)
// take the per-cell path without a sum; ties again go to the first maximum.
// CHECK: OK @max_pool2d_grad_tiles
func.func @max_pool2d_grad_tiles(%g1: tensor<2x3x3x3xf32>, %x1: tensor<2x3x6x6xf32>,
                                 %g2: tensor<1x2x2x3xf32>, %x2: tensor<1x2x6x6xf32>,
                                 %t: tensor<2x3x6x6xi64> {check.range = [0, 2]})
    -> (tensor<2x3x6x6xf32>, tensor<1x2x6x6xf32>, tensor<2x3x6x6xf32>) {
  %0 = weft.max_pool2d_grad %g1, %x1 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<2x3x3x3xf32>, tensor<2x3x6x6xf32>) -> tensor<2x3x6x6xf32>
  %1 = weft.max_pool2d_grad %g2, %x2 {kernel = array<i64: 2, 1>, strides = array<i64: 3, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<1x2x2x3xf32>, tensor<1x2x6x6xf32>) -> tensor<1x2x6x6xf32>
  %tied = weft.cast %t : tensor<2x3x6x6xi64> -> tensor<2x3x6x6xf32>
  %2 = weft.max_pool2d_grad %g1, %tied {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<2x3x3x3xf32>, tensor<2x3x6x6xf32>) -> tensor<2x3x6x6xf32>
  return %0, %1, %2 : tensor<2x3x6x6xf32>, tensor<1x2x6x6xf32>, tensor<2x3x6x6xf32>
}

// CHECK: OK @max_pool2d_grad_tiles_bf16
func.func @max_pool2d_grad_tiles_bf16(%g: tensor<2x3x3x3xbf16>, %x: tensor<2x3x6x6xbf16>)
    -> tensor<2x3x6x6xbf16> {
  %0 = weft.max_pool2d_grad %g, %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<2x3x3x3xbf16>, tensor<2x3x6x6xbf16>) -> tensor<2x3x6x6xbf16>
  return %0 : tensor<2x3x6x6xbf16>
}

// A NaN wins its windows; -inf cells still beat padding.
// CHECK: OK @max_pool2d_special
func.func @max_pool2d_special(%g: tensor<1x1x2x2xf32>)
    -> (tensor<1x1x2x2xf32>, tensor<1x1x3x3xf32>) {
  %x = weft.constant dense<[[[[1.0, 0x7FC00000, 2.0], [0xFF800000, 0xFF800000, 5.0], [0xFF800000, 0xFF800000, 0.5]]]]> : tensor<1x1x3x3xf32>
  %0 = weft.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x1x3x3xf32>) -> tensor<1x1x2x2xf32>
  %1 = weft.max_pool2d_grad %g, %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x1x2x2xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x3x3xf32>
  return %0, %1 : tensor<1x1x2x2xf32>, tensor<1x1x3x3xf32>
}

// CHECK: OK @avg_pool2d_grad
func.func @avg_pool2d_grad(%g1: tensor<1x2x5x3xf32>, %g2: tensor<1x2x3x5xf32>,
                           %g3: tensor<2x3x3x3xf32>)
    -> (tensor<1x2x5x5xf32>, tensor<1x2x5x5xf32>, tensor<1x2x6x5xf32>,
        tensor<1x2x6x5xf32>, tensor<2x3x6x7xf32>) {
  %0 = weft.avg_pool2d_grad %g1 {kernel = array<i64: 3, 3>, strides = array<i64: 1, 2>, padding = array<i64: 1, 1, 1, 1>} : (tensor<1x2x5x3xf32>) -> tensor<1x2x5x5xf32>
  %1 = weft.avg_pool2d_grad %g1 {kernel = array<i64: 3, 3>, strides = array<i64: 1, 2>, padding = array<i64: 1, 1, 1, 1>, count_include_pad = true} : (tensor<1x2x5x3xf32>) -> tensor<1x2x5x5xf32>
  %2 = weft.avg_pool2d_grad %g2 {kernel = array<i64: 2, 3>, strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 2>} : (tensor<1x2x3x5xf32>) -> tensor<1x2x6x5xf32>
  %3 = weft.avg_pool2d_grad %g2 {kernel = array<i64: 2, 3>, strides = array<i64: 2, 1>, padding = array<i64: 1, 0, 0, 2>, count_include_pad = true} : (tensor<1x2x3x5xf32>) -> tensor<1x2x6x5xf32>
  %4 = weft.avg_pool2d_grad %g3 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<2x3x3x3xf32>) -> tensor<2x3x6x7xf32>
  return %0, %1, %2, %3, %4 : tensor<1x2x5x5xf32>, tensor<1x2x5x5xf32>,
      tensor<1x2x6x5xf32>, tensor<1x2x6x5xf32>, tensor<2x3x6x7xf32>
}
