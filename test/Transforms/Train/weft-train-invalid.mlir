// User-facing errors of the training-step passes, one section per pass
// configuration (split-file), one case per error (-split-input-file).
// RUN: rm -rf %t && split-file %s %t
// RUN: weft-opt %t/verifier.mlir -split-input-file -verify-diagnostics
// RUN: weft-opt %t/loss-none.mlir -split-input-file -verify-diagnostics --weft-attach-loss=kind=none
// RUN: weft-opt %t/attach-loss.mlir -split-input-file -verify-diagnostics --weft-attach-loss
// RUN: weft-opt %t/autodiff.mlir -split-input-file -verify-diagnostics --weft-autodiff
// RUN: weft-opt %t/optimizer.mlir -split-input-file -verify-diagnostics --weft-optimizer
// RUN: weft-opt %t/unknown-optimizer.mlir -verify-diagnostics --weft-optimizer=optimizer=lamb
// RUN: weft-opt %t/unknown-schedule.mlir -verify-diagnostics --weft-optimizer="optimizer=sgd schedule=linear"
// RUN: weft-opt %t/unknown-loss.mlir -verify-diagnostics --weft-attach-loss=kind=hinge

//--- verifier.mlir

// Labels must be shaped like the logits without their class axis.
func.func @loss(%z: tensor<4x3xf32>, %y: tensor<4x2xi64>) -> tensor<f32> {
  // expected-error@+2 {{labels shape 4x2 does not fit logits 4x3: expected the logits shape without its class axis (4)}}
  // expected-error@+1 {{failed to infer returned types}}
  %l = weft.cross_entropy %z, %y : (tensor<4x3xf32>, tensor<4x2xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @loss(%p: tensor<4x3xf32>, %t: tensor<4xf32>) -> tensor<f32> {
  // expected-error@+2 {{prediction 4x3 and target 4 must have the same shape}}
  // expected-error@+1 {{failed to infer returned types}}
  %l = weft.mse %p, %t : (tensor<4x3xf32>, tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

//--- loss-none.mlir

// kind=none takes output 0 as the loss, so it must be a scalar.
// expected-error@+1 {{loss kind 'none' needs a model whose first output is a scalar loss; output 0 is 'tensor<4xf32>'}}
func.func @forward(%w: tensor<4xf32> {weft.param = "w"}) -> tensor<4xf32> {
  return %w : tensor<4xf32>
}

//--- attach-loss.mlir

// expected-error@+1 {{cross-entropy needs an output with a class axis; output 0 is 'tensor<f32>'}}
func.func @forward(%w: tensor<f32> {weft.param = "w"}) -> tensor<f32> {
  return %w : tensor<f32>
}

// -----

// expected-error@+1 {{the model's output 'tensor<4xi64>' is not a float tensor}}
func.func @forward(%t: tensor<4xi64> {weft.input = "input"}) -> tensor<4xi64> {
  return %t : tensor<4xi64>
}

// -----

// expected-error@+1 {{@forward already has an input named 'labels' (argument #1); name the labels differently}}
func.func @forward(%w: tensor<4x3xf32> {weft.param = "w"},
                   %l: tensor<4xi64> {weft.input = "labels"}) -> tensor<4x3xf32> {
  return %w : tensor<4x3xf32>
}

// -----

func.func @forward(%w: tensor<4x3xf32> {weft.param = "w"}) -> tensor<4x3xf32> {
  return %w : tensor<4x3xf32>
}
// expected-error@+1 {{the module already has a @loss function}}
func.func @loss() {
  return
}

// -----

// expected-error@+1 {{no function @forward to attach a loss to}}
module {
  func.func @predict(%w: tensor<4x3xf32> {weft.param = "w"}) -> tensor<4x3xf32> {
    return %w : tensor<4x3xf32>
  }
}

//--- autodiff.mlir

// The loss is not a scalar.
// expected-error@+1 {{the loss (result 0 of 'loss') must be a 0-d float tensor, got 'tensor<4x3xf32>'}}
func.func @loss(%w: tensor<4x3xf32> {weft.param = "w"}) -> tensor<4x3xf32> {
  %y = weft.tanh %w : tensor<4x3xf32>
  return %y : tensor<4x3xf32>
}

// -----

// A model with no parameters has nothing to train.
// expected-error@+1 {{model has no parameters: nothing to train}}
func.func @loss(%x: tensor<4x3xf32> {weft.input = "input"},
                %y: tensor<4xi64> {weft.input = "labels"}) -> tensor<f32> {
  %l = weft.cross_entropy %x, %y : (tensor<4x3xf32>, tensor<4xi64>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// An op with no gradient rule on the path from a parameter to the loss
// (here a backward op, i.e. a second derivative) is named.
func.func @loss(%w: tensor<1x1x4x4xf32> {weft.param = "w"},
                %g: tensor<1x1x2x2xf32> {weft.input = "grad"}) -> tensor<f32> {
  // expected-error@+1 {{op 'weft.max_pool2d_grad' has no gradient rule}}
  %dx = weft.max_pool2d_grad %g, %w {kernel = array<i64: 2, 2>,
                                     strides = array<i64: 2, 2>,
                                     padding = array<i64: 0, 0, 0, 0>}
      : (tensor<1x1x2x2xf32>, tensor<1x1x4x4xf32>) -> tensor<1x1x4x4xf32>
  %s = weft.reduce_sum %dx {axes = array<i64: 0, 1, 2, 3>}
      : (tensor<1x1x4x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

//--- optimizer.mlir

// expected-error@+1 {{no @loss_grad function; run --weft-autodiff first}}
module {
  func.func @loss(%w: tensor<4xf32> {weft.param = "w"}) -> tensor<f32> {
    %s = weft.reduce_sum %w {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// expected-error@+1 {{expected (loss, one gradient per parameter, next values of buffers) results, got 1 results for 1 parameters}}
func.func @loss_grad(%w: tensor<4xf32> {weft.param = "w"}) -> tensor<f32> {
  %s = weft.reduce_sum %w {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// expected-error@+1 {{no argument has a 'weft.param' attribute: nothing to train}}
func.func @loss_grad(%x: tensor<4xf32> {weft.input = "x"}) -> tensor<f32> {
  %s = weft.reduce_sum %x {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Master weights are f32.
// expected-error@+1 {{parameter argument #0 must be an f32 tensor named by a string (f32 master weights), got 'tensor<4xbf16>' named "w"}}
func.func @loss_grad(%w: tensor<4xbf16> {weft.param = "w"})
    -> (tensor<f32>, tensor<4xbf16> {weft.grad = "w"}) {
  %c = weft.constant dense<0.0> : tensor<f32>
  return %c, %w : tensor<f32>, tensor<4xbf16>
}

// -----

// expected-error@+1 {{result 1 must be the gradient of parameter 'w' ('tensor<4xf32>', weft.grad = "w")}}
func.func @loss_grad(%w: tensor<4xf32> {weft.param = "w"})
    -> (tensor<f32>, tensor<4xf32> {weft.grad = "v"}) {
  %c = weft.constant dense<0.0> : tensor<f32>
  return %c, %w : tensor<f32>, tensor<4xf32>
}

// -----

// expected-error@+1 {{input 'lr' clashes with the training step's own 'lr' input}}
func.func @loss_grad(%w: tensor<4xf32> {weft.param = "w"},
                     %lr: tensor<f32> {weft.input = "lr"})
    -> (tensor<f32>, tensor<4xf32> {weft.grad = "w"}) {
  return %lr, %w : tensor<f32>, tensor<4xf32>
}

// -----

func.func @loss_grad(%w: tensor<4xf32> {weft.param = "w"})
    -> (tensor<f32>, tensor<4xf32> {weft.grad = "w"}) {
  %c = weft.constant dense<0.0> : tensor<f32>
  return %c, %w : tensor<f32>, tensor<4xf32>
}
// expected-error@+1 {{the module already has a @train_step function}}
func.func @train_step() {
  return
}

//--- unknown-optimizer.mlir

// expected-error@+1 {{unknown optimizer 'lamb'; expected sgd or adamw}}
module {
  func.func @loss_grad(%w: tensor<4xf32> {weft.param = "w"})
      -> (tensor<f32>, tensor<4xf32> {weft.grad = "w"}) {
    %c = weft.constant dense<0.0> : tensor<f32>
    return %c, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- unknown-schedule.mlir

// expected-error@+1 {{unknown learning-rate schedule 'linear'; expected constant, warmup or cosine}}
module {
  func.func @loss_grad(%w: tensor<4xf32> {weft.param = "w"})
      -> (tensor<f32>, tensor<4xf32> {weft.grad = "w"}) {
    %c = weft.constant dense<0.0> : tensor<f32>
    return %c, %w : tensor<f32>, tensor<4xf32>
  }
}

//--- unknown-loss.mlir

// expected-error@+1 {{unknown loss 'hinge'; expected cross-entropy, mse or none}}
module {
  func.func @forward(%w: tensor<4x3xf32> {weft.param = "w"}) -> tensor<4x3xf32> {
    return %w : tensor<4x3xf32>
  }
}
