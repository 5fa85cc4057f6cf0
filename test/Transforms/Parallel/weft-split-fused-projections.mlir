// RUN: weft-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(weft-split-fused-projections))' | FileCheck %s

// q, k and v sliced out of one projection: one matmul per slice, of the
// matching rows of the weight and entries of the bias.
// CHECK-LABEL: func.func @qkv
// CHECK-SAME: (%[[W:.*]]: tensor<96x32xf32> {{.*}}, %[[B:.*]]: tensor<96xf32> {{.*}}, %[[X:.*]]: tensor<4x32xf32>
// CHECK: %[[WQ:.*]] = weft.slice %[[W]] {limits = array<i64: 32, 32>, starts = array<i64: 0, 0>
// CHECK: %[[MQ:.*]] = weft.matmul %[[X]], %[[WQ]] {transpose_rhs = true} : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
// CHECK: %[[BQ:.*]] = weft.slice %[[B]] {limits = array<i64: 32>, starts = array<i64: 0>
// CHECK: %[[Q:.*]] = weft.add %[[BQ]], %[[MQ]]
// CHECK: weft.slice %[[W]] {limits = array<i64: 64, 32>, starts = array<i64: 32, 0>
// CHECK: weft.slice %[[W]] {limits = array<i64: 96, 32>, starts = array<i64: 64, 0>
// CHECK-NOT: tensor<4x96xf32>
// CHECK: return %[[Q]],
func.func @qkv(%w: tensor<96x32xf32> {weft.param = "c_attn.weight"},
               %b: tensor<96xf32> {weft.param = "c_attn.bias"},
               %x: tensor<4x32xf32> {weft.input = "x"})
    -> (tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>) {
  %m = weft.matmul %x, %w {transpose_rhs = true}
      : (tensor<4x32xf32>, tensor<96x32xf32>) -> tensor<4x96xf32>
  %a = weft.add %b, %m : (tensor<96xf32>, tensor<4x96xf32>) -> tensor<4x96xf32>
  %q = weft.slice %a {starts = array<i64: 0, 0>, limits = array<i64: 4, 32>, strides = array<i64: 1, 1>} : (tensor<4x96xf32>) -> tensor<4x32xf32>
  %k = weft.slice %a {starts = array<i64: 0, 32>, limits = array<i64: 4, 64>, strides = array<i64: 1, 1>} : (tensor<4x96xf32>) -> tensor<4x32xf32>
  %v = weft.slice %a {starts = array<i64: 0, 64>, limits = array<i64: 4, 96>, strides = array<i64: 1, 1>} : (tensor<4x96xf32>) -> tensor<4x32xf32>
  return %q, %k, %v : tensor<4x32xf32>, tensor<4x32xf32>, tensor<4x32xf32>
}

// -----

// A weight already transposed (as the exporter writes x @ W^T), no bias:
// the slices are of its columns.
// CHECK-LABEL: func.func @transposed
// CHECK: %[[T:.*]] = weft.transpose
// CHECK: weft.slice %[[T]] {limits = array<i64: 32, 48>, starts = array<i64: 0, 0>
// CHECK: weft.matmul {{.*}} -> tensor<2x4x48xf32>
// CHECK: weft.slice %[[T]] {limits = array<i64: 32, 96>, starts = array<i64: 0, 48>
func.func @transposed(%w: tensor<96x32xf32> {weft.param = "w"},
                      %x: tensor<2x4x32xf32> {weft.input = "x"})
    -> (tensor<2x4x48xf32>, tensor<2x4x48xf32>) {
  %t = weft.transpose %w {permutation = array<i64: 1, 0>} : (tensor<96x32xf32>) -> tensor<32x96xf32>
  %m = weft.matmul %x, %t : (tensor<2x4x32xf32>, tensor<32x96xf32>) -> tensor<2x4x96xf32>
  %a = weft.slice %m {starts = array<i64: 0, 0, 0>, limits = array<i64: 2, 4, 48>, strides = array<i64: 1, 1, 1>} : (tensor<2x4x96xf32>) -> tensor<2x4x48xf32>
  %b = weft.slice %m {starts = array<i64: 0, 0, 48>, limits = array<i64: 2, 4, 96>, strides = array<i64: 1, 1, 1>} : (tensor<2x4x96xf32>) -> tensor<2x4x48xf32>
  return %a, %b : tensor<2x4x48xf32>, tensor<2x4x48xf32>
}

// -----

// Left alone: a product also used whole, slices of unequal widths, a slice
// of another dimension.
// CHECK-LABEL: func.func @kept
// CHECK-COUNT-3: weft.matmul {{.*}} -> tensor<4x96xf32>
func.func @kept(%w: tensor<96x32xf32> {weft.param = "w"},
                %x: tensor<4x32xf32> {weft.input = "x"})
    -> (tensor<4x96xf32>, tensor<4x32xf32>, tensor<4x64xf32>, tensor<2x96xf32>) {
  %m = weft.matmul %x, %w {transpose_rhs = true} : (tensor<4x32xf32>, tensor<96x32xf32>) -> tensor<4x96xf32>
  %s = weft.slice %m {starts = array<i64: 0, 0>, limits = array<i64: 4, 32>, strides = array<i64: 1, 1>} : (tensor<4x96xf32>) -> tensor<4x32xf32>
  %n = weft.matmul %x, %w {transpose_rhs = true} : (tensor<4x32xf32>, tensor<96x32xf32>) -> tensor<4x96xf32>
  %u = weft.slice %n {starts = array<i64: 0, 32>, limits = array<i64: 4, 96>, strides = array<i64: 1, 1>} : (tensor<4x96xf32>) -> tensor<4x64xf32>
  %u2 = weft.slice %n {starts = array<i64: 0, 0>, limits = array<i64: 4, 32>, strides = array<i64: 1, 1>} : (tensor<4x96xf32>) -> tensor<4x32xf32>
  %o = weft.matmul %x, %w {transpose_rhs = true} : (tensor<4x32xf32>, tensor<96x32xf32>) -> tensor<4x96xf32>
  %r = weft.slice %o {starts = array<i64: 0, 0>, limits = array<i64: 2, 96>, strides = array<i64: 1, 1>} : (tensor<4x96xf32>) -> tensor<2x96xf32>
  return %m, %u2, %u, %r : tensor<4x96xf32>, tensor<4x32xf32>, tensor<4x64xf32>, tensor<2x96xf32>
}
