// RUN: not weft-opt %s --weft-assign-stages="cuts=l9" 2>&1 | FileCheck %s --check-prefix=NONE
// RUN: not weft-opt %s --weft-assign-stages="cuts=l1,l0" 2>&1 | FileCheck %s --check-prefix=ORDER
// RUN: not weft-opt %s --weft-assign-stages="stages=3 cuts=l1" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not weft-opt %s --weft-assign-stages="stages=9" 2>&1 | FileCheck %s --check-prefix=MANY

// NONE: --stage-cuts 'l9': no parameter of the model is named so or lies under it; name the first parameter of each stage, or a prefix of it such as a layer ('h.2')
// ORDER: --stage-cuts 'l0': its first op is not after the previous cut's
// COUNT: 3 pipeline stages need 2 cuts, but 1 are given
// MANY: 9 pipeline stages need 8 cuts, but the forward pass has only 3 ops: choose at most 3 stages

module {
  func.func @forward(%w0: tensor<4x4xf32> {weft.param = "l0.weight"},
                     %w1: tensor<4x4xf32> {weft.param = "l1.weight"},
                     %x: tensor<2x4xf32> {weft.input = "x"}) -> tensor<2x4xf32> {
    %a0 = weft.matmul %x, %w0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    %r0 = weft.relu %a0 : tensor<2x4xf32>
    %a1 = weft.matmul %r0, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
    return %a1 : tensor<2x4xf32>
  }
}
