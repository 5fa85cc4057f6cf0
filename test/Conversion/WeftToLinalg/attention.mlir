// RUN: weft-opt %s --weft-lower-to-linalg -split-input-file -verify-diagnostics | FileCheck %s

// f32 calls the kernels every runtime has; the log-sum-exp buffer is the
// last one the forward writes and the backward reads.
// CHECK-LABEL: func.func @f32
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2x8xf32>
// CHECK: call @weft_rt_attention_f32(
// CHECK: call @weft_rt_attention_grad_f32(
func.func @f32(%q: tensor<2x8x4xf32>, %g: tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>) {
  %o, %lse = weft.attention %q, %q, %q {scale = 0.5 : f64, causal}
      : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
      -> (tensor<2x8x4xf32>, tensor<2x8xf32>)
  %dq, %dk, %dv = weft.attention_grad %g, %q, %q, %q, %o, %lse {scale = 0.5 : f64, causal}
      : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8xf32>)
      -> (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>)
  return %o, %dq : tensor<2x8x4xf32>, tensor<2x8x4xf32>
}

// -----

// bf16 calls the _bf16 kernels (the CUDA runtime's, once --target cuda
// renames them) with the same arguments; the log-sum-exp stays f32.
// CHECK-LABEL: func.func @bf16
// CHECK: memref.alloc() {alignment = 64 : i64} : memref<2x8x4xbf16>
// CHECK: %[[LSE:.*]] = memref.alloc() {alignment = 64 : i64} : memref<2x8xf32>
// CHECK: call @weft_rt_attention_bf16({{.*}}) : (i64, i64, i64, i64, i64, f32, i32, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
// CHECK: bufferization.to_tensor %[[LSE]] restrict writable : memref<2x8xf32> to tensor<2x8xf32>
// CHECK: call @weft_rt_attention_grad_bf16(
// CHECK-SAME: !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr) -> ()
func.func @bf16(%q: tensor<2x8x4xbf16>, %g: tensor<2x8x4xbf16>) -> (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>) {
  %o, %lse = weft.attention %q, %q, %q {scale = 0.5 : f64, causal}
      : (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>)
      -> (tensor<2x8x4xbf16>, tensor<2x8xf32>)
  %dq, %dk, %dv = weft.attention_grad %g, %q, %q, %q, %o, %lse {scale = 0.5 : f64, causal}
      : (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8xf32>)
      -> (tensor<2x8x4xbf16>, tensor<2x8x4xbf16>, tensor<2x8x4xbf16>)
  return %o, %dq : tensor<2x8x4xbf16>, tensor<2x8x4xbf16>
}

// -----

// No runtime has f16 kernels.
func.func @f16(%q: tensor<2x8x4xf16>) -> tensor<2x8x4xf16> {
  // expected-error @+2 {{lowers only on f32 or bf16 (the runtime's attention kernels); got 'f16'}}
  // expected-error @+1 {{failed to legalize operation 'weft.attention'}}
  %o, %lse = weft.attention %q, %q, %q {scale = 0.5 : f64}
      : (tensor<2x8x4xf16>, tensor<2x8x4xf16>, tensor<2x8x4xf16>)
      -> (tensor<2x8x4xf16>, tensor<2x8xf32>)
  return %o : tensor<2x8x4xf16>
}
