// RUN: weft-opt %s --weft-merge-sibling-kernels=chunks=4 -split-input-file \
// RUN:   | FileCheck %s
// RUN: weft-opt %s --weft-merge-sibling-kernels="chunks=4 max-kernels=3" \
// RUN:   -split-input-file | FileCheck %s --check-prefix=CAP
// RUN: weft-opt %s --weft-merge-sibling-kernels="chunks=4 scratch-budget=255" \
// RUN:   -split-input-file | FileCheck %s --check-prefix=BUDGET
// RUN: not weft-opt %s --weft-merge-sibling-kernels=max-kernels=1 \
// RUN:   -split-input-file 2>&1 | FileCheck %s --check-prefix=ERR
// ERR: error: --weft-merge-sibling-kernels: max-kernels must be at least 2 (got 1)

// Two parameters' updates after a gradient-norm reduction. The updates read
// the scale the reduction writes, so the reduction stays ahead, alone; the
// updates (6 rows and 3 rows, independent) become one loop of 4 iterations.
// Rows are dealt round-robin across both: the second kernel's row r runs in
// iteration (r + 6) mod 4, i.e. from (c + 2) mod 4 on.

#id1 = affine_map<(i) -> (i)>
#to0 = affine_map<(i) -> ()>

// Each kernel's rows of an iteration are a function of the first row,
// called from the loop.
// CHECK-LABEL: func.func private @clip_then_update.rows_0(
// CHECK-SAME:      %[[FIRST:[^:]*]]: index) attributes {llvm.bareptr, no_inline}
// CHECK-DAG:     %[[C4:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[C6:.*]] = arith.constant 6 : index
// CHECK:         scf.for %[[R:.*]] = %[[FIRST]] to %[[C6]] step %[[C4]] {
// CHECK:           memref.store %{{.*}}, %{{.*}}[%[[R]]] : memref<6xf32>
// CHECK-LABEL: func.func private @clip_then_update.rows_1(
// CHECK:         scf.for
// CHECK:           memref.store %{{.*}}, %{{.*}}[%{{.*}}] : memref<3xf32>

