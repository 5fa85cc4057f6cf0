// RUN: weft-opt %s --weft-fold-gemm-rounding --split-input-file | FileCheck %s

// --precision bf16's product: f32 sums into a zero-filled f32 tensor, then
// one rounding. The rounding is the product's only use, so the product
// takes a zero-filled bf16 init (weft_rt_sbgemm_bf16: f32 sums, C rounded
// once); the transposes (indexing maps) stay.

// CHECK-LABEL: func.func @scores
// CHECK-SAME: (%[[Q:.*]]: tensor<4x8x16xbf16>, %[[K:.*]]: tensor<4x8x16xbf16>)
// CHECK-DAG: %[[Z:.*]] = arith.constant 0.000000e+00 : bf16
// CHECK-DAG: %[[E:.*]] = tensor.empty() : tensor<4x8x8xbf16>
// CHECK: %[[F:.*]] = linalg.fill ins(%[[Z]] : bf16) outs(%[[E]] : tensor<4x8x8xbf16>)
// CHECK: %[[S:.*]] = linalg.batch_matmul indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}] ins(%[[Q]], %[[K]] : tensor<4x8x16xbf16>, tensor<4x8x16xbf16>) outs(%[[F]] : tensor<4x8x8xbf16>)
// CHECK-NOT: arith.truncf
// CHECK: return %[[S]]
func.func @scores(%q: tensor<4x8x16xbf16>, %k: tensor<4x8x16xbf16>) -> tensor<4x8x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %s = linalg.batch_matmul indexing_maps = [affine_map<(b, m, n, k) -> (b, m, k)>,
                                            affine_map<(b, m, n, k) -> (b, n, k)>,
                                            affine_map<(b, m, n, k) -> (b, m, n)>]
       ins(%q, %k : tensor<4x8x16xbf16>, tensor<4x8x16xbf16>) outs(%f : tensor<4x8x8xf32>) -> tensor<4x8x8xf32>
  %e2 = tensor.empty() : tensor<4x8x8xbf16>
  %r = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1, d2)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]} ins(%s : tensor<4x8x8xf32>) outs(%e2 : tensor<4x8x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<4x8x8xbf16>
  return %r : tensor<4x8x8xbf16>
}

// -----

// Left alone: the f32 product is also returned (it must exist), and a
// rounding that does more than round (it scales first).

// CHECK-LABEL: func.func @kept
// CHECK: linalg.matmul ins({{.*}}) outs({{.*}} : tensor<8x8xf32>)
// CHECK: arith.truncf
// CHECK-LABEL: func.func @scaled
// CHECK: linalg.matmul ins({{.*}}) outs({{.*}} : tensor<8x8xf32>)
// CHECK: arith.mulf
// CHECK: arith.truncf
#id = affine_map<(d0, d1) -> (d0, d1)>
func.func @kept(%a: tensor<8x4xbf16>, %b: tensor<4x8xbf16>) -> (tensor<8x8xbf16>, tensor<8x8xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = linalg.matmul ins(%a, %b : tensor<8x4xbf16>, tensor<4x8xbf16>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %e2 = tensor.empty() : tensor<8x8xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<8x8xf32>) outs(%e2 : tensor<8x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<8x8xbf16>
  return %r, %p : tensor<8x8xbf16>, tensor<8x8xf32>
}
func.func @scaled(%a: tensor<8x4xbf16>, %b: tensor<4x8xbf16>) -> tensor<8x8xbf16> {
  %zero = arith.constant 0.0 : f32
  %two = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<8x8xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<8x8xf32>) -> tensor<8x8xf32>
  %p = linalg.matmul ins(%a, %b : tensor<8x4xbf16>, tensor<4x8xbf16>) outs(%f : tensor<8x8xf32>) -> tensor<8x8xf32>
  %e2 = tensor.empty() : tensor<8x8xbf16>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]} ins(%p : tensor<8x8xf32>) outs(%e2 : tensor<8x8xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %m = arith.mulf %in, %two : f32
    %t = arith.truncf %m : f32 to bf16
    linalg.yield %t : bf16
  } -> tensor<8x8xbf16>
  return %r : tensor<8x8xbf16>
}
