// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-parallel-pipeline{mesh=dp=2 bucket-mb=0})' | FileCheck %s

// Heads out of a sequence-first projection: [T, B, C] -> [T, B*H, hd] (4
// heads of 2) groups {B, C} with {B*H, hd}, neither side a single dim. The
// reshape's rule refines the group into factors B, H, hd (major first), so
// B is the major factor of both B and B*H and the batch split passes
// through: the reshape runs on each rank's half, with no gather around it.

func.func @train_step(%x: tensor<4x3x8xf32> {weft.input = "x"})
    -> (tensor<f32> {weft.output = "loss"}) {
  %t = weft.transpose %x {permutation = array<i64: 1, 0, 2>}
      : (tensor<4x3x8xf32>) -> tensor<3x4x8xf32>
  %r = weft.reshape %t : tensor<3x4x8xf32> -> tensor<3x16x2xf32>
  %e = weft.exp %r : tensor<3x16x2xf32>
  %l = weft.reduce_mean %e {axes = array<i64: 0, 1, 2>, keep_dims = false}
      : (tensor<3x16x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: tensor<2x3x8xf32>
// CHECK-NOT: weft.all_gather
// CHECK: weft.reshape %{{.*}} : tensor<3x2x8xf32> -> tensor<3x8x2xf32>
// CHECK-NOT: weft.all_gather
// CHECK-NOT: weft.shard_slice
// CHECK: weft.all_reduce
