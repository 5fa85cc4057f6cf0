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
