// Full: each layer keeps what crosses its border (x, the residual y0) and
// the backward reruns the rest of the layer just before it needs it.
// RUN: weft-opt %s --weft-autodiff --weft-recompute=mode=full | FileCheck %s --check-prefix=FULL
// The clones survive the canonicalize + CSE that follow in the pipeline.
// RUN: weft-opt %s --weft-autodiff --weft-recompute=mode=full --canonicalize --cse | FileCheck %s --check-prefix=CSE
// Per layer: only h.1.
// RUN: weft-opt %s --weft-autodiff --weft-recompute="mode=full layers=h.1" | FileCheck %s --check-prefix=ONE
// Selective: the two layers hold no attention core; nothing changes.
// RUN: weft-opt %s --weft-autodiff --weft-recompute=mode=selective | FileCheck %s --check-prefix=NONE
// RUN: weft-opt %s --weft-autodiff --weft-recompute=mode=none | FileCheck %s --check-prefix=NONE
// RUN: not weft-opt %s --weft-autodiff --weft-recompute=mode=some 2>&1 | FileCheck %s --check-prefix=BAD-MODE
// RUN: not weft-opt %s --weft-autodiff --weft-recompute="layers=h.7" 2>&1 | FileCheck %s --check-prefix=BAD-LAYER
// RUN: not weft-opt %s --weft-recompute 2>&1 | FileCheck %s --check-prefix=NO-GRAD

func.func @loss(%w0: tensor<4x4xf32> {weft.param = "h.0.fc.weight"},
                %p0: tensor<4x4xf32> {weft.param = "h.0.proj.weight"},
                %w1: tensor<4x4xf32> {weft.param = "h.1.fc.weight"},
                %p1: tensor<4x4xf32> {weft.param = "h.1.proj.weight"},
                %x: tensor<2x4xf32> {weft.input = "x"}) -> tensor<f32> {
  %a0 = weft.matmul %x, %w0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t0 = weft.tanh %a0 : tensor<2x4xf32>
  %o0 = weft.matmul %t0, %p0 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %y0 = weft.add %o0, %x : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %a1 = weft.matmul %y0, %w1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t1 = weft.tanh %a1 : tensor<2x4xf32>
  %o1 = weft.matmul %t1, %p1 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %y1 = weft.add %o1, %y0 : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = weft.reduce_sum %y1 {axes = array<i64: 0, 1>} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// FULL-LABEL: func.func @loss_grad
// FULL-SAME: %[[W0:[^:]+]]: tensor<4x4xf32> {weft.param = "h.0.fc.weight"}, %[[P0:[^:]+]]: tensor<4x4xf32> {weft.param = "h.0.proj.weight"}, %[[W1:[^:]+]]: tensor<4x4xf32> {weft.param = "h.1.fc.weight"}, %[[P1:[^:]+]]: tensor<4x4xf32> {weft.param = "h.1.proj.weight"}, %[[X:[^:]+]]: tensor<2x4xf32>
// The forward is untouched.
// FULL: %[[A0:.*]] = weft.matmul %[[X]], %[[W0]] :
// FULL-NEXT: %[[T0:.*]] = weft.tanh %[[A0]] :
// FULL-NEXT: %[[O0:.*]] = weft.matmul %[[T0]], %[[P0]] :
// FULL-NEXT: %[[Y0:.*]] = weft.add %[[O0]], %[[X]] :
// FULL-NEXT: %[[A1:.*]] = weft.matmul %[[Y0]], %[[W1]] :
// FULL-NEXT: %[[T1:.*]] = weft.tanh %[[A1]] :
// h.1 first: its input y0 is kept, tanh(y0 @ w1) rerun just before the
// adjoint of t1 @ p1 reads it.
// FULL: weft.matmul %{{.*}}, %[[P1]] {transpose_rhs = true}
// FULL-NEXT: %[[RA1:.*]] = weft.matmul %[[Y0]], %[[W1]] {weft.recomputed}
// FULL-NEXT: %[[RT1:.*]] = weft.tanh %[[RA1]] {weft.recomputed}
// FULL-NEXT: weft.matmul %[[RT1]], %{{.*}} {transpose_lhs = true}
// FULL-NEXT: weft.mul %[[RT1]], %[[RT1]] :
// y0 itself (kept) for w1's gradient.
// FULL: weft.matmul %[[Y0]], %{{.*}} {transpose_lhs = true}
// Then h.0, after h.1's backward, from x.
// FULL: weft.matmul %{{.*}}, %[[P0]] {transpose_rhs = true}
// FULL-NEXT: %[[RA0:.*]] = weft.matmul %[[X]], %[[W0]] {weft.recomputed}
// FULL-NEXT: %[[RT0:.*]] = weft.tanh %[[RA0]] {weft.recomputed}
// FULL-NEXT: weft.matmul %[[RT0]], %{{.*}} {transpose_lhs = true}
// The backward reads no forward tanh.
// FULL-NOT: %[[T0]]{{[^0-9]}}
// FULL-NOT: %[[T1]]{{[^0-9]}}
// FULL: return

// CSE-LABEL: func.func @loss_grad
// CSE: weft.matmul {{.*}} {weft.recomputed}
// CSE-NEXT: weft.tanh {{.*}} {weft.recomputed}
// CSE: weft.matmul {{.*}} {weft.recomputed}
// CSE-NEXT: weft.tanh {{.*}} {weft.recomputed}

// ONE-LABEL: func.func @loss_grad
// ONE: %[[T0:.*]] = weft.tanh
// ONE: weft.matmul {{.*}} {weft.recomputed}
// ONE-NEXT: weft.tanh {{.*}} {weft.recomputed}
// ONE-NOT: weft.recomputed
// h.0's tanh is read as stored.
// ONE: weft.mul %[[T0]], %[[T0]]
// ONE-NOT: weft.recomputed

// NONE-NOT: weft.recomputed

// BAD-MODE: --weft-recompute: mode must be none, selective or full, got 'some'
// BAD-LAYER: --weft-recompute: layers names 'h.7', which is no layer of @loss_grad (its layers: h.0, h.1)
// NO-GRAD: --weft-recompute: no single-block function @loss_grad (the gradient function; run after --weft-autodiff, or name it with function=)
