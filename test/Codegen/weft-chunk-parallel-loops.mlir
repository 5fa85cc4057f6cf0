// RUN: weft-opt %s --weft-chunk-parallel-loops=chunks=4 -split-input-file \
// RUN:   | FileCheck %s
// RUN: weft-opt %s --weft-chunk-parallel-loops="chunks=4 scratch-budget=128" \
// RUN:   -split-input-file | FileCheck %s --check-prefix=BUDGET

// 6 x 5 rows become 4 chunks; chunk %c takes rows %c, %c + 4, ... and
// recovers the old indices row-major.

// CHECK-LABEL: func.func @rows
// CHECK: scf.forall (%[[C:.*]]) in (4) {
// CHECK-DAG: %[[C30:.*]] = arith.constant 30 : index
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK:   scf.for %[[R:.*]] = %[[C]] to %[[C30]] step %[[C4]] {
// CHECK:     %[[C5:.*]] = arith.constant 5 : index
// CHECK:     %[[J:.*]] = arith.remui %[[R]], %[[C5]] : index
// CHECK:     %[[I:.*]] = arith.divui %[[R]], %[[C5]] : index
// CHECK:     memref.alloc() : memref<8xf64>
// CHECK:     memref.store {{.*}}[%[[I]], %[[J]]]

// With 128 bytes of budget, 4 copies of 64 bytes of scratch do not fit:
// 2 chunks do.
// BUDGET-LABEL: func.func @rows
// BUDGET: scf.forall (%{{.*}}) in (2) {
func.func @rows(%out: memref<6x5xf32>) {
  %cst = arith.constant 1.0 : f32
  scf.forall (%i, %j) in (6, 5) {
    %s = memref.alloc() : memref<8xf64>
    memref.store %cst, %out[%i, %j] : memref<6x5xf32>
    memref.dealloc %s : memref<8xf64>
  }
  return
}

// -----

// A loop with no more rows than chunks stays as it is, and so does one
// with a mapping (a GPU's) or with bounds not from 0.

// CHECK-LABEL: func.func @small
// CHECK: scf.forall (%{{.*}}) in (3) {
// CHECK-NOT: scf.for
// CHECK: scf.forall (%{{.*}}) = (2) to (40) step (1) {
// CHECK-NOT: scf.for
func.func @small(%out: memref<40xf32>) {
  %cst = arith.constant 1.0 : f32
  scf.forall (%i) in (3) {
    memref.store %cst, %out[%i] : memref<40xf32>
  }
  scf.forall (%i) = (2) to (40) step (1) {
    memref.store %cst, %out[%i] : memref<40xf32>
  }
  return
}

// -----

// 128 rows in 4 chunks: blocks of 8 consecutive rows (16 would give each
// chunk 2 deals, fewer than 4), chunk %c taking blocks %c, %c + 4, ...

// CHECK-LABEL: func.func @blocks
// CHECK: scf.forall (%[[C:.*]]) in (4) {
// CHECK-DAG: %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG: %[[C4:.*]] = arith.constant 4 : index
// CHECK:   scf.for %[[B:.*]] = %[[C]] to %[[C16]] step %[[C4]] {
// CHECK:     %[[C8:.*]] = arith.constant 8 : index
// CHECK:     %[[FIRST:.*]] = arith.muli %[[B]], %[[C8]] : index
// CHECK:     %[[LAST:.*]] = arith.addi %[[FIRST]], %[[C8]] : index
// CHECK:     scf.for %[[R:.*]] = %[[FIRST]] to %[[LAST]] step %{{.*}} {
// CHECK:       memref.store %{{.*}}, %{{.*}}[%[[R]]]
func.func @blocks(%out: memref<128xf32>) {
  %cst = arith.constant 1.0 : f32
  scf.forall (%i) in (128) {
    memref.store %cst, %out[%i] : memref<128xf32>
  }
  return
}
