// RUN: weft-opt %s --weft-gpu-map-step | FileCheck %s

// Fused attention calls stay on the host, as GEMM calls do: the CUDA
// runtime's kernels (weft_rt_cuda_attention_*, the CPU ones' arguments)
// take the step's device pointers and launch on their own. f32 and bf16
// alike; the log-sum-exp buffer is f32 for both.

module {
  func.func private @weft_rt_attention_f32(i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
  func.func private @weft_rt_attention_grad_f32(i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
  func.func private @weft_rt_attention_bf16(i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
  func.func private @weft_rt_attention_grad_bf16(i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)

  func.func @train_step(%x: memref<2x8x4xf32>, %xb: memref<2x8x4xbf16>, %ws: memref<1024xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c256 = arith.constant 256 : index
    %c512 = arith.constant 512 : index
    %o = memref.view %ws[%c0][] : memref<1024xi8> to memref<2x8x4xf32>
    %lse = memref.view %ws[%c256][] : memref<1024xi8> to memref<2x8xf32>
    %ob = memref.view %ws[%c512][] : memref<1024xi8> to memref<2x8x4xbf16>
    %xi = memref.extract_aligned_pointer_as_index %x : memref<2x8x4xf32> -> index
    %xj = arith.index_cast %xi : index to i64
    %xp = llvm.inttoptr %xj : i64 to !llvm.ptr
    %bi = memref.extract_aligned_pointer_as_index %xb : memref<2x8x4xbf16> -> index
    %bj = arith.index_cast %bi : index to i64
    %bp = llvm.inttoptr %bj : i64 to !llvm.ptr
    %oi = memref.extract_aligned_pointer_as_index %o : memref<2x8x4xf32> -> index
    %oj = arith.index_cast %oi : index to i64
    %op = llvm.inttoptr %oj : i64 to !llvm.ptr
    %li = memref.extract_aligned_pointer_as_index %lse : memref<2x8xf32> -> index
    %lj = arith.index_cast %li : index to i64
    %lp = llvm.inttoptr %lj : i64 to !llvm.ptr
    %obi = memref.extract_aligned_pointer_as_index %ob : memref<2x8x4xbf16> -> index
    %obj = arith.index_cast %obi : index to i64
    %obp = llvm.inttoptr %obj : i64 to !llvm.ptr
    %h = arith.constant 2 : i64
    %t = arith.constant 8 : i64
    %d = arith.constant 4 : i64
    %scale = arith.constant 0.5 : f32
    %causal = arith.constant 1 : i32
    call @weft_rt_attention_f32(%h, %t, %t, %d, %d, %scale, %causal, %xp, %xp, %xp, %op, %lp) : (i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    call @weft_rt_attention_grad_f32(%h, %t, %t, %d, %d, %scale, %causal, %op, %xp, %xp, %xp, %op, %lp, %xp, %xp, %xp) : (i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    call @weft_rt_attention_bf16(%h, %t, %t, %d, %d, %scale, %causal, %bp, %bp, %bp, %obp, %lp) : (i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    call @weft_rt_attention_grad_bf16(%h, %t, %t, %d, %d, %scale, %causal, %obp, %bp, %bp, %bp, %obp, %lp, %bp, %bp, %bp) : (i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
    return
  }
}

// The CPU kernels' declarations go with their last call.
// CHECK-NOT: @weft_rt_attention_
// CHECK-DAG: func.func private @weft_rt_cuda_attention_f32(i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// CHECK-DAG: func.func private @weft_rt_cuda_attention_grad_f32(i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr)
// CHECK-DAG: func.func private @weft_rt_cuda_attention_bf16(
// CHECK-DAG: func.func private @weft_rt_cuda_attention_grad_bf16(
// CHECK-LABEL: func.func @train_step(
// CHECK-NOT:     gpu.launch
// CHECK:         call @weft_rt_cuda_attention_f32(
// CHECK:         call @weft_rt_cuda_attention_grad_f32(
// CHECK:         call @weft_rt_cuda_attention_bf16(
// CHECK:         call @weft_rt_cuda_attention_grad_bf16(
// CHECK-NOT:     gpu.launch
// CHECK-NOT: @weft_rt_attention_
