// RUN: weft-opt %s -split-input-file -verify-diagnostics

func.func @lstm_recurrence_shape(%xg: tensor<7x3x24xf32>, %r: tensor<24x5xf32>, %h: tensor<3x6xf32>) {
  // expected-error @+2 {{recurrence must be [4H, H], got 24x5}}
  // expected-error @+1 {{failed to infer returned types}}
  %y, %c, %g = weft.lstm %xg, %r, %h, %h : (tensor<7x3x24xf32>, tensor<24x5xf32>, tensor<3x6xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>)
  return
}

// -----

func.func @lstm_gates_width(%xg: tensor<7x3x20xf32>, %r: tensor<24x6xf32>, %h: tensor<3x6xf32>) {
  // expected-error @+2 {{input_gates must be [T, B, 24] for H = 6, got 7x3x20}}
  // expected-error @+1 {{failed to infer returned types}}
  %y, %c, %g = weft.lstm %xg, %r, %h, %h : (tensor<7x3x20xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>)
  return
}

// -----

func.func @lstm_state_batch(%xg: tensor<7x3x24xf32>, %r: tensor<24x6xf32>, %h: tensor<3x6xf32>, %c: tensor<2x6xf32>) {
  // expected-error @+2 {{c0 must be 3x6, got 2x6}}
  // expected-error @+1 {{failed to infer returned types}}
  %y, %cs, %g = weft.lstm %xg, %r, %h, %c : (tensor<7x3x24xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<2x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>)
  return
}

// -----

func.func @lstm_empty(%xg: tensor<0x3x24xf32>, %r: tensor<24x6xf32>, %h: tensor<3x6xf32>) {
  // expected-error @+2 {{the sequence is empty: input_gates is 0x3x24}}
  // expected-error @+1 {{failed to infer returned types}}
  %y, %c, %g = weft.lstm %xg, %r, %h, %h : (tensor<0x3x24xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>) -> (tensor<0x3x6xf32>, tensor<0x3x6xf32>, tensor<0x3x24xf32>)
  return
}

// -----

func.func @gru_bias(%xg: tensor<7x3x18xf32>, %r: tensor<18x6xf32>, %rb: tensor<24xf32>, %h: tensor<3x6xf32>) {
  // expected-error @+2 {{recurrence_bias must be 18, got 24}}
  // expected-error @+1 {{failed to infer returned types}}
  %y, %g = weft.gru %xg, %r, %rb, %h : (tensor<7x3x18xf32>, tensor<18x6xf32>, tensor<24xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x24xf32>)
  return
}

// -----

func.func @gru_grad_gates(%dy: tensor<7x3x6xf32>, %r: tensor<18x6xf32>, %h: tensor<3x6xf32>, %g: tensor<7x3x18xf32>) {
  // expected-error @+2 {{gates must be [T, B, 24] for H = 6, got 7x3x18}}
  // expected-error @+1 {{failed to infer returned types}}
  %a, %b, %c = weft.gru_grad %dy, %r, %h, %dy, %g : (tensor<7x3x6xf32>, tensor<18x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x18xf32>) -> (tensor<7x3x18xf32>, tensor<7x3x18xf32>, tensor<3x6xf32>)
  return
}

// -----

func.func @lstm_grad_adjoint(%dy: tensor<6x3x6xf32>, %y: tensor<7x3x6xf32>, %r: tensor<24x6xf32>, %h: tensor<3x6xf32>, %g: tensor<7x3x24xf32>) {
  // expected-error @+2 {{hidden_grad must be 7x3x6, got 6x3x6}}
  // expected-error @+1 {{failed to infer returned types}}
  %a, %b, %c = weft.lstm_grad %dy, %y, %r, %h, %h, %y, %y, %g : (tensor<6x3x6xf32>, tensor<7x3x6xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>) -> (tensor<7x3x24xf32>, tensor<3x6xf32>, tensor<3x6xf32>)
  return
}

// -----

func.func @lstm_recompute_gates(%xg: tensor<7x3x24xf32>, %r: tensor<24x6xf32>, %h: tensor<3x6xf32>) {
  // expected-error @+2 {{are incompatible with return type(s)}}
  // expected-error @+1 {{failed to infer returned types}}
  %y, %c, %g = weft.lstm %xg, %r, %h, %h {recompute} : (tensor<7x3x24xf32>, tensor<24x6xf32>, tensor<3x6xf32>, tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>)
  return
}

// -----

func.func @gru_grad_recompute_no_bias(%dy: tensor<7x3x6xf32>, %r: tensor<18x6xf32>, %h: tensor<3x6xf32>, %xg: tensor<7x3x18xf32>) {
  // expected-error @+2 {{a recomputing gru_grad needs the recurrence_bias}}
  // expected-error @+1 {{failed to infer returned types}}
  %a, %b, %c = weft.gru_grad %dy, %r, %h, %dy, %xg {recompute} : (tensor<7x3x6xf32>, tensor<18x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x18xf32>) -> (tensor<7x3x18xf32>, tensor<7x3x18xf32>, tensor<3x6xf32>)
  return
}

// -----

func.func @gru_grad_bias_without_recompute(%dy: tensor<7x3x6xf32>, %r: tensor<18x6xf32>, %h: tensor<3x6xf32>, %g: tensor<7x3x24xf32>, %rb: tensor<18xf32>) {
  // expected-error @+2 {{recurrence_bias is an operand only with recompute}}
  // expected-error @+1 {{failed to infer returned types}}
  %a, %b, %c = weft.gru_grad %dy, %r, %h, %dy, %g, %rb : (tensor<7x3x6xf32>, tensor<18x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>, tensor<7x3x24xf32>, tensor<18xf32>) -> (tensor<7x3x18xf32>, tensor<7x3x18xf32>, tensor<3x6xf32>)
  return
}
