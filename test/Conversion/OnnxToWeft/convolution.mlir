// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// CHECK-LABEL: func.func @conv
// CHECK: weft.conv2d %arg0, %arg1, %arg2 {dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<4x8x16x16xf32>
// Grouped, strided, dilated, without bias.
// CHECK: weft.conv2d %arg0, %arg3 {dilations = array<i64: 2, 2>, groups = 3 : i64, padding = array<i64: 0, 1, 0, 1>, strides = array<i64: 2, 1>} : (tensor<4x3x16x16xf32>, tensor<6x1x3x3xf32>) -> tensor<4x6x6x14xf32>
func.func @conv(%x: tensor<4x3x16x16xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<8xf32>, %g: tensor<6x1x3x3xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Conv"(%x, %w, %b) {name = "conv", opset = 17 : i64, attrs = {dilations = array<i64: 1, 1>, group = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}} : (tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Conv"(%x, %g) {name = "gconv", opset = 17 : i64, attrs = {dilations = array<i64: 2, 2>, group = 3 : i64, pads = array<i64: 0, 1, 0, 1>, strides = array<i64: 2, 1>}} : (tensor<4x3x16x16xf32>, tensor<6x1x3x3xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// SAME_UPPER puts the odd padding cell at the end, SAME_LOWER at the start.
// CHECK-LABEL: func.func @conv_auto_pad
// CHECK: weft.conv2d %arg0, %arg2 {{{.*}}padding = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x1x8x8xf32>, tensor<1x1x3x3xf32>) -> tensor<1x1x4x4xf32>
// CHECK: weft.conv2d %arg0, %arg1 {{{.*}}padding = array<i64: 1, 1, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x8x8xf32>
// CHECK: weft.conv2d %arg0, %arg1 {{{.*}}padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 1>} : (tensor<1x1x8x8xf32>, tensor<1x1x2x2xf32>) -> tensor<1x1x7x7xf32>
func.func @conv_auto_pad(%x: tensor<1x1x8x8xf32>, %w: tensor<1x1x2x2xf32>, %w3: tensor<1x1x3x3xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Conv"(%x, %w3) {name = "upper", opset = 17 : i64, attrs = {auto_pad = "SAME_UPPER", strides = array<i64: 2, 2>}} : (tensor<1x1x8x8xf32>, tensor<1x1x3x3xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Conv"(%x, %w) {name = "lower", opset = 17 : i64, attrs = {auto_pad = "SAME_LOWER"}} : (tensor<1x1x8x8xf32>, tensor<1x1x2x2xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Conv"(%x, %w) {name = "valid", opset = 17 : i64, attrs = {auto_pad = "VALID", pads = array<i64: 1, 1, 1, 1>}} : (tensor<1x1x8x8xf32>, tensor<1x1x2x2xf32>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// CHECK-LABEL: func.func @pools
// CHECK: weft.max_pool2d %arg0 {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>} : (tensor<4x8x16x16xf32>) -> tensor<4x8x8x8xf32>
// CHECK: weft.avg_pool2d %arg0 {count_include_pad = true, kernel = array<i64: 3, 3>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>} : (tensor<4x8x16x16xf32>) -> tensor<4x8x16x16xf32>
// CHECK: weft.avg_pool2d %arg0 {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>}
// CHECK: weft.global_avg_pool %arg0 : (tensor<4x8x16x16xf32>) -> tensor<4x8x1x1xf32>
func.func @pools(%x: tensor<4x8x16x16xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  // ceil_mode = 1 changes nothing when the windows tile the input exactly.
  %0 = weft.onnx.node "MaxPool"(%x) {name = "max", opset = 12 : i64, attrs = {ceil_mode = 1 : i64, kernel_shape = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>, strides = array<i64: 2, 2>}} : (tensor<4x8x16x16xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "AveragePool"(%x) {name = "avg", opset = 17 : i64, attrs = {count_include_pad = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>}} : (tensor<4x8x16x16xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "AveragePool"(%x) {name = "avg2", opset = 17 : i64, attrs = {kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}} : (tensor<4x8x16x16xf32>) -> tensor<*xf32>
  %3 = weft.onnx.node "GlobalAveragePool"(%x) {name = "gap", opset = 1 : i64} : (tensor<4x8x16x16xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// 1-D windows run as 2-D ones over a unit height.
// CHECK-LABEL: func.func @conv1d
// CHECK: %[[X:.*]] = weft.reshape %arg0 : tensor<4x3x16xf32> -> tensor<4x3x1x16xf32>
// CHECK: %[[W:.*]] = weft.reshape %arg1 : tensor<8x3x3xf32> -> tensor<8x3x1x3xf32>
// CHECK: %[[Y:.*]] = weft.conv2d %[[X]], %[[W]], %arg2 {dilations = array<i64: 1, 2>, padding = array<i64: 0, 2, 0, 1>, strides = array<i64: 1, 2>} : (tensor<4x3x1x16xf32>, tensor<8x3x1x3xf32>, tensor<8xf32>) -> tensor<4x8x1x8xf32>
// CHECK: weft.reshape %[[Y]] : tensor<4x8x1x8xf32> -> tensor<4x8x8xf32>
func.func @conv1d(%x: tensor<4x3x16xf32>, %w: tensor<8x3x3xf32>, %b: tensor<8xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Conv"(%x, %w, %b) {name = "conv1d", opset = 17 : i64, attrs = {dilations = array<i64: 2>, group = 1 : i64, kernel_shape = array<i64: 3>, pads = array<i64: 2, 1>, strides = array<i64: 2>}} : (tensor<4x3x16xf32>, tensor<8x3x3xf32>, tensor<8xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// ConvTranspose is the input adjoint of the matching convolution: out =
// stride * (in - 1) + output_padding + kernel - pads; W is [C_in, C_out /
// group, kH, kW] and the bias is added per channel.
// CHECK-LABEL: func.func @conv_transpose
// CHECK: %[[Y:.*]] = weft.conv2d_backward_input %arg0, %arg1 {dilations = array<i64: 1, 1>, groups = 2 : i64, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>} : (tensor<2x8x4x4xf32>, tensor<8x2x4x4xf32>) -> tensor<2x4x8x8xf32>
// CHECK: %[[B:.*]] = weft.reshape %arg2 : tensor<4xf32> -> tensor<4x1x1xf32>
// CHECK: %[[YB:.*]] = weft.add %[[Y]], %[[B]]
// CHECK: %[[X1:.*]] = weft.reshape %arg3 : tensor<2x8x5xf32> -> tensor<2x8x1x5xf32>
// CHECK: %[[W1:.*]] = weft.reshape %arg4 : tensor<8x3x3xf32> -> tensor<8x3x1x3xf32>
// CHECK: %[[Y1:.*]] = weft.conv2d_backward_input %[[X1]], %[[W1]] {dilations = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, strides = array<i64: 1, 2>} : (tensor<2x8x1x5xf32>, tensor<8x3x1x3xf32>) -> tensor<2x3x1x12xf32>
// CHECK: %[[Y1R:.*]] = weft.reshape %[[Y1]] : tensor<2x3x1x12xf32> -> tensor<2x3x12xf32>
// CHECK: return %[[YB]], %[[Y1R]]
func.func @conv_transpose(%x: tensor<2x8x4x4xf32>, %w: tensor<8x2x4x4xf32>, %b: tensor<4xf32>, %x1: tensor<2x8x5xf32>, %w1: tensor<8x3x3xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "ConvTranspose"(%x, %w, %b) {name = "deconv", opset = 17 : i64, attrs = {group = 2 : i64, kernel_shape = array<i64: 4, 4>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}} : (tensor<2x8x4x4xf32>, tensor<8x2x4x4xf32>, tensor<4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "ConvTranspose"(%x1, %w1) {name = "deconv1d", opset = 17 : i64, attrs = {output_padding = array<i64: 1>, strides = array<i64: 2>}} : (tensor<2x8x5xf32>, tensor<8x3x3xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// ceil_mode rounds the output size up as PyTorch does; the overhang is
// trailing padding that never wins a max and is never counted in an
// average. Counted explicit padding is then materialized with weft.pad so
// that only the overhang stays uncounted.
// CHECK-LABEL: func.func @pool_ceil
// CHECK: %[[MAX:.*]] = weft.max_pool2d %arg0 {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32>
// CHECK: %[[AVG:.*]] = weft.avg_pool2d %arg0 {kernel = array<i64: 2, 2>, padding = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x2x5x5xf32>) -> tensor<1x2x3x3xf32>
// CHECK: %[[PADDED:.*]] = weft.pad %arg2 {high = array<i64: 0, 0, 1, 1>, interior = array<i64: 0, 0, 0, 0>, low = array<i64: 0, 0, 1, 1>} : (tensor<1x2x6x6xf32>) -> tensor<1x2x8x8xf32>
// CHECK: %[[AVGPAD:.*]] = weft.avg_pool2d %[[PADDED]] {kernel = array<i64: 3, 3>, padding = array<i64: 0, 0, 1, 1>, strides = array<i64: 2, 2>} : (tensor<1x2x8x8xf32>) -> tensor<1x2x4x4xf32>
// CHECK: %[[Y:.*]] = weft.reshape %arg1 : tensor<1x2x7xf32> -> tensor<1x2x1x7xf32>
// CHECK: %[[MAX1:.*]] = weft.max_pool2d %[[Y]] {kernel = array<i64: 1, 2>, padding = array<i64: 0, 0, 0, 1>, strides = array<i64: 1, 2>} : (tensor<1x2x1x7xf32>) -> tensor<1x2x1x4xf32>
// CHECK: %[[MAX1R:.*]] = weft.reshape %[[MAX1]] : tensor<1x2x1x4xf32> -> tensor<1x2x4xf32>
// CHECK: %[[GMP:.*]] = weft.reduce_max %arg1 {axes = array<i64: 2>, keep_dims = true} : (tensor<1x2x7xf32>) -> tensor<1x2x1xf32>
// CHECK: return %[[MAX]], %[[AVG]], %[[AVGPAD]], %[[MAX1R]], %[[GMP]]
func.func @pool_ceil(%x: tensor<1x2x5x5xf32>, %y: tensor<1x2x7xf32>, %z: tensor<1x2x6x6xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "MaxPool"(%x) {name = "max", opset = 12 : i64, attrs = {ceil_mode = 1 : i64, kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}} : (tensor<1x2x5x5xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "AveragePool"(%x) {name = "avg", opset = 17 : i64, attrs = {ceil_mode = 1 : i64, kernel_shape = array<i64: 2, 2>, strides = array<i64: 2, 2>}} : (tensor<1x2x5x5xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "AveragePool"(%z) {name = "avg_pad", opset = 17 : i64, attrs = {ceil_mode = 1 : i64, count_include_pad = 1 : i64, kernel_shape = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, strides = array<i64: 2, 2>}} : (tensor<1x2x6x6xf32>) -> tensor<*xf32>
  %3 = weft.onnx.node "MaxPool"(%y) {name = "max1d", opset = 12 : i64, attrs = {ceil_mode = 1 : i64, kernel_shape = array<i64: 2>, strides = array<i64: 2>}} : (tensor<1x2x7xf32>) -> tensor<*xf32>
  %4 = weft.onnx.node "GlobalMaxPool"(%y) {name = "gmp", opset = 1 : i64} : (tensor<1x2x7xf32>) -> tensor<*xf32>
  return %0, %1, %2, %3, %4 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
