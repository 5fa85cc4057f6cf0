// Train-mode legalization (--weft-legalize-onnx=training=true), as PyTorch's
// model.train(); the default is eval mode (eval-mode cases live in
// normalization.mlir and elementwise.mlir).
// RUN: weft-opt --weft-legalize-onnx=training=true %s | FileCheck %s
// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s --check-prefix=EVAL

// BatchNorm normalizes with the batch's statistics and returns the running
// statistics' next values: momentum * running + (1 - momentum) * batch,
// with the unbiased variance (8 values per channel: 8 / 7).
// CHECK-LABEL: func.func @batch_norm
// CHECK-SAME: -> (tensor<4x3x2xf32>, tensor<3xf32> {weft.buffer = "bn.running_mean"}, tensor<3xf32> {weft.buffer = "bn.running_var"})
// CHECK: %[[MEAN:.*]] = weft.reduce_mean %arg0 {axes = array<i64: 0, 2>}
// CHECK-DAG: weft.constant dense<0.899999976> : tensor<f32>
// CHECK-DAG: weft.constant dense<1.14285719> : tensor<f32>
// CHECK: return %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x3x2xf32>, tensor<3xf32>, tensor<3xf32>
// EVAL-LABEL: func.func @batch_norm
// EVAL-SAME: -> tensor<4x3x2xf32>
// EVAL-NOT: reduce_mean
func.func @batch_norm(%x: tensor<4x3x2xf32>, %w: tensor<3xf32> {weft.param = "bn.weight"},
                      %b: tensor<3xf32> {weft.param = "bn.bias"},
                      %m: tensor<3xf32> {weft.buffer = "bn.running_mean"},
                      %v: tensor<3xf32> {weft.buffer = "bn.running_var"}) -> tensor<*xf32> {
  %0:3 = weft.onnx.node "BatchNormalization"(%x, %w, %b, %m, %v) {name = "/bn", opset = 15 : i64, attrs = {momentum = 0.9 : f32, training_mode = 1 : i64}} : (tensor<4x3x2xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>, tensor<3xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %0#0 : tensor<*xf32>
}

// Dropout exported in training mode draws a mask from the function's
// random-stream input, added on first use; at p = 0 and in eval mode it is
// the identity.
// CHECK-LABEL: func.func @dropout
// CHECK-SAME: %[[RNG:arg[0-9]+]]: tensor<i64> {weft.input = "rng"}
// CHECK: weft.dropout %arg0, %[[RNG]] {op_id = {{-?[0-9]+}} : i64, ratio = 2.500000e-01 : f64}
// CHECK-NOT: weft.dropout
// CHECK: return
// EVAL-LABEL: func.func @dropout
// EVAL-NOT: weft.dropout
// EVAL-NOT: rng
func.func @dropout(%x: tensor<4x5xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %p = weft.constant dense<0.25> : tensor<f32>
  %z = weft.constant dense<0.0> : tensor<f32>
  %t = weft.constant dense<true> : tensor<i1>
  %0:2 = weft.onnx.node "Dropout"(%x, %p, %t) {name = "/drop1/Dropout", opset = 13 : i64} : (tensor<4x5xf32>, tensor<f32>, tensor<i1>) -> (tensor<*xf32>, tensor<*xi1>)
  %1:2 = weft.onnx.node "Dropout"(%x, %z, %t) {name = "/drop2/Dropout", opset = 13 : i64} : (tensor<4x5xf32>, tensor<f32>, tensor<i1>) -> (tensor<*xf32>, tensor<*xi1>)
  return %0#0, %1#0 : tensor<*xf32>, tensor<*xf32>
}
