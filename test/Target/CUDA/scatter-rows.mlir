// RUN: weft-opt %s --weft-gpu-scatter-rows | FileCheck %s

// The embedding gradient's scatter-add kernel (each token's row added into
// the table's row of its id, in token order; negative ids counted from the
// end, then clamped) becomes the CUDA runtime's sorted scatter, which keeps
// every element's order of additions. Other kernels stay.

module {
  memref.global "private" constant @positions : memref<8xi64> = dense<[0, 1, 2, 3, 4, 5, 6, 7]>
  // The scatter, f32 updates.
  func.func private @train_step.kernel_0(%ids: memref<8xi64>, %table: memref<1x5x4xf32>, %g: memref<1x8x4xf32>) attributes {llvm.bareptr, no_inline} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    scf.for %t = %c0 to %c8 step %c1 {
      %id = memref.load %ids[%t] : memref<8xi64>
      %i = arith.index_cast %id : i64 to index
      %neg = arith.cmpi slt, %i, %c0 : index
      %wrapped = arith.addi %i, %c5 : index
      %sel = arith.select %neg, %wrapped, %i : index
      %lo = arith.maxsi %sel, %c0 : index
      %row = arith.minsi %lo, %c4 : index
      %dst = memref.subview %table[0, %row, 0] [1, 1, 4] [1, 1, 1] : memref<1x5x4xf32> to memref<1x1x4xf32, strided<[20, 4, 1], offset: ?>>
      %src = memref.subview %g[0, %t, 0] [1, 1, 4] [1, 1, 1] : memref<1x8x4xf32> to memref<1x1x4xf32, strided<[32, 4, 1], offset: ?>>
      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%src : memref<1x1x4xf32, strided<[32, 4, 1], offset: ?>>) outs(%dst : memref<1x1x4xf32, strided<[20, 4, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %s = arith.addf %out, %in : f32
        linalg.yield %s : f32
      }
    }
    return
  }
  // The same with bf16 updates, widened before the addition.
  func.func private @train_step.kernel_1(%ids: memref<8xi64>, %table: memref<1x5x4xf32>, %g: memref<1x8x4xbf16>) attributes {llvm.bareptr, no_inline} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    scf.for %t = %c0 to %c8 step %c1 {
      %id = memref.load %ids[%t] : memref<8xi64>
      %i = arith.index_cast %id : i64 to index
      %neg = arith.cmpi slt, %i, %c0 : index
      %wrapped = arith.addi %i, %c5 : index
      %sel = arith.select %neg, %wrapped, %i : index
      %lo = arith.maxsi %sel, %c0 : index
      %row = arith.minsi %lo, %c4 : index
      %dst = memref.subview %table[0, %row, 0] [1, 1, 4] [1, 1, 1] : memref<1x5x4xf32> to memref<1x1x4xf32, strided<[20, 4, 1], offset: ?>>
      %src = memref.subview %g[0, %t, 0] [1, 1, 4] [1, 1, 1] : memref<1x8x4xbf16> to memref<1x1x4xbf16, strided<[32, 4, 1], offset: ?>>
      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%src : memref<1x1x4xbf16, strided<[32, 4, 1], offset: ?>>) outs(%dst : memref<1x1x4xf32, strided<[20, 4, 1], offset: ?>>) {
      ^bb0(%in: bf16, %out: f32):
        %e = arith.extf %in : bf16 to f32
        %s = arith.addf %out, %e : f32
        linalg.yield %s : f32
      }
    }
    return
  }
  // Not the scatter: the update is squared first.
  func.func private @train_step.kernel_2(%ids: memref<8xi64>, %table: memref<1x5x4xf32>, %g: memref<1x8x4xf32>) attributes {llvm.bareptr, no_inline} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    scf.for %t = %c0 to %c8 step %c1 {
      %id = memref.load %ids[%t] : memref<8xi64>
      %i = arith.index_cast %id : i64 to index
      %neg = arith.cmpi slt, %i, %c0 : index
      %wrapped = arith.addi %i, %c5 : index
      %sel = arith.select %neg, %wrapped, %i : index
      %lo = arith.maxsi %sel, %c0 : index
      %row = arith.minsi %lo, %c4 : index
      %dst = memref.subview %table[0, %row, 0] [1, 1, 4] [1, 1, 1] : memref<1x5x4xf32> to memref<1x1x4xf32, strided<[20, 4, 1], offset: ?>>
      %src = memref.subview %g[0, %t, 0] [1, 1, 4] [1, 1, 1] : memref<1x8x4xf32> to memref<1x1x4xf32, strided<[32, 4, 1], offset: ?>>
      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%src : memref<1x1x4xf32, strided<[32, 4, 1], offset: ?>>) outs(%dst : memref<1x1x4xf32, strided<[20, 4, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %m = arith.mulf %in, %in : f32
        %s = arith.addf %out, %m : f32
        linalg.yield %s : f32
      }
    }
    return
  }
  // Not the scatter: the rows land at column 1 of a wider table.
  func.func private @train_step.kernel_3(%ids: memref<8xi64>, %table: memref<1x5x5xf32>, %g: memref<1x8x4xf32>) attributes {llvm.bareptr, no_inline} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    scf.for %t = %c0 to %c8 step %c1 {
      %id = memref.load %ids[%t] : memref<8xi64>
      %i = arith.index_cast %id : i64 to index
      %neg = arith.cmpi slt, %i, %c0 : index
      %wrapped = arith.addi %i, %c5 : index
      %sel = arith.select %neg, %wrapped, %i : index
      %lo = arith.maxsi %sel, %c0 : index
      %row = arith.minsi %lo, %c4 : index
      %dst = memref.subview %table[0, %row, 1] [1, 1, 4] [1, 1, 1] : memref<1x5x5xf32> to memref<1x1x4xf32, strided<[25, 5, 1], offset: ?>>
      %src = memref.subview %g[0, %t, 0] [1, 1, 4] [1, 1, 1] : memref<1x8x4xf32> to memref<1x1x4xf32, strided<[32, 4, 1], offset: ?>>
      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%src : memref<1x1x4xf32, strided<[32, 4, 1], offset: ?>>) outs(%dst : memref<1x1x4xf32, strided<[25, 5, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %s = arith.addf %out, %in : f32
        linalg.yield %s : f32
      }
    }
    return
  }
  // Not the clamp the step computes: ids used as they are.
  func.func private @train_step.kernel_4(%ids: memref<8xi64>, %table: memref<1x5x4xf32>, %g: memref<1x8x4xf32>) attributes {llvm.bareptr, no_inline} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c8 = arith.constant 8 : index
    %c5 = arith.constant 5 : index
    %c4 = arith.constant 4 : index
    scf.for %t = %c0 to %c8 step %c1 {
      %id = memref.load %ids[%t] : memref<8xi64>
      %row = arith.index_cast %id : i64 to index
      %dst = memref.subview %table[0, %row, 0] [1, 1, 4] [1, 1, 1] : memref<1x5x4xf32> to memref<1x1x4xf32, strided<[20, 4, 1], offset: ?>>
      %src = memref.subview %g[0, %t, 0] [1, 1, 4] [1, 1, 1] : memref<1x8x4xf32> to memref<1x1x4xf32, strided<[32, 4, 1], offset: ?>>
      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%src : memref<1x1x4xf32, strided<[32, 4, 1], offset: ?>>) outs(%dst : memref<1x1x4xf32, strided<[20, 4, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %s = arith.addf %out, %in : f32
        linalg.yield %s : f32
      }
    }
    return
  }
  func.func @train_step(%ids: memref<8xi64>, %table: memref<1x5x4xf32>, %g: memref<1x8x4xf32>, %g16: memref<1x8x4xbf16>, %wide: memref<1x5x5xf32>) attributes {llvm.bareptr} {
    call @train_step.kernel_0(%ids, %table, %g) : (memref<8xi64>, memref<1x5x4xf32>, memref<1x8x4xf32>) -> ()
    call @train_step.kernel_1(%ids, %table, %g16) : (memref<8xi64>, memref<1x5x4xf32>, memref<1x8x4xbf16>) -> ()
    call @train_step.kernel_2(%ids, %table, %g) : (memref<8xi64>, memref<1x5x4xf32>, memref<1x8x4xf32>) -> ()
    call @train_step.kernel_3(%ids, %wide, %g) : (memref<8xi64>, memref<1x5x5xf32>, memref<1x8x4xf32>) -> ()
    call @train_step.kernel_4(%ids, %table, %g) : (memref<8xi64>, memref<1x5x4xf32>, memref<1x8x4xf32>) -> ()
    // Constant ids (the positions): device code reads constants only in
    // kernels, so the kernel stays.
    %pos = memref.get_global @positions : memref<8xi64>
    call @train_step.kernel_0(%pos, %table, %g) : (memref<8xi64>, memref<1x5x4xf32>, memref<1x8x4xf32>) -> ()
    return
  }
}

