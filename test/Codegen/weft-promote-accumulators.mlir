// RUN: weft-opt %s --weft-promote-accumulators -split-input-file | FileCheck %s

// Two accumulators of one reduction loop (a sum and a max) become
// iteration arguments: loaded before the loop, stored after it.

// CHECK-LABEL: func.func @two_sums
// CHECK: scf.for %[[I:.*]] =
// CHECK:   %[[S0:.*]] = memref.load %arg1[%[[I]]]
// CHECK:   %[[M0:.*]] = memref.load %arg2[%[[I]]]
// CHECK:   %[[R:.*]]:2 = scf.for %{{.*}} iter_args(%[[S:.*]] = %[[S0]], %[[M:.*]] = %[[M0]]) -> (f32, f32)
// CHECK-NOT: memref.store
// CHECK:     %[[SUM:.*]] = arith.addf %[[S]], %{{.*}} : f32
// CHECK:     %[[MAX:.*]] = arith.maximumf %[[M]], %{{.*}} : f32
// CHECK:     scf.yield %[[SUM]], %[[MAX]] : f32, f32
// CHECK:   memref.store %[[R]]#0, %arg1[%[[I]]]
// CHECK:   memref.store %[[R]]#1, %arg2[%[[I]]]
func.func @two_sums(%in: memref<4x8xf32>, %sum: memref<4xf32>, %max: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c4 step %c1 {
    scf.for %k = %c0 to %c8 step %c1 {
      %x = memref.load %in[%i, %k] : memref<4x8xf32>
      %acc = memref.load %sum[%i] : memref<4xf32>
      %s = arith.addf %acc, %x : f32
      %m0 = memref.load %max[%i] : memref<4xf32>
      %m = arith.maximumf %m0, %x : f32
      memref.store %s, %sum[%i] : memref<4xf32>
      memref.store %m, %max[%i] : memref<4xf32>
    }
  }
  return
}

// -----

// Left alone: a store at indices that move with the loop (an elementwise
// loop), a second read of the accumulated buffer, and a call in the body.

// CHECK-LABEL: func.func @untouched
// CHECK-NOT: iter_args
// CHECK: return
func.func private @side_effect()
func.func @untouched(%in: memref<8xf32>, %out: memref<8xf32>, %acc: memref<2xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %k = %c0 to %c8 step %c1 {
    %x = memref.load %in[%k] : memref<8xf32>
    memref.store %x, %out[%k] : memref<8xf32>
  }
  scf.for %k = %c0 to %c8 step %c1 {
    %x = memref.load %in[%k] : memref<8xf32>
    %a = memref.load %acc[%c0] : memref<2xf32>
    %b = memref.load %acc[%c1] : memref<2xf32>
    %s = arith.addf %a, %b : f32
    memref.store %s, %acc[%c0] : memref<2xf32>
  }
  scf.for %k = %c0 to %c8 step %c1 {
    %x = memref.load %in[%k] : memref<8xf32>
    %a = memref.load %acc[%c0] : memref<2xf32>
    %s = arith.addf %a, %x : f32
    func.call @side_effect() : () -> ()
    memref.store %s, %acc[%c0] : memref<2xf32>
  }
  return
}
