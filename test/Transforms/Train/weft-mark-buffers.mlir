// RUN: weft-opt --weft-mark-buffers -verify-diagnostics %s | FileCheck %s

// A float mask used only through a comparison is a buffer, and the pass
// says so; the weight that reaches the result through differentiable ops
// stays a parameter.
// CHECK-LABEL: func.func @masked
// CHECK-SAME: {weft.buffer = "attn.bias"}
// CHECK-SAME: {weft.param = "w"}
// CHECK-SAME: {weft.input = "x"}
// expected-warning@+1 {{parameter 'attn.bias' gets no gradient: every path to the results of 'masked' crosses 'weft.cmp', which is not differentiable; it stays a buffer (loaded, never updated or decayed), as torch.optim skips a parameter whose .grad stays None}}
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

// A parameter that does not reach any result at all is reported and frozen
// too.
// CHECK-LABEL: func.func @unused
// CHECK-SAME: {weft.buffer = "dead"}
// CHECK-SAME: {weft.param = "live"}
// expected-warning@+1 {{parameter 'dead' gets no gradient: it does not reach the results of 'unused'; it stays a buffer}}
func.func @unused(%dead: tensor<4xf32> {weft.param = "dead"},
                  %live: tensor<4xf32> {weft.param = "live"}) -> tensor<4xf32> {
  %0 = weft.exp %dead : tensor<4xf32>
  %1 = weft.tanh %live : tensor<4xf32>
  return %1 : tensor<4xf32>
}

// A float-to-integer cast ends the gradient like a comparison does.
// CHECK-LABEL: func.func @indices
// CHECK-SAME: {weft.buffer = "positions"}
// expected-warning@+1 {{parameter 'positions' gets no gradient: every path to the results of 'indices' crosses 'weft.cast', whose result is not a float tensor}}
func.func @indices(%p: tensor<4xf32> {weft.param = "positions"},
                   %table: tensor<8x2xf32> {weft.input = "table"}) -> tensor<4x2xf32> {
  %i = weft.cast %p : tensor<4xf32> -> tensor<4xi64>
  %g = weft.gather %table, %i {axis = 0 : i64} : (tensor<8x2xf32>, tensor<4xi64>) -> tensor<4x2xf32>
  return %g : tensor<4x2xf32>
}

// Only ops marked NotDifferentiable stop gradients: a parameter behind an
// op that merely lacks a gradient rule (here an op not yet legalized) stays
// trainable, so --weft-autodiff reports the op instead of the weight being
// frozen silently. A padded weight (weft.pad) is trainable too.
// CHECK-LABEL: func.func @no_rule
// CHECK-SAME: {weft.param = "act.alpha"}
// CHECK-SAME: {weft.param = "conv.weight"}
func.func @no_rule(%a: tensor<4xf32> {weft.param = "act.alpha"},
                   %w: tensor<4xf32> {weft.param = "conv.weight"})
    -> (tensor<4xf32>, tensor<6xf32>) {
  %y = weft.onnx.node "Softplus"(%a) {name = "/act/Softplus", opset = 17 : i64}
      : (tensor<4xf32>) -> tensor<4xf32>
  %p = weft.pad %w {low = array<i64: 2>, high = array<i64: 0>,
                    interior = array<i64: 0>} : (tensor<4xf32>) -> tensor<6xf32>
  return %y, %p : tensor<4xf32>, tensor<6xf32>
}
