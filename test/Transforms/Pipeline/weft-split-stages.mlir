// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-assign-stages{cuts=l1},weft-attach-loss{kind=mse},weft-autodiff,weft-split-stages)' | FileCheck %s

// Two layers cut between them. Stage 0's forward piece passes its GELU's
// output on and keeps what its backward piece needs (its matmul's result,
// for the GELU's adjoint, which needs its input); stage 1's forward piece
// returns the loss and what its backward needs; stage 1's backward piece
// returns l1's gradient and the adjoint of the activation it received,
// which stage 0's backward piece takes with the input to make l0's
// gradient. @loss_grad calls the pieces in pipeline order and returns what
// it did.

// CHECK-LABEL: func.func private @loss_grad.forward0(
// CHECK-SAME: %{{.*}}: tensor<8x64xf32> {weft.input = "x"{{.*}}}, %{{.*}}: tensor<64x64xf32> {weft.param = "l0.weight"{{.*}}})
// CHECK-SAME: -> (tensor<8x64xf32>, tensor<8x64xf32>) attributes {weft.phase = "forward", weft.stage = 0 : i64}
// CHECK-NOT: weft.stage = 
// CHECK: return
// CHECK-LABEL: func.func private @loss_grad.forward1(
// CHECK-SAME: weft.stage = 1 : i64
// CHECK: weft.mse
// CHECK-LABEL: func.func private @loss_grad.backward1(
// CHECK-SAME: -> (tensor<8x64xf32>, tensor<64x64xf32>)
// CHECK-LABEL: func.func private @loss_grad.backward0(
// CHECK-SAME: -> tensor<64x64xf32>
// CHECK-LABEL: func.func @loss_grad(
// CHECK: %[[F0:.*]]:2 = call @loss_grad.forward0(
// CHECK: %[[F1:.*]]:2 = call @loss_grad.forward1(
// CHECK: %[[B1:.*]]:2 = call @loss_grad.backward1(
// CHECK: %[[B0:.*]] = call @loss_grad.backward0(
// CHECK: return %[[F1]]#1, %[[B0]], %[[B1]]#1
module {
  func.func @forward(%w0: tensor<64x64xf32> {weft.param = "l0.weight"},
                     %w1: tensor<64x64xf32> {weft.param = "l1.weight"},
                     %x: tensor<8x64xf32> {weft.input = "x"}) -> tensor<8x64xf32> {
    %a0 = weft.matmul %x, %w0 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r0 = weft.gelu %a0 : tensor<8x64xf32>
    %a1 = weft.matmul %r0, %w1 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    return %a1 : tensor<8x64xf32>
  }
}
