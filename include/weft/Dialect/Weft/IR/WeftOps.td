//===- WeftOps.td - weft dialect operations ----------------*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Every op works on statically shaped ranked tensors and infers its result
// type through InferTypeOpInterface, so the importer and later passes build
// ops without spelling result types and the verifier checks the spelled ones.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_OPS_TD
#define WEFT_OPS_TD

include "weft/Dialect/Weft/IR/WeftBase.td"
include "weft/Dialect/Weft/IR/WeftInterfaces.td"
include "weft/Dialect/Weft/IR/WeftParallel.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"

// Ops with a reverse-mode rule (implemented in WeftGradients*.cpp).
defvar Weft_Differentiable =
    DeclareOpInterfaceMethods<Weft_GradientOpInterface>;

def Weft_PositiveFloat : AttrConstraint<
    CPred<"::llvm::cast<::mlir::FloatAttr>($_self).getValueAsDouble() > 0">,
    "whose value is positive">;

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

def Weft_ConstantOp : Weft_Op<"constant",
    [ConstantLike, Pure, InferTypeOpAdaptor, Weft_NotDifferentiable]> {
  let summary = "A constant tensor";
  let description = [{
    A tensor known at compile time: shape arithmetic, masks, scalars.
    Trainable weights are never constants; they are `weft.param` arguments.

    ```mlir
    %c = weft.constant dense<[4, 16]> : tensor<2xi64>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Linear algebra
//===----------------------------------------------------------------------===//

def Weft_MatMulOp : Weft_Op<"matmul", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["lhs", "rhs", "result"]>, Weft_Differentiable]> {
  let summary = "Batched matrix product with optional transposes";
  let description = [{
    `result[..., i, j] = sum_k lhs'[..., i, k] * rhs'[..., k, j]` where `'`
    swaps the last two axes when `transpose_lhs` / `transpose_rhs` is set.
    Leading (batch) axes broadcast as in numpy. Products accumulate in f32 or
    wider whatever the element type.

    ```mlir
    %y = weft.matmul %x, %w {transpose_rhs = true}
        : (tensor<4x32xf32>, tensor<10x32xf32>) -> tensor<4x10xf32>
    ```

    Constraints: both operands have rank >= 2; the contracted sizes agree;
    batch axes broadcast.
  }];
  let arguments = (ins Weft_FloatTensor:$lhs, Weft_FloatTensor:$rhs,
      DefaultValuedAttr<BoolAttr, "false">:$transpose_lhs,
      DefaultValuedAttr<BoolAttr, "false">:$transpose_rhs);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
  // An operand transposed by a weft.transpose of its last two axes is read
  // transposed instead (the flag flips).
  let hasCanonicalizer = 1;
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Weft_BinaryOp<string mnemonic, Type operandType, list<Trait> traits = []>
    : Weft_Op<mnemonic, !listconcat([Pure, InferTypeOpAdaptor,
        AllElementTypesMatch<["lhs", "rhs", "result"]>, Weft_Differentiable],
        traits)> {
  let description = [{
    Elementwise with numpy broadcasting: operand shapes are aligned from the
    right and size-1 axes stretch.

    Constraints: element types match; shapes broadcast.
  }];
  let arguments = (ins operandType:$lhs, operandType:$rhs);
  let results = (outs operandType:$result);
  let assemblyFormat =
      "$lhs `,` $rhs attr-dict `:` functional-type(operands, results)";
}

def Weft_AddOp : Weft_BinaryOp<"add", Weft_NumericTensor, [Commutative]> {
  let summary = "Elementwise sum";
}
def Weft_SubOp : Weft_BinaryOp<"sub", Weft_NumericTensor> {
  let summary = "Elementwise difference";
}
def Weft_MulOp : Weft_BinaryOp<"mul", Weft_NumericTensor, [Commutative]> {
  let summary = "Elementwise product";
}
def Weft_DivOp : Weft_BinaryOp<"div", Weft_NumericTensor> {
  let summary = "Elementwise quotient (integers truncate toward zero)";
}
def Weft_PowOp : Weft_BinaryOp<"pow", Weft_FloatTensor> {
  let summary = "Elementwise power";
}
def Weft_MaxOp : Weft_BinaryOp<"max", Weft_NumericTensor, [Commutative]> {
  let summary = "Elementwise maximum";
}
def Weft_MinOp : Weft_BinaryOp<"min", Weft_NumericTensor, [Commutative]> {
  let summary = "Elementwise minimum";
}

def Weft_CmpOp : Weft_Op<"cmp", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["lhs", "rhs"]>, Weft_NotDifferentiable]> {
  let summary = "Elementwise comparison to a boolean tensor";
  let description = [{
    ```mlir
    %m = weft.cmp eq, %a, %b : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xi1>
    ```
    Constraints: element types match; shapes broadcast.
  }];
  let arguments = (ins Weft_CmpPredicateAttr:$predicate,
      Weft_NumericTensor:$lhs, Weft_NumericTensor:$rhs);
  let results = (outs Weft_BoolTensor:$result);
  // The enum prints its own leading space; `` drops the op's.
  let assemblyFormat = "`` $predicate `,` $lhs `,` $rhs attr-dict `:` "
                       "functional-type(operands, results)";
}

def Weft_WhereOp : Weft_Op<"where", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["on_true", "on_false", "result"]>,
    Weft_Differentiable]> {
  let summary = "Elementwise select";
  let description = [{
    `result = condition ? on_true : on_false`, all three broadcast together.

    Constraints: `on_true` and `on_false` share an element type; shapes
    broadcast.
  }];
  let arguments = (ins Weft_BoolTensor:$condition, Weft_AnyTensor:$on_true,
      Weft_AnyTensor:$on_false);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat = "$condition `,` $on_true `,` $on_false attr-dict `:` "
                       "functional-type(operands, results)";
}

