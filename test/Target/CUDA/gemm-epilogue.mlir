// RUN: weft-opt %s -split-input-file --weft-gpu-gemm-epilogue | FileCheck %s
// RUN: weft-opt %s -split-input-file --weft-gpu-gemm-epilogue --weft-gpu-map-step | FileCheck %s --check-prefix=MAP

// A GEMM and the kernel after it adding a bias along the product's last
// dimension become one GEMM with cuBLASLt's bias epilogue that writes the
// kernel's output. What would change the numbers, or might read the
// product or overwrite an operand the call still reads, is left alone.
// Every case is an [8, 3] x [3, 4] product (B transposed) into an [8, 4]
// workspace buffer at byte 0, the kernel's output at byte 128.


// The QKV projection's form: the GEMM writes the kernel's output with the
// bias added; the kernel and the CPU GEMM's declaration are gone, and
// --weft-gpu-map-step keeps the call as it is.
// CHECK-NOT: @weft_rt_sgemm(
// CHECK-NOT: @train_step.fused_1
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME: %[[BIAS:[a-z0-9]+]]: memref<4xf32>
// CHECK: %[[OUT:.*]] = memref.view %{{.*}}[%c128][]
// CHECK: %[[BI:.*]] = memref.extract_aligned_pointer_as_index %[[BIAS]]
// CHECK: %[[BJ:.*]] = arith.index_cast %[[BI]]
// CHECK: %[[BP:.*]] = llvm.inttoptr %[[BJ]]
// CHECK: %[[OI:.*]] = memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[OJ:.*]] = arith.index_cast %[[OI]]
// CHECK: %[[OP:.*]] = llvm.inttoptr %[[OJ]]
// CHECK: call @weft_rt_cuda_sgemm_bias(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[BP]], %[[OP]], %{{.*}}, %{{.*}})
// CHECK-NEXT: return
// MAP-LABEL: func.func @train_step(
// MAP: call @weft_rt_cuda_sgemm_bias(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xf32>, %b: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xf32>, memref<1x4xf32, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %0 = arith.addf %in, %in_0 : f32
        linalg.yield %0 : f32
      }
    }
    return
  }
  func.func @train_step(%x: memref<8x3xf32>, %w: memref<4x3xf32>, %bias: memref<4xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xf32>, memref<4xf32>) -> ()
    return
  }
}

// -----

// The bias read by another kernel too: it is only read, so the pair fuses.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_cuda_sgemm_bias(
// CHECK: call @train_step.fused_3(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xf32>, %b: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xf32>, memref<1x4xf32, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %0 = arith.addf %in, %in_0 : f32
        linalg.yield %0 : f32
      }
    }
    return
  }
  func.func private @train_step.fused_3(%b: memref<4xf32>, %o: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%b : memref<4xf32>) outs(%o : memref<4xf32>) {
    ^bb0(%in: f32, %out: f32):
      %0 = arith.mulf %in, %in : f32
      linalg.yield %0 : f32
    }
    return
  }
  func.func @train_step(%x: memref<8x3xf32>, %w: memref<4x3xf32>, %bias: memref<4xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xf32>, memref<4xf32>) -> ()
    %sq = memref.view %ws[%c256][] : memref<512xi8> to memref<4xf32>
    call @train_step.fused_3(%bias, %sq) : (memref<4xf32>, memref<4xf32>) -> ()
    return
  }
}

// -----

// bf16 operands into an f32 product, the kernel rounding product + bias to
// bf16 once: the bf16-output epilogue with a bf16 bias.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_cuda_sbgemm_bf16_bias(
// CHECK-NOT: call
// MAP-LABEL: func.func @train_step(
// MAP: call @weft_rt_cuda_sbgemm_bf16_bias(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sbgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xbf16>, %b: memref<4xbf16>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xbf16> to memref<1x4xbf16, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xbf16>, memref<1x4xf32, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xbf16, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: bf16, %in_0: f32, %out: bf16):
        %e = arith.extf %in : bf16 to f32
        %s = arith.addf %in_0, %e : f32
        %r = arith.truncf %s : f32 to bf16
        linalg.yield %r : bf16
      }
    }
    return
  }
  func.func @train_step(%x: memref<8x3xbf16>, %w: memref<4x3xbf16>, %bias: memref<4xbf16>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xbf16> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xbf16> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sbgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xbf16>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xbf16>, memref<4xbf16>) -> ()
    return
  }
}

// -----

// bf16 operands, f32 product and output, f32 bias.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_cuda_sbgemm_bias(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sbgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xf32>, %b: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xf32>, memref<1x4xf32, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %0 = arith.addf %in, %in_0 : f32
        linalg.yield %0 : f32
      }
    }
    return
  }
  func.func @train_step(%x: memref<8x3xbf16>, %w: memref<4x3xbf16>, %bias: memref<4xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xbf16> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xbf16> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sbgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xf32>, memref<4xf32>) -> ()
    return
  }
}

