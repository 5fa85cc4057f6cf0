// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// CHECK-LABEL: func.func @softmax
// CHECK: weft.softmax %arg0 {axis = 2 : i64} : tensor<2x3x4xf32>
// CHECK: weft.log_softmax %arg0 {axis = 1 : i64} : tensor<2x3x4xf32>
func.func @softmax(%x: tensor<2x3x4xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Softmax"(%x) {name = "sm", opset = 13 : i64} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "LogSoftmax"(%x) {name = "lsm", opset = 13 : i64, attrs = {axis = -2 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// Before opset 13, softmax normalizes the flattened trailing block [axis, rank).
// CHECK-LABEL: func.func @softmax_opset11
// CHECK: %[[FLAT:.*]] = weft.reshape %arg0 : tensor<2x3x4xf32> -> tensor<2x12xf32>
// CHECK: %[[SM:.*]] = weft.softmax %[[FLAT]] {axis = 1 : i64} : tensor<2x12xf32>
// CHECK: weft.reshape %[[SM]] : tensor<2x12xf32> -> tensor<2x3x4xf32>
// On the last axis both semantics agree.
// CHECK: weft.log_softmax %arg0 {axis = 2 : i64} : tensor<2x3x4xf32>
func.func @softmax_opset11(%x: tensor<2x3x4xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Softmax"(%x) {name = "sm", opset = 11 : i64} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "LogSoftmax"(%x) {name = "lsm", opset = 11 : i64, attrs = {axis = -1 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// CHECK-LABEL: func.func @layer_norm
// CHECK: weft.layer_norm %arg0, %arg1, %arg2 {axis = 2 : i64, epsilon = 9.9999997473787516E-6 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
// Without B the bias is zeros; a smaller scale is broadcast.
// CHECK: %[[SCALE:.*]] = weft.broadcast %arg3 : tensor<32xf32> -> tensor<16x32xf32>
// CHECK: %[[ZEROS:.*]] = weft.constant dense<0.000000e+00> : tensor<16x32xf32>
// CHECK: weft.layer_norm %arg0, %[[SCALE]], %[[ZEROS]] {axis = 1 : i64, epsilon = 1.000000e-03 : f64}
func.func @layer_norm(%x: tensor<4x16x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>, %s: tensor<32xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "LayerNormalization"(%x, %g, %b) {name = "ln", opset = 17 : i64, attrs = {axis = -1 : i64, epsilon = 9.99999974E-6 : f32}} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "LayerNormalization"(%x, %s) {name = "ln2", opset = 17 : i64, attrs = {axis = 1 : i64, epsilon = 1.000000e-03 : f64}} : (tensor<4x16x32xf32>, tensor<32xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// CHECK-LABEL: func.func @reduce
// CHECK: weft.reduce_mean %arg0 {axes = array<i64: 2>, keep_dims = true} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
// CHECK: weft.reduce_mean %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3xf32>
// CHECK: weft.reduce_sum %arg0 {axes = array<i64: 1>, keep_dims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
// No axes reduces everything.
// CHECK: weft.reduce_sum %arg0 {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
// CHECK: weft.reduce_max %arg0 {axes = array<i64: 0>, keep_dims = true} : (tensor<2x3x4xf32>) -> tensor<1x3x4xf32>
// ReduceSum before opset 13 reads the attribute.
// CHECK: weft.reduce_sum %arg0 {axes = array<i64: 0>, keep_dims = true}
// With noop_with_empty_axes and no axes the input passes through.
// CHECK: return {{.*}}, %arg0 :
func.func @reduce(%x: tensor<2x3x4xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "ReduceMean"(%x) {name = "mean", opset = 13 : i64, attrs = {axes = array<i64: -1>}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "ReduceMean"(%x) {name = "mean2", opset = 17 : i64, attrs = {axes = array<i64: 2, 0, -1>, keepdims = 0 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %axes = weft.constant dense<[1]> : tensor<1xi64>
  %2 = weft.onnx.node "ReduceSum"(%x, %axes) {name = "sum", opset = 13 : i64} : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  %3 = weft.onnx.node "ReduceSum"(%x) {name = "sum_all", opset = 13 : i64, attrs = {keepdims = 0 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %first = weft.constant dense<[0]> : tensor<1xi64>
  %4 = weft.onnx.node "ReduceMax"(%x, %first) {name = "max18", opset = 18 : i64} : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  %5 = weft.onnx.node "ReduceSum"(%x) {name = "sum11", opset = 11 : i64, attrs = {axes = array<i64: 0>}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %6 = weft.onnx.node "ReduceSum"(%x) {name = "noop", opset = 13 : i64, attrs = {noop_with_empty_axes = 1 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
