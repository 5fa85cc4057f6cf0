// RUN: weft-opt %s --weft-gpu-map-step --canonicalize | FileCheck %s
// RUN: weft-opt %s --weft-gpu-map-step --gpu-kernel-outlining --weft-gpu-merge-modules | FileCheck %s --check-prefix=MERGED

// A step of a mesh on the GPU: its collectives become the runtime's NCCL
// versions on the same (device) pointers, the axis index stays a host
// call, and a kernel reading this rank's block of a constant (a sequence
// parallel rank's positions start at its axis index) takes the block's
// host offset as an argument of its own.

module {
  memref.global "private" constant @__constant_16xf32 : memref<16xf32> = dense<2.0> {alignment = 64 : i64}
  func.func private @weft_rt_axis_index(!llvm.ptr, i64) -> i64
  func.func private @weft_rt_all_reduce_f32(!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64)
  func.func private @weft_rt_bucket_put_f32(!llvm.ptr, i64, i64, i64, i64, i64, !llvm.ptr, i64, i64)
  func.func private @weft_rt_bucket_start(!llvm.ptr, i64, i64, i64, i64)
  func.func private @weft_rt_bucket_get_f32(!llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64)

  func.func private @train_step.kernel_0(%c: memref<8xf32, strided<[1], offset: ?>>, %y: memref<8xf32>) attributes {llvm.bareptr, no_inline} {
    linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} ins(%c : memref<8xf32, strided<[1], offset: ?>>) outs(%y : memref<8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %in, %out : f32
      linalg.yield %a : f32
    }
    return
  }

  func.func @train_step(%ctx: !llvm.ptr, %y: memref<8xf32>, %g: memref<8xf32>) attributes {llvm.bareptr} {
    %mask = arith.constant 1 : i64
    %eight = arith.constant 8 : i64
    %zero = arith.constant 0 : i64
    %one = arith.constant 1 : i64
    %rank = call @weft_rt_axis_index(%ctx, %mask) : (!llvm.ptr, i64) -> i64
    %r = arith.index_cast %rank : i64 to index
    %c8 = arith.constant 8 : index
    %off = arith.muli %r, %c8 : index
    %all = memref.get_global @__constant_16xf32 : memref<16xf32>
    %mine = memref.subview %all[%off] [8] [1] : memref<16xf32> to memref<8xf32, strided<[1], offset: ?>>
    call @train_step.kernel_0(%mine, %y) : (memref<8xf32, strided<[1], offset: ?>>, memref<8xf32>) -> ()
    %yi = memref.extract_aligned_pointer_as_index %y : memref<8xf32> -> index
    %yj = arith.index_cast %yi : index to i64
    %yp = llvm.inttoptr %yj : i64 to !llvm.ptr
    %gi = memref.extract_aligned_pointer_as_index %g : memref<8xf32> -> index
    %gj = arith.index_cast %gi : index to i64
    %gp = llvm.inttoptr %gj : i64 to !llvm.ptr
    call @weft_rt_all_reduce_f32(%ctx, %mask, %yp, %gp, %eight) : (!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64) -> ()
    call @weft_rt_bucket_put_f32(%ctx, %mask, %zero, %zero, %eight, %zero, %gp, %one, %eight) : (!llvm.ptr, i64, i64, i64, i64, i64, !llvm.ptr, i64, i64) -> ()
    call @weft_rt_bucket_start(%ctx, %mask, %zero, %zero, %eight) : (!llvm.ptr, i64, i64, i64, i64) -> ()
    call @weft_rt_bucket_get_f32(%ctx, %mask, %zero, %zero, %yp, %one, %eight) : (!llvm.ptr, i64, i64, i64, !llvm.ptr, i64, i64) -> ()
    return
  }
}

// The kernel's copy reads the constant itself, at the offset it is given.
// CHECK-LABEL: func.func private @train_step.kernel_0.const(
// CHECK-SAME:      %{{.*}}: memref<8xf32, strided<[1], offset: ?>>, %{{.*}}: memref<8xf32>, %[[OFF:.*]]: index)
// CHECK:         gpu.launch
// CHECK:           %[[C:.*]] = memref.get_global @__constant_16xf32
// CHECK:           memref.subview %[[C]][%[[OFF]]] [8] [1]
// CHECK-LABEL: func.func @train_step(
// CHECK:         %[[RANK:.*]] = call @weft_rt_axis_index(
// CHECK:         %[[R:.*]] = arith.index_cast %[[RANK]]
// CHECK:         %[[O:.*]] = arith.muli %[[R]], %c8
// CHECK:         call @train_step.kernel_0.const(%{{.*}}, %{{.*}}, %[[O]])
// CHECK:         call @weft_rt_cuda_all_reduce_f32(
// CHECK:         call @weft_rt_cuda_bucket_put_f32(
// CHECK:         call @weft_rt_cuda_bucket_start(
// CHECK:         call @weft_rt_cuda_bucket_get_f32(
// CHECK-NOT:     call @weft_rt_all_reduce_f32

// The offset travels into the outlined kernel as a launch argument.
// MERGED: gpu.launch_func {{ *}}@weft_kernels::@train_step_kernel_0_const_kernel
// MERGED: gpu.func @train_step_kernel_0_const_kernel(
// MERGED-SAME: index
