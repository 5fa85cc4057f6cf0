// RUN: weft-opt %s -split-input-file -verify-diagnostics --weft-propagate-shardings --weft-partition | FileCheck %s

// Reshards of a tensor<8x4xf32> on the mesh dp=2 x tp=2: for every ordered
// pair of layouts (A, B) of a 2-D tensor, an argument laid out as A goes
// through weft.shard_as to B and is returned as B, so the step is exactly
// the reshard from A to B. Per dimension, the axes that are not a prefix of
// what B wants are gathered (minor first), then B's missing axes are sliced
// (major first); an axis one dimension drops that another wants next moves
// there with one all_to_all instead of a gather and a slice. A pending sum
// is resolved first, by a reduce_scatter over an axis when it is the next
// split B wants of a dimension, else by an all_reduce. Every sequence below
// was checked by simulating its data movement on the 4 ranks against B's
// blocks of the global tensor.
//
// NOTE marks a reshard that is correct but moves more data, or makes more
// collectives, than needed.

// ===== From [{}, {}]. Replicated: every reshard is local slicing, major axis
// first.

// [{}, {}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: return %arg0 : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{dp}, {}]. Rows split over dp.

// [{dp}, {}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: return %arg0 : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{tp}, {}]. Rows split over tp.

// [{tp}, {}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: return %arg0 : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{}, {dp}]. Columns split over dp.

// [{}, {dp}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: return %arg0 : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{}, {tp}]. Columns split over tp.

// [{}, {tp}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: return %arg0 : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x2xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.shard_slice %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{dp}, {tp}]. Rows over dp, columns over tp.

// [{dp}, {tp}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {tp}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<4x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {tp}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {tp}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {tp}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {tp}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: return %arg0 : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {tp}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {tp}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<4x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {tp}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {tp}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[D:.*]] = weft.shard_slice %[[C]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[D]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {tp}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{tp}, {dp}]. Rows over tp, columns over dp.

// [{tp}, {dp}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {dp}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {dp}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<4x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {dp}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {dp}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {dp}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {dp}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: return %arg0 : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {dp}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {dp}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<4x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {dp}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp}, {dp}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x2xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[D:.*]] = weft.shard_slice %[[C]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[D]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{dp, tp}, {}]. Rows split over both axes, dp major: the gathers
// undo tp, then dp (one all_gather over [dp, tp] would move the same data in
// one collective).

// [{dp, tp}, {}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp, tp}, {}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp, tp}, {}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp, tp}, {}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp, tp}, {}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp, tp}, {}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp, tp}, {}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp, tp}, {}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: return %arg0 : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp, tp}, {}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[D:.*]] = weft.shard_slice %[[C]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[D]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp, tp}, {}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp, tp}, {}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{tp, dp}, {}]. Rows split over both axes, tp major: the gathers
// undo dp, then tp.

// [{tp, dp}, {}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp, dp}, {}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp, dp}, {}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp, dp}, {}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<4x2xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp, dp}, {}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp, dp}, {}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp, dp}, {}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp, dp}, {}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[D:.*]] = weft.shard_slice %[[C]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[D]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp, dp}, {}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: return %arg0 : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp, dp}, {}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<2x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{tp, dp}, {}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<2x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{}, {dp, tp}]. Columns split over both axes, dp major.

// [{}, {dp, tp}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp, tp}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp, tp}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x1xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<4x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp, tp}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp, tp}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp, tp}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp, tp}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x1xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp, tp}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp, tp}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x1xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<4x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp, tp}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: return %arg0 : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {dp, tp}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[D:.*]] = weft.shard_slice %[[C]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[D]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{}, {tp, dp}]. Columns split over both axes, tp major.

// [{}, {tp, dp}] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp, dp}] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x1xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<4x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp, dp}] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp, dp}] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp, dp}] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp, dp}] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x1xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp, dp}] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp, dp}] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_to_all %arg0 {axes = ["dp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x1xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<4x2xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp, dp}] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp, dp}] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x1xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[D:.*]] = weft.shard_slice %[[C]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[D]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {tp, dp}] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x1xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: return %arg0 : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{}, {}], partial = [tp]. A sum pending over tp: a reduce_scatter
// over tp where B splits a dimension by tp first, else an all_reduce; then
// slices.

