// RUN: weft-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(weft-split-fused-projections))' | FileCheck %s
// RUN: weft-opt %s -split-input-file --pass-pipeline='builtin.module(func.func(weft-split-fused-projections{given=c_attn.*}))' | FileCheck %s --check-prefix=GIVEN

// q, k and v sliced out of one projection: one matmul per slice. The
// weight and bias, read by the projection alone, are held as views
// [parts, rows, ...] that remember their stored shape; each part is a
// slice of the view.
// CHECK-LABEL: func.func @qkv
// CHECK-SAME: (%[[W:.*]]: tensor<3x32x32xf32> {weft.param = "c_attn.weight", weft.stored_shape = array<i64: 96, 32>}, %[[B:.*]]: tensor<3x32xf32> {weft.param = "c_attn.bias", weft.stored_shape = array<i64: 96>}, %[[X:.*]]: tensor<4x32xf32>
// CHECK: %[[SQ:.*]] = weft.slice %[[W]] {limits = array<i64: 1, 32, 32>, starts = array<i64: 0, 0, 0>
// CHECK: %[[WQ:.*]] = weft.reshape %[[SQ]] : tensor<1x32x32xf32> -> tensor<32x32xf32>
// CHECK: %[[MQ:.*]] = weft.matmul %[[X]], %[[WQ]] {transpose_rhs = true} : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
// CHECK: %[[SB:.*]] = weft.slice %[[B]] {limits = array<i64: 1, 32>, starts = array<i64: 0, 0>
// CHECK: %[[BQ:.*]] = weft.reshape %[[SB]] : tensor<1x32xf32> -> tensor<32xf32>
// CHECK: %[[Q:.*]] = weft.add %[[BQ]], %[[MQ]]
// CHECK: weft.slice %[[W]] {limits = array<i64: 2, 32, 32>, starts = array<i64: 1, 0, 0>
// CHECK: weft.slice %[[W]] {limits = array<i64: 3, 32, 32>, starts = array<i64: 2, 0, 0>
// CHECK-NOT: tensor<4x96xf32>
// CHECK: return %[[Q]],

// Laid out by hand (--shard c_attn.*=...): the parameters keep their
// shape, and each part is a slice of them.
// GIVEN-LABEL: func.func @qkv
// GIVEN-SAME: (%[[W:.*]]: tensor<96x32xf32> {weft.param = "c_attn.weight"}, %[[B:.*]]: tensor<96xf32> {weft.param = "c_attn.bias"}
// GIVEN: %[[WQ:.*]] = weft.slice %[[W]] {limits = array<i64: 32, 32>, starts = array<i64: 0, 0>
// GIVEN: weft.matmul {{.*}}, %[[WQ]] {transpose_rhs = true} : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
// GIVEN: weft.slice %[[B]] {limits = array<i64: 32>, starts = array<i64: 0>
// GIVEN: weft.slice %[[W]] {limits = array<i64: 64, 32>, starts = array<i64: 32, 0>
// GIVEN-NOT: stored_shape
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

// A weight transposed in the model (x @ W^T written as a transpose), no
// bias: the view splits W's rows, the parts' columns after the transpose.
// CHECK-LABEL: func.func @transposed
// GIVEN-LABEL: func.func @transposed
// CHECK-SAME: (%[[W:.*]]: tensor<2x48x32xf32> {weft.param = "w", weft.stored_shape = array<i64: 96, 32>}
// CHECK: %[[S:.*]] = weft.slice %[[W]] {limits = array<i64: 1, 48, 32>, starts = array<i64: 0, 0, 0>
// CHECK: %[[R:.*]] = weft.reshape %[[S]] : tensor<1x48x32xf32> -> tensor<48x32xf32>
// CHECK: %[[T:.*]] = weft.transpose %[[R]] {permutation = array<i64: 1, 0>} : (tensor<48x32xf32>) -> tensor<32x48xf32>
// CHECK: weft.matmul {{.*}}, %[[T]] : {{.*}} -> tensor<2x4x48xf32>
// CHECK: weft.slice %[[W]] {limits = array<i64: 2, 48, 32>, starts = array<i64: 1, 0, 0>
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

// -----

// A weight something else reads too (here returned): the parts are slices
// of it, and it keeps its shape.
// CHECK-LABEL: func.func @shared
// CHECK-SAME: (%[[W:.*]]: tensor<64x32xf32> {weft.param = "w"}
// CHECK: weft.slice %[[W]] {limits = array<i64: 32, 32>, starts = array<i64: 0, 0>
// CHECK-NOT: stored_shape
func.func @shared(%w: tensor<64x32xf32> {weft.param = "w"},
                  %x: tensor<4x32xf32> {weft.input = "x"})
    -> (tensor<4x32xf32>, tensor<4x32xf32>, tensor<64x32xf32>) {
  %m = weft.matmul %x, %w {transpose_rhs = true} : (tensor<4x32xf32>, tensor<64x32xf32>) -> tensor<4x64xf32>
  %a = weft.slice %m {starts = array<i64: 0, 0>, limits = array<i64: 4, 32>, strides = array<i64: 1, 1>} : (tensor<4x64xf32>) -> tensor<4x32xf32>
  %b = weft.slice %m {starts = array<i64: 0, 32>, limits = array<i64: 4, 64>, strides = array<i64: 1, 1>} : (tensor<4x64xf32>) -> tensor<4x32xf32>
  return %a, %b, %w : tensor<4x32xf32>, tensor<4x32xf32>, tensor<64x32xf32>
}
