// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-parallel-pipeline{mesh=dp=2,tp=2 bucket-mb=0})' | FileCheck %s
// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-parallel-pipeline{mesh=dp=2,tp=2 zero=2 bucket-mb=0})' | FileCheck %s --check-prefix=ZERO2

// Two micro-batches (--accum-steps 2) of a tensor-parallel linear layer.
// Each micro-batch's weight gradient is a pending sum over dp; adding them
// first and reducing once sends the gradient over dp once a step, not once
// per micro-batch. ZeRO-2 keeps only a shard of each micro-batch's
// gradient, so there each is reduce-scattered as it is computed.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: weft.param = "w", weft.sharding = #weft.sharding<[{}, {tp}]>
// CHECK-NOT: weft.all_reduce {{.*}}axes = ["dp"]{{.*}}tensor<8x2xf32>
// CHECK: %[[SUM:.*]] = weft.add %{{.*}}, %{{.*}} : (tensor<8x2xf32>, tensor<8x2xf32>)
// CHECK-NEXT: weft.all_reduce %[[SUM]] {axes = ["dp"]} : tensor<8x2xf32>
// CHECK-NOT: weft.all_reduce {{.*}}axes = ["dp"]{{.*}}tensor<8x2xf32>
// CHECK: return

// ZERO2-LABEL: func.func @train_step
// ZERO2-COUNT-2: weft.reduce_scatter {{.*}}axes = ["dp"]
// ZERO2-NOT: weft.all_reduce {{.*}}axes = ["dp"]{{.*}}tensor<8x2xf32>
// ZERO2: return

module attributes {weft.hyperparameters = {}, weft.train_config = {accum_steps = 2 : i64, beta1 = 9.000000e-01 : f64, beta2 = 0.99899999999999999 : f64, clip_norm = 0.000000e+00 : f64, eps = 1.000000e-08 : f64, loss = "mse", lr_schedule = "constant", min_lr_ratio = 0.000000e+00 : f64, momentum = 0.000000e+00 : f64, nesterov = false, optimizer = "sgd", total_steps = 0 : i64, warmup_steps = 0 : i64, weight_decay = 0.000000e+00 : f64}} {
  func.func @forward(%arg0: tensor<8x4xf32> {weft.param = "w"}, %arg1: tensor<4x8xf32> {weft.input = "input"}) -> tensor<4x4xf32> {
    %0 = weft.matmul %arg1, %arg0 : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    return %0 : tensor<4x4xf32>
  }
  func.func @loss_grad(%arg0: tensor<8x4xf32> {weft.param = "w"}, %arg1: tensor<4x8xf32> {weft.input = "input"}, %arg2: tensor<4x4xf32> {weft.input = "labels"}) -> (tensor<f32> {weft.output = "loss"}, tensor<8x4xf32> {weft.grad = "w"}) {
    %0 = weft.constant dense<1.250000e-01> : tensor<f32>
    %1 = weft.constant dense<1.000000e+00> : tensor<f32>
    %2 = weft.matmul %arg1, %arg0 : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %3 = weft.mse %2, %arg2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<f32>
    %4 = weft.sub %2, %arg2 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
    %5 = weft.mul %4, %1 : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
    %6 = weft.mul %5, %0 : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
    %7 = weft.matmul %arg1, %6 {transpose_lhs = true} : (tensor<4x8xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
    return %3, %7 : tensor<f32>, tensor<8x4xf32>
  }
  func.func @train_step(%arg0: tensor<8x4xf32> {weft.param = "w"}, %arg1: tensor<8x8xf32> {weft.input = "input"}, %arg2: tensor<8x4xf32> {weft.input = "labels"}, %arg3: tensor<i64> {weft.input = "step"}, %arg4: tensor<f32> {weft.input = "lr"}) -> (tensor<8x4xf32> {weft.param = "w"}, tensor<f32> {weft.output = "loss"}, tensor<f32> {weft.output = "lr"}, tensor<f32> {weft.output = "grad_norm"}) {
    %0 = weft.constant dense<5.000000e-01> : tensor<f32>
    %1 = weft.slice %arg1 {limits = array<i64: 4, 8>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<8x8xf32>) -> tensor<4x8xf32>
    %2 = weft.slice %arg2 {limits = array<i64: 4, 4>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<8x4xf32>) -> tensor<4x4xf32>
    %3:2 = call @loss_grad(%arg0, %1, %2) : (tensor<8x4xf32>, tensor<4x8xf32>, tensor<4x4xf32>) -> (tensor<f32>, tensor<8x4xf32>)
    %4 = weft.slice %arg1 {limits = array<i64: 8, 8>, starts = array<i64: 4, 0>, strides = array<i64: 1, 1>} : (tensor<8x8xf32>) -> tensor<4x8xf32>
    %5 = weft.slice %arg2 {limits = array<i64: 8, 4>, starts = array<i64: 4, 0>, strides = array<i64: 1, 1>} : (tensor<8x4xf32>) -> tensor<4x4xf32>
    %6:2 = call @loss_grad(%arg0, %4, %5) : (tensor<8x4xf32>, tensor<4x8xf32>, tensor<4x4xf32>) -> (tensor<f32>, tensor<8x4xf32>)
    %7 = weft.add %3#0, %6#0 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %8 = weft.add %3#1, %6#1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %9 = weft.mul %7, %0 : (tensor<f32>, tensor<f32>) -> tensor<f32>
    %10 = weft.mul %8, %0 : (tensor<8x4xf32>, tensor<f32>) -> tensor<8x4xf32>
    %11 = weft.mul %10, %10 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %12 = weft.reduce_sum %11 {axes = array<i64: 0, 1>} : (tensor<8x4xf32>) -> tensor<f32>
    %13 = weft.sqrt %12 : tensor<f32>
    %14 = weft.mul %arg4, %10 : (tensor<f32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    %15 = weft.sub %arg0, %14 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    return %15, %9, %arg4, %13 : tensor<8x4xf32>, tensor<f32>, tensor<f32>, tensor<f32>
  }
}

