// RUN: weft-opt %s --weft-assign-stages="stages=2 blocks-per-stage=1,2" | FileCheck %s --check-prefix=ONETWO
// RUN: weft-opt %s --weft-assign-stages="stages=2 blocks-per-stage=2,1" | FileCheck %s --check-prefix=TWOONE
// RUN: not weft-opt %s --weft-assign-stages="stages=2 blocks-per-stage=1,1" 2>&1 | FileCheck %s --check-prefix=SUM
// RUN: not weft-opt %s --weft-assign-stages="stages=3 blocks-per-stage=1,2" 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not weft-opt %s --weft-assign-stages="blocks-per-stage=1,2 cuts=h.1" 2>&1 | FileCheck %s --check-prefix=BOTH

// A plan's blocks_per_stage (weftc --plan passes it): the stages start at
// the first op of the layers the planner counted, numbered by the first
// number in their parameters' names (h.0, h.1, h.2; the head is not a
// layer and stays with the last).

// ONETWO: weft.matmul %arg4, %arg0 {{.*}}weft.stage = 0
// ONETWO: weft.relu {{.*}}weft.stage = 0
// ONETWO: weft.matmul {{.*}}, %arg1 {{.*}}weft.stage = 1
// ONETWO: weft.matmul {{.*}}, %arg2 {{.*}}weft.stage = 1
// ONETWO: weft.matmul {{.*}}, %arg3 {{.*}}weft.stage = 1

// TWOONE: weft.matmul {{.*}}, %arg1 {{.*}}weft.stage = 0
// TWOONE: weft.relu {{.*}}weft.stage = 0
// TWOONE: weft.matmul {{.*}}, %arg2 {{.*}}weft.stage = 1

// SUM: the plan's blocks_per_stage (2 stages, 2 layers) does not fit this model (2 stages, 3 layers): compile the plan with the model it was made for
// COUNT: the plan's blocks_per_stage (2 stages, 3 layers) does not fit this model (3 stages, 3 layers)
// BOTH: give the stages' cuts or their layers per stage, not both
module {
  func.func @forward(%w0: tensor<64x64xf32> {weft.param = "h.0.weight"},
                     %w1: tensor<64x64xf32> {weft.param = "h.1.weight"},
                     %w2: tensor<64x64xf32> {weft.param = "h.2.weight"},
                     %w3: tensor<64x64xf32> {weft.param = "head.weight"},
                     %x: tensor<8x64xf32> {weft.input = "x"}) -> tensor<8x64xf32> {
    %a0 = weft.matmul %x, %w0 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r0 = weft.relu %a0 : tensor<8x64xf32>
    %a1 = weft.matmul %r0, %w1 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r1 = weft.relu %a1 : tensor<8x64xf32>
    %a2 = weft.matmul %r1, %w2 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r2 = weft.relu %a2 : tensor<8x64xf32>
    %y = weft.matmul %r2, %w3 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    return %y : tensor<8x64xf32>
  }
}