// -----

// The product reshaped for the kernel (rows split, the last dimension
// kept), a forall over two dimensions, a dead row view.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_cuda_sgemm_bias(
// CHECK-NOT: memref.expand_shape

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<2x4x4xf32>, %o: memref<2x4x4xf32>, %b: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i, %j) in (2, 4) {
      %sp = memref.subview %p[%i, %j, 0] [1, 1, 4] [1, 1, 1] : memref<2x4x4xf32> to memref<1x1x4xf32, strided<[16, 4, 1], offset: ?>>
      %so = memref.subview %o[%i, %j, 0] [1, 1, 4] [1, 1, 1] : memref<2x4x4xf32> to memref<1x1x4xf32, strided<[16, 4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last3, #id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%b, %sp : memref<4xf32>, memref<1x1x4xf32, strided<[16, 4, 1], offset: ?>>) outs(%so : memref<1x1x4xf32, strided<[16, 4, 1], offset: ?>>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %0 = arith.addf %in, %in_0 : f32
        linalg.yield %0 : f32
      }
      %dead = memref.subview %o[%i, %j, 0] [1, 1, 4] [1, 1, 1] : memref<2x4x4xf32> to memref<1x1x4xf32, strided<[16, 4, 1], offset: ?>>
    }
    return
  }
  func.func @train_step(%x: memref<8x3xf32>, %w: memref<4x3xf32>, %bias: memref<4xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %e = memref.expand_shape %prod [[0, 1], [2]] output_shape [2, 4, 4] : memref<8x4xf32> into memref<2x4x4xf32>
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<2x4x4xf32>
    call @train_step.fused_1(%e, %out, %bias) : (memref<2x4x4xf32>, memref<2x4x4xf32>, memref<4xf32>) -> ()
    return
  }
}

// -----

// A product its GEMM rounds to bf16 (weft_rt_sbgemm_bf16, after
// --weft-fold-gemm-rounding) plus a bias, rounded again: no epilogue rounds
// twice.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_sbgemm_bf16(
// CHECK: call @train_step.fused_1(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sbgemm_bf16(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xbf16>, %o: memref<8x4xbf16>, %b: memref<4xbf16>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xbf16> to memref<1x4xbf16, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xbf16> to memref<1x4xbf16, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xbf16>, memref<1x4xbf16, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xbf16, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: bf16, %in_0: bf16, %out: bf16):
        %e = arith.extf %in : bf16 to f32
        %q = arith.extf %in_0 : bf16 to f32
        %s = arith.addf %q, %e : f32
        %r = arith.truncf %s : f32 to bf16
        linalg.yield %r : bf16
      }
    }
    return
  }
  func.func @train_step(%x: memref<8x3xbf16>, %w: memref<4x3xbf16>, %bias: memref<4xbf16>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xbf16>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xbf16> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xbf16> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xbf16> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sbgemm_bf16(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xbf16>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xbf16>, memref<8x4xbf16>, memref<4xbf16>) -> ()
    return
  }
}

// -----

// The product read by another kernel too.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_sgemm(
// CHECK: call @train_step.fused_1(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xf32>, %b: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xf32>, memref<1x4xf32, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %0 = arith.addf %in, %in_0 : f32
        linalg.yield %0 : f32
      }
    }
    return
  }
  func.func private @train_step.fused_2(%p: memref<8x4xf32>, %o: memref<8x4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : memref<8x4xf32>) outs(%o : memref<8x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    return
  }
  func.func @train_step(%x: memref<8x3xf32>, %w: memref<4x3xf32>, %bias: memref<4xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xf32>, memref<4xf32>) -> ()
    %copy = memref.view %ws[%c256][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_2(%prod, %copy) : (memref<8x4xf32>, memref<8x4xf32>) -> ()
    return
  }
}

// -----

// A bias along rows (the first dimension): no epilogue adds that.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_sgemm(
// CHECK: call @train_step.fused_1(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xf32>, %b: memref<8xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    linalg.generic {indexing_maps = [#first, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %p : memref<8xf32>, memref<8x4xf32>) outs(%o : memref<8x4xf32>) {
    ^bb0(%in: f32, %in_0: f32, %out: f32):
      %0 = arith.addf %in, %in_0 : f32
      linalg.yield %0 : f32
    }
    return
  }
  func.func @train_step(%x: memref<8x3xf32>, %w: memref<4x3xf32>, %bias: memref<8xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xf32>, memref<8xf32>) -> ()
    return
  }
}

// -----

// An accumulating GEMM (C += A B): its C holds more than the product.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_sgemm_accumulate(
// CHECK: call @train_step.fused_1(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sgemm_accumulate(i32, i32, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xf32>, %b: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xf32>, memref<1x4xf32, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %0 = arith.addf %in, %in_0 : f32
        linalg.yield %0 : f32
      }
    }
    return
  }
  func.func @train_step(%x: memref<8x3xf32>, %w: memref<4x3xf32>, %bias: memref<4xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sgemm_accumulate(%f, %t, %n8, %n4, %n3, %xp, %n3, %wp, %n3, %cp, %n4) : (i32, i32, i64, i64, i64, !llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xf32>, memref<4xf32>) -> ()
    return
  }
}

