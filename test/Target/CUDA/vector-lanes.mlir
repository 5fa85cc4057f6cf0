// RUN: weft-opt %s --weft-gpu-map-step --canonicalize -split-input-file | FileCheck %s

// A thread runs 16 bytes of consecutive innermost iterations: loads and
// stores at the innermost index become vector accesses, each checked for
// alignment by the thread, which otherwise runs its lanes one by one.

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
#row = affine_map<(d0, d1) -> (d0)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
// bf16 rows of 128: 8 lanes a thread, 64 x 16 = 1024 threads. The bias
// (indexed by the column) is a vector load too; the row's scale (indexed
// by the row) is one scalar load for all lanes. Misaligned, the thread
// loops over its lanes.
// CHECK-LABEL: func.func private @train_step.fused_0(
// CHECK-DAG:     %[[C16:.*]] = arith.constant 16 : index
// CHECK-DAG:     %[[C1024:.*]] = arith.constant 1024 : index
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK:         gpu.launch
// CHECK:           arith.cmpi slt, %{{.*}}, %[[C1024]]
// CHECK:           %[[COL:.*]] = arith.remsi %{{.*}}, %[[C16]]
// CHECK:           %[[J:.*]] = arith.muli %[[COL]], %[[C8]]
// CHECK:           memref.extract_aligned_pointer_as_index
// CHECK:           arith.remui %{{.*}}, %[[C16]]
// CHECK:           arith.andi
// CHECK:           %[[OK:.*]] = arith.andi
// CHECK-NEXT:      scf.if %[[OK]] {
// CHECK-DAG:         vector.load %{{.*}}[%c0, %[[J]]] {alignment = 16 : i64} : memref<1x128xbf16, {{.*}}>, vector<8xbf16>
// CHECK-DAG:         vector.load %{{.*}}[%[[J]]] {alignment = 16 : i64} : memref<128xbf16>, vector<8xbf16>
// CHECK:             memref.load %{{.*}}[%c0] : memref<1xf32, {{.*}}>
// CHECK-NOT:         memref.load
// CHECK:             vector.store %{{.*}}[%c0, %[[J]]] {alignment = 16 : i64} : memref<1x128xbf16, {{.*}}>, vector<8xbf16>
// CHECK:           } else {
// CHECK:             scf.for %[[V:.*]] = %c0 to %[[C8]] step %c1 {
// CHECK:               %[[JV:.*]] = arith.addi %[[J]], %[[V]]
// CHECK:               memref.load %{{.*}}[%c0, %[[JV]]] : memref<1x128xbf16, {{.*}}>
// CHECK:               memref.store %{{.*}}[%c0, %[[JV]]] : memref<1x128xbf16, {{.*}}>
// CHECK:             }
// CHECK:           }
func.func private @train_step.fused_0(%x: memref<64x128xbf16>, %b: memref<128xbf16>, %s: memref<64xf32>, %y: memref<64x128xbf16>) attributes {llvm.bareptr, no_inline, weft.kernel} {
  scf.forall (%i) in (64) {
    %xr = memref.subview %x[%i, 0] [1, 128] [1, 1] : memref<64x128xbf16> to memref<1x128xbf16, strided<[128, 1], offset: ?>>
    %sr = memref.subview %s[%i] [1] [1] : memref<64xf32> to memref<1xf32, strided<[1], offset: ?>>
    %yr = memref.subview %y[%i, 0] [1, 128] [1, 1] : memref<64x128xbf16> to memref<1x128xbf16, strided<[128, 1], offset: ?>>
    linalg.generic {indexing_maps = [#id, #col, #row, #id], iterator_types = ["parallel", "parallel"]} ins(%xr, %b, %sr : memref<1x128xbf16, strided<[128, 1], offset: ?>>, memref<128xbf16>, memref<1xf32, strided<[1], offset: ?>>) outs(%yr : memref<1x128xbf16, strided<[128, 1], offset: ?>>) {
    ^bb0(%in: bf16, %bias: bf16, %scale: f32, %out: bf16):
      %0 = arith.extf %in : bf16 to f32
      %1 = arith.extf %bias : bf16 to f32
      %2 = arith.addf %0, %1 : f32
      %3 = arith.mulf %2, %scale : f32
      %4 = arith.truncf %3 : f32 to bf16
      linalg.yield %4 : bf16
    }
  }
  return
}
func.func @train_step(%x: memref<64x128xbf16>, %b: memref<128xbf16>, %s: memref<64xf32>, %y: memref<64x128xbf16>) {
  call @train_step.fused_0(%x, %b, %s, %y) : (memref<64x128xbf16>, memref<128xbf16>, memref<64xf32>, memref<64x128xbf16>) -> ()
  return
}

// -----

// The widest element sets the lanes: f32 into bf16, 4 lanes (16 bytes of
// f32, 8 of bf16, each aligned to its own size).
// CHECK-LABEL: func.func private @train_step.fused_0(
// CHECK:         scf.if
// CHECK:           vector.load %{{.*}} {alignment = 16 : i64} : memref<32x64xf32>, vector<4xf32>
// CHECK:           vector.store %{{.*}} {alignment = 8 : i64} : memref<32x64xbf16>, vector<4xbf16>
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func private @train_step.fused_0(%x: memref<32x64xf32>, %y: memref<32x64xbf16>) attributes {llvm.bareptr, no_inline, weft.kernel} {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<32x64xf32>) outs(%y : memref<32x64xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %0 = arith.truncf %in : f32 to bf16
    linalg.yield %0 : bf16
  }
  return
}
func.func @train_step(%x: memref<32x64xf32>, %y: memref<32x64xbf16>) {
  call @train_step.fused_0(%x, %y) : (memref<32x64xf32>, memref<32x64xbf16>) -> ()
  return
}

