//===- Passes.td - Conversions into the weft dialect -------*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_CONVERSION_PASSES_TD
#define WEFT_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def LegalizeOnnxPass : Pass<"weft-legalize-onnx", "mlir::ModuleOp"> {
  let summary = "Rewrite generic ONNX nodes into typed weft ops";
  let description = [{
    The ONNX importer turns every node into a generic `weft.onnx.node` whose
    result types are not trusted. This pass walks each function in order and
    rewrites every node with the legalizer registered for its op type and
    opset, so real static types flow forward from the function arguments.
    Newly built ops whose operands are all constants and whose results are
    small are evaluated at compile time and replaced by `weft.constant`: this
    resolves the Shape/Gather/Concat/Reshape arithmetic PyTorch exports.
    Shape-like inputs (Reshape's shape, Slice's starts, ...) must end up
    constant. A Where that applies a constant causal mask becomes
    `weft.causal_mask`. Finally function result types are set to the types
    of the returned values, and dead constants and `weft.onnx.none` values
    are erased.

    Errors name the node, its op type and the reason: an op type with no
    legalizer (listing the supported ones), an opset outside the supported
    range, an unsupported attribute value, or a shape input that is not
    computable at compile time.

    Before:

    ```mlir
    func.func @main(%x: tensor<4x32xf32>, %w: tensor<10x32xf32>,
                    %b: tensor<10xf32>) -> tensor<*xf32> {
      %y = weft.onnx.node "Gemm"(%x, %w, %b)
          {name = "/fc/Gemm", opset = 17 : i64, attrs = {transB = 1 : i64}}
          : (tensor<4x32xf32>, tensor<10x32xf32>, tensor<10xf32>)
          -> tensor<*xf32>
      %r = weft.onnx.node "Relu"(%y) {name = "/act/Relu", opset = 17 : i64}
          : (tensor<*xf32>) -> tensor<*xf32>
      return %r : tensor<*xf32>
    }
    ```

    After:

    ```mlir
    func.func @main(%x: tensor<4x32xf32>, %w: tensor<10x32xf32>,
                    %b: tensor<10xf32>) -> tensor<4x10xf32> {
      %0 = weft.matmul %x, %w {transpose_rhs = true}
          : (tensor<4x32xf32>, tensor<10x32xf32>) -> tensor<4x10xf32>
      %1 = weft.add %0, %b
          : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
      %2 = weft.relu %1 : tensor<4x10xf32>
      return %2 : tensor<4x10xf32>
    }
    ```
  }];
  let dependentDialects = ["::weft::WeftDialect", "::mlir::func::FuncDialect"];
}

#endif // WEFT_CONVERSION_PASSES_TD
