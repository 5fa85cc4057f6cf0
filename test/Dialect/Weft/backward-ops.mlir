// RUN: weft-opt %s | weft-opt | FileCheck %s
// RUN: weft-opt %s --mlir-print-op-generic | weft-opt | FileCheck %s

// The ops gradient rules build (see WeftOps.td, "Backward ops").

// CHECK-LABEL: func.func @embedding_grad
func.func @embedding_grad(%zeros: tensor<64x32xf32>, %tokens: tensor<4x16xi64>,
                          %g: tensor<4x16x32xf32>) -> tensor<64x32xf32> {
  // CHECK: weft.scatter_add %{{.*}}, %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<64x32xf32>, tensor<4x16xi64>, tensor<4x16x32xf32>) -> tensor<64x32xf32>
  %d = weft.scatter_add %zeros, %tokens, %g {axis = 0 : i64}
      : (tensor<64x32xf32>, tensor<4x16xi64>, tensor<4x16x32xf32>) -> tensor<64x32xf32>
  return %d : tensor<64x32xf32>
}

// CHECK-LABEL: func.func @pad_and_one_hot
func.func @pad_and_one_hot(%x: tensor<4x3xf32>, %labels: tensor<4x16xi64>) {
  // CHECK: weft.pad %{{.*}} {high = array<i64: 0, 2>, interior = array<i64: 0, 1>, low = array<i64: 0, 1>} : (tensor<4x3xf32>) -> tensor<4x8xf32>
  %p = weft.pad %x {low = array<i64: 0, 1>, high = array<i64: 0, 2>,
                    interior = array<i64: 0, 1>}
      : (tensor<4x3xf32>) -> tensor<4x8xf32>
  // CHECK: weft.pad %{{.*}} {{.*}}value = -1.000000e+00 : f64} : (tensor<4x3xf32>) -> tensor<5x3xf32>
  %q = weft.pad %x {low = array<i64: 1, 0>, high = array<i64: 0, 0>,
                    interior = array<i64: 0, 0>, value = -1.0 : f64}
      : (tensor<4x3xf32>) -> tensor<5x3xf32>
  // CHECK: weft.one_hot %{{.*}} : tensor<4x16xi64> -> tensor<4x16x64xf32>
  %h = weft.one_hot %labels : tensor<4x16xi64> -> tensor<4x16x64xf32>
  return
}

// CHECK-LABEL: func.func @conv_and_pool_grads
func.func @conv_and_pool_grads(%x: tensor<4x3x16x16xf32>, %w: tensor<8x3x3x3xf32>,
                               %g: tensor<4x8x8x8xf32>, %p: tensor<4x3x8x8xf32>) {
  // CHECK: weft.conv2d_backward_input %{{.*}}, %{{.*}} {{.*}} : (tensor<4x8x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<4x3x16x16xf32>
  %dx = weft.conv2d_backward_input %g, %w {strides = array<i64: 2, 2>,
                                           padding = array<i64: 1, 1, 1, 1>,
                                           dilations = array<i64: 1, 1>}
      : (tensor<4x8x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<4x3x16x16xf32>
  // CHECK: weft.conv2d_backward_filter %{{.*}}, %{{.*}} {{.*}} : (tensor<4x8x8x8xf32>, tensor<4x3x16x16xf32>) -> tensor<8x3x3x3xf32>
  %dw = weft.conv2d_backward_filter %g, %x {strides = array<i64: 2, 2>,
                                            padding = array<i64: 1, 1, 1, 1>,
                                            dilations = array<i64: 1, 1>}
      : (tensor<4x8x8x8xf32>, tensor<4x3x16x16xf32>) -> tensor<8x3x3x3xf32>
  // CHECK: weft.max_pool2d_grad %{{.*}}, %{{.*}} {{.*}} : (tensor<4x3x8x8xf32>, tensor<4x3x16x16xf32>) -> tensor<4x3x16x16xf32>
  %m = weft.max_pool2d_grad %p, %x {kernel = array<i64: 2, 2>,
                                    strides = array<i64: 2, 2>,
                                    padding = array<i64: 0, 0, 0, 0>}
      : (tensor<4x3x8x8xf32>, tensor<4x3x16x16xf32>) -> tensor<4x3x16x16xf32>
  // CHECK: weft.avg_pool2d_grad %{{.*}} {{.*}}count_include_pad = true{{.*}} : (tensor<4x3x8x8xf32>) -> tensor<4x3x16x16xf32>
  %a = weft.avg_pool2d_grad %p {kernel = array<i64: 3, 3>,
                                strides = array<i64: 2, 2>,
                                padding = array<i64: 1, 1, 0, 0>,
                                count_include_pad = true}
      : (tensor<4x3x8x8xf32>) -> tensor<4x3x16x16xf32>
  return
}
