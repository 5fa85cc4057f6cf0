// RUN: weft-opt %s -split-input-file --weft-mixed-precision | FileCheck %s

// f32 arguments are cast to bf16 once where used (parameters stay f32 in
// the signature: master weights); float constants and every float result
// become bf16, including casts the model performs; integer values stay;
// results are cast back to the declared f32.

// CHECK-LABEL: func.func @forward(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<8x4xf32> {weft.param = "w"}
// CHECK-SAME:      %[[X:[^:]*]]: tensor<2x8xf32> {weft.input = "input"}
// CHECK-SAME:      %[[T:[^:]*]]: tensor<2xi64> {weft.input = "tokens"}
// CHECK-SAME:      -> (tensor<2x4xf32>, tensor<2xi64>)
// CHECK-NEXT:    %[[W16:.*]] = weft.cast %[[W]] : tensor<8x4xf32> -> tensor<8x4xbf16>
// CHECK-NEXT:    %[[X16:.*]] = weft.cast %[[X]] : tensor<2x8xf32> -> tensor<2x8xbf16>
// CHECK-NEXT:    %[[Y:.*]] = weft.matmul %[[X16]], %[[W16]] : (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
// CHECK-NEXT:    %[[C:.*]] = weft.constant dense<5.000000e-01> : tensor<bf16>
// CHECK-NEXT:    %[[S:.*]] = weft.mul %[[Y]], %[[C]] : (tensor<2x4xbf16>, tensor<bf16>) -> tensor<2x4xbf16>
// CHECK-NEXT:    %[[TF:.*]] = weft.cast %[[T]] : tensor<2xi64> -> tensor<2xbf16>
// CHECK-NEXT:    %[[TR:.*]] = weft.reshape %[[TF]] : tensor<2xbf16> -> tensor<2x1xbf16>
// CHECK-NEXT:    %[[Z:.*]] = weft.add %[[S]], %[[TR]] : (tensor<2x4xbf16>, tensor<2x1xbf16>) -> tensor<2x4xbf16>
// CHECK-NEXT:    %[[WIDE:.*]] = weft.cast %[[Z]] : tensor<2x4xbf16> -> tensor<2x4xf32>
// CHECK-NEXT:    return %[[WIDE]], %[[T]] : tensor<2x4xf32>, tensor<2xi64>
func.func @forward(%w: tensor<8x4xf32> {weft.param = "w"},
                   %x: tensor<2x8xf32> {weft.input = "input"},
                   %t: tensor<2xi64> {weft.input = "tokens"})
    -> (tensor<2x4xf32>, tensor<2xi64>) {
  %y = weft.matmul %x, %w : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %c = weft.constant dense<0.5> : tensor<f32>
  %s = weft.mul %y, %c : (tensor<2x4xf32>, tensor<f32>) -> tensor<2x4xf32>
  %tf = weft.cast %t : tensor<2xi64> -> tensor<2xf32>
  %tr = weft.reshape %tf : tensor<2xf32> -> tensor<2x1xf32>
  %z = weft.add %s, %tr : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
  return %z, %t : tensor<2x4xf32>, tensor<2xi64>
}

// -----

// A constant held as a dense resource is kept and narrowed by a cast; an
// unused argument gets no cast; other functions are left alone.

// CHECK-LABEL: func.func @forward(
// CHECK-SAME:      %[[W:[^:]*]]: tensor<4xf32> {weft.param = "w"}
// CHECK-NEXT:    %[[W16:.*]] = weft.cast %[[W]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT:    %[[R:.*]] = weft.constant dense_resource<blob> : tensor<4xf32>
// CHECK-NEXT:    %[[R16:.*]] = weft.cast %[[R]] : tensor<4xf32> -> tensor<4xbf16>
// CHECK-NEXT:    %[[SUM:.*]] = weft.add %[[W16]], %[[R16]] : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>
// CHECK-NEXT:    %[[WIDE:.*]] = weft.cast %[[SUM]] : tensor<4xbf16> -> tensor<4xf32>
// CHECK-NEXT:    return %[[WIDE]]
// CHECK-LABEL: func.func @other(
// CHECK-NEXT:    weft.tanh %{{.*}} : tensor<4xf32>
func.func @forward(%w: tensor<4xf32> {weft.param = "w"},
                   %unused: tensor<4xf32> {weft.input = "unused"}) -> tensor<4xf32> {
  %r = weft.constant dense_resource<blob> : tensor<4xf32>
  %s = weft.add %w, %r : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %s : tensor<4xf32>
}
func.func @other(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = weft.tanh %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
{-#
  dialect_resources: {
    builtin: {
      blob: "0x040000000000803F0000803F0000803F0000803F"
    }
  }
#-}