// [{}, {}], partial = [tp] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<8x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [tp] -> [{dp}, {}]
// NOTE: all-reduces 8x4 then slices; slicing first would all-reduce 4x4.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [tp] -> [{tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [tp] -> [{}, {dp}]
// NOTE: all-reduces 8x4 then slices; slicing first would all-reduce 8x2.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [tp] -> [{}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [tp] -> [{dp}, {tp}]
// NOTE: reduce-scatters 8x4; slicing rows over dp first would reduce-scatter
//   4x4.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [tp] -> [{tp}, {dp}]
// NOTE: reduce-scatters 8x4; slicing columns over dp first would reduce-
//   scatter 8x2.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [tp] -> [{dp, tp}, {}]
// NOTE: all_reduce and two slices; a slice over dp then a reduce_scatter over
//   tp would do (a quarter of the traffic).
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [tp] -> [{tp, dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [tp] -> [{}, {dp, tp}]
// NOTE: all_reduce and two slices; a slice over dp then a reduce_scatter over
//   tp would do (a quarter of the traffic).
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [tp] -> [{}, {tp, dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.shard_slice %[[A]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{dp}, {}], partial = [tp]. Rows over dp, a sum pending over tp:
// reduce_scatter where B splits the rows further by tp (or the columns by tp),
// else all_reduce, gather, slice.

// [{dp}, {}], partial = [tp] -> [{}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}], partial = [tp] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<4x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}], partial = [tp] -> [{tp}, {}]
// NOTE: gathering dp first (the terms), then a reduce_scatter over tp would
//   need no all_reduce and no slice.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}], partial = [tp] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}], partial = [tp] -> [{}, {tp}]
// NOTE: gathering dp first, then a reduce_scatter over tp on dim 1 would need
//   no all_reduce and no slice.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}], partial = [tp] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[A]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}], partial = [tp] -> [{tp}, {dp}]
// NOTE: an all_to_all over dp (the terms), then a reduce_scatter over tp on
//   dim 0 would do.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}], partial = [tp] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[A]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}], partial = [tp] -> [{tp, dp}, {}]
// NOTE: all_gather over dp, reduce_scatter over tp, slice over dp would do.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[D:.*]] = weft.shard_slice %[[C]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[D]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}], partial = [tp] -> [{}, {dp, tp}]
// NOTE: an all_to_all over dp (the terms), then a reduce_scatter over tp on
//   dim 1 would do.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_to_all %[[A]] {axes = ["dp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{dp}, {}], partial = [tp] -> [{}, {tp, dp}]
// NOTE: all_gather over dp, reduce_scatter over tp on dim 1, slice over dp
//   would do.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<4x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["tp"]} : tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_gather %[[A]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[D:.*]] = weft.shard_slice %[[C]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[D]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}], partial = [tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// ===== From [{}, {}], partial = [dp, tp]. A sum pending over both axes,
// resolved one axis at a time in the order of `partial`.

// [{}, {}], partial = [dp, tp] -> [{}, {}]
// NOTE: two all_reduces; one over [dp, tp] would do.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["dp"]} : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_reduce %[[A]] {axes = ["tp"]} : tensor<8x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [dp, tp] -> [{dp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_reduce %[[A]] {axes = ["tp"]} : tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [dp, tp] -> [{tp}, {}]
// NOTE: all-reduces 8x4 over dp first; reduce-scattering over tp first would
//   all-reduce 4x4.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["dp"]} : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.reduce_scatter %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [dp, tp] -> [{}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.all_reduce %[[A]] {axes = ["tp"]} : tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [dp, tp] -> [{}, {tp}]
// NOTE: all-reduces 8x4 over dp first; reduce-scattering over tp first would
//   all-reduce 8x2.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["dp"]} : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.reduce_scatter %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [dp, tp] -> [{dp}, {tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.reduce_scatter %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp}, {tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [dp, tp] -> [{tp}, {dp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<4x2xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.reduce_scatter %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<8x2xf32> -> tensor<4x2xf32>
// CHECK-NEXT: return %[[B]] : tensor<4x2xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp}, {dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [dp, tp] -> [{dp, tp}, {}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["dp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.reduce_scatter %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[B]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [dp, tp] -> [{tp, dp}, {}]
// NOTE: partial axes taken in the order [dp, tp]: a reduce_scatter over tp
//   then one over dp would do, no all_reduce.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<2x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["dp"]} : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.reduce_scatter %[[A]] {axes = ["tp"], dim = 0 : i64} : tensor<8x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<2x4xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp, dp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{tp, dp}, {}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [dp, tp] -> [{}, {dp, tp}]
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.reduce_scatter %arg0 {axes = ["dp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[B:.*]] = weft.reduce_scatter %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[B]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {dp, tp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {dp, tp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// [{}, {}], partial = [dp, tp] -> [{}, {tp, dp}]
// NOTE: partial axes taken in the order [dp, tp]: a reduce_scatter over tp
//   then one over dp would do, no all_reduce.
// CHECK-LABEL: func.func @train_step(%arg0: tensor<8x4xf32> {{.*}} -> (tensor<8x1xf32>
// CHECK-NEXT: %[[A:.*]] = weft.all_reduce %arg0 {axes = ["dp"]} : tensor<8x4xf32>
// CHECK-NEXT: %[[B:.*]] = weft.reduce_scatter %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<8x4xf32> -> tensor<8x2xf32>
// CHECK-NEXT: %[[C:.*]] = weft.shard_slice %[[B]] {axes = ["dp"], dim = 1 : i64} : tensor<8x2xf32> -> tensor<8x1xf32>
// CHECK-NEXT: return %[[C]] : tensor<8x1xf32>
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {}], partial = [dp, tp]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp, dp}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{}, {tp, dp}]>} : tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// -----

// A layout that does not divide: 6 rows cannot be split over dp and tp
// (4 ranks). The error names the dimension.
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  // expected-error@+1 {{a 'tensor<6x4xf32>' cannot be laid out as #weft.sharding<[{dp, tp}, {}]> on #weft.mesh<dp = 2, tp = 2>: dimension 0 (6) does not divide by 4 ranks}}
  func.func @train_step(%x: tensor<6x4xf32> {weft.sharding = #weft.sharding<[{}, {}]>})
      -> (tensor<6x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>}) {
    %y = weft.shard_as %x {sharding = #weft.sharding<[{dp, tp}, {}]>} : tensor<6x4xf32>
    return %y : tensor<6x4xf32>
  }
}
