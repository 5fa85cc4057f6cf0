// RUN: weft-opt %s | weft-opt | FileCheck %s
// RUN: weft-opt %s --mlir-print-op-generic | weft-opt | FileCheck %s

// CHECK-LABEL: func.func @mlp
func.func @mlp(%w: tensor<10x32xf32> {weft.param = "fc.weight"},
               %b: tensor<10xf32> {weft.param = "fc.bias"},
               %x: tensor<4x32xf32> {weft.input = "input"}) -> tensor<4x10xf32> {
  // CHECK: weft.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : (tensor<4x32xf32>, tensor<10x32xf32>) -> tensor<4x10xf32>
  %0 = weft.matmul %x, %w {transpose_rhs = true} : (tensor<4x32xf32>, tensor<10x32xf32>) -> tensor<4x10xf32>
  // CHECK: weft.add %{{.*}}, %{{.*}} : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  %1 = weft.add %0, %b : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
  // CHECK: weft.relu
  %2 = weft.relu %1 : tensor<4x10xf32>
  return %2 : tensor<4x10xf32>
}

// CHECK-LABEL: func.func @elementwise
func.func @elementwise(%a: tensor<2x3xf32>, %b: tensor<3xf32>, %i: tensor<2x3xi64>) {
  %0 = weft.sub %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %1 = weft.mul %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %2 = weft.div %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %3 = weft.pow %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %4 = weft.max %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %5 = weft.min %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %6 = weft.div %i, %i : (tensor<2x3xi64>, tensor<2x3xi64>) -> tensor<2x3xi64>
  // CHECK: weft.cmp lt, %{{.*}}, %{{.*}} : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  %7 = weft.cmp lt, %a, %b : (tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xi1>
  // CHECK: weft.where
  %8 = weft.where %7, %a, %b : (tensor<2x3xi1>, tensor<2x3xf32>, tensor<3xf32>) -> tensor<2x3xf32>
  %9 = weft.neg %a : tensor<2x3xf32>
  %10 = weft.abs %i : tensor<2x3xi64>
  %11 = weft.tanh %a : tensor<2x3xf32>
  %12 = weft.sigmoid %a : tensor<2x3xf32>
  %13 = weft.exp %a : tensor<2x3xf32>
  %14 = weft.log %a : tensor<2x3xf32>
  %15 = weft.sqrt %a : tensor<2x3xf32>
  %16 = weft.rsqrt %a : tensor<2x3xf32>
  %17 = weft.erf %a : tensor<2x3xf32>
  // CHECK: weft.gelu %{{.*}} : tensor<2x3xf32>
  %18 = weft.gelu %a : tensor<2x3xf32>
  // CHECK: weft.gelu %{{.*}} approximate = {{ ?}}tanh : tensor<2x3xf32>
  %19 = weft.gelu %a approximate = tanh : tensor<2x3xf32>
  // CHECK: weft.cast %{{.*}} : tensor<2x3xf32> -> tensor<2x3xbf16>
  %20 = weft.cast %a : tensor<2x3xf32> -> tensor<2x3xbf16>
  %21 = weft.add %20, %20 : (tensor<2x3xbf16>, tensor<2x3xbf16>) -> tensor<2x3xbf16>
  %22 = weft.cast %20 : tensor<2x3xbf16> -> tensor<2x3xf16>
  return
}

// CHECK-LABEL: func.func @normalization
func.func @normalization(%x: tensor<4x16x32xf32>, %g: tensor<32xf32>, %b: tensor<32xf32>) {
  // CHECK: weft.softmax %{{.*}} {axis = 2 : i64} : tensor<4x16x32xf32>
  %0 = weft.softmax %x {axis = 2 : i64} : tensor<4x16x32xf32>
  %1 = weft.log_softmax %x {axis = 0 : i64} : tensor<4x16x32xf32>
  // CHECK: weft.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {axis = 2 : i64, epsilon = 1.000000e-05 : f64}
  %2 = weft.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64} : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>) -> tensor<4x16x32xf32>
  // CHECK: weft.reduce_sum %{{.*}} {axes = array<i64: 1>, keep_dims = true} : (tensor<4x16x32xf32>) -> tensor<4x1x32xf32>
  %3 = weft.reduce_sum %x {axes = array<i64: 1>, keep_dims = true} : (tensor<4x16x32xf32>) -> tensor<4x1x32xf32>
  %4 = weft.reduce_mean %x {axes = array<i64: 0, 2>} : (tensor<4x16x32xf32>) -> tensor<16xf32>
  %5 = weft.reduce_max %x {axes = array<i64: 0, 1, 2>} : (tensor<4x16x32xf32>) -> tensor<f32>
  return
}

