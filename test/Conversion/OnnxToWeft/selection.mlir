// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// CHECK-LABEL: func.func @rounding_and_scans
// CHECK: weft.floor %arg0 : tensor<2x5xf32>
// CHECK: weft.ceil %arg0 : tensor<2x5xf32>
// CHECK: weft.round %arg0 : tensor<2x5xf32>
// CumSum's axis input is normalized (-1 -> 1).
// CHECK: weft.cumsum %arg0 {axis = 1 : i64, exclusive = true, reverse = true} : tensor<2x5xf32>
// CHECK: weft.cumsum %arg0 {axis = 0 : i64} : tensor<2x5xf32>
func.func @rounding_and_scans(%x: tensor<2x5xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Floor"(%x) {name = "floor", opset = 13 : i64} : (tensor<2x5xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Ceil"(%x) {name = "ceil", opset = 13 : i64} : (tensor<2x5xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Round"(%x) {name = "round", opset = 13 : i64} : (tensor<2x5xf32>) -> tensor<*xf32>
  %last = weft.constant dense<-1> : tensor<i64>
  %3 = weft.onnx.node "CumSum"(%x, %last) {name = "cumsum", opset = 14 : i64, attrs = {exclusive = 1 : i64, reverse = 1 : i64}} : (tensor<2x5xf32>, tensor<i64>) -> tensor<*xf32>
  %first = weft.constant dense<[0]> : tensor<1xi32>
  %4 = weft.onnx.node "CumSum"(%x, %first) {name = "cumsum0", opset = 11 : i64} : (tensor<2x5xf32>, tensor<1xi32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// ONNX keeps the reduced axis by default; ArgMax/ArgMin default to axis 0.
// CHECK-LABEL: func.func @arg_reduce
// CHECK: weft.arg_max %arg0 {axis = 1 : i64} : (tensor<2x5xf32>) -> tensor<2xi64>
// CHECK: weft.arg_min %arg0 {axis = 0 : i64, keep_dims = true, select_last_index = true} : (tensor<2x5xf32>) -> tensor<1x5xi64>
// CHECK: weft.arg_max %arg0 {axis = 0 : i64, keep_dims = true} : (tensor<2x5xf32>) -> tensor<1x5xi64>
func.func @arg_reduce(%x: tensor<2x5xf32>) -> (tensor<*xi64>, tensor<*xi64>, tensor<*xi64>) {
  %0 = weft.onnx.node "ArgMax"(%x) {name = "argmax", opset = 13 : i64, attrs = {axis = -1 : i64, keepdims = 0 : i64}} : (tensor<2x5xf32>) -> tensor<*xi64>
  %1 = weft.onnx.node "ArgMin"(%x) {name = "argmin", opset = 13 : i64, attrs = {select_last_index = 1 : i64}} : (tensor<2x5xf32>) -> tensor<*xi64>
  %2 = weft.onnx.node "ArgMax"(%x) {name = "argmax_default", opset = 11 : i64} : (tensor<2x5xf32>) -> tensor<*xi64>
  return %0, %1, %2 : tensor<*xi64>, tensor<*xi64>, tensor<*xi64>
}

// TopK's values and indices are two ops; before opset 10 K is an attribute.
// CHECK-LABEL: func.func @top_k
// CHECK: %[[V:.*]] = weft.top_k %arg0 {axis = 1 : i64, k = 3 : i64, largest = false} : (tensor<2x5xf32>) -> tensor<2x3xf32>
// CHECK: %[[I:.*]] = weft.top_k_indices %arg0 {axis = 1 : i64, k = 3 : i64, largest = false} : (tensor<2x5xf32>) -> tensor<2x3xi64>
// CHECK: %[[V0:.*]] = weft.top_k %arg0 {axis = 0 : i64, k = 1 : i64} : (tensor<2x5xf32>) -> tensor<1x5xf32>
// CHECK: return %[[V]], %[[I]], %[[V0]] :
func.func @top_k(%x: tensor<2x5xf32>) -> (tensor<*xf32>, tensor<*xi64>, tensor<*xf32>) {
  %k = weft.constant dense<[3]> : tensor<1xi64>
  %0, %1 = weft.onnx.node "TopK"(%x, %k) {name = "topk", opset = 11 : i64, attrs = {axis = -1 : i64, largest = 0 : i64}} : (tensor<2x5xf32>, tensor<1xi64>) -> (tensor<*xf32>, tensor<*xi64>)
  %2, %3 = weft.onnx.node "TopK"(%x) {name = "topk1", opset = 1 : i64, attrs = {axis = 0 : i64, k = 1 : i64}} : (tensor<2x5xf32>) -> (tensor<*xf32>, tensor<*xi64>)
  return %0, %1, %2 : tensor<*xf32>, tensor<*xi64>, tensor<*xf32>
}