// The bf16 kernel has no caller left; kernel_0 still has one.
// CHECK-NOT:     func.func private @train_step.kernel_1(
// CHECK:         func.func private @train_step.kernel_0(
// CHECK-NOT:     func.func private @train_step.kernel_1(
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:      %[[IDS:[^:]*]]: memref<8xi64>, %[[TABLE:[^:]*]]: memref<1x5x4xf32>, %[[G:[^:]*]]: memref<1x8x4xf32>, %[[G16:[^:]*]]: memref<1x8x4xbf16>
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : i64
// CHECK-DAG:     %[[C5:.*]] = arith.constant 5 : i64
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : i64
// CHECK:         call @weft_rt_cuda_scatter_add_rows_f32(%{{.*}}, %[[C8]], %{{.*}}, %[[C5]], %{{.*}}, %[[C4]]) : (!llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64) -> ()
// CHECK:         call @weft_rt_cuda_scatter_add_rows_bf16(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) : (!llvm.ptr, i64, !llvm.ptr, i64, !llvm.ptr, i64) -> ()
// CHECK:         call @train_step.kernel_2(
// CHECK:         call @train_step.kernel_3(
// CHECK:         call @train_step.kernel_4(
// CHECK:         %[[POS:.*]] = memref.get_global @positions
// CHECK:         call @train_step.kernel_0(%[[POS]],
// CHECK:         return
