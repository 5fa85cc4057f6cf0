// Layers as the planner finds them (ModelStats): an importer's folded
// weights (onnx::MatMul_*) do not place an op, so the layer's matmuls stay
// in h.0 through their activation operand; past h.0's last numbered
// weight (the projection's bias), an op reading an unnumbered one (the
// head) opens the epilogue,
// which is in no layer and is not recomputed.
// RUN: weft-opt %s --weft-autodiff --weft-recompute=mode=full | FileCheck %s

func.func @loss(%g: tensor<4xf32> {weft.param = "h.0.ln.weight"},
                %b: tensor<4xf32> {weft.param = "h.0.ln.bias"},
                %w: tensor<4x4xf32> {weft.param = "onnx::MatMul_7"},
                %p: tensor<4x4xf32> {weft.param = "onnx::MatMul_8"},
                %pb: tensor<4xf32> {weft.param = "h.0.proj.bias"},
                %head: tensor<4x4xf32> {weft.param = "onnx::MatMul_9"},
                %x: tensor<2x4xf32> {weft.input = "x"}) -> tensor<f32> {
  %n = weft.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 1.0e-05 : f64} : (tensor<2x4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %a = weft.matmul %n, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t = weft.tanh %a : tensor<2x4xf32>
  %o = weft.matmul %t, %p : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %ob = weft.add %o, %pb : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
  %y = weft.add %ob, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %h = weft.matmul %y, %head : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %e = weft.tanh %h : tensor<2x4xf32>
  %l = weft.reduce_sum %e {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME: %[[X:[^:]+]]: tensor<2x4xf32> {weft.input = "x"}
// CHECK: weft.reduce_sum %[[E:[0-9]+]] {axes
// The head's tanh is read as stored.
// CHECK: weft.mul %[[E]], %[[E]]
// h.0 from its input x: the norm and both of its matmuls' operands.
// CHECK: %[[RN:.*]] = weft.layer_norm %[[X]], {{.*}}weft.recomputed
// CHECK-NEXT: %[[RA:.*]] = weft.matmul %[[RN]], {{.*}}weft.recomputed
// CHECK-NEXT: weft.tanh %[[RA]] {weft.recomputed}
// CHECK-NOT: weft.recomputed
// CHECK: return
