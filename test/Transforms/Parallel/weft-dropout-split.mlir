// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-parallel-pipeline{mesh=dp=2 bucket-mb=0})' | FileCheck %s

// A dropout over a batch split along its first dimension runs on each
// rank's rows: its mask hashes each element's index in the whole tensor,
// and the rank's rows are the run of indices that starts at its
// coordinate times its block (2 rows of 3 here): no gather, no slice.

func.func @train_step(%x: tensor<4x3xf32> {weft.input = "x"},
                      %seed: tensor<i64> {weft.input = "seed"})
    -> (tensor<f32> {weft.output = "loss"}) {
  %d = weft.dropout %x, %seed {ratio = 5.000000e-01 : f64, op_id = 1 : i64}
      : tensor<4x3xf32>, tensor<i64>
  %l = weft.reduce_mean %d {axes = array<i64: 0, 1>, keep_dims = false}
      : (tensor<4x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x3xf32>
// CHECK-NOT: weft.all_gather
// CHECK-DAG: %[[I:.*]] = weft.axis_index {axes = ["dp"]} : tensor<i64>
// CHECK-DAG: %[[B:.*]] = weft.constant dense<6> : tensor<i64>
// CHECK: %[[OFF:.*]] = weft.mul %[[I]], %[[B]]
// CHECK: weft.dropout %[[X]], %{{.*}} offset(%[[OFF]] : tensor<i64>) {{.*}} : tensor<2x3xf32>, tensor<i64>
// CHECK-NOT: weft.shard_slice
// CHECK: weft.all_reduce