// CHECK-LABEL: func.func @movement
func.func @movement(%e: tensor<64x32xf32>, %t: tensor<4x16xi64>, %x: tensor<4x96xf32>) {
  // CHECK: weft.gather %{{.*}}, %{{.*}} {axis = 0 : i64} : (tensor<64x32xf32>, tensor<4x16xi64>) -> tensor<4x16x32xf32>
  %0 = weft.gather %e, %t {axis = 0 : i64} : (tensor<64x32xf32>, tensor<4x16xi64>) -> tensor<4x16x32xf32>
  // CHECK: weft.reshape %{{.*}} : tensor<4x16x32xf32> -> tensor<64x32xf32>
  %1 = weft.reshape %0 : tensor<4x16x32xf32> -> tensor<64x32xf32>
  // CHECK: weft.transpose %{{.*}} {permutation = array<i64: 1, 0>}
  %2 = weft.transpose %1 {permutation = array<i64: 1, 0>} : (tensor<64x32xf32>) -> tensor<32x64xf32>
  // CHECK: weft.slice
  %3 = weft.slice %x {starts = array<i64: 0, 32>, limits = array<i64: 4, 64>, strides = array<i64: 1, 2>} : (tensor<4x96xf32>) -> tensor<4x16xf32>
  // CHECK: weft.concat %{{.*}}, %{{.*}} {axis = 1 : i64} : (tensor<4x96xf32>, tensor<4x16xf32>) -> tensor<4x112xf32>
  %4 = weft.concat %x, %3 {axis = 1 : i64} : (tensor<4x96xf32>, tensor<4x16xf32>) -> tensor<4x112xf32>
  // CHECK: weft.broadcast %{{.*}} : tensor<4x1x16xf32> -> tensor<4x3x16xf32>
  %r = weft.reshape %3 : tensor<4x16xf32> -> tensor<4x1x16xf32>
  %5 = weft.broadcast %r : tensor<4x1x16xf32> -> tensor<4x3x16xf32>
  // CHECK: weft.constant dense<[4, 16]> : tensor<2xi64>
  %6 = weft.constant dense<[4, 16]> : tensor<2xi64>
  return
}

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<4x2x16x8xf32>, %k: tensor<4x2x16x8xf32>) -> tensor<4x2x16x16xf32> {
  // CHECK: weft.matmul %{{.*}}, %{{.*}} {transpose_rhs = true} : (tensor<4x2x16x8xf32>, tensor<4x2x16x8xf32>) -> tensor<4x2x16x16xf32>
  %s = weft.matmul %q, %k {transpose_rhs = true} : (tensor<4x2x16x8xf32>, tensor<4x2x16x8xf32>) -> tensor<4x2x16x16xf32>
  // CHECK: weft.causal_mask %{{.*}} : tensor<4x2x16x16xf32>
  %m = weft.causal_mask %s : tensor<4x2x16x16xf32>
  // CHECK: weft.causal_mask %{{.*}} {diagonal = 1 : i64, fill = -1.000000e+04 : f64}
  %m2 = weft.causal_mask %s {diagonal = 1 : i64, fill = -1.0e4 : f64} : tensor<4x2x16x16xf32>
  %p = weft.softmax %m {axis = 3 : i64} : tensor<4x2x16x16xf32>
  return %p : tensor<4x2x16x16xf32>
}

