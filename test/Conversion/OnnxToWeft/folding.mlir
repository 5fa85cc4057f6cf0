// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// PyTorch's `x.view(B, T, nh, hd)` with B and T read from the shape: the
// Shape/Gather/Unsqueeze/Concat arithmetic folds to constants, the Reshape
// becomes static, and the dead constants and none values are erased.
// CHECK-LABEL: func.func @shape_arithmetic
// CHECK-SAME: -> tensor<4x16x2x16xf32>
// CHECK-NEXT: %[[R:.*]] = weft.reshape %arg0 : tensor<4x16x32xf32> -> tensor<4x16x2x16xf32>
// CHECK-NEXT: return %[[R]]
func.func @shape_arithmetic(%x: tensor<4x16x32xf32>) -> tensor<*xf32> {
  %none = weft.onnx.none
  %shape = weft.onnx.node "Shape"(%x) {name = "/Shape", opset = 13 : i64} : (tensor<4x16x32xf32>) -> tensor<*xi64>
  %c0 = weft.constant dense<0> : tensor<i64>
  %c1 = weft.constant dense<1> : tensor<i64>
  %b = weft.onnx.node "Gather"(%shape, %c0) {name = "/Gather", opset = 13 : i64, attrs = {axis = 0 : i64}} : (tensor<*xi64>, tensor<i64>) -> tensor<*xi64>
  %t = weft.onnx.node "Gather"(%shape, %c1) {name = "/Gather_1", opset = 13 : i64, attrs = {axis = 0 : i64}} : (tensor<*xi64>, tensor<i64>) -> tensor<*xi64>
  %axes = weft.constant dense<[0]> : tensor<1xi64>
  %b1 = weft.onnx.node "Unsqueeze"(%b, %axes) {name = "/Unsqueeze", opset = 13 : i64} : (tensor<*xi64>, tensor<1xi64>) -> tensor<*xi64>
  %t1 = weft.onnx.node "Unsqueeze"(%t, %axes) {name = "/Unsqueeze_1", opset = 13 : i64} : (tensor<*xi64>, tensor<1xi64>) -> tensor<*xi64>
  %heads = weft.constant dense<[2]> : tensor<1xi64>
  %c32 = weft.constant dense<32> : tensor<i64>
  %c2 = weft.constant dense<2> : tensor<i64>
  %hd = weft.onnx.node "Div"(%c32, %c2) {name = "/Div", opset = 13 : i64} : (tensor<i64>, tensor<i64>) -> tensor<*xi64>
  %hdf = weft.onnx.node "Cast"(%hd) {name = "/Cast", opset = 13 : i64, attrs = {to = 1 : i64}} : (tensor<*xi64>) -> tensor<*xf32>
  %hdi = weft.onnx.node "Cast"(%hdf) {name = "/Cast_1", opset = 13 : i64, attrs = {to = 7 : i64}} : (tensor<*xf32>) -> tensor<*xi64>
  %hd1 = weft.onnx.node "Unsqueeze"(%hdi, %axes) {name = "/Unsqueeze_2", opset = 13 : i64} : (tensor<*xi64>, tensor<1xi64>) -> tensor<*xi64>
  %s = weft.onnx.node "Concat"(%b1, %t1, %heads, %hd1) {name = "/Concat", opset = 13 : i64, attrs = {axis = 0 : i64}} : (tensor<*xi64>, tensor<*xi64>, tensor<1xi64>, tensor<*xi64>) -> tensor<*xi64>
  %y = weft.onnx.node "Reshape"(%x, %s) {name = "/Reshape", opset = 13 : i64} : (tensor<4x16x32xf32>, tensor<*xi64>) -> tensor<*xf32>
  return %y : tensor<*xf32>
}

