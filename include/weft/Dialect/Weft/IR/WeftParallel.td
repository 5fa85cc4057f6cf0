//===- WeftParallel.td - Meshes, shardings, collectives ----*- tablegen -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The vocabulary of the parallel stage (lib/Transforms/Parallel): a mesh of
// named axes, a sharding per tensor, and the collectives the partitioner
// inserts where layouts change. Shardings describe global tensors; once
// --weft-partition has run, values have their per-rank (local) types and
// the collectives below move data between ranks.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_PARALLEL_TD
#define WEFT_PARALLEL_TD

include "weft/Dialect/Weft/IR/WeftBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

class Weft_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<Weft_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def Weft_MeshAttr : Weft_Attr<"Mesh", "mesh"> {
  let summary = "Named axes the devices are arranged on";
  let description = [{
    The device mesh a step is partitioned for, as named axes and their
    sizes, major axis first: rank = ((i_0 * s_1) + i_1) * s_2 + ... .
    Stored on the module as `weft.mesh`.

    ```mlir
    module attributes {weft.mesh = #weft.mesh<dp = 2, tp = 2>} { ... }
    ```
    Constraints: at least one axis; names are unique identifiers; sizes >= 1.
  }];
  let parameters = (ins ArrayRefParameter<"::mlir::StringAttr">:$names,
                        ArrayRefParameter<"int64_t">:$sizes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    /// The size of axis `name`, or 0 when the mesh has no such axis.
    int64_t getAxisSize(::llvm::StringRef name) const;
    /// The number of devices (the product of the axis sizes).
    int64_t getNumDevices() const;
  }];
}

def Weft_ShardingAttr : Weft_Attr<"Sharding", "sharding"> {
  let summary = "How a global tensor is laid out over the mesh";
  let description = [{
    Per dimension, the mesh axes it is split over (major first; `{}`: whole
    on every rank), and the axes over which the tensor is `partial`: each
    rank holds a term of a sum that is still pending over those axes.
    Function arguments and results carry it as `weft.sharding`; ops carry
    one per result as `weft.shardings` after --weft-propagate-shardings.

    ```mlir
    #weft.sharding<[{dp}, {} ]>                 // rows split over dp
    #weft.sharding<[{}, {} ], partial = [dp]>   // a pending sum over dp
    #weft.sharding<[]>                         // a replicated scalar
    ```
    Constraints: an axis appears at most once over all dims and `partial`.
  }];
  let parameters = (ins "::mlir::ArrayAttr":$dims, "::mlir::ArrayAttr":$partial);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
}

// Every collective acts on the per-rank values of a partitioned program and
// names the mesh axes whose groups it spans; all ranks of a group must
// reach it in the same order (the partitioned program is the same on every
// rank, so they do).
class Weft_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Weft_Op<mnemonic, !listconcat(traits, [Pure,
          AllElementTypesMatch<["input", "result"]>])> {
  let results = (outs Weft_FloatTensor:$result);
}

