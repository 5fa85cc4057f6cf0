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

// Inference BatchNormalization: per-channel parameters reshaped to [C, 1, 1]
// broadcast along axis 1 of NCHW; rank 2 ([N, C], BatchNorm1d) needs none.
// The running statistics become buffers: they are never trained by gradient.
// CHECK-LABEL: func.func @batch_norm
// CHECK-SAME: %arg3: tensor<8xf32> {weft.param = "bn.bias"}, %arg4: tensor<8xf32> {weft.buffer = "bn.running_mean"}, %arg5: tensor<8xf32> {weft.buffer = "bn.running_var"}
// CHECK: %[[SCALE:.*]] = weft.reshape %arg2 : tensor<8xf32> -> tensor<8x1x1xf32>
// CHECK: %[[BIAS:.*]] = weft.reshape %arg3 : tensor<8xf32> -> tensor<8x1x1xf32>
// CHECK: %[[MEAN:.*]] = weft.reshape %arg4 : tensor<8xf32> -> tensor<8x1x1xf32>
// CHECK: %[[VAR:.*]] = weft.reshape %arg5 : tensor<8xf32> -> tensor<8x1x1xf32>
// CHECK: %[[CENTERED:.*]] = weft.sub %arg0, %[[MEAN]] : (tensor<4x8x5x5xf32>, tensor<8x1x1xf32>) -> tensor<4x8x5x5xf32>
// CHECK: %[[EPS:.*]] = weft.constant dense<1.000000e-03> : tensor<f32>
// CHECK: %[[VE:.*]] = weft.add %[[VAR]], %[[EPS]]
// CHECK: %[[INV:.*]] = weft.rsqrt %[[VE]]
// CHECK: %[[FACTOR:.*]] = weft.mul %[[INV]], %[[SCALE]]
// CHECK: %[[SCALED:.*]] = weft.mul %[[CENTERED]], %[[FACTOR]]
// CHECK: %[[BN:.*]] = weft.add %[[SCALED]], %[[BIAS]] : (tensor<4x8x5x5xf32>, tensor<8x1x1xf32>) -> tensor<4x8x5x5xf32>
// CHECK: %[[C1:.*]] = weft.sub %arg1, %arg4 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: weft.constant dense<9.99999974E-6> : tensor<f32>
// CHECK: %[[BN1:.*]] = weft.add %{{.*}}, %arg3 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK: return %[[BN]], %[[BN1]]
func.func @batch_norm(%x: tensor<4x8x5x5xf32>, %y: tensor<4x8xf32>, %g: tensor<8xf32> {weft.param = "bn.weight"}, %b: tensor<8xf32> {weft.param = "bn.bias"}, %m: tensor<8xf32> {weft.param = "bn.running_mean"}, %v: tensor<8xf32> {weft.param = "bn.running_var"}) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "BatchNormalization"(%x, %g, %b, %m, %v) {name = "bn", opset = 15 : i64, attrs = {epsilon = 1.000000e-03 : f32, momentum = 0.9 : f32}} : (tensor<4x8x5x5xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "BatchNormalization"(%y, %g, %b, %m, %v) {name = "bn1d", opset = 9 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// InstanceNormalization: statistics over the spatial axes, then the
// per-channel scale and bias (PyTorch's GroupNorm exports as one).
// CHECK-LABEL: func.func @instance_norm
// CHECK: %[[SCALE:.*]] = weft.reshape %arg1 : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: %[[BIAS:.*]] = weft.reshape %arg2 : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: %[[MEAN:.*]] = weft.reduce_mean %arg0 {axes = array<i64: 2>, keep_dims = true} : (tensor<2x4x6xf32>) -> tensor<2x4x1xf32>
// CHECK: %[[CENTERED:.*]] = weft.sub %arg0, %[[MEAN]]
// CHECK: %[[SQ:.*]] = weft.mul %[[CENTERED]], %[[CENTERED]]
// CHECK: %[[VAR:.*]] = weft.reduce_mean %[[SQ]] {axes = array<i64: 2>, keep_dims = true}
// CHECK: %[[VE:.*]] = weft.add %[[VAR]]
// CHECK: %[[INV:.*]] = weft.rsqrt %[[VE]]
// CHECK: %[[FACTOR:.*]] = weft.mul %[[INV]], %[[SCALE]]
// CHECK: %[[SCALED:.*]] = weft.mul %[[CENTERED]], %[[FACTOR]]
// CHECK: %[[OUT:.*]] = weft.add %[[SCALED]], %[[BIAS]] : (tensor<2x4x6xf32>, tensor<4x1xf32>) -> tensor<2x4x6xf32>
// CHECK: return %[[OUT]]
func.func @instance_norm(%x: tensor<2x4x6xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "InstanceNormalization"(%x, %g, %b) {name = "in", opset = 6 : i64, attrs = {epsilon = 1.000000e-05 : f32}} : (tensor<2x4x6xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}
