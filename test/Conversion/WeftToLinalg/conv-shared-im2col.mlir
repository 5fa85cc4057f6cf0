// A convolution and its filter gradient on the same input gather the same
// windows: after CSE one im2col buffer feeds both the forward GEMM and the
// filter gradient's batch-reduce GEMM.
// RUN: weft-opt --weft-lower-to-linalg --cse %s | FileCheck %s

// CHECK-LABEL: func.func @forward_and_filter_gradient
// CHECK: %[[PAD:.*]] = tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK: %[[WINDOWS:.*]] = linalg.generic {{.*}} ins(%[[PAD]] : tensor<2x3x10x10xf32>) outs(%{{.*}} : tensor<2x3x3x3x8x8xf32>)
// CHECK: %[[COLS:.*]] = tensor.collapse_shape %[[WINDOWS]] {{.*}} into tensor<2x27x64xf32>
// CHECK-NOT: tensor.pad
// CHECK: linalg.batch_matmul {{.*}} ins(%{{.*}}, %[[COLS]] : tensor<4x27xf32>, tensor<2x27x64xf32>)
// CHECK-NOT: tensor.pad
// CHECK: linalg.batch_reduce_matmul {{.*}} ins(%{{.*}}, %[[COLS]] : tensor<2x4x64xf32>, tensor<2x27x64xf32>) outs(%{{.*}} : tensor<4x27xf32>)
func.func @forward_and_filter_gradient(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>,
                                       %g: tensor<2x4x8x8xf32>)
    -> (tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>) {
  %y = weft.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x8x8xf32>
  %dw = weft.conv2d_backward_filter %g, %x {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<2x4x8x8xf32>, tensor<2x3x8x8xf32>) -> tensor<4x3x3x3xf32>
  return %y, %dw : tensor<2x4x8x8xf32>, tensor<4x3x3x3xf32>
}
