//===- Passes.td - Code-generation passes -----------------------*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Target-neutral code generation of a training step: the entry, fused
// kernels on tensors, BLAS calls, buffer planning, outlining
// (docs/codegen.md). One `def` per pass, implemented in
// lib/Codegen/<Name>.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_CODEGEN_PASSES_TD
#define WEFT_CODEGEN_PASSES_TD

include "mlir/Pass/PassBase.td"

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

def FoldGemmRoundingPass : Pass<"weft-fold-gemm-rounding",
                                 "mlir::func::FuncOp"> {
  let summary = "Round a bf16 product's sums to bf16 in its GEMM";
  let description = [{
    Runs on linalg on tensors, before `--weft-fuse-kernels`. A
    `linalg.matmul` or `linalg.batch_matmul` of bf16 operands into a
    zero-filled f32 tensor whose only use is an elementwise `arith.truncf`
    to bf16 (what `--precision bf16` lowers a product to: sums in f32,
    one rounding) becomes the same product into a zero-filled bf16
    tensor, which `--weft-linalg-to-blas` makes one `weft_rt_sbgemm_bf16`
    call: it sums in f32 and rounds C once, the same numbers without the
    f32 tensor and the pass that rounds it. `--weft-linalg-to-blas` fails
    on a bf16 product it cannot make that call, whose loops would sum in
    bf16.
  }];
  let dependentDialects = ["::mlir::linalg::LinalgDialect",
                           "::mlir::arith::ArithDialect"];
}

def FoldBatchIntoGemmPass : Pass<"weft-fold-batch-into-gemm",
                                  "mlir::func::FuncOp"> {
  let summary = "Fold the batch axes of matmuls with a 2-D side into M";
  let description = [{
    Runs on the per-rank step, still weft on tensors, right before
    `--weft-lower-to-linalg` (after partitioning: the reshapes it adds
    would otherwise need sharding rules). Two rewrites turn a batch of
    GEMMs into one GEMM whose rows are the batch's rows stacked, read
    through reshapes that lower to `tensor.collapse_shape` /
    `expand_shape`, free views of the contiguous buffers:

    - a weight gradient: `weft.reduce_sum` over every batch axis of
      `weft.matmul %a, %g {transpose_lhs = true}` with `a: [B.., M, K]`
      and `g: [B.., M, N]` (the same batch, no broadcast), the reduction
      the matmul's only user, becomes one `[B*M, K]^T x [B*M, N]` matmul:
      `sum_b a_b^T g_b` contracts the stacked rows. Only this flag
      combination contracts the axis next to the batch on both sides; any
      other is left alone, as is a reduction over part of the batch. Only
      f32 unless `narrow`: in bf16 or f16 the batched form rounds each
      batch's product to that type before summing, and the reference
      evaluator does the same; one GEMM rounds once and differs from it by
      that rounding (it is the more accurate, and what PyTorch's linear
      backward computes). `narrow` folds these too: the GPU build sets it,
      where the batched form is a [B, K, N] tensor written, read back and
      summed in a kernel of its own (GPT-2's logits weight gradient: 617
      MB and 2.2 ms of a 57 ms step on an H200), and the GEMM at the
      stacked shape is the one that runs fast;
    - an activation times a weight: `weft.matmul %x, %w` with `x: [B.., M,
      K]` not transposed and `w` 2-D (`transpose_rhs` either way) becomes
      a `[B*M, K]` matmul reshaped back to `[B.., M, N]`.

    Sums accumulate in another order than the batched form's (one GEMM
    instead of a GEMM per batch element and an add), so results differ
    by rounding only.

    Never fails: what does not match is left as it is.

    Before:

    ```mlir
    %p = weft.matmul %a, %g {transpose_lhs = true}
        : (tensor<8x128x256xf32>, tensor<8x128x1024xf32>)
        -> tensor<8x256x1024xf32>
    %dw = weft.reduce_sum %p {axes = array<i64: 0>}
        : (tensor<8x256x1024xf32>) -> tensor<256x1024xf32>
    %y = weft.matmul %x, %w
        : (tensor<8x128x256xf32>, tensor<256x1024xf32>)
        -> tensor<8x128x1024xf32>
    ```

    After:

    ```mlir
    %a2 = weft.reshape %a : tensor<8x128x256xf32> -> tensor<1024x256xf32>
    %g2 = weft.reshape %g : tensor<8x128x1024xf32> -> tensor<1024x1024xf32>
    %dw = weft.matmul %a2, %g2 {transpose_lhs = true}
        : (tensor<1024x256xf32>, tensor<1024x1024xf32>)
        -> tensor<256x1024xf32>
    %x2 = weft.reshape %x : tensor<8x128x256xf32> -> tensor<1024x256xf32>
    %y2 = weft.matmul %x2, %w
        : (tensor<1024x256xf32>, tensor<256x1024xf32>)
        -> tensor<1024x1024xf32>
    %y = weft.reshape %y2 : tensor<1024x1024xf32> -> tensor<8x128x1024xf32>
    ```
  }];
  let options = [
    Option<"narrow", "narrow", "bool", "false",
           "Fold bf16 and f16 weight gradients too: one rounding of the "
           "stacked product instead of one per batch element">,
  ];
}

