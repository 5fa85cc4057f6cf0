// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// PyTorch's nn.Linear: no scale multiplications when alpha = beta = 1.
// CHECK-LABEL: func.func @gemm_linear
// CHECK-SAME: -> tensor<4x10xf32>
// CHECK: %[[MM:.*]] = weft.matmul %arg0, %arg1 {transpose_rhs = true} : (tensor<4x32xf32>, tensor<10x32xf32>) -> tensor<4x10xf32>
// CHECK-NEXT: %[[ADD:.*]] = weft.add %[[MM]], %arg2 : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
// CHECK-NEXT: return %[[ADD]]
func.func @gemm_linear(%x: tensor<4x32xf32>, %w: tensor<10x32xf32>, %b: tensor<10xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Gemm"(%x, %w, %b) {name = "/fc/Gemm", opset = 17 : i64, attrs = {alpha = 1.000000e+00 : f32, beta = 1.000000e+00 : f32, transB = 1 : i64}} : (tensor<4x32xf32>, tensor<10x32xf32>, tensor<10xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// CHECK-LABEL: func.func @gemm_scaled
// CHECK: %[[MM:.*]] = weft.matmul %arg0, %arg1 {transpose_lhs = true} : (tensor<32x4xf32>, tensor<32x10xf32>) -> tensor<4x10xf32>
// CHECK: %[[ALPHA:.*]] = weft.constant dense<5.000000e-01> : tensor<f32>
// CHECK: %[[SCALED:.*]] = weft.mul %[[MM]], %[[ALPHA]]
// CHECK: %[[BETA:.*]] = weft.constant dense<2.000000e+00> : tensor<f32>
// CHECK: %[[C:.*]] = weft.mul %arg2, %[[BETA]] : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
// CHECK: weft.add %[[SCALED]], %[[C]] : (tensor<4x10xf32>, tensor<4x1xf32>) -> tensor<4x10xf32>
func.func @gemm_scaled(%a: tensor<32x4xf32>, %b: tensor<32x10xf32>, %c: tensor<4x1xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Gemm"(%a, %b, %c) {name = "gemm", opset = 13 : i64, attrs = {alpha = 5.000000e-01 : f32, beta = 2.000000e+00 : f32, transA = 1 : i64}} : (tensor<32x4xf32>, tensor<32x10xf32>, tensor<4x1xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// CHECK-LABEL: func.func @gemm_no_bias
// CHECK: %[[MM:.*]] = weft.matmul %arg0, %arg1
// CHECK-NEXT: return %[[MM]] : tensor<4x10xf32>
func.func @gemm_no_bias(%a: tensor<4x32xf32>, %b: tensor<32x10xf32>) -> tensor<*xf32> {
  %none = weft.onnx.none
  %0 = weft.onnx.node "Gemm"(%a, %b, %none) {name = "gemm", opset = 13 : i64} : (tensor<4x32xf32>, tensor<32x10xf32>, none) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// N-D x 2-D uses weft.matmul's batch broadcasting directly.
// CHECK-LABEL: func.func @matmul_batched
// CHECK: weft.matmul %arg0, %arg1 : (tensor<4x16x32xf32>, tensor<32x96xf32>) -> tensor<4x16x96xf32>
func.func @matmul_batched(%x: tensor<4x16x32xf32>, %w: tensor<32x96xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "MatMul"(%x, %w) {name = "mm", opset = 17 : i64} : (tensor<4x16x32xf32>, tensor<32x96xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// 1-D operands become matrices and their axis is dropped from the result.
// CHECK-LABEL: func.func @matmul_vectors
// CHECK: %[[V:.*]] = weft.reshape %arg0 : tensor<32xf32> -> tensor<1x32xf32>
// CHECK: %[[MV:.*]] = weft.matmul %[[V]], %arg1 : (tensor<1x32xf32>, tensor<2x32x8xf32>) -> tensor<2x1x8xf32>
// CHECK: weft.reshape %[[MV]] : tensor<2x1x8xf32> -> tensor<2x8xf32>
// CHECK: %[[ROW:.*]] = weft.reshape %arg0 : tensor<32xf32> -> tensor<1x32xf32>
// CHECK: %[[COL:.*]] = weft.reshape %arg0 : tensor<32xf32> -> tensor<32x1xf32>
// CHECK: %[[DOT:.*]] = weft.matmul %[[ROW]], %[[COL]] : (tensor<1x32xf32>, tensor<32x1xf32>) -> tensor<1x1xf32>
// CHECK: weft.reshape %[[DOT]] : tensor<1x1xf32> -> tensor<f32>
func.func @matmul_vectors(%v: tensor<32xf32>, %m: tensor<2x32x8xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "MatMul"(%v, %m) {name = "mv", opset = 13 : i64} : (tensor<32xf32>, tensor<2x32x8xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "MatMul"(%v, %v) {name = "dot", opset = 13 : i64} : (tensor<32xf32>, tensor<32xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// CHECK-LABEL: func.func @conv
// CHECK: weft.conv2d %arg0, %arg1, %arg2 {dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<4x8x16x16xf32>
// Grouped, strided, dilated, without bias.
// CHECK: weft.conv2d %arg0, %arg3 {dilations = array<i64: 2, 2>, groups = 3 : i64, padding = array<i64: 0, 1, 0, 1>, strides = array<i64: 2, 1>} : (tensor<4x3x16x16xf32>, tensor<6x1x3x3xf32>) -> tensor<4x6x6x14xf32>
func.func @conv(%x: tensor<4x3x16x16xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<8xf32>, %g: tensor<6x1x3x3xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Conv"(%x, %w, %b) {name = "conv", opset = 17 : i64, attrs = {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}} : (tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Conv"(%x, %g) {name = "gconv", opset = 17 : i64, attrs = {dilations = array<i64: 2, 2>, group = 3 : i64, pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 2, 1>}} : (tensor<4x3x16x16xf32>, tensor<6x1x3x3xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// SAME_UPPER puts the odd padding cell at the end, SAME_LOWER at the start.
// CHECK-LABEL: func.func @conv_auto_pad
// CHECK: weft.conv2d %arg0, %arg2 {{{.*}}padding = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x1x8x8xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32>
// CHECK: weft.conv2d %arg0, %arg1 {{{.*}}padding = array<i64: 1, 1, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x8x8xf32>
// CHECK: weft.conv2d %arg0, %arg1 {{{.*}}padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x7x7xf32>
func.func @conv_auto_pad(%x: tensor<1x1x8x8xf32>, %w: tensor<1x1x2x2xf32>, %w3: tensor<1x1x3x3xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Conv"(%x, %w3) {name = "upper", opset = 17 : i64, attrs = {auto_pad = "SAME_UPPER", strides = array<i64: 2, 2>}} : (tensor<1x1x8x8xf32>, tensor<1x1x3x3xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Conv"(%x, %w) {name = "lower", opset = 17 : i64, attrs = {auto_pad = "SAME_LOWER"}} : (tensor<1x1x8x8xf32>, tensor<1x1x2x2xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Conv"(%x, %w) {name = "valid", opset = 17 : i64, attrs = {auto_pad = "VALID", pads = array<i64: 1, 1, 1, 1>}} : (tensor<1x1x8x8xf32>, tensor<1x1x2x2xf32>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// CHECK-LABEL: func.func @pools
// CHECK: weft.max_pool2d %arg0 {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<4x8x16x16xf32>) -> tensor<4x8x8x8xf32>
// CHECK: weft.avg_pool2d %arg0 {count_include_pad = true, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<4x8x16x16xf32>) -> tensor<4x8x16x16xf32>
// CHECK: weft.avg_pool2d %arg0 {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>}
// CHECK: weft.global_avg_pool %arg0 : (tensor<4x8x16x16xf32>) -> tensor<4x8x1x1xf32>
func.func @pools(%x: tensor<4x8x16x16xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  // ceil_mode = 1 is accepted when the windows tile the input exactly.
  %0 = weft.onnx.node "MaxPool"(%x) {name = "max", opset = 12 : i64, attrs = {ceil_mode = 1 : i64, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>}} : (tensor<4x8x16x16xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "AveragePool"(%x) {name = "avg", opset = 17 : i64, attrs = {count_include_pad = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>}} : (tensor<4x8x16x16xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "AveragePool"(%x) {name = "avg2", opset = 17 : i64, attrs = {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}} : (tensor<4x8x16x16xf32>) -> tensor<*xf32>
  %3 = weft.onnx.node "GlobalAveragePool"(%x) {name = "gap", opset = 1 : i64} : (tensor<4x8x16x16xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
