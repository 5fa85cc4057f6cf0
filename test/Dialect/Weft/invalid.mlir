// RUN: weft-opt %s -split-input-file -verify-diagnostics

func.func @matmul_k(%a: tensor<4x32xf32>, %b: tensor<16x10xf32>) {
  // expected-error @+2 {{contracted sizes differ: lhs 4x32 gives K=32, rhs 16x10 gives K=16}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.matmul %a, %b : (tensor<4x32xf32>, tensor<16x10xf32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @matmul_rank(%a: tensor<32xf32>, %b: tensor<32x10xf32>) {
  // expected-error @+2 {{operands must have rank >= 2, got 32 and 32x10}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.matmul %a, %b : (tensor<32xf32>, tensor<32x10xf32>) -> tensor<10xf32>
  return
}

// -----

func.func @matmul_batch(%a: tensor<3x4x8xf32>, %b: tensor<2x8x4xf32>) {
  // expected-error @+2 {{batch axes of 3x4x8 and 2x8x4 do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.matmul %a, %b : (tensor<3x4x8xf32>, tensor<2x8x4xf32>) -> tensor<3x4x4xf32>
  return
}

// -----

func.func @matmul_int(%a: tensor<4x8xi64>, %b: tensor<8x4xi64>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of}}
  %0 = weft.matmul %a, %b : (tensor<4x8xi64>, tensor<8x4xi64>) -> tensor<4x4xi64>
  return
}

// -----

func.func @wrong_result(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>) {
  // expected-error @+2 {{inferred type(s) 'tensor<4x4xf32>' are incompatible with return type(s) of operation 'tensor<4x8xf32>'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.matmul %a, %b : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @broadcast(%a: tensor<4x8xf32>, %b: tensor<3xf32>) {
  // expected-error @+2 {{operand shapes 4x8 and 3 do not broadcast}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.add %a, %b : (tensor<4x8xf32>, tensor<3xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @mixed_types(%a: tensor<4xf32>, %b: tensor<4xbf16>) {
  // expected-error @+1 {{failed to verify that all of {lhs, rhs, result} have same element type}}
  %0 = weft.add %a, %b : (tensor<4xf32>, tensor<4xbf16>) -> tensor<4xf32>
  return
}

// -----

func.func @dynamic(%a: tensor<?x8xf32>) {
  // expected-error @+1 {{must be statically shaped tensor}}
  %0 = weft.relu %a : tensor<?x8xf32>
  return
}

// -----

func.func @unsupported_element(%a: tensor<4xi8>) {
  // expected-error @+1 {{must be statically shaped tensor of}}
  %0 = weft.neg %a : tensor<4xi8>
  return
}

// -----

