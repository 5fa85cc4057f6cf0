// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// Piecewise activations select the negative branch with `x < 0`.
// CHECK-LABEL: func.func @piecewise
// CHECK: %[[SLOPE:.*]] = weft.constant dense<2.000000e-01> : tensor<f32>
// CHECK: %[[LEAK:.*]] = weft.mul %arg0, %[[SLOPE]]
// CHECK: %[[NEG:.*]] = weft.cmp lt, %arg0, %{{.*}} : (tensor<8xf32>, tensor<f32>) -> tensor<8xi1>
// CHECK: %[[LEAKY:.*]] = weft.where %[[NEG]], %[[LEAK]], %arg0
// PRelu's slope is an input.
// CHECK: %[[PMUL:.*]] = weft.mul %arg0, %arg1 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK: %[[PNEG:.*]] = weft.cmp lt, %arg0
// CHECK: %[[PRELU:.*]] = weft.where %[[PNEG]], %[[PMUL]], %arg0
// Elu: alpha * (exp(min(x, 0)) - 1), so exp never overflows.
// CHECK: %[[ZERO:.*]] = weft.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[MIN:.*]] = weft.min %arg0, %[[ZERO]]
// CHECK: %[[EXP:.*]] = weft.exp %[[MIN]]
// CHECK: %[[ONE:.*]] = weft.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[ALPHA:.*]] = weft.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[EM1:.*]] = weft.sub %[[EXP]], %[[ONE]]
// CHECK: %[[ENEG:.*]] = weft.mul %[[EM1]], %[[ALPHA]]
// CHECK: %[[ELU:.*]] = weft.where %{{.*}}, %[[ENEG]], %arg0
// Selu scales an Elu with Selu's default alpha by gamma.
// CHECK: weft.constant dense<1.67326319> : tensor<f32>
// CHECK: %[[SELU_ELU:.*]] = weft.where
// CHECK: %[[GAMMA:.*]] = weft.constant dense<1.05070102> : tensor<f32>
// CHECK: %[[SELU:.*]] = weft.mul %[[SELU_ELU]], %[[GAMMA]]
// Celu is an Elu of x / alpha, scaled by alpha.
// CHECK: %[[CSCALED:.*]] = weft.div %arg0, %{{.*}}
// CHECK: weft.min %[[CSCALED]]
// CHECK: %[[CELU:.*]] = weft.where
// CHECK: %[[THETA:.*]] = weft.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[ABOVE:.*]] = weft.cmp gt, %arg0, %[[THETA]]
// CHECK: %[[TRELU:.*]] = weft.where %[[ABOVE]], %arg0, %{{.*}} : (tensor<8xi1>, tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
// CHECK: return %[[LEAKY]], %[[PRELU]], %[[ELU]], %[[SELU]], %[[CELU]], %[[TRELU]]
func.func @piecewise(%x: tensor<8xf32>, %s: tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "LeakyRelu"(%x) {name = "leaky", opset = 16 : i64, attrs = {alpha = 2.000000e-01 : f32}} : (tensor<8xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "PRelu"(%x, %s) {name = "prelu", opset = 16 : i64} : (tensor<8xf32>, tensor<8xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Elu"(%x) {name = "elu", opset = 6 : i64, attrs = {alpha = 5.000000e-01 : f32}} : (tensor<8xf32>) -> tensor<*xf32>
  %3 = weft.onnx.node "Selu"(%x) {name = "selu", opset = 6 : i64} : (tensor<8xf32>) -> tensor<*xf32>
  %4 = weft.onnx.node "Celu"(%x) {name = "celu", opset = 12 : i64, attrs = {alpha = 2.0 : f32}} : (tensor<8xf32>) -> tensor<*xf32>
  %5 = weft.onnx.node "ThresholdedRelu"(%x) {name = "trelu", opset = 10 : i64} : (tensor<8xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// CHECK-LABEL: func.func @smooth
// HardSigmoid: max(0, min(1, alpha * x + beta)).
// CHECK: %[[A:.*]] = weft.constant dense<0.166666672> : tensor<f32>
// CHECK: %[[AX:.*]] = weft.mul %arg0, %[[A]]
// CHECK: %[[B:.*]] = weft.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[LIN:.*]] = weft.add %[[AX]], %[[B]]
// CHECK: %[[CAP:.*]] = weft.min %[[LIN]]
// CHECK: %[[HSIG:.*]] = weft.max %[[CAP]]
// HardSwish: x * HardSigmoid(x) with alpha = 1/6.
// CHECK: %[[GATE:.*]] = weft.max
// CHECK: %[[HSWISH:.*]] = weft.mul %arg0, %[[GATE]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// Softplus: relu(x) + log(1 + exp(-|x|)).
// CHECK: %[[ABS:.*]] = weft.abs %arg0
// CHECK: %[[NABS:.*]] = weft.neg %[[ABS]]
// CHECK: %[[TAIL:.*]] = weft.exp %[[NABS]]
// CHECK: %[[T1:.*]] = weft.add %[[TAIL]]
// CHECK: %[[LOG:.*]] = weft.log %[[T1]]
// CHECK: %[[RELU:.*]] = weft.relu %arg0
// CHECK: %[[SOFTPLUS:.*]] = weft.add %[[RELU]], %[[LOG]]
// Softsign: x / (1 + |x|).
// CHECK: %[[MAG:.*]] = weft.abs %arg0
// CHECK: %[[DEN:.*]] = weft.add %[[MAG]]
// CHECK: %[[SOFTSIGN:.*]] = weft.div %arg0, %[[DEN]]
// Mish: x * tanh(softplus(x)).
// CHECK: %[[SP:.*]] = weft.add %{{.*}}, %{{.*}} : (tensor<8xf32>, tensor<8xf32>)
// CHECK: %[[TANH:.*]] = weft.tanh %[[SP]]
// CHECK: %[[MISH:.*]] = weft.mul %arg0, %[[TANH]]
// CHECK: %[[GELU:.*]] = weft.gelu %arg0 approximate = tanh : tensor<8xf32>
// CHECK: return %[[HSIG]], %[[HSWISH]], %[[SOFTPLUS]], %[[SOFTSIGN]], %[[MISH]], %[[GELU]]
func.func @smooth(%x: tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "HardSigmoid"(%x) {name = "hsig", opset = 6 : i64, attrs = {alpha = 0.16666667 : f32}} : (tensor<8xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "HardSwish"(%x) {name = "hswish", opset = 14 : i64} : (tensor<8xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Softplus"(%x) {name = "softplus", opset = 1 : i64} : (tensor<8xf32>) -> tensor<*xf32>
  %3 = weft.onnx.node "Softsign"(%x) {name = "softsign", opset = 1 : i64} : (tensor<8xf32>) -> tensor<*xf32>
  %4 = weft.onnx.node "Mish"(%x) {name = "mish", opset = 18 : i64} : (tensor<8xf32>) -> tensor<*xf32>
  %5 = weft.onnx.node "Gelu"(%x) {name = "gelu", opset = 20 : i64, attrs = {approximate = "tanh"}} : (tensor<8xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
