// RUN: weft-opt %s --weft-assign-stages="stages=2" | FileCheck %s --check-prefix=AUTO
// RUN: weft-opt %s --weft-assign-stages="cuts=l1" | FileCheck %s --check-prefix=CUT
// RUN: weft-opt %s --weft-assign-stages="stages=4" | FileCheck %s --check-prefix=FOUR

// Four equal layers and a head tied to the first layer's weight. Two
// stages balance at the layer boundary (the relu's output, [8, 64], is all
// that crosses); given by hand, stage 1 starts where l1.weight is read.
// The tied weight is read on both stages.

// AUTO: module attributes {weft.pipeline_stages = [{bytes_sent = 2048 : i64, flops = 132096 : i64, ops = 4 : i64, params = 8192 : i64}, {bytes_sent = 0 : i64, flops = 197120 : i64, ops = 4 : i64, params = 12288 : i64}]}
// AUTO: %arg0: tensor<64x64xf32> {weft.param = "l0.weight", weft.stages = array<i64: 0, 1>}
// AUTO-SAME: %arg1: tensor<64x64xf32> {weft.param = "l1.weight", weft.stages = array<i64: 0>}
// AUTO-SAME: %arg2: tensor<64x64xf32> {weft.param = "l2.weight", weft.stages = array<i64: 1>}
// AUTO-SAME: %arg4: tensor<8x64xf32> {weft.input = "x", weft.stages = array<i64: 0>}
// AUTO: weft.matmul %arg4, %arg0 {{.*}}weft.stage = 0
// AUTO: weft.relu {{.*}}weft.stage = 0
// AUTO: weft.matmul {{.*}}, %arg1 {{.*}}weft.stage = 0
// AUTO: weft.relu {{.*}}weft.stage = 0
// AUTO: weft.matmul {{.*}}, %arg2 {{.*}}weft.stage = 1
// AUTO: weft.matmul {{.*}}, %arg0 {{.*}}weft.stage = 1

// CUT: module attributes {weft.pipeline_stages = [{bytes_sent = 2048 : i64, flops = 66048 : i64, ops = 2 : i64, params = 4096 : i64}, {bytes_sent = 0 : i64, flops = 263168 : i64, ops = 6 : i64, params = 16384 : i64}]}
// CUT: weft.relu {{.*}}weft.stage = 0
// CUT: weft.matmul {{.*}}, %arg1 {{.*}}weft.stage = 1

// One layer (a matmul and its relu) per stage, the last with the head.
// FOUR: module attributes {weft.pipeline_stages = [{bytes_sent = 2048 : i64, flops = 66048 : i64, ops = 2 : i64, params = 4096 : i64}, {bytes_sent = 2048 : i64, flops = 66048 : i64, ops = 2 : i64, params = 4096 : i64}, {bytes_sent = 2048 : i64, flops = 66048 : i64, ops = 2 : i64, params = 4096 : i64}, {bytes_sent = 0 : i64, flops = 131072 : i64, ops = 2 : i64, params = 8192 : i64}]}
module {
  func.func @forward(%w0: tensor<64x64xf32> {weft.param = "l0.weight"},
                     %w1: tensor<64x64xf32> {weft.param = "l1.weight"},
                     %w2: tensor<64x64xf32> {weft.param = "l2.weight"},
                     %w3: tensor<64x64xf32> {weft.param = "l3.weight"},
                     %x: tensor<8x64xf32> {weft.input = "x"}) -> tensor<8x64xf32> {
    %a0 = weft.matmul %x, %w0 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r0 = weft.relu %a0 : tensor<8x64xf32>
    %a1 = weft.matmul %r0, %w1 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r1 = weft.relu %a1 : tensor<8x64xf32>
    %a2 = weft.matmul %r1, %w2 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r2 = weft.relu %a2 : tensor<8x64xf32>
    %a3 = weft.matmul %r2, %w3 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %h = weft.matmul %a3, %w0 : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    return %h : tensor<8x64xf32>
  }
}

