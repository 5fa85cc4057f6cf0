// RUN: weft-opt --weft-lower-to-linalg --cse %s | FileCheck %s

// Cross-entropy builds its row maximum and sum of exponentials as softmax
// does, so a training step's loss and its gradient's softmax share them
// after CSE: the backward reads the logits once (exp(x - max) / sum), not
// twice. The label's logit is read at the label, not picked by a pass
// over the row.

// CHECK-LABEL: func.func @loss_and_gradient
// CHECK: arith.maximumf
// CHECK-NOT: arith.maximumf
// CHECK: math.exp
// CHECK-NOT: math.exp
// CHECK: tensor.extract %arg0
// CHECK-NOT: arith.maximumf
// CHECK: math.exp
// CHECK-NOT: math.exp
// CHECK: return
func.func @loss_and_gradient(%x: tensor<4x10xf32>, %y: tensor<4xi64>)
    -> (tensor<f32>, tensor<4x10xf32>) {
  %0 = weft.cross_entropy %x, %y : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
  %1 = weft.softmax %x {axis = 1 : i64} : tensor<4x10xf32>
  return %0, %1 : tensor<f32>, tensor<4x10xf32>
}
