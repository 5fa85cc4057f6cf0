// RUN: weft-opt %s --weft-gpu-map-step --canonicalize | FileCheck %s

// A scatter-add (the embedding gradient: each token's gradient row added
// into the row of its id, tokens in order) runs a thread per column, each
// walking the tokens in order: every element sees the same additions in
// the same order as on the CPU.

module {
  func.func private @train_step.kernel_0(%ids: memref<512xi64>, %wgrad: memref<64x256xf32>, %g: memref<512x256xf32>) attributes {llvm.bareptr, no_inline} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c512 = arith.constant 512 : index
    scf.for %t = %c0 to %c512 step %c1 {
      %id = memref.load %ids[%t] : memref<512xi64>
      %row = arith.index_cast %id : i64 to index
      %dst = memref.subview %wgrad[%row, 0] [1, 256] [1, 1] : memref<64x256xf32> to memref<1x256xf32, strided<[256, 1], offset: ?>>
      %src = memref.subview %g[%t, 0] [1, 256] [1, 1] : memref<512x256xf32> to memref<1x256xf32, strided<[256, 1], offset: ?>>
      linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%src : memref<1x256xf32, strided<[256, 1], offset: ?>>) outs(%dst : memref<1x256xf32, strided<[256, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %s = arith.addf %out, %in : f32
        linalg.yield %s : f32
      }
    }
    return
  }
  // The same loop adding each row into the next column of the output:
  // threads would race, so it stays on one thread.
  func.func private @train_step.kernel_1(%ids: memref<512xi64>, %wgrad: memref<64x257xf32>, %g: memref<512x256xf32>) attributes {llvm.bareptr, no_inline} {
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %c512 = arith.constant 512 : index
    scf.for %t = %c0 to %c512 step %c1 {
      %id = memref.load %ids[%t] : memref<512xi64>
      %row = arith.index_cast %id : i64 to index
      %dst = memref.subview %wgrad[%row, 1] [1, 256] [1, 1] : memref<64x257xf32> to memref<1x256xf32, strided<[257, 1], offset: ?>>
      %src = memref.subview %g[%t, 0] [1, 256] [1, 1] : memref<512x256xf32> to memref<1x256xf32, strided<[256, 1], offset: ?>>
      linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]} ins(%src : memref<1x256xf32, strided<[256, 1], offset: ?>>) outs(%dst : memref<1x256xf32, strided<[257, 1], offset: ?>>) {
      ^bb0(%in: f32, %out: f32):
        %s = arith.addf %out, %in : f32
        linalg.yield %s : f32
      }
    }
    return
  }
  func.func @train_step(%ids: memref<512xi64>, %w: memref<64x256xf32>, %w2: memref<64x257xf32>, %g: memref<512x256xf32>) attributes {llvm.bareptr} {
    call @train_step.kernel_0(%ids, %w, %g) : (memref<512xi64>, memref<64x256xf32>, memref<512x256xf32>) -> ()
    call @train_step.kernel_1(%ids, %w2, %g) : (memref<512xi64>, memref<64x257xf32>, memref<512x256xf32>) -> ()
    return
  }
}

// CHECK-LABEL: func.func private @train_step.kernel_0(
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads(%[[J:[^,]*]], {{.*}}) in ({{.*}} = %c256,
// CHECK:           scf.if
// CHECK:             scf.for %[[T:.*]] = %c0 to %c512 step %c1 {
// CHECK:               memref.load %{{.*}}[%[[T]]] : memref<512xi64>
// CHECK:               %[[SRC:.*]] = memref.subview %{{.*}}[%[[T]], 0] [1, 256]
// CHECK:               %[[A:.*]] = memref.load %[[SRC]][%c0, %[[J]]]
// CHECK:               arith.addf
// CHECK:               memref.store %{{.*}}[%c0, %[[J]]]
// CHECK-NOT:           scf.parallel

// CHECK-LABEL: func.func private @train_step.kernel_1(
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %c1, {{.*}}) threads({{.*}}) in ({{.*}} = %c1,
// CHECK:           scf.for
// CHECK:             scf.parallel
