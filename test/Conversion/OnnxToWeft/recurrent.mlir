// RUN: weft-opt --weft-legalize-onnx --cse %s | FileCheck %s

// A bidirectional LSTM without biases or initial states: per direction the
// input projection is one matmul over all T * B rows, then one weft.lstm
// (the second reversed) from zero states; Y stacks the directions on axis
// 1, Y_h / Y_c take the forward direction's last step and the reverse
// direction's first.
// CHECK-LABEL: func.func @lstm_bidirectional
// CHECK: %[[XG:.*]] = weft.matmul %arg0, %{{.*}} {transpose_rhs = true} : (tensor<5x3x4xf32>, tensor<8x4xf32>) -> tensor<5x3x8xf32>
// CHECK: %[[Z:.*]] = weft.constant dense<0.000000e+00> : tensor<3x2xf32>
// CHECK: %[[Y0:.*]], %[[C0:.*]], %{{.*}} = weft.lstm %[[XG]], %{{.*}}, %[[Z]], %[[Z]] :
// CHECK: weft.slice %[[Y0]] {limits = array<i64: 5, 3, 2>, starts = array<i64: 4, 0, 0>
// CHECK: weft.slice %[[C0]] {limits = array<i64: 5, 3, 2>, starts = array<i64: 4, 0, 0>
// CHECK: %[[XG1:.*]] = weft.matmul %arg0, %{{.*}} {transpose_rhs = true}
// CHECK: %[[Y1:.*]], %[[C1:.*]], %{{.*}} = weft.lstm %[[XG1]], %{{.*}}, %[[Z]], %[[Z]] {reverse = true}
// CHECK: weft.slice %[[Y1]] {limits = array<i64: 1, 3, 2>, starts = array<i64: 0, 0, 0>
// CHECK: weft.slice %[[C1]] {limits = array<i64: 1, 3, 2>, starts = array<i64: 0, 0, 0>
// CHECK: weft.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<5x1x3x2xf32>, tensor<5x1x3x2xf32>) -> tensor<5x2x3x2xf32>
// CHECK: weft.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> tensor<2x3x2xf32>
// CHECK: weft.concat %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> tensor<2x3x2xf32>
func.func @lstm_bidirectional(%x: tensor<5x3x4xf32>, %w: tensor<2x8x4xf32>, %r: tensor<2x8x2xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>) {
  %y, %yh, %yc = weft.onnx.node "LSTM"(%x, %w, %r) {name = "/rnn/LSTM", opset = 14 : i64, attrs = {direction = "bidirectional", hidden_size = 2 : i64}} : (tensor<5x3x4xf32>, tensor<2x8x4xf32>, tensor<2x8x2xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %y, %yh, %yc : tensor<*xf32>, tensor<*xf32>, tensor<*xf32>
}

// The LSTM's two biases both add to the input gates; given initial states
// are sliced per direction; an absent sequence_lens is a weft.onnx.none.
// CHECK-LABEL: func.func @lstm_bias_states
// CHECK: %[[WB:.*]] = weft.slice %{{.*}} {limits = array<i64: 8>, starts = array<i64: 0>
// CHECK: %[[RB:.*]] = weft.slice %{{.*}} {limits = array<i64: 16>, starts = array<i64: 8>
// CHECK: %[[B:.*]] = weft.add %[[WB]], %[[RB]]
// CHECK: %[[XG:.*]] = weft.add %{{.*}}, %[[B]] : (tensor<5x3x8xf32>, tensor<8xf32>) -> tensor<5x3x8xf32>
// CHECK: %[[H:.*]] = weft.reshape %{{.*}} : tensor<1x3x2xf32> -> tensor<3x2xf32>
// CHECK: %[[C:.*]] = weft.reshape %{{.*}} : tensor<1x3x2xf32> -> tensor<3x2xf32>
// CHECK: weft.lstm %[[XG]], %{{.*}}, %[[H]], %[[C]] :
func.func @lstm_bias_states(%x: tensor<5x3x4xf32>, %w: tensor<1x8x4xf32>, %r: tensor<1x8x2xf32>, %b: tensor<1x16xf32>, %h: tensor<1x3x2xf32>, %c: tensor<1x3x2xf32>) -> tensor<*xf32> {
  %none = weft.onnx.none
  %y, %yh, %yc = weft.onnx.node "LSTM"(%x, %w, %r, %b, %none, %h, %c) {name = "/rnn/LSTM", opset = 14 : i64, attrs = {hidden_size = 2 : i64}} : (tensor<5x3x4xf32>, tensor<1x8x4xf32>, tensor<1x8x2xf32>, tensor<1x16xf32>, none, tensor<1x3x2xf32>, tensor<1x3x2xf32>) -> (tensor<*xf32>, tensor<*xf32>, tensor<*xf32>)
  return %yh : tensor<*xf32>
}

// A reverse GRU (linear_before_reset = 1, as PyTorch exports): only the
// input bias joins the input gates; the recurrent bias stays an operand.
// Y_h is the state after the reverse direction's last step, time 0.
// CHECK-LABEL: func.func @gru_reverse
// CHECK: %[[WB:.*]] = weft.slice %{{.*}} {limits = array<i64: 6>, starts = array<i64: 0>
// CHECK: %[[RB:.*]] = weft.slice %{{.*}} {limits = array<i64: 12>, starts = array<i64: 6>
// CHECK: %[[XG:.*]] = weft.add %{{.*}}, %[[WB]] : (tensor<5x3x6xf32>, tensor<6xf32>) -> tensor<5x3x6xf32>
// CHECK: %[[Y:.*]], %{{.*}} = weft.gru %[[XG]], %{{.*}}, %[[RB]], %{{.*}} {reverse = true} : (tensor<5x3x6xf32>, tensor<6x2xf32>, tensor<6xf32>, tensor<3x2xf32>) -> (tensor<5x3x2xf32>, tensor<5x3x8xf32>)
// CHECK: weft.slice %[[Y]] {limits = array<i64: 1, 3, 2>, starts = array<i64: 0, 0, 0>
func.func @gru_reverse(%x: tensor<5x3x4xf32>, %w: tensor<1x6x4xf32>, %r: tensor<1x6x2xf32>, %b: tensor<1x12xf32>) -> (tensor<*xf32>, tensor<*xf32>) {
  %y, %yh = weft.onnx.node "GRU"(%x, %w, %r, %b) {name = "/rnn/GRU", opset = 14 : i64, attrs = {direction = "reverse", hidden_size = 2 : i64, linear_before_reset = 1 : i64}} : (tensor<5x3x4xf32>, tensor<1x6x4xf32>, tensor<1x6x2xf32>, tensor<1x12xf32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %y, %yh : tensor<*xf32>, tensor<*xf32>
}

// Default activations spelled out and sequence_lens holding the full
// length are what the weft ops compute, so they are accepted.
// CHECK-LABEL: func.func @gru_explicit_defaults
// CHECK: weft.gru
func.func @gru_explicit_defaults(%x: tensor<5x3x4xf32>, %w: tensor<1x6x4xf32>, %r: tensor<1x6x2xf32>) -> tensor<*xf32> {
  %none = weft.onnx.none
  %lens = weft.constant dense<5> : tensor<3xi32>
  %y, %yh = weft.onnx.node "GRU"(%x, %w, %r, %none, %lens) {name = "/rnn/GRU", opset = 14 : i64, attrs = {activations = ["Sigmoid", "Tanh"], hidden_size = 2 : i64, linear_before_reset = 1 : i64}} : (tensor<5x3x4xf32>, tensor<1x6x4xf32>, tensor<1x6x2xf32>, none, tensor<3xi32>) -> (tensor<*xf32>, tensor<*xf32>)
  return %y : tensor<*xf32>
}
