// RUN: weft-opt %s --weft-codegen-pipeline="entry=train_step stop-after=buffers" \
// RUN:   | FileCheck %s

// The AdamW update of a 2-D and a 1-D parameter on buffers (gradients as
// inputs, the learning rate scaled by the gradient norm so the update
// follows the norm). Each parameter's update reads its gradient, parameter
// and moments once and writes the new parameter and moments straight into
// the step's result buffers (%arg11 to %arg16): the 1-D one is a single
// generic with three outputs. Both run in one loop after the norm, and no
// copy follows them.
// CHECK: linalg.generic {{.*}}iterator_types = ["parallel"]{{.*}} outs(%{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}} : memref<8xf32>, memref<8xf32>, memref<8xf32>)
// CHECK-LABEL: func.func @train_step(
// CHECK-NOT: memref.copy {{.*}}, %arg1{{[1-6]}} :
// CHECK: call @train_step.siblings_{{[0-9]+}}({{.*}}%arg11,{{.*}}%arg12)
// CHECK-NEXT: return
func.func @train_step(%w: tensor<4x8xf32>, %b: tensor<8xf32>,
                      %mw: tensor<4x8xf32>, %mb: tensor<8xf32>,
                      %vw: tensor<4x8xf32>, %vb: tensor<8xf32>,
                      %gw: tensor<4x8xf32>, %gb: tensor<8xf32>,
                      %lr: tensor<f32>, %c1: tensor<f32>, %c2: tensor<f32>)
    -> (tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>,
        tensor<4x8xf32>, tensor<8xf32>, tensor<f32>) {
  %b1 = weft.constant dense<0.9> : tensor<f32>
  %nb1 = weft.constant dense<0.1> : tensor<f32>
  %b2 = weft.constant dense<0.999> : tensor<f32>
  %nb2 = weft.constant dense<0.001> : tensor<f32>
  %eps = weft.constant dense<1.0e-8> : tensor<f32>
  %sqw = weft.mul %gw, %gw : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %nw = weft.reduce_sum %sqw {axes = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<f32>
  %sqb = weft.mul %gb, %gb : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %nb = weft.reduce_sum %sqb {axes = array<i64: 0>} : (tensor<8xf32>) -> tensor<f32>
  %n2 = weft.add %nw, %nb : (tensor<f32>, tensor<f32>) -> tensor<f32>
  %norm = weft.sqrt %n2 : tensor<f32>
  %step = weft.div %lr, %norm : (tensor<f32>, tensor<f32>) -> tensor<f32>

  %w0 = weft.mul %b1, %mw : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w1 = weft.mul %nb1, %gw : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %mw2 = weft.add %w0, %w1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w2 = weft.mul %b2, %vw : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w3 = weft.mul %nb2, %sqw : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %vw2 = weft.add %w2, %w3 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w4 = weft.sqrt %vw2 : tensor<4x8xf32>
  %w5 = weft.div %w4, %c2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %w6 = weft.add %w5, %eps : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %w7 = weft.div %mw2, %w6 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w8 = weft.mul %step, %w7 : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w9 = weft.sub %w, %w8 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>

  %b0 = weft.mul %b1, %mb : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %bb1 = weft.mul %nb1, %gb : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %mb2 = weft.add %b0, %bb1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %bb2 = weft.mul %b2, %vb : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %bb3 = weft.mul %nb2, %sqb : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %vb2 = weft.add %bb2, %bb3 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %bb4 = weft.sqrt %vb2 : tensor<8xf32>
  %bb5 = weft.div %bb4, %c2 : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %bb6 = weft.add %bb5, %eps : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %bb7 = weft.div %mb2, %bb6 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %bb8 = weft.mul %step, %bb7 : (tensor<f32>, tensor<8xf32>) -> tensor<8xf32>
  %bb9 = weft.sub %b, %bb8 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %w9, %bb9, %mw2, %mb2, %vw2, %vb2, %norm
      : tensor<4x8xf32>, tensor<8xf32>, tensor<4x8xf32>, tensor<8xf32>,
        tensor<4x8xf32>, tensor<8xf32>, tensor<f32>
}
