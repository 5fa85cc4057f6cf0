// RUN: weft-opt %s -split-input-file -verify-diagnostics

func.func @scatter_add_shape(%t: tensor<64x32xf32>, %i: tensor<4xi64>, %u: tensor<4x16xf32>) {
  // expected-error @+2 {{updates shape 4x16 is not the gathered shape 4x32}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.scatter_add %t, %i, %u {axis = 0 : i64}
      : (tensor<64x32xf32>, tensor<4xi64>, tensor<4x16xf32>) -> tensor<64x32xf32>
  return
}

// -----

func.func @scatter_add_axis(%t: tensor<64x32xf32>, %i: tensor<4xi64>, %u: tensor<4x16xf32>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.scatter_add %t, %i, %u {axis = 2 : i64}
      : (tensor<64x32xf32>, tensor<4xi64>, tensor<4x16xf32>) -> tensor<64x32xf32>
  return
}

// -----

func.func @pad_entries(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{low, high and interior need one entry per axis (rank 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.pad %x {low = array<i64: 0>, high = array<i64: 0, 0>,
                    interior = array<i64: 0, 0>}
      : (tensor<4x3xf32>) -> tensor<4x3xf32>
  return
}

// -----

func.func @pad_negative(%x: tensor<4x3xf32>) {
  // expected-error @+2 {{axis 1: padding (low -1, high 0, interior 0) must be >= 0}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.pad %x {low = array<i64: 0, -1>, high = array<i64: 0, 0>,
                    interior = array<i64: 0, 0>}
      : (tensor<4x3xf32>) -> tensor<4x2xf32>
  return
}

// -----

func.func @one_hot_shape(%l: tensor<4xi64>) {
  // expected-error @+1 {{result shape 5x10 must be the indices shape 4 plus a class axis}}
  %0 = weft.one_hot %l : tensor<4xi64> -> tensor<5x10xf32>
  return
}

// -----

func.func @conv_backward_input_shape(%g: tensor<4x8x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+1 {{gradient shape 4x8x8x8 is not the conv2d output shape 4x8x16x16}}
  %0 = weft.conv2d_backward_input %g, %w {strides = array<i64: 1, 1>,
                                          padding = array<i64: 1, 1, 1, 1>,
                                          dilations = array<i64: 1, 1>}
      : (tensor<4x8x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<4x3x16x16xf32>
  return
}

// -----

func.func @conv_backward_filter_groups(%g: tensor<4x8x16x16xf32>, %x: tensor<4x3x16x16xf32>) {
  // expected-error @+1 {{input has 3 channels but the filter 8x3x3x3 with groups=2 expects 6}}
  %0 = weft.conv2d_backward_filter %g, %x {strides = array<i64: 1, 1>,
                                           padding = array<i64: 1, 1, 1, 1>,
                                           dilations = array<i64: 1, 1>,
                                           groups = 2 : i64}
      : (tensor<4x8x16x16xf32>, tensor<4x3x16x16xf32>) -> tensor<8x3x3x3xf32>
  return
}

// -----

func.func @max_pool_grad_shape(%g: tensor<4x3x4x4xf32>, %x: tensor<4x3x16x16xf32>) {
  // expected-error @+2 {{gradient shape 4x3x4x4 is not the pooled shape 4x3x8x8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.max_pool2d_grad %g, %x {kernel = array<i64: 2, 2>,
                                    strides = array<i64: 2, 2>,
                                    padding = array<i64: 0, 0, 0, 0>}
      : (tensor<4x3x4x4xf32>, tensor<4x3x16x16xf32>) -> tensor<4x3x16x16xf32>
  return
}

// -----

func.func @avg_pool_grad_padding(%g: tensor<4x3x8x8xf32>) {
  // expected-error @+1 {{padding 2 must be smaller than the kernel size 2}}
  %0 = weft.avg_pool2d_grad %g {kernel = array<i64: 2, 2>,
                                strides = array<i64: 2, 2>,
                                padding = array<i64: 2, 0, 0, 0>}
      : (tensor<4x3x8x8xf32>) -> tensor<4x3x16x16xf32>
  return
}
