// Full recomputation under a pipeline: the stage cut inside layer h.0
// (between %u and %o) ends a group. %u crosses it, so it is kept (the next
// stage receives and holds it anyway); stage 1's backward reruns only its
// own ops from %u, stage 0's its own from x. Recomputing %u in stage 1's
// backward would make stage 1 read stage 0's work, which runs after it.
// RUN: weft-opt %s --weft-autodiff --weft-recompute=mode=full | FileCheck %s

func.func @loss(%w0: tensor<4x4xf32> {weft.param = "h.0.fc.weight"},
                %p0: tensor<4x4xf32> {weft.param = "h.0.proj.weight"},
                %x: tensor<2x4xf32> {weft.input = "x"}) -> tensor<f32> {
  %a = weft.matmul %x, %w0 {weft.stage = 0 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %t = weft.tanh %a {weft.stage = 0 : i64} : tensor<2x4xf32>
  %u = weft.tanh %t {weft.stage = 0 : i64} : tensor<2x4xf32>
  %o = weft.matmul %u, %p0 {weft.stage = 1 : i64} : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  %v = weft.tanh %o {weft.stage = 1 : i64} : tensor<2x4xf32>
  %y = weft.add %v, %x {weft.stage = 1 : i64} : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %l = weft.reduce_sum %y {axes = array<i64: 0, 1>, weft.stage = 1 : i64} : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// CHECK-LABEL: func.func @loss_grad
// CHECK: %[[A:.*]] = weft.matmul %{{.*}} {weft.stage = 0 : i64}
// CHECK-NEXT: %[[T:.*]] = weft.tanh %[[A]] {weft.stage = 0 : i64}
// CHECK-NEXT: %[[U:.*]] = weft.tanh %[[T]] {weft.stage = 0 : i64}
// Stage 1 reruns o and v from the kept u.
// CHECK: %[[RO:.*]] = weft.matmul %[[U]], %{{.*}} {weft.recomputed, weft.stage = 1 : i64}
// CHECK-NEXT: weft.tanh %[[RO]] {weft.recomputed, weft.stage = 1 : i64}
// u's own adjoint reads the kept u.
// CHECK: weft.mul %[[U]], %[[U]] {weft.stage = 0 : i64}
// Stage 0 reruns a and t from x.
// CHECK: %[[RA:.*]] = weft.matmul %{{.*}} {weft.recomputed, weft.stage = 0 : i64}
// CHECK-NEXT: weft.tanh %[[RA]] {weft.recomputed, weft.stage = 0 : i64}
// Nothing else is recomputed.
// CHECK-NOT: weft.recomputed
// CHECK: return