// -----

// A kernel doing more than the bias add.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_sgemm(
// CHECK: call @train_step.fused_1(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xf32>, %b: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xf32>, memref<1x4xf32, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %0 = arith.addf %in, %in_0 : f32
        %1 = arith.mulf %0, %0 : f32
        linalg.yield %1 : f32
      }
    }
    return
  }
  func.func @train_step(%x: memref<8x3xf32>, %w: memref<4x3xf32>, %bias: memref<4xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xf32>, memref<4xf32>) -> ()
    return
  }
}

// -----

// A kernel call in between: it could read or write what the fused call
// would write earlier.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_sgemm(
// CHECK: call @train_step.fused_1(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xf32>, %b: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xf32>, memref<1x4xf32, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %0 = arith.addf %in, %in_0 : f32
        linalg.yield %0 : f32
      }
    }
    return
  }
  func.func private @train_step.fused_2(%p: memref<8x4xf32>, %o: memref<8x4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : memref<8x4xf32>) outs(%o : memref<8x4xf32>) {
    ^bb0(%in: f32, %out: f32):
      linalg.yield %in : f32
    }
    return
  }
  func.func @train_step(%x: memref<8x3xf32>, %w: memref<4x3xf32>, %bias: memref<4xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %v = memref.view %ws[%c256][] : memref<512xi8> to memref<8x4xf32>
    %u = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_2(%v, %u) : (memref<8x4xf32>, memref<8x4xf32>) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xf32>, memref<4xf32>) -> ()
    return
  }
}

// -----

// The output where A was (the planner reuses A's bytes once the GEMM is
// done): the fused call would overwrite A while reading it.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_sgemm(
// CHECK: call @train_step.fused_1(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xf32>, %b: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xf32>, memref<1x4xf32, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %0 = arith.addf %in, %in_0 : f32
        linalg.yield %0 : f32
      }
    }
    return
  }
  func.func @train_step(%w: memref<4x3xf32>, %bias: memref<4xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %x = memref.view %ws[%c128][] : memref<512xi8> to memref<8x3xf32>
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xf32>, memref<4xf32>) -> ()
    return
  }
}

// -----

// A constant bias: device code reads constants only inside kernels.
// CHECK-LABEL: func.func @train_step(
// CHECK: call @weft_rt_sgemm(
// CHECK: call @train_step.fused_1(

#id = affine_map<(d0, d1) -> (d0, d1)>
#last = affine_map<(d0, d1) -> (d1)>
#first = affine_map<(d0, d1) -> (d0)>
#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#last3 = affine_map<(d0, d1, d2) -> (d2)>
module {
  memref.global "private" constant @bias : memref<4xf32> = dense<1.0>
  func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
  func.func private @train_step.fused_1(%p: memref<8x4xf32>, %o: memref<8x4xf32>, %b: memref<4xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (8) {
      %sp = memref.subview %p[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      %so = memref.subview %o[%i, 0] [1, 4] [1, 1] : memref<8x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#last, #id, #id], iterator_types = ["parallel", "parallel"]} ins(%b, %sp : memref<4xf32>, memref<1x4xf32, strided<[4, 1], offset: ?>>) outs(%so : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %0 = arith.addf %in, %in_0 : f32
        linalg.yield %0 : f32
      }
    }
    return
  }
  func.func @train_step(%x: memref<8x3xf32>, %w: memref<4x3xf32>, %ws: memref<512xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c128 = arith.constant 128 : index
    %c256 = arith.constant 256 : index
    %n1 = arith.constant 1 : i64
    %n8 = arith.constant 8 : i64
    %n4 = arith.constant 4 : i64
    %n3 = arith.constant 3 : i64
    %z = arith.constant 0 : i64
    %f = arith.constant 0 : i32
    %t = arith.constant 1 : i32
    %bias = memref.get_global @bias : memref<4xf32>
    %prod = memref.view %ws[%c0][] : memref<512xi8> to memref<8x4xf32>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<8x3xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<4x3xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %ci = memref.extract_aligned_pointer_as_index %prod : memref<8x4xf32> -> index
    %cj = arith.index_cast %ci : index to i64
    %cp = llvm.inttoptr %cj : i64 to !llvm.ptr
    call @weft_rt_sgemm(%n1, %f, %t, %n8, %n4, %n3, %xp, %n3, %z, %wp, %n3, %z, %cp, %n4, %z) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    %out = memref.view %ws[%c128][] : memref<512xi8> to memref<8x4xf32>
    call @train_step.fused_1(%prod, %out, %bias) : (memref<8x4xf32>, memref<8x4xf32>, memref<4xf32>) -> ()
    return
  }
}
