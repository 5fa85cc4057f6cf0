// RUN: weft-opt %s --weft-gpu-map-step=vector-lanes=false --canonicalize | FileCheck %s
// RUN: weft-opt %s --weft-gpu-map-step --gpu-kernel-outlining --weft-gpu-merge-modules | FileCheck %s --check-prefix=MERGED
// RUN: weft-opt %s --weft-gpu-map-step="block-size=64 vector-lanes=false" --canonicalize | FileCheck %s --check-prefix=B64

// Each kernel function of the planned step launches its loops; the step
// keeps address arithmetic, kernel calls and GEMM calls. vector-lanes=false
// keeps a thread per iteration, as checked here; vector-lanes.mlir checks
// the vector accesses.

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#all = affine_map<(d0, d1) -> ()>
module {
  memref.global "private" constant @__constant_8xf32 : memref<8xf32> = dense<1.0> {alignment = 64 : i64}
  func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)

  // A fused row kernel: the forall over rows, each row's elementwise loop
  // (one thread per element after collapsing).
  func.func private @train_step.fused_0(%x: memref<300x8xf32>, %y: memref<300x8xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    scf.forall (%i) in (300) {
      %sx = memref.subview %x[%i, 0] [1, 8] [1, 1] : memref<300x8xf32> to memref<1x8xf32, strided<[8, 1], offset: ?>>
      %sy = memref.subview %y[%i, 0] [1, 8] [1, 1] : memref<300x8xf32> to memref<1x8xf32, strided<[8, 1], offset: ?>>
      linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]} ins(%sx : memref<1x8xf32, strided<[8, 1], offset: ?>>) outs(%sy : memref<1x8xf32, strided<[8, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %e = math.exp %in : f32
        linalg.yield %e : f32
      }
    }
    return
  }
  // A column reduction (reduction dimension first): a thread per column.
  func.func private @train_step.kernel_1(%y: memref<300x8xf32>, %s: memref<8xf32>) attributes {llvm.bareptr, no_inline} {
    linalg.generic {indexing_maps = [#id2, #col], iterator_types = ["reduction", "parallel"]} ins(%y : memref<300x8xf32>) outs(%s : memref<8xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %out, %in : f32
      linalg.yield %a : f32
    }
    return
  }
  // A full reduction into a scalar, reading a constant the step passes.
  func.func private @train_step.kernel_2(%s: memref<8xf32>, %c: memref<8xf32>, %n: memref<f32>) attributes {llvm.bareptr, no_inline} {
    linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>, affine_map<(d0) -> (d0)>, affine_map<(d0) -> ()>], iterator_types = ["reduction"]} ins(%s, %c : memref<8xf32>, memref<8xf32>) outs(%n : memref<f32>) {
    ^bb0(%in: f32, %w: f32, %out: f32):
      %m = arith.mulf %in, %w : f32
      %a = arith.addf %out, %m : f32
      linalg.yield %a : f32
    }
    return
  }

  func.func @train_step(%x: memref<300x8xf32>, %w: memref<8x8xf32>, %n: memref<f32>, %ws: memref<12800xi8> {weft.workspace}) attributes {llvm.bareptr} {
    %c0 = arith.constant 0 : index
    %c9600 = arith.constant 9600 : index
    %y = memref.view %ws[%c0][] : memref<12800xi8> to memref<300x8xf32>
    %z = memref.view %ws[%c9600][] : memref<12800xi8> to memref<8xf32>
    call @train_step.fused_0(%x, %y) : (memref<300x8xf32>, memref<300x8xf32>) -> ()
    %p = memref.extract_aligned_pointer_as_index %y : memref<300x8xf32> -> index
    %pi = arith.index_cast %p : index to i64
    %pp = llvm.inttoptr %pi : i64 to !llvm.ptr
    %wi = memref.extract_aligned_pointer_as_index %w : memref<8x8xf32> -> index
    %wj = arith.index_cast %wi : index to i64
    %wp = llvm.inttoptr %wj : i64 to !llvm.ptr
    %one = arith.constant 1 : i64
    %zero = arith.constant 0 : i64
    %i0 = arith.constant 0 : i32
    %m = arith.constant 300 : i64
    %k = arith.constant 8 : i64
    call @weft_rt_sgemm(%one, %i0, %i0, %m, %k, %k, %pp, %k, %zero, %wp, %k, %zero, %pp, %k, %zero) : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    call @train_step.kernel_1(%y, %z) : (memref<300x8xf32>, memref<8xf32>) -> ()
    %k8 = memref.get_global @__constant_8xf32 : memref<8xf32>
    call @train_step.kernel_2(%z, %k8, %n) : (memref<8xf32>, memref<8xf32>, memref<f32>) -> ()
    return
  }
}

