// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// CHECK-LABEL: func.func @transpose
// CHECK: weft.transpose %arg0 {permutation = array<i64: 2, 1, 0>} : (tensor<2x3x4xf32>) -> tensor<4x3x2xf32>
// CHECK: weft.transpose %arg0 {permutation = array<i64: 0, 2, 1>} : (tensor<2x3x4xf32>) -> tensor<2x4x3xf32>
func.func @transpose(%x: tensor<2x3x4xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Transpose"(%x) {name = "t", opset = 13 : i64} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Transpose"(%x) {name = "t2", opset = 13 : i64, attrs = {perm = array<i64: 0, 2, 1>}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// Ends clamp to the axis size (INT64_MAX is "to the end"), negative bounds
// count from the end, and axes may be negative.
// CHECK-LABEL: func.func @slice
// CHECK: weft.slice %arg0 {limits = array<i64: 4, 96>, starts = array<i64: 0, 32>, strides = array<i64: 1, 1>} : (tensor<4x96xf32>) -> tensor<4x64xf32>
// CHECK: weft.slice %arg0 {limits = array<i64: 3, 96>, starts = array<i64: 1, 0>, strides = array<i64: 2, 1>} : (tensor<4x96xf32>) -> tensor<1x96xf32>
// Before opset 10 the bounds are attributes.
// CHECK: weft.slice %arg0 {limits = array<i64: 4, 8>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>}
func.func @slice(%x: tensor<4x96xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %starts = weft.constant dense<[32]> : tensor<1xi64>
  %ends = weft.constant dense<[9223372036854775807]> : tensor<1xi64>
  %axes = weft.constant dense<[-1]> : tensor<1xi64>
  %0 = weft.onnx.node "Slice"(%x, %starts, %ends, %axes) {name = "s", opset = 13 : i64} : (tensor<4x96xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  %s1 = weft.constant dense<[-3]> : tensor<1xi64>
  %e1 = weft.constant dense<[-1]> : tensor<1xi64>
  %none = weft.onnx.none
  %st = weft.constant dense<[2]> : tensor<1xi64>
  %1 = weft.onnx.node "Slice"(%x, %s1, %e1, %none, %st) {name = "s1", opset = 13 : i64} : (tensor<4x96xf32>, tensor<1xi64>, tensor<1xi64>, none, tensor<1xi64>) -> tensor<*xf32>
  %2 = weft.onnx.node "Slice"(%x) {name = "s9", opset = 9 : i64, attrs = {starts = array<i64: 0>, ends = array<i64: 8>, axes = array<i64: 1>}} : (tensor<4x96xf32>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// A negative step gathers the explicit index list; the positive-step part
// is the whole tensor, so no weft.slice is built.
// CHECK-LABEL: func.func @slice_reverse
// CHECK-NOT: weft.slice
// CHECK: %[[IDX:.*]] = weft.constant dense<[4, 2, 0]> : tensor<3xi64>
// CHECK: weft.gather %arg0, %[[IDX]] {axis = 1 : i64} : (tensor<2x5xf32>, tensor<3xi64>) -> tensor<2x3xf32>
func.func @slice_reverse(%x: tensor<2x5xf32>) -> tensor<*xf32> {
  %s = weft.constant dense<[-1]> : tensor<1xi64>
  %e = weft.constant dense<[-9223372036854775807]> : tensor<1xi64>
  %a = weft.constant dense<[1]> : tensor<1xi64>
  %st = weft.constant dense<[-2]> : tensor<1xi64>
  %0 = weft.onnx.node "Slice"(%x, %s, %e, %a, %st) {name = "rev", opset = 13 : i64} : (tensor<2x5xf32>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>, tensor<1xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// CHECK-LABEL: func.func @concat
// CHECK: weft.concat %arg0, %arg1, %arg0 {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x8xf32>) -> tensor<4x18xf32>
func.func @concat(%a: tensor<4x8xf32>, %b: tensor<4x2xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Concat"(%a, %b, %a) {name = "cat", opset = 13 : i64, attrs = {axis = -1 : i64}} : (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x8xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// CHECK-LABEL: func.func @split
// Equal parts.
// CHECK: weft.slice %arg0 {limits = array<i64: 4, 32>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>}
// CHECK: weft.slice %arg0 {limits = array<i64: 4, 64>, starts = array<i64: 0, 32>, strides = array<i64: 1, 1>}
// CHECK: weft.slice %arg0 {limits = array<i64: 4, 96>, starts = array<i64: 0, 64>, strides = array<i64: 1, 1>}
// Sizes from the split input (opset 13).
// CHECK: weft.slice %arg0 {{{.*}}} : (tensor<4x96xf32>) -> tensor<1x96xf32>
// CHECK: weft.slice %arg0 {{{.*}}} : (tensor<4x96xf32>) -> tensor<3x96xf32>
// Sizes from the split attribute (opset 11).
// CHECK: weft.slice %arg0 {{{.*}}} : (tensor<4x96xf32>) -> tensor<4x90xf32>
// CHECK: weft.slice %arg0 {{{.*}}} : (tensor<4x96xf32>) -> tensor<4x6xf32>
// Opset 18: the last part is smaller when the axis does not divide.
// CHECK: weft.slice %arg0 {{{.*}}} : (tensor<4x96xf32>) -> tensor<2x96xf32>
// CHECK: weft.slice %arg0 {{{.*}}} : (tensor<4x96xf32>) -> tensor<2x96xf32>
// CHECK: weft.slice %arg0 {{{.*}}} : (tensor<4x96xf32>) -> tensor<0x96xf32>
func.func @split(%x: tensor<4x96xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0:3 = weft.onnx.node "Split"(%x) {name = "split", opset = 13 : i64, attrs = {axis = 1 : i64}} : (tensor<4x96xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  %sizes = weft.constant dense<[1, 3]> : tensor<2xi64>
  %1:2 = weft.onnx.node "Split"(%x, %sizes) {name = "split_sizes", opset = 13 : i64} : (tensor<4x96xf32>, tensor<2xi64>) -> (tensor<*xf32>, tensor<*xf32>)
  %2:2 = weft.onnx.node "Split"(%x) {name = "split11", opset = 11 : i64, attrs = {axis = -1 : i64, split = array<i64: 90, 6>}} : (tensor<4x96xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  %3:3 = weft.onnx.node "Split"(%x) {name = "split18", opset = 18 : i64, attrs = {num_outputs = 3 : i64}} : (tensor<4x96xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %0#0, %0#1, %0#2, %1#0, %1#1, %2#0, %2#1, %3#0, %3#1, %3#2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// CHECK-LABEL: func.func @gather
// CHECK: weft.gather %arg0, %arg1 {axis = 0 : i64} : (tensor<64x32xf32>, tensor<4x16xi64>) -> tensor<4x16x32xf32>
// CHECK: weft.gather %arg0, %arg2 {axis = 1 : i64} : (tensor<64x32xf32>, tensor<i32>) -> tensor<64xf32>
func.func @gather(%table: tensor<64x32xf32>, %tokens: tensor<4x16xi64>, %i: tensor<i32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Gather"(%table, %tokens) {name = "embed", opset = 13 : i64} : (tensor<64x32xf32>, tensor<4x16xi64>) -> tensor<*xf32>
  %1 = weft.onnx.node "Gather"(%table, %i) {name = "col", opset = 13 : i64, attrs = {axis = -1 : i64}} : (tensor<64x32xf32>, tensor<i32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// Trilu is a select with a constant mask over the last two axes.
// CHECK-LABEL: func.func @trilu
// CHECK: %[[UPPER:.*]] = weft.constant dense<{{\[}}[true, true, true], [false, true, true]]> : tensor<2x3xi1>
// CHECK: %[[ZERO:.*]] = weft.constant dense<0.000000e+00> : tensor<f32>
// CHECK: weft.where %[[UPPER]], %arg0, %[[ZERO]] : (tensor<2x3xi1>, tensor<5x2x3xf32>, tensor<f32>) -> tensor<5x2x3xf32>
// CHECK: %[[LOWER:.*]] = weft.constant dense<{{\[}}[false, false, false], [true, false, false]]> : tensor<2x3xi1>
// CHECK: weft.where %[[LOWER]], %arg0
// On a constant input the whole Trilu folds.
// CHECK: %[[TRIL:.*]] = weft.constant dense<{{\[}}[1.000000e+00, 0.000000e+00], [1.000000e+00, 1.000000e+00]]> : tensor<2x2xf32>
// CHECK: return %{{.*}}, %{{.*}}, %[[TRIL]]
func.func @trilu(%x: tensor<5x2x3xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Trilu"(%x) {name = "triu", opset = 14 : i64} : (tensor<5x2x3xf32>) -> tensor<*xf32>
  %k = weft.constant dense<-1> : tensor<i64>
  %1 = weft.onnx.node "Trilu"(%x, %k) {name = "tril", opset = 14 : i64, attrs = {upper = 0 : i64}} : (tensor<5x2x3xf32>, tensor<i64>) -> tensor<*xf32>
  %ones = weft.constant dense<1.0> : tensor<2x2xf32>
  %2 = weft.onnx.node "Trilu"(%ones) {name = "mask", opset = 14 : i64, attrs = {upper = 0 : i64}} : (tensor<2x2xf32>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// Pad in constant mode; negative pads crop with a slice.
// CHECK-LABEL: func.func @pad
// CHECK: weft.pad %arg0 {high = array<i64: 0, 2>, interior = array<i64: 0, 0>, low = array<i64: 0, 1>, value = 5.000000e-01 : f64} : (tensor<2x3xf32>) -> tensor<2x6xf32>
// CHECK: %[[P:.*]] = weft.pad %arg0 {high = array<i64: 0, 0>, interior = array<i64: 0, 0>, low = array<i64: 2, 0>} : (tensor<2x3xf32>) -> tensor<4x3xf32>
// CHECK: weft.slice %[[P]] {limits = array<i64: 4, 2>, starts = array<i64: 0, 0>, strides = array<i64: 1, 1>} : (tensor<4x3xf32>) -> tensor<4x2xf32>
func.func @pad(%x: tensor<2x3xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %pads = weft.constant dense<[0, 1, 0, 2]> : tensor<4xi64>
  %v = weft.constant dense<0.5> : tensor<f32>
  %0 = weft.onnx.node "Pad"(%x, %pads, %v) {name = "pad", opset = 13 : i64} : (tensor<2x3xf32>, tensor<4xi64>, tensor<f32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Pad"(%x) {name = "pad2", opset = 2 : i64, attrs = {pads = array<i64: 2, 0, 0, -1>}} : (tensor<2x3xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// Reflect and edge padding gather the rows and columns they copy:
// reflect mirrors without repeating the border, edge repeats it.
// CHECK-LABEL: func.func @pad_modes
// CHECK: %[[RROWS:.*]] = weft.constant dense<[0, 1, 0]> : tensor<3xi64>
// CHECK: %[[R0:.*]] = weft.gather %arg0, %[[RROWS]] {axis = 0 : i64} : (tensor<2x3xf32>, tensor<3xi64>) -> tensor<3x3xf32>
// CHECK: %[[RCOLS:.*]] = weft.constant dense<[2, 1, 0, 1, 2, 1]> : tensor<6xi64>
// CHECK: %[[REFLECT:.*]] = weft.gather %[[R0]], %[[RCOLS]] {axis = 1 : i64} : (tensor<3x3xf32>, tensor<6xi64>) -> tensor<3x6xf32>
// CHECK: %[[EROWS:.*]] = weft.constant dense<[0, 1, 1]> : tensor<3xi64>
// CHECK: %[[E0:.*]] = weft.gather %arg0, %[[EROWS]] {axis = 0 : i64}
// CHECK: %[[ECOLS:.*]] = weft.constant dense<[0, 0, 0, 1, 2, 2]> : tensor<6xi64>
// CHECK: %[[EDGE:.*]] = weft.gather %[[E0]], %[[ECOLS]] {axis = 1 : i64}
// CHECK: return %[[REFLECT]], %[[EDGE]]
func.func @pad_modes(%x: tensor<2x3xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %pads = weft.constant dense<[0, 2, 1, 1]> : tensor<4xi64>
  %0 = weft.onnx.node "Pad"(%x, %pads) {name = "reflect", opset = 13 : i64, attrs = {mode = "reflect"}} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<*xf32>
  %1 = weft.onnx.node "Pad"(%x, %pads) {name = "edge", opset = 13 : i64, attrs = {mode = "edge"}} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}