// CHECK-LABEL: func.func @clip_then_update(
// CHECK:       linalg.generic
// CHECK-SAME:    iterator_types = ["reduction"]
// CHECK:       linalg.yield
// CHECK-NEXT:  }
// CHECK-NEXT:  scf.forall (%[[C:.*]]) in (4) {
// CHECK-NEXT:    call @clip_then_update.rows_0({{.*}}, %[[C]])
// CHECK-DAG:     %[[W:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[TWO:.*]] = arith.constant 2 : index
// CHECK:         %[[S:.*]] = arith.addi %[[C]], %[[TWO]] : index
// CHECK:         %[[F2:.*]] = arith.remui %[[S]], %[[W]] : index
// CHECK:         call @clip_then_update.rows_1({{.*}}, %[[F2]])
// CHECK-NEXT:  } {weft.kernel = "siblings_0"}
// CHECK-NEXT:  return
func.func @clip_then_update(%g1: memref<6xf32>, %g2: memref<3xf32>,
                            %p1: memref<6xf32>, %p2: memref<3xf32>,
                            %out1: memref<6xf32>, %out2: memref<3xf32>) {
  %scale = memref.alloc() : memref<f32>
  linalg.generic {indexing_maps = [#id1, #to0], iterator_types = ["reduction"]}
      ins(%g1 : memref<6xf32>) outs(%scale : memref<f32>) {
  ^bb0(%g: f32, %acc: f32):
    %sq = arith.mulf %g, %g : f32
    %sum = arith.addf %acc, %sq : f32
    linalg.yield %sum : f32
  }
  scf.forall (%i) in (6) {
    %s = memref.load %scale[] : memref<f32>
    %g = memref.load %g1[%i] : memref<6xf32>
    %p = memref.load %p1[%i] : memref<6xf32>
    %d = arith.mulf %g, %s : f32
    %n = arith.subf %p, %d : f32
    memref.store %n, %out1[%i] : memref<6xf32>
  } {weft.kernel = "fused_0"}
  scf.forall (%i) in (3) {
    %s = memref.load %scale[] : memref<f32>
    %g = memref.load %g2[%i] : memref<3xf32>
    %p = memref.load %p2[%i] : memref<3xf32>
    %d = arith.mulf %g, %s : f32
    %n = arith.subf %p, %d : f32
    memref.store %n, %out2[%i] : memref<3xf32>
  } {weft.kernel = "fused_1"}
  return
}

// -----

// Two biases, each updated like AdamW's 1-D parameters: the first moment
// and the second moment, then the parameter from both. Levels, not runs of
// neighbours: all four moments are one loop, both parameter updates the
// next, which lands where the last update was. An op that is not a forall
// is one row, run by one iteration under an scf.if (a loop of at most one
// trip would let --weft-promote-accumulators store a 0-d output back in
// every iteration). Equal bodies share one function.

#id = affine_map<(i) -> (i)>

// CHECK-LABEL: func.func private @moments_then_params.rows_0(
// CHECK-LABEL: func.func private @moments_then_params.rows_1(
// CHECK:         arith.mulf
// CHECK-LABEL: func.func private @moments_then_params.rows_4(
// CHECK:         arith.divf
// CHECK-LABEL: func.func @moments_then_params(
// CHECK-SAME:      %[[G1:[^:]*]]: memref<8xf32>, %[[G2:[^:]*]]: memref<8xf32>,
// CHECK-SAME:      %[[P1:[^:]*]]: memref<8xf32>, %[[P2:[^:]*]]: memref<8xf32>)
// CHECK:         %[[M1:.*]] = memref.alloc()
// CHECK:         %[[V1:.*]] = memref.alloc()
// CHECK:         %[[M2:.*]] = memref.alloc()
// CHECK:         %[[V2:.*]] = memref.alloc()
// CHECK-NEXT:    scf.forall (%[[C:.*]]) in (4) {
// CHECK:           %[[MINE:.*]] = arith.cmpi eq, %[[C]], %{{.*}} : index
// CHECK-NEXT:      scf.if %[[MINE]] {
// CHECK-NEXT:        call @moments_then_params.rows_0(%[[G1]], %[[M1]])
// CHECK:           call @moments_then_params.rows_1(%[[G1]], %[[V1]])
// CHECK:           call @moments_then_params.rows_0(%[[G2]], %[[M2]])
// CHECK:           call @moments_then_params.rows_1(%[[G2]], %[[V2]])
// CHECK:         } {weft.kernel = "siblings_0"}
// CHECK-NEXT:    scf.forall (%{{.*}}) in (2) {
// CHECK:           call @moments_then_params.rows_4(%[[M1]], %[[V1]], %[[P1]])
// CHECK:           call @moments_then_params.rows_4(%[[M2]], %[[V2]], %[[P2]])
// CHECK:         } {weft.kernel = "siblings_1"}
// CHECK-NEXT:    return
// With at most 3 kernels a loop, the four moments are two loops of two,
// one after the other.
// CAP-LABEL: func.func @moments_then_params(
// CAP:         scf.forall (%{{.*}}) in (2) {
// CAP-COUNT-2:   call @moments_then_params.rows_
// CAP:         } {weft.kernel = "siblings_0"}
// CAP-NEXT:    scf.forall (%{{.*}}) in (2) {
// CAP-COUNT-2:   call @moments_then_params.rows_
// CAP:         } {weft.kernel = "siblings_1"}
// CAP-NEXT:    scf.forall (%{{.*}}) in (2) {
// CAP:         } {weft.kernel = "siblings_2"}
func.func @moments_then_params(%g1: memref<8xf32>, %g2: memref<8xf32>,
                               %p1: memref<8xf32>, %p2: memref<8xf32>) {
  %m1 = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g1 : memref<8xf32>) outs(%m1 : memref<8xf32>) {
  ^bb0(%g: f32, %o: f32):
    linalg.yield %g : f32
  }
  %v1 = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g1 : memref<8xf32>) outs(%v1 : memref<8xf32>) {
  ^bb0(%g: f32, %o: f32):
    %sq = arith.mulf %g, %g : f32
    linalg.yield %sq : f32
  }
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%m1, %v1 : memref<8xf32>, memref<8xf32>) outs(%p1 : memref<8xf32>) {
  ^bb0(%m: f32, %v: f32, %o: f32):
    %q = arith.divf %m, %v : f32
    %n = arith.subf %o, %q : f32
    linalg.yield %n : f32
  }
  %m2 = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g2 : memref<8xf32>) outs(%m2 : memref<8xf32>) {
  ^bb0(%g: f32, %o: f32):
    linalg.yield %g : f32
  }
  %v2 = memref.alloc() : memref<8xf32>
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g2 : memref<8xf32>) outs(%v2 : memref<8xf32>) {
  ^bb0(%g: f32, %o: f32):
    %sq = arith.mulf %g, %g : f32
    linalg.yield %sq : f32
  }
  linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%m2, %v2 : memref<8xf32>, memref<8xf32>) outs(%p2 : memref<8xf32>) {
  ^bb0(%m: f32, %v: f32, %o: f32):
    %q = arith.divf %m, %v : f32
    %n = arith.subf %o, %q : f32
    linalg.yield %n : f32
  }
  return
}

