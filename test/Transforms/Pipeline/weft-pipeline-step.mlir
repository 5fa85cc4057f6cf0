// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-assign-stages{cuts=l1},weft-attach-loss{kind=mse},weft-autodiff,weft-optimizer{optimizer=sgd accum-steps=2},weft-split-stages,weft-pipeline-step{ranks=2 schedule=gpipe})' | FileCheck %s --check-prefix=GPIPE
// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-assign-stages{cuts=l1},weft-attach-loss{kind=mse},weft-autodiff,weft-optimizer{optimizer=sgd accum-steps=2},weft-split-stages,weft-pipeline-step{ranks=2 schedule=1f1b})' | FileCheck %s --check-prefix=ONEF
// RUN: not weft-opt %s --pass-pipeline='builtin.module(weft-assign-stages{cuts=l1},weft-attach-loss{kind=mse},weft-autodiff,weft-optimizer{optimizer=sgd accum-steps=2},weft-split-stages,weft-pipeline-step{ranks=2 schedule=zero-bubble})' 2>&1 | FileCheck %s --check-prefix=ZB
// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-assign-stages{cuts=l1},weft-attach-loss{kind=mse},weft-autodiff,weft-optimizer{optimizer=sgd accum-steps=2},weft-split-stages{split-backward=true},weft-pipeline-step{ranks=2 schedule=zero-bubble})' | FileCheck %s --check-prefix=ZBOK
// RUN: not weft-opt %s --pass-pipeline='builtin.module(weft-assign-stages{cuts=l1},weft-attach-loss{kind=mse},weft-autodiff,weft-optimizer{optimizer=sgd accum-steps=2},weft-split-stages,weft-pipeline-step{ranks=3})' 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not weft-opt %s --pass-pipeline='builtin.module(weft-assign-stages{cuts=l1},weft-attach-loss{kind=mse},weft-autodiff,weft-optimizer{optimizer=sgd accum-steps=2},weft-pipeline-step{ranks=2})' 2>&1 | FileCheck %s --check-prefix=NOPIECES

// Two layers on two pipeline ranks, two micro-batches of 8 rows. Rank 0
// takes l0 and the input, runs both forward pieces (sending each
// activation on), then both backward pieces (receiving each gradient)
// under GPipe; rank 1 takes l1 and the labels, runs its forward and
// backward pieces as the activations arrive. Both ranks update their own
// parameter and return the step's outputs (loss, learning rate, gradient
// norm): once the schedule is done rank 1 sends the loss to rank 0, and
// the two exchange their parameters' shares of the squared norm.

