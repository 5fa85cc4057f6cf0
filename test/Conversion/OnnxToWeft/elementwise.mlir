// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// Binary ops broadcast; the function type follows the legalized results.
// CHECK-LABEL: func.func @binary
// CHECK-SAME: -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
func.func @binary(%a: tensor<4x8xf32>, %b: tensor<8xf32>)
    -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  // CHECK: %[[ADD:.*]] = weft.add %arg0, %arg1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[SUB:.*]] = weft.sub %arg1, %arg0 : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  // CHECK: %[[MUL:.*]] = weft.mul %[[ADD]], %[[SUB]]
  // CHECK: %[[DIV:.*]] = weft.div %[[MUL]], %arg1
  // CHECK: %[[POW:.*]] = weft.pow %[[DIV]], %arg0
  // CHECK: return %[[ADD]], %[[SUB]], %[[MUL]], %[[DIV]], %[[POW]]
  %0 = weft.onnx.node "Add"(%a, %b) {name = "add", opset = 17 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Sub"(%b, %a) {name = "sub", opset = 17 : i64} : (tensor<8xf32>, tensor<4x8xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Mul"(%0, %1) {name = "mul", opset = 17 : i64} : (tensor<*xf32>, tensor<*xf32>) -> tensor<*xf32>
  %3 = weft.onnx.node "Div"(%2, %b) {name = "div", opset = 17 : i64} : (tensor<*xf32>, tensor<8xf32>) -> tensor<*xf32>
  %4 = weft.onnx.node "Pow"(%3, %a) {name = "pow", opset = 17 : i64} : (tensor<*xf32>, tensor<4x8xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// An integer exponent is cast to the base's type; the cast folds.
// CHECK-LABEL: func.func @pow_int_exponent
// CHECK: %[[TWO:.*]] = weft.constant dense<2.000000e+00> : tensor<f32>
// CHECK: weft.pow %arg0, %[[TWO]] : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
func.func @pow_int_exponent(%x: tensor<4xf32>) -> tensor<*xf32> {
  %c = weft.constant dense<2> : tensor<i64>
  %0 = weft.onnx.node "Pow"(%x, %c) {name = "pow", opset = 15 : i64} : (tensor<4xf32>, tensor<i64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// CHECK-LABEL: func.func @variadic
// CHECK: %[[M0:.*]] = weft.max %arg0, %arg1
// CHECK: %[[M1:.*]] = weft.max %[[M0]], %arg2
// CHECK: weft.min %arg0, %arg1
// CHECK: %[[S0:.*]] = weft.add %arg0, %arg1
// CHECK: weft.add %[[S0]], %arg2
// Mean is the sum divided by the input count.
// CHECK: %[[T0:.*]] = weft.add %arg0, %arg1
// CHECK: %[[T1:.*]] = weft.add %[[T0]], %arg2
// CHECK: %[[THREE:.*]] = weft.constant dense<3.000000e+00> : tensor<f32>
// CHECK: weft.div %[[T1]], %[[THREE]] : (tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
func.func @variadic(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<1xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Max"(%a, %b, %c) {name = "max", opset = 13 : i64} : (tensor<4xf32>, tensor<4xf32>, tensor<1xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Min"(%a, %b) {name = "min", opset = 13 : i64} : (tensor<4xf32>, tensor<4xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Sum"(%a, %b, %c) {name = "sum", opset = 13 : i64} : (tensor<4xf32>, tensor<4xf32>, tensor<1xf32>) -> tensor<*xf32>
  %3 = weft.onnx.node "Mean"(%a, %b, %c) {name = "mean", opset = 13 : i64} : (tensor<4xf32>, tensor<4xf32>, tensor<1xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// CHECK-LABEL: func.func @unary
// CHECK: %[[SQRT:.*]] = weft.sqrt %arg0 : tensor<2x3xf32>
// CHECK: %[[ONE:.*]] = weft.constant dense<1.000000e+00> : tensor<f32>
// CHECK: %[[RCP:.*]] = weft.div %[[ONE]], %[[SQRT]] : (tensor<f32>, tensor<2x3xf32>) -> tensor<2x3xf32>
// CHECK: %[[NEG:.*]] = weft.neg %[[RCP]]
// CHECK: %[[ABS:.*]] = weft.abs %[[NEG]]
// CHECK: %[[EXP:.*]] = weft.exp %[[ABS]]
// CHECK: %[[LOG:.*]] = weft.log %[[EXP]]
// CHECK: %[[RELU:.*]] = weft.relu %[[LOG]]
// CHECK: %[[TANH:.*]] = weft.tanh %[[RELU]]
// CHECK: %[[SIG:.*]] = weft.sigmoid %[[TANH]]
// CHECK: %[[ERF:.*]] = weft.erf %[[SIG]]
// CHECK: return %[[ERF]] : tensor<2x3xf32>
func.func @unary(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Sqrt"(%x) {name = "sqrt", opset = 17 : i64} : (tensor<2x3xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Reciprocal"(%0) {name = "rcp", opset = 17 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Neg"(%1) {name = "neg", opset = 17 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  %3 = weft.onnx.node "Abs"(%2) {name = "abs", opset = 17 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  %4 = weft.onnx.node "Exp"(%3) {name = "exp", opset = 17 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  %5 = weft.onnx.node "Log"(%4) {name = "log", opset = 17 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  %6 = weft.onnx.node "Relu"(%5) {name = "relu", opset = 17 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  %7 = weft.onnx.node "Tanh"(%6) {name = "tanh", opset = 17 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  %8 = weft.onnx.node "Sigmoid"(%7) {name = "sigmoid", opset = 17 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  %9 = weft.onnx.node "Erf"(%8) {name = "erf", opset = 17 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  return %9 : tensor<*xf32>
}

// LeakyRelu, Gelu and the other activations are in activations.mlir.
// CHECK-LABEL: func.func @trig
// CHECK: %[[COS:.*]] = weft.cos %arg0 : tensor<8xf32>
// CHECK: weft.sin %[[COS]] : tensor<8xf32>
func.func @trig(%x: tensor<8xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Cos"(%x) {name = "cos", opset = 7 : i64} : (tensor<8xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Sin"(%0) {name = "sin", opset = 7 : i64} : (tensor<*xf32>) -> tensor<*xf32>
  return %1 : tensor<*xf32>
}

// Clip bounds are optional inputs from opset 11, attributes before.
// CHECK-LABEL: func.func @clip
// CHECK: %[[LO:.*]] = weft.max %arg0, %arg1
// CHECK: weft.min %[[LO]], %arg2
// CHECK: weft.min %arg0, %arg2
// CHECK: %[[ATTR_LO:.*]] = weft.constant dense<-1.000000e+00> : tensor<f32>
// CHECK: weft.max %arg0, %[[ATTR_LO]]
// CHECK-NOT: weft.min
// CHECK: return
func.func @clip(%x: tensor<8xf32>, %lo: tensor<f32>, %hi: tensor<f32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %none = weft.onnx.none
  %0 = weft.onnx.node "Clip"(%x, %lo, %hi) {name = "clip", opset = 13 : i64} : (tensor<8xf32>, tensor<f32>, tensor<f32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Clip"(%x, %none, %hi) {name = "clip_hi", opset = 13 : i64} : (tensor<8xf32>, none, tensor<f32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Clip"(%x) {name = "clip6", opset = 6 : i64, attrs = {min = -1.000000e+00 : f32}} : (tensor<8xf32>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// CHECK-LABEL: func.func @compare
// CHECK: %[[EQ:.*]] = weft.cmp eq, %arg0, %arg1 : (tensor<4xi64>, tensor<i64>) -> tensor<4xi1>
// CHECK: weft.cmp lt, %arg0, %arg1
// CHECK: weft.cmp le, %arg0, %arg1
// CHECK: weft.cmp gt, %arg0, %arg1
// CHECK: weft.cmp ge, %arg0, %arg1
// CHECK: %[[F:.*]] = weft.constant dense<false> : tensor<i1>
// CHECK: %[[T:.*]] = weft.constant dense<true> : tensor<i1>
// CHECK: %[[NOT:.*]] = weft.where %[[EQ]], %[[F]], %[[T]] : (tensor<4xi1>, tensor<i1>, tensor<i1>) -> tensor<4xi1>
// Booleans compare for equality as where(a, b, !b).
// CHECK: %[[NOTB:.*]] = weft.where %[[NOT]], %{{.*}}, %{{.*}}
// CHECK: weft.where %[[EQ]], %[[NOT]], %[[NOTB]]
func.func @compare(%a: tensor<4xi64>, %b: tensor<i64>) -> (tensor<*xi1>, tensor<*xi1>, tensor<*xi1>, tensor<*xi1>, tensor<*xi1>) {
  %0 = weft.onnx.node "Equal"(%a, %b) {name = "eq", opset = 13 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<*xi1>
  %1 = weft.onnx.node "Less"(%a, %b) {name = "lt", opset = 13 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<*xi1>
  %2 = weft.onnx.node "LessOrEqual"(%a, %b) {name = "le", opset = 16 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<*xi1>
  %3 = weft.onnx.node "Greater"(%a, %b) {name = "gt", opset = 13 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<*xi1>
  %4 = weft.onnx.node "GreaterOrEqual"(%a, %b) {name = "ge", opset = 16 : i64} : (tensor<4xi64>, tensor<i64>) -> tensor<*xi1>
  %5 = weft.onnx.node "Not"(%0) {name = "not", opset = 1 : i64} : (tensor<*xi1>) -> tensor<*xi1>
  %6 = weft.onnx.node "Equal"(%0, %5) {name = "beq", opset = 13 : i64} : (tensor<*xi1>, tensor<*xi1>) -> tensor<*xi1>
  return %1, %2, %3, %4, %6 : tensor<*xi1>, tensor<*xi1>, tensor<*xi1>, tensor<*xi1>, tensor<*xi1>
}

// CHECK-LABEL: func.func @where
// CHECK: weft.where %arg0, %arg1, %arg2 : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
func.func @where(%c: tensor<4x1xi1>, %x: tensor<4x8xf32>, %y: tensor<f32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Where"(%c, %x, %y) {name = "where", opset = 16 : i64} : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// CHECK-LABEL: func.func @cast
// CHECK: weft.cast %arg0 : tensor<4xf32> -> tensor<4xf16>
// CHECK: weft.cast %arg0 : tensor<4xf32> -> tensor<4xi64>
// CHECK: weft.cast %arg0 : tensor<4xf32> -> tensor<4xi1>
// CHECK: return %arg0, %{{.*}}, %{{.*}}, %{{.*}} : tensor<4xf32>, tensor<4xf16>, tensor<4xi64>, tensor<4xi1>
func.func @cast(%x: tensor<4xf32>) -> (tensor<*xf32>, tensor<*xf16>, tensor<*xi64>, tensor<*xi1>) {
  %0 = weft.onnx.node "Cast"(%x) {name = "same", opset = 13 : i64, attrs = {to = 1 : i64}} : (tensor<4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Cast"(%x) {name = "half", opset = 13 : i64, attrs = {to = 10 : i64}} : (tensor<4xf32>) -> tensor<*xf16>
  %2 = weft.onnx.node "Cast"(%x) {name = "long", opset = 13 : i64, attrs = {to = 7 : i64}} : (tensor<4xf32>) -> tensor<*xi64>
  %3 = weft.onnx.node "Cast"(%x) {name = "bool", opset = 13 : i64, attrs = {to = 9 : i64}} : (tensor<4xf32>) -> tensor<*xi1>
  return %0, %1, %2, %3 : tensor<*xf32>, tensor<*xf16>, tensor<*xi64>, tensor<*xi1>
}

// CHECK-LABEL: func.func @constant
// CHECK-DAG: %[[V:.*]] = weft.constant dense<[1.000000e+00, 2.000000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[F:.*]] = weft.constant dense<5.000000e-01> : tensor<f32>
// CHECK-DAG: %[[I:.*]] = weft.constant dense<3> : tensor<i64>
// CHECK-DAG: %[[FS:.*]] = weft.constant dense<[1.500000e+00, 2.500000e+00]> : tensor<2xf32>
// CHECK-DAG: %[[IS:.*]] = weft.constant dense<[4, 5, 6]> : tensor<3xi64>
// CHECK: return %[[V]], %[[F]], %[[I]], %[[FS]], %[[IS]]
func.func @constant() -> (tensor<*xf32>, tensor<*xf32>, tensor<*xi64>, tensor<*xf32>, tensor<*xi64>) {
  %0 = weft.onnx.node "Constant"() {name = "c0", opset = 17 : i64, attrs = {value = dense<[1.0, 2.0]> : tensor<2xf32>}} : () -> tensor<*xf32>
  %1 = weft.onnx.node "Constant"() {name = "c1", opset = 17 : i64, attrs = {value_float = 5.000000e-01 : f32}} : () -> tensor<*xf32>
  %2 = weft.onnx.node "Constant"() {name = "c2", opset = 17 : i64, attrs = {value_int = 3 : i64}} : () -> tensor<*xi64>
  %3 = weft.onnx.node "Constant"() {name = "c3", opset = 17 : i64, attrs = {value_floats = array<f32: 1.5, 2.5>}} : () -> tensor<*xf32>
  %4 = weft.onnx.node "Constant"() {name = "c4", opset = 17 : i64, attrs = {value_ints = array<i64: 4, 5, 6>}} : () -> tensor<*xi64>
  return %0, %1, %2, %3, %4 : tensor<*xf32>, tensor<*xf32>, tensor<*xi64>, tensor<*xf32>, tensor<*xi64>
}

// Identity and inference-mode Dropout pass their input through; an unused
// mask output is fine.
// CHECK-LABEL: func.func @passthrough
// CHECK-NEXT: return %arg0 : tensor<4xf32>
func.func @passthrough(%x: tensor<4xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Identity"(%x) {name = "id", opset = 16 : i64} : (tensor<4xf32>) -> tensor<*xf32>
  %1:2 = weft.onnx.node "Dropout"(%0) {name = "drop", opset = 13 : i64, attrs = {ratio = 1.000000e-01 : f32}} : (tensor<*xf32>) -> (tensor<*xf32>, tensor<*xi1>)
  return %1#0 : tensor<*xf32>
}

// Logical ops on booleans are selects.
// CHECK-LABEL: func.func @logical
// CHECK: %[[F:.*]] = weft.constant dense<false> : tensor<i1>
// CHECK: %[[AND:.*]] = weft.where %arg0, %arg1, %[[F]]
// CHECK: %[[T:.*]] = weft.constant dense<true> : tensor<i1>
// CHECK: %[[OR:.*]] = weft.where %arg0, %[[T]], %arg1
// CHECK: %[[NOTB:.*]] = weft.where %arg1, %{{.*}}, %{{.*}} : (tensor<4xi1>, tensor<i1>, tensor<i1>) -> tensor<4xi1>
// CHECK: %[[XOR:.*]] = weft.where %arg0, %[[NOTB]], %arg1
// CHECK: return %[[AND]], %[[OR]], %[[XOR]]
func.func @logical(%a: tensor<4xi1>, %b: tensor<4xi1>) -> (tensor<*xi1>, tensor<*xi1>, tensor<*xi1>) {
  %0 = weft.onnx.node "And"(%a, %b) {name = "and", opset = 7 : i64} : (tensor<4xi1>, tensor<4xi1>) -> tensor<*xi1>
  %1 = weft.onnx.node "Or"(%a, %b) {name = "or", opset = 7 : i64} : (tensor<4xi1>, tensor<4xi1>) -> tensor<*xi1>
  %2 = weft.onnx.node "Xor"(%a, %b) {name = "xor", opset = 7 : i64} : (tensor<4xi1>, tensor<4xi1>) -> tensor<*xi1>
  return %0, %1, %2 : tensor<*xi1>, tensor<*xi1>, tensor<*xi1>
}

// CHECK-LABEL: func.func @sign
// CHECK: %[[ZERO:.*]] = weft.constant dense<0.000000e+00> : tensor<f32>
// CHECK: %[[LT:.*]] = weft.cmp lt, %arg0, %[[ZERO]]
// CHECK: %[[M1:.*]] = weft.constant dense<-1.000000e+00> : tensor<f32>
// CHECK: %[[NEG:.*]] = weft.where %[[LT]], %[[M1]], %[[ZERO]] : (tensor<4xi1>, tensor<f32>, tensor<f32>) -> tensor<4xf32>
// CHECK: %[[GT:.*]] = weft.cmp gt, %arg0, %[[ZERO]]
// CHECK: %[[P1:.*]] = weft.constant dense<1.000000e+00> : tensor<f32>
// CHECK: weft.where %[[GT]], %[[P1]], %[[NEG]] : (tensor<4xi1>, tensor<f32>, tensor<4xf32>) -> tensor<4xf32>
func.func @sign(%x: tensor<4xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Sign"(%x) {name = "sign", opset = 13 : i64} : (tensor<4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}
