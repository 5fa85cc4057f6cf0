// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-assign-stages{stages=2},weft-attach-loss{kind=mse},weft-autodiff)' | FileCheck %s --check-prefix=GRAD

// The backward pass inherits the cut: --weft-autodiff gives each op it
// builds the stage of the forward op it differentiates.
// GRAD-LABEL: func.func @loss_grad
// The balance puts the first matmul alone on stage 0 (the relu joins the
// second). The adjoint of the second matmul's input and its weight's
// gradient, and the relu's adjoint: stage 1; the first weight's gradient:
// stage 0. The loss (added after the cut) has none: it runs last.
// GRAD: %[[A0:.*]] = weft.matmul %arg2, %arg0 {transpose_rhs = true, weft.stage = 0 : i64}
// GRAD: %[[R0:.*]] = weft.relu %[[A0]] {weft.stage = 1 : i64}
// GRAD: weft.mse
// GRAD-NOT: weft.stage
// GRAD: weft.matmul %{{.*}}, %arg1 {weft.stage = 1 : i64}
// GRAD: weft.matmul %{{.*}}, %{{.*}} {transpose_lhs = true, weft.stage = 1 : i64}
// GRAD: weft.cmp gt, %[[R0]], %{{.*}} {weft.stage = 1 : i64}
// GRAD: weft.matmul %{{.*}}, %arg2 {transpose_lhs = true, weft.stage = 0 : i64}
module {
  func.func @forward(%w0: tensor<64x64xf32> {weft.param = "l0.weight"},
                     %w1: tensor<64x64xf32> {weft.param = "l1.weight"},
                     %x: tensor<8x64xf32> {weft.input = "x"}) -> tensor<8x64xf32> {
    %a0 = weft.matmul %x, %w0 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r0 = weft.relu %a0 : tensor<8x64xf32>
    %a1 = weft.matmul %r0, %w1 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    return %a1 : tensor<8x64xf32>
  }
}
