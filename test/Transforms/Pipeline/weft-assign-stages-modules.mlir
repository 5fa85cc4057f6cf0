// RUN: weft-opt %s --weft-assign-stages="stages=2 blocks-per-stage=1,2" | FileCheck %s --check-prefix=ONETWO
// RUN: weft-opt %s --weft-assign-stages="stages=2 blocks-per-stage=2,1" | FileCheck %s --check-prefix=TWOONE
// RUN: not weft-opt %s --weft-assign-stages="stages=4 blocks-per-stage=1,1,1,1" 2>&1 | FileCheck %s --check-prefix=COUNT

// No parameter names a layer number: the layers are the modules (fc1,
// fc2, idx, fc3), in the order the ops read them. `idx` is first read by
// the gather of an argmax, an integer live since before it, so it joins
// fc2's layer, and a stage never starts where the indices would cross:
// three layers, fc1 | fc2,idx | fc3. fc3's weight is read through its
// transpose, a view that runs in its reader's stage.

// ONETWO: weft.matmul %arg5, %arg0 {{.*}}weft.stage = 0
// ONETWO: weft.relu {{.*}}weft.stage = 0
// ONETWO: weft.matmul {{.*}}, %arg1 {{.*}}weft.stage = 1
// ONETWO: weft.arg_max {{.*}}weft.stage = 1
// ONETWO: weft.gather %arg2, {{.*}}weft.stage = 1
// ONETWO: weft.transpose %arg3 {{.*}}weft.stage = 1
// ONETWO: weft.matmul {{.*}}weft.stage = 1

// TWOONE: weft.gather %arg2, {{.*}}weft.stage = 0
// TWOONE: weft.transpose %arg3 {{.*}}weft.stage = 1
// TWOONE: weft.matmul {{.*}}weft.stage = 1

// COUNT: the plan's blocks_per_stage (4 stages, 4 layers) does not fit this model (4 stages, 3 layers)
module {
  func.func @forward(%w1: tensor<64x64xf32> {weft.param = "fc1.weight"},
                     %w2: tensor<64x64xf32> {weft.param = "fc2.weight"},
                     %e: tensor<64x64xf32> {weft.param = "idx.weight"},
                     %w3: tensor<64x64xf32> {weft.param = "fc3.weight"},
                     %b3: tensor<64xf32> {weft.param = "fc3.bias"},
                     %x: tensor<8x64xf32> {weft.input = "x"}) -> tensor<8x64xf32> {
    %a1 = weft.matmul %x, %w1 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %r1 = weft.relu %a1 : tensor<8x64xf32>
    %a2 = weft.matmul %r1, %w2 {transpose_rhs = true} : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %i = weft.arg_max %a2 {axis = 1 : i64} : (tensor<8x64xf32>) -> tensor<8xi64>
    %g = weft.gather %e, %i {axis = 0 : i64} : (tensor<64x64xf32>, tensor<8xi64>) -> tensor<8x64xf32>
    %s = weft.add %a2, %g : (tensor<8x64xf32>, tensor<8x64xf32>) -> tensor<8x64xf32>
    %t = weft.transpose %w3 {permutation = array<i64: 1, 0>} : (tensor<64x64xf32>) -> tensor<64x64xf32>
    %a3 = weft.matmul %s, %t : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
    %y = weft.add %a3, %b3 : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32>
    return %y : tensor<8x64xf32>
  }
}
