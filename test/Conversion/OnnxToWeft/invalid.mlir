// RUN: weft-opt --weft-legalize-onnx -split-input-file -verify-diagnostics %s

func.func @unsupported_op(%x: tensor<4xf32>) -> tensor<*xf32> {
  // expected-error @below {{unsupported ONNX op 'NonZero' (node '/x/NonZero', opset 17); supported ops: Abs, Add, And, ArgMax, ArgMin, AveragePool, BatchNormalization, Cast}}
  %0 = weft.onnx.node "NonZero"(%x) {name = "/x/NonZero", opset = 17 : i64} : (tensor<4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @opset_out_of_range(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> tensor<*xf32> {
  // expected-error @below {{ONNX op 'LayerNormalization' (node '/ln') at opset 13 is not supported; supported opsets: 17-21}}
  %0 = weft.onnx.node "LayerNormalization"(%x, %g) {name = "/ln", opset = 13 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @dynamic_reshape_shape(%x: tensor<4x8xf32>, %s: tensor<2xi64>) -> tensor<*xf32> {
  // expected-error @below {{Reshape node '/Reshape': input 1 (shape) must be computable at compile time, but it is computed at run time (a function argument); this usually comes from a dynamic dimension: give static input shapes with --input-shape}}
  %0 = weft.onnx.node "Reshape"(%x, %s) {name = "/Reshape", opset = 13 : i64} : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @computed_slice_start(%x: tensor<4x8xf32>, %i: tensor<1xi64>) -> tensor<*xf32> {
  %c = weft.constant dense<[8]> : tensor<1xi64>
  %start = weft.onnx.node "Add"(%i, %c) {name = "/Add", opset = 13 : i64} : (tensor<1xi64>, tensor<1xi64>) -> tensor<*xi64>
  // expected-error @below {{Slice node '/Slice': input 1 (starts) must be computable at compile time, but it is computed at run time by 'weft.add'}}
  %0 = weft.onnx.node "Slice"(%x, %start, %c) {name = "/Slice", opset = 13 : i64} : (tensor<4x8xf32>, tensor<*xi64>, tensor<1xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @dynamic_input(%x: tensor<?x8xf32>) -> tensor<*xf32> {
  // expected-error @below {{Relu node '/Relu': input 0 (X) has type 'tensor<?x8xf32>'; weft needs statically shaped tensors (fix dynamic dimensions with --input-shape)}}
  %0 = weft.onnx.node "Relu"(%x) {name = "/Relu", opset = 13 : i64} : (tensor<?x8xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

// 3-D Conv is supported (convolution3d.mlir); 3-D ConvTranspose is not.
func.func @conv_transpose3d(%x: tensor<1x3x4x4x4xf32>, %w: tensor<3x8x3x3x3xf32>) -> tensor<*xf32> {
  // expected-error @below {{ConvTranspose node '/ConvTranspose': only 1-D and 2-D transposed convolutions (input of rank 3 or 4) are supported, got input 0 (X) of shape 1x3x4x4x4 (rank 5)}}
  %0 = weft.onnx.node "ConvTranspose"(%x, %w) {name = "/ConvTranspose", opset = 17 : i64} : (tensor<1x3x4x4x4xf32>, tensor<3x8x3x3x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @maxpool_dilations(%x: tensor<1x1x5x5xf32>) -> tensor<*xf32> {
  // expected-error @below {{MaxPool node '/MaxPool': attribute 'dilations' = [2, 2] is not supported (supported: all 1)}}
  %0 = weft.onnx.node "MaxPool"(%x) {name = "/MaxPool", opset = 12 : i64, attrs = {dilations = array<i64: 2, 2>, kernel_shape = array<i64: 2, 2>}} : (tensor<1x1x5x5xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @conv_transpose_output_shape(%x: tensor<1x2x4x4xf32>, %w: tensor<2x2x3x3xf32>) -> tensor<*xf32> {
  // expected-error @below {{ConvTranspose node '/ConvTranspose': attribute 'output_shape' is not supported; give 'pads' and 'output_padding' instead}}
  %0 = weft.onnx.node "ConvTranspose"(%x, %w) {name = "/ConvTranspose", opset = 17 : i64, attrs = {output_shape = array<i64: 9, 9>, strides = array<i64: 2, 2>}} : (tensor<1x2x4x4xf32>, tensor<2x2x3x3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @batch_norm_running_mean_used(%x: tensor<4x8xf32>, %p: tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  // expected-error @below {{BatchNormalization node '/bn': output 1 is used, but weft supports only the first 1 output(s) of BatchNormalization}}
  %0:3 = weft.onnx.node "BatchNormalization"(%x, %p, %p, %p, %p) {name = "/bn", opset = 15 : i64, attrs = {training_mode = 1 : i64}} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %0#0, %0#1 : tensor<*xf32>, tensor<*xf32>
}

// -----

func.func @batch_norm_param_shape(%x: tensor<4x8xf32>, %p: tensor<8xf32>, %q: tensor<4xf32>) -> tensor<*xf32> {
  // expected-error @below {{BatchNormalization node '/bn': input 4 (input_var) has shape 4, expected 8 (one per channel)}}
  %0 = weft.onnx.node "BatchNormalization"(%x, %p, %p, %p, %q) {name = "/bn", opset = 15 : i64} : (tensor<4x8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<8xf32>, tensor<4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @resize_cubic(%x: tensor<1x1x2x2xf32>) -> tensor<*xf32> {
  %none = weft.onnx.none
  %scales = weft.constant dense<[1.0, 1.0, 2.0, 2.0]> : tensor<4xf32>
  // expected-error @below {{Resize node '/Resize': attribute 'mode' = 'cubic' is not supported (supported: 'nearest', 'linear')}}
  %0 = weft.onnx.node "Resize"(%x, %none, %scales) {name = "/Resize", opset = 13 : i64, attrs = {mode = "cubic"}} : (tensor<1x1x2x2xf32>, none, tensor<4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @maxpool_storage_order(%x: tensor<1x1x4x4xf32>) -> tensor<*xf32> {
  // expected-error @below {{MaxPool node '/MaxPool': attribute 'storage_order' = 1 is not supported (supported: 0 (row major))}}
  %0 = weft.onnx.node "MaxPool"(%x) {name = "/MaxPool", opset = 12 : i64, attrs = {kernel_shape = array<i64: 2, 2>, storage_order = 1 : i64}} : (tensor<1x1x4x4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @maxpool_indices_used(%x: tensor<1x1x4x4xf32>) -> (tensor<*xf32>, tensor<*xi64>) {
  // expected-error @below {{MaxPool node '/MaxPool': output 1 is used, but weft supports only the first 1 output(s) of MaxPool}}
  %0:2 = weft.onnx.node "MaxPool"(%x) {name = "/MaxPool", opset = 12 : i64, attrs = {kernel_shape = array<i64: 2, 2>}} : (tensor<1x1x4x4xf32>) -> (tensor<*xf32>, tensor<*xi64>)
  return %0#0, %0#1 : tensor<*xf32>, tensor<*xi64>
}

// -----

func.func @conv_auto_pad(%x: tensor<1x1x4x4xf32>, %w: tensor<1x1x2x2xf32>) -> tensor<*xf32> {
  // expected-error @below {{Conv node '/Conv': attribute 'auto_pad' = 'SAME' is not supported (supported: NOTSET, VALID, SAME_UPPER, SAME_LOWER)}}
  %0 = weft.onnx.node "Conv"(%x, %w) {name = "/Conv", opset = 17 : i64, attrs = {auto_pad = "SAME"}} : (tensor<1x1x4x4xf32>, tensor<1x1x2x2xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @gemm_bad_bias(%a: tensor<4x8xf32>, %b: tensor<8x10xf32>, %c: tensor<3xf32>) -> tensor<*xf32> {
  // expected-error @below {{Gemm node '/Gemm': input 2 (C) of shape 3 does not broadcast to the result shape 4x10}}
  %0 = weft.onnx.node "Gemm"(%a, %b, %c) {name = "/Gemm", opset = 13 : i64} : (tensor<4x8xf32>, tensor<8x10xf32>, tensor<3xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @cast_unsupported(%x: tensor<4xf32>) -> tensor<*xf32> {
  // expected-error @below {{Cast node '/Cast': attribute 'to' = 3 is not supported (supported: 1 (float), 6 (int32), 7 (int64), 9 (bool), 10 (float16), 11 (double), 16 (bfloat16))}}
  %0 = weft.onnx.node "Cast"(%x) {name = "/Cast", opset = 13 : i64, attrs = {to = 3 : i64}} : (tensor<4xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @layer_norm_mean_used(%x: tensor<4x8xf32>, %g: tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  // expected-error @below {{LayerNormalization node '/ln': output 1 is used, but weft supports only the first 1 output(s) of LayerNormalization}}
  %0:2 = weft.onnx.node "LayerNormalization"(%x, %g) {name = "/ln", opset = 17 : i64} : (tensor<4x8xf32>, tensor<8xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %0#0, %0#1 : tensor<*xf32>, tensor<*xf32>
}

// -----

func.func @dropout_training_not_constant(%x: tensor<4xf32>, %t: tensor<i1>) -> tensor<*xf32> {
  %none = weft.onnx.none
  // expected-error @below {{Dropout node '/Dropout': input 2 (training_mode) must be a constant}}
  %0 = weft.onnx.node "Dropout"(%x, %none, %t) {name = "/Dropout", opset = 13 : i64} : (tensor<4xf32>, none, tensor<i1>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @shapes_do_not_broadcast(%a: tensor<3x4xf32>, %b: tensor<5x6xf32>) -> tensor<*xf32> {
  // expected-error @below {{Add node '/Add': cannot build 'weft.add': operand shapes 3x4 and 5x6 do not broadcast}}
  %0 = weft.onnx.node "Add"(%a, %b) {name = "/Add", opset = 13 : i64} : (tensor<3x4xf32>, tensor<5x6xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @relu_on_integers(%x: tensor<4xi64>) -> tensor<*xi64> {
  // expected-error @below {{Relu node '/Relu': cannot build 'weft.relu': 'weft.relu' op operand #0 must be statically shaped tensor of}}
  %0 = weft.onnx.node "Relu"(%x) {name = "/Relu", opset = 13 : i64} : (tensor<4xi64>) -> tensor<*xi64>
  return %0 : tensor<*xi64>
}

// -----

func.func @bad_reshape(%x: tensor<4x8xf32>) -> tensor<*xf32> {
  %s = weft.constant dense<[5, -1]> : tensor<2xi64>
  // expected-error @below {{Reshape node '/Reshape': cannot reshape 4x8 to [5, -1]}}
  %0 = weft.onnx.node "Reshape"(%x, %s) {name = "/Reshape", opset = 13 : i64} : (tensor<4x8xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @softmax_axis(%x: tensor<4x8xf32>) -> tensor<*xf32> {
  // expected-error @below {{Softmax node '/Softmax': axis 2 is out of range for rank 2 (expected -2 <= axis < 2)}}
  %0 = weft.onnx.node "Softmax"(%x) {name = "/Softmax", opset = 13 : i64, attrs = {axis = 2 : i64}} : (tensor<4x8xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @wrong_attribute_kind(%x: tensor<4x8xf32>) -> tensor<*xf32> {
  // expected-error @below {{Softmax node '/Softmax': attribute 'axis' must be an integer, got "last"}}
  %0 = weft.onnx.node "Softmax"(%x) {name = "/Softmax", opset = 13 : i64, attrs = {axis = "last"}} : (tensor<4x8xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @missing_input(%x: tensor<4x8xf32>) -> tensor<*xf32> {
  // expected-error @below {{MatMul node '/MatMul': required input 1 (B) is missing}}
  %0 = weft.onnx.node "MatMul"(%x) {name = "/MatMul", opset = 13 : i64} : (tensor<4x8xf32>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @expand_mismatch(%x: tensor<3x4xf32>) -> tensor<*xf32> {
  %s = weft.constant dense<[2, 5]> : tensor<2xi64>
  // expected-error @below {{Expand node '/Expand': input shape 3x4 does not broadcast with shape [2, 5]}}
  %0 = weft.onnx.node "Expand"(%x, %s) {name = "/Expand", opset = 13 : i64} : (tensor<3x4xf32>, tensor<2xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @squeeze_non_unit(%x: tensor<3x4xf32>) -> tensor<*xf32> {
  %a = weft.constant dense<[0]> : tensor<1xi64>
  // expected-error @below {{Squeeze node '/Squeeze': cannot squeeze axis 0 of size 3 (input shape 3x4)}}
  %0 = weft.onnx.node "Squeeze"(%x, %a) {name = "/Squeeze", opset = 13 : i64} : (tensor<3x4xf32>, tensor<1xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @pad_wrap_opset13(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  %pads = weft.constant dense<[0, 1, 0, 1]> : tensor<4xi64>
  // expected-error @below {{Pad node '/Pad': attribute 'mode' = 'wrap' is not supported (supported: 'constant', 'reflect', 'edge', 'wrap' (from opset 19))}}
  %0 = weft.onnx.node "Pad"(%x, %pads) {name = "/Pad", opset = 13 : i64, attrs = {mode = "wrap"}} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// -----

func.func @pad_reflect_too_wide(%x: tensor<2x3xf32>) -> tensor<*xf32> {
  %pads = weft.constant dense<[0, 3, 0, 0]> : tensor<4xi64>
  // expected-error @below {{Pad node '/Pad': cannot pad axis 1 of size 3 by 3 and 0 in reflect mode}}
  %0 = weft.onnx.node "Pad"(%x, %pads) {name = "/Pad", opset = 13 : i64, attrs = {mode = "reflect"}} : (tensor<2x3xf32>, tensor<4xi64>) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}
