// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// Shape and Size of statically shaped values are constants.
// CHECK-LABEL: func.func @shape_size
// CHECK-DAG: %[[ALL:.*]] = weft.constant dense<[2, 3, 4]> : tensor<3xi64>
// CHECK-DAG: %[[MID:.*]] = weft.constant dense<3> : tensor<1xi64>
// CHECK-DAG: %[[SIZE:.*]] = weft.constant dense<24> : tensor<i64>
// CHECK: return %[[ALL]], %[[MID]], %[[SIZE]]
func.func @shape_size(%x: tensor<2x3x4xf32>) -> (tensor<*xi64>, tensor<*xi64>, tensor<*xi64>) {
  %0 = weft.onnx.node "Shape"(%x) {name = "shape", opset = 13 : i64} : (tensor<2x3x4xf32>) -> tensor<*xi64>
  %1 = weft.onnx.node "Shape"(%x) {name = "shape15", opset = 15 : i64, attrs = {start = 1 : i64, end = -1 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xi64>
  %2 = weft.onnx.node "Size"(%x) {name = "size", opset = 13 : i64} : (tensor<2x3x4xf32>) -> tensor<*xi64>
  return %0, %1, %2 : tensor<*xi64>, tensor<*xi64>, tensor<*xi64>
}

// CHECK-LABEL: func.func @reshape
// A 0 copies the input dimension and -1 is inferred.
// CHECK: weft.reshape %arg0 : tensor<2x3x4xf32> -> tensor<2x4x3xf32>
// With allowzero a 0 is a real size.
// CHECK: weft.reshape %arg1 : tensor<0x4xf32> -> tensor<4x0xf32>
func.func @reshape(%x: tensor<2x3x4xf32>, %e: tensor<0x4xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %s = weft.constant dense<[0, 4, -1]> : tensor<3xi64>
  %0 = weft.onnx.node "Reshape"(%x, %s) {name = "reshape", opset = 13 : i64} : (tensor<2x3x4xf32>, tensor<3xi64>) -> tensor<*xf32>
  %z = weft.constant dense<[4, 0]> : tensor<2xi64>
  %1 = weft.onnx.node "Reshape"(%e, %z) {name = "reshape0", opset = 14 : i64, attrs = {allowzero = 1 : i64}} : (tensor<0x4xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// CHECK-LABEL: func.func @flatten
// CHECK: weft.reshape %arg0 : tensor<2x3x4x5xf32> -> tensor<2x60xf32>
// CHECK: weft.reshape %arg0 : tensor<2x3x4x5xf32> -> tensor<24x5xf32>
// CHECK: weft.reshape %arg0 : tensor<2x3x4x5xf32> -> tensor<1x120xf32>
func.func @flatten(%x: tensor<2x3x4x5xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Flatten"(%x) {name = "flatten", opset = 13 : i64} : (tensor<2x3x4x5xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Flatten"(%x) {name = "flatten_neg", opset = 13 : i64, attrs = {axis = -1 : i64}} : (tensor<2x3x4x5xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Flatten"(%x) {name = "flatten0", opset = 13 : i64, attrs = {axis = 0 : i64}} : (tensor<2x3x4x5xf32>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// Squeeze and Unsqueeze take axes as an attribute before opset 13 and as an
// input from 13.
// CHECK-LABEL: func.func @squeeze_unsqueeze
// CHECK: weft.reshape %arg0 : tensor<1x3x1x4xf32> -> tensor<1x3x4xf32>
// CHECK: weft.reshape %arg0 : tensor<1x3x1x4xf32> -> tensor<3x1x4xf32>
// CHECK: weft.reshape %arg0 : tensor<1x3x1x4xf32> -> tensor<3x4xf32>
// CHECK: weft.reshape %arg0 : tensor<1x3x1x4xf32> -> tensor<1x1x3x1x4x1xf32>
// CHECK: weft.reshape %arg0 : tensor<1x3x1x4xf32> -> tensor<1x3x1x4x1xf32>
func.func @squeeze_unsqueeze(%x: tensor<1x3x1x4xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %axes = weft.constant dense<[0]> : tensor<1xi64>
  %0 = weft.onnx.node "Squeeze"(%x) {name = "sq11", opset = 11 : i64, attrs = {axes = array<i64: -2>}} : (tensor<1x3x1x4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Squeeze"(%x, %axes) {name = "sq13", opset = 13 : i64} : (tensor<1x3x1x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  %2 = weft.onnx.node "Squeeze"(%x) {name = "sq_all", opset = 13 : i64} : (tensor<1x3x1x4xf32>) -> tensor<*xf32>
  %3 = weft.onnx.node "Unsqueeze"(%x) {name = "unsq11", opset = 11 : i64, attrs = {axes = array<i64: 1, -1>}} : (tensor<1x3x1x4xf32>) -> tensor<*xf32>
  %last = weft.constant dense<-1> : tensor<1xi64>
  %4 = weft.onnx.node "Unsqueeze"(%x, %last) {name = "unsq13", opset = 13 : i64} : (tensor<1x3x1x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// Expand broadcasts both ways; Tile repeats whole copies via a broadcast.
// CHECK-LABEL: func.func @expand_tile
// CHECK: weft.broadcast %arg0 : tensor<3x1xf32> -> tensor<2x3x4xf32>
// CHECK: weft.broadcast %arg0 : tensor<3x1xf32> -> tensor<3x5xf32>
// CHECK: %[[SPREAD:.*]] = weft.reshape %arg0 : tensor<3x1xf32> -> tensor<1x3x1x1xf32>
// CHECK: %[[COPIES:.*]] = weft.broadcast %[[SPREAD]] : tensor<1x3x1x1xf32> -> tensor<2x3x4x1xf32>
// CHECK: weft.reshape %[[COPIES]] : tensor<2x3x4x1xf32> -> tensor<6x4xf32>
func.func @expand_tile(%x: tensor<3x1xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %s = weft.constant dense<[2, 1, 4]> : tensor<3xi64>
  %0 = weft.onnx.node "Expand"(%x, %s) {name = "expand", opset = 13 : i64} : (tensor<3x1xf32>, tensor<3xi64>) -> tensor<*xf32>
  %t = weft.constant dense<[5]> : tensor<1xi64>
  %1 = weft.onnx.node "Expand"(%x, %t) {name = "expand_small", opset = 13 : i64} : (tensor<3x1xf32>, tensor<1xi64>) -> tensor<*xf32>
  %r = weft.constant dense<[2, 4]> : tensor<2xi64>
  %2 = weft.onnx.node "Tile"(%x, %r) {name = "tile", opset = 13 : i64} : (tensor<3x1xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// ConstantOfShape and Range of constants are constants.
// CHECK-LABEL: func.func @constant_of_shape_range
// CHECK-DAG: %[[ZEROS:.*]] = weft.constant dense<0.000000e+00> : tensor<2x3xf32>
// CHECK-DAG: %[[ONES:.*]] = weft.constant dense<1> : tensor<4xi64>
// CHECK-DAG: %[[R:.*]] = weft.constant dense<[1, 4, 7]> : tensor<3xi64>
// CHECK-DAG: %[[DOWN:.*]] = weft.constant dense<[5, 3]> : tensor<2xi64>
// CHECK-DAG: %[[RF:.*]] = weft.constant dense<[0.000000e+00, 5.000000e-01, 1.000000e+00]> : tensor<3xf32>
// CHECK: return %[[ZEROS]], %[[ONES]], %[[R]], %[[DOWN]], %[[RF]]
func.func @constant_of_shape_range() -> (tensor<*xf32>, tensor<*xi64>, tensor<*xi64>, tensor<*xi64>, tensor<*xf32>) {
  %s = weft.constant dense<[2, 3]> : tensor<2xi64>
  %0 = weft.onnx.node "ConstantOfShape"(%s) {name = "zeros", opset = 9 : i64} : (tensor<2xi64>) -> tensor<*xf32>
  %n = weft.constant dense<[4]> : tensor<1xi64>
  %1 = weft.onnx.node "ConstantOfShape"(%n) {name = "ones", opset = 9 : i64, attrs = {value = dense<1> : tensor<1xi64>}} : (tensor<1xi64>) -> tensor<*xi64>
  %a = weft.constant dense<1> : tensor<i64>
  %b = weft.constant dense<8> : tensor<i64>
  %d = weft.constant dense<3> : tensor<i64>
  %2 = weft.onnx.node "Range"(%a, %b, %d) {name = "range", opset = 11 : i64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<*xi64>
  %hi = weft.constant dense<5> : tensor<i64>
  %lo = weft.constant dense<2> : tensor<i64>
  %m2 = weft.constant dense<-2> : tensor<i64>
  %3 = weft.onnx.node "Range"(%hi, %lo, %m2) {name = "down", opset = 11 : i64} : (tensor<i64>, tensor<i64>, tensor<i64>) -> tensor<*xi64>
  %fa = weft.constant dense<0.0> : tensor<f32>
  %fb = weft.constant dense<1.2> : tensor<f32>
  %fd = weft.constant dense<0.5> : tensor<f32>
  %4 = weft.onnx.node "Range"(%fa, %fb, %fd) {name = "frange", opset = 11 : i64} : (tensor<f32>, tensor<f32>, tensor<f32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4 : tensor<*xf32>, tensor<*xi64>, tensor<*xi64>, tensor<*xi64>, tensor<*xf32>
}
