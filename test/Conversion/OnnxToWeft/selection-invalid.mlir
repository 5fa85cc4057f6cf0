// RUN: weft-opt --weft-legalize-onnx -split-input-file -verify-diagnostics %s

func.func @einsum_diagonal(%x: tensor<1x4xf32>) -> tensor<*xf32> {
  // expected-error @below {{Einsum node '/diag': equation 'ii->i': label 'i' repeats in operand 0 over dimensions of sizes 1 and 4}}
  %0 = weft.onnx.node "Einsum"(%x) {name = "/diag", opset = 14 : i64, attrs = {equation = "ii->i"}} : (tensor<1x4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @einsum_operand_count(%x: tensor<4x4xf32>) -> tensor<*xf32> {
  // expected-error @below {{Einsum node '/e': equation 'ij,jk->ik': it has 2 operand terms but the node has 1 inputs}}
  %0 = weft.onnx.node "Einsum"(%x) {name = "/e", opset = 14 : i64, attrs = {equation = "ij,jk->ik"}} : (tensor<4x4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @einsum_rank(%x: tensor<4x4x2xf32>, %y: tensor<4x3xf32>) -> tensor<*xf32> {
  // expected-error @below {{Einsum node '/e': equation 'ij,jk->ik': operand 0 names 2 dimensions but has rank 3}}
  %0 = weft.onnx.node "Einsum"(%x, %y) {name = "/e", opset = 14 : i64, attrs = {equation = "ij,jk->ik"}} : (tensor<4x4x2xf32>, tensor<4x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @einsum_sizes(%x: tensor<4x5xf32>, %y: tensor<4x3xf32>) -> tensor<*xf32> {
  // expected-error @below {{Einsum node '/e': equation 'ij,jk->ik': dimension 0 of operand 1 has size 4 but its label has size 5 elsewhere}}
  %0 = weft.onnx.node "Einsum"(%x, %y) {name = "/e", opset = 14 : i64, attrs = {equation = "ij,jk->ik"}} : (tensor<4x5xf32>, tensor<4x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @einsum_output_label(%x: tensor<4x5xf32>) -> tensor<*xf32> {
  // expected-error @below {{Einsum node '/e': equation 'ij->iz': output label 'z' appears in no operand}}
  %0 = weft.onnx.node "Einsum"(%x) {name = "/e", opset = 14 : i64, attrs = {equation = "ij->iz"}} : (tensor<4x5xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @einsum_character(%x: tensor<4x5xf32>) -> tensor<*xf32> {
  // expected-error @below {{Einsum node '/e': equation 'i1->i': operand 0 has '1', expected letters and '...'}}
  %0 = weft.onnx.node "Einsum"(%x) {name = "/e", opset = 14 : i64, attrs = {equation = "i1->i"}} : (tensor<4x5xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @einsum_drops_ellipsis(%x: tensor<2x4x5xf32>) -> tensor<*xf32> {
  // expected-error @below {{Einsum node '/e': equation '...ij->ij': the output drops the '...' dimensions; summing over them is not supported}}
  %0 = weft.onnx.node "Einsum"(%x) {name = "/e", opset = 14 : i64, attrs = {equation = "...ij->ij"}} : (tensor<2x4x5xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @top_k_large(%x: tensor<2x5xf32>) -> tensor<*xf32> {
  %k = weft.constant dense<[6]> : tensor<1xi64>
  // expected-error @below {{TopK node '/topk': cannot build 'weft.top_k': k = 6 is out of range for an axis of 5 (expected 1 <= k <= 5)}}
  %0, %1 = weft.onnx.node "TopK"(%x, %k) {name = "/topk", opset = 11 : i64} : (tensor<2x5xf32>, tensor<1xi64>) -> (tensor<*xf32>, tensor<*xi64>)
  return %0 : tensor<*xf32>
}

// -----

func.func @cumsum_runtime_axis(%x: tensor<2x5xf32>, %axis: tensor<i64>) -> tensor<*xf32> {
  // expected-error @below {{CumSum node '/cumsum': input 1 (axis) must be computable at compile time}}
  %0 = weft.onnx.node "CumSum"(%x, %axis) {name = "/cumsum", opset = 14 : i64} : (tensor<2x5xf32>, tensor<i64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @pool3d_ceil(%x: tensor<1x2x4x4x4xf32>) -> tensor<*xf32> {
  // expected-error @below {{MaxPool node '/pool': attribute 'ceil_mode' = 1 is not supported (supported: 0 for 3-D pooling)}}
  %0 = weft.onnx.node "MaxPool"(%x) {name = "/pool", opset = 14 : i64, attrs = {kernel_shape = array<i64: 2, 2, 2>, ceil_mode = 1 : i64}} : (tensor<1x2x4x4x4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}
