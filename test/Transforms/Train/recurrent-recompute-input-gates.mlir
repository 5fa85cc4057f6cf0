// RUN: weft-opt %s --weft-recurrent-activations=mode=recompute --weft-autodiff --canonicalize --cse -split-input-file | FileCheck %s
// RUN: weft-opt %s --weft-recurrent-activations=mode=store --weft-autodiff --canonicalize --cse -split-input-file | FileCheck %s --check-prefix=STORE

// A recomputing adjoint rebuilds the input gates from the input projection
// x @ w^T + b right before it, so the forward's input gates die at the
// forward op. The copies are marked weft.recomputed: canonicalize and CSE
// leave them apart from the forward's projection.

// CHECK-LABEL: func.func @loss_grad
// CHECK-SAME:    (%[[X:[^:]*]]: tensor<6x3x5xf32> {{[^,]*}}, %[[W:[^:]*]]: tensor<16x5xf32> {{[^,]*}}, %[[B:[^:]*]]: tensor<16xf32>
// CHECK:         %[[P:.*]] = weft.matmul %[[X]], %[[W]] {transpose_rhs = true} :
// CHECK:         %[[XG:.*]] = weft.add %[[P]], %[[B]] :
// CHECK:         weft.lstm %[[XG]], {{.*}} {recompute}
// CHECK-NOT:     %[[XG]]{{[ ,)]}}
// CHECK:         %[[P2:.*]] = weft.matmul %[[X]], %[[W]] {transpose_rhs = true, weft.recomputed} :
// CHECK-NEXT:    %[[XG2:.*]] = weft.add %[[P2]], %[[B]] {weft.recomputed} :
// CHECK-NEXT:    weft.lstm_grad {{.*}}, %[[XG2]] {recompute}
// CHECK-NOT:     %[[XG]]{{[ ,)]}}
// CHECK:         return
// STORE-LABEL: func.func @loss_grad
// STORE-NOT:     weft.recomputed
// STORE:         return
func.func @loss(%x: tensor<6x3x5xf32> {weft.input = "x"},
                %w: tensor<16x5xf32> {weft.param = "w"},
                %b: tensor<16xf32> {weft.param = "b"},
                %r: tensor<16x4xf32> {weft.param = "r"},
                %h0: tensor<3x4xf32>, %c0: tensor<3x4xf32>) -> tensor<f32> {
  %p = weft.matmul %x, %w {transpose_rhs = true} : (tensor<6x3x5xf32>, tensor<16x5xf32>) -> tensor<6x3x16xf32>
  %xg = weft.add %p, %b : (tensor<6x3x16xf32>, tensor<16xf32>) -> tensor<6x3x16xf32>
  %y, %c, %g = weft.lstm %xg, %r, %h0, %c0 : (tensor<6x3x16xf32>, tensor<16x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>)
  %s = weft.reduce_sum %y {axes = array<i64: 0, 1, 2>} : (tensor<6x3x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// The GRU likewise.
// CHECK-LABEL: func.func @loss_grad
// CHECK:         %[[XG:.*]] = weft.add
// CHECK:         weft.gru %[[XG]], {{.*}} {recompute}
// CHECK-NOT:     %[[XG]]{{[ ,)]}}
// CHECK:         %[[P2:.*]] = weft.matmul {{.*}} {transpose_rhs = true, weft.recomputed} :
// CHECK-NEXT:    %[[XG2:.*]] = weft.add %[[P2]], {{.*}} {weft.recomputed} :
// CHECK-NEXT:    weft.gru_grad {{.*}}, %[[XG2]], %{{[^ ]*}} {recompute}
// CHECK-NOT:     %[[XG]]{{[ ,)]}}
// CHECK:         return
func.func @loss(%x: tensor<6x3x5xf32> {weft.input = "x"},
               %w: tensor<12x5xf32> {weft.param = "w"},
               %b: tensor<12xf32> {weft.param = "b"},
               %r: tensor<12x4xf32> {weft.param = "r"},
               %rb: tensor<12xf32> {weft.param = "rb"},
               %h0: tensor<3x4xf32>) -> tensor<f32> {
  %p = weft.matmul %x, %w {transpose_rhs = true} : (tensor<6x3x5xf32>, tensor<12x5xf32>) -> tensor<6x3x12xf32>
  %xg = weft.add %p, %b : (tensor<6x3x12xf32>, tensor<12xf32>) -> tensor<6x3x12xf32>
  %y, %g = weft.gru %xg, %r, %rb, %h0 : (tensor<6x3x12xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<3x4xf32>) -> (tensor<6x3x4xf32>, tensor<6x3x16xf32>)
  %s = weft.reduce_sum %y {axes = array<i64: 0, 1, 2>} : (tensor<6x3x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// An input as large as the gates would stay alive in their place: the
// adjoint takes the forward's input gates, as without a projection.
// CHECK-LABEL: func.func @loss_grad
// CHECK:         %[[XG:.*]] = weft.add
// CHECK-NOT:     weft.recomputed
// CHECK:         weft.lstm_grad {{.*}}, %[[XG]] {recompute}
func.func @loss(%x: tensor<6x3x32xf32> {weft.input = "x"},
                      %w: tensor<16x32xf32> {weft.param = "w"},
                      %b: tensor<16xf32> {weft.param = "b"},
                      %r: tensor<16x4xf32> {weft.param = "r"},
                      %h0: tensor<3x4xf32>, %c0: tensor<3x4xf32>) -> tensor<f32> {
  %p = weft.matmul %x, %w {transpose_rhs = true} : (tensor<6x3x32xf32>, tensor<16x32xf32>) -> tensor<6x3x16xf32>
  %xg = weft.add %p, %b : (tensor<6x3x16xf32>, tensor<16xf32>) -> tensor<6x3x16xf32>
  %y, %c, %g = weft.lstm %xg, %r, %h0, %c0 : (tensor<6x3x16xf32>, tensor<16x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>)
  %s = weft.reduce_sum %y {axes = array<i64: 0, 1, 2>} : (tensor<6x3x4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
