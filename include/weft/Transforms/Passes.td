//===- Passes.td - Training-step transformations -----------*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Passes that turn a forward model into a training step and later transform
// it. One `def` per pass, implemented in lib/Transforms/<Name>.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TRANSFORMS_PASSES_TD
#define WEFT_TRANSFORMS_PASSES_TD

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
// Code generation: linalg on tensors -> buffers -> LLVM (docs/codegen.md)
//===----------------------------------------------------------------------===//

def SelectEntryPass : Pass<"weft-select-entry", "mlir::ModuleOp"> {
  let summary = "Make the step function the module's only public entry";
  let description = [{
    Code generation compiles one function. This pass checks that `entry`
    exists, has a body and only statically shaped tensor arguments and
    results, makes every other function private (so `--symbol-dce` drops
    what the inliner left behind) and marks the entry's arguments
    `bufferization.writable = false`: the runtime owns those buffers, so
    bufferization never updates a parameter in place. The entry gets
    `llvm.bareptr`: lowered to LLVM, it takes one pointer per buffer.

    Errors: the entry is missing or external, or an argument or result is
    not a statically shaped tensor.

    Before:

    ```mlir
    func.func @loss_grad(%w: tensor<4x2xf32>) -> tensor<4x2xf32>
    func.func @train_step(%w: tensor<4x2xf32> {weft.param = "w"})
        -> tensor<4x2xf32>
    ```

    After:

    ```mlir
    func.func private @loss_grad(%w: tensor<4x2xf32>) -> tensor<4x2xf32>
    func.func @train_step(%w: tensor<4x2xf32>
                          {bufferization.writable = false,
                           weft.param = "w"}) -> tensor<4x2xf32>
        attributes {llvm.bareptr}
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", "\"train_step\"",
           "The function to compile">,
  ];
}

def FuseKernelsPass : Pass<"weft-fuse-kernels", "mlir::func::FuncOp"> {
  let summary = "Fuse elementwise and reduction chains into one loop nest each";
  let description = [{
    Runs on linalg on tensors. First, chains of elementwise `linalg.generic`s
    whose intermediate results have a single use merge into one generic
    (upstream elementwise fusion: a bias add and its activation become one
    op). Then every remaining non-contraction linalg op, visited from the
    end of the function, becomes the root of a kernel: its parallel
    dimensions except the innermost are tiled by 1 in an `scf.forall`, and
    its producers (elementwise generics, reductions over the inner
    dimensions, fills) are fused into that loop when each iteration computes
    a disjoint slice of them. A softmax row (max, exp and sum, normalize), a
    layer norm row or a GELU thus runs as one loop over rows. A fused
    producer that is also used after the kernel is yielded by the loop
    instead of being recomputed. Matmuls and convolutions are never fused
    into: they become BLAS calls or kernels of their own; each one gets its
    own zero fill, so `--weft-linalg-to-blas` can drop it.

    The outermost loop of every kernel carries `weft.kernel = "fused_N"`,
    numbered in program order: the unit a GPU target maps to `gpu.launch`.

    Before:

    ```mlir
    %max = linalg.generic {iterator_types = ["parallel", "reduction"]} ...
    %exp = linalg.generic {iterator_types = ["parallel", "parallel"]}
        ins(%x, %max ...)   // exp(x - max)
    %sum = linalg.generic {iterator_types = ["parallel", "reduction"]} ...
    %out = linalg.generic {iterator_types = ["parallel", "parallel"]}
        ins(%exp, %sum ...) // exp / sum
    ```

    After:

    ```mlir
    %out = scf.forall (%i) in (64) shared_outs(%o = %init) -> (tensor<64x128xf32>) {
      // max, exp, sum and divide on row %i only
      scf.forall.in_parallel { tensor.parallel_insert_slice ... }
    } {weft.kernel = "fused_0"}
    ```
  }];
  let dependentDialects = [
    "::mlir::linalg::LinalgDialect", "::mlir::scf::SCFDialect",
    "::mlir::tensor::TensorDialect", "::mlir::affine::AffineDialect",
    "::mlir::arith::ArithDialect"
  ];
}

def LinalgToBlasPass : Pass<"weft-linalg-to-blas", "mlir::ModuleOp"> {
  let summary = "Turn f32 matmuls on buffers into weft_rt_sgemm calls";
  let description = [{
    Runs after bufferization. A `linalg.matmul`, `linalg.batch_matmul` or
    contraction `linalg.generic` on f32 memrefs with one M, one N, one K and
    at most one batch dimension, whose output is written whole (it was just
    zero-filled: the fill is dropped) becomes a call of the runtime's
    `weft_rt_sgemm` (include/weft/Runtime/Kernels.h), declared
    `func.func private`. Transposed operands come from the indexing maps,
    an operand without the batch dimension is broadcast with batch stride 0,
    and base pointers, offsets and row strides come from
    `memref.extract_strided_metadata`. Anything else (bf16, an inner stride
    that is not 1, an output accumulated into, a transposed output) stays a
    loop nest.

    Before:

    ```mlir
    linalg.fill ins(%zero : f32) outs(%c : memref<8x2xf32>)
    linalg.matmul ins(%a, %b : memref<8x4xf32>, memref<4x2xf32>)
                  outs(%c : memref<8x2xf32>)
    ```

    After:

    ```mlir
    %pa = ... memref.extract_aligned_pointer_as_index %a ... llvm.inttoptr
    ...
    func.call @weft_rt_sgemm(%c1, %c0_i32, %c0_i32, %c8, %c2, %c4,
        %pa, %c4, %c0, %pb, %c2, %c0, %pc, %c2, %c0)
        : (i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64,
           !llvm.ptr, i64, i64, !llvm.ptr, i64, i64) -> ()
    ```
  }];
  let dependentDialects = [
    "::mlir::func::FuncDialect", "::mlir::memref::MemRefDialect",
    "::mlir::arith::ArithDialect", "::mlir::LLVM::LLVMDialect"
  ];
}

def LowerCopiesPass : Pass<"weft-lower-copies", "mlir::func::FuncOp"> {
  let summary = "Turn strided memref.copy into linalg.copy loops";
  let description = [{
    The LLVM lowering turns a `memref.copy` between contiguous buffers into
    `memcpy`, but any other copy into a call of MLIR's C runner library,
    which the executable does not link. This pass rewrites every copy whose
    source or target is not contiguous into `linalg.copy`, which
    `--convert-linalg-to-loops` lowers to plain loops.

    Before:

    ```mlir
    memref.copy %a, %b : memref<4x8xf32, strided<[16, 1]>> to memref<4x8xf32>
    ```

    After:

    ```mlir
    linalg.copy ins(%a : memref<4x8xf32, strided<[16, 1]>>)
                outs(%b : memref<4x8xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect"];
}

def PlanBuffersPass : Pass<"weft-plan-buffers", "mlir::ModuleOp"> {
  let summary = "Place the step's buffers in one workspace by liveness";
  let description = [{
    Runs after bufferization on `function`. Every statically shaped
    `memref.alloc` becomes a `memref.view` into one workspace buffer, a new
    last argument `memref<Nxi8>` tagged `weft.workspace`; its deallocs are
    erased. A buffer is live from its alloc to the last use of it or of any
    alias (views, casts, reshapes, extracted pointers) in the function's
    block; a use nested in a loop or other region keeps it live until the
    end of that op. Buffers are placed largest first at the lowest 64-byte
    aligned offset that no buffer with an overlapping lifetime occupies, so
    two buffers with disjoint lifetimes may share memory.

    The module gets `weft.workspace_bytes` (N) and `weft.peak_bytes` (N plus
    all arguments: parameters, state, batch and results).

    Errors: an alloc with dynamic sizes, or one that escapes the function.

    Before:

    ```mlir
    func.func @train_step(%x: memref<16xf32>) {
      %a = memref.alloc() {alignment = 64 : i64} : memref<16xf32>
      ...
    }
    ```

    After:

    ```mlir
    func.func @train_step(%x: memref<16xf32>,
                          %ws: memref<64xi8> {weft.workspace}) {
      %c0 = arith.constant 0 : index
      %a = memref.view %ws[%c0][] : memref<64xi8> to memref<16xf32>
      ...
    }
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", "\"train_step\"",
           "The function whose buffers are planned">,
  ];
  let dependentDialects = [
    "::mlir::memref::MemRefDialect", "::mlir::arith::ArithDialect"
  ];
}

def OutlineKernelsPass : Pass<"weft-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Move every loop nest of the step into a function of its own";
  let description = [{
    Runs on buffers, after `--weft-plan-buffers`. Every top-level loop nest
    of `function` (a fused kernel, a remaining linalg op, an scf loop)
    becomes a private function `@<function>.<kernel>` called in its place,
    taking the buffers and scalars it uses as arguments (index and other
    constants are cloned in). The step becomes a sequence of kernel calls,
    BLAS calls and copies: LLVM optimizes many small functions in time
    linear in their number, where one function holding a whole GPT-2 step
    takes minutes, and a GPU target finds each kernel as a function, ready
    for `gpu.launch_func`. Kernels are marked `no_inline` so LLVM keeps them
    apart; a fused kernel's function carries the `weft.kernel` tag instead
    of its loop. Identical kernels (the same layer's kernels in every layer,
    on other buffers) become one function, so each is compiled once. A
    kernel whose buffers all have static shapes and identity layouts is
    marked `llvm.bareptr` and takes one pointer per buffer.

    Before:

    ```mlir
    func.func @train_step(%x: memref<64x128xf32>, %y: memref<64x128xf32>) {
      scf.forall (%i) in (64) { ... } {weft.kernel = "fused_0"}
      return
    }
    ```

    After:

    ```mlir
    func.func @train_step(%x: memref<64x128xf32>, %y: memref<64x128xf32>) {
      call @train_step.fused_0(%x, %y) : (memref<64x128xf32>, memref<64x128xf32>) -> ()
      return
    }
    func.func private @train_step.fused_0(%x: memref<64x128xf32>, %y: memref<64x128xf32>)
        attributes {llvm.bareptr, no_inline, weft.kernel} {
      scf.forall (%i) in (64) { ... }
      return
    }
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", "\"train_step\"",
           "The function whose loop nests are outlined">,
  ];
  let dependentDialects = ["::mlir::func::FuncDialect", "::mlir::scf::SCFDialect"];
}

#endif // WEFT_TRANSFORMS_PASSES_TD
