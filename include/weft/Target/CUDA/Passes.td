//===- Passes.td - Passes of the CUDA target --------------*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// `weftc --target cuda` (docs/gpu.md): the planned, outlined step on
// buffers becomes gpu.launch ops, their kernels one gpu.module, and that
// module one fatbin. One `def` per pass, implemented in
// lib/Target/CUDA/<Name>.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_CUDA_PASSES_TD
#define WEFT_TARGET_CUDA_PASSES_TD

include "mlir/Pass/PassBase.td"

def GpuScatterRowsPass : Pass<"weft-gpu-scatter-rows", "mlir::ModuleOp"> {
  let summary = "Run the embedding gradient's scatter-add as sorted runs";
  let description = [{
    Runs on the output of `--weft-outline-kernels`, before
    `--weft-gpu-map-step`. A call of `function` to a kernel that is exactly
    the step's row scatter-add (the embedding gradient):

    ```mlir
    scf.for %t = %c0 to %cN step %c1 {
      %id = memref.load %ids[%t] : memref<Nxi64>
      // row = id < 0 ? id + V : id, clamped into [0, V - 1]
      %dst = memref.subview %table[0, %row, 0] [1, 1, D] [1, 1, 1]
      %src = memref.subview %updates[0, %t, 0] [1, 1, D] [1, 1, 1]
      linalg.generic ... ins(%src) outs(%dst) { out + in (f32) }
    }
    ```

    (an f32 table and f32 updates, or bf16 updates extended before the
    add, of static shapes [1.., V, D] and [1.., N, D], identity layouts,
    N at most 16384, ids not a constant) becomes a call of
    `weft_rt_cuda_scatter_add_rows_f32(ids, N, table, V, updates, D)` (or
    `_bf16`)
    (include/weft/Runtime/Cuda.h), which sorts the tokens by (row, token)
    and adds each row's tokens in token order: the kernel's sums, bit for
    bit, in parallel over rows instead of a thread per column walking every
    token. Other kernels are left alone.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"train_step\"",
           "The step function whose calls are replaced">
  ];
  let statistics = [
    Statistic<"numReplaced", "replaced", "Scatter-add kernel calls replaced">
  ];
}

def GpuGemmEpiloguePass : Pass<"weft-gpu-gemm-epilogue", "mlir::ModuleOp"> {
  let summary = "Add a GEMM's bias in cuBLASLt's epilogue";
  let description = [{
    Runs on the output of `--weft-outline-kernels`, before
    `--weft-gpu-map-step`. A GEMM call of `function` (`weft_rt_sgemm`, or
    `weft_rt_sbgemm`: bf16 operands, an f32 product) and the kernel call
    right after it (nothing in between but address arithmetic) become one
    call of the CUDA runtime's GEMM with a bias epilogue
    (include/weft/Runtime/Cuda.h) that writes the kernel's output, when:

    - the product is a workspace buffer (identity layout) that nothing but
      the kernel reads, through reshapes that keep its last dimension;
    - the kernel is exactly `out = in + bias[j]` over every element of
      the product (`j` the last index, `out` and the product of the same
      shape, identity layouts): one `linalg.generic` on its three
      arguments, or an `scf.forall` over leading dimensions running it on
      rows (`memref.subview` at the forall's indices, full along the
      rest);
    - the body is `arith.addf` of the f32 product and an f32 bias (into
      f32: `weft_rt_cuda_sgemm_bias`, `weft_rt_cuda_sbgemm_bias`), or,
      after `weft_rt_sbgemm`, `arith.truncf` to bf16 of that sum with a
      bf16 bias extended (`weft_rt_cuda_sbgemm_bf16_bias`): what the
      epilogue computes, the f32 sum plus the bias rounded once;
    - the output is disjoint from A, B and the bias (the planner may put
      it where an operand was once the GEMM is done), and the bias is not
      a constant.

    ```mlir
    call @weft_rt_sgemm(%batch, %ta, %tb, %m, %n, %k, %a, %lda, %sa, %b,
                        %ldb, %sb, %p, %ldc, %sc) : (...) -> ()
    %e = memref.expand_shape %view [[0, 1], [2]] output_shape [4, 16, 96]
        : memref<64x96xf32> into memref<4x16x96xf32>
    call @train_step.fused_1(%e, %out, %bias) : (...) -> ()
    // becomes
    call @weft_rt_cuda_sgemm_bias(%batch, %ta, %tb, %m, %n, %k, %a, %lda,
                                  %sa, %b, %ldb, %sb, %biasPtr, %outPtr,
                                  %ldc, %sc) : (...) -> ()
    ```

    Left alone: accumulating GEMMs (`_accumulate`, `_batch_sum`), a
    product rounded to bf16 before the bias is added
    (`weft_rt_sbgemm_bf16`, whose kernel rounds twice: no epilogue does),
    and kernels doing anything more (a GELU, a residual add). A kernel
    left without callers is erased.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"train_step\"",
           "The step function whose GEMMs to fuse">,
  ];
  let statistics = [
    Statistic<"numFused", "fused", "GEMMs given their kernel's bias">,
  ];
  let dependentDialects = [
    "::mlir::LLVM::LLVMDialect", "::mlir::arith::ArithDialect",
    "::mlir::memref::MemRefDialect", "::mlir::func::FuncDialect"
  ];
}

def GpuSplitRowsPass : Pass<"weft-gpu-split-rows", "mlir::ModuleOp"> {
  let summary = "Give row kernels with few rows the next axis as rows too";
  let description = [{
    Runs on the outlined kernels before `--weft-gpu-map-step`. Fusion tiles
    a kernel by its root's parallel loops but the innermost (right for a
    few CPU threads); when the root is a per-row result of reductions over
    a further axis (cross-entropy's loss per token, a layer norm's
    statistics, the softmax gradient's row sums) that leaves an
    `scf.forall` of few iterations (8 for a [8, 1024] grid of tokens), each
    reducing whole matrices, and on a GPU few blocks whose threads each
    reduce a strided row.

    A top-level `scf.forall` of fewer than `rows-below` iterations gets the
    axis after its own as one more loop when every op of its body (linalg
    ops on buffers, `memref.copy`, address arithmetic) writes outputs that
    have that axis right after the forall's unit dimensions, is parallel
    along it, does not read its index, and reads every buffer the body
    writes at the same index of it (so no row reads another row's
    results); inputs the body only reads may take the axis anywhere or not
    at all (a broadcast). Each op then works on its slice at the new
    loop's index, its arithmetic unchanged. Kernels that
    `--weft-gpu-map-step` would not run as a block per row (one
    elementwise op), and splits that would leave a row fewer than
    `min-row-work` iterations or make more than `max-rows` rows, are left
    as they are.
  }];
  let options = [
    Option<"rowsBelow", "rows-below", "int64_t", "4096",
           "Split only foralls of fewer iterations (0: any)">,
    Option<"maxRows", "max-rows", "int64_t", "16777216",
           "Most iterations after the split">,
    Option<"minRowWork", "min-row-work", "int64_t", "32",
           "Fewest iterations of the widest op a row must keep">,
  ];
  let dependentDialects = [
    "::mlir::scf::SCFDialect", "::mlir::memref::MemRefDialect"
  ];
}

def GpuMapStepPass : Pass<"weft-gpu-map-step", "mlir::ModuleOp"> {
  let summary = "Run every loop nest of the step on the GPU (gpu.launch)";
  let description = [{
    Runs on the output of `--weft-outline-kernels` (without
    `--weft-chunk-parallel-loops` and `--weft-merge-sibling-kernels`, which
    group rows for CPU threads). Every buffer of `function` is device
    memory, so every op that reads or writes one must run on the GPU:

    1. Each kernel function `function` calls launches its own loops (the
       host code stays many small functions, and a kernel shared by
       several layers is compiled once); `function` keeps the calls. A
       kernel passed a constant (`memref.get_global`) gets a copy that
       reads the constant itself. The kernels' `scf.forall` become
       `scf.parallel`, linalg ops loops (parallel dimensions first, so a
       column reduction is one thread per column reading along rows) and
       `memref.copy` a copy loop.
    2. A top-level `scf.parallel` whose body is pure address arithmetic
       around one inner `scf.parallel` is collapsed with it. Its iteration
       space is linearized and launched as `ceil(N / block-size)` blocks of
       `block-size` threads (fewer when N is smaller): thread `g` runs
       iteration `g` (row-major), guarded by `g < N`. Consecutive threads
       take consecutive innermost indices, so contiguous rows are read
       coalesced.
    3. A reduction of a whole iteration space into one element (a
       `linalg.generic` whose loops are all reductions, such as the
       gradient norm's sums of squares or a mean loss, combining with
       `arith.addf`, `mulf`, `maximumf`, `minimumf`, `maxnumf` or
       `minnumf`) runs on one block of up to `reduce-block-size` threads:
       each thread combines a strided slice of the linearized iterations
       into a register, the block combines the partial results in shared
       memory as a tree (a barrier between levels), and thread 0 combines
       the total into the output element. From `reduce-blocks-from`
       iterations it runs on up to 256 such blocks over grid-strided
       slices: each block leaves its total in a device buffer of the
       kernel module, counts itself done with an atomic add after a
       memory fence, and the last block combines the totals in block
       order (reading them with atomic adds of zero, which bypass stale
       caches) and resets the count. Either way no result depends on
       scheduling.
    4. A reduction into several elements over 32 or more iterations each
       (bias gradients summing every row, cross-entropy's sums over the
       vocabulary; several outputs reduce together when each combines
       its own running value; `partial-reductions`) runs on
       blocks of 256 threads in two dimensions: one axis walks output
       elements, the other splits each element's reduction, and the
       partial results meet in a shared-memory tree along it; thread 0 of
       that axis combines the total into the element. The axis over the
       first input's innermost dimension is x (32 consecutive threads),
       so a warp reads consecutive addresses for column and row sums
       alike.
    5. A row kernel (softmax, layer norm, cross-entropy and their
       gradients: an `scf.forall` whose body holds linalg ops, copies and
       address arithmetic, more than one of them or a reduction) runs a
       block per row (`row-blocks`), of up to
       `row-block-size` threads, or 1024 when there are fewer than 128
       rows (a power of two, at least 32, no more than the row's widest
       op needs). The threads share each op in
       turn: an op of parallel loops is split over them (thread t takes
       elements t, t + threads, ...: consecutive threads, consecutive
       addresses), a reduction of the row into one element is a block
       reduction as in 3., a reduction into several elements a thread
       per element, an op without loops runs on thread 0, and a barrier
       follows each op. Other kernels keep a thread per iteration (2.).

       In 2. and 5. a thread takes `lanes` consecutive innermost
       iterations instead of one (`vector-lanes`; lib/Target/CUDA/
       VectorLanes.h): 16 bytes of the widest element that the body loads
       or stores at the innermost index of a buffer with innermost stride
       1, when the innermost trip count is a multiple of it and the body
       is loads, stores and pure ops. Those accesses become one
       `vector.load` or `vector.store` each, aligned to its size; each
       thread checks that alignment (the buffer's aligned pointer plus
       lane 0's offset) and otherwise runs its lanes one by one.
    6. A sequential loop around a row's parallel loop (a scatter-add:
       the embedding gradient adds each token's row into the row of its
       id, in token order) runs a thread per column, each walking the
       whole sequential loop for its column, when every access of the
       row's body reads or writes the thread's column (the innermost
       index, of a buffer whose innermost dimension is the whole column
       range): each element sees the same additions in the same order.
    7. Remaining sequential ops (scalar updates) run on one thread of a
       launch of their own.
    8. Constants (`memref.get_global`) are moved into the launches that
       read them, so they are copied into the kernel module.
    9. GEMM and fused attention calls become their device versions
       (`weft_rt_sgemm` -> `weft_rt_cuda_sgemm`, `weft_rt_attention_bf16`
       -> `weft_rt_cuda_attention_bf16`, ...; include/weft/Runtime/Cuda.h):
       still host calls, on device pointers. The bias GEMMs of
       `--weft-gpu-gemm-epilogue` (`weft_rt_cuda_sgemm_bias`, ...) are
       device calls already.

    Launches are ordered as the ops were, on one stream, so no
    synchronization is added. Errors: a runtime call without a device
    version (collectives, point-to-point transfers), a
    constant passed to a GEMM, or a value computed by device code and
    used on the host.
  }];
  let options = [
    Option<"function", "function", "std::string", "\"train_step\"",
           "The step function to map">,
    Option<"blockSize", "block-size", "int64_t", "256",
           "Threads per block of a parallel loop's launch">,
    Option<"reduceBlockSize", "reduce-block-size", "int64_t", "512",
           "Most threads of a full reduction's block (a power of two)">,
    Option<"reduceBlocksFrom", "reduce-blocks-from", "int64_t", "65536",
           "Iterations from which a full reduction runs on many blocks">,
    Option<"partialReductions", "partial-reductions", "bool", "true",
           "Share a long reduction into several elements among a block's "
           "threads">,
    Option<"rowBlocks", "row-blocks", "bool", "true",
           "Run a row kernel with reductions as a block per row">,
    Option<"rowBlockSize", "row-block-size", "int64_t", "256",
           "Most threads of a row's block (a power of two)">,
    Option<"vectorLanes", "vector-lanes", "bool", "true",
           "Give a thread 16 bytes of consecutive innermost iterations, "
           "moved by vector loads and stores where aligned">,
  ];
  let dependentDialects = [
    "::mlir::gpu::GPUDialect", "::mlir::scf::SCFDialect",
    "::mlir::affine::AffineDialect", "::mlir::NVVM::NVVMDialect",
    "::mlir::arith::ArithDialect", "::mlir::memref::MemRefDialect",
    "::mlir::func::FuncDialect", "::mlir::vector::VectorDialect"
  ];
}

def GpuMergeModulesPass : Pass<"weft-gpu-merge-modules", "mlir::ModuleOp"> {
  let summary = "Move every kernel into one gpu.module";
  let description = [{
    Runs after `--gpu-kernel-outlining`, which makes one `gpu.module` per
    launch. Their kernels (and the constants they read, once) move into
    one `gpu.module @weft_kernels`, and every `gpu.launch_func` names its
    kernel there: the executable then carries one fatbin, compiled by one
    `ptxas` run per architecture, instead of one per kernel.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect"];
}

def GpuFatbinPass : Pass<"weft-gpu-fatbin", "mlir::ModuleOp"> {
  let summary = "Replace each gpu.binary's PTX by a fatbin for several GPUs";
  let description = [{
    Runs after `--gpu-module-to-binary{format=isa}`: every `gpu.binary`
    holds the PTX of its module. `ptxas` (from `toolkit`/bin) compiles it
    for each architecture of `archs` (one process each, in parallel), and
    `fatbinary` packs the cubins with the PTX (for GPUs newer than all of
    them, which the driver compiles at load time) into the single object
    the binary then holds; the driver's `cuModuleLoadData` picks the
    matching cubin. Errors name the tool, its command line and its
    output.
  }];
  let options = [
    Option<"toolkit", "toolkit", "std::string", "\"/usr/local/cuda\"",
           "The CUDA toolkit (ptxas and fatbinary under bin/)">,
    ListOption<"archs", "archs", "std::string",
               "GPU architectures to compile cubins for (sm_90,sm_80)">,
    Option<"ptxArch", "ptx-arch", "std::string", "\"compute_80\"",
           "The virtual architecture the embedded PTX targets">,
  ];
}

#endif // WEFT_TARGET_CUDA_PASSES_TD
