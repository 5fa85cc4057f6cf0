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
