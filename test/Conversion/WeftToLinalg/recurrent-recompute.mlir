// RUN: weft-opt %s --weft-lower-to-linalg | FileCheck %s

// A recomputing adjoint stays one loop over time; each step first
// recomputes the gates (the forward step's GEMM of h_{t-1} by
// recurrence^T, then its sigmoid/tanh inside the adjoint's generic), then
// propagates back through the recurrence. The input gates are the tensor
// the loop writes the input-gate adjoints into.
func.func @lstm_grad_recompute(%dy: tensor<6x3x4xf32>, %dc: tensor<6x3x4xf32>, %r: tensor<16x4xf32>, %h0: tensor<3x4xf32>, %c0: tensor<3x4xf32>,
                               %y: tensor<6x3x4xf32>, %c: tensor<6x3x4xf32>, %xg: tensor<6x3x16xf32>) -> tensor<6x3x16xf32> {
  %dx, %dh0, %dc0 = weft.lstm_grad %dy, %dc, %r, %h0, %c0, %y, %c, %xg {recompute} : (tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<16x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>) -> (tensor<6x3x16xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  return %dx : tensor<6x3x16xf32>
}
// CHECK-LABEL: func.func @lstm_grad_recompute
// CHECK-SAME:    %[[R:[^:]*]]: tensor<16x4xf32>, %{{[^:]*}}: tensor<3x4xf32>, %{{[^:]*}}: tensor<3x4xf32>, %{{[^:]*}}: tensor<6x3x4xf32>, %{{[^:]*}}: tensor<6x3x4xf32>, %[[XG:[^:]*]]: tensor<6x3x16xf32>)
// CHECK:         %[[RT:.*]] = linalg.transpose ins(%[[R]] : tensor<16x4xf32>)
// CHECK:         %[[LOOP:.*]]:3 = scf.for {{.*}} iter_args({{.*}}, %[[DX:.*]] = %[[XG]]) -> ({{.*}}, tensor<6x3x16xf32>)
// CHECK:           linalg.matmul ins(%{{.*}}, %[[RT]] : tensor<3x4xf32>, tensor<4x16xf32>)
// CHECK:           linalg.generic
// CHECK-COUNT-3:     math.exp
// CHECK:             math.tanh
// CHECK:           linalg.matmul ins(%{{.*}}, %[[R]] : tensor<3x16xf32>, tensor<16x4xf32>)
// CHECK:           scf.yield
// CHECK-NOT:     scf.for
// CHECK:         return %[[LOOP]]#2

// The forward op in recompute mode carries no gates tensor.
// CHECK-LABEL: func.func @gru_recompute
// CHECK:         scf.for {{.*}} -> (tensor<7x2x4xf32>) {
// CHECK-NOT:     tensor<6x2x16xf32>
// CHECK:         return
func.func @gru_recompute(%xg: tensor<6x2x12xf32>, %r: tensor<12x4xf32>, %rb: tensor<12xf32>, %h0: tensor<2x4xf32>) -> tensor<6x2x4xf32> {
  %y = weft.gru %xg, %r, %rb, %h0 {recompute} : (tensor<6x2x12xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<2x4xf32>) -> tensor<6x2x4xf32>
  return %y : tensor<6x2x4xf32>
}

// The input projection the gradient rule rebuilt for a recomputing adjoint
// (marked weft.recomputed) stays apart from the forward's through CSE: its
// product gets a bufferization.alloc_tensor destination, and its bias add,
// like the forward's, writes into the product. The adjoint's loop carries
// that recomputed tensor, not the forward's input gates.
// RUN: weft-opt %s --weft-lower-to-linalg --cse | FileCheck %s --check-prefix=APART
// APART-LABEL: func.func @lstm_projection_recomputed
// APART:         %[[P:.*]] = linalg.matmul {{.*}} outs(%{{.*}} : tensor<18x16xf32>)
// APART:         %[[E:.*]] = tensor.expand_shape %[[P]]
// APART:         %[[XG:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<16xf32>) outs(%[[E]] : tensor<6x3x16xf32>)
// APART:         scf.for
// APART:         %[[D:.*]] = bufferization.alloc_tensor() : tensor<18x16xf32>
// APART:         %[[F:.*]] = linalg.fill {{.*}} outs(%[[D]] :
// APART:         %[[P2:.*]] = linalg.matmul {{.*}} outs(%[[F]] : tensor<18x16xf32>)
// APART:         %[[E2:.*]] = tensor.expand_shape %[[P2]]
// APART:         %[[XG2:.*]] = linalg.generic {{.*}} ins(%{{.*}} : tensor<16xf32>) outs(%[[E2]] : tensor<6x3x16xf32>)
// APART:         scf.for {{.*}} iter_args({{.*}}, %{{.*}} = %[[XG2]]) ->
// APART-NOT:     %[[XG]]{{[ ,)]}}
// APART:         return
func.func @lstm_projection_recomputed(%x: tensor<6x3x5xf32>, %w: tensor<16x5xf32>, %b: tensor<16xf32>, %r: tensor<16x4xf32>,
                                      %h0: tensor<3x4xf32>, %c0: tensor<3x4xf32>, %dy: tensor<6x3x4xf32>, %dc: tensor<6x3x4xf32>) -> tensor<6x3x16xf32> {
  %x2 = weft.reshape %x : tensor<6x3x5xf32> -> tensor<18x5xf32>
  %p = weft.matmul %x2, %w {transpose_rhs = true} : (tensor<18x5xf32>, tensor<16x5xf32>) -> tensor<18x16xf32>
  %p3 = weft.reshape %p : tensor<18x16xf32> -> tensor<6x3x16xf32>
  %xg = weft.add %p3, %b : (tensor<6x3x16xf32>, tensor<16xf32>) -> tensor<6x3x16xf32>
  %y, %c = weft.lstm %xg, %r, %h0, %c0 {recompute} : (tensor<6x3x16xf32>, tensor<16x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<6x3x4xf32>, tensor<6x3x4xf32>)
  %q = weft.matmul %x2, %w {transpose_rhs = true, weft.recomputed} : (tensor<18x5xf32>, tensor<16x5xf32>) -> tensor<18x16xf32>
  %q3 = weft.reshape %q {weft.recomputed} : tensor<18x16xf32> -> tensor<6x3x16xf32>
  %xg2 = weft.add %q3, %b {weft.recomputed} : (tensor<6x3x16xf32>, tensor<16xf32>) -> tensor<6x3x16xf32>
  %dx, %dh0, %dc0 = weft.lstm_grad %dy, %dc, %r, %h0, %c0, %y, %c, %xg2 {recompute} : (tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<16x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>) -> (tensor<6x3x16xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  return %dx : tensor<6x3x16xf32>
}
