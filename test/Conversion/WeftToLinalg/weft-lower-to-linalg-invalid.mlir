// RUN: weft-opt %s --weft-lower-to-linalg -split-input-file -verify-diagnostics

// An op without a lowering fails the pass and is named.
func.func @onnx_node(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{failed to legalize operation 'weft.onnx.node'}}
  %0 = weft.onnx.node "Relu"(%x) {name = "r", opset = 17 : i64} : (tensor<4xf32>) -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
