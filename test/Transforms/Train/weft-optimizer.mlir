// RUN: weft-opt %s --weft-optimizer="optimizer=sgd momentum=0.9" | FileCheck %s --check-prefix=SGD
// RUN: weft-opt %s --weft-optimizer="optimizer=sgd momentum=0.9 nesterov=true weight-decay=0.1" | FileCheck %s --check-prefix=NESTEROV
// RUN: weft-opt %s --weft-optimizer="optimizer=adamw" | FileCheck %s --check-prefix=ADAMW
// RUN: weft-opt %s --weft-optimizer="optimizer=sgd clip-norm=1.0" | FileCheck %s --check-prefix=CLIP
// RUN: weft-opt %s --weft-optimizer="optimizer=sgd accum-steps=2" | FileCheck %s --check-prefix=ACCUM
// RUN: weft-opt %s --weft-optimizer="optimizer=sgd schedule=cosine warmup-steps=2 total-steps=10 min-lr-ratio=0.1" | FileCheck %s --check-prefix=COSINE

// The gradient function --weft-autodiff would produce (the body only needs
// the right types here).
func.func @loss_grad(%w: tensor<4x2xf32> {weft.param = "w"},
                     %b: tensor<2xf32> {weft.param = "b"},
                     %x: tensor<8x4xf32> {weft.input = "x"},
                     %y: tensor<8xi64> {weft.input = "labels"})
    -> (tensor<f32> {weft.output = "loss"}, tensor<4x2xf32> {weft.grad = "w"},
        tensor<2xf32> {weft.grad = "b"}) {
  %z = weft.matmul %x, %w : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  %l = weft.cross_entropy %z, %y : (tensor<8x2xf32>, tensor<8xi64>) -> tensor<f32>
  %g = weft.matmul %x, %z {transpose_lhs = true}
      : (tensor<8x4xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  return %l, %g, %b : tensor<f32>, tensor<4x2xf32>, tensor<2xf32>
}

// SGD with momentum: one momentum_buffer per parameter (state args after
// the parameters, before the batch); buf' = 0.9 buf + g, w' = w - lr buf'.
// A constant schedule uses lr as given.
// SGD-LABEL: func.func @train_step(
// SGD-SAME:      %[[W:[^:]*]]: tensor<4x2xf32> {weft.param = "w"}, %[[B:[^:]*]]: tensor<2xf32> {weft.param = "b"},
// SGD-SAME:      %[[MW:[^:]*]]: tensor<4x2xf32> {weft.state = "momentum_buffer.w"}, %[[MB:[^:]*]]: tensor<2xf32> {weft.state = "momentum_buffer.b"},
// SGD-SAME:      %[[X:[^:]*]]: tensor<8x4xf32> {weft.input = "x"}, %[[Y:[^:]*]]: tensor<8xi64> {weft.input = "labels"},
// SGD-SAME:      %{{[^:]*}}: tensor<i64> {weft.input = "step"}, %[[LR:[^:]*]]: tensor<f32> {weft.input = "lr"})
// SGD-SAME:      -> (tensor<4x2xf32> {weft.param = "w"}, tensor<2xf32> {weft.param = "b"},
// SGD-SAME:          tensor<4x2xf32> {weft.state = "momentum_buffer.w"}, tensor<2xf32> {weft.state = "momentum_buffer.b"},
// SGD-SAME:          tensor<f32> {weft.output = "loss"}, tensor<f32> {weft.output = "lr"}, tensor<f32> {weft.output = "grad_norm"})
// SGD:           %[[MU:.*]] = weft.constant dense<0.899999976> : tensor<f32>
// SGD:           %[[G:.*]]:3 = call @loss_grad(%[[W]], %[[B]], %[[X]], %[[Y]])
// SGD:           %[[DECAYED:.*]] = weft.mul %[[MU]], %[[MW]]
// SGD:           %[[BUF:.*]] = weft.add %[[DECAYED]], %[[G]]#1
// SGD:           %[[STEP:.*]] = weft.mul %[[LR]], %[[BUF]]
// SGD:           %[[NEW_W:.*]] = weft.sub %[[W]], %[[STEP]]
// SGD:           return %[[NEW_W]], %{{.*}}, %[[BUF]], %{{.*}}, %[[G]]#0, %[[LR]], %{{.*}} :

// Nesterov with L2 weight decay added to the gradient:
// g' = g + wd w; buf' = mu buf + g'; w' = w - lr (g' + mu buf').
// NESTEROV-LABEL: func.func @train_step(
// NESTEROV-SAME:      %[[W:[^:]*]]: tensor<4x2xf32> {weft.param = "w"}
// NESTEROV:           %[[G:.*]]:3 = call @loss_grad
// NESTEROV:           %[[WD:.*]] = weft.mul %{{.*}}, %[[W]]
// NESTEROV:           %[[GD:.*]] = weft.add %[[G]]#1, %[[WD]]
// NESTEROV:           %[[BUF:.*]] = weft.add %{{.*}}, %[[GD]]
// NESTEROV:           %[[LOOK:.*]] = weft.mul %{{.*}}, %[[BUF]]
// NESTEROV:           %[[DIR:.*]] = weft.add %[[GD]], %[[LOOK]]
// NESTEROV:           weft.mul %{{.*}}, %[[DIR]]

// AdamW: exp_avg and exp_avg_sq per parameter; decoupled weight decay
// (default 0.01); bias corrections 1 - beta^(step + 1) in f64, as
// torch.optim computes them in Python floats.
// ADAMW-LABEL: func.func @train_step(
// ADAMW-SAME:      %[[W:[^:]*]]: tensor<4x2xf32> {weft.param = "w"}
// ADAMW-SAME:      tensor<4x2xf32> {weft.state = "exp_avg.w"}, %{{[^:]*}}: tensor<2xf32> {weft.state = "exp_avg.b"}
// ADAMW-SAME:      tensor<4x2xf32> {weft.state = "exp_avg_sq.w"}, %{{[^:]*}}: tensor<2xf32> {weft.state = "exp_avg_sq.b"}
// ADAMW-SAME:      %[[STEP:[^:]*]]: tensor<i64> {weft.input = "step"}, %[[LR:[^:]*]]: tensor<f32> {weft.input = "lr"})
// ADAMW:           %[[BETA1:.*]] = weft.constant dense<9.000000e-01> : tensor<f64>
// ADAMW:           %[[BETA2:.*]] = weft.constant dense<0.99899999999999999> : tensor<f64>
// ADAMW:           %[[T64:.*]] = weft.cast %[[STEP]] : tensor<i64> -> tensor<f64>
// ADAMW:           %[[T:.*]] = weft.add %[[T64]], %{{.*}} : (tensor<f64>, tensor<f64>)
// ADAMW:           %[[POW1:.*]] = weft.pow %[[BETA1]], %[[T]] : (tensor<f64>, tensor<f64>) -> tensor<f64>
// ADAMW:           %[[BC1:.*]] = weft.sub %{{.*}}, %[[POW1]]
// ADAMW:           %[[POW2:.*]] = weft.pow %[[BETA2]], %[[T]]
// ADAMW:           %[[BC2:.*]] = weft.sub %{{.*}}, %[[POW2]]
// ADAMW:           %[[LR64:.*]] = weft.cast %[[LR]] : tensor<f32> -> tensor<f64>
// ADAMW:           %[[SS64:.*]] = weft.div %[[LR64]], %[[BC1]]
// ADAMW:           %[[STEP_SIZE:.*]] = weft.cast %[[SS64]] : tensor<f64> -> tensor<f32>
// ADAMW:           %[[SQRT_BC2:.*]] = weft.sqrt %[[BC2]] : tensor<f64>
// ADAMW:           %[[BC2_SQRT:.*]] = weft.cast %[[SQRT_BC2]] : tensor<f64> -> tensor<f32>
// ADAMW:           %[[DECAY:.*]] = weft.mul %[[LR]], %{{.*}}
// ADAMW:           %[[KEEP:.*]] = weft.sub %{{.*}}, %[[DECAY]]
// ADAMW:           %[[WD:.*]] = weft.mul %[[W]], %[[KEEP]]
// ADAMW:           %[[M:.*]] = weft.add
// ADAMW:           %[[GG:.*]] = weft.mul %[[G:.*]]#1, %[[G]]#1
// ADAMW:           %[[V:.*]] = weft.add
// ADAMW:           %[[ROOT:.*]] = weft.sqrt %[[V]] : tensor<4x2xf32>
// ADAMW:           %[[SCALED:.*]] = weft.div %[[ROOT]], %[[BC2_SQRT]]
// ADAMW:           %[[DENOM:.*]] = weft.add %[[SCALED]], %{{.*}}
// ADAMW:           %[[RATIO:.*]] = weft.div %[[M]], %[[DENOM]]
// ADAMW:           %[[UPDATE:.*]] = weft.mul %[[STEP_SIZE]], %[[RATIO]]
// ADAMW:           weft.sub %[[WD]], %[[UPDATE]]

// Global-norm clipping: sum of squares over all gradients, one coefficient
// min(1, max / (norm + 1e-6)) for every gradient. The norm (before
// clipping) is also the step's grad_norm output.
// CLIP-LABEL: func.func @train_step(
// CLIP:           %[[G:.*]]:3 = call @loss_grad
// CLIP:           %[[SQW:.*]] = weft.mul %[[G]]#1, %[[G]]#1
// CLIP:           %[[SW:.*]] = weft.reduce_sum %[[SQW]] {axes = array<i64: 0, 1>}
// CLIP:           %[[SQB:.*]] = weft.mul %[[G]]#2, %[[G]]#2
// CLIP:           %[[SB:.*]] = weft.reduce_sum %[[SQB]] {axes = array<i64: 0>}
// CLIP:           %[[TOTAL:.*]] = weft.add %[[SW]], %[[SB]]
// CLIP-DAG:       %[[EPS:.*]] = weft.constant dense<9.99999997E-7>
// CLIP-DAG:       %[[NORM:.*]] = weft.sqrt %[[TOTAL]]
// CLIP:           %[[DEN:.*]] = weft.add %[[NORM]], %[[EPS]]
// CLIP:           %[[RATIO:.*]] = weft.div %{{.*}}, %[[DEN]]
// CLIP:           %[[COEF:.*]] = weft.min %[[RATIO]], %{{.*}}
// CLIP:           weft.mul %[[G]]#1, %[[COEF]]
// CLIP:           weft.mul %[[G]]#2, %[[COEF]]

// Gradient accumulation: batch inputs grow K-fold along axis 0; each
// micro-batch is a slice and one call; gradients and losses are averaged.
// ACCUM-LABEL: func.func @train_step(
// ACCUM-SAME:      %[[X:[^:]*]]: tensor<16x4xf32> {weft.input = "x"}, %[[Y:[^:]*]]: tensor<16xi64> {weft.input = "labels"}
// ACCUM:           %[[X0:.*]] = weft.slice %[[X]] {limits = array<i64: 8, 4>, starts = array<i64: 0, 0>
// ACCUM:           %[[Y0:.*]] = weft.slice %[[Y]] {limits = array<i64: 8>, starts = array<i64: 0>
// ACCUM:           %[[G0:.*]]:3 = call @loss_grad(%{{.*}}, %{{.*}}, %[[X0]], %[[Y0]])
// ACCUM:           %[[X1:.*]] = weft.slice %[[X]] {limits = array<i64: 16, 4>, starts = array<i64: 8, 0>
// ACCUM:           %[[Y1:.*]] = weft.slice %[[Y]] {limits = array<i64: 16>, starts = array<i64: 8>
// ACCUM:           %[[G1:.*]]:3 = call @loss_grad(%{{.*}}, %{{.*}}, %[[X1]], %[[Y1]])
// ACCUM-NOT:       call @loss_grad
// ACCUM:           %[[LSUM:.*]] = weft.add %[[G0]]#0, %[[G1]]#0
// ACCUM:           %[[WSUM:.*]] = weft.add %[[G0]]#1, %[[G1]]#1
// ACCUM:           %[[HALF:.*]] = weft.constant dense<5.000000e-01> : tensor<f32>
// ACCUM:           weft.mul %[[LSUM]], %[[HALF]]
// ACCUM:           weft.mul %[[WSUM]], %[[HALF]]

// Cosine schedule: warmup (s + 1) / W before step W, then
// r + (1 - r) / 2 (1 + cos(pi min(1, (s - W) / (T - W)))); lr_t is the
// second output.
// COSINE-LABEL: func.func @train_step(
// COSINE-SAME:      %[[STEP:[^:]*]]: tensor<i64> {weft.input = "step"}, %[[LR:[^:]*]]: tensor<f32> {weft.input = "lr"})
// COSINE:           %[[W:.*]] = weft.constant dense<2.000000e+00> : tensor<f32>
// COSINE:           %[[FLOOR:.*]] = weft.constant dense<1.000000e-01> : tensor<f32>
// COSINE:           %[[S:.*]] = weft.cast %[[STEP]] : tensor<i64> -> tensor<f32>
// COSINE:           %[[PI:.*]] = weft.constant dense<3.14159274> : tensor<f32>
// COSINE:           %[[ANGLE:.*]] = weft.mul %[[PI]], %{{.*}}
// COSINE:           %[[COS:.*]] = weft.cos %[[ANGLE]]
// COSINE:           weft.sub %{{.*}}, %[[FLOOR]]
// COSINE:           %[[WARM:.*]] = weft.cmp lt, %[[S]], %[[W]]
// COSINE:           %[[FACTOR:.*]] = weft.where %[[WARM]], %{{.*}}, %{{.*}}
// COSINE:           %[[LRT:.*]] = weft.mul %[[LR]], %[[FACTOR]]
// COSINE:           return {{.*}}, %[[LRT]], %{{.*}} :
