// RUN: weft-opt %s --weft-lower-collectives -split-input-file -verify-diagnostics \
// RUN:   | FileCheck %s
// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-codegen-pipeline)' \
// RUN:   -split-input-file -verify-diagnostics | FileCheck %s --check-prefix=LLVM

// Each collective becomes a runtime call through the context argument the
// entry gains first; the axes are a bit mask in mesh order (dp: 1, tp: 2).

// CHECK-DAG: func.func private @weft_rt_all_reduce_f32(!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64)
// CHECK-DAG: func.func private @weft_rt_all_gather_f32(!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, i64)
// CHECK-DAG: func.func private @weft_rt_reduce_scatter_f32(!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, i64)
// CHECK-DAG: func.func private @weft_rt_axis_index(!llvm.ptr, i64) -> i64
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr {weft.context}, %[[G:.*]]: tensor<4x3xf32> {weft.input = "g"
// CHECK-SAME: %[[W:.*]]: tensor<8x3xf32> {weft.param = "w"}, %[[T:.*]]: tensor<8xi64>

// all_reduce: (ctx, mask, in, out, count).
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[G]] read_only : tensor<4x3xf32> to memref<4x3xf32>
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x3xf32>
// CHECK-DAG: %[[DP:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[N12:.*]] = arith.constant 12 : i64
// CHECK: call @weft_rt_all_reduce_f32(%[[CTX]], %[[DP]], %{{.*}}, %{{.*}}, %[[N12]])
// CHECK: %[[S:.*]] = bufferization.to_tensor %[[OUT]] restrict writable

// all_gather along dim 1 over tp: outer 4 rows, inner block of 3.
// CHECK-DAG: %[[TP:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[N4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[N3:.*]] = arith.constant 3 : i64
// CHECK: call @weft_rt_all_gather_f32(%[[CTX]], %[[TP]], %{{.*}}, %{{.*}}, %[[N4]], %[[N3]])

// reduce_scatter along dim 0: outer 1, inner the result's 2x3 block.
// CHECK: call @weft_rt_reduce_scatter_f32(%[[CTX]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}})

// shard_slice over (dp, tp): block 2 at the row-major coordinate (mask 3).
// CHECK: %[[DPTP:.*]] = arith.constant 3 : i64
// CHECK: %[[I:.*]] = call @weft_rt_axis_index(%[[CTX]], %[[DPTP]])
// CHECK: %[[OFF:.*]] = arith.muli %[[I]], %{{.*}} : i64
// CHECK: %[[IDX:.*]] = arith.index_cast %[[OFF]] : i64 to index
// CHECK: tensor.extract_slice %[[T]][%[[IDX]]] [2] [1] : tensor<8xi64> to tensor<2xi64>

// Through the whole pipeline the step takes the context first and the
// buffers after it; the calls survive bufferization and buffer planning.
// LLVM-LABEL: llvm.func @train_step(
// LLVM-SAME: %[[CTX:.*]]: !llvm.ptr {weft.context}
// LLVM-SAME: {weft.workspace}
// LLVM: llvm.call @weft_rt_all_reduce_f32(%[[CTX]],
// LLVM: llvm.call @weft_rt_all_gather_f32(%[[CTX]],
// LLVM: llvm.call @weft_rt_reduce_scatter_f32(%[[CTX]],
// LLVM: llvm.call @weft_rt_axis_index(%[[CTX]],
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(
      %g: tensor<4x3xf32> {weft.input = "g", weft.sharding = #weft.sharding<[{dp}, {}]>},
      %w: tensor<8x3xf32> {weft.param = "w"},
      %t: tensor<8xi64> {weft.input = "t"})
      -> (tensor<4x3xf32> {weft.output = "s"}, tensor<4x6xf32> {weft.output = "a"},
          tensor<2x3xf32> {weft.output = "r"}, tensor<2xi64> {weft.output = "t2"},
          tensor<4x3xf32> {weft.param = "w"}) {
    %s = weft.all_reduce %g {axes = ["dp"]} : tensor<4x3xf32>
    %a = weft.all_gather %g {axes = ["tp"], dim = 1 : i64} : tensor<4x3xf32> -> tensor<4x6xf32>
    %r = weft.reduce_scatter %g {axes = ["dp"], dim = 0 : i64} : tensor<4x3xf32> -> tensor<2x3xf32>
    %t2 = weft.shard_slice %t {axes = ["dp", "tp"], dim = 0 : i64} : tensor<8xi64> -> tensor<2xi64>
    %w2 = weft.shard_slice %w {axes = ["dp"], dim = 0 : i64} : tensor<8x3xf32> -> tensor<4x3xf32>
    return %s, %a, %r, %t2, %w2 : tensor<4x3xf32>, tensor<4x6xf32>, tensor<2x3xf32>, tensor<2xi64>, tensor<4x3xf32>
  }
}

