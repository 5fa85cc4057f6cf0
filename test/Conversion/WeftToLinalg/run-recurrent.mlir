// lstm, gru and their adjoints in both directions, lowered (one scf.for over
// time each) and executed against weft-eval on the same random inputs
// (test/lib/check_lowering.py). The adjoints read the forward ops' results,
// as autodiff builds them.
// RUN: %check_lowering %s | FileCheck %s
// CHECK-NOT: FAIL

// CHECK: OK @lstm
func.func @lstm(%xg: tensor<6x3x16xf32>, %r: tensor<16x4xf32>, %h0: tensor<3x4xf32>, %c0: tensor<3x4xf32>,
                %dy: tensor<6x3x4xf32>, %dc: tensor<6x3x4xf32>)
    -> (tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>, tensor<6x3x16xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %y, %c, %g = weft.lstm %xg, %r, %h0, %c0 : (tensor<6x3x16xf32>, tensor<16x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>)
  %dx, %dh0, %dc0 = weft.lstm_grad %dy, %dc, %r, %h0, %c0, %y, %c, %g : (tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<16x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>) -> (tensor<6x3x16xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  return %y, %c, %g, %dx, %dh0, %dc0 : tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>, tensor<6x3x16xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// CHECK: OK @lstm_reverse
func.func @lstm_reverse(%xg: tensor<5x2x12xf32>, %r: tensor<12x3xf32>, %h0: tensor<2x3xf32>, %c0: tensor<2x3xf32>,
                        %dy: tensor<5x2x3xf32>, %dc: tensor<5x2x3xf32>)
    -> (tensor<5x2x3xf32>, tensor<5x2x3xf32>, tensor<5x2x12xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %y, %c, %g = weft.lstm %xg, %r, %h0, %c0 {reverse = true} : (tensor<5x2x12xf32>, tensor<12x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<5x2x3xf32>, tensor<5x2x3xf32>, tensor<5x2x12xf32>)
  %dx, %dh0, %dc0 = weft.lstm_grad %dy, %dc, %r, %h0, %c0, %y, %c, %g {reverse = true} : (tensor<5x2x3xf32>, tensor<5x2x3xf32>, tensor<12x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<5x2x3xf32>, tensor<5x2x3xf32>, tensor<5x2x12xf32>) -> (tensor<5x2x12xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  return %y, %c, %dx, %dh0, %dc0 : tensor<5x2x3xf32>, tensor<5x2x3xf32>, tensor<5x2x12xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// CHECK: OK @gru
func.func @gru(%xg: tensor<6x3x12xf32>, %r: tensor<12x4xf32>, %rb: tensor<12xf32>, %h0: tensor<3x4xf32>, %dy: tensor<6x3x4xf32>)
    -> (tensor<6x3x4xf32>, tensor<6x3x16xf32>, tensor<6x3x12xf32>, tensor<6x3x12xf32>, tensor<3x4xf32>) {
  %y, %g = weft.gru %xg, %r, %rb, %h0 : (tensor<6x3x12xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<3x4xf32>) -> (tensor<6x3x4xf32>, tensor<6x3x16xf32>)
  %dx, %dp, %dh0 = weft.gru_grad %dy, %r, %h0, %y, %g : (tensor<6x3x4xf32>, tensor<12x4xf32>, tensor<3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>) -> (tensor<6x3x12xf32>, tensor<6x3x12xf32>, tensor<3x4xf32>)
  return %y, %g, %dx, %dp, %dh0 : tensor<6x3x4xf32>, tensor<6x3x16xf32>, tensor<6x3x12xf32>, tensor<6x3x12xf32>, tensor<3x4xf32>
}

// CHECK: OK @gru_reverse
func.func @gru_reverse(%xg: tensor<1x2x6xf32>, %r: tensor<6x2xf32>, %rb: tensor<6xf32>, %h0: tensor<2x2xf32>, %dy: tensor<1x2x2xf32>)
    -> (tensor<1x2x2xf32>, tensor<1x2x6xf32>, tensor<1x2x6xf32>, tensor<2x2xf32>) {
  %y, %g = weft.gru %xg, %r, %rb, %h0 {reverse = true} : (tensor<1x2x6xf32>, tensor<6x2xf32>, tensor<6xf32>, tensor<2x2xf32>) -> (tensor<1x2x2xf32>, tensor<1x2x8xf32>)
  %dx, %dp, %dh0 = weft.gru_grad %dy, %r, %h0, %y, %g {reverse = true} : (tensor<1x2x2xf32>, tensor<6x2xf32>, tensor<2x2xf32>, tensor<1x2x2xf32>, tensor<1x2x8xf32>) -> (tensor<1x2x6xf32>, tensor<1x2x6xf32>, tensor<2x2xf32>)
  return %y, %dx, %dp, %dh0 : tensor<1x2x2xf32>, tensor<1x2x6xf32>, tensor<1x2x6xf32>, tensor<2x2xf32>
}

// Recompute mode: the forward ops store no gates and the adjoints
// recompute them from the input gates inside their loops.
// CHECK: OK @lstm_recompute
func.func @lstm_recompute(%xg: tensor<6x3x16xf32>, %r: tensor<16x4xf32>, %h0: tensor<3x4xf32>, %c0: tensor<3x4xf32>,
                          %dy: tensor<6x3x4xf32>, %dc: tensor<6x3x4xf32>)
    -> (tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>, tensor<3x4xf32>, tensor<3x4xf32>) {
  %y, %c = weft.lstm %xg, %r, %h0, %c0 {recompute} : (tensor<6x3x16xf32>, tensor<16x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>) -> (tensor<6x3x4xf32>, tensor<6x3x4xf32>)
  %dx, %dh0, %dc0 = weft.lstm_grad %dy, %dc, %r, %h0, %c0, %y, %c, %xg {recompute} : (tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<16x4xf32>, tensor<3x4xf32>, tensor<3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>) -> (tensor<6x3x16xf32>, tensor<3x4xf32>, tensor<3x4xf32>)
  return %y, %c, %dx, %dh0, %dc0 : tensor<6x3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x16xf32>, tensor<3x4xf32>, tensor<3x4xf32>
}

// CHECK: OK @lstm_reverse_recompute
func.func @lstm_reverse_recompute(%xg: tensor<5x2x12xf32>, %r: tensor<12x3xf32>, %h0: tensor<2x3xf32>, %c0: tensor<2x3xf32>,
                                  %dy: tensor<5x2x3xf32>, %dc: tensor<5x2x3xf32>)
    -> (tensor<5x2x12xf32>, tensor<2x3xf32>, tensor<2x3xf32>) {
  %y, %c = weft.lstm %xg, %r, %h0, %c0 {recompute, reverse = true} : (tensor<5x2x12xf32>, tensor<12x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> (tensor<5x2x3xf32>, tensor<5x2x3xf32>)
  %dx, %dh0, %dc0 = weft.lstm_grad %dy, %dc, %r, %h0, %c0, %y, %c, %xg {recompute, reverse = true} : (tensor<5x2x3xf32>, tensor<5x2x3xf32>, tensor<12x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>, tensor<5x2x3xf32>, tensor<5x2x3xf32>, tensor<5x2x12xf32>) -> (tensor<5x2x12xf32>, tensor<2x3xf32>, tensor<2x3xf32>)
  return %dx, %dh0, %dc0 : tensor<5x2x12xf32>, tensor<2x3xf32>, tensor<2x3xf32>
}

// CHECK: OK @gru_recompute
func.func @gru_recompute(%xg: tensor<6x3x12xf32>, %r: tensor<12x4xf32>, %rb: tensor<12xf32>, %h0: tensor<3x4xf32>, %dy: tensor<6x3x4xf32>)
    -> (tensor<6x3x4xf32>, tensor<6x3x12xf32>, tensor<6x3x12xf32>, tensor<3x4xf32>) {
  %y = weft.gru %xg, %r, %rb, %h0 {recompute} : (tensor<6x3x12xf32>, tensor<12x4xf32>, tensor<12xf32>, tensor<3x4xf32>) -> tensor<6x3x4xf32>
  %dx, %dp, %dh0 = weft.gru_grad %dy, %r, %h0, %y, %xg, %rb {recompute} : (tensor<6x3x4xf32>, tensor<12x4xf32>, tensor<3x4xf32>, tensor<6x3x4xf32>, tensor<6x3x12xf32>, tensor<12xf32>) -> (tensor<6x3x12xf32>, tensor<6x3x12xf32>, tensor<3x4xf32>)
  return %y, %dx, %dp, %dh0 : tensor<6x3x4xf32>, tensor<6x3x12xf32>, tensor<6x3x12xf32>, tensor<3x4xf32>
}

// CHECK: OK @gru_reverse_recompute
func.func @gru_reverse_recompute(%xg: tensor<4x2x6xf32>, %r: tensor<6x2xf32>, %rb: tensor<6xf32>, %h0: tensor<2x2xf32>, %dy: tensor<4x2x2xf32>)
    -> (tensor<4x2x6xf32>, tensor<4x2x6xf32>, tensor<2x2xf32>) {
  %y = weft.gru %xg, %r, %rb, %h0 {recompute, reverse = true} : (tensor<4x2x6xf32>, tensor<6x2xf32>, tensor<6xf32>, tensor<2x2xf32>) -> tensor<4x2x2xf32>
  %dx, %dp, %dh0 = weft.gru_grad %dy, %r, %h0, %y, %xg, %rb {recompute, reverse = true} : (tensor<4x2x2xf32>, tensor<6x2xf32>, tensor<2x2xf32>, tensor<4x2x2xf32>, tensor<4x2x6xf32>, tensor<6xf32>) -> (tensor<4x2x6xf32>, tensor<4x2x6xf32>, tensor<2x2xf32>)
  return %dx, %dp, %dh0 : tensor<4x2x6xf32>, tensor<4x2x6xf32>, tensor<2x2xf32>
}

// bf16 (--precision bf16): gates computed in f32, the step's product
// accumulated in f32, the states carried between steps rounded to bf16 as
// the evaluator rounds its stored results; three steps keep the two within
// a rounding step of each other.
// CHECK: OK @lstm_bf16
func.func @lstm_bf16(%xg: tensor<3x2x8xbf16>, %r: tensor<8x2xbf16>, %h0: tensor<2x2xbf16>, %c0: tensor<2x2xbf16>)
    -> (tensor<3x2x2xbf16>, tensor<3x2x2xbf16>) {
  %y, %c, %g = weft.lstm %xg, %r, %h0, %c0 : (tensor<3x2x8xbf16>, tensor<8x2xbf16>, tensor<2x2xbf16>, tensor<2x2xbf16>) -> (tensor<3x2x2xbf16>, tensor<3x2x2xbf16>, tensor<3x2x8xbf16>)
  return %y, %c : tensor<3x2x2xbf16>, tensor<3x2x2xbf16>
}

// CHECK: OK @gru_bf16
func.func @gru_bf16(%xg: tensor<3x2x6xbf16>, %r: tensor<6x2xbf16>, %rb: tensor<6xbf16>, %h0: tensor<2x2xbf16>)
    -> tensor<3x2x2xbf16> {
  %y, %g = weft.gru %xg, %r, %rb, %h0 {reverse = true} : (tensor<3x2x6xbf16>, tensor<6x2xbf16>, tensor<6xbf16>, tensor<2x2xbf16>) -> (tensor<3x2x2xbf16>, tensor<3x2x8xbf16>)
  return %y : tensor<3x2x2xbf16>
}
