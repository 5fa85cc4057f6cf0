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
