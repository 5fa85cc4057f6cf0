// RUN: weft-opt %s -split-input-file --weft-apply-mesh="mesh=dp=2" --weft-propagate-shardings | FileCheck %s --check-prefix=PROP
// RUN: weft-opt %s -split-input-file --pass-pipeline='builtin.module(weft-parallel-pipeline{mesh=dp=2 bucket-mb=0})' | FileCheck %s --check-prefix=DP
// RUN: weft-opt %s -split-input-file --pass-pipeline='builtin.module(weft-parallel-pipeline{mesh=dp=2 zero=1 bucket-mb=0})' | FileCheck %s --check-prefix=ZERO1

// A linear layer's step: the batch split makes the weight gradient a
// pending sum over dp (its contraction runs over the batch) and the mean
// loss a scaled partial. Data parallel resolves it with an all-reduce;
// ZeRO-1 shards the optimizer's view: reduce-scatter, update on shards,
// all-gather the new weight.

func.func @train_step(%w: tensor<4x8xf32> {weft.param = "w"},
                      %m: tensor<4x8xf32> {weft.state = "momentum_buffer.w"},
                      %x: tensor<6x8xf32> {weft.input = "x"},
                      %t: tensor<6x4xf32> {weft.input = "target"})
    -> (tensor<4x8xf32> {weft.param = "w"},
        tensor<4x8xf32> {weft.state = "momentum_buffer.w"},
        tensor<f32> {weft.output = "loss"}) {
  %y = weft.matmul %x, %w {transpose_rhs = true}
      : (tensor<6x8xf32>, tensor<4x8xf32>) -> tensor<6x4xf32>
  %loss = weft.mse %y, %t : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<f32>
  %d = weft.sub %y, %t : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %g = weft.matmul %d, %x {transpose_lhs = true}
      : (tensor<6x4xf32>, tensor<6x8xf32>) -> tensor<4x8xf32>
  %m2 = weft.add %m, %g : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w2 = weft.sub %w, %m2 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %w2, %m2, %loss : tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>
}

// PROP-LABEL: func.func @train_step
// PROP-SAME: weft.param = "w", weft.sharding = #weft.sharding<[{}, {}]>
// PROP-SAME: weft.input = "x", weft.sharding = #weft.sharding<[{dp}, {}]>
// PROP: weft.matmul {{.*}}weft.shardings = [#weft.sharding<[{dp}, {}]>]
// PROP: weft.mse {{.*}}weft.shardings = [#weft.sharding<[], partial = [dp]>]
// PROP: weft.matmul {{.*}}weft.shardings = [#weft.sharding<[{}, {}], partial = [dp]>]

// DP-LABEL: func.func @train_step
// DP-SAME: %[[X:arg[0-9]+]]: tensor<3x8xf32> {weft.input = "x"
// DP: %[[Y:.*]] = weft.matmul %[[X]], {{.*}} -> tensor<3x4xf32>
// DP: %[[L:.*]] = weft.mse %[[Y]], {{.*}} -> tensor<f32>
// DP: %[[HALF:.*]] = weft.mul %[[L]], {{.*}} : (tensor<f32>, tensor<f32>) -> tensor<f32>
// DP: %[[LOSS:.*]] = weft.all_reduce %[[HALF]] {axes = ["dp"]} : tensor<f32>
// DP: %[[G:.*]] = weft.matmul {{.*}} -> tensor<4x8xf32>
// DP: %[[GS:.*]] = weft.all_reduce %[[G]] {axes = ["dp"]} : tensor<4x8xf32>
// DP: weft.add %{{.*}}, %[[GS]]
// DP: return {{.*}}, %[[LOSS]] : tensor<4x8xf32>, tensor<4x8xf32>, tensor<f32>

// ZERO1-LABEL: func.func @train_step
// ZERO1-SAME: %[[W:arg[0-9]+]]: tensor<4x8xf32> {weft.param = "w"
// ZERO1-SAME: %[[M:arg[0-9]+]]: tensor<2x8xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>, weft.state = "momentum_buffer.w"}
// ZERO1: %[[WS:.*]] = weft.shard_slice %[[W]] {axes = ["dp"], dim = 0 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
// ZERO1: %[[G:.*]] = weft.matmul {{.*}} -> tensor<4x8xf32>
// ZERO1: %[[GS:.*]] = weft.reduce_scatter %[[G]] {axes = ["dp"], dim = 0 : i64} : tensor<4x8xf32> -> tensor<2x8xf32>
// ZERO1: %[[M2:.*]] = weft.add %[[M]], %[[GS]] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// ZERO1: %[[W2:.*]] = weft.sub %[[WS]], %[[M2]]
// ZERO1: %[[WALL:.*]] = weft.all_gather %[[W2]] {axes = ["dp"], dim = 0 : i64} : tensor<2x8xf32> -> tensor<4x8xf32>
// ZERO1: return %[[WALL]], %[[M2]]
