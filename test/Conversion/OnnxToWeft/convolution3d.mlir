// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// A 3-D convolution is one conv2d per depth tap over [N * D_out, C, H, W]:
// depth padded, moved next to the batch, sliced per tap (stride 2,
// dilation 1 here); the bias joins the first tap's conv2d.
// CHECK-LABEL: func.func @conv3d
// CHECK: %[[P:.*]] = weft.pad %arg0 {high = array<i64: 0, 0, 1, 0, 0>, interior = array<i64: 0, 0, 0, 0, 0>, low = array<i64: 0, 0, 1, 0, 0>} : (tensor<2x4x5x7x6xf32>) -> tensor<2x4x7x7x6xf32>
// CHECK: %[[T:.*]] = weft.transpose %[[P]] {permutation = array<i64: 0, 2, 1, 3, 4>}
// CHECK: %[[S0:.*]] = weft.slice %[[T]] {limits = array<i64: 2, 5, 4, 7, 6>, starts = array<i64: 0, 0, 0, 0, 0>, strides = array<i64: 1, 2, 1, 1, 1>}
// CHECK: %[[X0:.*]] = weft.reshape %[[S0]] : tensor<2x3x4x7x6xf32> -> tensor<6x4x7x6xf32>
// CHECK: %[[W0:.*]] = weft.reshape %{{.*}} : tensor<6x2x1x3x2xf32> -> tensor<6x2x3x2xf32>
// CHECK: %[[Y0:.*]] = weft.conv2d %[[X0]], %[[W0]], %arg2 {dilations = array<i64: 2, 1>, groups = 2 : i64, padding = array<i64: 0, 2, 0, 2>, strides = array<i64: 1, 2>}
// CHECK: weft.slice %[[T]] {limits = array<i64: 2, 6, 4, 7, 6>, starts = array<i64: 0, 1, 0, 0, 0>, strides = array<i64: 1, 2, 1, 1, 1>}
// CHECK: %[[Y1:.*]] = weft.conv2d
// CHECK-NOT: %arg2
// CHECK: %[[SUM:.*]] = weft.add %[[Y0]], %[[Y1]]
// CHECK: %[[R:.*]] = weft.reshape %[[SUM]] : tensor<6x6x3x5xf32> -> tensor<2x3x6x3x5xf32>
// CHECK: weft.transpose %[[R]] {permutation = array<i64: 0, 2, 1, 3, 4>} : (tensor<2x3x6x3x5xf32>) -> tensor<2x6x3x3x5xf32>
func.func @conv3d(%x: tensor<2x4x5x7x6xf32>, %w: tensor<6x2x2x3x2xf32>, %b: tensor<6xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Conv"(%x, %w, %b) {name = "/conv", opset = 14 : i64, attrs = {dilations = array<i64: 1, 2, 1>, group = 2 : i64, kernel_shape = array<i64: 2, 3, 2>, pads = array<i64: 1, 0, 2, 1, 0, 2>, strides = array<i64: 2, 1, 2>}} : (tensor<2x4x5x7x6xf32>, tensor<6x2x2x3x2xf32>, tensor<6xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// Pools: a 2-D pool of every depth plane, then the depth window: for max,
// depth padding is -inf and ties keep the earlier depth (cmp ge + where);
// for an average with padding counted, the sum over the window divides by
// its depth.
// CHECK-LABEL: func.func @pool3d
// CHECK: %[[PL:.*]] = weft.reshape %arg0 : tensor<2x3x5x6x7xf32> -> tensor<2x15x6x7xf32>
// CHECK: %[[M:.*]] = weft.max_pool2d %[[PL]] {kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}
// CHECK: %[[MV:.*]] = weft.reshape %[[M]] : tensor<2x15x3x4xf32> -> tensor<2x3x5x3x4xf32>
// CHECK: %[[MP:.*]] = weft.pad %[[MV]] {{.*}}value = 0xFFF0000000000000 : f64}
// CHECK: %[[A:.*]] = weft.slice %[[MP]] {{.*}}starts = array<i64: 0, 0, 0, 0, 0>
// CHECK: %[[B:.*]] = weft.slice %[[MP]] {{.*}}starts = array<i64: 0, 0, 1, 0, 0>
// CHECK: %[[GE:.*]] = weft.cmp ge, %[[A]], %[[B]]
// CHECK: %[[MAX:.*]] = weft.where %[[GE]], %[[A]], %[[B]]
// CHECK: weft.avg_pool2d %{{.*}} {count_include_pad = true, kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>}
// CHECK-COUNT-2: weft.add
// CHECK: %[[D:.*]] = weft.constant dense<3.000000e+00> : tensor<f32>
// CHECK: %[[AVG:.*]] = weft.div %{{.*}}, %[[D]]
// Padding not counted: per output depth, the real cells under the window.
// CHECK: weft.avg_pool2d %{{.*}} {kernel = array<i64: 2, 2>, padding = array<i64: 1, 0, 1, 0>, strides = array<i64: 1, 2>}
// CHECK: %[[C:.*]] = weft.constant dense<{{.*}}2.000000e+00{{.*}}3.000000e+00{{.*}}2.000000e+00{{.*}}> : tensor<3x1x1xf32>
// CHECK: %[[AVG2:.*]] = weft.div %{{.*}}, %[[C]] : (tensor<2x3x3x7x3xf32>, tensor<3x1x1xf32>)
// CHECK: return %[[MAX]], %[[AVG]], %[[AVG2]]
func.func @pool3d(%x: tensor<2x3x5x6x7xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "MaxPool"(%x) {name = "/max", opset = 14 : i64, attrs = {kernel_shape = array<i64: 2, 3, 3>, pads = array<i64: 1, 1, 1, 1, 1, 1>, strides = array<i64: 1, 2, 2>}} : (tensor<2x3x5x6x7xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "AveragePool"(%x) {name = "/avg", opset = 14 : i64, attrs = {kernel_shape = array<i64: 3, 2, 2>, pads = array<i64: 1, 0, 0, 1, 0, 0>, strides = array<i64: 2, 2, 2>, count_include_pad = 1 : i64}} : (tensor<2x3x5x6x7xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "AveragePool"(%x) {name = "/avg2", opset = 14 : i64, attrs = {kernel_shape = array<i64: 3, 2, 2>, pads = array<i64: 1, 1, 0, 1, 1, 0>, strides = array<i64: 2, 1, 2>}} : (tensor<2x3x5x6x7xf32>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
