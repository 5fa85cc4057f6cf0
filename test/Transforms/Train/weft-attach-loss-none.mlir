// RUN: weft-opt %s --weft-attach-loss=kind=none | FileCheck %s

// kind=none: the model already returns its loss (scalar output 0); @loss
// gets no labels argument and returns it as is.

// CHECK-LABEL: func.func @forward(
// CHECK-LABEL: func.func @loss(
// CHECK-SAME:      %{{[^:]*}}: tensor<3xf32> {weft.param = "w"}
// CHECK-SAME:      %{{[^:]*}}: tensor<3xf32> {weft.input = "target"})
// CHECK-SAME:      -> (tensor<f32> {weft.output = "loss"})
// CHECK:         %[[L:.*]] = weft.mse
// CHECK-NEXT:    return %[[L]] : tensor<f32>
func.func @forward(%w: tensor<3xf32> {weft.param = "w"},
                   %t: tensor<3xf32> {weft.input = "target"}) -> tensor<f32> {
  %0 = weft.mse %w, %t : (tensor<3xf32>, tensor<3xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}
