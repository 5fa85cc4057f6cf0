// RUN: weft-opt %s --weft-gpu-map-step=reduce-blocks-from=1000000 --canonicalize | FileCheck %s
// RUN: weft-opt %s --weft-gpu-map-step --canonicalize | FileCheck %s --check-prefix=MULTI
// RUN: weft-opt %s --weft-gpu-map-step=reduce-block-size=64 --canonicalize | FileCheck %s --check-prefix=R64
// RUN: weft-opt %s --weft-gpu-map-step=partial-reductions=false --canonicalize | FileCheck %s --check-prefix=SEQ
// RUN: not weft-opt %s --weft-gpu-map-step=reduce-block-size=48 2>&1 | FileCheck %s --check-prefix=BAD

// Reductions of a planned step: a whole tensor into one element runs on one
// block with a shared-memory tree; a row reduction is a thread per row.

#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#all = affine_map<(d0, d1) -> ()>
module {
  // The gradient norm's sum of squares, in f64, over 1000 x 300 elements.
  func.func private @train_step.rows_0(%g: memref<1000x300xf32>, %n: memref<f64>) attributes {llvm.bareptr, no_inline} {
    linalg.generic {indexing_maps = [#id2, #all], iterator_types = ["reduction", "reduction"]} ins(%g : memref<1000x300xf32>) outs(%n : memref<f64>) {
    ^bb0(%in: f32, %out: f64):
      %e = arith.extf %in : f32 to f64
      %s = arith.mulf %e, %e : f64
      %a = arith.addf %out, %s fastmath<reassoc> : f64
      linalg.yield %a : f64
    }
    return
  }
  // A maximum over a tensor.
  func.func private @train_step.rows_1(%g: memref<1000x300xf32>, %m: memref<f32>) attributes {llvm.bareptr, no_inline} {
    linalg.generic {indexing_maps = [#id2, #all], iterator_types = ["reduction", "reduction"]} ins(%g : memref<1000x300xf32>) outs(%m : memref<f32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.maximumf %in, %out : f32
      linalg.yield %a : f32
    }
    return
  }
  // Row sums: a thread per row.
  func.func private @train_step.rows_2(%g: memref<1000x300xf32>, %r: memref<1000xf32>) attributes {llvm.bareptr, no_inline} {
    linalg.generic {indexing_maps = [#id2, #row], iterator_types = ["parallel", "reduction"]} ins(%g : memref<1000x300xf32>) outs(%r : memref<1000xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %out, %in : f32
      linalg.yield %a : f32
    }
    return
  }
  // Not a combination of the output with the inputs: stays sequential.
  func.func private @train_step.rows_3(%g: memref<1000x300xf32>, %m: memref<f32>) attributes {llvm.bareptr, no_inline} {
    linalg.generic {indexing_maps = [#id2, #all], iterator_types = ["reduction", "reduction"]} ins(%g : memref<1000x300xf32>) outs(%m : memref<f32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.subf %in, %out : f32
      linalg.yield %a : f32
    }
    return
  }
  // Cross-entropy's two sums over a row of logits (the exponentials and
  // the label's logit, picked with linalg.index) reduce together.
  func.func private @train_step.rows_4(%l: memref<64x5000xf32>, %mx: memref<64xf32>, %lab: memref<64xi64>, %se: memref<64xf32>, %pick: memref<64xf32>) attributes {llvm.bareptr, no_inline} {
    %zero = arith.constant 0.0 : f32
    linalg.generic {indexing_maps = [#id2, #row, #row, #row, #row], iterator_types = ["parallel", "reduction"]} ins(%l, %mx, %lab : memref<64x5000xf32>, memref<64xf32>, memref<64xi64>) outs(%se, %pick : memref<64xf32>, memref<64xf32>) {
    ^bb0(%in: f32, %m: f32, %y: i64, %o1: f32, %o2: f32):
      %d = arith.subf %in, %m : f32
      %e = math.exp %d : f32
      %i = linalg.index 1 : index
      %ii = arith.index_cast %i : index to i64
      %hit = arith.cmpi eq, %ii, %y : i64
      %v = arith.select %hit, %in, %zero : f32
      %a = arith.addf %o1, %e : f32
      %b = arith.addf %o2, %v : f32
      linalg.yield %a, %b : f32, f32
    }
    return
  }
  // A bias gradient: 64 columns of bf16 summed over 4096 rows.
  func.func private @train_step.rows_5(%d: memref<4096x64xbf16>, %gb: memref<64xf32>) attributes {llvm.bareptr, no_inline} {
    linalg.generic {indexing_maps = [#id2, affine_map<(d0, d1) -> (d1)>], iterator_types = ["reduction", "parallel"]} ins(%d : memref<4096x64xbf16>) outs(%gb : memref<64xf32>) {
    ^bb0(%in: bf16, %out: f32):
      %e = arith.extf %in : bf16 to f32
      %a = arith.addf %out, %e fastmath<reassoc> : f32
      linalg.yield %a : f32
    }
    return
  }
  func.func @train_step(%g: memref<1000x300xf32>, %n: memref<f64>, %m: memref<f32>, %r: memref<1000xf32>, %q: memref<f32>, %l: memref<64x5000xf32>, %mx: memref<64xf32>, %lab: memref<64xi64>, %se: memref<64xf32>, %pick: memref<64xf32>, %d: memref<4096x64xbf16>, %gb: memref<64xf32>) attributes {llvm.bareptr} {
    call @train_step.rows_4(%l, %mx, %lab, %se, %pick) : (memref<64x5000xf32>, memref<64xf32>, memref<64xi64>, memref<64xf32>, memref<64xf32>) -> ()
    call @train_step.rows_5(%d, %gb) : (memref<4096x64xbf16>, memref<64xf32>) -> ()
    call @train_step.rows_0(%g, %n) : (memref<1000x300xf32>, memref<f64>) -> ()
    call @train_step.rows_1(%g, %m) : (memref<1000x300xf32>, memref<f32>) -> ()
    call @train_step.rows_2(%g, %r) : (memref<1000x300xf32>, memref<1000xf32>) -> ()
    call @train_step.rows_3(%g, %q) : (memref<1000x300xf32>, memref<f32>) -> ()
    return
  }
}

// The sum: one block of 512 threads, a 512-element f64 buffer in shared
// memory. Thread t sums iterations t, t + 512, ... (row t / 300, column
// t % 300) from zero, in f64.
// CHECK-LABEL: func.func private @train_step.rows_0(
// CHECK-DAG:     %[[ZERO:.*]] = arith.constant 0.000000e+00 : f64
// CHECK-DAG:     %[[C300000:.*]] = arith.constant 300000 : index
// CHECK-DAG:     %[[C512:.*]] = arith.constant 512 : index
// CHECK-DAG:     %[[C256:.*]] = arith.constant 256 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %[[C1]], {{.*}}) threads(%[[TX:[^,]*]], {{.*}}) in ({{.*}} = %[[C512]],
// CHECK-SAME:      workgroup(%[[SH:.*]] : memref<512xf64, #gpu.address_space<workgroup>>)
// CHECK:           %[[PART:.*]] = scf.for %[[I:.*]] = %[[TX]] to %[[C300000]] step %[[C512]] iter_args(%[[ACC:.*]] = %[[ZERO]]) -> (f64) {
// CHECK:             arith.remsi %[[I]]
// CHECK:             arith.divsi %[[I]]
// CHECK:             arith.mulf
// CHECK:             arith.addf %[[ACC]], {{.*}} fastmath<reassoc> : f64
// CHECK:           memref.store %[[PART]], %[[SH]][%[[TX]]]
// CHECK-NEXT:      gpu.barrier
// The tree: 256, 128, ..., 1; each level the lower half adds the upper.
// CHECK-NEXT:      %[[LOW:.*]] = arith.cmpi ult, %[[TX]], %[[C256]]
// CHECK-NEXT:      scf.if %[[LOW]] {
// CHECK-NEXT:        %[[A:.*]] = memref.load %[[SH]][%[[TX]]]
// CHECK-NEXT:        %[[J:.*]] = arith.addi %[[TX]], %[[C256]]
// CHECK-NEXT:        %[[B:.*]] = memref.load %[[SH]][%[[J]]]
// CHECK-NEXT:        %[[S:.*]] = arith.addf %[[A]], %[[B]] : f64
// CHECK-NEXT:        memref.store %[[S]], %[[SH]][%[[TX]]]
// CHECK-NEXT:      }
// CHECK-NEXT:      gpu.barrier
// CHECK-COUNT-7:   gpu.barrier
// CHECK:           arith.cmpi ult, %[[TX]], %[[C1]]
// CHECK:           gpu.barrier
// Thread 0 adds the total to the output.
// CHECK-NEXT:      %[[FIRST:.*]] = arith.cmpi eq, %[[TX]], %c0
// CHECK-NEXT:      scf.if %[[FIRST]] {
// CHECK-NEXT:        %[[T:.*]] = memref.load %[[SH]][%c0]
// CHECK-NEXT:        %[[O:.*]] = memref.load %{{.*}}[] : memref<f64>
// CHECK-NEXT:        %[[R:.*]] = arith.addf %[[O]], %[[T]] : f64
// CHECK-NEXT:        memref.store %[[R]], %{{.*}}[] : memref<f64>
// CHECK:           gpu.terminator
// The maximum starts from -inf and combines with maximumf.
// CHECK-LABEL: func.func private @train_step.rows_1(
// CHECK-DAG:     %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK:         gpu.launch
// CHECK-SAME:      workgroup({{.*}} : memref<512xf32, #gpu.address_space<workgroup>>)
// CHECK:           scf.for {{.*}} iter_args({{.*}} = %[[NINF]]) -> (f32)
// CHECK:             arith.maximumf
// CHECK:           arith.maximumf
// CHECK:           gpu.terminator
// Row sums over 300 columns: blocks of 32 x 8 threads, 8 rows a block (125
// blocks); the 32 lanes of a warp split a row, reading consecutive
// addresses, and meet in a tree along x.
// CHECK-LABEL: func.func private @train_step.rows_2(
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c125, {{.*}}) threads(%[[RX:[^,]*]], %[[RY:[^,]*]], {{.*}}) in ({{.*}} = %c32, {{.*}} = %c8,
// CHECK-SAME:      workgroup(%[[RS:.*]] : memref<8x32xf32, #gpu.address_space<workgroup>>)
// CHECK:           scf.for %[[C:.*]] = %[[RX]] to %c300 step %c32 iter_args(
// CHECK:             memref.load %{{.*}}[%{{.*}}, %[[C]]]
// CHECK:           memref.store %{{.*}}, %[[RS]][%[[RY]], %[[RX]]]
// CHECK-NEXT:      gpu.barrier
// CHECK-NEXT:      arith.cmpi ult, %[[RX]], %c16
// CHECK:           gpu.terminator
// The subtraction: one thread.
// CHECK-LABEL: func.func private @train_step.rows_3(
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads({{.*}}) in ({{.*}} = %c1,
// CHECK-NOT:       gpu.barrier
// CHECK:           arith.subf
// CHECK:           gpu.terminator

// R64: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c64,
// R64-SAME: workgroup({{.*}} : memref<64xf64, #gpu.address_space<workgroup>>,

// Both sums: 8 rows a block (8 blocks), 32 lanes a row, a shared buffer
// and a tree each; the lane's column is the label test's index. 8 blocks
// would leave a GPU idle: the 5000 columns are cut into 4 slices of 1250
// (grid y), each block's totals go to a device buffer per sum, and a
// second launch adds each row's 4 slices in slice order.
// CHECK-LABEL: func.func private @train_step.rows_4(
// CHECK:         gpu.launch blocks(%{{[^,]*}}, %[[BY:[^,]*]], {{.*}}) in ({{.*}} = %c8, {{.*}} = %c4, {{.*}}) threads(%[[LX:[^,]*]], %[[LY:[^,]*]], {{.*}}) in ({{.*}} = %c32, {{.*}} = %c8,
// CHECK-SAME:      workgroup(%[[S1:.*]] : memref<8x32xf32, #gpu.address_space<workgroup>>, %[[S2:.*]] : memref<8x32xf32, #gpu.address_space<workgroup>>)
// CHECK-DAG:       %[[P2:.*]] = memref.get_global @__weft_reduction_slices_0 : memref<4x64xf32>
// CHECK-DAG:       %[[P1:.*]] = memref.get_global @__weft_reduction_slices : memref<4x64xf32>
// CHECK:           %[[ROW:.*]] = arith.addi %{{.*}}, %[[LY]] : index
// CHECK:           %[[BEGIN:.*]] = arith.muli %[[BY]], %c1250
// CHECK:           %[[FROM:.*]] = arith.addi %[[BEGIN]], %[[LX]]
// CHECK:           %[[END:.*]] = arith.addi %[[BEGIN]], %c1250
// CHECK:           %[[TO:.*]] = arith.minsi %[[END]], %c5000
// CHECK:           scf.for %[[C:.*]] = %[[FROM]] to %[[TO]] step %c32 iter_args(%[[A1:.*]] = %{{.*}}, %[[A2:.*]] = %{{.*}}) -> (f32, f32)
// CHECK:             math.exp
// CHECK:             arith.index_cast %[[C]] : index to i64
// CHECK:             arith.addf %[[A1]]
// CHECK:             arith.addf %[[A2]]
// CHECK:           memref.store %{{.*}}#0, %[[S1]][%[[LY]], %[[LX]]]
// CHECK-NEXT:      memref.store %{{.*}}#1, %[[S2]][%[[LY]], %[[LX]]]
// CHECK-NEXT:      gpu.barrier
// CHECK-NOT:       linalg.index
// CHECK:           memref.store %{{.*}}, %[[P1]][%[[BY]], %[[ROW]]]
// CHECK:           memref.store %{{.*}}, %[[P2]][%[[BY]], %[[ROW]]]
// CHECK:           gpu.terminator
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %c64,
// CHECK-DAG:       %[[Q2:.*]] = memref.get_global @__weft_reduction_slices_0
// CHECK-DAG:       %[[Q1:.*]] = memref.get_global @__weft_reduction_slices :
// CHECK:           scf.for %[[K:.*]] = %c0 to %c4 step %c1 iter_args(
// CHECK:             memref.load %[[Q1]][%[[K]], %[[T]]]
// CHECK:             arith.addf
// CHECK:             memref.load %[[Q2]][%[[K]], %[[T]]]
// CHECK:             arith.addf
// CHECK:           memref.load %{{.*}}[%[[T]]] : memref<64xf32>
// CHECK:           arith.addf
// CHECK:           memref.store
// CHECK:           gpu.terminator

// The bias gradient: 32 columns a block on consecutive threads (2 blocks),
// 8 lanes down the rows; the 4096 rows in 16 slices of 256 along grid y,
// so each lane sums 32 rows; then the 16 slices of each column, in order.
// CHECK-LABEL: func.func private @train_step.rows_5(
// CHECK:         gpu.launch blocks(%{{[^,]*}}, %[[BY5:[^,]*]], {{.*}}) in ({{.*}} = %c2, {{.*}} = %c16, {{.*}}) threads(%[[X5:[^,]*]], %[[Y5:[^,]*]], {{.*}}) in ({{.*}} = %c32, {{.*}} = %c8,
// CHECK:           %[[B5:.*]] = arith.muli %[[BY5]], %c256
// CHECK:           %[[F5:.*]] = arith.addi %[[B5]], %[[Y5]]
// CHECK:           scf.for %[[I5:.*]] = %[[F5]] to %{{.*}} step %c8 iter_args(
// CHECK:             memref.load %{{.*}}[%[[I5]], %{{.*}}] : memref<4096x64xbf16>
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads({{.*}}) in ({{.*}} = %c64,
// CHECK:           scf.for %{{.*}} = %c0 to %c16 step %c1 iter_args(

// Without partial reductions: a thread per row, 4 blocks of 256, each
// summing its row alone.
// SEQ-LABEL: func.func private @train_step.rows_2(
// SEQ:         gpu.launch blocks({{.*}}) in ({{.*}} = %c4, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// SEQ-NOT:       gpu.barrier
// SEQ:           scf.for
// SEQ:           gpu.terminator

// From 65536 iterations (by default) a full reduction runs on many
// blocks: 300000 / (512 x 8) -> 74 blocks over grid-strided slices, each
// leaving its total in a device buffer; the last block to count itself
// done combines the 74 totals in order, then resets the count.
// MULTI:      memref.global "private" @[[$TOTALS:__weft_block_totals[_0-9]*]] : memref<74xf64> = uninitialized
// MULTI-NEXT: memref.global "private" @[[$DONE:__weft_blocks_done[_0-9]*]] : memref<1xi32> = dense<0>
// MULTI-LABEL: func.func private @train_step.rows_0(
// MULTI:         gpu.launch blocks(%[[B:[^,]*]], {{.*}}) in ({{.*}} = %c74, {{.*}}) threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %c512,
// MULTI-SAME:      workgroup(%[[SH:.*]] : memref<512xf64, #gpu.address_space<workgroup>>, %[[FLAG:.*]] : memref<1xi32, #gpu.address_space<workgroup>>)
// MULTI-DAG:       %[[TOT:.*]] = memref.get_global @[[$TOTALS]]
// MULTI-DAG:       %[[CNT:.*]] = memref.get_global @[[$DONE]]
// MULTI:           %[[BASE:.*]] = arith.muli %[[B]], %c512
// MULTI:           %[[START:.*]] = arith.addi %[[BASE]], %[[T]]
// MULTI:           scf.for %{{.*}} = %[[START]] to %c300000 step %c37888 iter_args(
// MULTI:           gpu.barrier
// MULTI:           memref.store %{{.*}}, %[[TOT]][%[[B]]]
// MULTI-NEXT:      nvvm.memory.barrier <gpu>
// MULTI-NEXT:      %[[N:.*]] = memref.atomic_rmw addi %{{.*}}, %[[CNT]][%c0]
// MULTI-NEXT:      %[[LAST:.*]] = arith.cmpi eq, %[[N]], %c73_i32
// MULTI:           memref.store %{{.*}}, %[[FLAG]][%c0]
// MULTI:           gpu.barrier
// MULTI:           scf.if
// MULTI:             scf.for %[[J:.*]] = %[[T]] to %c74 step %c512
// MULTI:               memref.atomic_rmw addf %{{.*}}, %[[TOT]][%[[J]]]
// MULTI:             gpu.barrier
// MULTI:             memref.store %{{.*}}, %{{.*}}[] : memref<f64>
// MULTI:             memref.store %c0_i32, %[[CNT]][%c0]
// MULTI:         gpu.terminator

// BAD: reduce-block-size must be a power of two from 32 to 1024