// -----

// Nothing merges across a call (a BLAS call, a collective), nor a forall
// with scratch on the stack of its body, nor a write after a read of the
// same buffer (through a view).

// CHECK-LABEL: func.func @barriers
// CHECK:       scf.forall (%{{.*}}) in (6) {
// CHECK-NOT:     scf.for
// CHECK:       call @blas
// CHECK:       scf.forall (%{{.*}}) in (6) {
// CHECK:         memref.alloca
// CHECK:       scf.forall (%{{.*}}) in (6) {
// CHECK-NOT:     scf.for
// CHECK:       memref.copy
// CHECK-NEXT:  return
func.func private @blas(memref<6xf32>)
func.func @barriers(%a: memref<6xf32>, %b: memref<6xf32>, %c: memref<6xf32>) {
  %cst = arith.constant 1.0 : f32
  scf.forall (%i) in (6) {
    memref.store %cst, %a[%i] : memref<6xf32>
  }
  call @blas(%c) : (memref<6xf32>) -> ()
  scf.forall (%i) in (6) {
    %s = memref.alloca() : memref<1xf32>
    memref.store %cst, %b[%i] : memref<6xf32>
  }
  scf.forall (%i) in (6) {
    %x = memref.load %a[%i] : memref<6xf32>
    memref.store %x, %c[%i] : memref<6xf32>
  }
  %view = memref.subview %a[0] [6] [1] : memref<6xf32> to memref<6xf32, strided<[1]>>
  memref.copy %b, %view : memref<6xf32> to memref<6xf32, strided<[1]>>
  return
}

// -----

// Two updates with row scratch (a clipped gradient's row that both moments
// read): merged, each row's scratch a view, at 64 bytes times the merged
// loop's iteration, of 4 x 64 bytes allocated once before the loop. With
// `scratch-budget` below 4 x 64 bytes they stay apart.
// CHECK-LABEL: func.func private @scratch_rows.rows_0(
// CHECK-SAME:      %[[C:[^:]*]]: index, %[[BYTES:[^:]*]]: memref<256xi8>
// CHECK:         %[[SHIFT:.*]] = arith.muli %[[C]], %{{.*}} : index
// CHECK:         %[[ROW:.*]] = memref.view %[[BYTES]][%[[SHIFT]]][] : memref<256xi8> to memref<2xf32>
// CHECK:         scf.for
// CHECK:           memref.store %{{.*}}, %[[ROW]]
// CHECK-LABEL: func.func @scratch_rows(
// CHECK:       memref.alloc() {alignment = 64 : i64} : memref<256xi8>
// CHECK:       memref.alloc() {alignment = 64 : i64} : memref<256xi8>
// CHECK-NEXT:  scf.forall (%{{.*}}) in (4) {
// CHECK-NOT:     memref.alloc
// CHECK:       } {weft.kernel = "siblings_0"}
// CHECK-NEXT:  return
// BUDGET-LABEL: func.func @scratch_rows(
// BUDGET-COUNT-2: memref.alloc() : memref<2xf32>
// BUDGET-NOT: siblings
func.func @scratch_rows(%g1: memref<6x2xf32>, %g2: memref<3x2xf32>,
                        %o1: memref<6x2xf32>, %o2: memref<3x2xf32>) {
  %c0 = arith.constant 0 : index
  scf.forall (%i) in (6) {
    %row = memref.alloc() : memref<2xf32>
    %g = memref.load %g1[%i, %c0] : memref<6x2xf32>
    memref.store %g, %row[%c0] : memref<2xf32>
    %r = memref.load %row[%c0] : memref<2xf32>
    memref.store %r, %o1[%i, %c0] : memref<6x2xf32>
  } {weft.kernel = "fused_0"}
  scf.forall (%i) in (3) {
    %row = memref.alloc() : memref<2xf32>
    %g = memref.load %g2[%i, %c0] : memref<3x2xf32>
    memref.store %g, %row[%c0] : memref<2xf32>
    %r = memref.load %row[%c0] : memref<2xf32>
    memref.store %r, %o2[%i, %c0] : memref<3x2xf32>
  } {weft.kernel = "fused_1"}
  return
}

