// RUN: weft-opt %s --weft-select-entry -split-input-file -verify-diagnostics \
// RUN:   | FileCheck %s

// CHECK-LABEL: func.func private @loss_grad
// CHECK-LABEL: func.func @train_step
// CHECK-SAME: (%{{.*}}: tensor<4x2xf32> {bufferization.writable = false, weft.param = "w"})
// CHECK-SAME: attributes {llvm.bareptr}
func.func @loss_grad(%w: tensor<4x2xf32>) -> tensor<4x2xf32> {
  return %w : tensor<4x2xf32>
}
func.func @train_step(%w: tensor<4x2xf32> {weft.param = "w"}) -> tensor<4x2xf32> {
  %0 = func.call @loss_grad(%w) : (tensor<4x2xf32>) -> tensor<4x2xf32>
  return %0 : tensor<4x2xf32>
}

// -----

// expected-error @below {{no function @train_step with a body to compile}}
module {
  func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// expected-error @below {{argument 0 of @train_step ('tensor<?x2xf32>') has a dynamic shape}}
func.func @train_step(%w: tensor<?x2xf32>) -> tensor<?x2xf32> {
  return %w : tensor<?x2xf32>
}