// -----

// A step without collectives keeps its signature.
// CHECK-LABEL: func.func @train_step(%{{.*}}: tensor<4xf32> {weft.input = "x"})
// LLVM-LABEL: llvm.func @train_step(%{{.*}}: !llvm.ptr {weft.input = "x"}
func.func @train_step(%x: tensor<4xf32> {weft.input = "x"}) -> (tensor<4xf32> {weft.output = "y"}) {
  return %x : tensor<4xf32>
}

// -----

func.func @train_step(%g: tensor<4xf32> {weft.input = "g"}) -> (tensor<4xf32> {weft.output = "s"}) {
  // expected-error @+1 {{needs the module's weft.mesh}}
  %s = weft.all_reduce %g {axes = ["dp"]} : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%g: tensor<4xf32> {weft.input = "g"}) -> (tensor<4xf32> {weft.output = "s"}) {
    // expected-error @+1 {{lists its axes ["tp", "dp"] in another order than the mesh}}
    %s = weft.all_reduce %g {axes = ["tp", "dp"]} : tensor<4xf32>
    return %s : tensor<4xf32>
  }
}

// -----

module attributes {weft.mesh = #weft.mesh<dp = 2>} {
  func.func @train_step(%g: tensor<4xf16> {weft.input = "g"}) -> (tensor<4xf16> {weft.output = "s"}) {
    // expected-error @+1 {{has element type 'f16': the runtime's collectives take f32}}
    %s = weft.all_reduce %g {axes = ["dp"]} : tensor<4xf16>
    return %s : tensor<4xf16>
  }
}

// -----

module attributes {weft.mesh = #weft.mesh<dp = 2>} {
  func.func private @helper(%g: tensor<4xf32>) -> tensor<4xf32> {
    // expected-error @+1 {{is outside @train_step, the only function that receives the runtime context}}
    %s = weft.all_reduce %g {axes = ["dp"]} : tensor<4xf32>
    return %s : tensor<4xf32>
  }
  func.func @train_step(%g: tensor<4xf32> {weft.input = "g"}) -> (tensor<4xf32> {weft.output = "s"}) {
    %s = func.call @helper(%g) : (tensor<4xf32>) -> tensor<4xf32>
    return %s : tensor<4xf32>
  }
}

// -----