class Weft_UnaryOp<string mnemonic, Type type = Weft_FloatTensor,
                   list<Trait> traits = []>
    : Weft_Op<mnemonic, !listconcat([Pure, InferTypeOpInterface,
        SameOperandsAndResultType, Weft_Differentiable], traits)> {
  let arguments = (ins type:$input);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Weft_NegOp : Weft_UnaryOp<"neg", Weft_NumericTensor> {
  let summary = "Elementwise negation";
}
def Weft_AbsOp : Weft_UnaryOp<"abs", Weft_NumericTensor> {
  let summary = "Elementwise absolute value";
}
def Weft_ReluOp : Weft_UnaryOp<"relu"> { let summary = "max(x, 0)"; }
def Weft_TanhOp : Weft_UnaryOp<"tanh"> { let summary = "Hyperbolic tangent"; }
def Weft_SigmoidOp : Weft_UnaryOp<"sigmoid"> { let summary = "1 / (1 + e^-x)"; }
def Weft_ExpOp : Weft_UnaryOp<"exp"> { let summary = "e^x"; }
def Weft_LogOp : Weft_UnaryOp<"log"> { let summary = "Natural logarithm"; }
def Weft_SqrtOp : Weft_UnaryOp<"sqrt"> { let summary = "Square root"; }
def Weft_RsqrtOp : Weft_UnaryOp<"rsqrt"> { let summary = "1 / sqrt(x)"; }
def Weft_ErfOp : Weft_UnaryOp<"erf"> { let summary = "Gauss error function"; }
def Weft_CosOp : Weft_UnaryOp<"cos"> { let summary = "Cosine (radians)"; }
def Weft_SinOp : Weft_UnaryOp<"sin"> { let summary = "Sine (radians)"; }

def Weft_GeluOp : Weft_Op<"gelu", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType, Weft_Differentiable]> {
  let summary = "Gaussian error linear unit";
  let description = [{
    Exact: `x * (1 + erf(x / sqrt(2))) / 2`. With `approximate = tanh`:
    `x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 x^3))) / 2`, as PyTorch's
    `GELU(approximate='tanh')`.

    ```mlir
    %y = weft.gelu %x approximate = tanh : tensor<4x64xf32>
    ```
  }];
  let arguments = (ins Weft_FloatTensor:$input,
      DefaultValuedAttr<Weft_GeluApproximationAttr,
                        "::weft::GeluApproximation::None">:$approximate);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat =
      "$input (`approximate` `=` `` $approximate^)? attr-dict `:` "
      "type($input)";
}

