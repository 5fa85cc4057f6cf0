// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// CHECK-LABEL: func.func @reduce
// CHECK: weft.reduce_mean %arg0 {axes = array<i64: 2>, keep_dims = true} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
// CHECK: weft.reduce_mean %arg0 {axes = array<i64: 0, 2>} : (tensor<2x3x4xf32>) -> tensor<3xf32>
// CHECK: weft.reduce_sum %arg0 {axes = array<i64: 1>, keep_dims = true} : (tensor<2x3x4xf32>) -> tensor<2x1x4xf32>
// No axes reduces everything.
// CHECK: weft.reduce_sum %arg0 {axes = array<i64: 0, 1, 2>} : (tensor<2x3x4xf32>) -> tensor<f32>
// CHECK: weft.reduce_max %arg0 {axes = array<i64: 0>, keep_dims = true} : (tensor<2x3x4xf32>) -> tensor<1x3x4xf32>
// ReduceSum before opset 13 reads the attribute.
// CHECK: weft.reduce_sum %arg0 {axes = array<i64: 0>, keep_dims = true}
// With noop_with_empty_axes and no axes the input passes through.
// CHECK: return {{.*}}, %arg0 :
func.func @reduce(%x: tensor<2x3x4xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "ReduceMean"(%x) {name = "mean", opset = 13 : i64, attrs = {axes = array<i64: -1>}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "ReduceMean"(%x) {name = "mean2", opset = 17 : i64, attrs = {axes = array<i64: 2, 0, -1>, keepdims = 0 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %axes = weft.constant dense<[1]> : tensor<1xi64>
  %2 = weft.onnx.node "ReduceSum"(%x, %axes) {name = "sum", opset = 13 : i64} : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  %3 = weft.onnx.node "ReduceSum"(%x) {name = "sum_all", opset = 13 : i64, attrs = {keepdims = 0 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %first = weft.constant dense<[0]> : tensor<1xi64>
  %4 = weft.onnx.node "ReduceMax"(%x, %first) {name = "max18", opset = 18 : i64} : (tensor<2x3x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  %5 = weft.onnx.node "ReduceSum"(%x) {name = "sum11", opset = 11 : i64, attrs = {axes = array<i64: 0>}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %6 = weft.onnx.node "ReduceSum"(%x) {name = "noop", opset = 13 : i64, attrs = {noop_with_empty_axes = 1 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4, %5, %6 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// The rest of the family composes weft's reductions with elementwise ops.
// CHECK-LABEL: func.func @composed
// ReduceMin is -max(-x).
// CHECK: %[[NEG:.*]] = weft.neg %arg0
// CHECK: %[[MAX:.*]] = weft.reduce_max %[[NEG]] {axes = array<i64: 2>} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
// CHECK: %[[MIN:.*]] = weft.neg %[[MAX]]
// CHECK: %[[ABS:.*]] = weft.abs %arg0
// CHECK: %[[L1:.*]] = weft.reduce_sum %[[ABS]] {axes = array<i64: 1>, keep_dims = true}
// CHECK: %[[SQ:.*]] = weft.mul %arg0, %arg0
// CHECK: %[[SUMSQ:.*]] = weft.reduce_sum %[[SQ]] {axes = array<i64: 2>}
// CHECK: %[[L2:.*]] = weft.sqrt %[[SUMSQ]]
// CHECK: %[[SQ2:.*]] = weft.mul %arg0, %arg0
// CHECK: %[[SS:.*]] = weft.reduce_sum %[[SQ2]] {axes = array<i64: 0>, keep_dims = true}
// CHECK: %[[SUM:.*]] = weft.reduce_sum %arg0 {axes = array<i64: 2>, keep_dims = true}
// CHECK: %[[LS:.*]] = weft.log %[[SUM]]
// ReduceLogSumExp subtracts the maximum first.
// CHECK: %[[M:.*]] = weft.reduce_max %arg0 {axes = array<i64: 2>, keep_dims = true} : (tensor<2x3x4xf32>) -> tensor<2x3x1xf32>
// CHECK: %[[SHIFTED:.*]] = weft.sub %arg0, %[[M]]
// CHECK: %[[EXP:.*]] = weft.exp %[[SHIFTED]]
// CHECK: %[[ESUM:.*]] = weft.reduce_sum %[[EXP]] {axes = array<i64: 2>} : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
// CHECK: %[[M2:.*]] = weft.reshape %[[M]] : tensor<2x3x1xf32> -> tensor<2x3xf32>
// CHECK: %[[LOG:.*]] = weft.log %[[ESUM]]
// CHECK: %[[LSE:.*]] = weft.add %[[LOG]], %[[M2]]
// CHECK: return %[[MIN]], %[[L1]], %[[L2]], %[[SS]], %[[LS]], %[[LSE]]
func.func @composed(%x: tensor<2x3x4xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "ReduceMin"(%x) {name = "min", opset = 13 : i64, attrs = {axes = array<i64: -1>, keepdims = 0 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "ReduceL1"(%x) {name = "l1", opset = 13 : i64, attrs = {axes = array<i64: 1>}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "ReduceL2"(%x) {name = "l2", opset = 13 : i64, attrs = {axes = array<i64: -1>, keepdims = 0 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %3 = weft.onnx.node "ReduceSumSquare"(%x) {name = "ss", opset = 13 : i64, attrs = {axes = array<i64: 0>}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %4 = weft.onnx.node "ReduceLogSum"(%x) {name = "ls", opset = 13 : i64, attrs = {axes = array<i64: 2>}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %5 = weft.onnx.node "ReduceLogSumExp"(%x) {name = "lse", opset = 13 : i64, attrs = {axes = array<i64: 2>, keepdims = 0 : i64}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4, %5 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// ReduceProd moves the reduced axes last, flattens them (here 2 x 5 = 10
// entries) and multiplies halves: 10 -> 5, then 5 = 2 * 2 + 1 -> 2 -> 1,
// with the odd entry multiplied in at the end.
// CHECK-LABEL: func.func @prod
// CHECK: %[[T:.*]] = weft.transpose %arg0 {permutation = array<i64: 1, 0, 2>} : (tensor<2x3x5xf32>) -> tensor<3x2x5xf32>
// CHECK: %[[FLAT:.*]] = weft.reshape %[[T]] : tensor<3x2x5xf32> -> tensor<3x10xf32>
// CHECK: %[[LO:.*]] = weft.slice %[[FLAT]] {limits = array<i64: 3, 5>, starts = array<i64: 0, 0>
// CHECK: %[[HI:.*]] = weft.slice %[[FLAT]] {limits = array<i64: 3, 10>, starts = array<i64: 0, 5>
// CHECK: %[[P5:.*]] = weft.mul %[[LO]], %[[HI]] : (tensor<3x5xf32>, tensor<3x5xf32>) -> tensor<3x5xf32>
// CHECK: %[[ODD:.*]] = weft.slice %[[P5]] {limits = array<i64: 3, 5>, starts = array<i64: 0, 4>
// CHECK: %[[P2:.*]] = weft.mul {{.*}} -> tensor<3x2xf32>
// CHECK: %[[P1:.*]] = weft.mul {{.*}} -> tensor<3x1xf32>
// CHECK: %[[ALL:.*]] = weft.mul %[[P1]], %[[ODD]]
// CHECK: %[[PROD:.*]] = weft.reshape %[[ALL]] : tensor<3x1xf32> -> tensor<3xf32>
// With noop_with_empty_axes and no axes the input passes through.
// CHECK: return %[[PROD]], %arg0
func.func @prod(%x: tensor<2x3x5xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %axes = weft.constant dense<[0, 2]> : tensor<2xi64>
  %0 = weft.onnx.node "ReduceProd"(%x, %axes) {name = "prod", opset = 18 : i64, attrs = {keepdims = 0 : i64}} : (tensor<2x3x5xf32>, tensor<2xi64>) -> tensor<*xf32>
  %1 = weft.onnx.node "ReduceProd"(%x) {name = "noop", opset = 18 : i64, attrs = {noop_with_empty_axes = 1 : i64}} : (tensor<2x3x5xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// PyTorch's var/std export takes the element count as ReduceProd of a
// shape; on integer constants it folds.
// CHECK-LABEL: func.func @prod_of_shape
// CHECK: %[[N:.*]] = weft.constant dense<42> : tensor<i64>
// CHECK: return %[[N]]
func.func @prod_of_shape() -> tensor<*xi64> {
  %s = weft.constant dense<[2, 3, 7]> : tensor<3xi64>
  %0 = weft.onnx.node "ReduceProd"(%s) {name = "numel", opset = 13 : i64, attrs = {keepdims = 0 : i64}} : (tensor<3xi64>) -> tensor<*xi64>
  return %0 : tensor<*xi64>
}
