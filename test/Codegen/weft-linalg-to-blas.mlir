// RUN: weft-opt %s --weft-linalg-to-blas --canonicalize -split-input-file \
// RUN:   | FileCheck %s

// weft_rt_sgemm(batch, transA, transB, M, N, K, A, lda, strideA, B, ldb,
//               strideB, C, ldc, strideC); canonicalization folds the
// metadata of static shapes into constants.

// CHECK: func.func private @weft_rt_sgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[A:.*]]: memref<8x4xf32>, %[[B:.*]]: memref<4x2xf32>, %[[C:.*]]: memref<8x2xf32>)
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[NO:.*]] = arith.constant 0 : i32
// CHECK-NOT: linalg.fill
// CHECK: %[[IA:.*]] = memref.extract_aligned_pointer_as_index %[[A]]
// CHECK: %[[PA:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[B]]
// CHECK: %[[PB:.*]] = llvm.inttoptr
// CHECK: memref.extract_aligned_pointer_as_index %[[C]]
// CHECK: %[[PC:.*]] = llvm.inttoptr
// CHECK: call @weft_rt_sgemm(%[[C1]], %[[NO]], %[[NO]], %[[C8]], %[[C2]], %[[C4]], %[[PA]], %[[C4]], %[[C0]], %[[PB]], %[[C2]], %[[C0]], %[[PC]], %[[C2]], %[[C0]])
// CHECK-NOT: linalg.matmul
func.func @matmul(%a: memref<8x4xf32>, %b: memref<4x2xf32>, %c: memref<8x2xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x2xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x2xf32>)
                outs(%c : memref<8x2xf32>)
  return
}

// -----

// B read transposed through the indexing maps: transB = 1.

// CHECK-LABEL: func.func @matmul_transpose_b
// CHECK-DAG: %[[NO:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[YES:.*]] = arith.constant 1 : i32
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK: call @weft_rt_sgemm(%{{.*}}, %[[NO]], %[[YES]], %{{.*}}, %{{.*}}, %[[C4]], %{{.*}}, %[[C4]], %{{.*}}, %{{.*}}, %[[C4]],
func.func @matmul_transpose_b(%a: memref<8x4xf32>, %b: memref<2x4xf32>, %c: memref<8x2xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x2xf32>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                 affine_map<(m, n, k) -> (n, k)>,
                                 affine_map<(m, n, k) -> (m, n)>]
                ins(%a, %b : memref<8x4xf32>, memref<2x4xf32>)
                outs(%c : memref<8x2xf32>)
  return
}

// -----

// A batched product whose A has no batch axis: A's batch stride is 0; B's
// and C's come from their strided metadata. The output is a strided view.

// CHECK-LABEL: func.func @batch_matmul_broadcast
// CHECK-DAG: %[[C3:.*]] = arith.constant 3 : i64
// CHECK-DAG: %[[C32:.*]] = arith.constant 32 : i64
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i64
// CHECK: %[[VIEW:.*]] = memref.subview
// CHECK: memref.extract_aligned_pointer_as_index %[[VIEW]]
// CHECK: %[[BASE:.*]] = llvm.inttoptr
// CHECK: %[[PC:.*]] = llvm.getelementptr %[[BASE]][1]
// CHECK: call @weft_rt_sgemm(%[[C3]], %{{.*}}, %{{.*}}, %[[C8]], %[[C2]], %[[C4]], %{{.*}}, %[[C4]], %[[C0]], %{{.*}}, %[[C2]], %[[C8]], %[[PC]], %[[C4]], %[[C32]])
func.func @batch_matmul_broadcast(%a: memref<8x4xf32>, %b: memref<3x4x2xf32>, %c: memref<3x8x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %view = memref.subview %c[0, 0, 1] [3, 8, 2] [1, 1, 1]
      : memref<3x8x4xf32> to memref<3x8x2xf32, strided<[32, 4, 1], offset: 1>>
  linalg.fill ins(%zero : f32) outs(%view : memref<3x8x2xf32, strided<[32, 4, 1], offset: 1>>)
  linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (m, k)>,
                                       affine_map<(b, m, n, k) -> (b, k, n)>,
                                       affine_map<(b, m, n, k) -> (b, m, n)>]
                      ins(%a, %b : memref<8x4xf32>, memref<3x4x2xf32>)
                      outs(%view : memref<3x8x2xf32, strided<[32, 4, 1], offset: 1>>)
  return
}

