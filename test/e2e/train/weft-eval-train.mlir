// weft-eval as a training loop driver: --scalar binds the 0-d step and lr,
// --param-dir reads parameters and optimizer state (state starts at zero
// when its file is missing), --output-dir names each result by its
// attribute, so a second call continues from the first.
// RUN: rm -rf %t && mkdir -p %t/state
// RUN: %python -c "import numpy as np; np.save('%t/state/w.npy', np.array([1, 2], np.float32)); np.save('%t/x.npy', np.array([0.5, -1], np.float32))"
// RUN: weft-eval %s --fn train_step --param-dir %t/state --output-dir %t/state \
// RUN:     --input x=%t/x.npy --scalar step=0 --scalar lr=0.5 --print \
// RUN:   | FileCheck %s --check-prefix=STEP0
// RUN: weft-eval %s --fn train_step --param-dir %t/state --output-dir %t/state \
// RUN:     --input x=%t/x.npy --scalar step=1 --scalar lr=0.5 --print \
// RUN:   | FileCheck %s --check-prefix=STEP1
// RUN: ls %t/state | FileCheck %s --check-prefix=FILES

// STEP0:      result 0: tensor<2xf32> -> {{.*}}state/w.npy
// STEP0-NEXT:   [0.75, 2.5]
// STEP0-NEXT: result 1: tensor<2xf32> -> {{.*}}state/momentum_buffer.w.npy
// STEP0-NEXT:   [0.5, -1]
// STEP0-NEXT: result 2: tensor<2xf32> -> {{.*}}state/grad.w.npy
// STEP0-NEXT:   [0.5, -1]
// STEP0-NEXT: result 3: tensor<f32> -> {{.*}}state/lr.npy
// STEP0-NEXT:   [0.5]
// STEP0-NEXT: result 4: tensor<i64> -> {{.*}}state/result4.npy
// STEP0-NEXT:   [0]

// STEP1:      result 0: tensor<2xf32> -> {{.*}}state/w.npy
// STEP1-NEXT:   [0.25, 3.5]
// STEP1-NEXT: result 1: tensor<2xf32> -> {{.*}}state/momentum_buffer.w.npy
// STEP1-NEXT:   [1, -2]
// STEP1:      result 4: tensor<i64>
// STEP1-NEXT:   [1]

// FILES:      grad.w.npy
// FILES-NEXT: lr.npy
// FILES-NEXT: momentum_buffer.w.npy
// FILES-NEXT: result4.npy
// FILES-NEXT: w.npy

// Binding errors name the flag, the argument and its type.
// RUN: not weft-eval %s --fn train_step --param-dir %t/state --input x=%t/x.npy \
// RUN:     --scalar step=1.5 --scalar lr=0.5 2>&1 | FileCheck %s --check-prefix=NOT-INT
// NOT-INT: error: --scalar step=1.5: not an integer (input 'step' is tensor<i64>)
// RUN: not weft-eval %s --fn train_step --param-dir %t/state --input x=%t/x.npy \
// RUN:     --scalar step=1 --scalar lr=fast 2>&1 | FileCheck %s --check-prefix=NOT-NUM
// NOT-NUM: error: --scalar lr=fast: not a number (input 'lr' is tensor<f32>)
// RUN: not weft-eval %s --fn train_step --param-dir %t/state --scalar x=1 \
// RUN:     --scalar step=1 --scalar lr=0.5 2>&1 | FileCheck %s --check-prefix=NOT-0D
// NOT-0D: error: --scalar x=1: input 'x' has type tensor<2xf32>, not a 0-d tensor; bind it with --input x=FILE.npy
// RUN: not weft-eval %s --fn train_step --param-dir %t/state --input x=%t/x.npy \
// RUN:     --scalar steps=1 --scalar lr=0.5 2>&1 | FileCheck %s --check-prefix=NO-INPUT
// NO-INPUT: error: --scalar steps: @train_step has no input named 'steps' (inputs: x, step, lr)
// RUN: not weft-eval %s --fn train_step --param-dir %t/missing --input x=%t/x.npy \
// RUN:     --scalar step=1 --scalar lr=0.5 2>&1 | FileCheck %s --check-prefix=NO-DIR
// NO-DIR: error: --param-dir {{.*}}missing: no such directory
// RUN: not weft-eval %s --fn twice --output-dir %t/out 2>&1 \
// RUN:   | FileCheck %s --check-prefix=TWICE
// TWICE: error: results 0 and 1 of @twice are both named 'loss'; --output-dir needs distinct names

// buf' = buf + x, w' = w - lr * buf' (SGD with momentum 1 on gradient x).
func.func @train_step(%w: tensor<2xf32> {weft.param = "w"},
                      %m: tensor<2xf32> {weft.state = "momentum_buffer.w"},
                      %x: tensor<2xf32> {weft.input = "x"},
                      %step: tensor<i64> {weft.input = "step"},
                      %lr: tensor<f32> {weft.input = "lr"})
    -> (tensor<2xf32> {weft.param = "w"},
        tensor<2xf32> {weft.state = "momentum_buffer.w"},
        tensor<2xf32> {weft.grad = "w"}, tensor<f32> {weft.output = "lr"},
        tensor<i64>) {
  %buf = weft.add %m, %x : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  %d = weft.mul %lr, %buf : (tensor<f32>, tensor<2xf32>) -> tensor<2xf32>
  %nw = weft.sub %w, %d : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
  return %nw, %buf, %x, %lr, %step
      : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>, tensor<f32>, tensor<i64>
}

func.func @twice() -> (tensor<f32> {weft.output = "loss"},
                       tensor<f32> {weft.output = "loss"}) {
  %c = weft.constant dense<1.0> : tensor<f32>
  return %c, %c : tensor<f32>, tensor<f32>
}
