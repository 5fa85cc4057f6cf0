// RUN: weft-opt %s --weft-plan-buffers --canonicalize -split-input-file \
// RUN:   -verify-diagnostics | FileCheck %s

// %a dies at the first add, before %c is allocated: they share offset 0.
// %b overlaps both and gets its own 64 bytes. Peak = 128 workspace + 128
// of arguments.

// CHECK: module attributes {weft.peak_bytes = 256 : i64, weft.workspace_bytes = 128 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[WS:[a-z0-9]+]]: memref<128xi8> {weft.workspace})
// CHECK-DAG: %[[OFF0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[OFF64:.*]] = arith.constant 64 : index
// CHECK: %[[A:.*]] = memref.view %[[WS]][%[[OFF0]]][] : memref<128xi8> to memref<16xf32>
// CHECK: %[[B:.*]] = memref.view %[[WS]][%[[OFF64]]][] : memref<128xi8> to memref<16xf32>
// CHECK: %[[C:.*]] = memref.view %[[WS]][%[[OFF0]]][] : memref<128xi8> to memref<16xf32>
// CHECK: linalg.add ins(%[[B]], %[[B]] : {{.*}}) outs(%[[C]]
// CHECK-NOT: memref.alloc
// CHECK-NOT: memref.dealloc
func.func @train_step(%x: memref<16xf32>, %out: memref<16xf32>) {
  %a = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  linalg.copy ins(%x : memref<16xf32>) outs(%a : memref<16xf32>)
  %b = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  linalg.add ins(%a, %a : memref<16xf32>, memref<16xf32>) outs(%b : memref<16xf32>)
  memref.dealloc %a : memref<16xf32>
  %c = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  linalg.add ins(%b, %b : memref<16xf32>, memref<16xf32>) outs(%c : memref<16xf32>)
  memref.copy %c, %out : memref<16xf32> to memref<16xf32>
  return
}

// -----

// Lifetimes through aliases: %a is read through a reshape after %b's alloc
// and inside the loop, so it overlaps %b and %t (allocated in the loop, so
// live for the whole loop); %p takes %a's place once %a is dead. %p is only
// read through a pointer extracted for a call, which ends its life: %q,
// allocated between the extraction and the call, must not share it. The
// largest buffer (%a, 256 bytes) is placed first.

// CHECK: module attributes {weft.peak_bytes = 896 : i64, weft.workspace_bytes = 384 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK-DAG: %[[OFF0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[OFF64:.*]] = arith.constant 64 : index
// CHECK-DAG: %[[OFF256:.*]] = arith.constant 256 : index
// CHECK-DAG: %[[OFF320:.*]] = arith.constant 320 : index
// CHECK: memref.view %{{.*}}[%[[OFF0]]][] : memref<384xi8> to memref<4x16xf32>
// CHECK: memref.view %{{.*}}[%[[OFF256]]][] : memref<384xi8> to memref<16xf32>
// CHECK: scf.for
// CHECK: memref.view %{{.*}}[%[[OFF320]]][] : memref<384xi8> to memref<4xf32>
// CHECK: memref.view %{{.*}}[%[[OFF0]]][] : memref<384xi8> to memref<16xf32>
// CHECK: memref.view %{{.*}}[%[[OFF64]]][] : memref<384xi8> to memref<16xf32>
func.func private @consume(!llvm.ptr)
func.func @train_step(%x: memref<4x16xf32>, %out: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %a = memref.alloc() {alignment = 64 : i64} : memref<4x16xf32>
  linalg.copy ins(%x : memref<4x16xf32>) outs(%a : memref<4x16xf32>)
  %b = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  %flat = memref.collapse_shape %a [[0, 1]] : memref<4x16xf32> into memref<64xf32>
  scf.for %i = %c0 to %c4 step %c1 {
    %t = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
    %row = memref.subview %a[%i, 0] [1, 4] [1, 1]
        : memref<4x16xf32> to memref<4xf32, strided<[1], offset: ?>>
    linalg.copy ins(%row : memref<4xf32, strided<[1], offset: ?>>) outs(%t : memref<4xf32>)
  }
  memref.copy %flat, %out : memref<64xf32> to memref<64xf32>
  %p = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  %addr = memref.extract_aligned_pointer_as_index %p : memref<16xf32> -> index
  %addr64 = arith.index_cast %addr : index to i64
  %ptr = llvm.inttoptr %addr64 : i64 to !llvm.ptr
  %q = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
  linalg.copy ins(%b : memref<16xf32>) outs(%q : memref<16xf32>)
  func.call @consume(%ptr) : (!llvm.ptr) -> ()
  return
}

// -----

func.func @train_step(%n: index) {
  // expected-error @below {{cannot plan a buffer of dynamic shape 'memref<?xf32>'}}
  %a = memref.alloc(%n) : memref<?xf32>
  return
}

// -----

func.func @train_step() -> memref<4xf32> {
  // expected-error @below {{buffer escapes @train_step through its return}}
  %a = memref.alloc() : memref<4xf32>
  return %a : memref<4xf32>
}

// -----

// Scratch allocated inside a parallel loop is private to each iteration:
// 4 x 8 iterations get 32 slots of 64 bytes (16 bytes rounded up to the
// alignment), addressed by the row-major iteration index.

// CHECK: module attributes {weft.peak_bytes = {{[0-9]+}} : i64, weft.workspace_bytes = 2048 : i64}
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: %[[WS:[a-z0-9]+]]: memref<2048xi8> {weft.workspace})
// CHECK-DAG: %[[C8:.*]] = arith.constant 8 : index
// CHECK-DAG: %[[C64:.*]] = arith.constant 64 : index
// CHECK: scf.forall (%[[I:.*]], %[[J:.*]]) in (4, 8)
// CHECK: %[[ROW:.*]] = arith.muli %[[I]], %[[C8]] : index
// CHECK: %[[IDX:.*]] = arith.addi %[[ROW]], %[[J]] : index
// CHECK: %[[OFF:.*]] = arith.muli %[[IDX]], %[[C64]] : index
// CHECK: memref.view %[[WS]][%[[OFF]]][] : memref<2048xi8> to memref<4xf32>
func.func @train_step(%x: memref<4x8x4xf32>, %out: memref<4x8x4xf32>) {
  scf.forall (%i, %j) in (4, 8) {
    %s = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
    %row = memref.subview %x[%i, %j, 0] [1, 1, 4] [1, 1, 1] : memref<4x8x4xf32> to memref<4xf32, strided<[1], offset: ?>>
    linalg.copy ins(%row : memref<4xf32, strided<[1], offset: ?>>) outs(%s : memref<4xf32>)
    %dst = memref.subview %out[%i, %j, 0] [1, 1, 4] [1, 1, 1] : memref<4x8x4xf32> to memref<4xf32, strided<[1], offset: ?>>
    linalg.add ins(%s, %s : memref<4xf32>, memref<4xf32>) outs(%dst : memref<4xf32, strided<[1], offset: ?>>)
    memref.dealloc %s : memref<4xf32>
  }
  return
}
