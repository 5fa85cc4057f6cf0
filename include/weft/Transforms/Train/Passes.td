//===- Passes.td - Training-step passes -------------------------*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Passes that turn a forward model into a training step: which tensors
// train, the loss, reverse-mode autodiff, mixed precision and the
// optimizer. One `def` per pass, implemented in
// lib/Transforms/Train/<Name>.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TRANSFORMS_TRAIN_PASSES_TD
#define WEFT_TRANSFORMS_TRAIN_PASSES_TD

include "mlir/Pass/PassBase.td"

//===----------------------------------------------------------------------===//
// Autodiff
//===----------------------------------------------------------------------===//

def AutodiffPass : Pass<"weft-autodiff", "mlir::ModuleOp"> {
  let summary = "Build the gradient of a loss with respect to the parameters";
  let description = [{
    Reverse-mode differentiation of the function named by `function`, whose
    result 0 must be the loss, a 0-d float tensor. Adds a function
    `@<function>_grad` with the same arguments that returns the loss and
    `d loss / d p` for every `weft.param` argument `p`, in argument order,
    each result tagged `weft.grad = "<param name>"`.

    The forward ops are cloned into the new function and the backward ops,
    built by each op's `weft::GradientOpInterface` rule in reverse program
    order, use the forward values directly (a later pass may trade stored
    activations for recomputation). A value used several times receives the
    sum of its adjoints (a tied embedding accumulates both uses). Only ops on
    a path from a parameter to the loss are differentiated; integer and i1
    values, and the results of ops marked `NotDifferentiable`, carry no
    gradient. Ops neither the loss nor a gradient needs are dropped.

    A parameter that gets no gradient (it does not reach the loss, or only
    through `NotDifferentiable` ops or integer values) is reported with a
    warning naming it and the reason, and becomes a `weft.buffer` argument
    of `@<function>_grad` with no gradient result, so the optimizer neither
    updates nor decays it (torch.optim skips a parameter whose `.grad` is
    None).

    Errors: the function is missing or is not a single block, the loss is
    not a 0-d float tensor, the function has no `weft.param` argument, no
    parameter gets a gradient, or an op on a path from a parameter to the
    loss has no gradient rule and is not `NotDifferentiable` (the error
    names the op and the parameter).

    Before:

    ```mlir
    func.func @loss(%w: tensor<4x2xf32> {weft.param = "fc.weight"},
                    %x: tensor<8x4xf32> {weft.input = "x"},
                    %t: tensor<8x2xf32> {weft.input = "target"})
        -> tensor<f32> {
      %y = weft.matmul %x, %w
          : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
      %l = weft.mse %y, %t
          : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<f32>
      return %l : tensor<f32>
    }
    ```

    After (`@loss` is unchanged; this function is added):

    ```mlir
    func.func @loss_grad(%w: tensor<4x2xf32> {weft.param = "fc.weight"},
                         %x: tensor<8x4xf32> {weft.input = "x"},
                         %t: tensor<8x2xf32> {weft.input = "target"})
        -> (tensor<f32>, tensor<4x2xf32> {weft.grad = "fc.weight"}) {
      %y = weft.matmul %x, %w
          : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
      %l = weft.mse %y, %t
          : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<f32>
      %one = weft.constant dense<1.000000e+00> : tensor<f32>
      %d = weft.sub %y, %t
          : (tensor<8x2xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
      %dg = weft.mul %d, %one
          : (tensor<8x2xf32>, tensor<f32>) -> tensor<8x2xf32>
      %k = weft.constant dense<1.250000e-01> : tensor<f32>
      %dy = weft.mul %dg, %k
          : (tensor<8x2xf32>, tensor<f32>) -> tensor<8x2xf32>
      %dw = weft.matmul %x, %dy {transpose_lhs = true}
          : (tensor<8x4xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
      return %l, %dw : tensor<f32>, tensor<4x2xf32>
    }
    ```
  }];
  let options = [
    Option<"functionName", "function", "std::string", /*default=*/"\"loss\"",
           "The function to differentiate; its result 0 is the loss">
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def MarkBuffersPass : Pass<"weft-mark-buffers", "mlir::ModuleOp"> {
  let summary = "Turn parameters with a structurally zero gradient into buffers";
  let description = [{
    A `weft.param` argument that reaches no function result, or reaches
    them only through ops marked `NotDifferentiable` (comparisons) or
    integer values (indices), can never receive a gradient: typically a
    PyTorch buffer such as a float causal mask that ONNX stored as an
    initializer. The pass warns, naming the parameter and the op that stops
    its gradient, and its attribute becomes `weft.buffer`, so the optimizer
    neither updates nor decays it. An op that merely has no gradient rule
    does not stop gradients here: the parameter stays trainable and
    `--weft-autodiff` reports the op, so a missing rule never freezes a
    weight silently.

    Before:

    ```mlir
    func.func @forward(%mask: tensor<16x16xf32> {weft.param = "attn.bias"},
                       %x: tensor<16x16xf32>) -> tensor<16x16xf32> {
      %z = weft.constant dense<0.0> : tensor<f32>
      %c = weft.cmp eq, %mask, %z : (tensor<16x16xf32>, tensor<f32>)
                                    -> tensor<16x16xi1>
      ...
    ```

    After: `%mask: tensor<16x16xf32> {weft.buffer = "attn.bias"}`, and

    ```
    warning: parameter 'attn.bias' gets no gradient: every path to the
    results of 'forward' crosses 'weft.cmp', which is not differentiable;
    it stays a buffer (loaded, never updated or decayed), as torch.optim
    skips a parameter whose .grad stays None
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Loss, precision and optimizer
//===----------------------------------------------------------------------===//

def AttachLossPass : Pass<"weft-attach-loss", "mlir::ModuleOp"> {
  let summary = "Derive a scalar loss function from the forward function";
  let description = [{
    Clones `@forward` into `@loss`, adds a labels argument and returns the
    loss of the forward output. `cross-entropy` takes classes on the last
    axis and int64 labels shaped like the output without it, averaging over
    all other positions (PyTorch's `F.cross_entropy(out.reshape(-1, C),
    y.reshape(-1))`); `mse` takes a target shaped like the output; `none`
    uses a model whose first output already is a scalar loss. Losses are
    computed in f32 whatever precision the model runs in.

    Before:

    ```mlir
    func.func @forward(%w: tensor<32x10xf32> {weft.param = "w"},
                       %x: tensor<4x32xf32> {weft.input = "input"})
        -> tensor<4x10xf32>
    ```

    After (`kind=cross-entropy`), in addition:

    ```mlir
    func.func @loss(%w: tensor<32x10xf32> {weft.param = "w"},
                    %x: tensor<4x32xf32> {weft.input = "input"},
                    %y: tensor<4xi64> {weft.input = "labels"})
        -> (tensor<f32> {weft.output = "loss"}) {
      %0 = weft.matmul %x, %w : ...
      %1 = weft.cross_entropy %0, %y
          : (tensor<4x10xf32>, tensor<4xi64>) -> tensor<f32>
      return %1 : tensor<f32>
    }
    ```
  }];
  let options = [
    Option<"kind", "kind", "std::string", "\"cross-entropy\"",
           "Loss: cross-entropy, mse or none">,
    Option<"function", "function", "std::string", "\"forward\"",
           "The forward function">,
    Option<"lossFunction", "loss-function", "std::string", "\"loss\"",
           "Name of the function to create">,
    Option<"labels", "labels", "std::string", "\"labels\"",
           "Input name of the labels argument">,
  ];
}

def RecurrentActivationsPass
    : Pass<"weft-recurrent-activations", "mlir::ModuleOp"> {
  let summary = "Choose whether each lstm/gru stores its gates or recomputes "
                "them in the backward";
  let description = [{
    A `weft.lstm` or `weft.gru` stores its activated gates (`[T, B, 4H]`)
    for its adjoint. Marked `recompute`, it stores none and the adjoint
    recomputes each step's gates from the input gates, the stored hidden
    states and the recurrence inside its loop: one more `[B, H] x
    [H, gates*H]` GEMM per step (the adjoint's loop does two instead of
    one), for not holding the gates next to the input gates while the
    forward loop runs, and the input-gate adjoints taking over the input
    gates' buffer in the backward. The input gates then live until the
    backward instead of the gates: the same size for an LSTM, 3/4 of it for
    a GRU.

    `mode` decides for every op: `store`, `recompute`, or `auto`, which
    recomputes an op whose stored gates would exceed `threshold-mb` MiB.
    Run before `--weft-autodiff`, which builds the adjoints to match. An op
    already marked, or whose gates something other than its gradient uses,
    is left as it is.

    Before (`mode=recompute`):

    ```mlir
    %y, %c, %g = weft.lstm %xg, %r, %h0, %c0
        : (tensor<512x4x128xf32>, tensor<128x32xf32>, tensor<4x32xf32>,
           tensor<4x32xf32>) -> (tensor<512x4x32xf32>, tensor<512x4x32xf32>,
                                 tensor<512x4x128xf32>)
    ```

    After:

    ```mlir
    %y, %c = weft.lstm %xg, %r, %h0, %c0 {recompute}
        : (tensor<512x4x128xf32>, tensor<128x32xf32>, tensor<4x32xf32>,
           tensor<4x32xf32>) -> (tensor<512x4x32xf32>, tensor<512x4x32xf32>)
    ```

    Errors: an unknown `mode`, or a negative `threshold-mb`.
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"auto\"",
           "store, recompute, or auto (recompute above threshold-mb)">,
    Option<"thresholdMB", "threshold-mb", "double", "64.0",
           "auto recomputes an op whose stored gates exceed this many MiB">,
  ];
}

def RecomputePass : Pass<"weft-recompute", "mlir::ModuleOp"> {
  let summary = "Recompute forward activations in the backward instead of "
                "keeping them";
  let description = [{
    Runs on the gradient function `--weft-autodiff` built (`function`,
    default `@loss_grad`): one block, the forward (every op the loss, result
    0, depends on) and then the backward, which reads forward values. The
    forward ops are grouped, and a forward value is recomputed when its
    producer is in a group, every forward op reading it is in the same
    group, and the producer is free of side effects and regions. Every
    other forward value (a group's inputs and outputs, parameters, inputs,
    constants, values outside any group, the loss) is kept. For each group,
    the forward ops that make the recomputed values the backward reads are
    cloned once, in forward order, just before the first backward op that
    reads one of them, and the backward reads the clones. The numbers do
    not change: the clones compute the same values from the same inputs,
    and `weft.dropout`'s mask is a hash of its seed, `op_id` and index, so a
    cloned dropout draws the same mask.

    `mode`:
    - `full`: a group is a layer, found from the names of the parameters
      (and buffers) an op reads: `h.3.attn.c_attn.weight` belongs to layer
      `h.3` (the name up to its first numeric part). An op that reads no
      parameter joins the latest layer of its operands; one that reads an
      unnumbered parameter (embeddings, the final norm, the head) is in no
      layer. A model without numbered parameters (an MLP) groups by module
      instead (`fc1.weight` -> `fc1`). Each layer keeps only what enters
      and leaves it (the residual stream); the backward reruns the rest of
      the layer's forward.
    - `selective` (Korthikanti et al. 2022): a group is one attention core,
      the score matmul of two activations, the elementwise scaling and
      masking after it, the softmax, an optional dropout, and the
      probabilities x V matmul. The T x T tensors inside (scores,
      probabilities) are recomputed; q, k, v and the core's output are
      kept. Fused `weft.attention` keeps no T x T tensor and is left alone.
    - `none`: nothing changes.

    `layers` restricts either mode to the listed layers (`h.0,h.3`),
    Megatron's per-layer recomputation.

    Clones carry the unit attribute `weft.recomputed`: CSE merges only ops
    with equal attributes, so the canonicalize + CSE runs that follow
    cannot fold them back into the forward's ops (which would keep the
    activations alive again). `--weft-lower-to-linalg` passes the
    attribute on to the ops it lowers a clone to, for the same reason.

    Before (`mode=full`, layer `h.0`):

    ```mlir
    %h = weft.matmul %x, %w {transpose_rhs = true}    // reads h.0.fc.weight
    %a = weft.tanh %h
    %y = weft.matmul %a, %w2 {transpose_rhs = true}   // reads h.0.proj.weight
    ... backward ...
    %g = weft.mul %dy, %a       // reads %a
    ```

    After:

    ```mlir
    %h = weft.matmul %x, %w {transpose_rhs = true}
    %a = weft.tanh %h
    %y = weft.matmul %a, %w2 {transpose_rhs = true}
    ... backward ...
    %h2 = weft.matmul %x, %w {transpose_rhs = true, weft.recomputed}
    %a2 = weft.tanh %h2 {weft.recomputed}
    %g = weft.mul %dy, %a2
    ```

    Errors: an unknown `mode`, a missing or multi-block `function`, a
    `layers` entry that names no layer of the model (the error lists the
    layers).
  }];
  let options = [
    Option<"mode", "mode", "std::string", "\"full\"",
           "none, selective (the attention core) or full (whole layers)">,
    ListOption<"layers", "layers", "std::string",
               "Only these layers (e.g. h.0,h.3); all when empty">,
    Option<"functionName", "function", "std::string", "\"loss_grad\"",
           "The gradient function (--weft-autodiff's @<loss>_grad)">,
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

def MixedPrecisionPass : Pass<"weft-mixed-precision", "mlir::ModuleOp"> {
  let summary = "Run the forward function in bf16 with f32 master weights";
  let description = [{
    Rewrites `@forward` so every float computation runs in bf16: float
    arguments (parameters stay f32 master weights, inputs keep their type)
    are cast to bf16 where used, float constants become bf16, and the result
    is cast back to f32. Matmuls and reductions accumulate in f32 or wider by
    the ops' definition, so only storage is narrowed. Apply before
    `--weft-attach-loss`; gradients flow back through the casts to the f32
    parameters.

    Before:

    ```mlir
    func.func @forward(%w: tensor<32x10xf32> {weft.param = "w"},
                       %x: tensor<4x32xf32>) -> tensor<4x10xf32> {
      %0 = weft.matmul %x, %w : (tensor<4x32xf32>, tensor<32x10xf32>)
                                -> tensor<4x10xf32>
      return %0 : tensor<4x10xf32>
    }
    ```

    After:

    ```mlir
    func.func @forward(%w: tensor<32x10xf32> {weft.param = "w"},
                       %x: tensor<4x32xf32>) -> tensor<4x10xf32> {
      %0 = weft.cast %x : tensor<4x32xf32> -> tensor<4x32xbf16>
      %1 = weft.cast %w : tensor<32x10xf32> -> tensor<32x10xbf16>
      %2 = weft.matmul %0, %1 : (tensor<4x32xbf16>, tensor<32x10xbf16>)
                                -> tensor<4x10xbf16>
      %3 = weft.cast %2 : tensor<4x10xbf16> -> tensor<4x10xf32>
      return %3 : tensor<4x10xf32>
    }
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", "\"forward\"",
           "The function to convert">,
  ];
}

def OptimizerPass : Pass<"weft-optimizer", "mlir::ModuleOp"> {
  let summary = "Build @train_step: gradients, clipping, schedule, update";
  let description = [{
    Wraps `@loss_grad` (from `--weft-autodiff`) into
    `@train_step(params, state, batch, step, lr) -> (params', state', loss,
    lr_t)`. `step` (i64, 0-based) and the base learning rate `lr` are run-time
    inputs; the schedule turns them into `lr_t`. With `accum-steps=K` every
    batch input is K micro-batches along axis 0 and gradients and loss are
    averaged over them. Update rules match torch.optim 1.13: SGD (momentum,
    Nesterov, L2 weight decay added to the gradient) and AdamW (decoupled
    weight decay, bias correction, eps outside the square root), with
    optional global-norm clipping (`clip_grad_norm_`). Defaults are
    PyTorch's: SGD momentum 0, weight decay 0; AdamW betas 0.9/0.999, eps
    1e-8, weight decay 0.01.

    Optimizer state arguments are named `weft.state = "<kind>.<param>"`
    (`momentum_buffer`, `exp_avg`, `exp_avg_sq`) and start at zero.

    Before: `@loss_grad(%w {weft.param = "w"}, %x, %y) -> (loss, dw)`.
    After, in addition:

    ```mlir
    func.func @train_step(%w: tensor<32x10xf32> {weft.param = "w"},
                          %m: tensor<32x10xf32> {weft.state = "exp_avg.w"},
                          %v: tensor<32x10xf32> {weft.state = "exp_avg_sq.w"},
                          %x: ..., %y: ...,
                          %step: tensor<i64> {weft.input = "step"},
                          %lr: tensor<f32> {weft.input = "lr"})
        -> (tensor<32x10xf32> {weft.param = "w"}, ...,
            tensor<f32> {weft.output = "loss"},
            tensor<f32> {weft.output = "lr"})
    ```
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", "\"adamw\"",
           "sgd or adamw">,
    Option<"momentum", "momentum", "double", "0.0", "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", "false", "SGD Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", "-1.0",
           "Weight decay (default: 0 for SGD, 0.01 for AdamW)">,
    Option<"beta1", "beta1", "double", "0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", "0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", "1e-8", "AdamW epsilon">,
    Option<"clipNorm", "clip-norm", "double", "0.0",
           "Global gradient-norm clipping threshold (0: off)">,
    Option<"accumSteps", "accum-steps", "int64_t", "1",
           "Micro-batches per step (gradient accumulation)">,
    Option<"schedule", "schedule", "std::string", "\"constant\"",
           "Learning-rate schedule: constant, warmup or cosine">,
    Option<"warmupSteps", "warmup-steps", "int64_t", "0",
           "Linear warmup steps (warmup, cosine)">,
    Option<"totalSteps", "total-steps", "int64_t", "0",
           "Steps until the cosine schedule reaches its minimum">,
    Option<"minLrRatio", "min-lr-ratio", "double", "0.0",
           "Cosine floor as a fraction of the base learning rate">,
    Option<"runtimeHyperparameters", "runtime-hyperparameters", "bool",
           "false",
           "Take the hyperparameters as trailing 0-d f64 inputs `hp.<name>` "
           "instead of constants (defaults in `weft.hyperparameters`)">,
    Option<"gradFunction", "grad-function", "std::string", "\"loss_grad\"",
           "The gradient function to wrap">,
    Option<"stepFunction", "step-function", "std::string", "\"train_step\"",
           "Name of the function to create">,
  ];
}

//===----------------------------------------------------------------------===//
// Fused attention
//===----------------------------------------------------------------------===//

def FuseAttentionPass : Pass<"weft-fuse-attention", "mlir::ModuleOp"> {
  let summary = "Replace the scores-softmax-values chain by weft.attention";
  let description = [{
    Finds scaled dot-product attention as an ONNX export of PyTorch leaves
    it, in every function:

    ```
    s = matmul(q, kt)                    kt = k^T (or transpose_rhs on k)
    s = mul(s, c) | div(s, c)            c a scalar constant (optional)
    s = causal_mask(s)                   diagonal 0, fill -inf (optional)
    p = softmax(s) over the last axis
    o = matmul(p, v)
    ```

    and replaces `o` by `weft.attention %q, %k, %v {scale, causal}`, so
    that neither the forward nor the gradient that --weft-autodiff builds
    from it (weft.attention_grad) stores the [T, S] scores. Runs before
    autodiff. `k` is `kt`'s producer transposed back, composed into one
    weft.transpose when `kt` is one.

    A chain is left alone when any of its intermediate values has another
    user (it would be materialized anyway), when its values are not all
    f32 (or, with `bf16`, all bf16: a bf16 weft.attention's log-sum-exp
    is f32; weftc asks for it on both targets), when
    D or Dv exceeds `max-head-dim` (the widest head a kernel takes; 0: no
    limit), when q, k and v differ in their leading axes (a broadcast
    batch), or when it is a near miss: another mask (diagonal, fill), the
    softmax over another axis, a non-constant scale, or anything between
    softmax and the value product (train-mode dropout).

    `mode`: `on` fuses every match; `off` none; `auto` fuses where the
    scores of one (batch, head), T x S, have at least `min-scores`
    elements (65536: T = S = 256), where it was measured to pay; at
    T = 128 the measurements did not show a clear gain, so the chain stays
    and the step is the unfused one (docs/training.md, Fused attention).

    Before:

    ```mlir
    %s = weft.matmul %q, %kt : (tensor<8x4x512x64xf32>, tensor<8x4x64x512xf32>)
        -> tensor<8x4x512x512xf32>
    %c = weft.mul %s, %k0 : (tensor<8x4x512x512xf32>, tensor<f32>)
        -> tensor<8x4x512x512xf32>
    %m = weft.causal_mask %c : tensor<8x4x512x512xf32>
    %p = weft.softmax %m {axis = 3 : i64} : tensor<8x4x512x512xf32>
    %o = weft.matmul %p, %v : (tensor<8x4x512x512xf32>, tensor<8x4x512x64xf32>)
        -> tensor<8x4x512x64xf32>
    ```

    After (`%k0` = 0.125):

    ```mlir
    %k = weft.transpose %kt {permutation = array<i64: 0, 1, 3, 2>}
        : (tensor<8x4x64x512xf32>) -> tensor<8x4x512x64xf32>
    %o, %lse = weft.attention %q, %k, %v {causal, scale = 1.250000e-01 : f64}
        : (tensor<8x4x512x64xf32>, tensor<8x4x512x64xf32>,
           tensor<8x4x512x64xf32>)
        -> (tensor<8x4x512x64xf32>, tensor<8x4x512xf32>)
    ```
  }];
  let options = [
    Option<"mode", "mode", "std::string", /*default=*/"\"auto\"",
           "on, off, or auto (fuse where T x S >= min-scores)">,
    Option<"minScores", "min-scores", "int64_t", /*default=*/"65536",
           "auto: the fewest score elements per (batch, head) to fuse">,
    Option<"bf16", "bf16", "bool", /*default=*/"false",
           "Also fuse chains whose values are all bf16">,
    Option<"maxHeadDim", "max-head-dim", "int64_t", /*default=*/"0",
           "Leave a chain whose D or Dv exceeds this (0: no limit)">
  ];
  let dependentDialects = ["::weft::WeftDialect"];
}

#endif // WEFT_TRANSFORMS_TRAIN_PASSES_TD
