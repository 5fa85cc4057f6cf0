// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// A contraction over one label is one matmul of merged rows and columns.
// CHECK-LABEL: func.func @projection
// CHECK: %[[X:.*]] = weft.reshape %arg0 : tensor<2x6x12xf32> -> tensor<12x12xf32>
// CHECK: %[[WT:.*]] = weft.transpose %arg1 {permutation = array<i64: 1, 0, 2>} : (tensor<3x12x16xf32>) -> tensor<12x3x16xf32>
// CHECK: %[[W:.*]] = weft.reshape %[[WT]] : tensor<12x3x16xf32> -> tensor<12x48xf32>
// CHECK: %[[P:.*]] = weft.matmul %[[X]], %[[W]] : (tensor<12x12xf32>, tensor<12x48xf32>) -> tensor<12x48xf32>
// CHECK: weft.reshape %[[P]] : tensor<12x48xf32> -> tensor<2x6x3x16xf32>
func.func @projection(%x: tensor<2x6x12xf32>, %w: tensor<3x12x16xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Einsum"(%x, %w) {name = "/Einsum", opset = 14 : i64, attrs = {equation = "btd,edh->bteh"}} : (tensor<2x6x12xf32>, tensor<3x12x16xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// Labels in both operands and in the output are matmul batch dimensions;
// those dropped from the output are contracted together.
// CHECK-LABEL: func.func @batched
// CHECK: %[[YT:.*]] = weft.transpose %arg0 {permutation = array<i64: 0, 3, 1, 2>}
// CHECK: %[[Y:.*]] = weft.reshape %[[YT]] : tensor<2x5x6x3xf32> -> tensor<2x5x18xf32>
// CHECK: %[[G:.*]] = weft.reshape %arg1 : tensor<2x6x3xf32> -> tensor<2x18x1xf32>
// CHECK: weft.matmul %[[Y]], %[[G]] : (tensor<2x5x18xf32>, tensor<2x18x1xf32>) -> tensor<2x5x1xf32>
func.func @batched(%y: tensor<2x6x3x5xf32>, %g: tensor<2x6x3xf32>) -> tensor<*xf32> {
  %0 = weft.onnx.node "Einsum"(%y, %g) {name = "/Einsum_1", opset = 14 : i64, attrs = {equation = "btec,bte->bc"}} : (tensor<2x6x3x5xf32>, tensor<2x6x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// One operand: sums and a transpose, no matmul. The implicit output of
// "ij" is "ij"; of "ji" it is "ij" too (alphabetical), a transpose.
// CHECK-LABEL: func.func @single
// CHECK: weft.reduce_sum %arg0 {axes = array<i64: 1>} : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
// CHECK: weft.transpose %{{.*}} {permutation = array<i64: 1, 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
// CHECK: weft.transpose %arg1 {permutation = array<i64: 1, 0>} : (tensor<3x5xf32>) -> tensor<5x3xf32>
// CHECK-NOT: weft.matmul
// CHECK: return
func.func @single(%x: tensor<2x3x4xf32>, %m: tensor<3x5xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Einsum"(%x) {name = "/sum", opset = 14 : i64, attrs = {equation = "ajb->ba"}} : (tensor<2x3x4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Einsum"(%m) {name = "/t", opset = 14 : i64, attrs = {equation = "ji"}} : (tensor<3x5xf32>) -> tensor<*xf32>
  return %0, %1 : tensor<*xf32>, tensor<*xf32>
}

// Three operands fold left to right; `...` covers leading dimensions and
// a size-1 one broadcasts.
// CHECK-LABEL: func.func @three_and_ellipsis
// CHECK-COUNT-2: weft.matmul
// Nothing summed: a mul, not a matmul.
// CHECK: %[[B:.*]] = weft.broadcast %arg3 : tensor<1x2x5xf32> -> tensor<4x2x5xf32>
// CHECK: %[[H:.*]] = weft.mul %arg2, %[[B]] : (tensor<4x2x5xf32>, tensor<4x2x5xf32>) -> tensor<4x2x5xf32>
// CHECK: %[[HR:.*]] = weft.reshape %[[H]] : tensor<4x2x5xf32> -> tensor<8x5xf32>
// CHECK: %[[P:.*]] = weft.matmul %[[HR]], %arg4 : (tensor<8x5xf32>, tensor<5x3xf32>) -> tensor<8x3xf32>
// CHECK: weft.reshape %[[P]] : tensor<8x3xf32> -> tensor<4x2x3xf32>
func.func @three_and_ellipsis(%x: tensor<4x5xf32>, %w: tensor<5x5xf32>, %z: tensor<4x2x5xf32>, %b: tensor<1x2x5xf32>, %v: tensor<5x3xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "Einsum"(%x, %w, %x) {name = "/bilinear", opset = 14 : i64, attrs = {equation = "bi,ij,bj->b"}} : (tensor<4x5xf32>, tensor<5x5xf32>, tensor<4x5xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Einsum"(%z, %b) {name = "/ellipsis", opset = 14 : i64, attrs = {equation = "...i,...i->...i"}} : (tensor<4x2x5xf32>, tensor<1x2x5xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "Einsum"(%1, %v) {name = "/ellipsis2", opset = 14 : i64, attrs = {equation = "...i,ik->...k"}} : (tensor<*xf32>, tensor<5x3xf32>) -> tensor<*xf32>
  return %0, %2 : tensor<*xf32>, tensor<*xf32>
}
