// RUN: weft-opt --weft-mark-buffers %s | FileCheck %s

// A float mask used only through a comparison is a buffer; the weight that
// reaches the result through differentiable ops stays a parameter, and so
// does one tied into two uses.
// CHECK-LABEL: func.func @masked
// CHECK-SAME: {weft.buffer = "attn.bias"}
// CHECK-SAME: {weft.param = "w"}
// CHECK-SAME: {weft.input = "x"}
func.func @masked(%mask: tensor<4x4xf32> {weft.param = "attn.bias"},
                  %w: tensor<4x4xf32> {weft.param = "w"},
                  %x: tensor<4x4xf32> {weft.input = "x"}) -> tensor<4x4xf32> {
  %zero = weft.constant dense<0.0> : tensor<f32>
  %ninf = weft.constant dense<-1.0e9> : tensor<f32>
  %c = weft.cmp eq, %mask, %zero : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
  %s = weft.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %m = weft.where %c, %ninf, %s : (tensor<4x4xi1>, tensor<f32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m : tensor<4x4xf32>
}

// A parameter that does not reach any result at all is frozen too.
// CHECK-LABEL: func.func @unused
// CHECK-SAME: {weft.buffer = "dead"}
// CHECK-SAME: {weft.param = "live"}
func.func @unused(%dead: tensor<4xf32> {weft.param = "dead"},
                  %live: tensor<4xf32> {weft.param = "live"}) -> tensor<4xf32> {
  %0 = weft.exp %dead : tensor<4xf32>
  %1 = weft.tanh %live : tensor<4xf32>
  return %1 : tensor<4xf32>
}