// -----

// Two sums of squares (a gradient norm's terms), each after the copy that
// initializes its accumulator: each copy runs in its reduction's row, so
// the two are one loop, not a loop of copies and then a loop of sums.
// CHECK-LABEL: func.func private @init_then_sum.rows_0(
// BUDGET-LABEL: func.func private @init_then_sum.rows_0(
// CHECK:         memref.copy
// CHECK-NEXT:    linalg.generic
// CHECK-LABEL: func.func @init_then_sum(
// CHECK-NOT:     memref.copy
// CHECK:         scf.forall (%{{.*}}) in (2) {
// CHECK-NOT:     memref.copy
// CHECK:         } {weft.kernel = "siblings_0"}
// CHECK-NEXT:    return
func.func @init_then_sum(%g1: memref<6xf32>, %g2: memref<3xf32>,
                         %zero: memref<f32>, %n1: memref<f32>,
                         %n2: memref<f32>) {
  memref.copy %zero, %n1 : memref<f32> to memref<f32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%g1 : memref<6xf32>) outs(%n1 : memref<f32>) {
  ^bb0(%g: f32, %acc: f32):
    %sq = arith.mulf %g, %g : f32
    %sum = arith.addf %acc, %sq : f32
    linalg.yield %sum : f32
  }
  memref.copy %zero, %n2 : memref<f32> to memref<f32>
  linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> ()>],
                  iterator_types = ["reduction"]}
      ins(%g2 : memref<3xf32>) outs(%n2 : memref<f32>) {
  ^bb0(%g: f32, %acc: f32):
    %sq = arith.mulf %g, %g : f32
    %sum = arith.addf %acc, %sq : f32
    linalg.yield %sum : f32
  }
  return
}

// -----

// A kernel with fewer rows than the loop has iterations is spread over all
// of them: OpenMP gives each thread a contiguous block of iterations, and
// the 2 rows of @spread's second kernel packed into iterations 2 and 3 (a
// bias gradient's heavy rows next to light ones) would run on one thread
// of two. Its row r runs in iteration (2 r + 2) mod 4: iterations 2 and 0.
// CHECK-LABEL: func.func @spread(
// CHECK:       scf.forall (%[[C:.*]]) in (4) {
// CHECK-NEXT:    call @spread.rows_0({{.*}}, %[[C]])
// CHECK-DAG:     %[[W:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[TWO:.*]] = arith.constant 2 : index
// CHECK:         %[[S:.*]] = arith.addi %[[C]], %[[TWO]] : index
// CHECK:         %[[D:.*]] = arith.remui %[[S]], %[[W]] : index
// CHECK:         %[[STRIDE:.*]] = arith.constant 2 : index
// CHECK:         %[[M:.*]] = arith.remui %[[D]], %[[STRIDE]] : index
// CHECK:         %[[ON:.*]] = arith.cmpi eq, %[[M]], %{{.*}} : index
// CHECK:         %[[END:.*]] = arith.constant 2 : index
// CHECK:         %[[Q:.*]] = arith.divui %[[D]], %[[STRIDE]] : index
// CHECK:         %[[F:.*]] = arith.select %[[ON]], %[[Q]], %[[END]] : index
// CHECK:         call @spread.rows_1({{.*}}, %[[F]])
// CHECK-NEXT:  } {weft.kernel = "siblings_0"}
#sid = affine_map<(i) -> (i)>
func.func @spread(%a: memref<6xf32>, %b: memref<2xf32>,
                  %oa: memref<6xf32>, %ob: memref<2xf32>) {
  scf.forall (%i) in (6) {
    %x = memref.load %a[%i] : memref<6xf32>
    %y = arith.addf %x, %x : f32
    memref.store %y, %oa[%i] : memref<6xf32>
  } {weft.kernel = "fused_0"}
  scf.forall (%i) in (2) {
    %x = memref.load %b[%i] : memref<2xf32>
    %y = arith.mulf %x, %x : f32
    memref.store %y, %ob[%i] : memref<2xf32>
  } {weft.kernel = "fused_1"}
  return
}