// -----

// Left a thread per element: rows of 6 f32 (not a multiple of 4 lanes),
// and a transpose (the innermost index is not the input's last one; the
// output's is, but 100 x 3 columns are not a multiple of 4 either).
// CHECK-LABEL: func.func private @train_step.fused_0(
// CHECK-NOT:     vector.
// CHECK-LABEL: func.func private @train_step.fused_1(
// CHECK-NOT:     vector.
// CHECK-LABEL: func.func @train_step(
#id = affine_map<(d0, d1) -> (d0, d1)>
#tr = affine_map<(d0, d1) -> (d1, d0)>
func.func private @train_step.fused_0(%x: memref<50x6xf32>, %y: memref<50x6xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<50x6xf32>) outs(%y : memref<50x6xf32>) {
  ^bb0(%in: f32, %out: f32):
    %0 = math.exp %in : f32
    linalg.yield %0 : f32
  }
  return
}
func.func private @train_step.fused_1(%x: memref<3x100xf32>, %y: memref<100x3xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
  linalg.generic {indexing_maps = [#tr, #id], iterator_types = ["parallel", "parallel"]} ins(%x : memref<3x100xf32>) outs(%y : memref<100x3xf32>) {
  ^bb0(%in: f32, %out: f32):
    linalg.yield %in : f32
  }
  return
}
func.func @train_step(%x: memref<50x6xf32>, %y: memref<50x6xf32>, %a: memref<3x100xf32>, %b: memref<100x3xf32>) {
  call @train_step.fused_0(%x, %y) : (memref<50x6xf32>, memref<50x6xf32>) -> ()
  call @train_step.fused_1(%a, %b) : (memref<3x100xf32>, memref<100x3xf32>) -> ()
  return
}

// -----

// In a row kernel (a block per row), an element-wise op after the row's
// reduction: each thread takes 4 f32 lanes, striding by the block (300
// columns are 75 chunks of 4).
// CHECK-LABEL: func.func private @train_step.fused_0(
// CHECK:         gpu.launch
// CHECK:           gpu.barrier
// CHECK:           scf.for %{{.*}} = %{{.*}} to %c75 step %c256 {
// CHECK:             scf.if
// CHECK:               vector.load %{{.*}} {alignment = 16 : i64} : memref<1x300xf32, {{.*}}>, vector<4xf32>
// CHECK:               vector.store %{{.*}} {alignment = 16 : i64} : memref<1x300xf32, {{.*}}>, vector<4xf32>
// CHECK:             } else {
#row3 = affine_map<(d0, d1) -> (d0, d1)>
#red = affine_map<(d0, d1) -> (d0)>
func.func private @train_step.fused_0(%x: memref<1000x300xf32>, %y: memref<1000x300xf32>, %ws: memref<4000xi8>) attributes {llvm.bareptr, no_inline, weft.kernel} {
  %zero = arith.constant 0.0 : f32
  %n = arith.constant 300.0 : f32
  %c4 = arith.constant 4 : index
  scf.forall (%i) in (1000) {
    %xr = memref.subview %x[%i, 0] [1, 300] [1, 1] : memref<1000x300xf32> to memref<1x300xf32, strided<[300, 1], offset: ?>>
    %yr = memref.subview %y[%i, 0] [1, 300] [1, 1] : memref<1000x300xf32> to memref<1x300xf32, strided<[300, 1], offset: ?>>
    %off = arith.muli %i, %c4 : index
    %s = memref.view %ws[%off][] : memref<4000xi8> to memref<1xf32>
    linalg.fill ins(%zero : f32) outs(%s : memref<1xf32>)
    linalg.generic {indexing_maps = [#row3, #red], iterator_types = ["parallel", "reduction"]} ins(%xr : memref<1x300xf32, strided<[300, 1], offset: ?>>) outs(%s : memref<1xf32>) {
    ^bb0(%in: f32, %out: f32):
      %a = arith.addf %out, %in fastmath<reassoc> : f32
      linalg.yield %a : f32
    }
    linalg.generic {indexing_maps = [#row3, #red, #row3], iterator_types = ["parallel", "parallel"]} ins(%xr, %s : memref<1x300xf32, strided<[300, 1], offset: ?>>, memref<1xf32>) outs(%yr : memref<1x300xf32, strided<[300, 1], offset: ?>>) {
    ^bb0(%in: f32, %sum: f32, %out: f32):
      %m = arith.divf %sum, %n : f32
      %d = arith.subf %in, %m : f32
      linalg.yield %d : f32
    }
  }
  return
}
func.func @train_step(%x: memref<1000x300xf32>, %y: memref<1000x300xf32>, %ws: memref<4000xi8>) {
  call @train_step.fused_0(%x, %y, %ws) : (memref<1000x300xf32>, memref<1000x300xf32>, memref<4000xi8>) -> ()
  return
}
