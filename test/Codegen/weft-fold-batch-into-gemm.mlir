// RUN: weft-opt %s --weft-fold-batch-into-gemm -split-input-file | FileCheck %s
// RUN: weft-opt %s --weft-fold-batch-into-gemm=narrow=true -split-input-file \
// RUN:   | FileCheck %s --check-prefix=NARROW

// A weight gradient: the sum over the batch of a^T g is one GEMM over the
// stacked rows.

// CHECK-LABEL: func.func @weight_grad
// CHECK-SAME: (%[[A:.*]]: tensor<8x16x4xf32>, %[[G:.*]]: tensor<8x16x6xf32>)
// CHECK-DAG: %[[A2:.*]] = weft.reshape %[[A]] : tensor<8x16x4xf32> -> tensor<128x4xf32>
// CHECK-DAG: %[[G2:.*]] = weft.reshape %[[G]] : tensor<8x16x6xf32> -> tensor<128x6xf32>
// CHECK: %[[DW:.*]] = weft.matmul %[[A2]], %[[G2]] {transpose_lhs = true} : (tensor<128x4xf32>, tensor<128x6xf32>) -> tensor<4x6xf32>
// CHECK-NOT: weft.reduce_sum
// CHECK: return %[[DW]]
func.func @weight_grad(%a: tensor<8x16x4xf32>, %g: tensor<8x16x6xf32>)
    -> tensor<4x6xf32> {
  %p = weft.matmul %a, %g {transpose_lhs = true}
      : (tensor<8x16x4xf32>, tensor<8x16x6xf32>) -> tensor<8x4x6xf32>
  %dw = weft.reduce_sum %p {axes = array<i64: 0>}
      : (tensor<8x4x6xf32>) -> tensor<4x6xf32>
  return %dw : tensor<4x6xf32>
}

// -----

// Two batch axes, both summed; keep_dims reshapes the 2-D product back.

// CHECK-LABEL: func.func @two_batch_axes_keep_dims
// CHECK-DAG: weft.reshape %{{.*}} : tensor<2x3x16x4xf32> -> tensor<96x4xf32>
// CHECK-DAG: weft.reshape %{{.*}} : tensor<2x3x16x6xf32> -> tensor<96x6xf32>
// CHECK: %[[DW:.*]] = weft.matmul {{.*}} -> tensor<4x6xf32>
// CHECK: %[[R:.*]] = weft.reshape %[[DW]] : tensor<4x6xf32> -> tensor<1x1x4x6xf32>
// CHECK: return %[[R]]
func.func @two_batch_axes_keep_dims(%a: tensor<2x3x16x4xf32>,
                                    %g: tensor<2x3x16x6xf32>)
    -> tensor<1x1x4x6xf32> {
  %p = weft.matmul %a, %g {transpose_lhs = true}
      : (tensor<2x3x16x4xf32>, tensor<2x3x16x6xf32>) -> tensor<2x3x4x6xf32>
  %dw = weft.reduce_sum %p {axes = array<i64: 0, 1>, keep_dims = true}
      : (tensor<2x3x4x6xf32>) -> tensor<1x1x4x6xf32>
  return %dw : tensor<1x1x4x6xf32>
}

// -----

// A linear layer, forward and input gradient: the batch folds into M.

// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: tensor<8x16x4xf32>, %[[W:.*]]: tensor<4x6xf32>, %[[G:.*]]: tensor<8x16x6xf32>)
// CHECK: %[[X2:.*]] = weft.reshape %[[X]] : tensor<8x16x4xf32> -> tensor<128x4xf32>
// CHECK: %[[Y2:.*]] = weft.matmul %[[X2]], %[[W]] : (tensor<128x4xf32>, tensor<4x6xf32>) -> tensor<128x6xf32>
// CHECK: %[[Y:.*]] = weft.reshape %[[Y2]] : tensor<128x6xf32> -> tensor<8x16x6xf32>
// CHECK: %[[G2:.*]] = weft.reshape %[[G]] : tensor<8x16x6xf32> -> tensor<128x6xf32>
// CHECK: %[[DX2:.*]] = weft.matmul %[[G2]], %[[W]] {transpose_rhs = true} : (tensor<128x6xf32>, tensor<4x6xf32>) -> tensor<128x4xf32>
// CHECK: %[[DX:.*]] = weft.reshape %[[DX2]] : tensor<128x4xf32> -> tensor<8x16x4xf32>
// CHECK: return %[[Y]], %[[DX]]
func.func @linear(%x: tensor<8x16x4xf32>, %w: tensor<4x6xf32>,
                  %g: tensor<8x16x6xf32>)
    -> (tensor<8x16x6xf32>, tensor<8x16x4xf32>) {
  %y = weft.matmul %x, %w
      : (tensor<8x16x4xf32>, tensor<4x6xf32>) -> tensor<8x16x6xf32>
  %dx = weft.matmul %g, %w {transpose_rhs = true}
      : (tensor<8x16x6xf32>, tensor<4x6xf32>) -> tensor<8x16x4xf32>
  return %y, %dx : tensor<8x16x6xf32>, tensor<8x16x4xf32>
}

// -----

// A gradient computed by a folded matmul is read stacked as it was made:
// the reshapes in between fold away.

// CHECK-LABEL: func.func @chain
// CHECK: %[[G2:.*]] = weft.matmul %{{.*}}, %{{.*}} : (tensor<128x4xf32>, tensor<4x6xf32>) -> tensor<128x6xf32>
// CHECK: weft.matmul %{{.*}}, %[[G2]] {transpose_lhs = true} : (tensor<128x4xf32>, tensor<128x6xf32>) -> tensor<4x6xf32>
func.func @chain(%x: tensor<8x16x4xf32>, %w: tensor<4x6xf32>)
    -> tensor<4x6xf32> {
  %g = weft.matmul %x, %w
      : (tensor<8x16x4xf32>, tensor<4x6xf32>) -> tensor<8x16x6xf32>
  %p = weft.matmul %x, %g {transpose_lhs = true}
      : (tensor<8x16x4xf32>, tensor<8x16x6xf32>) -> tensor<8x4x6xf32>
  %dw = weft.reduce_sum %p {axes = array<i64: 0>}
      : (tensor<8x4x6xf32>) -> tensor<4x6xf32>
  return %dw : tensor<4x6xf32>
}

// -----

// Left alone: a broadcast batch, a second user of the product, a
// transposed rhs (its contraction is on the last axis), a sum over part of
// the batch, batches of different ranks.

// CHECK-LABEL: func.func @not_a_weight_grad
// CHECK-NOT: weft.reshape
// CHECK-COUNT-5: weft.reduce_sum
// CHECK-NOT: weft.reshape
func.func @not_a_weight_grad(%a: tensor<8x16x4xf32>, %b: tensor<1x16x6xf32>,
                             %g: tensor<8x16x6xf32>, %h: tensor<8x6x16xf32>,
                             %a4: tensor<2x3x16x4xf32>,
                             %g4: tensor<2x3x16x6xf32>,
                             %g3: tensor<3x16x6xf32>)
    -> (tensor<4x6xf32>, tensor<4x6xf32>, tensor<8x4x6xf32>, tensor<4x6xf32>,
        tensor<3x4x6xf32>, tensor<4x6xf32>) {
  %p0 = weft.matmul %a, %b {transpose_lhs = true}
      : (tensor<8x16x4xf32>, tensor<1x16x6xf32>) -> tensor<8x4x6xf32>
  %s0 = weft.reduce_sum %p0 {axes = array<i64: 0>}
      : (tensor<8x4x6xf32>) -> tensor<4x6xf32>
  %p1 = weft.matmul %a, %g {transpose_lhs = true}
      : (tensor<8x16x4xf32>, tensor<8x16x6xf32>) -> tensor<8x4x6xf32>
  %s1 = weft.reduce_sum %p1 {axes = array<i64: 0>}
      : (tensor<8x4x6xf32>) -> tensor<4x6xf32>
  %p2 = weft.matmul %a, %h {transpose_lhs = true, transpose_rhs = true}
      : (tensor<8x16x4xf32>, tensor<8x6x16xf32>) -> tensor<8x4x6xf32>
  %s2 = weft.reduce_sum %p2 {axes = array<i64: 0>}
      : (tensor<8x4x6xf32>) -> tensor<4x6xf32>
  %p3 = weft.matmul %a4, %g4 {transpose_lhs = true}
      : (tensor<2x3x16x4xf32>, tensor<2x3x16x6xf32>) -> tensor<2x3x4x6xf32>
  %s3 = weft.reduce_sum %p3 {axes = array<i64: 0>}
      : (tensor<2x3x4x6xf32>) -> tensor<3x4x6xf32>
  %p4 = weft.matmul %a4, %g3 {transpose_lhs = true}
      : (tensor<2x3x16x4xf32>, tensor<3x16x6xf32>) -> tensor<2x3x4x6xf32>
  %s4 = weft.reduce_sum %p4 {axes = array<i64: 0, 1>}
      : (tensor<2x3x4x6xf32>) -> tensor<4x6xf32>
  return %s0, %s1, %p1, %s2, %s3, %s4
      : tensor<4x6xf32>, tensor<4x6xf32>, tensor<8x4x6xf32>, tensor<4x6xf32>,
        tensor<3x4x6xf32>, tensor<4x6xf32>
}

