// RUN: not weft-opt %s --weft-linalg-to-blas 2>&1 | FileCheck %s

// A product into bf16 whose C was not just zero-filled is no GEMM call;
// its loops would sum in bf16, not round f32 sums once. An error, not
// different numbers.

// CHECK: error: internal: a product into bf16 did not become a weft_rt_sbgemm_bf16 call
func.func @accumulating(%a: memref<8x4xbf16>, %b: memref<4x2xbf16>, %c: memref<8x2xbf16>) {
  linalg.matmul ins(%a, %b : memref<8x4xbf16>, memref<4x2xbf16>) outs(%c : memref<8x2xbf16>)
  return
}