func.func @softmax_axis(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{axis 2 is out of range for rank 2 (expected 0 <= axis < 2)}}
  %0 = weft.softmax %a {axis = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @log_softmax_axis(%a: tensor<4x8xf32>) {
  // expected-error @+1 {{axis -1 is out of range for rank 2}}
  %0 = weft.log_softmax %a {axis = -1 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @layer_norm_scale(%x: tensor<4x16x32xf32>, %g: tensor<16xf32>, %b: tensor<32xf32>) {
  // expected-error @+2 {{scale (16) and bias (32) must have the normalized shape 32}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<4x16x32xf32>, tensor<16xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
  return
}

// -----

func.func @layer_norm_eps(%x: tensor<4x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>) {
  // expected-error @+1 {{attribute 'epsilon' failed to satisfy constraint: 64-bit float attribute whose value is positive}}
  %0 = weft.layer_norm %x, %g, %b {axis = 1 : i64, epsilon = 0.0 : f64} : (tensor<4x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @reduce_axes(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{axes must be sorted and distinct}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.reduce_sum %x {axes = array<i64: 1, 0>} : (tensor<4x8xf32>) -> tensor<f32>
  return
}

// -----

func.func @reduce_axis_range(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{axis 3 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.reduce_max %x {axes = array<i64: 3>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @gather_axis(%e: tensor<64x32xf32>, %t: tensor<4xi64>) {
  // expected-error @+2 {{axis 2 is out of range for rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.gather %e, %t {axis = 2 : i64} : (tensor<64x32xf32>, tensor<4xi64>) -> tensor<4x32xf32>
  return
}

// -----

func.func @gather_float_indices(%e: tensor<64x32xf32>, %t: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = weft.gather %e, %t {axis = 0 : i64} : (tensor<64x32xf32>, tensor<4xf32>) -> tensor<4x32xf32>
  return
}

// -----

func.func @reshape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{cannot reshape 4x8 (32 elements) to 5x6 (30 elements)}}
  %0 = weft.reshape %x : tensor<4x8xf32> -> tensor<5x6xf32>
  return
}

// -----

func.func @broadcast_to(%x: tensor<3x8xf32>) {
  // expected-error @+1 {{cannot broadcast 3x8 to 4x8}}
  %0 = weft.broadcast %x : tensor<3x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @transpose_perm(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{permutation is not a permutation of [0, 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.transpose %x {permutation = array<i64: 0, 0>} : (tensor<4x8xf32>) -> tensor<4x4xf32>
  return
}

// -----

func.func @transpose_rank(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{permutation has 3 entries but the input has rank 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.transpose %x {permutation = array<i64: 0, 1, 2>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @slice_bounds(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{axis 1: slice [4, 9) is not within [0, 8]}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.slice %x {starts = array<i64: 0, 4>, limits = array<i64: 4, 9>, strides = array<i64: 1, 1>} : (tensor<4x8xf32>) -> tensor<4x5xf32>
  return
}

// -----

func.func @slice_stride(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{axis 0: stride 0 must be >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.slice %x {starts = array<i64: 0, 0>, limits = array<i64: 4, 8>, strides = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @slice_arity(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{starts, limits and strides need one entry per axis (rank 2)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.slice %x {starts = array<i64: 0>, limits = array<i64: 4>, strides = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @concat_shape(%a: tensor<4x8xf32>, %b: tensor<3x2xf32>) {
  // expected-error @+2 {{input 1 (3x2) does not match input 0 (4x8) off axis 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.concat %a, %b {axis = 1 : i64} : (tensor<4x8xf32>, tensor<3x2xf32>) -> tensor<4x10xf32>
  return
}

// -----

func.func @concat_type(%a: tensor<4x8xf32>, %b: tensor<4x2xi64>) {
  // expected-error @+2 {{input 1 has element type 'i64', input 0 has 'f32'}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.concat %a, %b {axis = 1 : i64} : (tensor<4x8xf32>, tensor<4x2xi64>) -> tensor<4x10xf32>
  return
}

// -----

func.func @where_cond(%c: tensor<4xf32>, %a: tensor<4xf32>) {
  // expected-error @+1 {{operand #0 must be statically shaped tensor of 1-bit signless integer values}}
  %0 = weft.where %c, %a, %a : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

func.func @causal_rank(%x: tensor<8xf32>) {
  // expected-error @+1 {{input must have rank >= 2, got 8}}
  %0 = weft.causal_mask %x : tensor<8xf32>
  return
}

// -----

func.func @conv_channels(%x: tensor<4x3x16x16xf32>, %w: tensor<8x4x3x3xf32>) {
  // expected-error @+2 {{input has 3 channels but the filter 8x4x3x3 with groups=1 expects 4}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<4x3x16x16xf32>, tensor<8x4x3x3xf32>) -> tensor<4x8x14x14xf32>
  return
}

// -----

func.func @conv_rank(%x: tensor<4x3x16xf32>, %w: tensor<8x3x3xf32>) {
  // expected-error @+2 {{input (4x3x16) and filter (8x3x3) must both have rank 4 (NCHW, OIHW)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.conv2d %x, %w {strides = array<i64: 1>, padding = array<i64: 0, 0>, dilations = array<i64: 1>} : (tensor<4x3x16xf32>, tensor<8x3x3xf32>) -> tensor<4x8x14xf32>
  return
}

// -----

func.func @conv_bias(%x: tensor<4x3x16x16xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<4xf32>) {
  // expected-error @+2 {{bias must have shape 8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32>, tensor<4xf32>) -> tensor<4x8x14x14xf32>
  return
}

// -----

func.func @conv_window(%x: tensor<4x3x2x2xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+2 {{window of 3 does not fit in padded spatial size 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.conv2d %x, %w {strides = array<i64: 1, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<4x3x2x2xf32>, tensor<8x3x3x3xf32>) -> tensor<4x8x1x1xf32>
  return
}

// -----

func.func @conv_stride(%x: tensor<4x3x8x8xf32>, %w: tensor<8x3x3x3xf32>) {
  // expected-error @+2 {{strides and dilations must be >= 1}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.conv2d %x, %w {strides = array<i64: 0, 1>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>} : (tensor<4x3x8x8xf32>, tensor<8x3x3x3xf32>) -> tensor<4x8x6x6xf32>
  return
}

// -----

func.func @pool_padding(%x: tensor<4x8x16x16xf32>) {
  // expected-error @+2 {{padding 2 must be smaller than the kernel size 2}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.max_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 2, 0, 0, 0>} : (tensor<4x8x16x16xf32>) -> tensor<4x8x9x8xf32>
  return
}

// -----

func.func @pool_rank(%x: tensor<8x16x16xf32>) {
  // expected-error @+2 {{input must be NCHW (rank 4), got 8x16x16}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.avg_pool2d %x {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<8x16x16xf32>) -> tensor<8x8x8xf32>
  return
}

// -----

func.func @global_pool_rank(%x: tensor<4x8xf32>) {
  // expected-error @+2 {{input must have rank >= 3 (N, C, spatial...), got 4x8}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.global_avg_pool %x : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return
}

// -----

func.func @cross_entropy_labels(%l: tensor<4x16x64xf32>, %y: tensor<4x15xi64>) {
  // expected-error @+2 {{labels shape 4x15 does not fit logits 4x16x64: expected the logits shape without its class axis (4x16)}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.cross_entropy %l, %y : (tensor<4x16x64xf32>, tensor<4x15xi64>) -> tensor<f32>
  return
}

// -----

func.func @cross_entropy_float_labels(%l: tensor<4x10xf32>, %y: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = weft.cross_entropy %l, %y : (tensor<4x10xf32>, tensor<4xf32>) -> tensor<f32>
  return
}

// -----

func.func @mse_shape(%y: tensor<4x10xf32>, %t: tensor<4x9xf32>) {
  // expected-error @+2 {{prediction 4x10 and target 4x9 must have the same shape}}
  // expected-error @+1 {{failed to infer returned types}}
  %0 = weft.mse %y, %t : (tensor<4x10xf32>, tensor<4x9xf32>) -> tensor<f32>
  return
}

// -----

func.func @cast_shape(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{requires the same shape for all operands and results}}
  %0 = weft.cast %x : tensor<4x8xf32> -> tensor<8x4xbf16>
  return
}

// -----

func.func @all_to_all_same_dim(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{split_dim 1 and concat_dim 1 are not two different dimensions of both 'tensor<4x8xf32>' and 'tensor<4x8xf32>'}}
  %0 = weft.all_to_all %x {axes = ["tp"], split_dim = 1 : i64, concat_dim = 1 : i64} : tensor<4x8xf32> -> tensor<4x8xf32>
  return
}

// -----

func.func @all_to_all_sizes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{cannot turn 'tensor<4x8xf32>' into 'tensor<16x4xf32>' by splitting dim 1 and concatenating dim 0 over the same number of ranks}}
  %0 = weft.all_to_all %x {axes = ["tp"], split_dim = 1 : i64, concat_dim = 0 : i64} : tensor<4x8xf32> -> tensor<16x4xf32>
  return
}

// -----

func.func @all_to_all_axes(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{needs at least one mesh axis}}
  %0 = weft.all_to_all %x {axes = [], split_dim = 1 : i64, concat_dim = 0 : i64} : tensor<4x8xf32> -> tensor<8x4xf32>
  return
}

// -----

module attributes {weft.mesh = #weft.mesh<dp = 2, pp = 4>} {
  func.func @send_peer_outside_axis(%x: tensor<4xf32>) {
    // expected-error @+1 {{'weft.send' op peer 4 is not a coordinate on axis "pp" of the mesh #weft.mesh<dp = 2, pp = 4> (0 to 3)}}
    weft.send %x {axes = ["pp"], peer = 4 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {weft.mesh = #weft.mesh<dp = 2, pp = 4>} {
  func.func @recv_peer_outside_group(%x: tensor<4xf32>) {
    // expected-error @+1 {{'weft.recv' op peer 8 is not a rank of the group of axes ["dp", "pp"] of the mesh #weft.mesh<dp = 2, pp = 4> (0 to 7)}}
    %0 = weft.recv {axes = ["dp", "pp"], peer = 8 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

module attributes {weft.mesh = #weft.mesh<dp = 2>} {
  func.func @send_axis_not_in_mesh(%x: tensor<4xf32>) {
    // expected-error @+1 {{'weft.send' op names axis "pp", which the mesh #weft.mesh<dp = 2> does not have}}
    weft.send %x {axes = ["pp"], peer = 1 : i64, tag = 0 : i64} : tensor<4xf32>
    return
  }
}

// -----

func.func @recv_negative_peer() {
  // expected-error @+1 {{'weft.recv' op peer -1 is negative}}
  %0 = weft.recv {axes = ["pp"], peer = -1 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}

// -----

func.func @send_tag(%x: tensor<4xf32>) {
  // expected-error @+1 {{'weft.send' op tag 281474976710656 is outside [0, 2^48): the runtime's message slots hold 48 bits of tag}}
  weft.send %x {axes = ["pp"], peer = 1 : i64, tag = 281474976710656 : i64} : tensor<4xf32>
  return
}

// -----

func.func @recv_axes() {
  // expected-error @+1 {{'weft.recv' op needs at least one mesh axis}}
  %0 = weft.recv {axes = [], peer = 0 : i64, tag = 0 : i64} : tensor<4xf32>
  return
}
