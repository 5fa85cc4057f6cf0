// Selective: the attention core's scores and probabilities (T x T) are
// recomputed from the kept q and k; the core's output, the projections
// and the MLP-like tanh stay stored.
// RUN: weft-opt %s --weft-autodiff --weft-recompute=mode=selective --canonicalize --cse | FileCheck %s
// Full recomputes the same layer whole, the dropout with its op_id (the
// same mask: it is a hash of seed, op_id and index).
// RUN: weft-opt %s --weft-autodiff --weft-recompute=mode=full | FileCheck %s --check-prefix=FULL

func.func @loss(%wq: tensor<4x4xf32> {weft.param = "h.0.q.weight"},
                %wk: tensor<4x4xf32> {weft.param = "h.0.k.weight"},
                %x: tensor<2x3x4xf32> {weft.input = "x"},
                %seed: tensor<i64> {weft.input = "rng"}) -> tensor<f32> {
  %q = weft.matmul %x, %wq : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %k = weft.matmul %x, %wk : (tensor<2x3x4xf32>, tensor<4x4xf32>) -> tensor<2x3x4xf32>
  %s = weft.matmul %q, %k {transpose_rhs = true} : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x3xf32>
  %c = weft.constant dense<5.000000e-01> : tensor<f32>
  %sc = weft.mul %s, %c : (tensor<2x3x3xf32>, tensor<f32>) -> tensor<2x3x3xf32>
  %m = weft.causal_mask %sc : tensor<2x3x3xf32>
  %p = weft.softmax %m {axis = 2 : i64} : tensor<2x3x3xf32>
  %d = weft.dropout %p, %seed {ratio = 1.000000e-01 : f64, op_id = 3 : i64} : tensor<2x3x3xf32>, tensor<i64>
  %o = weft.matmul %d, %k : (tensor<2x3x3xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  %t = weft.tanh %o : tensor<2x3x4xf32>
  %l = weft.reduce_sum %t {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[Q:.*]] = weft.matmul %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<4x4xf32>)
// CHECK: %[[K:.*]] = weft.matmul %{{.*}}, %{{.*}} : (tensor<2x3x4xf32>, tensor<4x4xf32>)
// CHECK: %[[P:.*]] = weft.softmax
// CHECK: %[[D:.*]] = weft.dropout %[[P]]
// CHECK: %[[O:.*]] = weft.matmul %[[D]], %[[K]] :
// CHECK: %[[T:.*]] = weft.tanh %[[O]]
// The backward: tanh's adjoint reads the stored tanh, then the core is
// rerun from q and k before the adjoint of probabilities x k reads it.
// CHECK: weft.mul %[[T]], %[[T]]
// CHECK: %[[RS:.*]] = weft.matmul %[[Q]], %[[K]] {transpose_rhs = true, weft.recomputed}
// CHECK-NEXT: %[[RSC:.*]] = weft.mul %[[RS]], %{{.*}} {weft.recomputed}
// CHECK-NEXT: %[[RM:.*]] = weft.causal_mask %[[RSC]] {weft.recomputed}
// CHECK-NEXT: %[[RP:.*]] = weft.softmax %[[RM]] {axis = 2 : i64, weft.recomputed}
// CHECK-NEXT: %[[RD:.*]] = weft.dropout %[[RP]], %{{.*}} {op_id = 3 : i64, ratio = {{.*}}, weft.recomputed}
// CHECK-NEXT: weft.matmul %[[RD]], %{{.*}} {transpose_lhs = true}
// Neither the probabilities x k product nor q and k are rerun.
// CHECK-NOT: weft.matmul %[[RD]], %[[K]] {{.*}}weft.recomputed
// CHECK-NOT: %[[P]]{{[^0-9]}}
// CHECK-NOT: %[[D]]{{[^0-9]}}
// CHECK: return

// FULL-LABEL: func.func @loss_grad
// FULL: weft.matmul {{.*}} {weft.recomputed} : (tensor<2x3x4xf32>, tensor<4x4xf32>)
// FULL: weft.dropout {{.*}} {op_id = 3 : i64, ratio = {{.*}}, weft.recomputed}
// FULL: weft.matmul {{.*}} {weft.recomputed} : (tensor<2x3x3xf32>, tensor<2x3x4xf32>)
// FULL-NEXT: weft.tanh {{.*}} {weft.recomputed}