// CHECK-LABEL: func.func @cnn
func.func @cnn(%x: tensor<4x3x16x16xf32>, %w: tensor<8x3x3x3xf32>, %b: tensor<8xf32>, %dw: tensor<8x1x3x3xf32>) {
  // CHECK: weft.conv2d %{{.*}}, %{{.*}}, %{{.*}} {dilations = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, strides = array<i64: 1, 1>}
  %0 = weft.conv2d %x, %w, %b {strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, dilations = array<i64: 1, 1>} : (tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>) -> tensor<4x8x16x16xf32>
  // CHECK: weft.conv2d %{{.*}}, %{{.*}} {dilations = array<i64: 2, 2>, groups = 8 : i64
  %1 = weft.conv2d %0, %dw {strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>, dilations = array<i64: 2, 2>, groups = 8 : i64} : (tensor<4x8x16x16xf32>, tensor<8x1x3x3xf32>) -> tensor<4x8x6x6xf32>
  %2 = weft.max_pool2d %0 {kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, padding = array<i64: 0, 0, 0, 0>} : (tensor<4x8x16x16xf32>) -> tensor<4x8x8x8xf32>
  // CHECK: weft.avg_pool2d %{{.*}} {count_include_pad = true
  %3 = weft.avg_pool2d %2 {kernel = array<i64: 3, 3>, strides = array<i64: 1, 1>, padding = array<i64: 1, 1, 1, 1>, count_include_pad = true} : (tensor<4x8x8x8xf32>) -> tensor<4x8x8x8xf32>
  // CHECK: weft.global_avg_pool %{{.*}} : (tensor<4x8x8x8xf32>) -> tensor<4x8x1x1xf32>
  %4 = weft.global_avg_pool %3 : (tensor<4x8x8x8xf32>) -> tensor<4x8x1x1xf32>
  return
}

// CHECK-LABEL: func.func @losses
func.func @losses(%logits: tensor<4x16x64xf32>, %labels: tensor<4x16xi64>, %y: tensor<4x10xf32>, %t: tensor<4x10xf32>) -> (tensor<f32>, tensor<f32>) {
  // CHECK: weft.cross_entropy %{{.*}}, %{{.*}} : (tensor<4x16x64xf32>, tensor<4x16xi64>) -> tensor<f32>
  %0 = weft.cross_entropy %logits, %labels : (tensor<4x16x64xf32>, tensor<4x16xi64>) -> tensor<f32>
  // CHECK: weft.mse %{{.*}}, %{{.*}} : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<f32>
  %1 = weft.mse %y, %t : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<f32>
  return %0, %1 : tensor<f32>, tensor<f32>
}

// CHECK-LABEL: func.func @onnx
func.func @onnx(%x: tensor<4x8xf32>) -> tensor<*xf32> {
  // CHECK: %[[NONE:.*]] = weft.onnx.none
  %n = weft.onnx.none
  // CHECK: weft.onnx.node "Clip"(%{{.*}}, %[[NONE]], %[[NONE]]) {name = "/act/Clip", opset = 17 : i64}
  %0 = weft.onnx.node "Clip"(%x, %n, %n) {name = "/act/Clip", opset = 17 : i64} : (tensor<4x8xf32>, none, none) -> tensor<*xf32>
  return %0 : tensor<*xf32>
}

// CHECK-LABEL: func.func @collectives
func.func @collectives(%x: tensor<4x8xf32>) -> tensor<8x4xf32> {
  // CHECK: weft.all_to_all %{{.*}} {axes = ["tp"], concat_dim = 0 : i64, split_dim = 1 : i64} : tensor<4x8xf32> -> tensor<8x4xf32>
  %0 = weft.all_to_all %x {axes = ["tp"], split_dim = 1 : i64, concat_dim = 0 : i64} : tensor<4x8xf32> -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// Point to point: no result for send; both keep their attributes.
// CHECK-LABEL: func.func @send_recv
func.func @send_recv(%x: tensor<8x32xf32>) -> tensor<8x32xf32> {
  // CHECK: weft.send %{{.*}} {axes = ["pp"], peer = 1 : i64, tag = 7 : i64} : tensor<8x32xf32>
  weft.send %x {axes = ["pp"], peer = 1 : i64, tag = 7 : i64} : tensor<8x32xf32>
  // CHECK: weft.recv {axes = ["pp"], peer = 1 : i64, tag = 8 : i64} : tensor<8x32xf32>
  %0 = weft.recv {axes = ["pp"], peer = 1 : i64, tag = 8 : i64} : tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}
