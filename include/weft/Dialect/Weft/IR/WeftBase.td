//===- WeftBase.td - The weft dialect, types and enums -----*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_BASE_TD
#define WEFT_BASE_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"

def Weft_Dialect : Dialect {
  let name = "weft";
  let cppNamespace = "::weft";
  let summary = "Tensor ops for training programs with one-device semantics";
  let description = [{
    The `weft` dialect describes a model as a function of its trainable
    parameters and its batch inputs, on statically shaped ranked tensors.
    Parameters are function arguments tagged `weft.param = "name"`; their
    initial values live outside the IR, in the file named by the module's
    `weft.weights` attribute, so a billion-parameter model prints in a screen.

    ```mlir
    module attributes {weft.weights = "mlp.onnx"} {
      func.func @forward(%w: tensor<32x10xf32> {weft.param = "fc.weight"},
                         %x: tensor<4x32xf32> {weft.input = "input"})
          -> tensor<4x10xf32> {
        %y = weft.matmul %x, %w : (tensor<4x32xf32>, tensor<32x10xf32>)
                                  -> tensor<4x10xf32>
        return %y : tensor<4x10xf32>
      }
    }
    ```
  }];
  let useDefaultAttributePrinterParser = 1;
  let hasConstantMaterializer = 1;
  let extraClassDeclaration = [{
    // The step contract's role attributes (weft/Formats/StepContract.h;
    // weft/Dialect/Weft/IR/TrainStep.h reads and writes them).
    /// Argument attribute naming a trainable parameter.
    static constexpr ::llvm::StringLiteral kParamAttrName =
        ::weft::contract::kParamAttr;
    /// Argument attribute naming a non-trainable tensor loaded with the
    /// weights (a PyTorch buffer, e.g. a frozen mask).
    static constexpr ::llvm::StringLiteral kBufferAttrName =
        ::weft::contract::kBufferAttr;
    /// Argument attribute naming a batch input or one of the step's own.
    static constexpr ::llvm::StringLiteral kInputAttrName =
        ::weft::contract::kInputAttr;
    /// The forward's random-stream input (weft.dropout's seed), which the
    /// training step computes from its `seed` input and the step.
    static constexpr ::llvm::StringLiteral kRngInputName =
        ::weft::contract::kRngInput;
    /// The training step's run seed input (the executable's --seed).
    static constexpr ::llvm::StringLiteral kSeedInputName =
        ::weft::contract::kSeedInput;

    // Module attributes.
    /// Path (relative to the IR file's folder, or absolute) of the file
    /// holding initial parameter values.
    static constexpr ::llvm::StringLiteral kWeightsAttrName = "weft.weights";
    /// Tied parameters' second state_dict names: {alias = "parameter"}.
    static constexpr ::llvm::StringLiteral kAliasesAttrName = "weft.aliases";
    /// How the step was built (loss, optimizer, hyperparameters, ...), for
    /// the model JSON of an executable compiled later from the IR.
    static constexpr ::llvm::StringLiteral kTrainConfigAttrName =
        "weft.train_config";
    /// The CPU the code was generated for and the instruction-set
    /// extensions it may use: {cpu, requested_cpu, cpu_features}.
    static constexpr ::llvm::StringLiteral kTargetAttrName = "weft.target";
    /// Compiled defaults of the step's `hp.<name>` inputs.
    static constexpr ::llvm::StringLiteral kHyperparametersAttrName =
        "weft.hyperparameters";
    /// Bytes of the planned workspace and the planned peak of intermediates
    /// (--weft-plan-buffers).
    static constexpr ::llvm::StringLiteral kWorkspaceBytesAttrName =
        "weft.workspace_bytes";
    static constexpr ::llvm::StringLiteral kPeakBytesAttrName =
        "weft.peak_bytes";
    /// Marks a fused kernel (--weft-fuse-kernels) and, once outlined, its
    /// function.
    static constexpr ::llvm::StringLiteral kKernelAttrName = "weft.kernel";
    /// Marks the workspace argument of a step after buffer planning.
    static constexpr ::llvm::StringLiteral kWorkspaceAttrName =
        "weft.workspace";
    /// Marks the `!llvm.ptr` argument a step that communicates takes first:
    /// the runtime's `const WeftRuntimeContext *` (--weft-lower-collectives).
    /// It is no slot of the step contract.
    static constexpr ::llvm::StringLiteral kContextAttrName = "weft.context";
    /// The device mesh a partitioned module is for (#weft.mesh), and the
    /// sharding (#weft.sharding) of each entry argument and result.
    static constexpr ::llvm::StringLiteral kMeshAttrName = "weft.mesh";
    static constexpr ::llvm::StringLiteral kShardingAttrName = "weft.sharding";
    /// On a parameter (and its optimizer state) the step holds in a view
    /// (a fused q/k/v weight [32, 96] held as [32, 3, 32], so that a tp
    /// split of its last dimension gives each rank its heads of all three):
    /// the shape the model, the weights and checkpoints know it by. The
    /// bytes are the same, row-major; the runtime maps blocks between them.
    /// On an op: the pipeline stage that runs it (--weft-assign-stages on
    /// the forward pass; --weft-autodiff gives a backward op the stage of
    /// the op it differentiates).
    static constexpr ::llvm::StringLiteral kStageAttrName = "weft.stage";
    static constexpr ::llvm::StringLiteral kStoredShapeAttrName =
        "weft.stored_shape";
    /// On a weft.all_reduce or weft.reduce_scatter: the bucket it travels
    /// in (--weft-bucket-collectives). A bucket's collectives run as one,
    /// on the runtime's communication thread, while the step goes on.
    static constexpr ::llvm::StringLiteral kBucketAttrName = "weft.bucket";
  }];
}

class Weft_Op<string mnemonic, list<Trait> traits = []>
    : Op<Weft_Dialect, mnemonic, traits>;

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

// f64 is accepted so gradient checks can run the evaluator in double.
def Weft_Float : AnyTypeOf<[F16, BF16, F32, F64]>;
def Weft_Index : AnyTypeOf<[I32, I64]>;
def Weft_FloatTensor : StaticShapeTensorOf<[Weft_Float]>;
def Weft_IndexTensor : StaticShapeTensorOf<[Weft_Index]>;
def Weft_BoolTensor : StaticShapeTensorOf<[I1]>;
def Weft_NumericTensor : StaticShapeTensorOf<[Weft_Float, Weft_Index]>;
def Weft_AnyTensor : StaticShapeTensorOf<[Weft_Float, Weft_Index, I1]>;
def Weft_Scalar : 0DTensorOf<[Weft_Float]>;

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Weft_GeluApproximation : I32EnumAttr<"GeluApproximation",
    "how gelu evaluates the Gaussian CDF", [
      I32EnumAttrCase<"None", 0, "none">,
      I32EnumAttrCase<"Tanh", 1, "tanh">
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::weft";
}
def Weft_GeluApproximationAttr
    : EnumAttr<Weft_Dialect, Weft_GeluApproximation, "gelu_approx">;

def Weft_CmpPredicate : I32EnumAttr<"CmpPredicate", "comparison predicate", [
      I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
      I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
      I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>
    ]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::weft";
}
def Weft_CmpPredicateAttr
    : EnumAttr<Weft_Dialect, Weft_CmpPredicate, "cmp">;

#endif // WEFT_BASE_TD
