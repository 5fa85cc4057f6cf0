// RUN: weft-opt %s --weft-propagate-shardings --weft-partition | FileCheck %s

// Megatron's vocabulary-parallel cross-entropy on a dp=2 x tp=2 mesh: the
// logits stay split over the classes; only one value per row crosses the
// tp ranks (the row maxima, gathered; the sums of exponentials and the
// label's logit, all-reduced). The mean over the rows, split over dp, is
// scaled to its share and all-reduced over dp. The labels' one-hot rows
// are computed whole and each rank keeps its classes; a scatter-add into a
// vocabulary-split table is computed whole and each rank keeps its rows.

module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%l: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>},
                        %y: tensor<4xi64> {weft.sharding = #weft.sharding<[{dp}]>},
                        %g: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<f32> {weft.sharding = #weft.sharding<[]>},
          tensor<4x8xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>},
          tensor<8x8xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %loss = weft.cross_entropy %l, %y : (tensor<4x8xf32>, tensor<4xi64>) -> tensor<f32>
    %h = weft.one_hot %y : tensor<4xi64> -> tensor<4x8xf32>
    %z = weft.constant dense<0.0> : tensor<8x8xf32>
    %s = weft.scatter_add %z, %y, %g {axis = 0 : i64} : (tensor<8x8xf32>, tensor<4xi64>, tensor<4x8xf32>) -> tensor<8x8xf32>
    return %loss, %h, %s : tensor<f32>, tensor<4x8xf32>, tensor<8x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[L:arg0]]: tensor<2x4xf32>
// CHECK-SAME: %[[Y:arg1]]: tensor<2xi64>
// CHECK-NOT: weft.cross_entropy
// CHECK: %[[M:.*]] = weft.reduce_max %[[L]] {axes = array<i64: 1>, keep_dims = true} : (tensor<2x4xf32>) -> tensor<2x1xf32>
// CHECK-NEXT: %[[MS:.*]] = weft.all_gather %[[M]] {axes = ["tp"], dim = 1 : i64} : tensor<2x1xf32> -> tensor<2x2xf32>
// CHECK-NEXT: %[[MAX:.*]] = weft.reduce_max %[[MS]]
// CHECK-NEXT: %[[D:.*]] = weft.sub %[[L]], %[[MAX]]
// CHECK-NEXT: %[[E:.*]] = weft.exp %[[D]]
// CHECK-NEXT: %[[PS:.*]] = weft.reduce_sum %[[E]]
// CHECK-NEXT: %[[S:.*]] = weft.all_reduce %[[PS]] {axes = ["tp"]} : tensor<2x1xf32>
// CHECK-NEXT: %[[LOG:.*]] = weft.log %[[S]]
// CHECK-NEXT: %[[LSE:.*]] = weft.add %[[LOG]], %[[MAX]]
// CHECK-NEXT: %[[OH:.*]] = weft.one_hot %[[Y]] : tensor<2xi64> -> tensor<2x8xf32>
// CHECK-NEXT: %[[MINE:.*]] = weft.shard_slice %[[OH]] {axes = ["tp"], dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x4xf32>
// CHECK-NEXT: %[[PICKS:.*]] = weft.mul %[[L]], %[[MINE]]
// CHECK-NEXT: %[[PP:.*]] = weft.reduce_sum %[[PICKS]]
// CHECK-NEXT: %[[P:.*]] = weft.all_reduce %[[PP]] {axes = ["tp"]} : tensor<2x1xf32>
// CHECK-NEXT: %[[LOSSES:.*]] = weft.sub %[[LSE]], %[[P]]
// CHECK-NEXT: %[[MEAN:.*]] = weft.reduce_mean %[[LOSSES]] {axes = array<i64: 0, 1>} : (tensor<2x1xf32>) -> tensor<f32>
// CHECK-NEXT: %[[HALF:.*]] = weft.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[SHARE:.*]] = weft.mul %[[MEAN]], %[[HALF]]
// CHECK-NEXT: %[[LOSS:.*]] = weft.all_reduce %[[SHARE]] {axes = ["dp"]} : tensor<f32>
// CHECK: %[[H:.*]] = weft.shard_slice {{.*}} {axes = ["tp"], dim = 1 : i64} : tensor<2x8xf32> -> tensor<2x4xf32>
// CHECK: weft.scatter_add {{.*}} -> tensor<8x8xf32>
// CHECK: %[[T:.*]] = weft.shard_slice {{.*}} {axes = ["tp"], dim = 0 : i64} : tensor<8x8xf32> -> tensor<4x8xf32>
// CHECK: return %[[LOSS]], %[[H]], %[[T]] : tensor<f32>, tensor<2x4xf32>, tensor<4x8xf32>
