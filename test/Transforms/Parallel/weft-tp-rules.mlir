// RUN: weft-opt %s -split-input-file --weft-propagate-shardings --weft-partition | FileCheck %s

// Tensor-parallel splits through the sharding rule of every op family
// (docs/parallel.md): each case is a small step whose argument shardings
// force a split, and checks the per-rank types and the collectives the
// partitioner inserts, or their absence (CHECK-NEXT from the signature to
// the return). Where a rule refuses a split (an axis the op reads whole, a
// size that does not divide), the operand is gathered first.

// Elementwise with broadcasting operands: the bias is split like the
// result's columns, the size-1 column of %c has no factor and stays whole.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>},
                        %b: tensor<8xf32> {weft.sharding = #weft.sharding<[{tp}]>},
                        %c: tensor<4x1xf32>)
      -> (tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    %z = weft.mul %y, %c : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %r = weft.relu %z : tensor<4x8xf32>
    return %r : tensor<4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<4x4xf32>
// CHECK-SAME: %[[B:arg[0-9]+]]: tensor<4xf32>
// CHECK-SAME: %[[C:arg[0-9]+]]: tensor<4x1xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.add %[[X]], %[[B]] : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[Z:.*]] = weft.mul %[[Y]], %[[C]] : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: %[[R:.*]] = weft.relu %[[Z]] : tensor<4x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4x4xf32>

// -----

// A replicated operand next to a split one is sliced: no communication.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32>,
                        %b: tensor<8xf32> {weft.sharding = #weft.sharding<[{tp}]>})
      -> (tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.add %x, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    return %y : tensor<4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<4x8xf32>
// CHECK-SAME: %[[B:arg[0-9]+]]: tensor<4xf32>
// CHECK-NEXT: %[[XS:.*]] = weft.shard_slice %[[X]] {axes = ["tp"], dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.add %[[XS]], %[[B]] : (tensor<4x4xf32>, tensor<4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[Y]] : tensor<4x4xf32>

// -----

// Operands split along different dimensions: the result follows the first;
// the second's split moves to match (an all-to-all).
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>},
                        %y: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<4x8xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %z = weft.sub %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    return %z : tensor<4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x8xf32>
// CHECK-SAME: %[[Y:arg[0-9]+]]: tensor<4x4xf32>
// CHECK-NEXT: %[[S:.*]] = weft.all_to_all %[[Y]] {axes = ["tp"], concat_dim = 1 : i64, split_dim = 0 : i64} : tensor<4x4xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[Z:.*]] = weft.sub %[[X]], %[[S]] : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: return %[[Z]]

// -----

// cmp, where and cast are elementwise: the i1 mask and the i64 result are
// split like the input, a scalar operand broadcasts.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>},
                        %zero: tensor<f32>)
      -> (tensor<4x8xi64> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %c = weft.cmp gt, %x, %zero : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xi1>
    %w = weft.where %c, %x, %zero : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
    %i = weft.cast %w : tensor<4x8xf32> -> tensor<4x8xi64>
    return %i : tensor<4x8xi64>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x8xf32>
// CHECK-SAME: %[[ZERO:arg[0-9]+]]: tensor<f32>
// CHECK-NEXT: %[[C:.*]] = weft.cmp gt, %[[X]], %[[ZERO]] : (tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xi1>
// CHECK-NEXT: %[[W:.*]] = weft.where %[[C]], %[[X]], %[[ZERO]] : (tensor<2x8xi1>, tensor<2x8xf32>, tensor<f32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[I:.*]] = weft.cast %[[W]] : tensor<2x8xf32> -> tensor<2x8xi64>
// CHECK-NEXT: return %[[I]] : tensor<2x8xi64>

// -----

// matmul, m split: each rank multiplies its rows by the whole weight.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>},
                        %w: tensor<4x6xf32> {weft.param = "w"})
      -> (tensor<8x6xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.matmul %x, %w : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    return %y : tensor<8x6xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<4x4xf32>
// CHECK-SAME: %[[W:arg[0-9]+]]: tensor<4x6xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.matmul %[[X]], %[[W]] : (tensor<4x4xf32>, tensor<4x6xf32>) -> tensor<4x6xf32>
// CHECK-NEXT: return %[[Y]] : tensor<4x6xf32>

// -----

// matmul, n split (column parallel): an nn.Linear weight [out, in] split
// along its rows splits the result's columns.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32>,
                        %w: tensor<6x4xf32> {weft.param = "w", weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x6xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %y = weft.matmul %x, %w {transpose_rhs = true} : (tensor<8x4xf32>, tensor<6x4xf32>) -> tensor<8x6xf32>
    return %y : tensor<8x6xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<8x4xf32>
// CHECK-SAME: %[[W:arg[0-9]+]]: tensor<3x4xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.matmul %[[X]], %[[W]] {transpose_rhs = true} : (tensor<8x4xf32>, tensor<3x4xf32>) -> tensor<8x3xf32>
// CHECK-NEXT: return %[[Y]] : tensor<8x3xf32>

// -----

// matmul, k split (row parallel): each rank holds a term of the product,
// partial over tp; a replicated result is all-reduced.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>},
                        %w: tensor<4x6xf32> {weft.param = "w", weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> tensor<8x6xf32> {
    %y = weft.matmul %x, %w : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    return %y : tensor<8x6xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<8x2xf32>
// CHECK-SAME: %[[W:arg[0-9]+]]: tensor<2x6xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.matmul %[[X]], %[[W]] : (tensor<8x2xf32>, tensor<2x6xf32>) -> tensor<8x6xf32>
// CHECK-NEXT: %[[S:.*]] = weft.all_reduce %[[Y]] {axes = ["tp"]} : tensor<8x6xf32>
// CHECK-NEXT: return %[[S]] : tensor<8x6xf32>

// -----

// matmul, k split, the result wanted split by rows: a reduce_scatter.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>},
                        %w: tensor<4x6xf32> {weft.param = "w", weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x6xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %y = weft.matmul %x, %w : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    return %y : tensor<8x6xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-NEXT: %[[Y:.*]] = weft.matmul {{.*}} -> tensor<8x6xf32>
// CHECK-NEXT: %[[S:.*]] = weft.reduce_scatter %[[Y]] {axes = ["tp"], dim = 0 : i64} : tensor<8x6xf32> -> tensor<4x6xf32>
// CHECK-NEXT: return %[[S]] : tensor<4x6xf32>

// -----

// Megatron's MLP: column-parallel, gelu on the split hidden layer,
// row-parallel; one all_reduce for the block.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32>,
                        %w1: tensor<4x6xf32> {weft.param = "w1", weft.sharding = #weft.sharding<[{}, {tp}]>},
                        %w2: tensor<6x4xf32> {weft.param = "w2", weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> tensor<8x4xf32> {
    %h = weft.matmul %x, %w1 : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    %a = weft.gelu %h : tensor<8x6xf32>
    %y = weft.matmul %a, %w2 : (tensor<8x6xf32>, tensor<6x4xf32>) -> tensor<8x4xf32>
    return %y : tensor<8x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<8x4xf32>
// CHECK-SAME: %[[W1:arg[0-9]+]]: tensor<4x3xf32>
// CHECK-SAME: %[[W2:arg[0-9]+]]: tensor<3x4xf32>
// CHECK-NEXT: %[[H:.*]] = weft.matmul %[[X]], %[[W1]] : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
// CHECK-NEXT: %[[A:.*]] = weft.gelu %[[H]] : tensor<8x3xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.matmul %[[A]], %[[W2]] : (tensor<8x3xf32>, tensor<3x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[S:.*]] = weft.all_reduce %[[Y]] {axes = ["tp"]} : tensor<8x4xf32>
// CHECK-NEXT: return %[[S]]

// -----

// A row-parallel result plus a replicated bias: the sum is resolved before
// the add (else every rank would add the bias to its term).
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>},
                        %w: tensor<4x6xf32> {weft.param = "w", weft.sharding = #weft.sharding<[{tp}, {}]>},
                        %b: tensor<6xf32> {weft.param = "b"})
      -> tensor<8x6xf32> {
    %y = weft.matmul %x, %w : (tensor<8x4xf32>, tensor<4x6xf32>) -> tensor<8x6xf32>
    %z = weft.add %y, %b : (tensor<8x6xf32>, tensor<6xf32>) -> tensor<8x6xf32>
    return %z : tensor<8x6xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[B:arg[0-9]+]]: tensor<6xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.matmul
// CHECK-NEXT: %[[S:.*]] = weft.all_reduce %[[Y]] {axes = ["tp"]} : tensor<8x6xf32>
// CHECK-NEXT: %[[Z:.*]] = weft.add %[[S]], %[[B]]
// CHECK-NEXT: return %[[Z]]

// -----

// matmul with batch dims (attention scores): batch over dp, heads over tp.
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%q: tensor<2x4x8x2xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}, {}, {}]>},
                        %k: tensor<2x4x8x2xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}, {}, {}]>})
      -> (tensor<2x4x8x8xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}, {}, {}]>}) {
    %s = weft.matmul %q, %k {transpose_rhs = true} : (tensor<2x4x8x2xf32>, tensor<2x4x8x2xf32>) -> tensor<2x4x8x8xf32>
    return %s : tensor<2x4x8x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[Q:arg[0-9]+]]: tensor<1x2x8x2xf32>
