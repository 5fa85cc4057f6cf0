//===- Passes.td - Conversions into and out of weft --------*- tablegen -*-===//
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

    Layers that behave differently in training follow PyTorch's modes: by
    default the function is the model in eval mode (BatchNorm normalizes
    with its running statistics, Dropout passes its input through). With
    `training`, it is the model in train mode: BatchNorm normalizes with the
    batch's statistics and the function gains one result per running
    statistic, its next value (`{weft.buffer = "<name>"}`: momentum, and the
    unbiased batch variance, as torch.nn.BatchNorm does), which the
    training step returns so the runtime carries it to the next step.

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
  let options = [
    Option<"training", "training", "bool", /*default=*/"false",
           "Train-mode semantics: BatchNorm with batch statistics and "
           "running-statistic updates as results">,
  ];
}

def LowerToLinalgPass : Pass<"weft-lower-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower weft ops to linalg, tensor, arith, math and scf";
  let description = [{
    Rewrites every weft op in every function into upstream ops on tensors,
    with exactly the reference evaluator's semantics, so that the result can
    be fused, bufferized and lowered to LLVM by upstream passes. Function
    signatures, calls and argument attributes are unchanged.

    - Elementwise ops become `linalg.generic`s whose indexing maps express
      numpy broadcasting. bf16 and f16 are computed in f32 inside the region
      (`arith.extf` / `arith.truncf`): compute wide, round to the element
      type, as the evaluator does. Float-to-integer casts saturate and map
      NaN to 0; integer division truncates (division by zero gives 0
      instead of trapping).
    - `weft.matmul` becomes `linalg.matmul` / `linalg.batch_matmul` with
      indexing maps expressing the transposes, on a zero-filled init. A
      matrix times a 2-D weight collapses the batch axes into M; a 2-D
      operand of a batched product is read through a broadcast map where
      `linalg.batch_matmul` allows one. bf16 and f16 accumulate in f32 and
      are truncated once at the end.
    - Reductions, softmax, log-softmax, layer norm and the losses are chains
      of `linalg.generic` reductions and elementwise generics (max-shifted
      softmax, two-pass biased variance); they accumulate in the element
      type, f32 for bf16 and f16.
    - conv2d is `tensor.pad` + `linalg.conv_2d_nchw_fchw` (grouped:
      `linalg.conv_2d_ngchw_gfchw`); pools are `linalg.pooling_nchw_max` /
      `_sum`. The conv adjoints are a transposed convolution and a
      `linalg.generic` reduction; the pool adjoints gather, for every input
      cell, the windows that cover it.
    - Data movement uses `tensor` ops (`collapse_shape` / `expand_shape`,
      `extract_slice`, `insert_slice`, `pad`) and `linalg.transpose`;
      `weft.gather` reads with `tensor.extract` inside a generic;
      `weft.scatter_add` is an `scf.for` over the indices.

    Run-time errors of the evaluator (an index out of range, a label out of
    range, integer division by zero) are not checked: indices are clamped so
    memory stays safe, and the result is unspecified. An op without a
    lowering (or an unsupported type) fails the pass with an error naming
    the op.

    Before:

    ```mlir
    func.func @f(%x: tensor<4x10xf32>, %b: tensor<10xf32>) -> tensor<4x10xf32> {
      %0 = weft.add %x, %b
          : (tensor<4x10xf32>, tensor<10xf32>) -> tensor<4x10xf32>
      return %0 : tensor<4x10xf32>
    }
    ```

    After:

    ```mlir
    #id = affine_map<(d0, d1) -> (d0, d1)>
    #row = affine_map<(d0, d1) -> (d1)>
    func.func @f(%x: tensor<4x10xf32>, %b: tensor<10xf32>) -> tensor<4x10xf32> {
      %e = tensor.empty() : tensor<4x10xf32>
      %0 = linalg.generic {indexing_maps = [#id, #row, #id],
                           iterator_types = ["parallel", "parallel"]}
          ins(%x, %b : tensor<4x10xf32>, tensor<10xf32>)
          outs(%e : tensor<4x10xf32>) {
      ^bb0(%in: f32, %in_0: f32, %out: f32):
        %s = arith.addf %in, %in_0 : f32
        linalg.yield %s : f32
      } -> tensor<4x10xf32>
      return %0 : tensor<4x10xf32>
    }
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect",
    "::mlir::bufferization::BufferizationDialect",
    "::mlir::func::FuncDialect",
    "::mlir::LLVM::LLVMDialect",
    "::mlir::linalg::LinalgDialect",
    "::mlir::math::MathDialect",
    "::mlir::memref::MemRefDialect",
    "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect"
  ];
}

#endif // WEFT_CONVERSION_PASSES_TD