// -----

// Left alone in bf16: the batched form rounds each batch's product before
// the sum. With `narrow` (GPU builds) folded, rounded once.

// CHECK-LABEL: func.func @bf16_weight_grad
// CHECK-NOT: weft.reshape
// CHECK: weft.reduce_sum
// NARROW-LABEL: func.func @bf16_weight_grad
// NARROW-DAG: weft.reshape %{{.*}} : tensor<8x16x4xbf16> -> tensor<128x4xbf16>
// NARROW-DAG: weft.reshape %{{.*}} : tensor<8x16x6xbf16> -> tensor<128x6xbf16>
// NARROW: %[[DW:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_lhs = true} : (tensor<128x4xbf16>, tensor<128x6xbf16>) -> tensor<4x6xbf16>
// NARROW-NOT: weft.reduce_sum
// NARROW: return %[[DW]]
func.func @bf16_weight_grad(%a: tensor<8x16x4xbf16>, %g: tensor<8x16x6xbf16>)
    -> tensor<4x6xbf16> {
  %p = weft.matmul %a, %g {transpose_lhs = true}
      : (tensor<8x16x4xbf16>, tensor<8x16x6xbf16>) -> tensor<8x4x6xbf16>
  %dw = weft.reduce_sum %p {axes = array<i64: 0>}
      : (tensor<8x4x6xbf16>) -> tensor<4x6xbf16>
  return %dw : tensor<4x6xbf16>
}

// -----

// Left alone: a transposed lhs against a matrix, and a batched rhs
// (attention scores).

// CHECK-LABEL: func.func @not_a_batch_times_matrix
// CHECK-NOT: weft.reshape
// CHECK: weft.matmul %{{.*}}, %{{.*}} {transpose_lhs = true} : (tensor<8x4x16xf32>, tensor<4x6xf32>) -> tensor<8x16x6xf32>
// CHECK: weft.matmul %{{.*}}, %{{.*}} : (tensor<8x16x4xf32>, tensor<8x4x16xf32>) -> tensor<8x16x16xf32>
// CHECK-NOT: weft.reshape
func.func @not_a_batch_times_matrix(%xt: tensor<8x4x16xf32>,
                                    %w: tensor<4x6xf32>,
                                    %q: tensor<8x16x4xf32>)
    -> (tensor<8x16x6xf32>, tensor<8x16x16xf32>) {
  %y = weft.matmul %xt, %w {transpose_lhs = true}
      : (tensor<8x4x16xf32>, tensor<4x6xf32>) -> tensor<8x16x6xf32>
  %s = weft.matmul %q, %xt
      : (tensor<8x16x4xf32>, tensor<8x4x16xf32>) -> tensor<8x16x16xf32>
  return %y, %s : tensor<8x16x6xf32>, tensor<8x16x16xf32>
}
