// RUN: weft-opt %s --weft-lower-copies | FileCheck %s

// CHECK-LABEL: func.func @copies
// CHECK: memref.copy %arg0, %arg1 : memref<4x8xf32> to memref<4x8xf32>
// CHECK: %[[COLS:.*]] = memref.subview
// CHECK: linalg.copy ins(%[[COLS]] : memref<4x4xf32, strided<[8, 1]>>) outs(%{{.*}} : memref<4x4xf32>)
// CHECK-NOT: memref.copy
func.func @copies(%a: memref<4x8xf32>, %b: memref<4x8xf32>, %c: memref<4x4xf32>) {
  memref.copy %a, %b : memref<4x8xf32> to memref<4x8xf32>
  %cols = memref.subview %a[0, 0] [4, 4] [1, 1] : memref<4x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  memref.copy %cols, %c : memref<4x4xf32, strided<[8, 1]>> to memref<4x4xf32>
  return
}

// A tile written back onto itself moves nothing: equal subviews of one
// buffer (also nested, with the same dynamic offsets) are erased; a copy
// between different tiles, or onto a view with other strides, stays.
// CHECK-LABEL: func.func @self_copies
// CHECK-SAME: (%[[BUF:.*]]: memref<8x8xf32>, %[[I:.*]]: index)
// CHECK-NOT: memref.copy %{{.*}}, %{{.*}} : memref<2x8xf32, strided<[8, 1], offset: ?>>
// CHECK: %[[T0:.*]] = memref.subview %[[BUF]][0, 0] [2, 8] [1, 1]
// CHECK: %[[T1:.*]] = memref.subview %[[BUF]][2, 0] [2, 8] [1, 1]
// CHECK: memref.copy %[[T0]], %[[T1]]
// CHECK: %[[E:.*]] = memref.subview %[[BUF]][0, 0] [4, 4] [1, 1]
// CHECK: %[[S:.*]] = memref.subview %[[BUF]][0, 0] [4, 4] [2, 1]
// CHECK: linalg.copy ins(%[[E]] : {{.*}}) outs(%[[S]] : {{.*}})
// CHECK-NOT: copy
// CHECK: return
// CHECK-NEXT: }
func.func @self_copies(%buf: memref<8x8xf32>, %i: index) {
  %a = memref.subview %buf[%i, 0] [2, 8] [1, 1] : memref<8x8xf32> to memref<2x8xf32, strided<[8, 1], offset: ?>>
  %b = memref.subview %buf[%i, 0] [2, 8] [1, 1] : memref<8x8xf32> to memref<2x8xf32, strided<[8, 1], offset: ?>>
  memref.copy %a, %b : memref<2x8xf32, strided<[8, 1], offset: ?>> to memref<2x8xf32, strided<[8, 1], offset: ?>>
  %t0 = memref.subview %buf[0, 0] [2, 8] [1, 1] : memref<8x8xf32> to memref<2x8xf32, strided<[8, 1]>>
  %t1 = memref.subview %buf[2, 0] [2, 8] [1, 1] : memref<8x8xf32> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  memref.copy %t0, %t1 : memref<2x8xf32, strided<[8, 1]>> to memref<2x8xf32, strided<[8, 1], offset: 16>>
  %e = memref.subview %buf[0, 0] [4, 4] [1, 1] : memref<8x8xf32> to memref<4x4xf32, strided<[8, 1]>>
  %s = memref.subview %buf[0, 0] [4, 4] [2, 1] : memref<8x8xf32> to memref<4x4xf32, strided<[16, 1]>>
  memref.copy %e, %s : memref<4x4xf32, strided<[8, 1]>> to memref<4x4xf32, strided<[16, 1]>>
  %r = memref.subview %a[0, 0] [1, 8] [1, 1] : memref<2x8xf32, strided<[8, 1], offset: ?>> to memref<1x8xf32, strided<[8, 1], offset: ?>>
  %q = memref.subview %b[0, 0] [1, 8] [1, 1] : memref<2x8xf32, strided<[8, 1], offset: ?>> to memref<1x8xf32, strided<[8, 1], offset: ?>>
  linalg.copy ins(%r : memref<1x8xf32, strided<[8, 1], offset: ?>>) outs(%q : memref<1x8xf32, strided<[8, 1], offset: ?>>)
  return
}