def LowerCollectivesPass : Pass<"weft-lower-collectives", "mlir::ModuleOp"> {
  let summary = "Collectives and shard slices to calls of the runtime";
  let description = [{
    Runs on a partitioned step (tensors, local shapes) before
    `--weft-lower-to-linalg`. When `entry` holds collectives, it gets a
    first argument `!llvm.ptr {weft.context}`: the runtime's
    `const WeftRuntimeContext *`, which the descriptor's trainStep wrapper
    passes and which is no slot of the step contract. Each collective
    becomes a call of a runtime C function (docs/runtime.md, "Collectives
    in generated code") that takes the context, the op's mesh axes as a bit
    mask (bit i: axis i of the module's `weft.mesh`), and pointers:

    - `weft.all_reduce` -> `weft_rt_all_reduce_f32(ctx, mask, in, out, n)`;
    - `weft.all_gather` along `dim` -> `weft_rt_all_gather_f32(ctx, mask,
      in, out, outer, inner)` (outer: elements before `dim`; inner: the
      local block from `dim` on);
    - `weft.reduce_scatter` -> `weft_rt_reduce_scatter_f32(...)`, likewise
      with the result's block;
    - `weft.all_to_all` -> `weft_rt_all_to_all_f32(ctx, mask, in, out,
      splitOuter, splitInner, concatOuter, concatInner)`: the block each
      rank sends or receives (the input with `split_dim` cut n ways) split
      where `split_dim` starts, then where `concat_dim` starts;
    - `weft.send` -> `weft_rt_send_f32(ctx, mask, in, count, peer, tag)`
      and `weft.recv` -> `weft_rt_recv_f32(ctx, mask, out, count, peer,
      tag)`, `count` the tensor's elements; calls stay in the ops' order;
    - `weft.shard_slice` -> `tensor.extract_slice` at
      `weft_rt_axis_index(ctx, mask)` times the block size (no
      communication).

    The input is read through `bufferization.to_buffer {read_only}` and
    the result is a fresh 64-byte aligned `memref.alloc` returned as
    `bufferization.to_tensor {restrict, writable}`, so bufferization,
    out-parameters and buffer planning treat the call as the producer of a
    new buffer.

    Errors: a collective outside `entry`, a module without `weft.mesh`, an
    axis the mesh lacks or axes listed in another order than the mesh's
    (ranks are numbered row-major in mesh order), a collective on a type
    other than f32, a `weft.bucket` on an op buckets do not hold
    (all_to_all, send, recv, shard_slice).

    Before:

    ```mlir
    module attributes {weft.mesh = #weft.mesh<dp = 2>} {
      func.func @train_step(%g: tensor<4xf32> {weft.input = "g"})
          -> tensor<4xf32> {
        %s = weft.all_reduce %g {axes = ["dp"]} : tensor<4xf32>
        return %s : tensor<4xf32>
      }
    }
    ```

    After:

    ```mlir
    func.func private @weft_rt_all_reduce_f32(!llvm.ptr, i64, !llvm.ptr,
                                              !llvm.ptr, i64)
    func.func @train_step(%ctx: !llvm.ptr {weft.context},
                          %g: tensor<4xf32> {weft.input = "g"})
        -> tensor<4xf32> {
      %in = bufferization.to_buffer %g read_only
          : tensor<4xf32> to memref<4xf32>
      %out = memref.alloc() {alignment = 64 : i64} : memref<4xf32>
      // %pin, %pout: the buffers' aligned pointers as !llvm.ptr
      func.call @weft_rt_all_reduce_f32(%ctx, %c1, %pin, %pout, %c4)
          : (!llvm.ptr, i64, !llvm.ptr, !llvm.ptr, i64) -> ()
      %s = bufferization.to_tensor %out restrict writable
          : memref<4xf32> to tensor<4xf32>
      return %s : tensor<4xf32>
    }
    ```
  }];
  let dependentDialects = ["mlir::arith::ArithDialect",
                           "mlir::bufferization::BufferizationDialect",
                           "mlir::func::FuncDialect",
                           "mlir::LLVM::LLVMDialect",
                           "mlir::memref::MemRefDialect",
                           "mlir::tensor::TensorDialect"];
  let options = [
    Option<"entry", "entry", "std::string", "\"train_step\"",
           "The step function, which receives the runtime context">,
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
    own zero fill, so `--weft-linalg-to-blas` can drop it. A lone parallel
    dimension with reductions inside it (a bias gradient's channels) is
    tiled too. Ops whose maps compute indices (an im2col gather, a pooling
    window of the form `d0 * s + d1`, a named pooling or grouped
    convolution op) fuse with nothing but are tiled alone along the
    parallel dimensions every map uses as a plain index, so they run in
    parallel as well; index maps that are not monotone stay whole.

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

def SplitEmptyTensorsPass
    : Pass<"weft-split-empty-tensors", "mlir::func::FuncOp"> {
  let summary = "Give each user of a shared tensor.empty a clone of its own";
  let description = [{
    One-shot bufferization writes a kernel's result into the buffer of its
    destination, a `tensor.empty` when the kernel was lowered. CSE merges
    equal empty tensors across the whole step into the first, so one
    buffer, allocated near the step's start, receives every kernel of that
    shape in place, and lives until the last of them: `--weft-plan-buffers`
    cannot reuse its memory in between (with full recomputation: every
    layer's scores, alive from the first forward to the last backward).

    This pass replaces each use of an empty tensor that has several with a
    clone placed just before the user (before the loop around it, for a
    use inside a loop body), and erases the original. Each kernel's buffer
    is then born where its value is, and the buffer plan sees the values'
    real lifetimes. Run after the last CSE, before bufferization.

    Before:

    ```mlir
    %e = tensor.empty() : tensor<8x128xf32>
    %a = linalg.matmul ins(...) outs(%e : tensor<8x128xf32>)
    ...
    %c = scf.forall (%i) in (8) shared_outs(%o = %e) -> (tensor<8x128xf32>)
    ```

    After:

    ```mlir
    %e0 = tensor.empty() : tensor<8x128xf32>
    %a = linalg.matmul ins(...) outs(%e0 : tensor<8x128xf32>)
    ...
    %e1 = tensor.empty() : tensor<8x128xf32>
    %c = scf.forall (%i) in (8) shared_outs(%o = %e1) -> (tensor<8x128xf32>)
    ```
  }];
  let dependentDialects = ["::mlir::tensor::TensorDialect"];
}

def LinalgToBlasPass : Pass<"weft-linalg-to-blas", "mlir::ModuleOp"> {
  let summary = "Turn f32 and bf16 matmuls on buffers into runtime GEMM calls";
  let description = [{
    Runs after bufferization. A `linalg.matmul`, `linalg.batch_matmul` or
    contraction `linalg.generic` with one M, one N, one K and at most one
    batch dimension, whose output is written whole (it was just zero-filled:
    the fill is dropped) becomes a call of a runtime GEMM
    (include/weft/Runtime/Kernels.h), declared `func.func private`:
    `weft_rt_sgemm` on f32 operands and output, `weft_rt_sbgemm` on bf16
    operands and an f32 output (what `--precision bf16` produces),
    `weft_rt_sbgemm_bf16` on bf16 operands and output (f32 sums rounded to
    bf16). An f32 batch-reduce contraction (`linalg.batch_reduce_matmul`
    or the same generic: the batch, leading both operands, is summed into
    one output) becomes `weft_rt_sgemm_batch_sum`. Transposed operands come
    from the indexing maps, an operand
    without the batch dimension is broadcast with batch stride 0, and base
    pointers, offsets and row strides come from
    `memref.extract_strided_metadata`. Anything else (mixed or other element
    types, an inner stride that is not 1, an output accumulated into, a
    transposed output) stays a loop nest.

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
    `--convert-linalg-to-loops` lowers to plain loops. A copy (memref or
    linalg) of a view onto the same view — equal subviews of one buffer,
    what bufferization leaves where a tile is computed in place — moves
    nothing and is erased; a copy out of a constant global holding one
    value everywhere (bufferized splat constants) becomes a `linalg.fill`,
    so the executable does not carry the constant. An allocation whose
    final value is copied into a function argument that nothing else
    touches (an out-parameter of `--buffer-results-to-out-params`, which
    aliases no other buffer) is replaced by that argument: the kernels
    write the step's results directly, without a copy after them.

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
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::linalg::LinalgDialect"];
}

def PromoteAccumulatorsPass
    : Pass<"weft-promote-accumulators", "mlir::func::FuncOp"> {
  let summary = "Carry reduction accumulators as scf.for iteration arguments";
  let description = [{
    Runs on the loops `--convert-linalg-to-loops` makes. In an `scf.for`
    whose only writes are stores directly in its body, each at
    loop-invariant indices of a buffer defined outside the loop, and each
    preceded by the body's only load of that buffer at the same indices,
    the loaded element becomes an iteration argument: one load before the
    loop, one store after it. Any other write, call or read of those
    buffers leaves the loop alone. Linalg ops never read what they write,
    which is what makes this sound on their loops; LLVM cannot prove it for
    kernel arguments, and without it keeps a reduction in memory, scalar.

    Before:

    ```mlir
    scf.for %k = %c0 to %c8 step %c1 {
      %x = memref.load %in[%i, %k] : memref<4x8xf32>
      %acc = memref.load %out[%i] : memref<4xf32>
      %sum = arith.addf %acc, %x : f32
      memref.store %sum, %out[%i] : memref<4xf32>
    }
    ```

    After:

    ```mlir
    %init = memref.load %out[%i] : memref<4xf32>
    %r = scf.for %k = %c0 to %c8 step %c1 iter_args(%acc = %init) -> (f32) {
      %x = memref.load %in[%i, %k] : memref<4x8xf32>
      %sum = arith.addf %acc, %x : f32
      scf.yield %sum : f32
    }
    memref.store %r, %out[%i] : memref<4xf32>
    ```
  }];
}

def ReassociateReductionsPass : Pass<"weft-reassociate-reductions"> {
  let summary = "Mark the combining op of float reductions `reassoc`";
  let description = [{
    In every `linalg.generic` with a reduction loop, an `arith.addf` or
    `arith.mulf` that combines a yielded value with its own output block
    argument gets the `reassoc` fast-math flag, which lets LLVM's loop
    vectorizer keep several partial sums. No other op changes, so
    element-wise math keeps strict IEEE semantics; results differ from a
    strictly ordered sum by rounding only.

    Before:

    ```mlir
    ^bb0(%in: f32, %out: f32):
      %0 = arith.addf %out, %in : f32
      linalg.yield %0 : f32
    ```

    After:

    ```mlir
    ^bb0(%in: f32, %out: f32):
      %0 = arith.addf %out, %in fastmath<reassoc> : f32
      linalg.yield %0 : f32
    ```
  }];
}

def MergeSiblingKernelsPass
    : Pass<"weft-merge-sibling-kernels", "mlir::ModuleOp"> {
  let summary = "Run independent kernels of the step in one parallel loop";
  let description = [{
    Runs on buffers, after `--weft-lower-copies` and before
    `--weft-chunk-parallel-loops`. Every kernel is one OpenMP parallel
    region, a fork, a join and a barrier; the optimizer's update of a
    model with P parameters is P to 3P kernels with nothing between them
    (and the gradient-norm reductions, the output copies). This pass runs
    such kernels as one `scf.forall`, one region for all of them.

    The function body is cut into runs of consecutive ops holding only
    kernels (top-level `scf.forall`s with static bounds from 0 in steps of
    1, no outputs, no mapping and no allocation in their body but static
    ones directly in it, row scratch, of at most `scratch-budget` bytes
    for `chunks` iterations; linalg ops on buffers;
    `memref.copy`), allocations and ops without memory
    effects; any other op (a BLAS or runtime call, a loop) ends a run. A
    fill or copy right before a linalg op that reads and writes the one
    buffer it writes (the zero a reduction's accumulator starts from) is
    part of that op's kernel.
    Within a run each kernel gets a level: one more than that of the
    latest kernel before it that writes a buffer it reads or writes, or
    reads a buffer it writes (buffers compared by their allocation or
    function argument; the ABI has no aliasing arguments). The kernels of
    one level are independent, so their rows may run in any order: they
    become one `scf.forall` over `chunks` iterations in which kernel k's
    row r runs in iteration `(r * s_k + o_k) mod chunks`, `o_k` the rows of
    the kernels before it in the level (rows are dealt round-robin across
    kernels, so iterations get equal shares whatever the kernels' sizes; a
    linalg op or copy is one row, run by one iteration under an `scf.if`).
    `s_k` is 1, or `chunks / rows` for a kernel of fewer rows than
    iterations: OpenMP gives each thread a contiguous block of iterations,
    and such a kernel's rows, packed together, would all land in one
    thread's block (a bias gradient's few heavy rows next to many light
    ones: one thread works while the others wait).
    A kernel's rows of an iteration become a call of a private `no_inline`
    function `@<function>.rows_N` taking the first row; its row scratch
    becomes a view, at `c` times the scratch's size, of bytes allocated
    before the loop for all `chunks` iterations `c` (an iteration's rows
    run one after another on one thread); kernels with equal
    bodies (the layers' updates) share one. Levels keep their order: a
    level's loop takes the place of its last kernel, or follows the
    previous level's. A level of more than `max-kernels` kernels becomes
    several loops of at most that many, of equal sizes (within one), one
    after the other. Each
    row runs the same ops as before: results are bit for bit those without
    the pass. A level of one kernel is left alone.

    Errors: `chunks` below 1 or `max-kernels` below 2.

    Before (two parameters' updates, both reading the clipping scale):

    ```mlir
    linalg.generic ... ins(%g1, %g2) outs(%scale : memref<f32>)   // norm
    scf.forall (%i) in (256) { ... %p1[%i] ... }   {weft.kernel = "fused_7"}
    scf.forall (%i) in (1024) { ... %p2[%i] ... }  {weft.kernel = "fused_8"}
    ```

    After (`chunks=64`; 256 rows before the second kernel, 0 mod 64):

    ```mlir
    func.func private @train_step.rows_0(%scale, %p1, ..., %first: index) {
      scf.for %r = %first to %c256 step %c64 { ... %p1[%r] ... }
    }
    func.func private @train_step.rows_1(%scale, %p2, ..., %first: index) {
      scf.for %r = %first to %c1024 step %c64 { ... %p2[%r] ... }
    }
    ...
    linalg.generic ... ins(%g1, %g2) outs(%scale : memref<f32>)
    scf.forall (%c) in (64) {
      func.call @train_step.rows_0(%scale, %p1, ..., %c)
      func.call @train_step.rows_1(%scale, %p2, ..., %c)
    } {weft.kernel = "siblings_0"}
    ```
  }];
  let options = [
    Option<"chunks", "chunks", "int64_t", "64",
           "Parallel iterations of a merged loop (at most its rows)">,
    Option<"maxKernels", "max-kernels", "int64_t", "16",
           "Most kernels one merged loop runs (a larger level becomes "
           "several loops)">,
    Option<"scratchBudget", "scratch-budget", "int64_t", "64 << 20",
           "Most bytes of a kernel's row scratch times its iterations "
           "(as --weft-chunk-parallel-loops's); a kernel needing more "
           "stays alone">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::func::FuncDialect",
                           "::mlir::scf::SCFDialect"];
}

def ChunkParallelLoopsPass
    : Pass<"weft-chunk-parallel-loops", "mlir::ModuleOp"> {
  let summary = "Regroup each kernel's parallel rows into a few chunks";
  let description = [{
    Runs on buffers, before `--weft-plan-buffers`. A kernel's `scf.forall`
    iterations run on an OpenMP team, so `--weft-plan-buffers` gives every
    iteration its own copy of the scratch buffers it allocates. A forall of
    more than `chunks` iterations (static bounds from 0, step 1, no
    outputs or mapping) becomes a forall over `chunks` iterations, each an
    `scf.for` over its rows; rows are dealt round-robin, chunk `c` taking
    rows `c, c + chunks, ...` (row-major over the old indices), so chunks
    get the same mix of cheap and expensive rows. Where each chunk still
    gets 4 deals or more, rows are dealt in blocks of up to 16 consecutive
    ones (the largest of 16, 8, 4, 2 dividing the rows), so a kernel
    reading a column uses each cache line for a block of rows. Fewer chunks are used
    when `chunks` copies of one iteration's scratch would exceed
    `scratch-budget` bytes. Other foralls are left alone.

    Before:

    ```mlir
    scf.forall (%i) in (1000) {
      %s = memref.alloc() : memref<256xf64>
      ...
    }
    ```

    After (`chunks=64`):

    ```mlir
    scf.forall (%c) in (64) {
      scf.for %i = %c to %c1000 step %c64 {
        %s = memref.alloc() : memref<256xf64>
        ...
      }
    }
    ```
  }];
  let options = [
    Option<"chunks", "chunks", "int64_t", "64",
           "Most parallel iterations a forall keeps">,
    Option<"scratchBudget", "scratch-budget", "int64_t", "64 << 20",
           "Most bytes all chunks' copies of the scratch may take">,
  ];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::scf::SCFDialect"];
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
    two buffers with disjoint lifetimes may share memory. A buffer
    allocated inside `scf.forall` bodies gets one copy per iteration of
    those loops (they run in parallel), addressed by the iteration's
    row-major index.

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

def DumpKernelOutputsPass : Pass<"weft-dump-kernel-outputs", "mlir::ModuleOp"> {
  let summary = "After each kernel call, hand the buffers it wrote to the runtime";
  let description = [{
    A debugging aid (`weftc --dump-kernel-outputs`, docs/gpu.md, Checking
    kernels). Runs right after `--weft-outline-kernels`, on both targets.
    After each call of `function` to an outlined kernel, one call of
    `weft_rt_dump_kernel_output` (include/weft/Runtime/KernelDump.h) per
    buffer argument the kernel writes: the kernel's name, the call's index
    among the step's kernel calls, the argument's index, the address of its
    first element, its element type (a `weft::rt::DType`) and a constant
    table `[rank, sizes..., strides...]` (in elements), so that a strided
    view is read as the view. Which arguments a kernel writes comes from the
    memory effects of its body, followed through views back to the
    arguments; an op of unknown effects counts as writing every buffer.
    The step's whole workspace, which a kernel takes for its rows' scratch,
    is left out. The
    runtime writes the buffers as .npy files when `WEFT_DUMP_KERNELS` is
    set, and does nothing otherwise. The CUDA target renames the call
    `weft_rt_cuda_dump_kernel_output` (`--weft-gpu-map-step`), which copies
    from the device.

    Before:

    ```mlir
    call @train_step.fused_0(%x, %y) : (memref<64x128xf32>, memref<64x128xf32>) -> ()
    ```

    After (`%y` written):

    ```mlir
    call @train_step.fused_0(%x, %y) : (memref<64x128xf32>, memref<64x128xf32>) -> ()
    %name = llvm.mlir.addressof @__weft_dump_name_0 : !llvm.ptr
    %layout = llvm.mlir.addressof @__weft_dump_layout_0 : !llvm.ptr
    %ptr = llvm.getelementptr ...  // %y's first element
    call @weft_rt_dump_kernel_output(%name, %c0_i64, %c1_i64, %ptr, %c1_i32, %layout)
        : (!llvm.ptr, i64, i64, !llvm.ptr, i32, !llvm.ptr) -> ()
    ```

    Errors: a written buffer whose sizes or strides are not static, and an
    existing `@weft_rt_dump_kernel_output` of another type.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"train_step\"",
           "The step whose kernel calls are followed">,
  ];
  let dependentDialects = ["::mlir::LLVM::LLVMDialect",
                           "::mlir::memref::MemRefDialect",
                           "::mlir::arith::ArithDialect"];
}

def ApproximateMathPass : Pass<"weft-approximate-math", "mlir::func::FuncOp"> {
  let summary = "Replace f32 transcendental calls by inline polynomials";
  let description = [{
    Runs on loops (right after `--convert-linalg-to-loops`). `math.exp`,
    `math.expm1`, `math.tanh`, `math.erf`, `math.log` and `math.log1p` on
    f32 become MLIR's polynomial approximations (Cephes-style range
    reduction and minimax polynomials: plain arithmetic, selects and bit
    casts), so a kernel's loop no longer calls libm per element and LLVM's
    loop vectorizer can widen it. On bf16 the op is computed in f32 between
    an `arith.extf` and an `arith.truncf`; f64 and f16 ops are left alone
    (they stay libm calls). Reductions are approximated too: after
    `--weft-promote-accumulators` and `--weft-reassociate-reductions` LLVM
    vectorizes them, and a vectorized libm call is one call per lane.

    Adjustments for the CPU target:

    - `math.log` scales inputs below the smallest normal float by 2^24 and
      subtracts 24 ln 2 (the polynomial flushes denormals);
    - `math.tanh` is exactly +-1 for |x| > 13 ln 2, where that is the
      rounded result (the polynomial stays ulps below 1);
    - the approximations' `math.fma` becomes `arith.mulf` + `arith.addf`
      with `fastmath<contract>`: LLVM fuses them where the CPU has FMA, and
      never calls `fmaf` where it has not (x86-64 baseline);
    - their `math.floor` becomes a round trip through i32 with a correction
      step (no `floorf` call without SSE4.1).

    Measured error bounds against double-precision libm are in
    docs/codegen.md ("Transcendental functions") and checked by
    unittests/Codegen/ApproximateMathTest.cpp.

    Before:

    ```mlir
    %y = math.tanh %x : f32
    ```

    After (abridged):

    ```mlir
    %c = arith.cmpf ult, %x, %cst_m8 : f32
    %xc = arith.select %c, %x, %cst_m8 : f32   // clamp to [-8, 8]
    ...
    %x2 = arith.mulf %xc, %xc : f32
    %m = arith.mulf %x2, %alpha13 fastmath<contract> : f32
    %p = arith.addf %m, %alpha11 fastmath<contract> : f32
    ...
    %y = arith.select %tiny, %x, %ratio : f32
    ```
  }];
  let dependentDialects = [
    "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
    "::mlir::vector::VectorDialect"
  ];
}

def Bf16StorageAsI16Pass
    : Pass<"weft-bf16-storage-as-i16", "mlir::ModuleOp"> {
  let summary = "Carry bf16 values as i16 in the LLVM dialect";
  let description = [{
    Runs last, on the LLVM dialect. After `--arith-expand` with
    `include-bf16`, a bf16 value is only ever loaded, stored, selected,
    passed between blocks, or bit-cast to and from i16 (its arithmetic is
    f32). LLVM's instcombine moves those bit casts across selects, so a
    vectorized kernel ends up selecting and storing `<8 x bfloat>`, which
    x86 without AVX512-BF16 has no registers for: every lane is extracted,
    compared and stored on its own (a third of a bf16 CNN's kernel time).
    Carried as i16, the same values stay in vector registers.

    Every bf16 in a function's types and attributes becomes i16 (constants
    keep their bits); the bit casts between i16 and bf16 disappear. A
    function in which bf16 is used by anything else (arithmetic, a call
    passing it by value) is left as it is.

    Before:

    ```mlir
    %b = llvm.bitcast %i : i16 to bf16
    %s = llvm.select %c, %b, %zero : i1, bf16
    llvm.store %s, %p : bf16, !llvm.ptr
    ```

    After:

    ```mlir
    %s = llvm.select %c, %i, %zero : i1, i16
    llvm.store %s, %p : i16, !llvm.ptr
    ```
  }];
  let statistics = [
    Statistic<"numFunctionsKept", "functions-kept",
              "Functions left with bf16 values (used by arithmetic or calls)">,
  ];
}

def MarkDisjointArgsPass : Pass<"weft-mark-disjoint-args", "mlir::ModuleOp"> {
  let summary = "Mark kernel buffer arguments that overlap no other as noalias";
  let description = [{
    Runs on buffers, after `--weft-outline-kernels` (CPU target). Follows
    every call path from `function` to each kernel and tracks each buffer
    argument to a root and a byte range: the workspace (`weft.workspace`,
    an allocation of its own) with the offsets of its `memref.view`s, the
    step's other arguments (one root: a caller may pass overlapping
    buffers, so they are never disjoint from each other), or an allocation.
    Subviews and reshapes keep their source's range. A kernel argument
    whose range, on every path, overlaps no other buffer argument's gets
    `llvm.noalias`; `--weft-scope-noalias-accesses` turns that into alias
    scopes that survive OpenMP outlining. With it LLVM vectorizes the copies
    of im2col gathers and transposes, which it otherwise keeps scalar
    because a store might feed the next load.

    Before:

    ```mlir
    %a = memref.view %ws[%c0][] : memref<4096xi8> to memref<512xf32>
    %b = memref.view %ws[%c2048][] : memref<4096xi8> to memref<512xf32>
    call @train_step.kernel_0(%a, %b) : (memref<512xf32>, memref<512xf32>) -> ()
    ```

    After:

    ```mlir
    func.func private @train_step.kernel_0(%arg0: memref<512xf32> {llvm.noalias},
                                           %arg1: memref<512xf32> {llvm.noalias})
    ```
  }];
  let options = [
    Option<"function", "function", "std::string", "\"train_step\"",
           "The step whose call paths are followed">,
  ];
  let statistics = [
    Statistic<"numMarked", "arguments-marked", "Kernel arguments marked noalias">,
  ];
}

def ScopeNoAliasAccessesPass
    : Pass<"weft-scope-noalias-accesses", "mlir::ModuleOp"> {
  let summary = "Turn noalias pointer arguments into alias scopes on accesses";
  let description = [{
    Runs on the LLVM dialect (CPU target). A kernel's parallel loop is
    outlined into an OpenMP body function when it is translated, and that
    function's pointer arguments carry no `noalias`. Alias-scope metadata
    on each access survives the outlining: as LLVM's inliner does, every
    load and store through a `noalias` argument gets the argument's scope
    and is marked not to alias the other noalias arguments' scopes; one
    through any other argument aliases none of them. An access whose
    pointer is not traced to an argument (through GEPs and casts) gets no
    metadata.

    ```mlir
    %v = llvm.load %p {alias_scopes = [#arg0], noalias_scopes = [#arg1]} : !llvm.ptr -> f32
    llvm.store %v, %q {alias_scopes = [#arg1], noalias_scopes = [#arg0]} : f32, !llvm.ptr
    ```
  }];
  let statistics = [
    Statistic<"numScoped", "accesses-scoped", "Loads and stores given scopes">,
  ];
}

#endif // WEFT_CODEGEN_PASSES_TD
