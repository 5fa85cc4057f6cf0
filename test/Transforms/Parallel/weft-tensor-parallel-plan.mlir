// RUN: weft-opt %s --weft-apply-mesh="mesh=tp=2" | FileCheck %s --check-prefix=AUTO
// RUN: weft-opt %s --weft-apply-mesh="mesh=dp=2,tp=2 zero=1" | FileCheck %s --check-prefix=ZERO
// RUN: weft-opt %s --weft-apply-mesh="mesh=tp=2 tp-plan=manual shard=fc2.weight=[{tp},{}],fc2.b*=[{tp}]" | FileCheck %s --check-prefix=MANUAL
// RUN: not weft-opt %s --weft-apply-mesh="mesh=tp=2 shard=fc9.weight=[{tp},{}]" 2>&1 | FileCheck %s --check-prefix=NOMATCH
// RUN: not weft-opt %s --weft-apply-mesh="mesh=tp=2 shard=fc1.weight=[{tp}]" 2>&1 | FileCheck %s --check-prefix=RANK
// RUN: not weft-opt %s --weft-apply-mesh="mesh=tp=2 shard=fc1.weight=tp" 2>&1 | FileCheck %s --check-prefix=SYNTAX
// RUN: not weft-opt %s --weft-apply-mesh="mesh=dp=2,tp=2 shard=fc1.weight=[{dp},{}]" 2>&1 | FileCheck %s --check-prefix=AXIS
// RUN: not weft-opt %s --weft-apply-mesh="mesh=tp=3 shard=fc1.weight=[{tp},{}]" 2>&1 | FileCheck %s --check-prefix=DIVIDE

// Megatron's MLP, found by propagation from the forward pass: fc1 is
// column-parallel (its input is whole; its bias follows its output
// columns), fc2 row-parallel (its input arrives split on the contraction;
// its bias is added after the reduction, whole). Optimizer state follows
// its parameter; ZeRO adds dp on top, where the tp block divides.

func.func @forward(%w1: tensor<32x16xf32> {weft.param = "fc1.weight"},
                   %b1: tensor<32xf32> {weft.param = "fc1.bias"},
                   %w2: tensor<16x32xf32> {weft.param = "fc2.weight"},
                   %b2: tensor<16xf32> {weft.param = "fc2.bias"},
                   %x: tensor<8x16xf32> {weft.input = "input"}) -> tensor<8x16xf32> {
  %h = weft.matmul %x, %w1 {transpose_rhs = true} : (tensor<8x16xf32>, tensor<32x16xf32>) -> tensor<8x32xf32>
  %hb = weft.add %h, %b1 : (tensor<8x32xf32>, tensor<32xf32>) -> tensor<8x32xf32>
  %a = weft.relu %hb : tensor<8x32xf32>
  %y = weft.matmul %a, %w2 {transpose_rhs = true} : (tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
  %yb = weft.add %y, %b2 : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  return %yb : tensor<8x16xf32>
}

func.func @train_step(%w1: tensor<32x16xf32> {weft.param = "fc1.weight"},
                      %b1: tensor<32xf32> {weft.param = "fc1.bias"},
                      %w2: tensor<16x32xf32> {weft.param = "fc2.weight"},
                      %b2: tensor<16xf32> {weft.param = "fc2.bias"},
                      %m1: tensor<32x16xf32> {weft.state = "exp_avg.fc1.weight"},
                      %x: tensor<8x16xf32> {weft.input = "input"})
    -> (tensor<32x16xf32> {weft.param = "fc1.weight"},
        tensor<32xf32> {weft.param = "fc1.bias"},
        tensor<16x32xf32> {weft.param = "fc2.weight"},
        tensor<16xf32> {weft.param = "fc2.bias"},
        tensor<32x16xf32> {weft.state = "exp_avg.fc1.weight"}) {
  return %w1, %b1, %w2, %b2, %m1 : tensor<32x16xf32>, tensor<32xf32>, tensor<16x32xf32>, tensor<16xf32>, tensor<32x16xf32>
}

// AUTO: module attributes {weft.mesh = #weft.mesh<tp = 2>
// AUTO-SAME: sequence_parallel = false
// AUTO-SAME: tp_plan = "megatron"
// AUTO-LABEL: func.func @train_step
// AUTO-SAME: weft.param = "fc1.weight", weft.sharding = #weft.sharding<[{tp}, {}]>
// AUTO-SAME: weft.param = "fc1.bias", weft.sharding = #weft.sharding<[{tp}]>
// AUTO-SAME: weft.param = "fc2.weight", weft.sharding = #weft.sharding<[{}, {tp}]>
// AUTO-SAME: weft.param = "fc2.bias", weft.sharding = #weft.sharding<[{}]>
// AUTO-SAME: weft.sharding = #weft.sharding<[{tp}, {}]>, weft.state = "exp_avg.fc1.weight"
// AUTO-SAME: weft.input = "input", weft.sharding = #weft.sharding<[{}, {}]>

// ZERO: module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>
// ZERO-LABEL: func.func @train_step
// ZERO-SAME: weft.param = "fc1.weight", weft.sharding = #weft.sharding<[{tp}, {}]>
// ZERO-SAME: weft.sharding = #weft.sharding<[{tp, dp}, {}]>, weft.state = "exp_avg.fc1.weight"
// ZERO-SAME: weft.input = "input", weft.sharding = #weft.sharding<[{dp}, {}]>

// MANUAL-LABEL: func.func @train_step
// MANUAL-SAME: weft.param = "fc1.weight", weft.sharding = #weft.sharding<[{}, {}]>
// MANUAL-SAME: weft.param = "fc2.weight", weft.sharding = #weft.sharding<[{tp}, {}]>
// MANUAL-SAME: weft.param = "fc2.bias", weft.sharding = #weft.sharding<[{tp}]>

// NOMATCH: error: --shard 'fc9.weight=[{tp},{}]': no parameter of the model matches; parameters are named as in the model (weftc --emit=weft lists them)
// RANK: error: --shard 'fc1.weight=[{tp}]': parameter 'fc1.weight' ('tensor<32x16xf32>') cannot be laid out as #weft.sharding<[{tp}]>: the layout has 1 dimension(s), the parameter 2
// SYNTAX: error: --shard 'fc1.weight=tp': layout 'tp' does not parse: write one {axes} per dimension, e.g. [{tp}, {}] splits the rows over tp
// AXIS: error: --shard 'fc1.weight=[{dp},{}]': parameters are split over tp only (dp splits the batch; --zero shards over dp), not 'dp'
// DIVIDE: error: --shard 'fc1.weight=[{tp},{}]': parameter 'fc1.weight' ('tensor<32x16xf32>') cannot be laid out as #weft.sharding<[{tp}, {}]>: {{.*}}
