// Hand-written steps need not put the whole forward first. A group whose
// recomputation would read a value defined after the backward first needs
// the group (%k below) stays stored, so the IR stays valid; a group whose
// inputs all come first is still recomputed.
// RUN: weft-opt %s --weft-recompute="mode=full function=step" | FileCheck %s

// CHECK-LABEL: func.func @step
func.func @step(%w: tensor<4x4xf32> {weft.param = "h.0.fc.weight"},
                %x: tensor<2x4xf32> {weft.input = "x"})
    -> (tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>) {
  // CHECK: %[[A:.*]] = weft.matmul
  // CHECK-NEXT: %[[T:.*]] = weft.tanh %[[A]]
  %a = weft.matmul %x, %w : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t = weft.tanh %a : tensor<2x4xf32>
  // The backward reads t here, before %k exists.
  // CHECK-NEXT: weft.mul %[[T]], %{{.*}}
  %g = weft.mul %t, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %k = weft.exp %x : tensor<2x4xf32>
  %s = weft.add %t, %k : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %v = weft.tanh %s : tensor<2x4xf32>
  %l = weft.reduce_sum %v {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
  %h = weft.mul %v, %v : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  // CHECK-NOT: weft.recomputed
  return %l, %g, %h : tensor<f32>, tensor<2x4xf32>, tensor<2x4xf32>
}
