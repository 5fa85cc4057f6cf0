// RUN: weft-opt %s | weft-opt | FileCheck %s

// CHECK-LABEL: func.func @attention
// CHECK: %[[O:.*]], %[[L:.*]] = weft.attention %arg0, %arg1, %arg2 {causal, scale = 2.500000e-01 : f64} : (tensor<4x2x16x8xf32>, tensor<4x2x12x8xf32>, tensor<4x2x12x5xf32>) -> (tensor<4x2x16x5xf32>, tensor<4x2x16xf32>)
// CHECK: weft.attention_grad %arg3, %arg0, %arg1, %arg2, %[[O]], %[[L]] {causal, scale = 2.500000e-01 : f64} : (tensor<4x2x16x5xf32>, tensor<4x2x16x8xf32>, tensor<4x2x12x8xf32>, tensor<4x2x12x5xf32>, tensor<4x2x16x5xf32>, tensor<4x2x16xf32>) -> (tensor<4x2x16x8xf32>, tensor<4x2x12x8xf32>, tensor<4x2x12x5xf32>)
// Not causal: no attribute printed; rank 2 has no leading axes.
// CHECK: weft.attention %arg4, %arg4, %arg4 {scale = 1.000000e+00 : f64} : (tensor<6x3xf32>, tensor<6x3xf32>, tensor<6x3xf32>) -> (tensor<6x3xf32>, tensor<6xf32>)
func.func @attention(%q: tensor<4x2x16x8xf32>, %k: tensor<4x2x12x8xf32>,
                     %v: tensor<4x2x12x5xf32>, %g: tensor<4x2x16x5xf32>,
                     %x: tensor<6x3xf32>) {
  %o, %lse = weft.attention %q, %k, %v {scale = 0.25 : f64, causal}
      : (tensor<4x2x16x8xf32>, tensor<4x2x12x8xf32>, tensor<4x2x12x5xf32>)
      -> (tensor<4x2x16x5xf32>, tensor<4x2x16xf32>)
  %dq, %dk, %dv = weft.attention_grad %g, %q, %k, %v, %o, %lse {scale = 0.25 : f64, causal}
      : (tensor<4x2x16x5xf32>, tensor<4x2x16x8xf32>, tensor<4x2x12x8xf32>,
         tensor<4x2x12x5xf32>, tensor<4x2x16x5xf32>, tensor<4x2x16xf32>)
      -> (tensor<4x2x16x8xf32>, tensor<4x2x12x8xf32>, tensor<4x2x12x5xf32>)
  %o2, %l2 = weft.attention %x, %x, %x {scale = 1.0 : f64}
      : (tensor<6x3xf32>, tensor<6x3xf32>, tensor<6x3xf32>) -> (tensor<6x3xf32>, tensor<6xf32>)
  return
}

// bf16: the log-sum-exp is f32.
// CHECK-LABEL: func.func @bf16
// CHECK: %[[O:.*]], %[[L:.*]] = weft.attention %arg0, %arg0, %arg0 {causal, scale = 5.000000e-01 : f64} : (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>) -> (tensor<2x8x4xbf16>, tensor<2x8xf32>)
// CHECK: weft.attention_grad %arg1, %arg0, %arg0, %arg0, %[[O]], %[[L]] {causal, scale = 5.000000e-01 : f64} : ({{.*}}, tensor<2x8xf32>) -> (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>)
func.func @bf16(%q: tensor<2x8x4xbf16>, %g: tensor<2x8x4xbf16>) {
  %o, %lse = weft.attention %q, %q, %q {scale = 0.5 : f64, causal}
      : (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>)
      -> (tensor<2x8x4xbf16>, tensor<2x8xf32>)
  %dq, %dk, %dv = weft.attention_grad %g, %q, %q, %q, %o, %lse {scale = 0.5 : f64, causal}
      : (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8xf32>)
      -> (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>)
  return
}