def Weft_AllReduceOp : Weft_CollectiveOp<"all_reduce",
    [AllTypesMatch<["input", "result"]>]> {
  let summary = "Sum over the ranks of the named axes' groups";
  let description = [{
    Resolves a pending (`partial`) sum: every rank of a group ends with the
    sum of the group's inputs.

    ```mlir
    %s = weft.all_reduce %g {axes = ["dp"]} : tensor<64x32xf32>
    ```
    Constraints: `axes` is non-empty.
  }];
  let arguments = (ins Weft_FloatTensor:$input, StrArrayAttr:$axes);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Weft_AllGatherOp : Weft_CollectiveOp<"all_gather"> {
  let summary = "Concatenate the group's blocks along a dimension";
  let description = [{
    Every rank of a group ends with the group's inputs concatenated along
    `dim`, in the order of the ranks' coordinates on `axes`.

    ```mlir
    %w = weft.all_gather %shard {axes = ["dp"], dim = 0 : i64}
        : tensor<32x32xf32> -> tensor<64x32xf32>
    ```
    Constraints: the result's `dim` is the input's times the axes' sizes,
    other dimensions are equal.
  }];
  let arguments = (ins Weft_FloatTensor:$input, StrArrayAttr:$axes,
                       I64Attr:$dim);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Weft_ReduceScatterOp : Weft_CollectiveOp<"reduce_scatter"> {
  let summary = "Sum over the group, each rank keeping its block";
  let description = [{
    Resolves a pending sum into a layout split along `dim`: rank i of the
    group ends with block i of the group's sum.

    ```mlir
    %g = weft.reduce_scatter %partial {axes = ["dp"], dim = 0 : i64}
        : tensor<64x32xf32> -> tensor<32x32xf32>
    ```
    Constraints: the input's `dim` is the result's times the axes' sizes,
    other dimensions are equal.
  }];
  let arguments = (ins Weft_FloatTensor:$input, StrArrayAttr:$axes,
                       I64Attr:$dim);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Weft_AllToAllOp : Weft_CollectiveOp<"all_to_all"> {
  let summary = "Move a split from one dimension to another";
  let description = [{
    Each rank of a group cuts its input into n blocks along `split_dim`
    (n the group's size), sends block j to the group's rank j, and
    concatenates the n blocks it receives, in the order of the ranks'
    coordinates on `axes`, along `concat_dim`. A value split over `axes`
    along `concat_dim` becomes one split over them along `split_dim`:
    what an all_gather along `concat_dim` and a shard_slice along
    `split_dim` compute, but each rank sends only the (n - 1) / n of its
    block that other ranks keep.

    ```mlir
    // Rows split over tp (= 2) become columns split over tp.
    %t = weft.all_to_all %x {axes = ["tp"], split_dim = 1 : i64,
                             concat_dim = 0 : i64}
        : tensor<4x8xf32> -> tensor<8x4xf32>
    ```
    Constraints: `axes` is non-empty; `split_dim` and `concat_dim` are
    different dimensions of both types; the input's `split_dim` is the
    result's times a whole number n, the result's `concat_dim` the input's
    times the same n; other dimensions are equal.
  }];
  let arguments = (ins Weft_FloatTensor:$input, StrArrayAttr:$axes,
                       I64Attr:$split_dim, I64Attr:$concat_dim);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

// Point to point: one rank of a pair sends, the other receives, so unlike
// the collectives above every rank need not reach them. They are not Pure:
// each reads and writes the communication (MemRead and MemWrite on the
// default resource), so no pass erases them as dead or moves one across
// another, and they run in the order the program gives. A token to order
// them would only restate that order.

def Weft_SendOp : Weft_Op<"send", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Give a tensor to another rank (between pipeline stages)";
  let description = [{
    Sends `input` to one rank of this rank's group of `axes`: the one at
    `peer` there (row-major over `axes` in mesh order, as
    `weft.axis_index` numbers them; with one axis, the coordinate on it),
    whose coordinates on the other mesh axes are this rank's own. The
    `weft.recv` on that rank from this one with the same `tag` takes it.
    Blocks until the peer has posted that recv: ranks that all send to
    each other first wait until the runtime's timeout, so a schedule
    orders them (lowered by --weft-lower-collectives to
    `weft_rt_send_f32`).

    ```mlir
    // Stage 0 of a pipeline over pp gives its activations to stage 1.
    weft.send %h {axes = ["pp"], peer = 1 : i64, tag = 7 : i64}
        : tensor<8x32xf32>
    ```
    Constraints: `axes` is non-empty; `peer` >= 0 and, in a module with a
    `weft.mesh`, `axes` are axes of the mesh and `peer` is below the
    product of their sizes; 0 <= `tag` < 2^48. At run time `peer` is not
    this rank, and the recv has the same type.
  }];
  let arguments = (ins Weft_FloatTensor:$input, StrArrayAttr:$axes,
                       I64Attr:$peer, I64Attr:$tag);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Weft_RecvOp : Weft_Op<"recv", [MemoryEffects<[MemRead, MemWrite]>]> {
  let summary = "Take a tensor another rank sends (between pipeline stages)";
  let description = [{
    The tensor that the rank at `peer` in this rank's group of `axes`
    (numbered as for `weft.send`) sends to this one with `tag`. Blocks
    until it has arrived (lowered by --weft-lower-collectives to
    `weft_rt_recv_f32`). As a send blocks until its recv is posted, the
    transfers between two ranks come in the same order in both ranks'
    programs; the tag names each one, so a pair out of order is an error
    naming the tag (a timeout over gloo, a tag mismatch over NCCL), never
    data in the wrong tensor.

    ```mlir
    // Stage 1 of a pipeline over pp takes stage 0's activations.
    %h = weft.recv {axes = ["pp"], peer = 0 : i64, tag = 7 : i64}
        : tensor<8x32xf32>
    ```
    Constraints: as `weft.send`'s on `axes`, `peer` and `tag`. At run time
    the send has the same type; a send and a recv of different sizes fail
    on both ranks.
  }];
  let arguments = (ins StrArrayAttr:$axes, I64Attr:$peer, I64Attr:$tag);
  let results = (outs Weft_FloatTensor:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Weft_ShardSliceOp : Weft_Op<"shard_slice", [Pure,
    AllElementTypesMatch<["input", "result"]>]> {
  let summary = "This rank's block of a tensor it holds whole";
  let description = [{
    Local slicing, no communication: rank i of the axes' group keeps block
    i along `dim`. What a replicated value becomes where a split layout is
    needed (a ZeRO shard of a replicated parameter, a batch split of a
    constant).

    ```mlir
    %p = weft.shard_slice %w {axes = ["dp"], dim = 0 : i64}
        : tensor<64x32xf32> -> tensor<32x32xf32>
    ```
    Constraints: the input's `dim` is the result's times the axes' sizes,
    other dimensions are equal.
  }];
  let arguments = (ins Weft_AnyTensor:$input, StrArrayAttr:$axes,
                       I64Attr:$dim);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
  let hasFolder = 1;
}

def Weft_AxisIndexOp : Weft_Op<"axis_index", [Pure]> {
  let summary = "This rank's coordinate in the group of some mesh axes";
  let description = [{
    Row-major over `axes` (in mesh order): which block of a tensor split
    over them this rank holds. What a per-rank program needs where a value
    depends on the block's place in the whole (a dropout mask over a split
    batch).

    ```mlir
    %i = weft.axis_index {axes = ["dp"]} : tensor<i64>
    ```
    Constraints: at least one axis.
  }];
  let arguments = (ins StrArrayAttr:$axes);
  let results = (outs 0DTensorOf<[I64]>:$result);
  let assemblyFormat = "attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Weft_ShardAsOp : Weft_Op<"shard_as", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "Fixes the sharding of a value (a layout constraint)";
  let description = [{
    The identity on global values whose result has the given sharding:
    propagation does not change it, and --weft-partition replaces the op
    by the reshard it implies. --weft-apply-mesh places these where the
    layout is a decision rather than a consequence (a ZeRO-3 parameter
    gathered for the forward pass, a ZeRO-2 gradient scattered per
    micro-batch).

    ```mlir
    %w = weft.shard_as %p {sharding = #weft.sharding<[{}, {} ]>}
        : tensor<64x32xf32>
    ```
    Constraints: the sharding has one entry per dimension.
  }];
  let arguments = (ins Weft_AnyTensor:$input, Weft_ShardingAttr:$sharding);
  let results = (outs Weft_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

#endif // WEFT_PARALLEL_TD
