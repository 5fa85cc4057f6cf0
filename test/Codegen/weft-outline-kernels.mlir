// RUN: weft-opt %s --weft-outline-kernels | FileCheck %s

// The fused kernels and the standalone fill become functions, named after
// the kernel or numbered; the copy (a memcpy) stays. Constants are cloned
// into the kernels; a kernel whose buffers are all plain takes bare
// pointers. fused_1 is fused_0 on other buffers: one function serves both.

// CHECK-LABEL: func.func private @train_step.fused_0
// CHECK-SAME: (%{{.*}}: memref<4x8xf32>, %{{.*}}: memref<4x8xf32>) attributes {llvm.bareptr, no_inline, weft.kernel}
// CHECK: arith.constant 2.000000e+00 : f32
// CHECK: scf.forall
// CHECK-NOT: func.func private @train_step.fused_1
// CHECK-LABEL: func.func private @train_step.kernel_2
// CHECK-SAME: (%{{.*}}: memref<16xf32>)
// CHECK: linalg.fill
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%[[X:.*]]: memref<4x8xf32>, %[[Y:.*]]: memref<4x8xf32>, %[[Z:.*]]: memref<4x8xf32>, %[[WS:.*]]: memref<64xi8>)
// CHECK: call @train_step.fused_0(%[[X]], %[[Y]]) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
// CHECK: call @train_step.fused_0(%[[Y]], %[[Z]]) : (memref<4x8xf32>, memref<4x8xf32>) -> ()
// CHECK: %[[V:.*]] = memref.view %[[WS]]
// CHECK: call @train_step.kernel_2(%[[V]]) : (memref<16xf32>) -> ()
// CHECK: memref.copy
// CHECK: return
#id = affine_map<(d0) -> (d0)>
func.func @train_step(%x: memref<4x8xf32>, %y: memref<4x8xf32>, %z: memref<4x8xf32>,
                      %ws: memref<64xi8>) {
  %two = arith.constant 2.0 : f32
  %zero = arith.constant 0.0 : f32
  %c0 = arith.constant 0 : index
  scf.forall (%i) in (4) {
    %row = memref.subview %x[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %out = memref.subview %y[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%row : memref<8xf32, strided<[1], offset: ?>>) outs(%out : memref<8xf32, strided<[1], offset: ?>>) {
    ^bb0(%in: f32, %o: f32):
      %r = arith.mulf %in, %two : f32
      linalg.yield %r : f32
    }
  } {weft.kernel = "fused_0"}
  scf.forall (%i) in (4) {
    %row = memref.subview %y[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    %out = memref.subview %z[%i, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<8xf32, strided<[1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
        ins(%row : memref<8xf32, strided<[1], offset: ?>>) outs(%out : memref<8xf32, strided<[1], offset: ?>>) {
    ^bb0(%in: f32, %o: f32):
      %r = arith.mulf %in, %two : f32
      linalg.yield %r : f32
    }
  } {weft.kernel = "fused_1"}
  %v = memref.view %ws[%c0][] : memref<64xi8> to memref<16xf32>
  linalg.fill ins(%zero : f32) outs(%v : memref<16xf32>)
  memref.copy %x, %y : memref<4x8xf32> to memref<4x8xf32>
  return
}
