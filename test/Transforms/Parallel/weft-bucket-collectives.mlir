// RUN: weft-opt %s --weft-bucket-collectives="bucket-mb=0.0001" -split-input-file | FileCheck %s
// RUN: weft-opt %s --weft-bucket-collectives="bucket-mb=0" -split-input-file | FileCheck %s --check-prefix=OFF

// Buckets of at most 104 bytes (26 floats): runs of one kind over the same
// axes, in program order, closed when one more would overflow, a bigger
// tensor alone; reduce-scatters and all-reduces in buckets of their own
// even when interleaved. Ids are given as buckets close.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[A:.*]] = weft.all_reduce %{{.*}} {axes = ["dp"], weft.bucket = 0 : i64} : tensor<8xf32>
// CHECK: weft.reduce_scatter %{{.*}} {axes = ["dp"], dim = 0 : i64, weft.bucket = 3 : i64}
// CHECK: weft.all_reduce %{{.*}} {axes = ["dp"], weft.bucket = 0 : i64} : tensor<16xf32>
// CHECK: weft.all_reduce %{{.*}} {axes = ["dp"], weft.bucket = 1 : i64} : tensor<8xf32>
// CHECK: weft.all_reduce %{{.*}} {axes = ["dp"], weft.bucket = 2 : i64} : tensor<64xf32>
// CHECK: weft.reduce_scatter %{{.*}} {axes = ["dp"], dim = 0 : i64, weft.bucket = 3 : i64}
// OFF-NOT: weft.bucket
module attributes {weft.mesh = #weft.mesh<dp = 2>} {
  func.func @train_step(%a: tensor<8xf32>, %b: tensor<16xf32>, %c: tensor<8xf32>,
                        %d: tensor<64xf32>, %e: tensor<4xf32>)
      -> (tensor<8xf32>, tensor<16xf32>, tensor<8xf32>, tensor<64xf32>,
          tensor<2xf32>, tensor<2xf32>) {
    %0 = weft.all_reduce %a {axes = ["dp"]} : tensor<8xf32>
    %1 = weft.reduce_scatter %e {axes = ["dp"], dim = 0 : i64} : tensor<4xf32> -> tensor<2xf32>
    %2 = weft.all_reduce %b {axes = ["dp"]} : tensor<16xf32>
    %3 = weft.all_reduce %c {axes = ["dp"]} : tensor<8xf32>
    %4 = weft.all_reduce %d {axes = ["dp"]} : tensor<64xf32>
    %5 = weft.reduce_scatter %e {axes = ["dp"], dim = 0 : i64} : tensor<4xf32> -> tensor<2xf32>
    return %0, %2, %3, %4, %1, %5 : tensor<8xf32>, tensor<16xf32>, tensor<8xf32>, tensor<64xf32>, tensor<2xf32>, tensor<2xf32>
  }
}

// -----

// A bucket starts after its last member, so it closes where one of its
// results is first used: the reduction after that use opens a new one.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[A:.*]] = weft.all_reduce %{{.*}} {axes = ["dp"], weft.bucket = 0 : i64}
// CHECK: weft.all_reduce %{{.*}} {axes = ["dp"], weft.bucket = 0 : i64}
// CHECK: weft.neg %[[A]]
// CHECK: weft.all_reduce %{{.*}} {axes = ["dp"], weft.bucket = 1 : i64}
module attributes {weft.mesh = #weft.mesh<dp = 2>} {
  func.func @train_step(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<4xf32>)
      -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    %0 = weft.all_reduce %a {axes = ["dp"]} : tensor<4xf32>
    %1 = weft.all_reduce %b {axes = ["dp"]} : tensor<4xf32>
    %2 = weft.neg %0 : tensor<4xf32>
    %3 = weft.all_reduce %c {axes = ["dp"]} : tensor<4xf32>
    return %2, %1, %3 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}

// -----

// ZeRO-3 gathers of parameter shards move up to the previous gather, each
// alone in its bucket: the second parameter travels while the first
// one's user computes. A gather of a computed value stays where it is and
// shares a bucket with its kind.
// CHECK-LABEL: func.func @train_step
// CHECK: %[[W1:.*]] = weft.all_gather %arg0 {axes = ["dp"], dim = 0 : i64, weft.bucket = 0 : i64}
// CHECK-NEXT: %[[W2:.*]] = weft.all_gather %arg1 {axes = ["dp"], dim = 0 : i64, weft.bucket = 1 : i64}
// CHECK-NEXT: %[[Y:.*]] = weft.matmul %arg2, %[[W1]]
// CHECK-NEXT: weft.matmul %[[Y]], %[[W2]]
// CHECK: weft.all_gather %{{.*}} {axes = ["dp"], dim = 0 : i64, weft.bucket = 2 : i64}
// CHECK: weft.all_gather %{{.*}} {axes = ["dp"], dim = 0 : i64, weft.bucket = 2 : i64}
module attributes {weft.mesh = #weft.mesh<dp = 2>} {
  func.func @train_step(%w1: tensor<2x4xf32>, %w2: tensor<2x4xf32>, %x: tensor<4x4xf32>)
      -> (tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
    %0 = weft.all_gather %w1 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
    %1 = weft.matmul %x, %0 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %2 = weft.all_gather %w2 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
    %3 = weft.matmul %1, %2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %4 = weft.slice %3 {starts = array<i64: 0, 0>, limits = array<i64: 2, 4>, strides = array<i64: 1, 1>} : (tensor<4x4xf32>) -> tensor<2x4xf32>
    %5 = weft.all_gather %4 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
    %6 = weft.all_gather %4 {axes = ["dp"], dim = 0 : i64} : tensor<2x4xf32> -> tensor<4x4xf32>
    return %3, %5, %6 : tensor<4x4xf32>, tensor<4x4xf32>, tensor<4x4xf32>
  }
}