// CHECK-SAME: %[[K:arg[0-9]+]]: tensor<1x2x8x2xf32>
// CHECK-NEXT: %[[S:.*]] = weft.matmul %[[Q]], %[[K]] {transpose_rhs = true} : (tensor<1x2x8x2xf32>, tensor<1x2x8x2xf32>) -> tensor<1x2x8x8xf32>
// CHECK-NEXT: return %[[S]] : tensor<1x2x8x8xf32>

// -----

// matmul broadcasting a 2-D weight over a batch: batch over dp, n over tp.
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<2x8x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}, {}]>},
                        %w: tensor<4x6xf32> {weft.param = "w", weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<2x8x6xf32> {weft.sharding = #weft.sharding<[{dp}, {}, {tp}]>}) {
    %y = weft.matmul %x, %w : (tensor<2x8x4xf32>, tensor<4x6xf32>) -> tensor<2x8x6xf32>
    return %y : tensor<2x8x6xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<1x8x4xf32>
// CHECK-SAME: %[[W:arg[0-9]+]]: tensor<4x3xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.matmul %[[X]], %[[W]] : (tensor<1x8x4xf32>, tensor<4x3xf32>) -> tensor<1x8x3xf32>
// CHECK-NEXT: return %[[Y]] : tensor<1x8x3xf32>

// -----

// reduce_sum over the split axis leaves a sum pending over tp (all-reduced
// for a replicated result); over the other axis the split stays.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<4xf32>, tensor<8xf32> {weft.sharding = #weft.sharding<[{tp}]>}) {
    %s = weft.reduce_sum %x {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
    %u = weft.reduce_sum %x {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
    return %s, %u : tensor<4xf32>, tensor<8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<4x4xf32>
// CHECK-NEXT: %[[S:.*]] = weft.reduce_sum %[[X]] {axes = array<i64: 1>} : (tensor<4x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[SR:.*]] = weft.all_reduce %[[S]] {axes = ["tp"]} : tensor<4xf32>
// CHECK-NEXT: %[[U:.*]] = weft.reduce_sum %[[X]] {axes = array<i64: 0>} : (tensor<4x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[SR]], %[[U]] : tensor<4xf32>, tensor<4xf32>

// -----

// reduce_mean over the split axis: the mean of the rank's block times its
// share (1/2), then summed over tp.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<4x1xf32>, tensor<1x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %s = weft.reduce_mean %x {axes = array<i64: 1>, keep_dims = true} : (tensor<4x8xf32>) -> tensor<4x1xf32>
    %u = weft.reduce_mean %x {axes = array<i64: 0>, keep_dims = true} : (tensor<4x8xf32>) -> tensor<1x8xf32>
    return %s, %u : tensor<4x1xf32>, tensor<1x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<4x4xf32>
// CHECK-NEXT: %[[S:.*]] = weft.reduce_mean %[[X]] {axes = array<i64: 1>, keep_dims = true} : (tensor<4x4xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[HALF:.*]] = weft.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[SH:.*]] = weft.mul %[[S]], %[[HALF]]
// CHECK-NEXT: %[[SR:.*]] = weft.all_reduce %[[SH]] {axes = ["tp"]} : tensor<4x1xf32>
// CHECK-NEXT: %[[U:.*]] = weft.reduce_mean %[[X]] {axes = array<i64: 0>, keep_dims = true} : (tensor<4x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT: return %[[SR]], %[[U]] : tensor<4x1xf32>, tensor<1x4xf32>

// -----

// reduce_max reads a reduced axis whole: the split axis is gathered first;
// over the other axis the split stays.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<4xf32>, tensor<8xf32> {weft.sharding = #weft.sharding<[{tp}]>}) {
    %s = weft.reduce_max %x {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
    %u = weft.reduce_max %x {axes = array<i64: 0>} : (tensor<4x8xf32>) -> tensor<8xf32>
    return %s, %u : tensor<4xf32>, tensor<8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<4x4xf32>
// CHECK-NEXT: %[[G:.*]] = weft.all_gather %[[X]] {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[S:.*]] = weft.reduce_max %[[G]] {axes = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[U:.*]] = weft.reduce_max %[[X]] {axes = array<i64: 0>} : (tensor<4x4xf32>) -> tensor<4xf32>
// CHECK-NEXT: return %[[S]], %[[U]] : tensor<4xf32>, tensor<4xf32>

// -----

// softmax over an unsplit axis runs on each rank's rows.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<4x8xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %s = weft.softmax %x {axis = 1 : i64} : tensor<4x8xf32>
    return %s : tensor<4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x8xf32>
// CHECK-NEXT: %[[S:.*]] = weft.softmax %[[X]] {axis = 1 : i64} : tensor<2x8xf32>
// CHECK-NEXT: return %[[S]] : tensor<2x8xf32>

// -----

// softmax over the split axis (a vocabulary-parallel head): no gather;
// the row maxima are gathered (one value per row and rank) and the sums
// of exponentials all-reduced.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %s = weft.softmax %x {axis = 1 : i64} : tensor<4x8xf32>
    return %s : tensor<4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<4x4xf32>
// CHECK-NEXT: %[[M:.*]] = weft.reduce_max %[[X]] {axes = array<i64: 1>, keep_dims = true} : (tensor<4x4xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[MS:.*]] = weft.all_gather %[[M]] {axes = ["tp"], dim = 1 : i64} : tensor<4x1xf32> -> tensor<4x2xf32>
// CHECK-NEXT: %[[MAX:.*]] = weft.reduce_max %[[MS]] {axes = array<i64: 1>, keep_dims = true} : (tensor<4x2xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[D:.*]] = weft.sub %[[X]], %[[MAX]]
// CHECK-NEXT: %[[E:.*]] = weft.exp %[[D]] : tensor<4x4xf32>
// CHECK-NEXT: %[[L:.*]] = weft.reduce_sum %[[E]] {axes = array<i64: 1>, keep_dims = true} : (tensor<4x4xf32>) -> tensor<4x1xf32>
// CHECK-NEXT: %[[SUM:.*]] = weft.all_reduce %[[L]] {axes = ["tp"]} : tensor<4x1xf32>
// CHECK-NEXT: %[[R:.*]] = weft.div %[[E]], %[[SUM]] : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4x4xf32>

// -----

// log_softmax along the rows runs on each rank's rows; the next one, along
// the columns, is split over its axis: the column maxima and sums are
// combined across ranks; then the layout switches to split columns.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %s = weft.log_softmax %x {axis = 1 : i64} : tensor<4x8xf32>
    %t = weft.log_softmax %s {axis = 0 : i64} : tensor<4x8xf32>
    return %t : tensor<4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x8xf32>
// CHECK-NEXT: %[[S:.*]] = weft.log_softmax %[[X]] {axis = 1 : i64} : tensor<2x8xf32>
// CHECK-NEXT: weft.reduce_max %[[S]] {axes = array<i64: 0>, keep_dims = true} : (tensor<2x8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT: weft.all_gather {{.*}} {axes = ["tp"], dim = 0 : i64} : tensor<1x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT: %[[MAX:.*]] = weft.reduce_max
// CHECK-NEXT: weft.sub %[[S]], %[[MAX]]
// CHECK-NEXT: weft.exp
// CHECK-NEXT: weft.reduce_sum
// CHECK-NEXT: %[[SUM:.*]] = weft.all_reduce {{.*}} {axes = ["tp"]} : tensor<1x8xf32>
// CHECK-NEXT: %[[LOG:.*]] = weft.log %[[SUM]]
// CHECK-NEXT: %[[LSE:.*]] = weft.add %[[LOG]], %[[MAX]]
// CHECK-NEXT: %[[T:.*]] = weft.sub %[[S]], %[[LSE]] : (tensor<2x8xf32>, tensor<1x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: %[[C:.*]] = weft.all_to_all %[[T]] {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<2x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT: return %[[C]] : tensor<4x4xf32>

// -----

// layer_norm over the hidden axis of a sequence-split activation: no
// communication; scale and bias stay whole.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<2x4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}, {}]>},
                        %g: tensor<8xf32>, %b: tensor<8xf32>)
      -> (tensor<2x4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}, {}]>}) {
    %y = weft.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x2x8xf32>
// CHECK-SAME: %[[G:arg[0-9]+]]: tensor<8xf32>
// CHECK-SAME: %[[B:arg[0-9]+]]: tensor<8xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.layer_norm %[[X]], %[[G]], %[[B]] {{.*}} : (tensor<2x2x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x2x8xf32>
// CHECK-NEXT: return %[[Y]] : tensor<2x2x8xf32>

// -----

// layer_norm over the split hidden axis: no gather; the row sums for the
// mean and the variance are all-reduced (one value per row), and each rank
// applies its block of scale and bias (the whole bias sliced locally).
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<2x4x8xf32> {weft.sharding = #weft.sharding<[{}, {}, {tp}]>},
                        %g: tensor<8xf32> {weft.sharding = #weft.sharding<[{tp}]>},
                        %b: tensor<8xf32>)
      -> (tensor<2x4x8xf32> {weft.sharding = #weft.sharding<[{}, {}, {tp}]>}) {
    %y = weft.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
    return %y : tensor<2x4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x4x4xf32>
// CHECK-SAME: %[[G:arg[0-9]+]]: tensor<4xf32>
// CHECK-SAME: %[[B:arg[0-9]+]]: tensor<8xf32>
// CHECK-NOT: weft.all_gather
// CHECK: %[[BS:.*]] = weft.shard_slice %[[B]] {axes = ["tp"], dim = 0 : i64} : tensor<8xf32> -> tensor<4xf32>
// CHECK: %[[N:.*]] = weft.constant dense<8.000000e+00> : tensor<f32>
// CHECK: %[[S1:.*]] = weft.reduce_sum %[[X]] {axes = array<i64: 2>, keep_dims = true} : (tensor<2x4x4xf32>) -> tensor<2x4x1xf32>
// CHECK-NEXT: %[[T1:.*]] = weft.all_reduce %[[S1]] {axes = ["tp"]} : tensor<2x4x1xf32>
// CHECK-NEXT: %[[MEAN:.*]] = weft.div %[[T1]], %[[N]]
// CHECK-NEXT: %[[D:.*]] = weft.sub %[[X]], %[[MEAN]]
// CHECK-NEXT: %[[SQ:.*]] = weft.mul %[[D]], %[[D]]
// CHECK-NEXT: %[[S2:.*]] = weft.reduce_sum %[[SQ]]
// CHECK-NEXT: %[[T2:.*]] = weft.all_reduce %[[S2]] {axes = ["tp"]} : tensor<2x4x1xf32>
// CHECK-NEXT: %[[VAR:.*]] = weft.div %[[T2]], %[[N]]
// CHECK: %[[R:.*]] = weft.rsqrt
// CHECK-NEXT: %[[NORM:.*]] = weft.mul %[[D]], %[[R]]
// CHECK-NEXT: %[[SCALED:.*]] = weft.mul %[[NORM]], %[[G]]
// CHECK-NEXT: %[[Y:.*]] = weft.add %[[SCALED]], %[[BS]]
// CHECK-NEXT: return %[[Y]] : tensor<2x4x4xf32>

// -----

// Attention heads out of a column-parallel projection: [B, T, H*D] split
// on H*D reshapes to [B, T, H, D] split on H (H is the major factor of
// H*D) and transposes to [B, H, T, D]: batch over dp, heads over tp, no
// communication; the softmax over the last axis runs on each rank's heads.
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<2x4x8xf32> {weft.sharding = #weft.sharding<[{dp}, {}, {tp}]>})
      -> (tensor<2x4x4x2xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}, {}, {}]>}) {
    %r = weft.reshape %x : tensor<2x4x8xf32> -> tensor<2x4x4x2xf32>
    %t = weft.transpose %r {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x2xf32>) -> tensor<2x4x4x2xf32>
    %s = weft.softmax %t {axis = 3 : i64} : tensor<2x4x4x2xf32>
    return %s : tensor<2x4x4x2xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<1x4x4xf32>
// CHECK-NEXT: %[[R:.*]] = weft.reshape %[[X]] : tensor<1x4x4xf32> -> tensor<1x4x2x2xf32>
// CHECK-NEXT: %[[T:.*]] = weft.transpose %[[R]] {permutation = array<i64: 0, 2, 1, 3>} : (tensor<1x4x2x2xf32>) -> tensor<1x2x4x2xf32>
// CHECK-NEXT: %[[S:.*]] = weft.softmax %[[T]] {axis = 3 : i64} : tensor<1x2x4x2xf32>
// CHECK-NEXT: return %[[S]] : tensor<1x2x4x2xf32>

// -----

// The heads merged back, [B, H, T, D] -> [B, T, H, D] -> [B, T, H*D]: the
// split on H becomes the split of H*D (the input of a row-parallel output
// projection).
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<2x4x4x2xf32> {weft.sharding = #weft.sharding<[{}, {tp}, {}, {}]>})
      -> (tensor<2x4x8xf32> {weft.sharding = #weft.sharding<[{}, {}, {tp}]>}) {
    %t = weft.transpose %x {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x4x2xf32>) -> tensor<2x4x4x2xf32>
    %r = weft.reshape %t : tensor<2x4x4x2xf32> -> tensor<2x4x8xf32>
    return %r : tensor<2x4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x2x4x2xf32>
// CHECK-NEXT: %[[T:.*]] = weft.transpose %[[X]] {{.*}} -> tensor<2x4x2x2xf32>
// CHECK-NEXT: %[[R:.*]] = weft.reshape %[[T]] : tensor<2x4x2x2xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x4x4xf32>

// -----

// Three heads do not divide by tp=2: the reshape refuses the split of H*D
// and runs whole on the gathered input.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<2x4x6xf32> {weft.sharding = #weft.sharding<[{}, {}, {tp}]>})
      -> tensor<2x3x4x2xf32> {
    %r = weft.reshape %x : tensor<2x4x6xf32> -> tensor<2x4x3x2xf32>
    %t = weft.transpose %r {permutation = array<i64: 0, 2, 1, 3>} : (tensor<2x4x3x2xf32>) -> tensor<2x3x4x2xf32>
    return %t : tensor<2x3x4x2xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x4x3xf32>
// CHECK-NEXT: %[[G:.*]] = weft.all_gather %[[X]] {axes = ["tp"], dim = 2 : i64} : tensor<2x4x3xf32> -> tensor<2x4x6xf32>
// CHECK-NEXT: %[[R:.*]] = weft.reshape %[[G]] : tensor<2x4x6xf32> -> tensor<2x4x3x2xf32>
// CHECK-NEXT: %[[T:.*]] = weft.transpose %[[R]]
// CHECK-NEXT: return %[[T]] : tensor<2x3x4x2xf32>

// -----

// A reshape merging the split dim as the major part: [4, 2, 8] -> [8, 8]
// split on the 4 keeps the merged dim split.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x2x8xf32> {weft.sharding = #weft.sharding<[{tp}, {}, {}]>})
      -> (tensor<8x8xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>}) {
    %r = weft.reshape %x : tensor<4x2x8xf32> -> tensor<8x8xf32>
    return %r : tensor<8x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x2x8xf32>
// CHECK-NEXT: %[[R:.*]] = weft.reshape %[[X]] : tensor<2x2x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: return %[[R]] : tensor<4x8xf32>

// -----

// [8, 4] -> [2, 4, 4] with the rows over dp and tp: the major factor (2)
// does not divide by 4 ranks, so the reshape runs whole on the gathered
// rows (tp undone first, then dp).
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<8x4xf32> {weft.sharding = #weft.sharding<[{dp, tp}, {}]>})
      -> tensor<2x4x4xf32> {
    %r = weft.reshape %x : tensor<8x4xf32> -> tensor<2x4x4xf32>
    return %r : tensor<2x4x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x4xf32>
// CHECK-NEXT: %[[G1:.*]] = weft.all_gather %[[X]] {axes = ["tp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
// CHECK-NEXT: %[[G2:.*]] = weft.all_gather %[[G1]] {axes = ["dp"], dim = 0 : i64} : tensor<4x4xf32> -> tensor<8x4xf32>
// CHECK-NEXT: %[[R:.*]] = weft.reshape %[[G2]] : tensor<8x4xf32> -> tensor<2x4x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<2x4x4xf32>

// -----

// transpose: the split moves with its dimension.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{tp}, {}]>})
      -> (tensor<8x4xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}) {
    %t = weft.transpose %x {permutation = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
    return %t : tensor<8x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x8xf32>
// CHECK-NEXT: %[[T:.*]] = weft.transpose %[[X]] {permutation = array<i64: 1, 0>} : (tensor<2x8xf32>) -> tensor<8x2xf32>
// CHECK-NEXT: return %[[T]] : tensor<8x2xf32>

// -----

// Embedding with the table split on the hidden dim: each rank looks up its
// columns for every token.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%e: tensor<16x8xf32> {weft.param = "wte", weft.sharding = #weft.sharding<[{}, {tp}]>},
                        %tok: tensor<2x4xi64>)
      -> (tensor<2x4x8xf32> {weft.sharding = #weft.sharding<[{}, {}, {tp}]>}) {
    %h = weft.gather %e, %tok {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    return %h : tensor<2x4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[E:arg[0-9]+]]: tensor<16x4xf32>
// CHECK-SAME: %[[TOK:arg[0-9]+]]: tensor<2x4xi64>
// CHECK-NEXT: %[[H:.*]] = weft.gather %[[E]], %[[TOK]] {axis = 0 : i64} : (tensor<16x4xf32>, tensor<2x4xi64>) -> tensor<2x4x4xf32>
// CHECK-NEXT: return %[[H]] : tensor<2x4x4xf32>

// -----

// Embedding with the indices split: each rank looks up its tokens.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%e: tensor<16x8xf32> {weft.param = "wte"},
                        %tok: tensor<2x4xi64> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<2x4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}, {}]>}) {
    %h = weft.gather %e, %tok {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    return %h : tensor<2x4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[E:arg[0-9]+]]: tensor<16x8xf32>
// CHECK-SAME: %[[TOK:arg[0-9]+]]: tensor<2x2xi64>
// CHECK-NEXT: %[[H:.*]] = weft.gather %[[E]], %[[TOK]] {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x2xi64>) -> tensor<2x2x8xf32>
// CHECK-NEXT: return %[[H]] : tensor<2x2x8xf32>

// -----

// The table split on the gathered (vocabulary) axis: each rank looks up
// the tokens in its rows (offset by its rank's first row, clamped, masked
// to zero elsewhere); the lookups sum to the embedding.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%e: tensor<16x8xf32> {weft.param = "wte", weft.sharding = #weft.sharding<[{tp}, {}]>},
                        %tok: tensor<2x4xi64>)
      -> tensor<2x4x8xf32> {
    %h = weft.gather %e, %tok {axis = 0 : i64} : (tensor<16x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
    return %h : tensor<2x4x8xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[E:arg[0-9]+]]: tensor<8x8xf32>
// CHECK-SAME: %[[TOK:arg[0-9]+]]: tensor<2x4xi64>
// CHECK: %[[RANK:.*]] = weft.axis_index {axes = ["tp"]} : tensor<i64>
// CHECK: %[[IDS:.*]] = weft.cast %[[TOK]] : tensor<2x4xi64> -> tensor<2x4xf32>
// CHECK: %[[LOCAL:.*]] = weft.sub %[[IDS]], {{.*}} : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
// CHECK: %[[ROWS:.*]] = weft.cast {{.*}} : tensor<2x4xf32> -> tensor<2x4xi64>
// CHECK-NEXT: %[[H:.*]] = weft.gather %[[E]], %[[ROWS]] {axis = 0 : i64} : (tensor<8x8xf32>, tensor<2x4xi64>) -> tensor<2x4x8xf32>
// CHECK-NEXT: %[[MASK:.*]] = weft.reshape {{.*}} : tensor<2x4xf32> -> tensor<2x4x1xf32>
// CHECK-NEXT: %[[MINE:.*]] = weft.mul %[[H]], %[[MASK]]
// CHECK-NEXT: %[[SUM:.*]] = weft.all_reduce %[[MINE]] {axes = ["tp"]} : tensor<2x4x8xf32>
// CHECK-NEXT: return %[[SUM]] : tensor<2x4x8xf32>

// -----

// concat along another axis keeps the split; along the split axis the
// operands are gathered.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%a: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>},
                        %b: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<8x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}, tensor<4x16xf32>) {
    %r = weft.concat %a, %b {axis = 0 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    %c = weft.concat %a, %b {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
    return %r, %c : tensor<8x8xf32>, tensor<4x16xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[A:arg[0-9]+]]: tensor<4x4xf32>
// CHECK-SAME: %[[B:arg[0-9]+]]: tensor<4x4xf32>
// CHECK-DAG: %[[BG:.*]] = weft.all_gather %[[B]] {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK-DAG: %[[AG:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK: %[[R:.*]] = weft.concat %[[A]], %[[B]] {axis = 0 : i64} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.concat %[[AG]], %[[BG]] {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: return %[[R]], %[[C]] : tensor<8x4xf32>, tensor<4x16xf32>

// -----

// slice along another axis keeps the split (its limit on the split axis
// becomes the local size); along the split axis the input is gathered.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%a: tensor<4x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>})
      -> (tensor<2x8xf32> {weft.sharding = #weft.sharding<[{}, {tp}]>}, tensor<4x4xf32>) {
    %r = weft.slice %a {starts = array<i64: 1, 0>, limits = array<i64: 3, 8>, strides = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<2x8xf32>
    %c = weft.slice %a {starts = array<i64: 0, 2>, limits = array<i64: 4, 6>, strides = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
    return %r, %c : tensor<2x8xf32>, tensor<4x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[A:arg[0-9]+]]: tensor<4x4xf32>
// CHECK-NEXT: %[[G:.*]] = weft.all_gather %[[A]] {axes = ["tp"], dim = 1 : i64} : tensor<4x4xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[R:.*]] = weft.slice %[[A]] {limits = array<i64: 3, 4>, starts = array<i64: 1, 0>, strides = array<i64: 1, 1>} : (tensor<4x4xf32>) -> tensor<2x4xf32>
// CHECK-NEXT: %[[C:.*]] = weft.slice %[[G]] {limits = array<i64: 4, 6>, starts = array<i64: 0, 2>, strides = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[R]], %[[C]] : tensor<2x4xf32>, tensor<4x4xf32>

// -----

// conv2d with the batch over dp and the output channels over tp (filter
// and bias split on O): no communication.
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<4x3x6x6xf32> {weft.sharding = #weft.sharding<[{dp}, {}, {}, {}]>},
                        %w: tensor<8x3x3x3xf32> {weft.param = "w", weft.sharding = #weft.sharding<[{tp}, {}, {}, {}]>},
                        %b: tensor<8xf32> {weft.param = "b", weft.sharding = #weft.sharding<[{tp}]>})
      -> (tensor<4x8x4x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}, {}, {}]>}) {
    %y = weft.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<4x3x6x6xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<4x8x4x4xf32>
    return %y : tensor<4x8x4x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x3x6x6xf32>
// CHECK-SAME: %[[W:arg[0-9]+]]: tensor<4x3x3x3xf32>
// CHECK-SAME: %[[B:arg[0-9]+]]: tensor<4xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.conv2d %[[X]], %[[W]], %[[B]] {{.*}} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<2x4x4x4xf32>
// CHECK-NEXT: return %[[Y]] : tensor<2x4x4x4xf32>

// -----

// conv2d with the input channels over tp: a sum over them is pending.
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<4x4x6x6xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}, {}, {}]>},
                        %w: tensor<8x4x3x3xf32> {weft.param = "w", weft.sharding = #weft.sharding<[{}, {tp}, {}, {}]>})
      -> (tensor<4x8x4x4xf32> {weft.sharding = #weft.sharding<[{dp}, {}, {}, {}]>}) {
    %y = weft.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<4x4x6x6xf32>, tensor<8x4x3x3xf32>) -> tensor<4x8x4x4xf32>
    return %y : tensor<4x8x4x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x2x6x6xf32>
// CHECK-SAME: %[[W:arg[0-9]+]]: tensor<8x2x3x3xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.conv2d %[[X]], %[[W]] {{.*}} -> tensor<2x8x4x4xf32>
// CHECK-NEXT: %[[S:.*]] = weft.all_reduce %[[Y]] {axes = ["tp"]} : tensor<2x8x4x4xf32>
// CHECK-NEXT: return %[[S]] : tensor<2x8x4x4xf32>

// -----

// conv2d reads the spatial axes whole: a split row axis is gathered.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<2x3x6x6xf32> {weft.sharding = #weft.sharding<[{}, {}, {tp}, {}]>},
                        %w: tensor<4x3x3x3xf32> {weft.param = "w"})
      -> tensor<2x4x4x4xf32> {
    %y = weft.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<2x3x6x6xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x4x4xf32>
    return %y : tensor<2x4x4x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x3x3x6xf32>
// CHECK-NEXT: %[[G:.*]] = weft.all_gather %[[X]] {axes = ["tp"], dim = 2 : i64} : tensor<2x3x3x6xf32> -> tensor<2x3x6x6xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.conv2d %[[G]], {{.*}} -> tensor<2x4x4x4xf32>
// CHECK-NEXT: return %[[Y]]

// -----

// A grouped (depthwise) conv2d keeps its channels whole: gathered.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<2x4x6x6xf32> {weft.sharding = #weft.sharding<[{}, {tp}, {}, {}]>},
                        %w: tensor<4x1x3x3xf32> {weft.param = "w"})
      -> tensor<2x4x4x4xf32> {
    %y = weft.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 4 : i64} : (tensor<2x4x6x6xf32>, tensor<4x1x3x3xf32>) -> tensor<2x4x4x4xf32>
    return %y : tensor<2x4x4x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x2x6x6xf32>
// CHECK-NEXT: %[[G:.*]] = weft.all_gather %[[X]] {axes = ["tp"], dim = 1 : i64} : tensor<2x2x6x6xf32> -> tensor<2x4x6x6xf32>
// CHECK-NEXT: %[[Y:.*]] = weft.conv2d %[[G]], {{.*}} -> tensor<2x4x4x4xf32>
// CHECK-NEXT: return %[[Y]]

// -----

// Pooling over a batch over dp and channels over tp: no communication.
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<4x4x8x8xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}, {}, {}]>})
      -> (tensor<4x4x4x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}, {}, {}]>},
          tensor<4x4x4x4xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}, {}, {}]>},
          tensor<4x4x1x1xf32> {weft.sharding = #weft.sharding<[{dp}, {tp}, {}, {}]>}) {
    %m = weft.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<4x4x8x8xf32>) -> tensor<4x4x4x4xf32>
    %a = weft.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<4x4x8x8xf32>) -> tensor<4x4x4x4xf32>
    %g = weft.global_avg_pool %x : (tensor<4x4x8x8xf32>) -> tensor<4x4x1x1xf32>
    return %m, %a, %g : tensor<4x4x4x4xf32>, tensor<4x4x4x4xf32>, tensor<4x4x1x1xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x2x8x8xf32>
// CHECK-NEXT: %[[M:.*]] = weft.max_pool2d %[[X]] {{.*}} : (tensor<2x2x8x8xf32>) -> tensor<2x2x4x4xf32>
// CHECK-NEXT: %[[A:.*]] = weft.avg_pool2d %[[X]] {{.*}} : (tensor<2x2x8x8xf32>) -> tensor<2x2x4x4xf32>
// CHECK-NEXT: %[[G:.*]] = weft.global_avg_pool %[[X]] : (tensor<2x2x8x8xf32>) -> tensor<2x2x1x1xf32>
// CHECK-NEXT: return %[[M]], %[[A]], %[[G]]

// -----

// Pooling reads the spatial axes whole: a split column axis is gathered.
module attributes {weft.mesh = #weft.mesh<tp = 2>} {
  func.func @train_step(%x: tensor<2x4x8x8xf32> {weft.sharding = #weft.sharding<[{}, {}, {}, {tp}]>})
      -> tensor<2x4x4x4xf32> {
    %m = weft.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<2x4x8x8xf32>) -> tensor<2x4x4x4xf32>
    return %m : tensor<2x4x4x4xf32>
  }
}

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[X:arg[0-9]+]]: tensor<2x4x8x4xf32>
// CHECK-NEXT: %[[G:.*]] = weft.all_gather %[[X]] {axes = ["tp"], dim = 3 : i64} : tensor<2x4x8x4xf32> -> tensor<2x4x8x8xf32>
// CHECK-NEXT: %[[M:.*]] = weft.max_pool2d %[[G]] {{.*}} -> tensor<2x4x4x4xf32>
// CHECK-NEXT: return %[[M]] : tensor<2x4x4x4xf32>
