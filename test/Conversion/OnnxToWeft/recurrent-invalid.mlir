// RUN: weft-opt --weft-legalize-onnx -split-input-file -verify-diagnostics %s

func.func @lstm_activations(%x: tensor<5x3x4xf32>, %w: tensor<1x8x4xf32>, %r: tensor<1x8x2xf32>) -> tensor<*xf32> {
  // expected-error @below {{LSTM node '/lstm': attribute 'activations' = ["Sigmoid", "Relu", "Tanh"] is not supported (supported: Sigmoid, Tanh, Tanh per direction)}}
  %y, %yh, %yc = weft.onnx.node "LSTM"(%x, %w, %r) {name = "/lstm", opset = 14 : i64, attrs = {activations = ["Sigmoid", "Relu", "Tanh"], hidden_size = 2 : i64}} : (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %y : tensor<*xf32>
}

// -----

func.func @lstm_clip(%x: tensor<5x3x4xf32>, %w: tensor<1x8x4xf32>, %r: tensor<1x8x2xf32>) -> tensor<*xf32> {
  // expected-error @below {{LSTM node '/lstm': attribute 'clip' is not supported (weft's LSTM has default activations and no clipping)}}
  %y, %yh, %yc = weft.onnx.node "LSTM"(%x, %w, %r) {name = "/lstm", opset = 14 : i64, attrs = {clip = 3.0 : f32, hidden_size = 2 : i64}} : (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %y : tensor<*xf32>
}

// -----

func.func @lstm_layout(%x: tensor<3x5x4xf32>, %w: tensor<1x8x4xf32>, %r: tensor<1x8x2xf32>) -> tensor<*xf32> {
  // expected-error @below {{LSTM node '/lstm': attribute 'layout' = 1 is not supported (supported: 0, [T, B, ...]; PyTorch's batch_first exports a Transpose instead)}}
  %y, %yh, %yc = weft.onnx.node "LSTM"(%x, %w, %r) {name = "/lstm", opset = 14 : i64, attrs = {layout = 1 : i64, hidden_size = 2 : i64}} : (tensor<3x5x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %y : tensor<*xf32>
}

// -----

func.func @lstm_peepholes(%x: tensor<5x3x4xf32>, %w: tensor<1x8x4xf32>, %r: tensor<1x8x2xf32>, %p: tensor<1x6xf32>) -> tensor<*xf32> {
  %none = weft.onnx.none
  // expected-error @below {{LSTM node '/lstm': input 7 (P, peepholes) is not supported}}
  %y, %yh, %yc = weft.onnx.node "LSTM"(%x, %w, %r, %none, %none, %none, %none, %p) {name = "/lstm", opset = 14 : i64, attrs = {hidden_size = 2 : i64}} : (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>, none, none, none, none, tensor<1x6xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %y : tensor<*xf32>
}

// -----

func.func @lstm_sequence_lens(%x: tensor<5x3x4xf32>, %w: tensor<1x8x4xf32>, %r: tensor<1x8x2xf32>) -> tensor<*xf32> {
  %none = weft.onnx.none
  %lens = weft.constant dense<[5, 3, 5]> : tensor<3xi32>
  // expected-error @below {{LSTM node '/lstm': input 4 (sequence_lens) holds [5, 3, 5]; only sequences of the full length 5 are supported}}
  %y, %yh, %yc = weft.onnx.node "LSTM"(%x, %w, %r, %none, %lens) {name = "/lstm", opset = 14 : i64, attrs = {hidden_size = 2 : i64}} : (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>, none, tensor<3xi32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %y : tensor<*xf32>
}

// -----

func.func @lstm_weight_shape(%x: tensor<5x3x4xf32>, %w: tensor<1x8x3xf32>, %r: tensor<1x8x2xf32>) -> tensor<*xf32> {
  // expected-error @below {{LSTM node '/lstm': input 1 (W) must be [1, 8, 4], got [1, 8, 3]}}
  %y, %yh, %yc = weft.onnx.node "LSTM"(%x, %w, %r) {name = "/lstm", opset = 14 : i64, attrs = {hidden_size = 2 : i64}} : (tensor<5x3x4xf32>, tensor<1x8x3xf32>, tensor<1x8x2xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %y : tensor<*xf32>
}

// -----

func.func @gru_linear_before_reset(%x: tensor<5x3x4xf32>, %w: tensor<1x6x4xf32>, %r: tensor<1x6x2xf32>) -> tensor<*xf32> {
  // expected-error @below {{GRU node '/gru': attribute 'linear_before_reset' = 0 is not supported (supported: 1, as PyTorch's nn.GRU exports)}}
  %y, %yh = weft.onnx.node "GRU"(%x, %w, %r) {name = "/gru", opset = 14 : i64, attrs = {hidden_size = 2 : i64}} : (tensor<5x3x4xf32>, tensor<1x6x4xf32>, tensor<1x6x2xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %y : tensor<*xf32>
}

// -----

func.func @gru_direction(%x: tensor<5x3x4xf32>, %w: tensor<1x6x4xf32>, %r: tensor<1x6x2xf32>) -> tensor<*xf32> {
  // expected-error @below {{GRU node '/gru': input 2 (R) must be [2, 3H, H], got [1, 6, 2]}}
  %y, %yh = weft.onnx.node "GRU"(%x, %w, %r) {name = "/gru", opset = 14 : i64, attrs = {direction = "bidirectional", hidden_size = 2 : i64, linear_before_reset = 1 : i64}} : (tensor<5x3x4xf32>, tensor<1x6x4xf32>, tensor<1x6x2xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %y : tensor<*xf32>
}
