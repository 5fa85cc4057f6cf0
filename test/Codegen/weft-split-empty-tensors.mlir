// RUN: weft-opt %s --split-input-file --weft-split-empty-tensors | FileCheck %s

// Two kernels of one shape that CSE left on one empty tensor, defined at
// the top: each gets a clone just before it and the original goes, so
// bufferization allocates two buffers, each where its value is made.
// CHECK-LABEL: func.func @two_kernels
// CHECK-SAME: (%[[X:.*]]: tensor<8x16xf32>, %[[Y:.*]]: tensor<8x16xf32>)
// CHECK-NEXT: %[[E0:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-NEXT: %[[A:.*]] = linalg.generic {{.*}} ins(%[[X]] : tensor<8x16xf32>) outs(%[[E0]] : tensor<8x16xf32>)
// CHECK: %[[E1:.*]] = tensor.empty() : tensor<8x16xf32>
// CHECK-NEXT: %[[B:.*]] = linalg.generic {{.*}} ins(%[[A]], %[[Y]] : tensor<8x16xf32>, tensor<8x16xf32>) outs(%[[E1]] : tensor<8x16xf32>)
// CHECK-NOT: tensor.empty
// CHECK: return %[[B]]
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @two_kernels(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %e = tensor.empty() : tensor<8x16xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%in: f32, %out: f32):
    %n = arith.negf %in : f32
    linalg.yield %n : f32
  } -> tensor<8x16xf32>
  %b = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%a, %y : tensor<8x16xf32>, tensor<8x16xf32>) outs(%e : tensor<8x16xf32>) {
  ^bb0(%in: f32, %in2: f32, %out: f32):
    %s = arith.addf %in, %in2 : f32
    linalg.yield %s : f32
  } -> tensor<8x16xf32>
  return %b : tensor<8x16xf32>
}

// -----

// A use inside a parallel kernel's body: the clone goes before the loop,
// not into its body (a buffer there is one per iteration), and an empty
// tensor with one use stays as it is.
// CHECK-LABEL: func.func @forall_kernel
// CHECK-NEXT: %[[S:.*]] = tensor.empty() : tensor<2xf32>
// CHECK-NEXT: %[[E0:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: %[[F:.*]] = linalg.fill ins(%{{.*}} : f32) outs(%[[E0]] : tensor<4x8xf32>)
// CHECK-NEXT: %[[E1:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: %[[E2:.*]] = tensor.empty() : tensor<4x8xf32>
// CHECK-NEXT: scf.forall (%{{.*}}) in (4) shared_outs(%[[O:.*]] = %[[E1]])
// CHECK: tensor.extract_slice %[[E2]]
// CHECK: } {single}
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[S]] : tensor<2xf32>)
func.func @forall_kernel(%x: tensor<4x8xf32>, %c: f32) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<2xf32>) {
  %e = tensor.empty() : tensor<4x8xf32>
  %single = tensor.empty() : tensor<2xf32>
  %f = linalg.fill ins(%c : f32) outs(%e : tensor<4x8xf32>) -> tensor<4x8xf32>
  %r = scf.forall (%i) in (4) shared_outs(%o = %e) -> (tensor<4x8xf32>) {
    %row = tensor.extract_slice %x[%i, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<1x8xf32>
    %dst = tensor.extract_slice %e[%i, 0] [1, 8] [1, 1] : tensor<4x8xf32> to tensor<1x8xf32>
    %n = linalg.copy ins(%row : tensor<1x8xf32>) outs(%dst : tensor<1x8xf32>) -> tensor<1x8xf32>
    scf.forall.in_parallel {
      tensor.parallel_insert_slice %n into %o[%i, 0] [1, 8] [1, 1] : tensor<1x8xf32> into tensor<4x8xf32>
    }
  } {single}
  %s = linalg.fill ins(%c : f32) outs(%single : tensor<2xf32>) -> tensor<2xf32>
  return %f, %r, %s : tensor<4x8xf32>, tensor<4x8xf32>, tensor<2xf32>
}
