// RUN: weft-opt %s --weft-fuse-attention=mode=on | FileCheck %s --check-prefixes=CHECK,ON,F32,NOLIMIT
// RUN: weft-opt %s --weft-fuse-attention=mode=off | FileCheck %s --check-prefixes=CHECK,OFF,F32
// auto: T x S = 16 x 16 = 256 scores per (batch, head) in every function.
// RUN: weft-opt %s --weft-fuse-attention="mode=auto min-scores=256" | FileCheck %s --check-prefixes=CHECK,ON,F32,NOLIMIT
// RUN: weft-opt %s --weft-fuse-attention="mode=auto min-scores=257" | FileCheck %s --check-prefixes=CHECK,OFF,F32
// What weftc --target cuda asks for: bf16 chains too, heads up to 128.
// RUN: weft-opt %s --weft-fuse-attention="mode=on bf16=true max-head-dim=128" | FileCheck %s --check-prefixes=CHECK,ON,GPU
// RUN: not weft-opt %s --weft-fuse-attention=mode=always 2>&1 | FileCheck %s --check-prefix=BADMODE
// BADMODE: --weft-fuse-attention: mode must be on, off or auto, got 'always'
// RUN: not weft-opt %s --weft-fuse-attention=max-head-dim=-1 2>&1 | FileCheck %s --check-prefix=BADDIM
// BADDIM: --weft-fuse-attention: min-scores and max-head-dim must be >= 0, got 65536 and -1

// The chain as torch.onnx.export leaves a nanoGPT attention (weftc
// --emit=weft): k^T is a transpose of the reshaped keys, which the fused
// op's key composes into one transpose.
// CHECK-LABEL: func.func @exported_causal
// ON: %[[K:.*]] = weft.transpose %arg1 {permutation = array<i64: 0, 2, 1, 3>} : (tensor<4x16x2x8xf32>) -> tensor<4x2x16x8xf32>
// ON-NEXT: %[[O:.*]], %{{.*}} = weft.attention %arg0, %[[K]], %arg2 {causal, scale = 0.353553{{[0-9]*}} : f64}
// ON-NOT: weft.softmax
// ON: return %[[O]]
// OFF: weft.causal_mask
// OFF: weft.softmax
// OFF-NOT: weft.attention
func.func @exported_causal(%q: tensor<4x2x16x8xf32>, %kr: tensor<4x16x2x8xf32>,
                           %v: tensor<4x2x16x8xf32>) -> tensor<4x2x16x8xf32> {
  %c = weft.constant dense<0.353553385> : tensor<f32>
  %kt = weft.transpose %kr {permutation = array<i64: 0, 2, 3, 1>} : (tensor<4x16x2x8xf32>) -> tensor<4x2x8x16xf32>
  %s = weft.matmul %q, %kt : (tensor<4x2x16x8xf32>, tensor<4x2x8x16xf32>) -> tensor<4x2x16x16xf32>
  %sc = weft.mul %s, %c : (tensor<4x2x16x16xf32>, tensor<f32>) -> tensor<4x2x16x16xf32>
  %m = weft.causal_mask %sc : tensor<4x2x16x16xf32>
  %p = weft.softmax %m {axis = 3 : i64} : tensor<4x2x16x16xf32>
  %o = weft.matmul %p, %v : (tensor<4x2x16x16xf32>, tensor<4x2x16x8xf32>) -> tensor<4x2x16x8xf32>
  return %o : tensor<4x2x16x8xf32>
}

// Not causal, scaled by a division, the keys given as is (transpose_rhs),
// rank 3, the constant on the left of a product with another use.
// CHECK-LABEL: func.func @plain_div
// ON: weft.attention %arg0, %arg1, %arg2 {scale = 2.500000e-01 : f64}
// ON-NOT: weft.matmul
// OFF: weft.div
func.func @plain_div(%q: tensor<3x16x4xf32>, %k: tensor<3x16x4xf32>,
                     %v: tensor<3x16x5xf32>) -> tensor<3x16x5xf32> {
  %c = weft.constant dense<4.0> : tensor<f32>
  %s = weft.matmul %q, %k {transpose_rhs = true} : (tensor<3x16x4xf32>, tensor<3x16x4xf32>) -> tensor<3x16x16xf32>
  %sc = weft.div %s, %c : (tensor<3x16x16xf32>, tensor<f32>) -> tensor<3x16x16xf32>
  %p = weft.softmax %sc {axis = 2 : i64} : tensor<3x16x16xf32>
  %o = weft.matmul %p, %v : (tensor<3x16x16xf32>, tensor<3x16x5xf32>) -> tensor<3x16x5xf32>
  return %o : tensor<3x16x5xf32>
}