// A copy out of a splat constant is a fill; one out of a constant with
// several values, or out of a mutable global, stays a copy.
// CHECK-LABEL: func.func @from_constants
// CHECK: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK: linalg.fill ins(%[[ZERO]] : f32) outs(%arg0 : memref<2x3xf32>)
// CHECK: memref.copy %{{.*}}, %arg0
// CHECK: memref.copy %{{.*}}, %arg0
memref.global "private" constant @zeros : memref<2x3xf32> = dense<0.0>
memref.global "private" constant @values : memref<2x3xf32> = dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]>
memref.global "private" @state : memref<2x3xf32> = dense<0.0>
func.func @from_constants(%out: memref<2x3xf32>) {
  %z = memref.get_global @zeros : memref<2x3xf32>
  memref.copy %z, %out : memref<2x3xf32> to memref<2x3xf32>
  %v = memref.get_global @values : memref<2x3xf32>
  memref.copy %v, %out : memref<2x3xf32> to memref<2x3xf32>
  %s = memref.get_global @state : memref<2x3xf32>
  memref.copy %s, %out : memref<2x3xf32> to memref<2x3xf32>
  return
}

// A buffer the function allocated and copies, at its end, into an argument
// nothing else touches (an out-parameter) is that argument: the kernel
// writes the result, and a second copy out of the same buffer reads the
// first result.
// CHECK-LABEL: func.func @into_out_params
// CHECK-SAME: (%[[G:.*]]: memref<8xf32>, %[[P:.*]]: memref<8xf32>, %[[Q:.*]]: memref<8xf32>)
// CHECK-NOT: memref.alloc
// CHECK: linalg.generic {{.*}} ins(%[[G]] : memref<8xf32>) outs(%[[P]] : memref<8xf32>)
// CHECK-NEXT: ^bb0
// CHECK: memref.copy %[[P]], %[[Q]]
// CHECK-NEXT: return
func.func @into_out_params(%g: memref<8xf32>, %p: memref<8xf32>, %q: memref<8xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<8xf32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                  iterator_types = ["parallel"]}
      ins(%g : memref<8xf32>) outs(%a : memref<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %s = arith.mulf %in, %in : f32
    linalg.yield %s : f32
  }
  memref.copy %a, %p : memref<8xf32> to memref<8xf32>
  memref.copy %a, %q : memref<8xf32> to memref<8xf32>
  return
}

// Not forwarded: a buffer written after its copy (the copy saw an earlier
// value), also through a view; an argument the function also reads; a
// copy out of a view of the buffer.
// CHECK-LABEL: func.func @kept_copies
// CHECK-COUNT-4: memref.copy
// CHECK-NOT: memref.copy
func.func @kept_copies(%p: memref<8xf32>, %q: memref<8xf32>, %r: memref<8xf32>,
                       %s: memref<4xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %one = arith.constant 1.0 : f32
  %a = memref.alloc() : memref<8xf32>
  linalg.fill ins(%one : f32) outs(%a : memref<8xf32>)
  memref.copy %a, %p : memref<8xf32> to memref<8xf32>
  linalg.fill ins(%one : f32) outs(%a : memref<8xf32>)
  %b = memref.alloc() : memref<8xf32>
  %head = memref.subview %b[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  linalg.fill ins(%one : f32) outs(%b : memref<8xf32>)
  memref.copy %b, %r : memref<8xf32> to memref<8xf32>
  linalg.fill ins(%one : f32) outs(%head : memref<4xf32, strided<[1]>>)
  %c = memref.alloc() : memref<8xf32>
  linalg.fill ins(%one : f32) outs(%c : memref<8xf32>)
  memref.copy %c, %q : memref<8xf32> to memref<8xf32>
  %x = memref.load %q[%c0] : memref<8xf32>
  %d = memref.alloc() : memref<8xf32>
  linalg.fill ins(%one : f32) outs(%d : memref<8xf32>)
  %dh = memref.subview %d[0] [4] [1] : memref<8xf32> to memref<4xf32, strided<[1]>>
  memref.copy %dh, %s : memref<4xf32, strided<[1]>> to memref<4xf32>
  return %x : f32
}
