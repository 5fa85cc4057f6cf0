// RUN: weft-opt %s -split-input-file --weft-attach-loss | FileCheck %s --check-prefix=CE
// RUN: weft-opt %s -split-input-file --weft-attach-loss=kind=mse | FileCheck %s --check-prefix=MSE

// Cross-entropy: int64 labels shaped like the output without its class
// axis; @forward stays as it was.

// CE-LABEL: func.func @forward(
// CE-SAME:      -> tensor<2x3x5xf32>
// CE-LABEL: func.func @loss(
// CE-SAME:      %[[W:[^:]*]]: tensor<4x5xf32> {weft.param = "w"}
// CE-SAME:      %[[X:[^:]*]]: tensor<2x3x4xf32> {weft.input = "input"}
// CE-SAME:      %[[Y:[^:]*]]: tensor<2x3xi64> {weft.input = "labels"}
// CE-SAME:      -> (tensor<f32> {weft.output = "loss"})
// CE:           %[[OUT:.*]] = weft.matmul %[[X]], %[[W]]
// CE:           %[[L:.*]] = weft.cross_entropy %[[OUT]], %[[Y]] : (tensor<2x3x5xf32>, tensor<2x3xi64>) -> tensor<f32>
// CE:           return %[[L]] : tensor<f32>

// MSE-LABEL: func.func @loss(
// MSE-SAME:      %[[Y:[^:]*]]: tensor<2x3x5xf32> {weft.input = "labels"}
// MSE-SAME:      -> (tensor<f32> {weft.output = "loss"})
// MSE:           %[[OUT:.*]] = weft.matmul
// MSE:           %[[L:.*]] = weft.mse %[[OUT]], %[[Y]] : (tensor<2x3x5xf32>, tensor<2x3x5xf32>) -> tensor<f32>
// MSE:           return %[[L]] : tensor<f32>
func.func @forward(%w: tensor<4x5xf32> {weft.param = "w"},
                   %x: tensor<2x3x4xf32> {weft.input = "input"})
    -> tensor<2x3x5xf32> {
  %0 = weft.matmul %x, %w : (tensor<2x3x4xf32>, tensor<4x5xf32>) -> tensor<2x3x5xf32>
  return %0 : tensor<2x3x5xf32>
}

// -----

// A bf16 output (a model that was not run through the mixed-precision pass)
// is widened: losses are computed in f32. Only output 0 is used.

// CE-LABEL: func.func @loss(
// CE-SAME:      %{{[^:]*}}: tensor<4xi64> {weft.input = "labels"}
// CE-SAME:      -> (tensor<f32> {weft.output = "loss"})
// CE:           %[[WIDE:.*]] = weft.cast %{{.*}} : tensor<4x3xbf16> -> tensor<4x3xf32>
// CE:           weft.cross_entropy %[[WIDE]], %{{.*}} : (tensor<4x3xf32>, tensor<4xi64>)

// MSE-LABEL: func.func @loss(
// MSE-SAME:      %{{[^:]*}}: tensor<4x3xf32> {weft.input = "labels"}
// MSE:           %[[WIDE:.*]] = weft.cast %{{.*}} : tensor<4x3xbf16> -> tensor<4x3xf32>
// MSE:           weft.mse %[[WIDE]]
func.func @forward(%w: tensor<4x3xbf16> {weft.param = "w"})
    -> (tensor<4x3xbf16>, tensor<4x3xbf16>) {
  %0 = weft.tanh %w : tensor<4x3xbf16>
  return %0, %w : tensor<4x3xbf16>, tensor<4x3xbf16>
}
