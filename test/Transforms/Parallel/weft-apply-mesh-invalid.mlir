// RUN: weft-opt %s -split-input-file --weft-apply-mesh="mesh=dp=3" -verify-diagnostics > /dev/null
// RUN: not weft-opt %s --weft-apply-mesh="mesh=pp=2" 2>&1 | FileCheck %s --check-prefix=PP
// RUN: not weft-opt %s --weft-apply-mesh="mesh=tp=2,tp=2" 2>&1 | FileCheck %s --check-prefix=TWICE
// RUN: not weft-opt %s --weft-apply-mesh="mesh=tp=2 zero=1" 2>&1 | FileCheck %s --check-prefix=ZERONODP
// RUN: not weft-opt %s --weft-apply-mesh="mesh=dp=2 sequence-parallel=true" 2>&1 | FileCheck %s --check-prefix=SPNOTP
// RUN: not weft-opt %s --weft-apply-mesh="mesh=dp=2 shard=w=[{tp}]" 2>&1 | FileCheck %s --check-prefix=SHARDNOTP
// RUN: not weft-opt %s --weft-apply-mesh="mesh=tp=2 tp-plan=best" 2>&1 | FileCheck %s --check-prefix=PLAN
// RUN: not weft-opt %s --weft-apply-mesh="mesh=dp=two" 2>&1 | FileCheck %s --check-prefix=PARSE
// RUN: not weft-opt %s --weft-apply-mesh="mesh=dp=2 zero=4" 2>&1 | FileCheck %s --check-prefix=ZERO

// A batch that does not divide by dp is refused, naming the input.
// expected-error@+1 {{the batch of input 'x' (4 samples) does not divide by dp=3: export the model with a batch that is a multiple of 3, or choose a dp that divides 4}}
func.func @train_step(%w: tensor<8x4xf32> {weft.param = "w"},
                      %x: tensor<4x4xf32> {weft.input = "x"})
    -> (tensor<8x4xf32> {weft.param = "w"}) {
  return %w : tensor<8x4xf32>
}

// PP: error: mesh axis 'pp' is not one Weft partitions: use dp (data parallel: the batch split, ZeRO) and tp (tensor parallel: layers split), e.g. --mesh dp=2,tp=2
// TWICE: error: mesh 'tp=2,tp=2' names tp twice
// ZERONODP: error: --zero 1 shards over data-parallel ranks, and mesh 'tp=2' has no dp axis: add dp=N
// SPNOTP: error: --sequence-parallel splits the sequence over the tensor-parallel ranks, and mesh 'dp=2' has no tp axis of 2 or more: add tp=N
// SHARDNOTP: error: --shard lays parameters out over tp, and mesh 'dp=2' has no tp axis: add tp=N
// PLAN: error: --tp-plan 'best': use megatron (parameters not given by --shard are split as Megatron-LM does) or manual (only those given)
// PARSE: error: mesh 'dp=two' does not parse: write axes as name=size, e.g. dp=2,tp=2
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
