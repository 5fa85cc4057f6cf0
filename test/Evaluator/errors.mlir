// Every way weft-eval can refuse to run names the argument, the type it
// expected and the file, and exits with status 1.
//
// RUN: rm -rf %t && mkdir -p %t
// RUN: %python -c "import numpy as np; \
// RUN:   np.save('%t/x31.npy', np.zeros((4, 31), np.float32)); \
// RUN:   np.save('%t/x.npy', np.zeros((4, 32), np.float32)); \
// RUN:   np.save('%t/tokens.npy', np.array([1, 7]))"
// RUN: not weft-eval %s 2>&1 | FileCheck %s --check-prefix=CHOOSE
// RUN: not weft-eval %s --fn=linear --input input=%t/x31.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=SHAPE
// RUN: not weft-eval %s --fn=linear 2>&1 | FileCheck %s --check-prefix=UNBOUND
// RUN: not weft-eval %s --fn=linear --input input=%t/x.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=NOWEIGHTS
// RUN: not weft-eval %s --fn=linear --input inptu=%t/x.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=UNKNOWN
// RUN: not weft-eval %s --fn=lookup --input tokens=%t/tokens.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=GATHER
// RUN: not weft-eval %s --fn=onnx --input arg0=%t/x.npy 2>&1 \
// RUN:   | FileCheck %s --check-prefix=ONNX

// CHOOSE: error: {{.*}}errors.mlir has 3 public functions and no @forward; choose one with --fn=NAME (functions: @linear, @lookup, @onnx)
// SHAPE: error: input 'input': {{.*}}x31.npy has shape 4x31 but the function expects tensor<4x32xf32>
// UNBOUND: error: input 'input' (tensor<4x32xf32>) is not bound: pass --input input=FILE.npy
// NOWEIGHTS: error: parameter 'fc.weight' (tensor<32x2xf32>) has no value: pass --param fc.weight=FILE.npy or --weights=PATH
// UNKNOWN: error: --input inptu: @linear has no input named 'inptu' (inputs: input)

func.func @linear(%x: tensor<4x32xf32> {weft.input = "input"},
                  %w: tensor<32x2xf32> {weft.param = "fc.weight"})
    -> tensor<4x2xf32> {
  %y = weft.matmul %x, %w : (tensor<4x32xf32>, tensor<32x2xf32>) -> tensor<4x2xf32>
  return %y : tensor<4x2xf32>
}

func.func @lookup(%tokens: tensor<2xi64> {weft.input = "tokens"})
    -> tensor<2x2xf32> {
  %table = weft.constant dense<1.0> : tensor<5x2xf32>
  // GATHER: errors.mlir:[[@LINE+1]]:8: error: index 7 (indices element 1) is out of range for axis 0 of size 5
  %e = weft.gather %table, %tokens {axis = 0 : i64}
      : (tensor<5x2xf32>, tensor<2xi64>) -> tensor<2x2xf32>
  return %e : tensor<2x2xf32>
}

func.func @onnx(%x: tensor<4x32xf32>) -> tensor<4x32xf32> {
  // ONNX: errors.mlir:[[@LINE+1]]:8: error: op 'weft.onnx.node' (ONNX Relu) is not legalized; run --weft-legalize-onnx first
  %y = weft.onnx.node "Relu"(%x) {name = "/act/Relu", opset = 17 : i64}
      : (tensor<4x32xf32>) -> tensor<4x32xf32>
  return %y : tensor<4x32xf32>
}