// Near misses, left alone in every mode.
// CHECK-LABEL: func.func @near_misses
// CHECK-NOT: weft.attention
// CHECK: return
func.func @near_misses(%q: tensor<2x16x4xf32>, %k: tensor<2x16x4xf32>,
                       %v: tensor<2x16x4xf32>, %x: tensor<f32>)
    -> (tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>,
        tensor<2x16x4xf32>, tensor<2x16x16xf32>, tensor<2x16x4xf32>) {
  %c = weft.constant dense<0.5> : tensor<f32>
  // A mask one diagonal above the main one.
  %s0 = weft.matmul %q, %k {transpose_rhs = true} : (tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x16x16xf32>
  %m0 = weft.causal_mask %s0 {diagonal = 1 : i64} : tensor<2x16x16xf32>
  %p0 = weft.softmax %m0 {axis = 2 : i64} : tensor<2x16x16xf32>
  %o0 = weft.matmul %p0, %v : (tensor<2x16x16xf32>, tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  // The softmax over the queries.
  %s1 = weft.matmul %q, %k {transpose_rhs = true} : (tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x16x16xf32>
  %p1 = weft.softmax %s1 {axis = 1 : i64} : tensor<2x16x16xf32>
  %o1 = weft.matmul %p1, %v : (tensor<2x16x16xf32>, tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  // A scale that is not a constant.
  %s2 = weft.matmul %q, %k {transpose_rhs = true} : (tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x16x16xf32>
  %sc2 = weft.mul %s2, %x : (tensor<2x16x16xf32>, tensor<f32>) -> tensor<2x16x16xf32>
  %p2 = weft.softmax %sc2 {axis = 2 : i64} : tensor<2x16x16xf32>
  %o2 = weft.matmul %p2, %v : (tensor<2x16x16xf32>, tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  // The probabilities returned as well (they are materialized anyway).
  %s3 = weft.matmul %q, %k {transpose_rhs = true} : (tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x16x16xf32>
  %p3 = weft.softmax %s3 {axis = 2 : i64} : tensor<2x16x16xf32>
  %o3 = weft.matmul %p3, %v : (tensor<2x16x16xf32>, tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  %p3b = weft.add %p3, %c : (tensor<2x16x16xf32>, tensor<f32>) -> tensor<2x16x16xf32>
  // Something between the softmax and the values (a scaled dropout).
  %s4 = weft.matmul %q, %k {transpose_rhs = true} : (tensor<2x16x4xf32>, tensor<2x16x4xf32>) -> tensor<2x16x16xf32>
  %p4 = weft.softmax %s4 {axis = 2 : i64} : tensor<2x16x16xf32>
  %d4 = weft.mul %p4, %c : (tensor<2x16x16xf32>, tensor<f32>) -> tensor<2x16x16xf32>
  %o4 = weft.matmul %d4, %v : (tensor<2x16x16xf32>, tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  return %o0, %o1, %o2, %o3, %p3b, %o4 : tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x4xf32>, tensor<2x16x16xf32>, tensor<2x16x4xf32>
}

// bf16 (a --precision bf16 step, after --weft-mixed-precision) is fused
// only with bf16=true (the CUDA runtime's kernels); its log-sum-exp is f32.
// CHECK-LABEL: func.func @bf16
// F32-NOT: weft.attention
// F32: weft.softmax
// GPU: weft.attention %arg0, %arg1, %arg2 {causal, scale = 5.000000e-01 : f64} : (tensor<2x16x4xbf16>, tensor<2x16x4xbf16>, tensor<2x16x4xbf16>) -> (tensor<2x16x4xbf16>, tensor<2x16xf32>)
// GPU-NOT: weft.softmax
// CHECK: return
func.func @bf16(%q: tensor<2x16x4xbf16>, %k: tensor<2x16x4xbf16>,
                %v: tensor<2x16x4xbf16>) -> tensor<2x16x4xbf16> {
  %c = weft.constant dense<0.5> : tensor<bf16>
  %s = weft.matmul %q, %k {transpose_rhs = true} : (tensor<2x16x4xbf16>, tensor<2x16x4xbf16>) -> tensor<2x16x16xbf16>
  %sc = weft.mul %s, %c : (tensor<2x16x16xbf16>, tensor<bf16>) -> tensor<2x16x16xbf16>
  %m = weft.causal_mask %sc : tensor<2x16x16xbf16>
  %p = weft.softmax %m {axis = 2 : i64} : tensor<2x16x16xbf16>
  %o = weft.matmul %p, %v : (tensor<2x16x16xbf16>, tensor<2x16x4xbf16>) -> tensor<2x16x4xbf16>
  return %o : tensor<2x16x4xbf16>
}

// A mixed chain (bf16 products around an f32 softmax) stays in every mode.
// CHECK-LABEL: func.func @mixed
// CHECK-NOT: weft.attention
// CHECK: weft.softmax
func.func @mixed(%q: tensor<2x16x4xbf16>, %k: tensor<2x16x4xbf16>,
                 %v: tensor<2x16x4xbf16>) -> tensor<2x16x4xbf16> {
  %s = weft.matmul %q, %k {transpose_rhs = true} : (tensor<2x16x4xbf16>, tensor<2x16x4xbf16>) -> tensor<2x16x16xbf16>
  %sf = weft.cast %s : tensor<2x16x16xbf16> -> tensor<2x16x16xf32>
  %p = weft.softmax %sf {axis = 2 : i64} : tensor<2x16x16xf32>
  %pb = weft.cast %p : tensor<2x16x16xf32> -> tensor<2x16x16xbf16>
  %o = weft.matmul %pb, %v : (tensor<2x16x16xbf16>, tensor<2x16x4xbf16>) -> tensor<2x16x4xbf16>
  return %o : tensor<2x16x4xbf16>
}

// max-head-dim=128 fuses D = Dv = 128 but leaves D = 256 and Dv = 256.
// CHECK-LABEL: func.func @head_dims
// NOLIMIT-COUNT-3: weft.attention
// GPU: weft.attention %arg0, %arg0, %arg0
// GPU-NOT: weft.attention
// OFF-NOT: weft.attention
// CHECK: return
func.func @head_dims(%x: tensor<2x16x128xf32>, %w: tensor<2x16x256xf32>)
    -> (tensor<2x16x128xf32>, tensor<2x16x128xf32>, tensor<2x16x256xf32>) {
  %s0 = weft.matmul %x, %x {transpose_rhs = true} : (tensor<2x16x128xf32>, tensor<2x16x128xf32>) -> tensor<2x16x16xf32>
  %p0 = weft.softmax %s0 {axis = 2 : i64} : tensor<2x16x16xf32>
  %o0 = weft.matmul %p0, %x : (tensor<2x16x16xf32>, tensor<2x16x128xf32>) -> tensor<2x16x128xf32>
  %s1 = weft.matmul %w, %w {transpose_rhs = true} : (tensor<2x16x256xf32>, tensor<2x16x256xf32>) -> tensor<2x16x16xf32>
  %p1 = weft.softmax %s1 {axis = 2 : i64} : tensor<2x16x16xf32>
  %o1 = weft.matmul %p1, %x : (tensor<2x16x16xf32>, tensor<2x16x128xf32>) -> tensor<2x16x128xf32>
  %s2 = weft.matmul %x, %x {transpose_rhs = true} : (tensor<2x16x128xf32>, tensor<2x16x128xf32>) -> tensor<2x16x16xf32>
  %p2 = weft.softmax %s2 {axis = 2 : i64} : tensor<2x16x16xf32>
  %o2 = weft.matmul %p2, %w : (tensor<2x16x16xf32>, tensor<2x16x256xf32>) -> tensor<2x16x256xf32>
  return %o0, %o1, %o2 : tensor<2x16x128xf32>, tensor<2x16x128xf32>, tensor<2x16x256xf32>
}

// A pipeline stage (--weft-assign-stages) carries over to the new ops; a
// chain cut between two stages stays.
// CHECK-LABEL: func.func @stages
// ON: weft.transpose %arg1 {permutation = array<i64: 0, 2, 1>, weft.stage = 1 : i64}
// ON: weft.attention {{.*}}weft.stage = 1 : i64
// ON: weft.softmax {{.*}}weft.stage = 1 : i64
// ON-NOT: weft.attention
// ON: return
func.func @stages(%q: tensor<2x16x4xf32>, %kt: tensor<2x4x16xf32>,
                  %v: tensor<2x16x4xf32>) -> (tensor<2x16x4xf32>, tensor<2x16x4xf32>) {
  %s = weft.matmul %q, %kt {weft.stage = 1 : i64} : (tensor<2x16x4xf32>, tensor<2x4x16xf32>) -> tensor<2x16x16xf32>
  %p = weft.softmax %s {axis = 2 : i64, weft.stage = 1 : i64} : tensor<2x16x16xf32>
  %o = weft.matmul %p, %v {weft.stage = 1 : i64} : (tensor<2x16x16xf32>, tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  %s2 = weft.matmul %q, %kt {weft.stage = 0 : i64} : (tensor<2x16x4xf32>, tensor<2x4x16xf32>) -> tensor<2x16x16xf32>
  %p2 = weft.softmax %s2 {axis = 2 : i64, weft.stage = 1 : i64} : tensor<2x16x16xf32>
  %o2 = weft.matmul %p2, %v {weft.stage = 1 : i64} : (tensor<2x16x16xf32>, tensor<2x16x4xf32>) -> tensor<2x16x4xf32>
  return %o, %o2 : tensor<2x16x4xf32>, tensor<2x16x4xf32>
}

// One transpose read as k^T and, through transpose_rhs, as v: both compose
// back to its input, and the transpose goes.
// CHECK-LABEL: func.func @shared_transpose
// ON: weft.attention %arg0, %arg0, %arg0 {scale = 1.000000e+00 : f64}
// ON-NOT: weft.transpose
// ON: return
func.func @shared_transpose(%x: tensor<2x16x16xf32>) -> tensor<2x16x16xf32> {
  %t = weft.transpose %x {permutation = array<i64: 0, 2, 1>} : (tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %s = weft.matmul %x, %t : (tensor<2x16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  %p = weft.softmax %s {axis = 2 : i64} : tensor<2x16x16xf32>
  %o = weft.matmul %p, %t {transpose_rhs = true} : (tensor<2x16x16xf32>, tensor<2x16x16xf32>) -> tensor<2x16x16xf32>
  return %o : tensor<2x16x16xf32>
}
