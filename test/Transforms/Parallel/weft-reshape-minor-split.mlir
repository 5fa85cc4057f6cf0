// RUN: weft-opt %s --weft-apply-mesh="mesh=dp=2" --weft-propagate-shardings | FileCheck %s --check-prefix=PROP
// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-parallel-pipeline{mesh=dp=2 bucket-mb=0})' | FileCheck %s --check-prefix=DP

// A reshape whose split factor is the minor part of a merged dimension:
// [T*B, C] -> [T, B, C], then a transpose to [B, T, C] added to the batch
// input (nn.MultiheadAttention's output projection, which runs on
// [T*B, C], reshaped back to batch-first). The add wants B split, so the
// reshape's result is asked for [{}, {dp}, {}]; its operand cannot hold
// that (B is the minor factor of T*B, not a block of it). The reshape used
// to take the split anyway and be given a whole 6x3 operand with a 3x1x3
// result ("cannot reshape 6x3 (18 elements) to 3x1x3"); a factor that is
// minor in any of an op's values is not split, so the reshape runs whole
// and its result is sliced.

func.func @train_step(%p: tensor<6x3xf32> {weft.param = "p"},
                      %x: tensor<2x3x3xf32> {weft.input = "x"})
    -> (tensor<f32> {weft.output = "loss"}) {
  %r = weft.reshape %p : tensor<6x3xf32> -> tensor<3x2x3xf32>
  %t = weft.transpose %r {permutation = array<i64: 1, 0, 2>}
      : (tensor<3x2x3xf32>) -> tensor<2x3x3xf32>
  %s = weft.add %t, %x
      : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<2x3x3xf32>
  %l = weft.reduce_mean %s {axes = array<i64: 0, 1, 2>, keep_dims = false}
      : (tensor<2x3x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// PROP-LABEL: func.func @train_step
// PROP: weft.transpose {{.*}}weft.shardings = [#weft.sharding<[{dp}, {}, {}]>]

// DP-LABEL: func.func @train_step
// DP-SAME: %[[P:arg[0-9]+]]: tensor<6x3xf32>
// DP-SAME: %[[X:arg[0-9]+]]: tensor<1x3x3xf32>
// DP: %[[R:.*]] = weft.reshape %[[P]] : tensor<6x3xf32> -> tensor<3x2x3xf32>
// DP: %[[S:.*]] = weft.shard_slice %[[R]] {axes = ["dp"], dim = 1 : i64} : tensor<3x2x3xf32> -> tensor<3x1x3xf32>
// DP: %[[T:.*]] = weft.transpose %[[S]] {{.*}} -> tensor<1x3x3xf32>
// DP: weft.add %[[T]], %[[X]] : (tensor<1x3x3xf32>, tensor<1x3x3xf32>) -> tensor<1x3x3xf32>
// DP: weft.all_reduce
