// RUN: weft-opt %s -split-input-file --weft-apply-mesh="mesh=dp=3" -verify-diagnostics > /dev/null
// RUN: not weft-opt %s --weft-apply-mesh="mesh=tp=2" 2>&1 | FileCheck %s --check-prefix=TP
// RUN: not weft-opt %s --weft-apply-mesh="mesh=dp=two" 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not weft-opt %s --weft-apply-mesh="mesh=dp=2 zero=4" 2>&1 | FileCheck %s --check-prefix=ZERO

// A batch that does not divide by dp is refused, naming the input.
// expected-error@+1 {{the batch of input 'x' (4 samples) does not divide by dp=3: export the model with a batch that is a multiple of 3, or choose a dp that divides 4}}
func.func @train_step(%w: tensor<8x4xf32> {weft.param = "w"},
                      %x: tensor<4x4xf32> {weft.input = "x"})
    -> (tensor<8x4xf32> {weft.param = "w"}) {
  return %w : tensor<8x4xf32>
}

// TP: error: mesh axis 'tp': only data parallelism (dp) can be partitioned so far
// PARSE: error: mesh 'dp=two' does not parse: write axes as name=size, e.g. dp=4
// ZERO: error: --zero 4 is not a ZeRO stage: use 0, 1, 2 or 3

// -----

// With 2 micro-batches of 2 samples, the micro-batch does not divide.
module attributes {weft.train_config = {accum_steps = 2 : i64}} {
  // expected-error@+1 {{a micro-batch of input 'x' (2 samples: 4 in 2 micro-batches) does not divide by dp=3}}
  func.func @train_step(%w: tensor<8x4xf32> {weft.param = "w"},
                        %x: tensor<4x4xf32> {weft.input = "x"})
      -> (tensor<8x4xf32> {weft.param = "w"}) {
    return %w : tensor<8x4xf32>
  }
}
