// Convolutions without groups lower to im2col + GEMM, in the linalg forms
// --weft-linalg-to-blas turns into runtime GEMM calls.
// RUN: weft-opt --weft-lower-to-linalg %s | FileCheck %s

// Forward: the windows of the padded input gathered as cols[n, (c, i, j),
// (y, x)], then W[O, C*kh*kw] (a 2-D map: shared by every batch) x cols[n].
// CHECK-DAG: #[[$WIN:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d0, d1, d4 * 2 + d2 * 2, d5 * 2 + d3 * 2)>
// CHECK-DAG: #[[$FILTER:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d3)>
// CHECK-DAG: #[[$GT:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d0, d2, d3)>
// CHECK-DAG: #[[$WINT:.*]] = affine_map<(d0, d1, d2, d3, d4, d5) -> (d3, d0, d4 * 2 + d1 * 2, d5 * 2 + d2 * 2)>
// CHECK-DAG: #[[$BT:.*]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK-DAG: #[[$BMK:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d1, d3)>
// CHECK-DAG: #[[$BNK:.*]] = affine_map<(d0, d1, d2, d3) -> (d0, d2, d3)>
// CHECK-DAG: #[[$MN:.*]] = affine_map<(d0, d1, d2, d3) -> (d1, d2)>
// CHECK-LABEL: func.func @forward
// CHECK: %[[PAD:.*]] = tensor.pad %arg0 low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK: %[[WINDOWS:.*]] = linalg.generic {indexing_maps = [#[[$WIN]], {{.*}}]{{.*}} ins(%[[PAD]] : tensor<2x3x11x12xf32>) outs(%{{.*}} : tensor<2x3x3x2x4x5xf32>)
// CHECK: %[[COLS:.*]] = tensor.collapse_shape %[[WINDOWS]] {{.*}} into tensor<2x18x20xf32>
// CHECK: %[[W:.*]] = tensor.collapse_shape %arg1 {{.*}} into tensor<4x18xf32>
// CHECK: %[[ZERO:.*]] = linalg.fill
// CHECK: %[[GEMM:.*]] = linalg.batch_matmul indexing_maps = [#[[$FILTER]], {{.*}}] ins(%[[W]], %[[COLS]] : tensor<4x18xf32>, tensor<2x18x20xf32>) outs(%[[ZERO]] : tensor<2x4x20xf32>)
// CHECK: tensor.expand_shape %[[GEMM]] {{.*}} into tensor<2x4x4x5xf32>
// CHECK-NOT: linalg.conv_2d
func.func @forward(%x: tensor<2x3x9x10xf32>, %w: tensor<4x3x3x2xf32>) -> tensor<2x4x4x5xf32> {
  %0 = weft.conv2d %x, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>} : (tensor<2x3x9x10xf32>, tensor<4x3x3x2xf32>) -> tensor<2x4x4x5xf32>
  return %0 : tensor<2x4x4x5xf32>
}

// Filter gradient (f32): the windows gathered exactly as the forward
// gathers them (same map, same cols[n, (c, i, j), (y, x)]), and a
// batch-reduce GEMM over n of g[n] (as stored, [O, (y, x)]) times cols[n]
// read transposed: no transposed copy of g, no second im2col layout.
// CHECK-LABEL: func.func @backward_filter
// CHECK: %[[PAD:.*]] = tensor.pad %arg1 low[0, 0, 1, 1] high[0, 0, 1, 1]
// CHECK: %[[WINDOWS:.*]] = linalg.generic {indexing_maps = [#[[$WIN]], {{.*}}]{{.*}} ins(%[[PAD]] : tensor<2x3x11x12xf32>) outs(%{{.*}} : tensor<2x3x3x2x4x5xf32>)
// CHECK: %[[COLS:.*]] = tensor.collapse_shape %[[WINDOWS]] {{.*}} into tensor<2x18x20xf32>
// CHECK: %[[G:.*]] = tensor.collapse_shape %arg0 {{.*}} into tensor<2x4x20xf32>
// CHECK-NOT: linalg.generic
// CHECK: %[[GEMM:.*]] = linalg.batch_reduce_matmul indexing_maps = [#[[$BMK]], #[[$BNK]], #[[$MN]]] ins(%[[G]], %[[COLS]] : tensor<2x4x20xf32>, tensor<2x18x20xf32>) outs(%{{.*}} : tensor<4x18xf32>)
// CHECK: tensor.expand_shape %[[GEMM]] {{.*}} into tensor<4x3x3x2xf32>
// CHECK-NOT: linalg.matmul
func.func @backward_filter(%g: tensor<2x4x4x5xf32>, %x: tensor<2x3x9x10xf32>) -> tensor<4x3x3x2xf32> {
  %0 = weft.conv2d_backward_filter %g, %x {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>} : (tensor<2x4x4x5xf32>, tensor<2x3x9x10xf32>) -> tensor<4x3x3x2xf32>
  return %0 : tensor<4x3x3x2xf32>
}

