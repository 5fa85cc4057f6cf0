// RUN: weft-opt %s --weft-propagate-shardings --weft-partition | FileCheck %s --check-prefix=SEQ

// Split along a later dimension (the sequence, under sequence
// parallelism, on dp=2 x tp=2): the block indexes the mask with the whole
// tensor's strides (global_shape) from its first element's index there:
// 1 (dp block of rows) * 2 rows * 8 + 1 (tp block of columns) * 4.
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>},
                        %seed: tensor<i64> {weft.sharding = #weft.sharding<[]>})
      -> (tensor<4x8xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %d = weft.dropout %x, %seed {ratio = 5.000000e-01 : f64, op_id = 1 : i64}
        : tensor<4x8xf32>, tensor<i64>
    return %d : tensor<4x8xf32>
  }
}

// SEQ-LABEL: func.func @train_step
// SEQ-SAME: %[[X:arg[0-9]+]]: tensor<2x4xf32>
// SEQ-NOT: weft.all_gather
// SEQ-DAG: %[[R:.*]] = weft.axis_index {axes = ["dp"]} : tensor<i64>
// SEQ-DAG: %[[RS:.*]] = weft.constant dense<16> : tensor<i64>
// SEQ-DAG: %[[C:.*]] = weft.axis_index {axes = ["tp"]} : tensor<i64>
// SEQ-DAG: %[[CS:.*]] = weft.constant dense<4> : tensor<i64>
// SEQ-DAG: %[[ROWS:.*]] = weft.mul %[[R]], %[[RS]]
// SEQ-DAG: %[[COLS:.*]] = weft.mul %[[C]], %[[CS]]
// SEQ: %[[OFF:.*]] = weft.add %[[ROWS]], %[[COLS]]
// SEQ: weft.dropout %[[X]], %{{.*}} offset(%[[OFF]] : tensor<i64>) {global_shape = array<i64: 4, 8>, {{.*}}} : tensor<2x4xf32>, tensor<i64>
// SEQ-NOT: weft.shard_slice