// GPT's masked_fill with a constant causal mask: true strictly above the
// diagonal selects -inf (diagonal 0 and fill -inf are the defaults).
// CHECK-LABEL: func.func @causal_mask
// CHECK-NOT: weft.where
// CHECK: %[[M:.*]] = weft.causal_mask %arg0 : tensor<2x2x4x4xf32>
// CHECK-NEXT: return %[[M]]
func.func @causal_mask(%att: tensor<2x2x4x4xf32>) -> tensor<*xf32> {
  %mask = weft.constant dense<[[[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]]]> : tensor<1x1x4x4xi1>
  %ninf = weft.constant dense<0xFF800000> : tensor<f32>
  %0 = weft.onnx.node "Where"(%mask, %ninf, %att) {name = "/attn/Where", opset = 17 : i64} : (tensor<1x1x4x4xi1>, tensor<f32>, tensor<2x2x4x4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// The swapped form keeps x where j <= i + d; here d = 1 and the fill is a
// large negative number.
// CHECK-LABEL: func.func @causal_mask_swapped
// CHECK: weft.causal_mask %arg0 {diagonal = 1 : i64, fill = -1.000000e+09 : f64} : tensor<3x4xf32>
func.func @causal_mask_swapped(%att: tensor<3x4xf32>) -> tensor<*xf32> {
  %mask = weft.constant dense<[[true, true, false, false], [true, true, true, false], [true, true, true, true]]> : tensor<3x4xi1>
  %fill = weft.constant dense<-1.0e9> : tensor<1xf32>
  %0 = weft.onnx.node "Where"(%mask, %att, %fill) {name = "where", opset = 17 : i64} : (tensor<3x4xi1>, tensor<3x4xf32>, tensor<1xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// Not a causal mask: the pattern breaks in the last row, or the fill is
// not a splat; both stay selects.
// CHECK-LABEL: func.func @not_causal
// CHECK-NOT: weft.causal_mask
// CHECK: weft.where
// CHECK: weft.where
func.func @not_causal(%att: tensor<3x3xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %mask = weft.constant dense<[[false, true, true], [false, false, true], [true, false, false]]> : tensor<3x3xi1>
  %ninf = weft.constant dense<0xFF800000> : tensor<f32>
  %0 = weft.onnx.node "Where"(%mask, %ninf, %att) {name = "w0", opset = 17 : i64} : (tensor<3x3xi1>, tensor<f32>, tensor<3x3xf32>) -> tensor<*xf32>
  %causal = weft.constant dense<[[false, true, true], [false, false, true], [false, false, false]]> : tensor<3x3xi1>
  %fill = weft.constant dense<[1.0, 2.0, 3.0]> : tensor<3xf32>
  %1 = weft.onnx.node "Where"(%causal, %fill, %att) {name = "w1", opset = 17 : i64} : (tensor<3x3xi1>, tensor<3xf32>, tensor<3x3xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// A mask computed from constants (Trilu, Equal, Where with constant
// operands) folds before the Where that uses it is legalized.
// CHECK-LABEL: func.func @folded_mask
// CHECK-NEXT: %[[M:.*]] = weft.causal_mask %arg0 : tensor<4x4xf32>
// CHECK-NEXT: return %[[M]]
func.func @folded_mask(%att: tensor<4x4xf32>) -> tensor<*xf32> {
  %ones = weft.constant dense<1.0> : tensor<4x4xf32>
  %tril = weft.onnx.node "Trilu"(%ones) {name = "tril", opset = 14 : i64, attrs = {upper = 0 : i64}} : (tensor<4x4xf32>) -> tensor<*xf32>
  %zero = weft.constant dense<0.0> : tensor<f32>
  %cond = weft.onnx.node "Equal"(%tril, %zero) {name = "eq", opset = 13 : i64} : (tensor<*xf32>, tensor<f32>) -> tensor<*xi1>
  %ninf = weft.constant dense<0xFF800000> : tensor<f32>
  %0 = weft.onnx.node "Where"(%cond, %ninf, %att) {name = "where", opset = 17 : i64} : (tensor<*xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}