// A bucket: each member's input is put into the flat buffer where the
// member stands (all-reduce: kind 0, offsets 0 and 4 of a 10-element
// region), the collective starts after the last member, and the results
// are taken out before the first op that uses one; ops between run while
// the bucket travels.
// CHECK-DAG: func.func private @weft_rt_bucket_put_f32(!llvm.ptr, i64, i64, i64, i64, i64, !llvm.ptr, i64, i64)
// CHECK-DAG: func.func private @weft_rt_bucket_start(!llvm.ptr, i64, i64, i64, i64)
// CHECK-DAG: func.func private @weft_rt_bucket_get_f32(!llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr {weft.context}
// Arguments: ctx, mask, bucket, kind, region, offset, in/out, outer, inner.
// CHECK: call @weft_rt_bucket_put_f32(%[[CTX]], %c1_i64{{.*}}, %c7_i64{{.*}}, %c0_i64{{.*}}, %c10_i64{{.*}}, %c0_i64{{.*}}, %{{.*}}, %c1_i64{{.*}}, %c4_i64{{.*}})
// CHECK: weft.neg
// CHECK: call @weft_rt_bucket_put_f32(%[[CTX]], %c1_i64{{.*}}, %c7_i64{{.*}}, %c0_i64{{.*}}, %c10_i64{{.*}}, %c4_i64{{.*}}, %{{.*}}, %c1_i64{{.*}}, %c6_i64{{.*}})
// CHECK: call @weft_rt_bucket_start(%[[CTX]], %c1_i64{{.*}}, %c7_i64{{.*}}, %c0_i64{{.*}}, %c10_i64{{.*}})
// CHECK-NEXT: weft.exp
// CHECK: call @weft_rt_bucket_get_f32(%[[CTX]], %c1_i64{{.*}}, %c7_i64{{.*}}, %c0_i64{{.*}}, %{{.*}}, %c1_i64{{.*}}, %c4_i64{{.*}})
// CHECK: call @weft_rt_bucket_get_f32(%[[CTX]], %c1_i64{{.*}}, %c7_i64{{.*}}, %c4_i64{{.*}}, %{{.*}}, %c1_i64{{.*}}, %c6_i64{{.*}})
// CHECK: weft.add
// LLVM-LABEL: llvm.func @train_step(
// LLVM: llvm.call @weft_rt_bucket_put_f32(
// LLVM: llvm.call @weft_rt_bucket_put_f32(
// LLVM: llvm.call @weft_rt_bucket_start(
// LLVM: llvm.call @weft_rt_bucket_get_f32(
// LLVM: llvm.call @weft_rt_bucket_get_f32(
module attributes {weft.mesh = #weft.mesh<dp = 2>} {
  func.func @train_step(%a: tensor<4xf32> {weft.input = "a"}, %b: tensor<6xf32> {weft.input = "b"})
      -> (tensor<4xf32> {weft.output = "s"}, tensor<6xf32> {weft.output = "t"}, tensor<6xf32> {weft.output = "u"}) {
    %0 = weft.all_reduce %a {axes = ["dp"], weft.bucket = 7 : i64} : tensor<4xf32>
    %n = weft.neg %b : tensor<6xf32>
    %1 = weft.all_reduce %n {axes = ["dp"], weft.bucket = 7 : i64} : tensor<6xf32>
    %e = weft.exp %b : tensor<6xf32>
    %s = weft.add %0, %0 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    return %s, %1, %e : tensor<4xf32>, tensor<6xf32>, tensor<6xf32>
  }
}

// -----

module attributes {weft.mesh = #weft.mesh<dp = 2>} {
  func.func @train_step(%a: tensor<4xf32> {weft.input = "a"}) -> (tensor<4xf32> {weft.output = "s"}) {
    %0 = weft.all_reduce %a {axes = ["dp"], weft.bucket = 0 : i64} : tensor<4xf32>
    // expected-error @+1 {{uses a result of bucket 0 before its last member}}
    %n = weft.neg %0 : tensor<4xf32>
    %1 = weft.all_reduce %n {axes = ["dp"], weft.bucket = 0 : i64} : tensor<4xf32>
    return %1 : tensor<4xf32>
  }
}

// -----

