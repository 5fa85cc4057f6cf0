// RUN: weft-opt %s --canonicalize --split-input-file | FileCheck %s

// CHECK-LABEL: func.func @reshape_chain
// CHECK-SAME: (%[[X:.*]]: tensor<4x16x32xf32>)
func.func @reshape_chain(%x: tensor<4x16x32xf32>) -> tensor<2048xf32> {
  // CHECK: %[[R:.*]] = weft.reshape %[[X]] : tensor<4x16x32xf32> -> tensor<2048xf32>
  // CHECK-NEXT: return %[[R]]
  %0 = weft.reshape %x : tensor<4x16x32xf32> -> tensor<64x32xf32>
  %1 = weft.reshape %0 : tensor<64x32xf32> -> tensor<2048xf32>
  return %1 : tensor<2048xf32>
}

// -----

// CHECK-LABEL: func.func @identities
// CHECK-SAME: (%[[X:.*]]: tensor<4x8xf32>)
func.func @identities(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // CHECK-NEXT: return %[[X]]
  %0 = weft.reshape %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %1 = weft.transpose %0 {permutation = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %2 = weft.cast %1 : tensor<4x8xf32> -> tensor<4x8xf32>
  %3 = weft.broadcast %2 : tensor<4x8xf32> -> tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_chain
// CHECK-SAME: (%[[X:.*]]: tensor<2x3x4xf32>)
func.func @transpose_chain(%x: tensor<2x3x4xf32>) -> tensor<3x2x4xf32> {
  // CHECK: %[[T:.*]] = weft.transpose %[[X]] {permutation = array<i64: 1, 0, 2>}
  // CHECK-NEXT: return %[[T]]
  %0 = weft.transpose %x {permutation = array<i64: 2, 0, 1>} : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
  %1 = weft.transpose %0 {permutation = array<i64: 2, 1, 0>} : (tensor<4x2x3xf32>) -> tensor<3x2x4xf32>
  return %1 : tensor<3x2x4xf32>
}

// -----

// CHECK-LABEL: func.func @transpose_inverse
// CHECK-SAME: (%[[X:.*]]: tensor<2x3xf32>)
func.func @transpose_inverse(%x: tensor<2x3xf32>) -> tensor<2x3xf32> {
  // CHECK-NEXT: return %[[X]]
  %0 = weft.transpose %x {permutation = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>
  %1 = weft.transpose %0 {permutation = array<i64: 1, 0>} : (tensor<3x2xf32>) -> tensor<2x3xf32>
  return %1 : tensor<2x3xf32>
}

// -----

// CHECK-LABEL: func.func @constant_reshape
func.func @constant_reshape() -> tensor<2x2xi64> {
  // CHECK: %[[C:.*]] = weft.constant dense<{{\[\[}}1, 2], [3, 4]]> : tensor<2x2xi64>
  // CHECK-NEXT: return %[[C]]
  %c = weft.constant dense<[1, 2, 3, 4]> : tensor<4xi64>
  %0 = weft.reshape %c : tensor<4xi64> -> tensor<2x2xi64>
  return %0 : tensor<2x2xi64>
}

// -----

// CHECK-LABEL: func.func @splat_broadcast
func.func @splat_broadcast() -> tensor<4x8xf32> {
  // CHECK: %[[C:.*]] = weft.constant dense<1.000000e+00> : tensor<4x8xf32>
  // CHECK-NEXT: return %[[C]]
  %c = weft.constant dense<1.0> : tensor<8xf32>
  %0 = weft.broadcast %c : tensor<8xf32> -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// A transpose of the last two axes feeding a matmul becomes the operand's
// transpose flag (flipped when already set); other permutations stay.

// CHECK-LABEL: func.func @matmul_reads_transposed
// CHECK-SAME: (%[[H:.*]]: tensor<2x3x4xf32>, %[[W:.*]]: tensor<5x4xf32>, %[[A:.*]]: tensor<4x3xf32>, %[[B:.*]]: tensor<2x4x3x5xf32>, %[[C:.*]]: tensor<2x3x5x6xf32>)
func.func @matmul_reads_transposed(%h: tensor<2x3x4xf32>, %w: tensor<5x4xf32>,
                                   %a: tensor<4x3xf32>, %b: tensor<2x4x3x5xf32>,
                                   %c: tensor<2x3x5x6xf32>)
    -> (tensor<2x3x5xf32>, tensor<4x4xf32>, tensor<2x3x4x6xf32>) {
  // CHECK: %[[P:.*]] = weft.matmul %[[H]], %[[W]] {transpose_rhs = true}
  %wt = weft.transpose %w {permutation = array<i64: 1, 0>} : (tensor<5x4xf32>) -> tensor<4x5xf32>
  %p = weft.matmul %h, %wt : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  // CHECK: %[[Q:.*]] = weft.matmul %[[A]], %[[A]] {transpose_rhs = true}
  %at = weft.transpose %a {permutation = array<i64: 1, 0>} : (tensor<4x3xf32>) -> tensor<3x4xf32>
  %q = weft.matmul %at, %at {transpose_lhs = true} : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<4x4xf32>
  // CHECK: %[[BT:.*]] = weft.transpose %[[B]]
  // CHECK: %[[R:.*]] = weft.matmul %[[BT]], %[[C]] :
  %bt = weft.transpose %b {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x3x5xf32>) -> tensor<2x3x4x5xf32>
  %r = weft.matmul %bt, %c : (tensor<2x3x4x5xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x6xf32>
  // CHECK: return %[[P]], %[[Q]], %[[R]]
  return %p, %q, %r : tensor<2x3x5xf32>, tensor<4x4xf32>, tensor<2x3x4x6xf32>
}
