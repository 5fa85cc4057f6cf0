// RUN: weft-opt %s --weft-lower-to-linalg | FileCheck %s

// The indexing maps print first: transposed matmul operands, a broadcast
// batch_matmul operand, numpy broadcasting (stretched size-1 axes read
// index 0, missing leading axes are dropped).
// CHECK-DAG: #[[$LHST:.*]] = affine_map<(d0, d1, d2) -> (d2, d0)>
// CHECK-DAG: #[[$RHST:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$BCAST:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d3)>
// CHECK-DAG: #[[$A:.*]] = affine_map<(d0, d1, d2) -> (d0, 0, d2)>
// CHECK-DAG: #[[$B:.*]] = affine_map<(d0, d1, d2) -> (d1, 0)>

// Transposes are indexing maps of linalg.matmul, on a zero-filled init.
// CHECK-LABEL: func.func @matmul_transposes
// CHECK: %[[ZERO:.*]] = arith.constant 0.0
// CHECK: %[[INIT:.*]] = linalg.fill ins(%[[ZERO]] : f32)
// CHECK: linalg.matmul indexing_maps = [#[[$LHST]], #[[$RHST]], #{{.*}}] ins(%arg0, %arg1 : tensor<7x5xf32>, tensor<3x7xf32>) outs(%[[INIT]] : tensor<5x3xf32>)
func.func @matmul_transposes(%a: tensor<7x5xf32>, %b: tensor<3x7xf32>) -> tensor<5x3xf32> {
  %0 = weft.matmul %a, %b {transpose_lhs = true, transpose_rhs = true} : (tensor<7x5xf32>, tensor<3x7xf32>) -> tensor<5x3xf32>
  return %0 : tensor<5x3xf32>
}

// A batched lhs times a weight is one GEMM over the collapsed batch; bf16
// accumulates in f32 and is truncated once.
// CHECK-LABEL: func.func @matmul_folded
// CHECK: %[[X:.*]] = tensor.collapse_shape %arg0 {{\[\[}}0, 1], [2]] : tensor<2x4x32xbf16> into tensor<8x32xbf16>
// CHECK: %[[MM:.*]] = linalg.matmul {{.*}} ins(%[[X]], %arg1 : tensor<8x32xbf16>, tensor<10x32xbf16>) outs(%{{.*}} : tensor<8x10xf32>)
// CHECK: %[[T:.*]] = linalg.generic {{.*}} ins(%[[MM]] : tensor<8x10xf32>) outs(%{{.*}} : tensor<8x10xbf16>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK: tensor.expand_shape %[[T]] {{\[\[}}0, 1], [2]] output_shape [2, 4, 10]
func.func @matmul_folded(%x: tensor<2x4x32xbf16>, %w: tensor<10x32xbf16>) -> tensor<2x4x10xbf16> {
  %0 = weft.matmul %x, %w {transpose_rhs = true} : (tensor<2x4x32xbf16>, tensor<10x32xbf16>) -> tensor<2x4x10xbf16>
  return %0 : tensor<2x4x10xbf16>
}

// A 2-D operand of a batched product is read through a broadcast map.
// CHECK-LABEL: func.func @matmul_batch_broadcast
// CHECK: linalg.batch_matmul indexing_maps = [#[[$BCAST]], {{.*}}] ins(%arg0, %arg1 : tensor<4x6xf32>, tensor<2x6x5xf32>)
func.func @matmul_batch_broadcast(%m: tensor<4x6xf32>, %b: tensor<2x6x5xf32>) -> tensor<2x4x5xf32> {
  %0 = weft.matmul %m, %b : (tensor<4x6xf32>, tensor<2x6x5xf32>) -> tensor<2x4x5xf32>
  return %0 : tensor<2x4x5xf32>
}

// Numpy broadcasting.
// CHECK-LABEL: func.func @add_broadcast
// CHECK: linalg.generic {indexing_maps = [#[[$A]], #[[$B]], #{{.*}}], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK: arith.addf
func.func @add_broadcast(%a: tensor<4x1x5xf32>, %b: tensor<3x1xf32>) -> tensor<4x3x5xf32> {
  %0 = weft.add %a, %b : (tensor<4x1x5xf32>, tensor<3x1xf32>) -> tensor<4x3x5xf32>
  return %0 : tensor<4x3x5xf32>
}

// Softmax: max reduction, sum of exp(x - max), then exp(x - max) / sum.
// CHECK-LABEL: func.func @softmax
// CHECK: %[[NEGINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MAXINIT:.*]] = linalg.fill ins(%[[NEGINF]] : f32)
// CHECK: %[[MAX:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0 : tensor<4x10xf32>) outs(%[[MAXINIT]] : tensor<4xf32>)
// CHECK: arith.maximumf
// CHECK: %[[SUM:.*]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%arg0, %[[MAX]] : tensor<4x10xf32>, tensor<4xf32>)
// CHECK: math.exp
// CHECK: linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%arg0, %[[MAX]], %[[SUM]] :
// CHECK: arith.divf
func.func @softmax(%x: tensor<4x10xf32>) -> tensor<4x10xf32> {
  %0 = weft.softmax %x {axis = 1 : i64} : tensor<4x10xf32>
  return %0 : tensor<4x10xf32>
}

