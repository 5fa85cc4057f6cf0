// RUN: weft-opt %s -split-input-file -verify-diagnostics

func.func @cumsum_axis(%x: tensor<4x6xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = weft.cumsum %x {axis = 2 : i64} : tensor<4x6xf32>
  return
}

// -----

func.func @top_k_too_many(%x: tensor<4x6xf32>) {
  // expected-error @+2 {{k = 7 is out of range for an axis of 6 (expected 1 <= k <= 6)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.top_k %x {axis = 1 : i64, k = 7 : i64} : (tensor<4x6xf32>) -> tensor<4x7xf32>
  return
}

// -----

func.func @top_k_indices_shape(%x: tensor<4x6xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x2xi64>' are incompatible with return type(s) of operation 'tensor<4x3xi64>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.top_k_indices %x {axis = 1 : i64, k = 2 : i64} : (tensor<4x6xf32>) -> tensor<4x3xi64>
  return
}

// -----

func.func @arg_max_empty(%x: tensor<4x0xf32>) {
  // expected-error @+2 {{axis 1 is empty: it has no extreme element}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.arg_max %x {axis = 1 : i64} : (tensor<4x0xf32>) -> tensor<4xi64>
  return
}

// -----

func.func @round_int(%x: tensor<4xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = weft.round %x : tensor<4xi64>
  return
}
