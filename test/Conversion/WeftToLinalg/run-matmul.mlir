// weft.matmul in every layout the lowering distinguishes, lowered and
// executed against weft-eval (test/lib/check_lowering.py).
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// CHECK: OK @matrix
func.func @matrix(%a: tensor<5x7xf32>, %b: tensor<7x3xf32>, %at: tensor<7x5xf32>,
                  %bt: tensor<3x7xf32>)
    -> (tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>) {
  %0 = weft.matmul %a, %b : (tensor<5x7xf32>, tensor<7x3xf32>) -> tensor<5x3xf32>
  %1 = weft.matmul %at, %b {transpose_lhs = true} : (tensor<7x5xf32>, tensor<7x3xf32>) -> tensor<5x3xf32>
  %2 = weft.matmul %a, %bt {transpose_rhs = true} : (tensor<5x7xf32>, tensor<3x7xf32>) -> tensor<5x3xf32>
  %3 = weft.matmul %at, %bt {transpose_lhs = true, transpose_rhs = true} : (tensor<7x5xf32>, tensor<3x7xf32>) -> tensor<5x3xf32>
  return %0, %1, %2, %3 : tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>, tensor<5x3xf32>
}

// Batched lhs times a 2-D weight: one GEMM with the batch folded into M.
// CHECK: OK @folded_batch
func.func @folded_batch(%x: tensor<2x3x4x6xf32>, %w: tensor<6x5xf32>, %wt: tensor<5x6xf32>,
                        %w1: tensor<1x6x5xf32>)
    -> (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) {
  %0 = weft.matmul %x, %w : (tensor<2x3x4x6xf32>, tensor<6x5xf32>) -> tensor<2x3x4x5xf32>
  %1 = weft.matmul %x, %wt {transpose_rhs = true} : (tensor<2x3x4x6xf32>, tensor<5x6xf32>) -> tensor<2x3x4x5xf32>
  %2 = weft.matmul %x, %w1 : (tensor<2x3x4x6xf32>, tensor<1x6x5xf32>) -> tensor<2x3x4x5xf32>
  return %0, %1, %2 : tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>
}

// batch_matmul: full batches, a broadcast 2-D operand (by map or, when
// transposed, materialized), and partial batch broadcasting.
// CHECK: OK @batched
func.func @batched(%a: tensor<2x3x4x6xf32>, %b: tensor<2x3x6x5xf32>,
                   %at: tensor<2x3x6x4xf32>, %bt: tensor<2x3x5x6xf32>,
                   %m: tensor<4x6xf32>, %mt: tensor<6x4xf32>, %w: tensor<6x5xf32>,
                   %pa: tensor<2x1x4x6xf32>, %pb: tensor<3x6x5xf32>)
    -> (tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>,
        tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>) {
  %0 = weft.matmul %a, %b : (tensor<2x3x4x6xf32>, tensor<2x3x6x5xf32>) -> tensor<2x3x4x5xf32>
  %1 = weft.matmul %at, %bt {transpose_lhs = true, transpose_rhs = true} : (tensor<2x3x6x4xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x5xf32>
  %2 = weft.matmul %m, %b : (tensor<4x6xf32>, tensor<2x3x6x5xf32>) -> tensor<2x3x4x5xf32>
  %3 = weft.matmul %mt, %bt {transpose_lhs = true, transpose_rhs = true} : (tensor<6x4xf32>, tensor<2x3x5x6xf32>) -> tensor<2x3x4x5xf32>
  %4 = weft.matmul %at, %w {transpose_lhs = true} : (tensor<2x3x6x4xf32>, tensor<6x5xf32>) -> tensor<2x3x4x5xf32>
  %5 = weft.matmul %pa, %pb : (tensor<2x1x4x6xf32>, tensor<3x6x5xf32>) -> tensor<2x3x4x5xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>,
      tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>, tensor<2x3x4x5xf32>
}

// CHECK: OK @matrix_f64
func.func @matrix_f64(%a: tensor<3x9xf64>, %b: tensor<4x9xf64>) -> tensor<3x4xf64> {
  %0 = weft.matmul %a, %b {transpose_rhs = true} : (tensor<3x9xf64>, tensor<4x9xf64>) -> tensor<3x4xf64>
  return %0 : tensor<3x4xf64>
}
