// RUN: weft-opt %s -split-input-file --weft-autodiff -verify-diagnostics | FileCheck %s
// RUN: weft-opt %s --weft-autodiff --weft-optimizer 2> /dev/null \
// RUN:   | FileCheck %s --check-prefix=STEP

// A parameter that gets no gradient from the loss is reported by name with
// the reason, and becomes a buffer of the gradient function with no
// gradient result, so --weft-optimizer neither updates nor decays it (as
// torch.optim skips a parameter whose .grad is None). Here one parameter
// feeds only a second result, one only a comparison, one only indices.

// CHECK-LABEL: func.func @loss_grad(
// CHECK-SAME:    %{{[^:]*}}: tensor<4x2xf32> {weft.param = "fc.weight"}
// CHECK-SAME:    %{{[^:]*}}: tensor<2xf32> {weft.buffer = "aux.bias"}
// CHECK-SAME:    %{{[^:]*}}: tensor<4xf32> {weft.buffer = "attn.bias"}
// CHECK-SAME:    %{{[^:]*}}: tensor<3xf32> {weft.buffer = "pos"}
// CHECK-SAME:    -> (tensor<f32>, tensor<4x2xf32> {weft.grad = "fc.weight"}) {
// CHECK:         return %{{.*}}, %{{.*}} : tensor<f32>, tensor<4x2xf32>

// The training step carries them as buffers: no update, no decay, no
// optimizer state.
// STEP-LABEL: func.func @train_step(
// STEP-SAME:    {weft.param = "fc.weight"}
// STEP-SAME:    {weft.state = "exp_avg.fc.weight"}
// STEP-SAME:    {weft.state = "exp_avg_sq.fc.weight"}
// STEP-SAME:    {weft.buffer = "aux.bias"}
// STEP-SAME:    {weft.buffer = "attn.bias"}
// STEP-SAME:    {weft.buffer = "pos"}
// STEP-SAME:    -> (tensor<4x2xf32> {weft.param = "fc.weight"}, tensor<4x2xf32> {weft.state = "exp_avg.fc.weight"}, tensor<4x2xf32> {weft.state = "exp_avg_sq.fc.weight"}, tensor<f32> {weft.output = "loss"}, tensor<f32> {weft.output = "lr"}, tensor<f32> {weft.output = "grad_norm"})

// expected-warning@+3 {{parameter 'aux.bias' gets no gradient: it does not reach the loss; it stays a buffer (loaded, never updated or decayed), as torch.optim skips a parameter whose .grad stays None}}
// expected-warning@+2 {{parameter 'attn.bias' gets no gradient: every path to the loss crosses 'weft.cmp', which is not differentiable;}}
// expected-warning@+1 {{parameter 'pos' gets no gradient: every path to the loss crosses 'weft.cast', whose result is not a float tensor;}}
func.func @loss(%w: tensor<4x2xf32> {weft.param = "fc.weight"},
                %aux: tensor<2xf32> {weft.param = "aux.bias"},
                %mask: tensor<4xf32> {weft.param = "attn.bias"},
                %pos: tensor<3xf32> {weft.param = "pos"},
                %x: tensor<3x4xf32> {weft.input = "x"})
    -> (tensor<f32>, tensor<3x2xf32>) {
  %y = weft.matmul %x, %w : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %side = weft.add %y, %aux : (tensor<3x2xf32>, tensor<2xf32>) -> tensor<3x2xf32>
  %zero = weft.constant dense<0.0> : tensor<f32>
  %c = weft.cmp eq, %mask, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %keep = weft.where %c, %zero, %x : (tensor<4xi1>, tensor<f32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  %i = weft.cast %pos : tensor<3xf32> -> tensor<3xi64>
  %rows = weft.gather %keep, %i {axis = 0 : i64} : (tensor<3x4xf32>, tensor<3xi64>) -> tensor<3x4xf32>
  %h = weft.matmul %rows, %w : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
  %l = weft.reduce_sum %h {axes = array<i64: 0, 1>} : (tensor<3x2xf32>) -> tensor<f32>
  return %l, %side : tensor<f32>, tensor<3x2xf32>
}
