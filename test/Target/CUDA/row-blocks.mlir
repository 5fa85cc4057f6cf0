// RUN: weft-opt %s --weft-gpu-map-step=vector-lanes=false --canonicalize | FileCheck %s
// RUN: weft-opt %s --weft-gpu-map-step="row-blocks=false vector-lanes=false" --canonicalize | FileCheck %s --check-prefix=THREADS

// A row kernel with a reduction (a row's mean subtracted from it, as in
// layer norm) runs a block per row; the threads share each op of the row.

#row3 = affine_map<(d0, d1) -> (d0, d1)>
#red = affine_map<(d0, d1) -> (d0)>
#bcast = affine_map<(d0, d1) -> (d0)>
module {
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
      linalg.generic {indexing_maps = [#row3, #bcast, #row3], iterator_types = ["parallel", "parallel"]} ins(%xr, %s : memref<1x300xf32, strided<[300, 1], offset: ?>>, memref<1xf32>) outs(%yr : memref<1x300xf32, strided<[300, 1], offset: ?>>) {
      ^bb0(%in: f32, %sum: f32, %out: f32):
        %m = arith.divf %sum, %n : f32
        %d = arith.subf %in, %m : f32
        linalg.yield %d : f32
      }
    }
    return
  }
  // Few rows, each reducing into several elements (a batch's sequences'
  // log-sum-exp, as cross-entropy has): still a block per row, a thread
  // per reduced element.
  func.func private @train_step.fused_1(%l: memref<4x8x64xf32>, %m: memref<4x8xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    %ninf = arith.constant 0xFF800000 : f32
    scf.forall (%b) in (4) {
      %lr = memref.subview %l[%b, 0, 0] [1, 8, 64] [1, 1, 1] : memref<4x8x64xf32> to memref<1x8x64xf32, strided<[512, 64, 1], offset: ?>>
      %mr = memref.subview %m[%b, 0] [1, 8] [1, 1] : memref<4x8xf32> to memref<1x8xf32, strided<[8, 1], offset: ?>>
      linalg.fill ins(%ninf : f32) outs(%mr : memref<1x8xf32, strided<[8, 1], offset: ?>>)
      linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]} ins(%lr : memref<1x8x64xf32, strided<[512, 64, 1], offset: ?>>) outs(%mr : memref<1x8xf32, strided<[8, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %a = arith.maximumf %out, %in : f32
        linalg.yield %a : f32
      }
    }
    return
  }
  // Two outputs reduced together, each into one element per row
  // (cross-entropy's sum of exponentials and picked logit): one block
  // reduction carrying both, a shared buffer and a tree each.
  func.func private @train_step.fused_2(%l: memref<16x64xf32>, %ids: memref<16xi64>, %s: memref<16xf32>, %p: memref<16xf32>) attributes {llvm.bareptr, no_inline, weft.kernel} {
    %zero = arith.constant 0.0 : f32
    scf.forall (%r) in (16) {
      %lr = memref.subview %l[%r, 0] [1, 64] [1, 1] : memref<16x64xf32> to memref<1x64xf32, strided<[64, 1], offset: ?>>
      %ir = memref.subview %ids[%r] [1] [1] : memref<16xi64> to memref<1xi64, strided<[1], offset: ?>>
      %sr = memref.subview %s[%r] [1] [1] : memref<16xf32> to memref<1xf32, strided<[1], offset: ?>>
      %pr = memref.subview %p[%r] [1] [1] : memref<16xf32> to memref<1xf32, strided<[1], offset: ?>>
      linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]} ins(%lr, %ir : memref<1x64xf32, strided<[64, 1], offset: ?>>, memref<1xi64, strided<[1], offset: ?>>) outs(%sr, %pr : memref<1xf32, strided<[1], offset: ?>>, memref<1xf32, strided<[1], offset: ?>>) {
      ^bb0(%in: f32, %id: i64, %acc: f32, %pick: f32):
        %e = math.exp %in : f32
        %j = linalg.index 1 : index
        %jj = arith.index_cast %j : index to i64
        %hit = arith.cmpi eq, %jj, %id : i64
        %v = arith.select %hit, %in, %zero : f32
        %a = arith.addf %acc, %e fastmath<reassoc> : f32
        %b = arith.addf %pick, %v fastmath<reassoc> : f32
        linalg.yield %a, %b : f32, f32
      }
    }
    return
  }
  func.func @train_step(%x: memref<1000x300xf32>, %y: memref<1000x300xf32>, %ws: memref<4000xi8> {weft.workspace}, %l: memref<4x8x64xf32>, %m: memref<4x8xf32>, %l2: memref<16x64xf32>, %ids: memref<16xi64>, %s: memref<16xf32>, %p: memref<16xf32>) attributes {llvm.bareptr} {
    call @train_step.fused_0(%x, %y, %ws) : (memref<1000x300xf32>, memref<1000x300xf32>, memref<4000xi8>) -> ()
    call @train_step.fused_1(%l, %m) : (memref<4x8x64xf32>, memref<4x8xf32>) -> ()
    call @train_step.fused_2(%l2, %ids, %s, %p) : (memref<16x64xf32>, memref<16xi64>, memref<16xf32>, memref<16xf32>) -> ()
    return
  }
}