// all_to_all: (ctx, mask, in, out, splitOuter, splitInner, concatOuter,
// concatInner) over the block each rank sends and receives, the input with
// split_dim cut n ways. [4, 6] split along dim 1, concatenated along dim 0
// over tp: blocks of [4, 3], sent as 4 runs of 3, received whole (1 x 12).
// [2, 4, 6] split along 2, concatenated along 1: blocks of [2, 4, 3], sent
// as 8 runs of 3, received as 2 runs of 12.
// CHECK-DAG: func.func private @weft_rt_all_to_all_f32(!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64, i64, i64, i64)
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr {weft.context}
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<8x3xf32>
// CHECK: call @weft_rt_all_to_all_f32(%[[CTX]], %c2_i64{{.*}}, %{{.*}}, %{{.*}}, %c4_i64{{.*}}, %c3_i64{{.*}}, %c1_i64{{.*}}, %c12_i64{{.*}})
// CHECK: bufferization.to_tensor %[[OUT]] restrict writable : memref<8x3xf32> to tensor<8x3xf32>
// CHECK: %[[OUT3:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x8x3xf32>
// CHECK: call @weft_rt_all_to_all_f32(%[[CTX]], %c2_i64{{.*}}, %{{.*}}, %{{.*}}, %c8_i64{{.*}}, %c3_i64{{.*}}, %c2_i64{{.*}}, %c12_i64{{.*}})
// CHECK: bufferization.to_tensor %[[OUT3]] restrict writable
// LLVM-LABEL: llvm.func @train_step(
// LLVM: llvm.call @weft_rt_all_to_all_f32(
// LLVM: llvm.call @weft_rt_all_to_all_f32(
module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} {
  func.func @train_step(%x: tensor<4x6xf32> {weft.input = "x"}, %y: tensor<2x4x6xf32> {weft.input = "y"})
      -> (tensor<8x3xf32> {weft.output = "a"}, tensor<2x8x3xf32> {weft.output = "b"}) {
    %a = weft.all_to_all %x {axes = ["tp"], split_dim = 1 : i64, concat_dim = 0 : i64} : tensor<4x6xf32> -> tensor<8x3xf32>
    %b = weft.all_to_all %y {axes = ["tp"], split_dim = 2 : i64, concat_dim = 1 : i64} : tensor<2x4x6xf32> -> tensor<2x8x3xf32>
    return %a, %b : tensor<8x3xf32>, tensor<2x8x3xf32>
  }
}

// -----

module attributes {weft.mesh = #weft.mesh<dp = 2>} {
  func.func @train_step(%x: tensor<4x6xf32> {weft.input = "x"}) -> (tensor<8x3xf32> {weft.output = "a"}) {
    // expected-error @+1 {{has weft.bucket 0, but a bucket holds all_reduce, reduce_scatter or all_gather ops only}}
    %a = weft.all_to_all %x {axes = ["dp"], split_dim = 1 : i64, concat_dim = 0 : i64, weft.bucket = 0 : i64} : tensor<4x6xf32> -> tensor<8x3xf32>
    return %a : tensor<8x3xf32>
  }
}

// -----

// send and recv: (ctx, mask, buffer, count, peer, tag) over pp (mask 2 in
// dp x pp). The send reads its input in place, each recv fills a fresh
// buffer; a recv whose result is unused is still called (its peer sends),
// and the calls keep the ops' order through the whole pipeline.
// CHECK-DAG: func.func private @weft_rt_send_f32(!llvm.ptr, i64, !llvm.ptr, i64, i64, i64)
// CHECK-DAG: func.func private @weft_rt_recv_f32(!llvm.ptr, i64, !llvm.ptr, i64, i64, i64)
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr {weft.context}, %[[X:.*]]: tensor<4x6xf32>
// CHECK: %[[IN:.*]] = bufferization.to_buffer %[[X]] read_only : tensor<4x6xf32> to memref<4x6xf32>
// CHECK: memref.extract_aligned_pointer_as_index %[[IN]]
// CHECK: call @weft_rt_send_f32(%[[CTX]], %c2_i64{{.*}}, %{{.*}}, %c24_i64{{.*}}, %c1_i64{{.*}}, %c7_i64{{.*}})
// CHECK: %[[OUT:.*]] = memref.alloc() {alignment = 64 : i64} : memref<4x6xf32>
// CHECK: call @weft_rt_recv_f32(%[[CTX]], %c2_i64{{.*}}, %{{.*}}, %c24_i64{{.*}}, %c1_i64{{.*}}, %c8_i64{{.*}})
// CHECK: %[[Y:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<4x6xf32> to tensor<4x6xf32>
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2xf32>
// CHECK: call @weft_rt_recv_f32(%[[CTX]], %c2_i64{{.*}}, %{{.*}}, %c2_i64{{.*}}, %c0_i64{{.*}}, %c9_i64{{.*}})
// CHECK: return %[[Y]]
// LLVM-LABEL: llvm.func @train_step(
// LLVM: llvm.call @weft_rt_send_f32(
// LLVM: llvm.call @weft_rt_recv_f32(
// LLVM: llvm.call @weft_rt_recv_f32(
module attributes {weft.mesh = #weft.mesh<dp = 2, pp = 2>} {
  func.func @train_step(%x: tensor<4x6xf32> {weft.input = "x"}) -> (tensor<4x6xf32> {weft.output = "y"}) {
    weft.send %x {axes = ["pp"], peer = 1 : i64, tag = 7 : i64} : tensor<4x6xf32>
    %y = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 8 : i64} : tensor<4x6xf32>
    %unused = weft.recv {axes = ["pp"], peer = 0 : i64, tag = 9 : i64} : tensor<2xf32>
    return %y : tensor<4x6xf32>
  }
}

