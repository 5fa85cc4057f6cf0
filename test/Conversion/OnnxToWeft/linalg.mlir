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
