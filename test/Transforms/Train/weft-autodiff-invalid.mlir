// RUN: weft-opt %s -split-input-file --weft-autodiff -verify-diagnostics

// expected-error@+1 {{the loss (result 0 of 'loss') must be a 0-d float tensor, got 'tensor<4xf32>'}}
func.func @loss(%w: tensor<4xf32> {weft.param = "w"}) -> tensor<4xf32> {
  %y = weft.tanh %w : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error@+1 {{the loss (result 0 of 'loss') must be a 0-d float tensor, got 'tensor<i64>'}}
func.func @loss(%w: tensor<4xf32> {weft.param = "w"}) -> tensor<i64> {
  %c = weft.constant dense<0> : tensor<i64>
  return %c : tensor<i64>
}

// -----

// expected-error@+1 {{model has no parameters: nothing to train}}
func.func @loss(%x: tensor<4xf32> {weft.input = "x"}) -> tensor<f32> {
  %s = weft.reduce_sum %x {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

func.func @loss(%w: tensor<4xf32> {weft.param = "w"}) -> tensor<f32> {
  // expected-error@+1 {{op 'weft.onnx.node' has no gradient rule}}
  %y = weft.onnx.node "Softplus"(%w) {name = "/act/Softplus", opset = 17 : i64}
      : (tensor<4xf32>) -> tensor<4xf32>
  %s = weft.reduce_sum %y {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// expected-error@+1 {{function 'loss' not found}}
module {
  func.func @forward(%w: tensor<4xf32> {weft.param = "w"}) -> tensor<4xf32> {
    return %w : tensor<4xf32>
  }
}

// -----

// expected-error@+1 {{function 'loss' must return the loss as result 0}}
func.func @loss(%w: tensor<4xf32> {weft.param = "w"}) {
  return
}

// -----

func.func @loss(%w: tensor<f32> {weft.param = "w"}) -> tensor<f32> {
  return %w : tensor<f32>
}
// expected-error@+1 {{cannot create the gradient function: symbol 'loss_grad' already exists}}
func.func @loss_grad() {
  return
}

// -----

// expected-error@+1 {{parameter 'w' must be a statically shaped tensor of floats or integers, got 'tensor<?xf32>'}}
func.func @loss(%w: tensor<?xf32> {weft.param = "w"}) -> tensor<f32> {
  %c = weft.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// expected-error@+1 {{argument #0: 'weft.param' must be a string naming the parameter, got 1 : i64}}
func.func @loss(%w: tensor<4xf32> {weft.param = 1}) -> tensor<f32> {
  %c = weft.constant dense<0.0> : tensor<f32>
  return %c : tensor<f32>
}

// -----

// An op without a gradient rule between a parameter and the loss is an
// error naming both, never a parameter left untrained.
func.func @loss(%w: tensor<1x1x4x4xf32> {weft.param = "conv.weight"},
                %x: tensor<1x1x4x4xf32> {weft.input = "x"}) -> tensor<f32> {
  // expected-error@+1 {{op 'weft.max_pool2d_grad' has no gradient rule, but it lies on the path from parameter 'conv.weight' to the loss: Weft cannot train this model as it is (a missing rule is a compiler gap; to train without that parameter, freeze it with --freeze)}}
  %y = weft.max_pool2d_grad %w, %x {kernel = array<i64: 1, 1>, strides = array<i64: 1, 1>,
                                    padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x1x4x4xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %s = weft.reduce_sum %y {axes = array<i64: 0, 1, 2, 3>} : (tensor<1x1x4x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Every parameter without a gradient is reported; when none is left there
// is nothing to train.
// expected-warning@+2 {{parameter 'mask' gets no gradient: every path to the loss crosses 'weft.cmp', which is not differentiable}}
// expected-error@+1 {{no parameter gets a gradient from the loss of 'loss': nothing to train}}
func.func @loss(%m: tensor<4xf32> {weft.param = "mask"},
                %x: tensor<4xf32> {weft.input = "x"}) -> tensor<f32> {
  %zero = weft.constant dense<0.0> : tensor<f32>
  %c = weft.cmp eq, %m, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %r = weft.where %c, %x, %zero : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %s = weft.reduce_sum %r {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