// -----

// A bf16 activation travels widened to f32 and is narrowed on arrival.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: tensor<4xbf16>
// CHECK: %[[W:.*]] = weft.cast %{{.*}} : tensor<4xbf16> -> tensor<4xf32>
// CHECK: bufferization.to_buffer %[[W]]
// CHECK: call @weft_rt_send_f32(
// CHECK: call @weft_rt_recv_f32(
// CHECK: %[[R:.*]] = bufferization.to_tensor
// CHECK: %[[N:.*]] = weft.cast %[[R]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK: return %[[N]]
module attributes {weft.mesh = #weft.mesh<pp = 2>} {
  func.func @train_step(%x: tensor<4xbf16> {weft.input = "x"}) -> (tensor<4xbf16> {weft.output = "y"}) {
    weft.send %x {axes = ["pp"], peer = 1 : i64, tag = 0 : i64} : tensor<4xbf16>
    %y = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 1 : i64} : tensor<4xbf16>
    return %y : tensor<4xbf16>
  }
}

// -----

module attributes {weft.mesh = #weft.mesh<pp = 2>} {
  func.func @train_step(%x: tensor<4xf64> {weft.input = "x"}) {
    // expected-error @+1 {{has element type 'f64': the runtime's send and recv take f32 (cast around them)}}
    weft.send %x {axes = ["pp"], peer = 1 : i64, tag = 0 : i64} : tensor<4xf64>
    return
  }
}

// -----

module attributes {weft.mesh = #weft.mesh<pp = 2>} {
  func.func @train_step() -> (tensor<4xf32> {weft.output = "y"}) {
    // expected-error @+1 {{has weft.bucket 3, but a bucket holds all_reduce, reduce_scatter or all_gather ops only}}
    %y = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 0 : i64, weft.bucket = 3 : i64} : tensor<4xf32>
    return %y : tensor<4xf32>
  }
}

// -----

// weft.axis_index: the runtime's coordinate of this rank, as a 0-d tensor.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[CTX:.*]]: !llvm.ptr {weft.context}
// CHECK: %[[I:.*]] = call @weft_rt_axis_index(%[[CTX]], %c1_i64{{.*}}) : (!llvm.ptr, i64) -> i64
// CHECK: tensor.from_elements %[[I]] : tensor<i64>
module attributes {weft.mesh = #weft.mesh<dp = 2>} {
  func.func @train_step(%x: tensor<i64> {weft.input = "x"}) -> (tensor<i64> {weft.output = "i"}) {
    %i = weft.axis_index {axes = ["dp"]} : tensor<i64>
    return %i : tensor<i64>
  }
}