// -----

// bf16 operands (--precision bf16): into f32 C, weft_rt_sbgemm; into bf16
// C, weft_rt_sbgemm_bf16. Same arguments as weft_rt_sgemm; pointer offsets
// count bf16 elements.

// CHECK-DAG: func.func private @weft_rt_sbgemm(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
// CHECK-DAG: func.func private @weft_rt_sbgemm_bf16(i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @matmul_bf16
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : i64
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : i64
// CHECK-DAG: %[[C2:.*]] = arith.constant 2 : i64
// CHECK-DAG: %[[C1:.*]] = arith.constant 1 : i64
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i64
// CHECK-DAG: %[[NO:.*]] = arith.constant 0 : i32
// CHECK-DAG: %[[YES:.*]] = arith.constant 1 : i32
// CHECK-NOT: linalg.fill
// CHECK: %[[BASE:.*]] = llvm.inttoptr
// CHECK: %[[PA:.*]] = llvm.getelementptr %[[BASE]][4] : (!llvm.ptr) -> !llvm.ptr, bf16
// CHECK: call @weft_rt_sbgemm(%[[C1]], %[[NO]], %[[NO]], %[[C8]], %[[C2]], %[[C4]], %[[PA]], %[[C8]], %[[C0]], %{{.*}}, %[[C2]], %[[C0]], %{{.*}}, %[[C2]], %[[C0]])
// CHECK: call @weft_rt_sbgemm_bf16(%{{.*}}, %[[NO]], %[[YES]], %[[C8]], %[[C2]], %[[C4]],
// CHECK-NOT: linalg.matmul
func.func @matmul_bf16(%wide: memref<8x8xbf16>, %b: memref<4x2xbf16>, %bt: memref<2x4xbf16>,
                       %c: memref<8x2xf32>, %ch: memref<8x2xbf16>) {
  %a = memref.subview %wide[0, 4] [8, 4] [1, 1]
      : memref<8x8xbf16> to memref<8x4xbf16, strided<[8, 1], offset: 4>>
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x2xf32>)
  linalg.matmul ins(%a, %b : memref<8x4xbf16, strided<[8, 1], offset: 4>>, memref<4x2xbf16>)
                outs(%c : memref<8x2xf32>)
  %zeroh = arith.constant 0.0 : bf16
  linalg.fill ins(%zeroh : bf16) outs(%ch : memref<8x2xbf16>)
  linalg.matmul indexing_maps = [affine_map<(m, n, k) -> (m, k)>,
                                 affine_map<(m, n, k) -> (n, k)>,
                                 affine_map<(m, n, k) -> (m, n)>]
                ins(%a, %bt : memref<8x4xbf16, strided<[8, 1], offset: 4>>, memref<2x4xbf16>)
                outs(%ch : memref<8x2xbf16>)
  return
}

// -----

// Left as loops: accumulating into C (no zero fill before it), mixed f32 x
// bf16 operands, f16, and an operand whose last axis is strided.

// CHECK-LABEL: func.func @not_blas
// CHECK-NOT: call @weft_rt_
// CHECK-COUNT-4: linalg.matmul
func.func @not_blas(%a: memref<8x4xf32>, %b: memref<4x2xf32>, %c: memref<8x2xf32>,
                    %bh: memref<4x2xbf16>, %ah16: memref<8x4xf16>, %bh16: memref<4x2xf16>,
                    %wide: memref<8x8xf32>) {
  linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x2xf32>)
                outs(%c : memref<8x2xf32>)
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%c : memref<8x2xf32>)
  linalg.matmul ins(%a, %bh : memref<8x4xf32>, memref<4x2xbf16>)
                outs(%c : memref<8x2xf32>)
  linalg.fill ins(%zero : f32) outs(%c : memref<8x2xf32>)
  linalg.matmul ins(%ah16, %bh16 : memref<8x4xf16>, memref<4x2xf16>)
                outs(%c : memref<8x2xf32>)
  %every_other = memref.subview %wide[0, 0] [8, 4] [1, 2]
      : memref<8x8xf32> to memref<8x4xf32, strided<[8, 2]>>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x2xf32>)
  linalg.matmul ins(%every_other, %b : memref<8x4xf32, strided<[8, 2]>>, memref<4x2xf32>)
                outs(%c : memref<8x2xf32>)
  return
}
