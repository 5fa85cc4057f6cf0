//===- Passes.td - Parallelization passes ------------------*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// From the one-device training step to the per-rank step of a mesh: place
// the layouts that are decisions (batch split, ZeRO shards), propagate
// them through every op's sharding rule, and partition. One `def` per
// pass, implemented in lib/Transforms/Parallel/<Name>.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TRANSFORMS_PARALLEL_PASSES_TD
#define WEFT_TRANSFORMS_PARALLEL_PASSES_TD

include "mlir/Pass/PassBase.td"

def SplitFusedProjectionsPass : Pass<"weft-split-fused-projections",
                                     "mlir::func::FuncOp"> {
  let summary = "Split a projection whose result is only sliced into one "
                "matmul per slice";
  let description = [{
    A fused projection (`qkv = x @ W^T + b`, then q, k and v sliced out of
    its last dimension) cannot be split column-parallel: a block of W's
    rows holds all of q and part of k, and each slice needs its whole
    width. Rewritten as one matmul per slice, of the matching rows of W
    and entries of b, each part is split on its own (each rank computes
    its heads of q, k and v), while W stays one parameter. It runs on the
    model before the training step is built, under tensor parallelism
    (`weftc --mesh ...,tp=N`); the product is the same, computed in parts.

    ```mlir
    %m = weft.matmul %x, %w {transpose_rhs = true} : (tensor<8x32xf32>, tensor<96x32xf32>) -> tensor<8x96xf32>
    %a = weft.add %m, %b : (tensor<8x96xf32>, tensor<96xf32>) -> tensor<8x96xf32>
    %q = weft.slice %a {starts = [0, 0], limits = [8, 32], ...}
    // becomes, per slice:
    %wq = weft.slice %w {starts = [0, 0], limits = [32, 32], ...}
    %bq = weft.slice %b {starts = [0], limits = [32], ...}
    %mq = weft.matmul %x, %wq {transpose_rhs = true}
    %q = weft.add %mq, %bq
    ```
    Applies when the weight is 2-D, every user of the product (after an
    optional bias add) is a unit-stride slice of its last dimension, and
    the slices have one width that divides it.

    A weight (or bias) that is a parameter read by the projection alone is
    then held as a view: `[96, 32]` becomes `[3, 32, 32]` (the parts, then
    each part's rows), marked `weft.stored_shape = array<i64: 96, 32>`,
    and each part is a slice of the view. A tp split of a part's rows is
    then a split of the view's, so the parameter and its optimizer state
    are split with their parts (each rank holds its heads of q, k and v)
    instead of staying whole. The runtime maps the view's blocks to the
    stored shape for the weights and checkpoints. Parameters named in
    `given` (globs: those `--shard` lays out by hand, in the stored shape)
    are not viewed.
  }];
  let options = [
    ListOption<"given", "given", "std::string",
               "Parameters (globs) laid out by hand: kept in their shape">
  ];
  let dependentDialects = ["weft::WeftDialect"];
}

def ApplyMeshPass : Pass<"weft-apply-mesh", "mlir::ModuleOp"> {
  let summary = "Fix the layouts a data-/tensor-parallel plan decides";
  let description = [{
    Records the mesh on the module (`weft.mesh`) and gives every argument
    and result of the step a `weft.sharding`:
    - batch inputs are split along their batch dimension over `dp`; with
      gradient accumulation (K micro-batches of m samples) a batch input
      `[K*m, ...]` becomes `[K, m, ...]` split along m, so every rank holds
      its part of every micro-batch and N ranks see the micro-batches one
      rank sees;
    - parameters, buffers and step scalars are replicated, except that
      ZeRO (`zero` >= 1) splits optimizer state over `dp`, ZeRO-3 splits
      parameters too, along their first dimension that divides by dp (a
      tensor with none stays replicated);
    - ZeRO-2 scatters each micro-batch's gradients as they leave the
      backward pass (`weft.shard_as` on @loss_grad's gradient results);
      ZeRO-3 gathers parameters where the forward and backward passes use
      them (`weft.shard_as ... {rematerialize}`: a gather per use, so the
      whole parameter does not stay alive between them).
    Functions the step calls are made private, for inlining.

    ```mlir
    // --weft-apply-mesh="mesh=dp=2 zero=1"
    func.func @train_step(%w: tensor<64x32xf32> {weft.param = "fc.weight",
                            weft.sharding = #weft.sharding<[{}, {} ]>},
                          %m: tensor<64x32xf32> {weft.state = "exp_avg.fc.weight",
                            weft.sharding = #weft.sharding<[{dp}, {} ]>},
                          %x: tensor<8x32xf32> {weft.input = "input",
                            weft.sharding = #weft.sharding<[{dp}, {} ]>}, ...)
    ```

    With a `tp` axis, parameters get their tensor-parallel layout: those
    `shard` names as given, the others as Megatron-LM splits them, found by
    propagation on @forward (`tp-plan=megatron`; `manual`: replicated);
    optimizer state follows its parameter, ZeRO adds dp on top. Weight
    gradients are marked `weft.prefer` with their parameter's tp layout,
    and slices of a parameter the plan splits (a fused projection's parts)
    get a `weft.shard_as`. `sequence-parallel` puts a `weft.shard_as`
    splitting the sequence over tp before every layer norm.

    Errors: a mesh that does not parse or names an axis other than `dp`
    and `tp`, or one twice; a step that is already partitioned; a batch
    that does not divide by dp (or, with accumulation, a micro-batch that
    does not); `zero` outside 0..3 or without dp; `sequence-parallel` or
    `shard` without tp; a `shard` entry that does not parse, matches no
    parameter, names an axis other than tp, or does not divide.
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "Mesh axes and sizes, e.g. dp=4">,
    Option<"zero", "zero", "int64_t", /*default=*/"0",
           "ZeRO stage over dp: 1 optimizer state, 2 and gradients, 3 and "
           "parameters">,
    ListOption<"shard", "shard", "std::string",
               "Parameter layouts over tp, NAME=LAYOUT (NAME may use * and "
               "?): 'h.*.mlp.c_fc.weight=[{tp}, {}]', or NAME=replicated">,
    Option<"tpPlan", "tp-plan", "std::string", /*default=*/"\"megatron\"",
           "How parameters not given by shard are split over tp: megatron "
           "(column- then row-parallel, found by propagation) or manual "
           "(replicated)">,
    Option<"sequenceParallel", "sequence-parallel", "bool",
           /*default=*/"false",
           "Split layer norms, dropout and residuals over the sequence on "
           "the tp ranks (Megatron sequence parallelism)">,
    Option<"entry", "entry", "std::string", /*default=*/"\"train_step\"",
           "The step function">
  ];
  let dependentDialects = ["weft::WeftDialect"];
}

def PropagateShardingsPass : Pass<"weft-propagate-shardings",
                                  "mlir::ModuleOp"> {
  let summary = "Give every value of the step a sharding";
  let description = [{
    Spreads the shardings fixed on the step's arguments and by
    `weft.shard_as` through every op's ShardingRuleOpInterface, forward and
    backward, until nothing changes; records each op's result shardings as
    `weft.shardings`. A mesh axis assigned to a factor of an op splits every
    dimension made of that factor; an axis splits at most one factor per
    op; a factor is split only when its size divides. Splitting a sum
    factor (a matmul's contraction over the batch, a reduction over it)
    leaves the result partial. A partial value consumed by an op that is
    not linear in it is resolved once, into the most split layout its users
    want (a gradient that the ZeRO update wants split is reduce-scattered,
    also for the norm of global-norm clipping).

    ```mlir
    %g = weft.matmul %x, %dy {transpose_lhs = true,
                              weft.shardings = [#weft.sharding<[{}, {} ], partial = [dp]>]}
        : (tensor<8x32xf32>, tensor<8x64xf32>) -> tensor<32x64xf32>
    ```
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"train_step\"",
           "The step function">
  ];
}

def PartitionPass : Pass<"weft-partition", "mlir::ModuleOp"> {
  let summary = "Rewrite the global step into the per-rank step";
  let description = [{
    Gives every value its local (per-rank) type and inserts the collectives
    layouts need where they change: `weft.all_reduce` or
    `weft.reduce_scatter` for partial values, `weft.all_gather` where a
    split dimension is needed whole, `weft.shard_slice` where a whole one
    is needed split, `weft.all_to_all` where a dimension's minor split is
    the next split another dimension needs. Means over a split dimension
    are scaled to their share of the global mean. The step's arguments and results keep their global
    `weft.sharding`, which the runtime reads to place data and checkpoints.

    ```mlir
    // before (global):                      after (per rank, dp=2):
    %g = weft.matmul %x, %dy ...             %g = weft.matmul %x, %dy ...
      -> tensor<32x64xf32>                     : ... -> tensor<32x64xf32>
    %n = weft.mul %g, %c ...                 %r = weft.all_reduce %g {axes = ["dp"]}
                                             %n = weft.mul %r, %c ...
    ```
    Errors: an op whose operand layout cannot be reached (a split that does
    not divide), a value of a type collectives cannot carry.
  }];
  let options = [
    Option<"entry", "entry", "std::string", /*default=*/"\"train_step\"",
           "The step function">
  ];
}

def BucketCollectivesPass : Pass<"weft-bucket-collectives",
                                 "mlir::ModuleOp"> {
  let summary = "Group gradient reductions into buckets that run "
                "while the backward pass goes on";
  let description = [{
    Marks the per-rank step's reductions (`weft.all_reduce`,
    `weft.reduce_scatter`) with `weft.bucket = N`. A bucket is a run of
    reductions of one kind over the same axes, in program order, holding
    at most `bucket-mb` MiB (a bigger one travels alone), whose results
    nothing uses before its last member. --weft-lower-collectives turns a
    bucket into one collective over a flat buffer: each member is copied
    in where it is computed, the collective starts on the runtime's
    communication thread after the last member, and the step waits for it
    only where a result is first used. Reductions are placed right after
    the gradients they reduce, and the optimizer that reads them comes
    after the whole backward pass, so the communication of a bucket
    overlaps the backward computation of the next ones.

    ```mlir
    // --weft-bucket-collectives="bucket-mb=25"
    %gb = weft.all_reduce %0 {axes = ["dp"], weft.bucket = 0 : i64} : tensor<10xf32>
    %gw = weft.all_reduce %1 {axes = ["dp"], weft.bucket = 0 : i64} : tensor<10x16xf32>
    ```

    `bucket-mb=0` leaves every collective unbucketed: each runs where it
    stands and the step waits for it there.
  }];
  let options = [
    Option<"bucketMB", "bucket-mb", "double", /*default=*/"25.0",
           "Most MiB of data one bucket carries; 0 turns bucketing off">
  ];
}

#endif // WEFT_TRANSFORMS_PARALLEL_PASSES_TD