// bf16 (the runtime has no bf16 batch sum): one GEMM whose K is (n, y, x),
// the batch folded in: g transposed to [O, N, oh, ow] times the windows
// gathered as [(c, i, j), (n, y, x)], read transposed.
// CHECK-LABEL: func.func @backward_filter_bf16
// CHECK: %[[PAD:.*]] = tensor.pad %arg1
// CHECK: %[[T:.*]] = linalg.generic {indexing_maps = [#[[$GT]], {{.*}}]{{.*}} ins(%arg0 : tensor<2x4x4x5xbf16>) outs(%{{.*}} : tensor<4x2x4x5xbf16>)
// CHECK: %[[G:.*]] = tensor.collapse_shape %[[T]] {{.*}} into tensor<4x40xbf16>
// CHECK: %[[WINDOWS:.*]] = linalg.generic {indexing_maps = [#[[$WINT]], {{.*}}]{{.*}} ins(%[[PAD]] : tensor<2x3x11x12xbf16>) outs(%{{.*}} : tensor<3x3x2x2x4x5xbf16>)
// CHECK: %[[COLS:.*]] = tensor.collapse_shape %[[WINDOWS]] {{.*}} into tensor<18x40xbf16>
// CHECK: %[[GEMM:.*]] = linalg.matmul indexing_maps = [{{.*}}, #[[$BT]], {{.*}}] ins(%[[G]], %[[COLS]] : tensor<4x40xbf16>, tensor<18x40xbf16>) outs(%{{.*}} : tensor<4x18xf32>)
// CHECK: tensor.expand_shape %[[GEMM]] {{.*}} into tensor<4x3x3x2xf32>
func.func @backward_filter_bf16(%g: tensor<2x4x4x5xbf16>, %x: tensor<2x3x9x10xbf16>) -> tensor<4x3x3x2xbf16> {
  %0 = weft.conv2d_backward_filter %g, %x {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>} : (tensor<2x4x4x5xbf16>, tensor<2x3x9x10xbf16>) -> tensor<4x3x3x2xbf16>
  return %0 : tensor<4x3x3x2xbf16>
}

// Input gradient: the gradient spread by the stride and padded, then the
// same im2col + GEMM with the flipped filter [C, O, kh, kw].
// CHECK-LABEL: func.func @backward_input
// CHECK: %[[SPREAD:.*]] = tensor.insert_slice %arg0 into {{.*}} [1, 1, 2, 2]
// CHECK: %[[FLIP:.*]] = linalg.generic {{.*}} ins(%arg1 : tensor<4x3x3x2xf32>) outs(%{{.*}} : tensor<3x4x3x2xf32>)
// CHECK: %[[WINDOWS:.*]] = linalg.generic {{.*}} ins(%[[SPREAD]] : {{.*}}) outs(%{{.*}} : tensor<2x4x3x2x9x10xf32>)
// CHECK: %[[COLS:.*]] = tensor.collapse_shape %[[WINDOWS]] {{.*}} into tensor<2x24x90xf32>
// CHECK: %[[W:.*]] = tensor.collapse_shape %[[FLIP]] {{.*}} into tensor<3x24xf32>
// CHECK: linalg.batch_matmul {{.*}} ins(%[[W]], %[[COLS]] : tensor<3x24xf32>, tensor<2x24x90xf32>)
func.func @backward_input(%g: tensor<2x4x4x5xf32>, %w: tensor<4x3x3x2xf32>) -> tensor<2x3x9x10xf32> {
  %0 = weft.conv2d_backward_input %g, %w {strides = array<i64: 2, 2>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 2, 2>} : (tensor<2x4x4x5xf32>, tensor<4x3x3x2xf32>) -> tensor<2x3x9x10xf32>
  return %0 : tensor<2x3x9x10xf32>
}

// Groups keep the named grouped convolution.
// CHECK-LABEL: func.func @grouped
// CHECK: linalg.conv_2d_ngchw_gfchw
// CHECK-NOT: linalg.batch_matmul
func.func @grouped(%x: tensor<2x4x6x6xf32>, %w: tensor<6x2x3x3xf32>) -> tensor<2x6x4x4xf32> {
  %0 = weft.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 2 : i64} : (tensor<2x4x6x6xf32>, tensor<6x2x3x3xf32>) -> tensor<2x6x4x4xf32>
  return %0 : tensor<2x6x4x4xf32>
}