def Weft_CastOp : Weft_Op<"cast", [Pure, SameOperandsAndResultShape,
    Weft_Differentiable]> {
  let summary = "Element type conversion";
  let description = [{
    Float to float rounds to nearest even; float to integer truncates toward
    zero; to `i1` tests for non-zero.

    ```mlir
    %h = weft.cast %x : tensor<4x8xf32> -> tensor<4x8xbf16>
    ```
  }];
  let arguments = (ins Weft_AnyTensor:$input);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Normalization and reductions
//===----------------------------------------------------------------------===//

class Weft_AxisOp<string mnemonic> : Weft_Op<mnemonic, [Pure,
    InferTypeOpInterface, SameOperandsAndResultType, Weft_Differentiable]> {
  let arguments = (ins Weft_FloatTensor:$input, I64Attr:$axis);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Weft_SoftmaxOp : Weft_AxisOp<"softmax"> {
  let summary = "Softmax along one axis";
  let description = [{
    ```mlir
    %p = weft.softmax %x {axis = 1 : i64} : tensor<4x10xf32>
    ```
    Constraints: `0 <= axis < rank`.
  }];
}

def Weft_LogSoftmaxOp : Weft_AxisOp<"log_softmax"> {
  let summary = "Log of softmax along one axis, computed stably";
  let description = [{
    Constraints: `0 <= axis < rank`.
  }];
}

def Weft_LayerNormOp : Weft_Op<"layer_norm", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["input", "scale", "bias", "result"]>,
    Weft_Differentiable]> {
  let summary = "Layer normalization over the trailing axes";
  let description = [{
    Normalizes over axes `[axis, rank)` with biased variance, then applies
    `scale` and `bias`, both shaped like those trailing axes (PyTorch's
    `nn.LayerNorm`, ONNX `LayerNormalization`).

    ```mlir
    %y = weft.layer_norm %x, %g, %b {axis = 2 : i64, epsilon = 1.0e-05 : f64}
        : (tensor<4x16x32xf32>, tensor<32xf32>, tensor<32xf32>)
        -> tensor<4x16x32xf32>
    ```
    Constraints: `0 <= axis < rank`; scale and bias have the shape of the
    normalized axes; `epsilon > 0`.
  }];
  let arguments = (ins Weft_FloatTensor:$input, Weft_FloatTensor:$scale,
      Weft_FloatTensor:$bias, I64Attr:$axis,
      ConfinedAttr<F64Attr, [Weft_PositiveFloat]>:$epsilon);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$input `,` $scale `,` $bias attr-dict `:` "
                       "functional-type(operands, results)";
}

class Weft_ReduceOp<string mnemonic, Type type>
    : Weft_Op<mnemonic, [Pure, InferTypeOpAdaptor,
        AllElementTypesMatch<["input", "result"]>, Weft_Differentiable]> {
  let description = [{
    Reduces over `axes` (sorted, distinct, in range), dropping them unless
    `keep_dims` is set.

    ```mlir
    %s = weft.reduce_sum %x {axes = array<i64: 1>, keep_dims = true}
        : (tensor<4x8xf32>) -> tensor<4x1xf32>
    ```
  }];
  let arguments = (ins type:$input, DenseI64ArrayAttr:$axes,
      DefaultValuedAttr<BoolAttr, "false">:$keep_dims);
  let results = (outs type:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def Weft_ReduceSumOp : Weft_ReduceOp<"reduce_sum", Weft_NumericTensor> {
  let summary = "Sum over axes";
}
def Weft_ReduceMeanOp : Weft_ReduceOp<"reduce_mean", Weft_FloatTensor> {
  let summary = "Mean over axes";
}
def Weft_ReduceMaxOp : Weft_ReduceOp<"reduce_max", Weft_NumericTensor> {
  let summary = "Maximum over axes";
}

//===----------------------------------------------------------------------===//
// Rounding, scans and selection
//===----------------------------------------------------------------------===//

// Piecewise constant: zero gradient almost everywhere, as PyTorch's.
class Weft_RoundingOp<string mnemonic> : Weft_Op<mnemonic, [Pure,
    InferTypeOpInterface, SameOperandsAndResultType, Weft_NotDifferentiable,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let arguments = (ins Weft_FloatTensor:$input);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Weft_FloorOp : Weft_RoundingOp<"floor"> {
  let summary = "Largest integer not above x";
}
def Weft_CeilOp : Weft_RoundingOp<"ceil"> {
  let summary = "Smallest integer not below x";
}
def Weft_RoundOp : Weft_RoundingOp<"round"> {
  let summary = "Nearest integer, halves to even (ONNX Round, torch.round)";
}

def Weft_CumSumOp : Weft_Op<"cumsum", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType, Weft_Differentiable,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let summary = "Running sum along one axis";
  let description = [{
    `result[..., i, ...] = sum of input[..., j, ...]` over `j <= i`; with
    `exclusive` over `j < i`; with `reverse` the sum runs from the end
    (`j >= i`, or `j > i` when exclusive), as ONNX `CumSum`. The gradient is
    the cumsum of the result's gradient in the other direction.

    ```mlir
    %c = weft.cumsum %x {axis = 1 : i64} : tensor<4x16xf32>
    ```
    Constraints: `0 <= axis < rank`.
  }];
  let arguments = (ins Weft_NumericTensor:$input, I64Attr:$axis,
      DefaultValuedAttr<BoolAttr, "false">:$exclusive,
      DefaultValuedAttr<BoolAttr, "false">:$reverse);
  let results = (outs Weft_NumericTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

class Weft_ArgReduceOp<string mnemonic> : Weft_Op<mnemonic, [Pure,
    InferTypeOpAdaptor, Weft_NotDifferentiable,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let description = [{
    The index along `axis` of the extreme element of each slice, as i64;
    the axis is dropped unless `keep_dims`. Ties go to the first index, or
    the last with `select_last_index` (ONNX ArgMax/ArgMin); a NaN counts as
    the extreme, as in PyTorch.

    ```mlir
    %i = weft.arg_max %x {axis = 1 : i64} : (tensor<4x10xf32>) -> tensor<4xi64>
    ```
    Constraints: `0 <= axis < rank`; the axis is not empty.
  }];
  let arguments = (ins Weft_NumericTensor:$input, I64Attr:$axis,
      DefaultValuedAttr<BoolAttr, "false">:$keep_dims,
      DefaultValuedAttr<BoolAttr, "false">:$select_last_index);
  let results = (outs Weft_IndexTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def Weft_ArgMaxOp : Weft_ArgReduceOp<"arg_max"> {
  let summary = "Index of the maximum along an axis";
}
def Weft_ArgMinOp : Weft_ArgReduceOp<"arg_min"> {
  let summary = "Index of the minimum along an axis";
}

def Weft_TopKOp : Weft_Op<"top_k", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["input", "result"]>, Weft_Differentiable,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let summary = "The k largest (or smallest) values along an axis, sorted";
  let description = [{
    The values of ONNX `TopK` (`weft.top_k_indices` gives the indices):
    along `axis`, the `k` largest elements in descending order, or with
    `largest = false` the smallest in ascending order. Equal values keep
    their index order. The gradient goes to the selected elements (the
    positions `weft.top_k_indices` names); the others get zero.

    ```mlir
    %v = weft.top_k %x {axis = 1 : i64, k = 3 : i64}
        : (tensor<4x10xf32>) -> tensor<4x3xf32>
    ```
    Constraints: `0 <= axis < rank`; `1 <= k <= size of axis`.
  }];
  let arguments = (ins Weft_FloatTensor:$input, I64Attr:$axis, I64Attr:$k,
      DefaultValuedAttr<BoolAttr, "true">:$largest);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def Weft_TopKIndicesOp : Weft_Op<"top_k_indices", [Pure, InferTypeOpAdaptor,
    Weft_NotDifferentiable, DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let summary = "Indices of the elements weft.top_k selects";
  let description = [{
    ```mlir
    %i = weft.top_k_indices %x {axis = 1 : i64, k = 3 : i64}
        : (tensor<4x10xf32>) -> tensor<4x3xi64>
    ```
    Constraints: as `weft.top_k`.
  }];
  let arguments = (ins Weft_FloatTensor:$input, I64Attr:$axis, I64Attr:$k,
      DefaultValuedAttr<BoolAttr, "true">:$largest);
  let results = (outs Weft_IndexTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Data movement
//===----------------------------------------------------------------------===//

def Weft_GatherOp : Weft_Op<"gather", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["input", "result"]>, Weft_Differentiable]> {
  let summary = "Take slices along an axis by index (embedding lookup)";
  let description = [{
    ONNX `Gather`: the result shape is `input.shape[:axis] + indices.shape +
    input.shape[axis+1:]`. Negative indices count from the end.

    ```mlir
    %e = weft.gather %table, %tokens {axis = 0 : i64}
        : (tensor<64x32xf32>, tensor<4x16xi64>) -> tensor<4x16x32xf32>
    ```
    Constraints: `0 <= axis < rank(input)`.
  }];
  let arguments = (ins Weft_AnyTensor:$input, Weft_IndexTensor:$indices,
      I64Attr:$axis);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat =
      "$input `,` $indices attr-dict `:` functional-type(operands, results)";
}

def Weft_ReshapeOp : Weft_Op<"reshape", [Pure,
    AllElementTypesMatch<["input", "result"]>, Weft_Differentiable]> {
  let summary = "Same elements in a new shape";
  let description = [{
    ```mlir
    %r = weft.reshape %x : tensor<4x16x32xf32> -> tensor<64x32xf32>
    ```
    Constraints: the element count is unchanged.
  }];
  let arguments = (ins Weft_AnyTensor:$input);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Weft_BroadcastOp : Weft_Op<"broadcast", [Pure,
    AllElementTypesMatch<["input", "result"]>, Weft_Differentiable]> {
  let summary = "Stretch size-1 and missing leading axes (ONNX Expand)";
  let description = [{
    ```mlir
    %b = weft.broadcast %x : tensor<1x16xf32> -> tensor<4x16xf32>
    ```
    Constraints: the input shape broadcasts to the result shape.
  }];
  let arguments = (ins Weft_AnyTensor:$input);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Weft_TransposeOp : Weft_Op<"transpose", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["input", "result"]>, Weft_Differentiable]> {
  let summary = "Permute axes";
  let description = [{
    `result.shape[i] = input.shape[permutation[i]]`.

    ```mlir
    %t = weft.transpose %x {permutation = array<i64: 0, 2, 1>}
        : (tensor<4x16x32xf32>) -> tensor<4x32x16xf32>
    ```
    Constraints: `permutation` is a permutation of `[0, rank)`.
  }];
  let arguments = (ins Weft_AnyTensor:$input, DenseI64ArrayAttr:$permutation);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
  let hasFolder = 1;
}

def Weft_SliceOp : Weft_Op<"slice", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["input", "result"]>, Weft_Differentiable]> {
  let summary = "Strided static slice";
  let description = [{
    Along every axis takes `start, start + stride, ...` below `limit`.

    ```mlir
    %s = weft.slice %x {starts = array<i64: 0, 32>, limits = array<i64: 4, 64>,
                        strides = array<i64: 1, 1>}
        : (tensor<4x96xf32>) -> tensor<4x32xf32>
    ```
    Constraints: one start, limit and stride per axis;
    `0 <= start <= limit <= size`; `stride >= 1`.
  }];
  let arguments = (ins Weft_AnyTensor:$input, DenseI64ArrayAttr:$starts,
      DenseI64ArrayAttr:$limits, DenseI64ArrayAttr:$strides);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def Weft_ConcatOp : Weft_Op<"concat", [Pure, InferTypeOpAdaptor,
    Weft_Differentiable]> {
  let summary = "Join tensors along an axis";
  let description = [{
    ```mlir
    %c = weft.concat %a, %b {axis = 1 : i64}
        : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x10xf32>
    ```
    Constraints: at least one operand; equal ranks and element types; sizes
    agree off the concatenated axis; `0 <= axis < rank`.
  }];
  let arguments = (ins Variadic<Weft_AnyTensor>:$inputs, I64Attr:$axis);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat =
      "$inputs attr-dict `:` functional-type(operands, results)";
}

def Weft_CausalMaskOp : Weft_Op<"causal_mask", [Pure, InferTypeOpInterface,
    SameOperandsAndResultType, Weft_Differentiable]> {
  let summary = "Fill the strictly upper triangle of the last two axes";
  let description = [{
    `result[..., i, j] = j > i + diagonal ? fill : input[..., i, j]`: the
    attention mask of a causal decoder without a materialized mask tensor.

    ```mlir
    %m = weft.causal_mask %scores : tensor<4x2x16x16xf32>
    ```
    Constraints: rank >= 2.
  }];
  let arguments = (ins Weft_FloatTensor:$input,
      DefaultValuedAttr<I64Attr, "0">:$diagonal,
      DefaultValuedAttr<F64Attr,
                        "-std::numeric_limits<double>::infinity()">:$fill);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Weft_DropoutOp : Weft_Op<"dropout", [Pure,
    AllTypesMatch<["input", "result"]>, Weft_Differentiable]> {
  let summary = "Train-mode dropout with a counter-based mask";
  let description = [{
    `result[i] = keep(i) ? input[i] / (1 - ratio) : 0`, where `keep(i)` is
    decided by a stateless hash of (`seed`, `op_id`, `i`): the same seed
    gives the same mask, so a run is reproducible and a resumed run repeats
    its masks. The training step derives `seed` from the run's seed and the
    step; `op_id` tells the dropouts of one model apart. The gradient is
    the dropout of the incoming gradient with the same mask.

    A rank holding a block of a split tensor passes `global_shape`, the
    whole tensor's shape, and `index_offset`, the linear index of its
    block's first element in the whole tensor: element `j` of the block is
    `i = index_offset + sum_d j_d * stride_d` with the whole tensor's
    strides, so the rank draws exactly its block of the mask one device
    would draw, whichever dimensions are split (a block of rows, or of the
    sequence under sequence parallelism).

    ```mlir
    %y = weft.dropout %x, %seed {ratio = 1.000000e-01 : f64, op_id = 3 : i64}
        : tensor<4x32xf32>, tensor<i64>
    %z = weft.dropout %x, %seed offset(%off : tensor<i64>) {ratio = 1.000000e-01 : f64, op_id = 3 : i64}
        : tensor<4x32xf32>, tensor<i64>
    ```
    Constraints: 0 <= ratio < 1; `seed` and `index_offset` are 0-d i64
    tensors.
  }];
  let arguments = (ins Weft_FloatTensor:$input, 0DTensorOf<[I64]>:$seed,
      Optional<0DTensorOf<[I64]>>:$index_offset,
      F64Attr:$ratio, I64Attr:$op_id,
      OptionalAttr<DenseI64ArrayAttr>:$global_shape);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$input `,` $seed (`offset` `(` $index_offset^ `:` "
                       "type($index_offset) `)`)? attr-dict `:` "
                       "type($input) `,` type($seed)";
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Whether element `index` is kept, for a mask key from keyOf().
    static bool keeps(uint64_t key, uint64_t index, double ratio);
    /// The mask key of a seed and an op id.
    static uint64_t keyOf(int64_t seed, int64_t opId);
    /// Elements whose 24-bit draw is below this are dropped.
    static uint64_t threshold(double ratio);
    /// The strides of linear indices into the mask: those of
    /// `global_shape` when the op computes a block, else its own.
    ::llvm::SmallVector<int64_t> maskStrides();
  }];
}

//===----------------------------------------------------------------------===//
// Convolution and pooling (NCHW)
//===----------------------------------------------------------------------===//

def Weft_Conv2DOp : Weft_Op<"conv2d", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["input", "filter", "result"]>,
    Weft_Differentiable]> {
  let summary = "2-D convolution, NCHW input, OIHW filter";
  let description = [{
    `padding` is `[top, left, bottom, right]`. With `groups = g` the input
    channels split into g groups of `C/g`, each seen by `O/g` filters.

    ```mlir
    %y = weft.conv2d %x, %w, %b {strides = array<i64: 1, 1>,
                                 padding = array<i64: 1, 1, 1, 1>,
                                 dilations = array<i64: 1, 1>}
        : (tensor<4x3x16x16xf32>, tensor<8x3x3x3xf32>, tensor<8xf32>)
        -> tensor<4x8x16x16xf32>
    ```
    Constraints: rank-4 input and filter; `C == I * groups`; `O % groups ==
    0`; bias has shape `[O]`; positive strides and dilations; non-negative
    padding; a non-empty output.
  }];
  let arguments = (ins Weft_FloatTensor:$input, Weft_FloatTensor:$filter,
      Optional<Weft_FloatTensor>:$bias, DenseI64ArrayAttr:$strides,
      DenseI64ArrayAttr:$padding, DenseI64ArrayAttr:$dilations,
      DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$input `,` $filter (`,` $bias^)? attr-dict `:` "
                       "functional-type(operands, results)";
}

class Weft_Pool2DOp<string mnemonic> : Weft_Op<mnemonic, [Pure,
    InferTypeOpAdaptor, AllElementTypesMatch<["input", "result"]>,
    Weft_Differentiable]> {
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def Weft_MaxPool2DOp : Weft_Pool2DOp<"max_pool2d"> {
  let summary = "2-D max pooling, NCHW";
  let description = [{
    Padding cells never win: they count as -inf.

    ```mlir
    %p = weft.max_pool2d %x {kernel = array<i64: 2, 2>,
                             strides = array<i64: 2, 2>,
                             padding = array<i64: 0, 0, 0, 0>}
        : (tensor<4x8x16x16xf32>) -> tensor<4x8x8x8xf32>
    ```
    Constraints: rank-4 input; positive kernel and strides; padding
    `[top, left, bottom, right]` non-negative and below the kernel size.
  }];
  let arguments = (ins Weft_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
      DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding);
}

def Weft_AvgPool2DOp : Weft_Pool2DOp<"avg_pool2d"> {
  let summary = "2-D average pooling, NCHW";
  let description = [{
    With `count_include_pad` the divisor is the full kernel area, else the
    number of real cells under the window.

    Constraints: as `weft.max_pool2d`.
  }];
  let arguments = (ins Weft_FloatTensor:$input, DenseI64ArrayAttr:$kernel,
      DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
      DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
}

def Weft_GlobalAvgPoolOp : Weft_Op<"global_avg_pool", [Pure,
    InferTypeOpAdaptor, AllElementTypesMatch<["input", "result"]>,
    Weft_Differentiable]> {
  let summary = "Mean over all spatial axes, keeping them as size 1";
  let description = [{
    ```mlir
    %g = weft.global_avg_pool %x : (tensor<4x16x4x4xf32>) -> tensor<4x16x1x1xf32>
    ```
    Constraints: rank >= 3 (N, C, spatial...).
  }];
  let arguments = (ins Weft_FloatTensor:$input);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Losses
//===----------------------------------------------------------------------===//

def Weft_CrossEntropyOp : Weft_Op<"cross_entropy", [Pure,
    InferTypeOpAdaptor, Weft_Differentiable]> {
  let summary = "Mean softmax cross-entropy of logits against class labels";
  let description = [{
    Classes lie along the last axis of `logits`; `labels` has the shape of
    `logits` without that axis and holds class indices. The result is the
    mean over all label positions, as PyTorch's
    `F.cross_entropy(logits.reshape(-1, C), labels.reshape(-1))`.

    ```mlir
    %l = weft.cross_entropy %logits, %labels
        : (tensor<4x16x64xf32>, tensor<4x16xi64>) -> tensor<f32>
    ```
    Constraints: labels shape equals logits shape without its last axis.
  }];
  let arguments = (ins Weft_FloatTensor:$logits, Weft_IndexTensor:$labels);
  let results = (outs Weft_Scalar:$result);
  let assemblyFormat =
      "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
}

def Weft_MseOp : Weft_Op<"mse", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["prediction", "target", "result"]>,
    Weft_Differentiable]> {
  let summary = "Mean squared error";
  let description = [{
    `mean((prediction - target)^2)` over all elements.

    ```mlir
    %l = weft.mse %y, %t : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<f32>
    ```
    Constraints: prediction and target have the same shape.
  }];
  let arguments = (ins Weft_FloatTensor:$prediction, Weft_FloatTensor:$target);
  let results = (outs Weft_Scalar:$result);
  let assemblyFormat = "$prediction `,` $target attr-dict `:` "
                       "functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Backward ops: adjoints that no composition of the ops above expresses
// cheaply. Gradient rules build them; the linear ones have gradient rules of
// their own, since the ONNX legalizers use some in forward passes
// (ConvTranspose is conv2d_backward_input, constant Pad is weft.pad).
//===----------------------------------------------------------------------===//

def Weft_ScatterAddOp : Weft_Op<"scatter_add", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["input", "updates", "result"]>,
    Weft_Differentiable]> {
  let summary = "Add slices into a tensor by index (the adjoint of gather)";
  let description = [{
    `result` starts as `input`; then, for every position `p` of `indices`,
    the slice of `updates` at `p` is added to the slice of `result` at index
    `indices[p]` along `axis`. Repeated indices accumulate, so the gradient
    of an embedding lookup is `scatter_add(zeros, tokens, grad)`. Negative
    indices count from the end, as in `weft.gather`.

    ```mlir
    %d = weft.scatter_add %zeros, %tokens, %g {axis = 0 : i64}
        : (tensor<64x32xf32>, tensor<4x16xi64>, tensor<4x16x32xf32>)
        -> tensor<64x32xf32>
    ```
    Constraints: `0 <= axis < rank(input)`; `updates` has the shape
    `weft.gather` of `input` by `indices` along `axis` would have.
  }];
  let arguments = (ins Weft_FloatTensor:$input, Weft_IndexTensor:$indices,
      Weft_FloatTensor:$updates, I64Attr:$axis);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$input `,` $indices `,` $updates attr-dict `:` "
                       "functional-type(operands, results)";
}

def Weft_PadOp : Weft_Op<"pad", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["input", "result"]>, Weft_Differentiable]> {
  let summary = "Pad with a constant at both ends and between elements";
  let description = [{
    Along axis `d` puts `low[d]` cells of `value` first, `interior[d]` cells
    between consecutive elements and `high[d]` cells last: a size-`n` axis
    becomes `low + n + (n - 1) * interior + high` (`low + high` when `n` is
    0). Zero padding is the adjoint of a strided `weft.slice`.

    ```mlir
    %p = weft.pad %x {low = array<i64: 0, 1>, high = array<i64: 0, 2>,
                      interior = array<i64: 0, 1>}
        : (tensor<4x3xf32>) -> tensor<4x8xf32>
    ```
    Constraints: one `low`, `high` and `interior` entry per axis, all >= 0.
  }];
  let arguments = (ins Weft_FloatTensor:$input, DenseI64ArrayAttr:$low,
      DenseI64ArrayAttr:$high, DenseI64ArrayAttr:$interior,
      DefaultValuedAttr<F64Attr, "0.0">:$value);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat =
      "$input attr-dict `:` functional-type(operands, results)";
}

def Weft_OneHotOp : Weft_Op<"one_hot", [Pure, Weft_NotDifferentiable]> {
  let summary = "Class indices to one-hot vectors";
  let description = [{
    `result[..., c] = indices[...] == c ? 1 : 0` for `c` in `[0, C)`, where
    `C` is the size of the result's last axis. An index outside `[0, C)` is
    an error at run time, as in PyTorch's `F.one_hot`.

    ```mlir
    %h = weft.one_hot %labels : tensor<4x16xi64> -> tensor<4x16x64xf32>
    ```
    Constraints: the result shape is the indices shape plus one axis.
  }];
  let arguments = (ins Weft_IndexTensor:$indices);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat =
      "$indices attr-dict `:` type($indices) `->` type($result)";
  let hasVerifier = 1;
}

def Weft_Conv2DBackwardInputOp : Weft_Op<"conv2d_backward_input", [Pure,
    AllElementTypesMatch<["grad", "filter", "result"]>, Weft_Differentiable]> {
  let summary = "Adjoint of conv2d with respect to its input";
  let description = [{
    The transposed convolution: every output position adds `grad * filter`
    into each input cell its window read. The attributes are the forward
    `weft.conv2d`'s; the result type is the forward input's, which `grad`
    does not determine when strides leave trailing input cells unread.

    ```mlir
    %dx = weft.conv2d_backward_input %g, %w {strides = array<i64: 1, 1>,
                                             padding = array<i64: 1, 1, 1, 1>,
                                             dilations = array<i64: 1, 1>}
        : (tensor<4x8x16x16xf32>, tensor<8x3x3x3xf32>) -> tensor<4x3x16x16xf32>
    ```
    Constraints: `weft.conv2d` of a result-shaped input by `filter` with
    these attributes is valid and has the shape of `grad`.
  }];
  let arguments = (ins Weft_FloatTensor:$grad, Weft_FloatTensor:$filter,
      DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
      DenseI64ArrayAttr:$dilations, DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $filter attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Weft_Conv2DBackwardFilterOp : Weft_Op<"conv2d_backward_filter", [Pure,
    AllElementTypesMatch<["grad", "input", "result"]>, Weft_Differentiable]> {
  let summary = "Adjoint of conv2d with respect to its filter";
  let description = [{
    `result[o, c, i, j]` sums `grad[n, o, y, x]` times the input cell that
    tap `(c, i, j)` of filter `o` read at output position `(y, x)`. The
    attributes are the forward `weft.conv2d`'s and the result type is the
    filter's.

    ```mlir
    %dw = weft.conv2d_backward_filter %g, %x {strides = array<i64: 1, 1>,
                                              padding = array<i64: 1, 1, 1, 1>,
                                              dilations = array<i64: 1, 1>}
        : (tensor<4x8x16x16xf32>, tensor<4x3x16x16xf32>) -> tensor<8x3x3x3xf32>
    ```
    Constraints: `weft.conv2d` of `input` by a result-shaped filter with
    these attributes is valid and has the shape of `grad`.
  }];
  let arguments = (ins Weft_FloatTensor:$grad, Weft_FloatTensor:$input,
      DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
      DenseI64ArrayAttr:$dilations, DefaultValuedAttr<I64Attr, "1">:$groups);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` "
                       "functional-type(operands, results)";
  let hasVerifier = 1;
}

def Weft_MaxPool2DGradOp : Weft_Op<"max_pool2d_grad", [Pure,
    InferTypeOpAdaptor, AllElementTypesMatch<["grad", "input", "result"]>]> {
  let summary = "Adjoint of max_pool2d: each window's gradient to its maximum";
  let description = [{
    `result` has the shape of the forward `input`; each window adds its
    `grad` element at the cell `weft.max_pool2d` returned (the first maximum
    in row-major window order, as PyTorch's argmax). The attributes are the
    forward op's.

    ```mlir
    %dx = weft.max_pool2d_grad %g, %x {kernel = array<i64: 2, 2>,
                                       strides = array<i64: 2, 2>,
                                       padding = array<i64: 0, 0, 0, 0>}
        : (tensor<4x8x8x8xf32>, tensor<4x8x16x16xf32>) -> tensor<4x8x16x16xf32>
    ```
    Constraints: `weft.max_pool2d` of `input` with these attributes is valid
    and has the shape of `grad`.
  }];
  let arguments = (ins Weft_FloatTensor:$grad, Weft_FloatTensor:$input,
      DenseI64ArrayAttr:$kernel, DenseI64ArrayAttr:$strides,
      DenseI64ArrayAttr:$padding);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$grad `,` $input attr-dict `:` "
                       "functional-type(operands, results)";
}

def Weft_AvgPool2DGradOp : Weft_Op<"avg_pool2d_grad", [Pure,
    AllElementTypesMatch<["grad", "result"]>, Weft_Differentiable]> {
  let summary = "Adjoint of avg_pool2d";
  let description = [{
    Each window spreads its `grad` element evenly over the real cells under
    it, divided by the forward divisor. The attributes are the forward
    `weft.avg_pool2d`'s and the result type is its input's.

    ```mlir
    %dx = weft.avg_pool2d_grad %g {kernel = array<i64: 2, 2>,
                                   strides = array<i64: 2, 2>,
                                   padding = array<i64: 0, 0, 0, 0>}
        : (tensor<4x8x8x8xf32>) -> tensor<4x8x16x16xf32>
    ```
    Constraints: `weft.avg_pool2d` of a result-shaped input with these
    attributes is valid and has the shape of `grad`.
  }];
  let arguments = (ins Weft_FloatTensor:$grad, DenseI64ArrayAttr:$kernel,
      DenseI64ArrayAttr:$strides, DenseI64ArrayAttr:$padding,
      DefaultValuedAttr<BoolAttr, "false">:$count_include_pad);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "$grad attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Recurrences
//===----------------------------------------------------------------------===//

def Weft_LstmOp : Weft_Op<"lstm", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["input_gates", "recurrence", "h0", "c0"]>,
    Weft_Differentiable, DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let summary = "The time loop of an LSTM over precomputed input gates";
  let description = [{
    ONNX `LSTM`'s recurrence for one direction, with default activations:
    the input projection `x W^T + Wb + Rb` is an ordinary matmul before it
    (`input_gates`, `[T, B, 4H]`, ONNX gate order i, o, f, c), so only what
    depends on the previous step stays in the loop. At step `t` (from the
    last step down when `reverse`):

    ```
    a = input_gates[t] + h @ recurrence^T        (recurrence: [4H, H])
    i, o, f = sigmoid(a_i, a_o, a_f);  g = tanh(a_c)
    c = f * c + i * g;  h = o * tanh(c)
    ```

    `hidden[t]` and `cell[t]` are `h` and `c` after step `t`; `gates[t]`
    holds `i, o, f, g` (activated), which `weft.lstm_grad` reads instead of
    recomputing them. With `recompute` the op has no `gates` result: its
    `weft.lstm_grad` (also `recompute`) recomputes each step's gates from
    `input_gates`, the stored hidden states and `recurrence` inside its own
    loop (`--weft-recurrent-activations` decides). It lowers to one
    `scf.for` over time whatever `T`.

    ```mlir
    %y, %c, %g = weft.lstm %xg, %r, %h0, %c0
        : (tensor<7x3x24xf32>, tensor<24x6xf32>, tensor<3x6xf32>,
           tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x6xf32>,
                                tensor<7x3x24xf32>)
    ```
    Constraints: `input_gates` is `[T, B, 4H]` with `T >= 1`, `recurrence`
    `[4H, H]`, `h0` and `c0` `[B, H]`; there is a `gates` result exactly
    when `recompute` is absent.
  }];
  let arguments = (ins Weft_FloatTensor:$input_gates,
      Weft_FloatTensor:$recurrence, Weft_FloatTensor:$h0, Weft_FloatTensor:$c0,
      DefaultValuedAttr<BoolAttr, "false">:$reverse, UnitAttr:$recompute);
  let results = (outs Weft_FloatTensor:$hidden, Weft_FloatTensor:$cell,
      Optional<Weft_FloatTensor>:$gates);
  let assemblyFormat = "$input_gates `,` $recurrence `,` $h0 `,` $c0 attr-dict "
                       "`:` functional-type(operands, results)";
}

def Weft_GruOp : Weft_Op<"gru", [Pure, InferTypeOpAdaptor,
    AllElementTypesMatch<["input_gates", "recurrence", "recurrence_bias",
                          "h0"]>,
    Weft_Differentiable, DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let summary = "The time loop of a GRU over precomputed input gates";
  let description = [{
    ONNX `GRU`'s recurrence for one direction with `linear_before_reset = 1`
    (PyTorch's GRU) and default activations. `input_gates` is
    `x W^T + Wb` (`[T, B, 3H]`, ONNX gate order z, r, n); the recurrent bias
    stays an operand because the reset gate multiplies it. At step `t`
    (from the last step down when `reverse`):

    ```
    p = h @ recurrence^T + recurrence_bias       (recurrence: [3H, H])
    z = sigmoid(x_z + p_z);  r = sigmoid(x_r + p_r)
    n = tanh(x_n + r * p_n);  h = (1 - z) * n + z * h
    ```

    `hidden[t]` is `h` after step `t`; `gates[t]` holds `z, r, n, p_n`
    (`[T, B, 4H]`), what `weft.gru_grad` needs. With `recompute` there is
    no `gates` result and `weft.gru_grad` recomputes them, as for
    `weft.lstm`.

    ```mlir
    %y, %g = weft.gru %xg, %r, %rb, %h0
        : (tensor<7x3x18xf32>, tensor<18x6xf32>, tensor<18xf32>,
           tensor<3x6xf32>) -> (tensor<7x3x6xf32>, tensor<7x3x24xf32>)
    ```
    Constraints: `input_gates` is `[T, B, 3H]` with `T >= 1`, `recurrence`
    `[3H, H]`, `recurrence_bias` `[3H]`, `h0` `[B, H]`; there is a `gates`
    result exactly when `recompute` is absent.
  }];
  let arguments = (ins Weft_FloatTensor:$input_gates,
      Weft_FloatTensor:$recurrence, Weft_FloatTensor:$recurrence_bias,
      Weft_FloatTensor:$h0, DefaultValuedAttr<BoolAttr, "false">:$reverse,
      UnitAttr:$recompute);
  let results = (outs Weft_FloatTensor:$hidden,
      Optional<Weft_FloatTensor>:$gates);
  let assemblyFormat = "$input_gates `,` $recurrence `,` $recurrence_bias `,` "
                       "$h0 attr-dict `:` functional-type(operands, results)";
}

def Weft_LstmGradOp : Weft_Op<"lstm_grad", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let summary = "Backpropagation through time of weft.lstm";
  let description = [{
    Runs the forward op's loop backwards, carrying the adjoints of `h` and
    `c`: from the adjoints of `hidden` and `cell` it gives those of
    `input_gates` (pre-activation, `[T, B, 4H]`), `h0` and `c0`. The operands
    after the two adjoints are the forward op's operands and results. The
    recurrence's adjoint is one matmul of `input_gates_grad` with the
    previous hidden states, built by the forward op's rule outside the loop.

    `gates` is what the forward op kept for it: its `gates` result, or with
    `recompute` its `input_gates`, from which each step's gates are
    recomputed (`input_gates[t] + hidden[t-1] @ recurrence^T`, one more
    `[B, H] x [H, 4H]` GEMM per step) before they are used.

    ```mlir
    %dxg, %dh0, %dc0 = weft.lstm_grad %dy, %dc, %r, %h0, %c0, %y, %c, %g
        : (tensor<7x3x6xf32>, tensor<7x3x6xf32>, tensor<24x6xf32>,
           tensor<3x6xf32>, tensor<3x6xf32>, tensor<7x3x6xf32>,
           tensor<7x3x6xf32>, tensor<7x3x24xf32>)
        -> (tensor<7x3x24xf32>, tensor<3x6xf32>, tensor<3x6xf32>)
    ```
    Constraints: shapes as the forward `weft.lstm`'s; the two adjoints have
    the shape of `hidden`.
  }];
  let arguments = (ins Weft_FloatTensor:$hidden_grad,
      Weft_FloatTensor:$cell_grad, Weft_FloatTensor:$recurrence,
      Weft_FloatTensor:$h0, Weft_FloatTensor:$c0, Weft_FloatTensor:$hidden,
      Weft_FloatTensor:$cell, Weft_FloatTensor:$gates,
      DefaultValuedAttr<BoolAttr, "false">:$reverse, UnitAttr:$recompute);
  let results = (outs Weft_FloatTensor:$input_gates_grad,
      Weft_FloatTensor:$h0_grad, Weft_FloatTensor:$c0_grad);
  let assemblyFormat = "operands attr-dict `:` "
                       "functional-type(operands, results)";
}

def Weft_GruGradOp : Weft_Op<"gru_grad", [Pure, InferTypeOpAdaptor,
    DeclareOpInterfaceMethods<Weft_CostOpInterface>]> {
  let summary = "Backpropagation through time of weft.gru";
  let description = [{
    Runs the forward op's loop backwards, carrying the adjoint of `h`: gives
    the adjoints of `input_gates` (`[T, B, 3H]`), of the recurrent
    pre-activations `p = h @ recurrence^T + recurrence_bias` per step
    (`recurrent_grad`, `[T, B, 3H]`; they differ from the input ones in the
    n block, which the reset gate scales) and of `h0`. The forward op's rule
    turns `recurrent_grad` into the recurrence's and the bias's adjoints
    with one matmul and one sum outside the loop.

    With `recompute`, `gates` is the forward op's `input_gates`
    (`[T, B, 3H]`) and a last operand, the forward's `recurrence_bias`,
    follows `gates`: each step recomputes `p` and the gates from them and
    the previous hidden state before using them.

    ```mlir
    %dxg, %dp, %dh0 = weft.gru_grad %dy, %r, %h0, %y, %g
        : (tensor<7x3x6xf32>, tensor<18x6xf32>, tensor<3x6xf32>,
           tensor<7x3x6xf32>, tensor<7x3x24xf32>)
        -> (tensor<7x3x18xf32>, tensor<7x3x18xf32>, tensor<3x6xf32>)
    ```
    Constraints: shapes as the forward `weft.gru`'s; `hidden_grad` has the
    shape of `hidden`; `recurrence_bias` is there exactly when `recompute`
    is.
  }];
  let arguments = (ins Weft_FloatTensor:$hidden_grad,
      Weft_FloatTensor:$recurrence, Weft_FloatTensor:$h0,
      Weft_FloatTensor:$hidden, Weft_FloatTensor:$gates,
      Optional<Weft_FloatTensor>:$recurrence_bias,
      DefaultValuedAttr<BoolAttr, "false">:$reverse, UnitAttr:$recompute);
  let results = (outs Weft_FloatTensor:$input_gates_grad,
      Weft_FloatTensor:$recurrent_grad, Weft_FloatTensor:$h0_grad);
  let assemblyFormat = "operands attr-dict `:` "
                       "functional-type(operands, results)";
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

include "weft/Dialect/Weft/IR/WeftAttentionOps.td"

//===----------------------------------------------------------------------===//
// ONNX import
//===----------------------------------------------------------------------===//

def Weft_OnnxNodeOp : Weft_Op<"onnx.node"> {
  let summary = "An ONNX node not yet legalized";
  let description = [{
    The importer turns every ONNX node into one of these, keeping its op
    type, opset, node name and attributes; `--weft-legalize-onnx` rewrites
    them into weft ops, one pattern per op type and opset range. Absent
    optional inputs are `weft.onnx.none` values. Result types are whatever
    the file declared and are not trusted: legalization infers real ones.

    ```mlir
    %y = weft.onnx.node "Relu"(%x) {name = "/act/Relu", opset = 17 : i64}
        : (tensor<4x64xf32>) -> tensor<*xf32>
    ```
  }];
  let arguments = (ins StrAttr:$op_type, I64Attr:$opset, StrAttr:$name,
      OptionalAttr<DictionaryAttr>:$attrs, Variadic<AnyType>:$inputs);
  let results = (outs Variadic<AnyType>:$outputs);
  let assemblyFormat = "$op_type `(` $inputs `)` attr-dict `:` "
                       "functional-type($inputs, results)";
}

def Weft_OnnxNoneOp : Weft_Op<"onnx.none", [Pure, Weft_NotDifferentiable]> {
  let summary = "Stands for an absent optional ONNX input";
  let results = (outs NoneType:$result);
  let assemblyFormat = "attr-dict";
}

#endif // WEFT_OPS_TD
