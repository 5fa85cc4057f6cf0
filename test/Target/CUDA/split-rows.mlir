// RUN: weft-opt %s --weft-gpu-split-rows --split-input-file | FileCheck %s

// Cross-entropy's shape: the root is a [2, 4] result of reductions over 64
// (fused tiles only the 2), so each of the 2 rows reduces a 4 x 64 matrix.
// The 4 becomes a loop of the forall; every op works on its slice at that
// index, a broadcast input stays whole, the arithmetic is unchanged.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red = affine_map<(d0, d1, d2) -> (d0, d1)>
#last = affine_map<(d0, d1, d2) -> (d2)>
// CHECK-LABEL: func.func private @ce
// CHECK: scf.forall (%[[B:.*]], %[[T:.*]]) in (2, 4)
// CHECK: %[[X:.*]] = memref.subview %{{.*}}[%[[B]], 0, 0] [1, 4, 64]
// CHECK: %[[S:.*]] = memref.view
// CHECK: %[[SR:.*]] = memref.subview %[[S]][0, %[[T]]] [1, 1] [1, 1]
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[SR]] :
// CHECK: %[[XR:.*]] = memref.subview %[[X]][0, %[[T]], 0] [1, 1, 64] [1, 1, 1]
// CHECK: %[[SR2:.*]] = memref.subview %[[S]][0, %[[T]]] [1, 1] [1, 1]
// CHECK: linalg.generic {{.*}}["parallel", "parallel", "reduction"]{{.*}} ins(%[[XR]] : {{.*}} outs(%[[SR2]] :
// CHECK: arith.addf
// CHECK: linalg.generic {{.*}}["parallel", "parallel", "parallel"]{{.*}} ins(%{{.*}}, %{{.*}}, %[[W:.*]] : memref<1x1x64xf32, {{.*}}>, memref<1x1xf32, {{.*}}>, memref<64xf32>)
// CHECK: arith.subf
// CHECK-NOT: scf.forall
module {
  func.func private @ce(%x: memref<2x4x64xf32>, %w: memref<64xf32>, %y: memref<2x4x64xf32>, %ws: memref<64xi8>) attributes {weft.kernel} {
    %zero = arith.constant 0.0 : f32
    %c16 = arith.constant 16 : index
    scf.forall (%b) in (2) {
      %xb = memref.subview %x[%b, 0, 0] [1, 4, 64] [1, 1, 1] : memref<2x4x64xf32> to memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>
      %yb = memref.subview %y[%b, 0, 0] [1, 4, 64] [1, 1, 1] : memref<2x4x64xf32> to memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>
      %off = arith.muli %b, %c16 : index
      %s = memref.view %ws[%off][] : memref<64xi8> to memref<1x4xf32>
      linalg.fill ins(%zero : f32) outs(%s : memref<1x4xf32>)
      linalg.generic {indexing_maps = [#id3, #red], iterator_types = ["parallel", "parallel", "reduction"]} ins(%xb : memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>) outs(%s : memref<1x4xf32>) {
      ^bb0(%in: f32, %out: f32):
        %a = arith.addf %out, %in fastmath<reassoc> : f32
        linalg.yield %a : f32
      }
      linalg.generic {indexing_maps = [#id3, #red, #last, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%xb, %s, %w : memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>, memref<1x4xf32>, memref<64xf32>) outs(%yb : memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>) {
      ^bb0(%in: f32, %sum: f32, %wi: f32, %out: f32):
        %d = arith.subf %in, %sum : f32
        %m = arith.mulf %d, %wi : f32
        linalg.yield %m : f32
      }
    }
    return
  }
}

// -----

// A buffer the body writes is read transposed: row t would read what the
// other rows wrote. Left alone.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#tr = affine_map<(d0, d1, d2) -> (d0, d2, d1)>
// CHECK-LABEL: func.func private @transposed
// CHECK: scf.forall (%{{.*}}) in (2)
// CHECK-NOT: scf.forall
module {
  func.func private @transposed(%x: memref<2x4x4xf32>, %t: memref<2x4x4xf32>, %y: memref<2x4x4xf32>) attributes {weft.kernel} {
    scf.forall (%b) in (2) {
      %xb = memref.subview %x[%b, 0, 0] [1, 4, 4] [1, 1, 1] : memref<2x4x4xf32> to memref<1x4x4xf32, strided<[16, 4, 1], offset: ?>>
      %tb = memref.subview %t[%b, 0, 0] [1, 4, 4] [1, 1, 1] : memref<2x4x4xf32> to memref<1x4x4xf32, strided<[16, 4, 1], offset: ?>>
      %yb = memref.subview %y[%b, 0, 0] [1, 4, 4] [1, 1, 1] : memref<2x4x4xf32> to memref<1x4x4xf32, strided<[16, 4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%xb : memref<1x4x4xf32, strided<[16, 4, 1], offset: ?>>) outs(%tb : memref<1x4x4xf32, strided<[16, 4, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %e = math.exp %in : f32
        linalg.yield %e : f32
      }
      linalg.generic {indexing_maps = [#tr, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%tb : memref<1x4x4xf32, strided<[16, 4, 1], offset: ?>>) outs(%yb : memref<1x4x4xf32, strided<[16, 4, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        linalg.yield %in : f32
      }
    }
    return
  }
}

// -----

// An op reads the index of the axis (it would read 0 after the split), and
// a single elementwise op (a thread per element suits it better): both
// left alone; so is a forall with rows enough already.

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>
#red = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-LABEL: func.func private @index
// CHECK: scf.forall (%{{.*}}) in (2)
// CHECK-LABEL: func.func private @single
// CHECK: scf.forall (%{{.*}}) in (2)
// CHECK-LABEL: func.func private @many
// CHECK: scf.forall (%{{.*}}) in (5000)
// CHECK-NOT: scf.forall
module {
  func.func private @index(%x: memref<2x4x64xf32>, %s: memref<2x4xf32>) attributes {weft.kernel} {
    scf.forall (%b) in (2) {
      %xb = memref.subview %x[%b, 0, 0] [1, 4, 64] [1, 1, 1] : memref<2x4x64xf32> to memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>
      %sb = memref.subview %s[%b, 0] [1, 4] [1, 1] : memref<2x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#id3, #red], iterator_types = ["parallel", "parallel", "reduction"]} ins(%xb : memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>) outs(%sb : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %i = linalg.index 1 : index
        %c = arith.index_cast %i : index to i32
        %f = arith.sitofp %c : i32 to f32
        %m = arith.mulf %in, %f : f32
        %a = arith.addf %out, %m : f32
        linalg.yield %a : f32
      }
    }
    return
  }
  func.func private @single(%x: memref<2x4x64xf32>, %y: memref<2x4x64xf32>) attributes {weft.kernel} {
    scf.forall (%b) in (2) {
      %xb = memref.subview %x[%b, 0, 0] [1, 4, 64] [1, 1, 1] : memref<2x4x64xf32> to memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>
      %yb = memref.subview %y[%b, 0, 0] [1, 4, 64] [1, 1, 1] : memref<2x4x64xf32> to memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>
      linalg.generic {indexing_maps = [#id3, #id3], iterator_types = ["parallel", "parallel", "parallel"]} ins(%xb : memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>) outs(%yb : memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %e = math.exp %in : f32
        linalg.yield %e : f32
      }
    }
    return
  }
  func.func private @many(%x: memref<5000x4x64xf32>, %s: memref<5000x4xf32>) attributes {weft.kernel} {
    scf.forall (%b) in (5000) {
      %xb = memref.subview %x[%b, 0, 0] [1, 4, 64] [1, 1, 1] : memref<5000x4x64xf32> to memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>
      %sb = memref.subview %s[%b, 0] [1, 4] [1, 1] : memref<5000x4xf32> to memref<1x4xf32, strided<[4, 1], offset: ?>>
      linalg.generic {indexing_maps = [#id3, #red], iterator_types = ["parallel", "parallel", "reduction"]} ins(%xb : memref<1x4x64xf32, strided<[256, 64, 1], offset: ?>>) outs(%sb : memref<1x4xf32, strided<[4, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %a = arith.addf %out, %in : f32
        linalg.yield %a : f32
      }
    }
    return
  }
}