// CHECK-LABEL: func.func @conv2d
// CHECK: %[[PAD:.*]] = tensor.pad %arg0 low[0, 0, 1, 0] high[0, 0, 0, 1]
// CHECK: %[[COLS:.*]] = linalg.generic {{.*}} ins(%[[PAD]] : tensor<2x3x8x9xf32>) outs(%{{.*}} : tensor<2x3x3x2x3x4xf32>)
// CHECK: %[[GEMM:.*]] = linalg.batch_matmul
// CHECK: %[[CONV:.*]] = tensor.expand_shape %[[GEMM]] {{.*}} into tensor<2x4x3x4xf32>
// CHECK: linalg.generic {{.*}} ins(%[[CONV]], %arg2 : tensor<2x4x3x4xf32>, tensor<4xf32>)
func.func @conv2d(%x: tensor<2x3x7x8xf32>, %w: tensor<4x3x3x2xf32>, %b: tensor<4xf32>) -> tensor<2x4x3x4xf32> {
  %0 = weft.conv2d %x, %w, %b {strides = array<i64: 2, 2>, padding = array<i64: 1, 0, 0, 1>, dilations = array<i64: 1, 1>} : (tensor<2x3x7x8xf32>, tensor<4x3x3x2xf32>, tensor<4xf32>) -> tensor<2x4x3x4xf32>
  return %0 : tensor<2x4x3x4xf32>
}

// CHECK-LABEL: func.func @conv2d_groups
// CHECK: %[[X:.*]] = tensor.expand_shape %arg0 {{.*}} into tensor<2x2x2x6x6xf32>
// CHECK: %[[W:.*]] = tensor.expand_shape %arg1 {{.*}} into tensor<2x3x2x3x3xf32>
// CHECK: %[[C:.*]] = linalg.conv_2d_ngchw_gfchw {{.*}} ins(%[[X]], %[[W]] :
// CHECK: tensor.collapse_shape %[[C]] {{.*}} into tensor<2x6x4x4xf32>
func.func @conv2d_groups(%x: tensor<2x4x6x6xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<2x6x4x4xf32> {
  %0 = weft.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x4x6x6xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x4x4xf32>
  return %0 : tensor<2x6x4x4xf32>
}

// Gather: a generic over the result; the row (negative indices wrapped,
// then clamped) is read with tensor.extract.
// CHECK-LABEL: func.func @gather
// CHECK: linalg.generic {{.*}} ins(%arg1 : tensor<2x3xi64>) outs(%{{.*}} : tensor<2x3x4xf32>)
// CHECK: ^bb0(%[[IN:.*]]: i64, %{{.*}}: f32):
// CHECK: %[[I:.*]] = arith.index_cast %[[IN]] : i64 to index
// CHECK: %[[ROW:.*]] = arith.minsi
// CHECK: %[[COL:.*]] = linalg.index 2 : index
// CHECK: %[[V:.*]] = tensor.extract %arg0[%[[ROW]], %[[COL]]] : tensor<7x4xf32>
// CHECK: linalg.yield %[[V]] : f32
func.func @gather(%t: tensor<7x4xf32>, %i: tensor<2x3xi64>) -> tensor<2x3x4xf32> {
  %0 = weft.gather %t, %i {axis = 0 : i64} : (tensor<7x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  return %0 : tensor<2x3x4xf32>
}

// scatter_add: an scf.for over the indices adding one slice per index.
// CHECK-LABEL: func.func @scatter_add
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<1x5x4xf32>)
// CHECK: tensor.extract %{{.*}}[%[[J]]] : tensor<6xi64>
// CHECK: %[[CUR:.*]] = tensor.extract_slice %[[ACC]][0, %[[ROW:.*]], 0] [1, 1, 4] [1, 1, 1]
// CHECK: %[[ADD:.*]] = linalg.generic {{.*}} outs(%[[CUR]] : tensor<1x1x4xf32>)
// CHECK: %[[NEXT:.*]] = tensor.insert_slice %[[ADD]] into %[[ACC]][0, %[[ROW]], 0] [1, 1, 4] [1, 1, 1]
// CHECK: scf.yield %[[NEXT]]
func.func @scatter_add(%t: tensor<5x4xf32>, %i: tensor<2x3xi64>, %u: tensor<2x3x4xf32>) -> tensor<5x4xf32> {
  %0 = weft.scatter_add %t, %i, %u {axis = 0 : i64} : (tensor<5x4xf32>, tensor<2x3xi64>, tensor<2x3x4xf32>) -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}