// The last micro-batch's backward piece finishes the gradient sum: a copy
// of the piece takes the earlier micro-batches' sum and adds its own
// gradient right after computing it (a reduction over dp, once the step is
// laid out, then starts there, before the rest of the piece).
// GPIPE-LABEL: func.func private @loss_grad.backward0.accumulate(
// GPIPE-SAME: %[[SUM0:[^:]*]]: tensor<64x64xf32>) -> tensor<64x64xf32> attributes {weft.phase = "backward", weft.stage = 0 : i64}
// GPIPE: %[[G:.*]] = weft.matmul
// GPIPE-NEXT: %[[S:.*]] = weft.add %[[SUM0]], %[[G]]
// GPIPE-NEXT: return %[[S]]
// GPIPE-LABEL: func.func @train_step.rank0(
// GPIPE-SAME: {weft.param = "l0.weight"
// GPIPE-SAME: {weft.input = "x"
// GPIPE-NOT: l1.weight
// GPIPE-SAME: -> (tensor<64x64xf32> {weft.param = "l0.weight"
// GPIPE-SAME: weft.pipeline_rank = 0 : i64, weft.schedule = ["rank 0 (stage 0) runs F of micro-batch 0", "rank 0 (stage 0) sends the activation of micro-batch 0 to rank 1", "rank 0 (stage 0) runs F of micro-batch 1",
// GPIPE: %[[A0:.*]]:2 = call @loss_grad.forward0({{.*}}) {weft.micro_batch = 0 : i64}
// GPIPE-NEXT: weft.send %[[A0]]#1 {axes = ["pp"], peer = 1 : i64, tag = 0 : i64, weft.message = {{"[^"]*"}}} : tensor<8x64xf32>
// GPIPE: %[[A1:.*]]:2 = call @loss_grad.forward0({{.*}}) {weft.micro_batch = 1 : i64}
// GPIPE-NEXT: weft.send %[[A1]]#1 {axes = ["pp"], peer = 1 : i64, tag = 2 : i64, weft.message = {{"[^"]*"}}}
// GPIPE-NEXT: %[[G0:.*]] = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 1 : i64, weft.message = {{"[^"]*"}}} : tensor<8x64xf32>
// GPIPE-NEXT: %[[W0:.*]] = call @loss_grad.backward0(%[[A0]]#0, %[[G0]], {{.*}}) {weft.micro_batch = 0 : i64}
// GPIPE-NEXT: %[[G1:.*]] = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 3 : i64, weft.message = {{"[^"]*"}}}
// The micro-batches' gradients are summed in the last one's piece, which
// takes micro-batch 0's; the loss and the shares of the squared gradient
// norm cross as one number each.
// GPIPE-NEXT: call @loss_grad.backward0.accumulate(%[[A1]]#0, %[[G1]], %{{.*}}, %[[W0]]) {weft.micro_batch = 1 : i64}
// GPIPE-NOT: weft.add %[[W0]]
// After the schedule each rank sends before it receives (a send waits for
// nothing), so the two shares cross at once.
// GPIPE: weft.send %{{.*}} {axes = ["pp"], peer = 1 : i64, tag = 5 : i64, weft.message = {{"[^"]*"}}} : tensor<f32>
// GPIPE-NEXT: weft.recv {axes = ["pp"], peer = 1 : i64, tag = 4 : i64, weft.message = {{"[^"]*"}}} : tensor<f32>
// GPIPE-NEXT: weft.recv {axes = ["pp"], peer = 1 : i64, tag = 6 : i64, weft.message = {{"[^"]*"}}} : tensor<f32>
// GPIPE-NOT: weft.send
// GPIPE: return {{.*}} : tensor<64x64xf32>, tensor<f32>, tensor<f32>, tensor<f32>
// GPIPE-LABEL: func.func @train_step.rank1(
// GPIPE-SAME: {weft.param = "l1.weight"
// GPIPE-SAME: {weft.input = "labels"
// GPIPE-SAME: -> (tensor<64x64xf32> {weft.param = "l1.weight"{{.*}}}, tensor<f32> {weft.output = "loss"}, tensor<f32> {weft.output = "lr"}, tensor<f32> {weft.output = "grad_norm"})
// GPIPE: weft.recv {axes = ["pp"], peer = 0 : i64, tag = 0 : i64, weft.message = {{"[^"]*"}}}
// GPIPE: call @loss_grad.forward1({{.*}}) {weft.micro_batch = 0 : i64}
// GPIPE: weft.recv {axes = ["pp"], peer = 0 : i64, tag = 2 : i64, weft.message = {{"[^"]*"}}}
// GPIPE: call @loss_grad.forward1({{.*}}) {weft.micro_batch = 1 : i64}
// GPIPE: call @loss_grad.backward1({{.*}}) {weft.micro_batch = 0 : i64}
// GPIPE: weft.send {{.*}} tag = 1 : i64
// GPIPE: call @loss_grad.backward1.accumulate({{.*}}) {weft.micro_batch = 1 : i64}
// GPIPE: weft.send {{.*}} tag = 3 : i64
// GPIPE: weft.send {{.*}} tag = 4 : i64{{.*}} : tensor<f32>
// GPIPE: weft.send {{.*}} tag = 6 : i64{{.*}} : tensor<f32>
// GPIPE: weft.recv {axes = ["pp"], peer = 0 : i64, tag = 5 : i64, weft.message = {{"[^"]*"}}} : tensor<f32>

// 1F1B: the last rank runs each micro-batch's backward right after its
// forward.
// ONEF-LABEL: func.func @train_step.rank1(
// ONEF: call @loss_grad.forward1({{.*}}) {weft.micro_batch = 0 : i64}
// ONEF: call @loss_grad.backward1({{.*}}) {weft.micro_batch = 0 : i64}
// ONEF: call @loss_grad.forward1({{.*}}) {weft.micro_batch = 1 : i64}
// ONEF: call @loss_grad.backward1.accumulate({{.*}}) {weft.micro_batch = 1 : i64}

// Zero-bubble: the last rank runs its input-gradient part and sends the
// gradient on before its weight-gradient part; rank 0's backward is all
// weight gradient.
// ZBOK-LABEL: func.func @train_step.rank0(
// ZBOK: call @loss_grad.weight_grad0({{.*}}) {weft.micro_batch = 0 : i64}
// ZBOK-LABEL: func.func @train_step.rank1(
// ZBOK: %[[I:.*]]:2 = call @loss_grad.input_grad1({{.*}}) {weft.micro_batch = 0 : i64}
// ZBOK-NEXT: weft.send %[[I]]#1 {axes = ["pp"], peer = 0 : i64, tag = 1 : i64, weft.message = {{"[^"]*"}}}
// ZBOK: call @loss_grad.input_grad1({{.*}}) {weft.micro_batch = 1 : i64}
// ZBOK: call @loss_grad.weight_grad1(%[[I]]#0, {{.*}}) {weft.micro_batch = 0 : i64}

// ZB: --schedule zero-bubble runs each stage's backward as an input-gradient and a weight-gradient piece: cut them with --weft-split-stages{split-backward=true}
// COUNT: the model is cut into 2 stages, but 3 pipeline ranks x 1 virtual stages run 3
// NOPIECES: @train_step calls no gradient function cut into pipeline pieces: run --weft-split-stages first
module {
  func.func @forward(%w0: tensor<64x64xf32> {weft.param = "l0.weight"},
                     %w1: tensor<64x64xf32> {weft.param = "l1.weight"},
                     %x: tensor<8x64xf32> {weft.input = "x"}) -> tensor<8x64xf32> {
    %a0 = weft.matmul %x, %w0 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r0 = weft.gelu %a0 : tensor<8x64xf32>
    %a1 = weft.matmul %r0, %w1 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    return %a1 : tensor<8x64xf32>
  }
}
