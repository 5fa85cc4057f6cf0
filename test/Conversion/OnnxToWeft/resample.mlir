// RUN: weft-opt --weft-legalize-onnx %s | FileCheck %s

// Resize maps every output index of a resized axis to fixed input indices:
// nearest mode gathers them, linear mode blends two gathers with constant
// weights, one axis at a time.
// CHECK-LABEL: func.func @resize
// PyTorch's nn.Upsample(mode="nearest"): asymmetric coordinates, floor.
// CHECK: %[[IH:.*]] = weft.constant dense<[0, 0, 1, 1]> : tensor<4xi64>
// CHECK: %[[NH:.*]] = weft.gather %arg0, %[[IH]] {axis = 2 : i64} : (tensor<1x1x2x3xf32>, tensor<4xi64>) -> tensor<1x1x4x3xf32>
// CHECK: %[[IW:.*]] = weft.constant dense<[0, 0, 1, 1, 2, 2]> : tensor<6xi64>
// CHECK: %[[NEAREST:.*]] = weft.gather %[[NH]], %[[IW]] {axis = 3 : i64} : (tensor<1x1x4x3xf32>, tensor<6xi64>) -> tensor<1x1x4x6xf32>
// Bilinear, align_corners=False: source rows -0.25, 0.25, 0.75, 1.25
// clamp to [0, 1].
// CHECK: %[[LO:.*]] = weft.constant dense<[0, 0, 0, 1]> : tensor<4xi64>
// CHECK: %[[GLO:.*]] = weft.gather %arg0, %[[LO]] {axis = 2 : i64}
// CHECK: %[[WH:.*]] = weft.constant dense<{{\[\[\[\[}}0.000000e+00], [2.500000e-01], [7.500000e-01], [0.000000e+00]]]]> : tensor<1x1x4x1xf32>
// CHECK: %[[HI:.*]] = weft.constant dense<1> : tensor<4xi64>
// CHECK: %[[GHI:.*]] = weft.gather %arg0, %[[HI]] {axis = 2 : i64}
// CHECK: %[[DIFF:.*]] = weft.sub %[[GHI]], %[[GLO]]
// CHECK: %[[STEP:.*]] = weft.mul %[[DIFF]], %[[WH]]
// CHECK: %[[ROWS:.*]] = weft.add %[[GLO]], %[[STEP]] : (tensor<1x1x4x3xf32>, tensor<1x1x4x3xf32>) -> tensor<1x1x4x3xf32>
// CHECK: weft.gather %[[ROWS]], %{{.*}} {axis = 3 : i64}
// CHECK: weft.constant dense<{{\[\[\[\[}}0.000000e+00, 2.500000e-01, 7.500000e-01, 2.500000e-01, 7.500000e-01, 0.000000e+00]]]]> : tensor<1x1x1x6xf32>
// CHECK: %[[BILINEAR:.*]] = weft.add {{.*}} -> tensor<1x1x4x6xf32>
// Sizes instead of (empty) scales; align_corners; the unresized axis stays.
// CHECK: weft.constant dense<[0, 0, 1]> : tensor<3xi64>
// CHECK: weft.constant dense<{{\[\[\[\[}}0.000000e+00], [5.000000e-01], [0.000000e+00]]]]> : tensor<1x1x3x1xf32>
// CHECK-NOT: axis = 3
// CHECK: %[[CORNERS:.*]] = weft.add {{.*}} -> tensor<1x1x3x3xf32>
// CHECK: return %[[NEAREST]], %[[BILINEAR]], %[[CORNERS]]
func.func @resize(%x: tensor<1x1x2x3xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %none = weft.onnx.none
  %scales = weft.constant dense<[1.0, 1.0, 2.0, 2.0]> : tensor<4xf32>
  %0 = weft.onnx.node "Resize"(%x, %none, %scales) {name = "nearest", opset = 13 : i64, attrs = {coordinate_transformation_mode = "asymmetric", mode = "nearest", nearest_mode = "floor"}} : (tensor<1x1x2x3xf32>, none, tensor<4xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "Resize"(%x, %none, %scales) {name = "bilinear", opset = 13 : i64, attrs = {coordinate_transformation_mode = "pytorch_half_pixel", mode = "linear"}} : (tensor<1x1x2x3xf32>, none, tensor<4xf32>) -> tensor<*xf32>
  %empty = weft.constant dense<> : tensor<0xf32>
  %sizes = weft.constant dense<[1, 1, 3, 3]> : tensor<4xi64>
  %2 = weft.onnx.node "Resize"(%x, %none, %empty, %sizes) {name = "corners", opset = 13 : i64, attrs = {coordinate_transformation_mode = "align_corners", mode = "linear"}} : (tensor<1x1x2x3xf32>, none, tensor<0xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// DepthToSpace (DCR, and CRD as PyTorch's PixelShuffle exports) and
// SpaceToDepth are reshape, transpose, reshape.
// CHECK-LABEL: func.func @depth_to_space
// CHECK: %[[D:.*]] = weft.reshape %arg0 : tensor<1x8x2x3xf32> -> tensor<1x2x2x2x2x3xf32>
// CHECK: %[[DT:.*]] = weft.transpose %[[D]] {permutation = array<i64: 0, 3, 4, 1, 5, 2>}
// CHECK: %[[DCR:.*]] = weft.reshape %[[DT]] : tensor<1x2x2x2x3x2xf32> -> tensor<1x2x4x6xf32>
// CHECK: %[[C:.*]] = weft.reshape %arg0 : tensor<1x8x2x3xf32> -> tensor<1x2x2x2x2x3xf32>
// CHECK: %[[CT:.*]] = weft.transpose %[[C]] {permutation = array<i64: 0, 1, 4, 2, 5, 3>}
// CHECK: %[[CRD:.*]] = weft.reshape %[[CT]] : tensor<1x2x2x2x3x2xf32> -> tensor<1x2x4x6xf32>
// CHECK: %[[ST:.*]] = weft.transpose %{{.*}} {permutation = array<i64: 0, 3, 5, 1, 2, 4>} : (tensor<1x2x2x2x3x2xf32>) -> tensor<1x2x2x2x2x3xf32>
// CHECK: %[[S2D:.*]] = weft.reshape %[[ST]] : tensor<1x2x2x2x2x3xf32> -> tensor<1x8x2x3xf32>
// CHECK: return %[[DCR]], %[[CRD]], %[[S2D]]
func.func @depth_to_space(%x: tensor<1x8x2x3xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %0 = weft.onnx.node "DepthToSpace"(%x) {name = "dcr", opset = 13 : i64, attrs = {blocksize = 2 : i64}} : (tensor<1x8x2x3xf32>) -> tensor<*xf32>
  %1 = weft.onnx.node "DepthToSpace"(%x) {name = "crd", opset = 13 : i64, attrs = {blocksize = 2 : i64, mode = "CRD"}} : (tensor<1x8x2x3xf32>) -> tensor<*xf32>
  %2 = weft.onnx.node "SpaceToDepth"(%0) {name = "s2d", opset = 13 : i64, attrs = {blocksize = 2 : i64}} : (tensor<*xf32>) -> tensor<*xf32>
  return %0, %1, %2 : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}
