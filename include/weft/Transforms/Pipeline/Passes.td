//===- Passes.td - Pipeline-parallel passes ----------------*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TRANSFORMS_PIPELINE_PASSES_TD
#define WEFT_TRANSFORMS_PIPELINE_PASSES_TD

include "mlir/Pass/PassBase.td"

def AssignStagesPass : Pass<"weft-assign-stages", "mlir::ModuleOp"> {
  let summary = "Cut the model's forward pass into pipeline stages";
  let description = [{
    Tags every op of `@forward` with the pipeline stage that runs it
    (`weft.stage = k : i64`, 0 first), and every parameter with the stages
    that read it (`weft.stages = array<i64: ...>`: more than one for a
    parameter tied across stages, such as GPT-2's embedding and head). It
    runs on the model before the training step is built, so the loss, the
    backward pass (--weft-autodiff tags each op it builds with the stage of
    the op it differentiates) and the optimizer inherit the cut.

    Cuts lie between ops, in program order, so a stage is a contiguous
    run of the forward pass. With `cuts` (parameter names or prefixes, one
    per cut: `h.2` starts a stage at the first op reading `h.2.*`) they
    are given; otherwise they are chosen to balance the stages' FLOPs
    (an op's CostOpInterface, else 2·M·N·K for a matrix product, the
    multiply-adds of a convolution, one per result element otherwise) among the places where the fewest bytes cross (the
    boundaries between layers, where only the residual stream is live),
    the way a person would cut by hand. The summary of each stage (ops,
    GFLOP, parameters, bytes sent on) is recorded on the module as
    `weft.pipeline_stages` for the plan a user reads.

    ```mlir
    // --weft-assign-stages="stages=2"
    %h = weft.matmul %x, %w0 {weft.stage = 0 : i64} ...
    %y = weft.matmul %h, %w1 {weft.stage = 1 : i64} ...
    ```
    With `blocks-per-stage` (what weftc --plan passes from the plan's
    `blocks_per_stage`) the stages are cut between the numbered layers the
    planner costed (the layers in order of the first number in their
    parameters' names): the compiled stages are the plan's.

    Errors: `stages` < 1, or more stages than the forward pass has places
    to cut; `blocks-per-stage` whose count is not `stages` or whose sum is
    not the model's number of numbered layers; a `cuts` entry that names no parameter, cuts out of program
    order, or a count of cuts that is not `stages` - 1; a module that is
    already a training step (stages are cut on the model).
  }];
  let options = [
    Option<"stages", "stages", "int64_t", /*default=*/"0",
           "Number of pipeline stages (0: one more than the cuts given)">,
    ListOption<"cuts", "cuts", "std::string",
               "Parameter names (or name prefixes) that start stages 1..N-1">,
    ListOption<"blocksPerStage", "blocks-per-stage", "int64_t",
               "Numbered layers per stage, in order (a plan's "
               "blocks_per_stage): stage s starts at the first op reading a "
               "parameter of its first layer (layers by the first number in "
               "their parameters' names, h.3.*, layers.12.*)">
  ];
  let dependentDialects = ["weft::WeftDialect"];
}

def SplitStagesPass : Pass<"weft-split-stages", "mlir::ModuleOp"> {
  let summary = "Split the gradient function into per-stage pieces";
  let description = [{
    After --weft-autodiff, cuts `function` (the loss-and-gradient function,
    one micro-batch's work) into the pieces a pipeline schedule runs: the
    forward work of each stage, `@<function>.forward<s>`, and its backward
    work, `@<function>.backward<s>`. An op's stage is its `weft.stage` (an
    op without one, such as the loss --weft-attach-loss adds after the
    cut, runs on the last stage); it is forward work when the loss depends
    on it. A piece takes what it reads from outside it (parameters, batch
    inputs, what other pieces make: the activations and gradients that
    cross stages, and what its forward piece kept for its backward piece)
    and returns what others read. Constants are copied into each piece that
    uses them.

    With `split-backward` (for zero-bubble schedules) each backward piece
    is cut in two: `@<function>.input_grad<s>`, what the gradient sent to
    the previous stage needs, and `@<function>.weight_grad<s>`, the rest
    (the weight gradients), which may run later.

    `function` itself becomes the pieces called in a pipeline's order
    (forward 0 .. N-1, then backward N-1 .. 0), so it computes what it did:
    the pieces are the schedule's units of work and the calls are a
    one-micro-batch schedule.

    ```mlir
    func.func @loss_grad(...) {
      %h, %r0 = call @loss_grad.forward0(%w0, %x) ...
      %loss, %r1 = call @loss_grad.forward1(%w1, %h) ...
      %dh, %g1 = call @loss_grad.backward1(%w1, %r1) ...
      %g0 = call @loss_grad.backward0(%dh, %r0) ...
      return %loss, %g0, %g1 ...
    }
    ```
    Errors: a value that would flow against that order (a forward piece
    reading backward work, or a stage's backward piece reading a lower
    stage's), naming both ops and their stages.
  }];
  let options = [
    Option<"function", "function", "std::string", /*default=*/"\"loss_grad\"",
           "The gradient function to split">,
    Option<"splitBackward", "split-backward", "bool", /*default=*/"false",
           "Cut each backward piece into input- and weight-gradient pieces">
  ];
  let dependentDialects = ["weft::WeftDialect", "mlir::func::FuncDialect"];
}

def PipelineStepPass : Pass<"weft-pipeline-step", "mlir::ModuleOp"> {
  let summary = "One training step per pipeline rank, its work in schedule order";
  let description = [{
    After --weft-split-stages (the gradient function is per-stage pieces)
    and --weft-optimizer (`@train_step` calls it once per micro-batch and
    updates the parameters), builds `@train_step.rank<r>` for each of
    `ranks` pipeline ranks: the pieces of the stages rank r runs (stage
    `chunk * ranks + r` for each of `virtual-stages` chunks), for every
    micro-batch, in the order `schedule` gives (docs/pipeline.md), with a
    `weft.send` / `weft.recv` over the `pp` axis wherever a value crosses
    ranks (an activation forward, its gradient backward, the share of a
    tied parameter's gradient), then the optimizer's update of that rank's
    parameters. The last micro-batch's backward piece of a stage runs as a
    copy, `<piece>.accumulate`, that also takes the running sums of the
    earlier micro-batches' gradients and returns the finished sums, each
    added right after its gradient: laid out over dp, a gradient's
    reduction then starts inside that backward (docs/pipeline.md). Each
    rank's function takes and returns only its own
    parameters, optimizer state and the batch inputs it reads; the last
    stage's rank returns the loss. The schedule is verified first (every
    send meets its receive in an order that cannot deadlock); the
    functions record it as `weft.schedule` (one entry per action, e.g.
    "rank 0 (stage 0) runs F of micro-batch 3"), and the most bytes of
    values each holds at once as `weft.peak_live_bytes` (mostly the
    activations its forward pieces keep for its backward pieces: a
    schedule's memory). `@train_step` stays: the one-rank step every
    rank's work adds up to.

    Errors: a schedule the verifier refuses (naming ranks, stages and the
    micro-batch), a stage count that is not `ranks * virtual-stages`, an
    optimizer step that reads parameters of several stages at once
    (gradient clipping by the global norm), a module without the pieces.
  }];
  let options = [
    Option<"ranks", "ranks", "int64_t", /*default=*/"1",
           "Pipeline ranks (the pp axis)">,
    Option<"schedule", "schedule", "std::string", /*default=*/"\"1f1b\"",
           "gpipe, 1f1b, interleaved or zero-bubble">,
    Option<"virtualStages", "virtual-stages", "int64_t", /*default=*/"1",
           "Stages per rank (interleaved)">
  ];
  let dependentDialects = ["weft::WeftDialect", "mlir::func::FuncDialect"];
}

def VerifyPipelinePass : Pass<"weft-verify-pipeline", "mlir::ModuleOp"> {
  let summary = "Check that the pipeline ranks' sends and receives meet";
  let description = [{
    Runs the sends and receives of every `@train_step.rank<r>` (functions
    with `weft.pipeline_rank`) in program order as the runtime does: a
    send never waits (the runtime's sender thread carries a copy), a
    receive waits until its peer has sent that tag. A receive whose tag
    the peer never sends while it sent another, a type that differs, a
    send never received, or ranks that wait on each other, is an error
    naming the ranks, the tags and what each message carries
    (`weft.message`); --weft-pipeline-step runs the same check on what it
    builds, and puts each rank's sends after the schedule before its
    receives, so that a swap crosses both ways at once.
  }];
}

#endif // WEFT_TRANSFORMS_PIPELINE_PASSES_TD
