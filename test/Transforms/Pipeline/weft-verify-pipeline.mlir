// RUN: weft-opt %s --pass-pipeline='builtin.module(weft-assign-stages{cuts=l1},weft-attach-loss{kind=mse},weft-autodiff,weft-optimizer{optimizer=sgd accum-steps=2},weft-split-stages,weft-pipeline-step{ranks=2 schedule=1f1b})' -o %t.mlir
// RUN: weft-opt %t.mlir --weft-verify-pipeline -o /dev/null
// A receive edited to wait for micro-batch 1's gradient first: it takes
// that message when rank 1 sends it, so rank 0's own receive of tag 3
// finds nothing left to take, while micro-batch 0's gradient (tag 1),
// sent, is never received; the verifier names both. (A send does not
// wait: the runtime's sender thread carries it.)
// RUN: sed -E '/weft.recv .*peer = 1 : i64, tag = 1 : i64/s/tag = 1 : i64/tag = 3 : i64/' %t.mlir > %t.bad.mlir
// RUN: not weft-opt %t.bad.mlir --weft-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=PAIR
// PAIR: error: pipeline transfers do not meet: rank 0 receives tag 3 (tensor<8x64xf32>, a gradient of micro-batch 1 from stage 1) from rank 1, while rank 1 sends tag 1 (tensor<8x64xf32>, a gradient of micro-batch 0 from stage 1) to rank 0; the receive would wait until the runtime's timeout
// RUN: not weft-opt %S/Inputs/deadlocked-ranks.mlir --weft-verify-pipeline -o /dev/null 2>&1 | FileCheck %s --check-prefix=DEAD
// DEAD: error: pipeline ranks wait on each other and none can go on (each receives what its peer sends only later):
// DEAD-NEXT: rank 0 receives tag 1 (tensor<4xf32>, the gradient) from rank 1
// DEAD-NEXT: rank 1 receives tag 0 (tensor<4xf32>, the activation) from rank 0
module {
  func.func @forward(%w0: tensor<64x64xf32> {weft.param = "l0.weight"},
                     %w1: tensor<64x64xf32> {weft.param = "l1.weight"},
                     %x: tensor<8x64xf32> {weft.input = "x"}) -> tensor<8x64xf32> {
    %a0 = weft.matmul %x, %w0 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r0 = weft.relu %a0 : tensor<8x64xf32>
    %a1 = weft.matmul %r0, %w1 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    return %a1 : tensor<8x64xf32>
  }
}