// 300 x 8 = 2400 iterations: 10 blocks of 256 threads, each thread one
// element (row g / 8, column g % 8), guarded against the last block's tail.
// CHECK-LABEL: func.func private @train_step.fused_0(
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG:     %[[C2400:.*]] = arith.constant 2400 : index
// CHECK-DAG:     %[[C10:.*]] = arith.constant 10 : index
// CHECK-DAG:     %[[C256:.*]] = arith.constant 256 : index
// CHECK:         gpu.launch blocks(%[[BX:[^,]*]], {{.*}}) in ({{.*}} = %[[C10]], {{.*}}) threads(%[[TX:[^,]*]], {{.*}}) in (%[[BDX:[^ ]*]] = %[[C256]],
// CHECK:           %[[BASE:.*]] = arith.muli %[[BX]], %[[BDX]]
// CHECK:           %[[G:.*]] = arith.addi %[[BASE]], %[[TX]]
// CHECK:           arith.cmpi slt, %[[G]], %[[C2400]]
// CHECK:           scf.if
// CHECK-DAG:         arith.remsi %[[G]], %[[C8]]
// CHECK-DAG:         arith.divsi %[[G]], %[[C8]]
// CHECK:             math.exp
// CHECK:           gpu.terminator
// The column reduction: one block of 8 x 32 threads, x walking the 8
// columns (consecutive addresses), y splitting the 300 rows; the partial
// sums meet in a shared-memory tree along y.
// CHECK-LABEL: func.func private @train_step.kernel_1(
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads(%[[CX:[^,]*]], %[[CY:[^,]*]], {{.*}}) in ({{.*}} = %c8, {{.*}} = %c32,
// CHECK-SAME:      workgroup(%[[CS:.*]] : memref<32x8xf32, #gpu.address_space<workgroup>>)
// CHECK:           scf.for %[[R:.*]] = %[[CY]] to %c300 step %c32 iter_args(
// CHECK:             memref.load %{{.*}}[%[[R]], %[[CX]]]
// CHECK:             arith.addf
// CHECK:           memref.store %{{.*}}, %[[CS]][%[[CY]], %[[CX]]]
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      arith.cmpi ult, %[[CY]], %c16
// CHECK:           gpu.terminator
// The full reduction: one block (8 elements: the smallest block, 32
// threads) with its shared-memory buffer. The constant the step passes is
// read inside the kernel (a copy of the kernel reads it there).
// CHECK-LABEL: func.func private @train_step.kernel_2.const(
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %{{c1.*}}, {{.*}}) threads({{.*}}) in ({{.*}} = %c32,
// CHECK-SAME:      workgroup(%[[SH:.*]] : memref<32xf32, #gpu.address_space<workgroup>>)
// CHECK:           memref.get_global @__constant_8xf32
// CHECK:           scf.for
// CHECK:           gpu.barrier
// CHECK:           gpu.terminator
// The step: no launch of its own, the device GEMM between the kernels.
// CHECK-LABEL: func.func @train_step(
// CHECK-NOT:     gpu.launch
// CHECK:         call @train_step.fused_0(
// CHECK:         call @weft_rt_cuda_sgemm(
// CHECK:         call @train_step.kernel_1(
// CHECK:         call @train_step.kernel_2.const(
// CHECK-NOT:     gpu.launch
// CHECK:         return

// One gpu.module holds the kernels, named as PTX allows.
// MERGED: gpu.launch_func {{ *}}@weft_kernels::@train_step_fused_0_kernel
// MERGED: gpu.module @weft_kernels {
// MERGED-DAG: gpu.func @train_step_fused_0_kernel(
// MERGED-DAG: gpu.func @train_step_kernel_1_kernel(
// MERGED-DAG: gpu.func @train_step_kernel_2_const_kernel(
// MERGED-DAG: memref.global "private" constant @__constant_8xf32
// MERGED: gpu.launch_func {{ *}}@weft_kernels::@train_step_kernel_1_kernel
// MERGED: gpu.launch_func {{ *}}@weft_kernels::@train_step_kernel_2_const_kernel
// MERGED-NOT: gpu.module

// B64: gpu.launch blocks({{.*}}) in ({{.*}} = %c38, {{.*}}) threads({{.*}}) in ({{.*}} = %c64,