// 1000 blocks, one per row, of 256 threads (the row's 300 elements round
// up to 512, capped by row-block-size), with a shared f32 buffer.
// CHECK-LABEL: func.func private @train_step.fused_0(
// CHECK-DAG:     %[[C300:.*]] = arith.constant 300 : index
// CHECK-DAG:     %[[C256:.*]] = arith.constant 256 : index
// CHECK-DAG:     %[[C1000:.*]] = arith.constant 1000 : index
// CHECK:         gpu.launch blocks(%[[BX:[^,]*]], {{.*}}) in ({{.*}} = %[[C1000]], {{.*}}) threads(%[[TX:[^,]*]], {{.*}}) in ({{.*}} = %[[C256]],
// CHECK-SAME:      workgroup(%[[SH:.*]] : memref<256xf32, #gpu.address_space<workgroup>>)
// The row is the block's.
// CHECK:           memref.subview %{{.*}}[%[[BX]], 0] [1, 300]
// The fill: one element, on thread 0's iteration of a strided loop.
// CHECK:           scf.for %{{.*}} = %[[TX]] to %c1 step %[[C256]] {
// CHECK:           gpu.barrier
// The row sum: strided partials, then the tree.
// CHECK:           scf.for %{{.*}} = %[[TX]] to %[[C300]] step %[[C256]] iter_args(
// CHECK:           memref.store %{{.*}}, %[[SH]][%[[TX]]]
// CHECK-NEXT:      gpu.barrier
// CHECK-COUNT-8:   gpu.barrier
// CHECK:           arith.cmpi eq, %[[TX]], %c0
// CHECK:           gpu.barrier
// The subtraction: thread t writes elements t and t + 256 of the row.
// CHECK:           scf.for %[[J:.*]] = %[[TX]] to %[[C300]] step %[[C256]] {
// CHECK:             arith.divf
// CHECK:             arith.subf
// CHECK:             memref.store
// CHECK:           gpu.barrier
// CHECK-NEXT:      gpu.terminator

// 4 blocks of 512 threads (the row's 512 elements: with fewer rows than
// a GPU's multiprocessors, blocks may grow to 1024), no shared buffer: the
// fill, then each of the 8 maxima on a thread of its own over the 64
// elements.
// CHECK-LABEL: func.func private @train_step.fused_1(
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c4, {{.*}}) threads(%[[TX1:[^,]*]], {{.*}}) in ({{.*}} = %c512,
// CHECK-NOT:       workgroup
// CHECK:           scf.for %{{.*}} = %[[TX1]] to %c8 step %c512 {
// CHECK:           gpu.barrier
// CHECK:           scf.for %{{.*}} = %[[TX1]] to %c8 step %c512 {
// CHECK:             scf.for %{{.*}} = %c0 to %c64 step %c1 {
// CHECK:               arith.maximumf
// CHECK:           gpu.barrier
// CHECK-NEXT:      gpu.terminator

// 16 blocks of 64 threads; both sums in one strided loop, then a tree in
// each buffer, and thread 0 adds both totals to their outputs.
// CHECK-LABEL: func.func private @train_step.fused_2(
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c16, {{.*}}) threads(%[[TX2:[^,]*]], {{.*}}) in ({{.*}} = %c64,
// CHECK-SAME:      workgroup(%[[S0:.*]] : memref<64xf32, #gpu.address_space<workgroup>>, %[[S1:.*]] : memref<64xf32, #gpu.address_space<workgroup>>)
// CHECK:           %[[R:.*]]:2 = scf.for %{{.*}} = %[[TX2]] to %c64 step %c64 iter_args(
// CHECK:             math.exp
// CHECK:             arith.select
// CHECK:           memref.store %[[R]]#0, %[[S0]][%[[TX2]]]
// CHECK-NEXT:      memref.store %[[R]]#1, %[[S1]][%[[TX2]]]
// CHECK-NEXT:      gpu.barrier
// CHECK-COUNT-12:  gpu.barrier
// CHECK:           arith.cmpi eq, %[[TX2]], %c0
// CHECK:             memref.load %[[S0]][%c0]
// CHECK:             memref.load %[[S1]][%c0]
// CHECK:           gpu.barrier
// CHECK-NEXT:      gpu.terminator

// Without row blocks: a thread per row, 4 blocks of 256.
// THREADS-LABEL: func.func private @train_step.fused_0(
// THREADS:         gpu.launch blocks({{.*}}) in ({{.*}} = %c4, {{.*}}) threads({{.*}}) in ({{.*}} = %c256,
// THREADS-NOT:       gpu.barrier
// THREADS:         gpu.terminator
