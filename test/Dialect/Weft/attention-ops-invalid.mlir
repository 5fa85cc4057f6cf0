// RUN: weft-opt %s -split-input-file -verify-diagnostics

func.func @key_width(%q: tensor<2x4x8xf32>, %k: tensor<2x6x7xf32>, %v: tensor<2x6x8xf32>) {
  // expected-error @+2 {{key must be [2, S, 8] to match query 2x4x8, got 2x6x7}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = weft.attention %q, %k, %v {scale = 0.5 : f64} : (tensor<2x4x8xf32>, tensor<2x6x7xf32>, tensor<2x6x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @broadcast_batch(%q: tensor<2x4x8xf32>, %k: tensor<1x6x8xf32>, %v: tensor<1x6x8xf32>) {
  // expected-error @+2 {{key must be [2, S, 8] to match query 2x4x8, got 1x6x8}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = weft.attention %q, %k, %v {scale = 0.5 : f64} : (tensor<2x4x8xf32>, tensor<1x6x8xf32>, tensor<1x6x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @value_keys(%q: tensor<2x4x8xf32>, %k: tensor<2x6x8xf32>, %v: tensor<2x5x8xf32>) {
  // expected-error @+2 {{value must be [2, 6, Dv] to match key 2x6x8, got 2x5x8}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = weft.attention %q, %k, %v {scale = 0.5 : f64} : (tensor<2x4x8xf32>, tensor<2x6x8xf32>, tensor<2x5x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4xf32>)
  return
}

// -----

func.func @rank_one(%q: tensor<8xf32>) {
  // expected-error @+2 {{query must be [..., T, D], got 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = weft.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<8xf32>, tensor<8xf32>, tensor<8xf32>) -> (tensor<8xf32>, tensor<f32>)
  return
}

// -----

func.func @no_keys(%q: tensor<4x8xf32>, %k: tensor<0x8xf32>) {
  // expected-error @+2 {{attention needs at least one key, got key 0x8}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = weft.attention %q, %k, %k {scale = 0.5 : f64} : (tensor<4x8xf32>, tensor<0x8xf32>, tensor<0x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
  return
}

// -----

func.func @scale(%q: tensor<4x8xf32>) {
  // expected-error @+1 {{attribute 'scale' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %o, %l = weft.attention %q, %q, %q {scale = -0.5 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4xf32>)
  return
}

// -----

func.func @element_types(%q: tensor<4x8xf32>, %v: tensor<4x8xbf16>) {
  // expected-error @+1 {{all of {query, key, value, result} have same element type}}
  %o, %l = weft.attention %q, %q, %v {scale = 0.5 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4xbf16>)
  return
}

// -----

// A bf16 attention's log-sum-exp is f32, not bf16.
func.func @bf16_logsumexp(%q: tensor<4x8xbf16>) {
  // expected-error @+2 {{'weft.attention' op inferred type(s) 'tensor<4x8xbf16>', 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<4x8xbf16>', 'tensor<4xbf16>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %o, %l = weft.attention %q, %q, %q {scale = 0.5 : f64} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>) -> (tensor<4x8xbf16>, tensor<4xbf16>)
  return
}

// -----

func.func @grad_bf16_logsumexp(%q: tensor<4x8xbf16>, %l: tensor<4xbf16>) {
  // expected-error @+2 {{logsumexp must be 'f32' for a query of 'bf16', got 'bf16'}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq, %dk, %dv = weft.attention_grad %q, %q, %q, %q, %q, %l {scale = 0.5 : f64} : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4xbf16>) -> (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<4x8xbf16>)
  return
}

// -----

// An f32 attention's log-sum-exp is f32, nothing wider.
func.func @grad_f64_logsumexp(%q: tensor<4x8xf32>, %l: tensor<4xf64>) {
  // expected-error @+2 {{logsumexp must be 'f32' for a query of 'f32', got 'f64'}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq, %dk, %dv = weft.attention_grad %q, %q, %q, %q, %q, %l {scale = 0.5 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf64>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @grad_logsumexp(%q: tensor<4x8xf32>, %l: tensor<8xf32>) {
  // expected-error @+2 {{logsumexp must be 4, got 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq, %dk, %dv = weft.attention_grad %q, %q, %q, %q, %q, %l {scale = 0.5 : f64} : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return
}

// -----

func.func @grad_result_grad(%q: tensor<4x8xf32>, %g: tensor<4x7xf32>, %l: tensor<4xf32>) {
  // expected-error @+2 {{result_grad must be 4x8, got 4x7}}
  // expected-error @+1 {{failed to infer returned types}}
  %dq, %dk, %dv = weft.attention_grad %g, %q, %q, %q, %q, %l {scale = 0.5 : f64} : (tensor<4x7xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<4xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
  return
}
