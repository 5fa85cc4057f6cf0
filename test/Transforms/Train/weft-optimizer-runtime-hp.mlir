// RUN: weft-opt %s --weft-optimizer="optimizer=sgd momentum=0.9 clip-norm=2.0 runtime-hyperparameters=true" | FileCheck %s --check-prefix=SGD
// RUN: weft-opt %s --weft-optimizer="optimizer=adamw schedule=cosine warmup-steps=2 total-steps=10 runtime-hyperparameters=true" | FileCheck %s --check-prefix=ADAMW

func.func @loss_grad(%w: tensor<4x2xf32> {weft.param = "w"},
                     %x: tensor<8x4xf32> {weft.input = "x"})
    -> (tensor<f32> {weft.output = "loss"}, tensor<4x2xf32> {weft.grad = "w"}) {
  %z = weft.matmul %x, %w : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  %l = weft.mse %z, %z : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<f32>
  return %l, %w : tensor<f32>, tensor<4x2xf32>
}

// Hyperparameters become trailing f64 inputs after step and lr, and their
// compiled values are recorded on the module for the executable's defaults.
// SGD without weight decay has no weight_decay input: it is compiled in
// only when not zero. The pass also records how it built the step (for the
// model JSON of an executable compiled later from this IR), with weight
// decay's default resolved.
// SGD: module attributes {weft.hyperparameters = {clip_norm = 2.000000e+00 : f64, momentum = 9.000000e-01 : f64},
// SGD-SAME: weft.train_config = {accum_steps = 1 : i64, {{.*}}clip_norm = 2.000000e+00 : f64, {{.*}}momentum = 9.000000e-01 : f64, nesterov = false, optimizer = "sgd", {{.*}}weight_decay = 0.000000e+00 : f64}}
// SGD-LABEL: func.func @train_step(
// SGD-SAME:      {weft.input = "lr"},
// SGD-SAME:      %[[MU:[^:]*]]: tensor<f64> {weft.input = "hp.momentum"},
// SGD-SAME:      %[[CLIP:[^:]*]]: tensor<f64> {weft.input = "hp.clip_norm"})
// SGD-DAG:       weft.cast %[[MU]] : tensor<f64> -> tensor<f32>
// SGD-DAG:       weft.cast %[[CLIP]] : tensor<f64> -> tensor<f32>
// SGD-NOT:       dense<0.899999976>

// ADAMW-LABEL: func.func @train_step(
// ADAMW-SAME:      {weft.input = "hp.beta1"}, %{{[^:]*}}: tensor<f64> {weft.input = "hp.beta2"},
// ADAMW-SAME:      {weft.input = "hp.eps"}, %{{[^:]*}}: tensor<f64> {weft.input = "hp.weight_decay"},
// ADAMW-SAME:      {weft.input = "hp.warmup_steps"}, %{{[^:]*}}: tensor<f64> {weft.input = "hp.total_steps"},
// ADAMW-SAME:      {weft.input = "hp.min_lr_ratio"})
// ADAMW:           weft.cos
