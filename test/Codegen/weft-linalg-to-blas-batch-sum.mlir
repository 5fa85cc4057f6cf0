// RUN: weft-opt %s --weft-linalg-to-blas --canonicalize -split-input-file \
// RUN:   | FileCheck %s

// A batch-reduce GEMM (the batch is summed into one C) becomes
// weft_rt_sgemm_batch_sum(batch, transA, transB, M, N, K, A, lda, strideA,
// B, ldb, strideB, C, ldc): a convolution's filter gradient, dW[O, CKK] =
// sum_n dY[n] (O x HW) x cols[n]^T (HW x CKK), B transposed.

// CHECK: func.func private @weft_rt_sgemm_batch_sum(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64)
// CHECK-LABEL: func.func @filter_gradient
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : i64
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : i64
// CHECK-DAG: %[[C288:.*]] = arith.constant 288 : i64
// CHECK-DAG: %[[C256:.*]] = arith.constant 256 : i64
// CHECK-DAG: %[[SA:.*]] = arith.constant 8192 : i64
// CHECK-DAG: %[[SB:.*]] = arith.constant 73728 : i64
// CHECK-DAG: %[[NO:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[YES:.*]] = arith.constant 1 : i32
// CHECK-NOT: linalg.fill
// CHECK: call @weft_rt_sgemm_batch_sum(%[[C64]], %[[NO]], %[[YES]], %[[C32]], %[[C288]], %[[C256]], %{{.*}}, %[[C256]], %[[SA]], %{{.*}}, %[[C256]], %[[SB]], %{{.*}}, %[[C288]])
// CHECK-NOT: linalg.batch_reduce_matmul
func.func @filter_gradient(%g: memref<64x32x256xf32>, %cols: memref<64x288x256xf32>,
                           %dw: memref<32x288xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%dw : memref<32x288xf32>)
  linalg.batch_reduce_matmul
      indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                       affine_map<(b, m, n, k) -> (b, n, k)>,
                       affine_map<(b, m, n, k) -> (m, n)>]
      ins(%g, %cols : memref<64x32x256xf32>, memref<64x288x256xf32>)
      outs(%dw : memref<32x288xf32>)
  return
}

// -----

// The default maps (no transposes), on strided views: the strides are
// read at run time.
// CHECK-LABEL: func.func @plain
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[NO:.*]] = arith.constant 0 : i32
// CHECK: call @weft_rt_sgemm_batch_sum(%[[C3]], %[[NO]], %[[NO]],
func.func @plain(%a: memref<3x4x5xf32>, %b: memref<3x5x6xf32, strided<[60, 12, 1]>>,
                 %c: memref<4x6xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x6xf32>)
  linalg.batch_reduce_matmul ins(%a, %b : memref<3x4x5xf32>, memref<3x5x6xf32, strided<[60, 12, 1]>>)
                             outs(%c : memref<4x6xf32>)
  return
}

// -----

// Without a zero fill the product adds to what C holds: no call (the
// runtime overwrites C). Neither for bf16 (no bf16 batch sum) nor when one
// side is shared by the batch (that is one GEMM of the summed other side).
// CHECK-LABEL: func.func @kept
// CHECK-NOT: call
// CHECK-COUNT-3: linalg.batch_reduce_matmul
// CHECK-NOT: call
func.func @kept(%a: memref<3x4x5xf32>, %b: memref<3x5x6xf32>, %c: memref<4x6xf32>,
                %ah: memref<3x4x5xbf16>, %bh: memref<3x5x6xbf16>,
                %a2: memref<4x5xf32>) {
  linalg.batch_reduce_matmul ins(%a, %b : memref<3x4x5xf32>, memref<3x5x6xf32>)
                             outs(%c : memref<4x6xf32>)
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<4x6xf32>)
  linalg.batch_reduce_matmul ins(%ah, %bh : memref<3x4x5xbf16>, memref<3x5x6xbf16>)
                             outs(%c : memref<4x6xf32>)
  linalg.fill ins(%zero : f32) outs(%c : memref<4x6xf32>)
  linalg.batch_reduce_matmul
      indexing_maps = [affine_map<(b, m, n, k) -> (m, k)>,
                       affine_map<(b, m, n, k) -> (b, k, n)>,
                       affine_map<(b, m, n, k) -> (m, n)>]
      ins(%a2, %b : memref<4x5xf32>, memref<3x5x6xf32>)
      outs(%c : memref<4x6xf32>)
  return
}
