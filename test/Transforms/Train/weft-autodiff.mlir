// RUN: weft-opt %s -split-input-file --weft-autodiff | FileCheck %s

// A value read twice (by tanh and by mul) gets the sum of both adjoints.

// CHECK-LABEL: func.func @loss_grad(
// CHECK-SAME:    %[[X:.*]]: tensor<3xf32> {weft.param = "x"})
// CHECK-SAME:    -> (tensor<f32>, tensor<3xf32> {weft.grad = "x"})
// CHECK:         %[[T:.*]] = weft.tanh %[[X]]
// CHECK:         %[[L:.*]] = weft.reduce_sum
// CHECK:         %[[VIA_MUL:.*]] = weft.mul %{{.*}}, %[[T]]
// CHECK:         %[[DTANH:.*]] = weft.sub
// CHECK:         %[[VIA_TANH:.*]] = weft.mul %{{.*}}, %[[DTANH]]
// CHECK:         %[[SUM:.*]] = weft.add %[[VIA_MUL]], %[[VIA_TANH]]
// CHECK:         return %[[L]], %[[SUM]] : tensor<f32>, tensor<3xf32>
func.func @loss(%x: tensor<3xf32> {weft.param = "x"}) -> tensor<f32> {
  %t = weft.tanh %x : tensor<3xf32>
  %m = weft.mul %t, %x : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
  %s = weft.reduce_sum %m {axes = array<i64: 0>} : (tensor<3xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// A broadcast operand's adjoint is summed over the leading axis it lacks
// and the size-1 axis it stretched, then reshaped back.

// CHECK-LABEL: func.func @loss_grad(
// CHECK:         %[[DB:.*]] = weft.reduce_sum %{{.*}} {axes = array<i64: 0, 1>}
// CHECK-SAME:        (tensor<4x2x3xf32>) -> tensor<3xf32>
// CHECK:         %[[B:.*]] = weft.reshape %[[DB]] : tensor<3xf32> -> tensor<1x3xf32>
// CHECK:         return %{{.*}}, %{{.*}}, %[[B]]
func.func @loss(%a: tensor<4x2x3xf32> {weft.param = "a"},
                %b: tensor<1x3xf32> {weft.param = "b"}) -> tensor<f32> {
  %s = weft.add %a, %b : (tensor<4x2x3xf32>, tensor<1x3xf32>) -> tensor<4x2x3xf32>
  %l = weft.reduce_mean %s {axes = array<i64: 0, 1, 2>}
      : (tensor<4x2x3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Tied embedding: the table is read by gather and by the output projection;
// its gradient adds the scatter of the first to the matmul adjoint of the
// second. The token arithmetic is integer and carries no gradient, the
// logits result is dropped. (A parameter off the loss gets no gradient at
// all: weft-autodiff-no-gradient.mlir.)

// CHECK-LABEL: func.func @loss_grad(
// CHECK-SAME:    %[[WTE:[^:]*]]: tensor<6x4xf32> {weft.param = "wte"}
// CHECK-SAME:    %[[TOK:[^:]*]]: tensor<2x3xi64> {weft.input = "tokens"}
// CHECK-SAME:    -> (tensor<f32>, tensor<6x4xf32> {weft.grad = "wte"})
// CHECK:         %[[NEXT:.*]] = weft.add %[[TOK]], %{{.*}} : (tensor<2x3xi64>, tensor<i64>)
// CHECK:         %[[LOSS:.*]] = weft.cross_entropy
// CHECK:         weft.one_hot %[[NEXT]] : tensor<2x3xi64> -> tensor<2x3x6xf32>
// CHECK:         %[[DH:.*]] = weft.matmul %{{.*}}, %[[WTE]] :
// CHECK:         %[[DW:.*]] = weft.matmul %{{.*}}, %{{.*}} {transpose_lhs = true}
// CHECK:         %[[PROJ:.*]] = weft.reduce_sum %[[DW]] {axes = array<i64: 0>}
// CHECK:         %[[ZEROS:.*]] = weft.constant dense<0.000000e+00> : tensor<6x4xf32>
// CHECK:         %[[EMB:.*]] = weft.scatter_add %[[ZEROS]], %[[TOK]], %[[DH]] {axis = 0 : i64}
// CHECK:         %[[WGRAD:.*]] = weft.add %[[PROJ]], %[[EMB]]
// CHECK:         return %[[LOSS]], %[[WGRAD]] :
func.func @loss(%w: tensor<6x4xf32> {weft.param = "wte"},
                %tok: tensor<2x3xi64> {weft.input = "tokens"})
    -> (tensor<f32>, tensor<2x3x6xf32>) {
  %h = weft.gather %w, %tok {axis = 0 : i64}
      : (tensor<6x4xf32>, tensor<2x3xi64>) -> tensor<2x3x4xf32>
  %logits = weft.matmul %h, %w {transpose_rhs = true}
      : (tensor<2x3x4xf32>, tensor<6x4xf32>) -> tensor<2x3x6xf32>
  %one = weft.constant dense<1> : tensor<i64>
  %next = weft.add %tok, %one : (tensor<2x3xi64>, tensor<i64>) -> tensor<2x3xi64>
  %l = weft.cross_entropy %logits, %next
      : (tensor<2x3x6xf32>, tensor<2x3xi64>) -> tensor<f32>
  return %l, %logits : tensor<f32>, tensor<2x3x6xf32>
}

// -----

// Integer and i1 values stop the gradient: cmp and the float-to-integer
// cast have no rules and need none. The parameter reaches the loss only
// through the select's on_true operand.

// CHECK-LABEL: func.func @loss_grad(
// CHECK-SAME:    %[[X:[^:]*]]: tensor<4xf32> {weft.param = "x"}
// CHECK:         %[[C:.*]] = weft.cmp gt, %[[X]]
// CHECK:         weft.where %[[C]], %[[X]]
// CHECK-NOT:     weft.scatter_add
// CHECK:         %[[DX:.*]] = weft.where %[[C]]
// CHECK:         return %{{.*}}, %[[DX]] :
func.func @loss(%x: tensor<4xf32> {weft.param = "x"},
                %table: tensor<5xf32> {weft.input = "table"}) -> tensor<f32> {
  %zero = weft.constant dense<0.0> : tensor<f32>
  %c = weft.cmp gt, %x, %zero : (tensor<4xf32>, tensor<f32>) -> tensor<4xi1>
  %r = weft.where %c, %x, %zero : (tensor<4xi1>, tensor<4xf32>, tensor<f32>) -> tensor<4xf32>
  %i = weft.cast %x : tensor<4xf32> -> tensor<4xi64>
  %g = weft.gather %table, %i {axis = 0 : i64} : (tensor<5xf32>, tensor<4xi64>) -> tensor<4xf32>
  %m = weft.mul %r, %g : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %l = weft.reduce_sum %m {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Constant padding (ONNX Pad, a TCN's causal Conv1d padding): the adjoint
// reads the input's cells back out of the padded gradient, skipping the
// `low` cells and the interior ones.

// CHECK-LABEL: func.func @loss_grad(
// CHECK-SAME:    %[[W:[^:]*]]: tensor<2x3xf32> {weft.param = "w"}
// CHECK-SAME:    -> (tensor<f32>, tensor<2x3xf32> {weft.grad = "w"})
// CHECK:         %[[P:.*]] = weft.pad %[[W]]
// CHECK:         %[[DP:.*]] = weft.add
// CHECK:         %[[DW:.*]] = weft.slice %[[DP]] {limits = array<i64: 2, 7>, starts = array<i64: 0, 2>, strides = array<i64: 1, 2>}
// CHECK-SAME:        : (tensor<2x8xf32>) -> tensor<2x3xf32>
// CHECK:         return %{{.*}}, %[[DW]] :
func.func @loss(%w: tensor<2x3xf32> {weft.param = "w"}) -> tensor<f32> {
  %p = weft.pad %w {low = array<i64: 0, 2>, high = array<i64: 0, 1>,
                    interior = array<i64: 0, 1>, value = 1.5 : f64}
      : (tensor<2x3xf32>) -> tensor<2x8xf32>
  %sq = weft.mul %p, %p : (tensor<2x8xf32>, tensor<2x8xf32>) -> tensor<2x8xf32>
  %l = weft.reduce_sum %sq {axes = array<i64: 0, 1>} : (tensor<2x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// Reflect and edge padding are gathers of constant indices (see
// test/Conversion/OnnxToWeft): their adjoint scatter_add sums the gradients
// of every copy of a border cell back into it.

// CHECK-LABEL: func.func @loss_grad(
// CHECK-SAME:    %[[W:[^:]*]]: tensor<2x3xf32> {weft.param = "w"}
// CHECK:         %[[I:.*]] = weft.constant dense<[1, 0, 1, 2, 1]> : tensor<5xi64>
// CHECK:         %[[DW:.*]] = weft.scatter_add %{{.*}}, %[[I]], %{{.*}} {axis = 1 : i64}
// CHECK:         return %{{.*}}, %[[DW]] :
func.func @loss(%w: tensor<2x3xf32> {weft.param = "w"}) -> tensor<f32> {
  %i = weft.constant dense<[1, 0, 1, 2, 1]> : tensor<5xi64>
  %p = weft.gather %w, %i {axis = 1 : i64}
      : (tensor<2x3xf32>, tensor<5xi64>) -> tensor<2x5xf32>
  %sq = weft.mul %p, %p : (tensor<2x5xf32>, tensor<2x5xf32>) -> tensor<2x5xf32>
  %l = weft.reduce_sum %sq {axes = array<i64: 0, 1>} : (tensor<2x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A bf16 weft.attention's adjoint is a bf16 weft.attention_grad reading
// the forward's f32 log-sum-exp.

// CHECK-LABEL: func.func @loss_grad(
// CHECK:         %[[O:.*]], %[[LSE:.*]] = weft.attention
// CHECK:         %[[DO:.*]] = weft.cast %{{.*}} : tensor<2x8x4xf32> -> tensor<2x8x4xbf16>
// CHECK:         weft.attention_grad %[[DO]], %{{.*}}, %{{.*}}, %{{.*}}, %[[O]], %[[LSE]] {causal, scale = 5.000000e-01 : f64}
// CHECK-SAME:        tensor<2x8x4xbf16>, tensor<2x8xf32>) -> (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>)
func.func @loss(%q: tensor<2x8x4xbf16> {weft.param = "q"}) -> tensor<f32> {
  %o, %lse = weft.attention %q, %q, %q {scale = 0.5 : f64, causal}
      : (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>)
      -> (tensor<2x8x4xbf16>, tensor<2x8xf32>)
  %f = weft.cast %o : tensor<2x8x4xbf16> -> tensor<2x8x4xf32>
  %l = weft.reduce_sum %f {axes = array<i64: 0, 1, 2>} : (tensor<2x8x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
