//===- Checkpoint.h - Crash-safe training checkpoints -----------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// A checkpoint directory holds one subdirectory per checkpoint:
//
//   DIR/step-00000040/model.safetensors   params, state and buffers
//   DIR/step-00000040/manifest.json       step, tensors, data loader state,
//                                         model JSON, checksum, version
//
// A run on a mesh writes a sharded checkpoint instead (format version 2,
// or 3 when a view-shaped tensor's blocks are boxes inside part entries):
//
//   DIR/step-00000040/rank-00001-of-00002.safetensors   rank 1's blocks
//   DIR/step-00000040/rank-00001-of-00002.json          their size, checksum
//   DIR/step-00000040/manifest.json   mesh, global shapes, layouts, and
//                                     which file holds which block
//
// Every rank writes its own part; rank 0 waits for the others' and commits
// the manifest last. Loading reshards: any mesh's checkpoint loads under
// any other mesh (or none), each rank reading only the blocks it needs.
//
// A checkpoint is assembled in DIR/.tmp-step-00000040, fsynced (files and
// directory) and renamed into place, so DIR only ever holds complete
// checkpoints; older ones are deleted only after the new one is durable.
// Restoring takes the newest checkpoint that verifies, warning about (and
// setting aside) damaged newer ones; a checkpoint of a different model is
// an error, never silently skipped.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_RUNTIME_CHECKPOINT_H
#define WEFT_RUNTIME_CHECKPOINT_H

#include "weft/Formats/HostArray.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace weft {
namespace rt {

/// The newest manifest "format_version" this runtime reads; readers refuse
/// newer versions. A sharded checkpoint is written as version 3 only when
/// some block is a box inside a bigger part entry ("at", "entry_shape":
/// a tensor the step holds in a view shape), which version 2 readers would
/// misread; otherwise as kShardedCheckpointFormatVersion.
constexpr int kCheckpointFormatVersion = 3;
/// The version of a sharded checkpoint (a part per rank) whose blocks are
/// each a whole part entry.
constexpr int kShardedCheckpointFormatVersion = 2;
/// The version a run without a mesh writes (one safetensors file), so that
/// runtimes from before meshes still read it.
constexpr int kSingleFileCheckpointFormatVersion = 1;

/// How the run's tensors are split over its device mesh: the model JSON's
/// "mesh" and "shardings". A tensor not in `shardings` is replicated (every
/// rank holds it whole).
struct ShardLayout {
  struct Axis {
    std::string name;
    int64_t size = 1;
  };
  struct Split {
    /// The shape the step holds the tensor in (a view, when `storedShape`
    /// is set), which `dims` split.
    std::vector<int64_t> globalShape;
    /// Per dimension, the mesh axes it is split over, major first.
    std::vector<std::vector<std::string>> dims;
    /// The shape outside the step (weights image, checkpoints): the same
    /// row-major elements, each dim a run of consecutive `globalShape`
    /// dims merged. Empty: `globalShape`.
    std::vector<int64_t> storedShape;
  };
  /// One box of a rank's block in stored coordinates.
  struct Box {
    /// Its first element in the stored global tensor.
    std::vector<int64_t> offsets;
    std::vector<int64_t> shape;
    /// Its first element in the rank's local tensor viewed with
    /// StoredBlock::localShape.
    std::vector<int64_t> localOffsets;
  };
  /// A rank's block of a tensor in stored coordinates. Splitting a view dim
  /// that is merged with outer dims in the stored shape makes the block
  /// strided there, so it is a list of boxes (without a view, or when the
  /// split dims are outermost in their runs, one box: the block).
  struct StoredBlock {
    /// The stored global shape.
    std::vector<int64_t> globalShape;
    /// The rank's local tensor (its row-major bytes) in stored rank: each
    /// run of view dims merged like the stored shape's.
    std::vector<int64_t> localShape;
    /// Row-major over the stored dims; disjoint, together the block.
    std::vector<Box> boxes;
  };
  /// Major axis first; empty without a mesh.
  std::vector<Axis> mesh;
  std::map<std::string, Split> shardings;
  /// A pipeline's tensors by the coordinate on the "pp" axis of the rank
  /// that stores them (its stage's; another rank's holds none of them, or
  /// a copy of a tied parameter). A tensor not listed is on every pp rank.
  std::map<std::string, int64_t> pipelineRank;

  /// Ranks of the mesh: the product of its axis sizes (1 without a mesh).
  int64_t numRanks() const;
  /// "dp=2,tp=4"; "none" without a mesh.
  std::string describeMesh() const;
  /// Where rank `rank`'s block of tensor `name` lies in the global tensor:
  /// `offsets` (its first element) and `globalShape`. `localShape` is the
  /// block's shape, checked against the split (an error names the tensor).
  /// A replicated tensor's block is the whole tensor.
  Status blockOf(const std::string &name,
                 const std::vector<int64_t> &localShape, int64_t rank,
                 std::vector<int64_t> &offsets,
                 std::vector<int64_t> &globalShape) const;
  /// Rank `rank`'s block of tensor `name` in stored coordinates: the
  /// boxes of the stored tensor it holds and where each lies in its local
  /// tensor. `localShape` is the step's (view) shape, checked as blockOf
  /// does. A tensor without a stored shape gets one box, blockOf's block.
  Status storedBlockOf(const std::string &name,
                       const std::vector<int64_t> &localShape, int64_t rank,
                       StoredBlock &out) const;
  /// Whether `rank` is the one that stores `name`'s block in a checkpoint:
  /// among the ranks holding the same block (those differing only on axes
  /// that do not split it), the one at coordinate 0 on those axes; on the
  /// "pp" axis, at the coordinate `pipelineRank` gives it.
  bool storesBlock(const std::string &name, int64_t rank) const;
};

/// Reads "mesh" and "shardings" from a model JSON into `out` (empty when it
/// has neither). Errors name the key or tensor that is malformed.
Status parseShardLayout(const std::string &modelJson, ShardLayout &out);

/// For a tensor stored as `storedShape` and viewed as `viewShape` (the same
/// row-major elements), which view dims make up each stored dim: stored
/// dim j is view dims [runs[j], runs[j + 1]) (possibly none, for a size-1
/// stored dim). Returns what is wrong ("has N elements but ...", "is not a
/// merge of consecutive dims of ..."), or an empty string.
std::string storedDimRuns(const std::vector<int64_t> &storedShape,
                          const std::vector<int64_t> &viewShape,
                          std::vector<size_t> &runs);

/// Copies the box of shape `box` starting at `srcStart` in the dense
/// row-major array `src` of shape `srcShape` to `dstStart` in `dst` of
/// shape `dstShape` (elements of `elemSize` bytes).
void copyBox(const uint8_t *src, const std::vector<int64_t> &srcShape,
             const std::vector<int64_t> &srcStart, uint8_t *dst,
             const std::vector<int64_t> &dstShape,
             const std::vector<int64_t> &dstStart,
             const std::vector<int64_t> &box, size_t elemSize);

/// A tensor saved from, or restored into, a live buffer of the run.
struct CheckpointTensor {
  std::string name;
  /// "param", "state" or "buffer".
  std::string kind;
  DType dtype = DType::F32;
  /// The rank's (local) shape: its block of a sharded tensor.
  std::vector<int64_t> shape;
  /// Holds the tensor's dense bytes: read when saving, overwritten when
  /// restoring. Null for a tensor another pipeline rank holds: it is
  /// described (to the manifest, and checked against a checkpoint) but
  /// neither saved nor restored here.
  void *data = nullptr;
};

/// What a checkpoint records besides its tensors.
struct CheckpointMeta {
  /// Completed steps: the run resumes with step index `step`.
  int64_t step = 0;
  /// DataLoaderState::toJson() text.
  std::string dataLoaderState = "{}";
  /// The compiled model's description (WeftModel::modelJson).
  std::string modelJson;
};

/// "step-00000040".
std::string checkpointName(int64_t step);

/// The checkpoints in `dir` as (step, path), newest first. A missing
/// directory has none.
std::vector<std::pair<int64_t, std::string>>
listCheckpoints(const std::string &dir);

/// Creates `dir` if needed, checks that it is writable, and removes what
/// an interrupted writeCheckpoint left behind (`.tmp-step-*`, `.old-step-*`).
/// Called before training so that a bad directory fails the run at once.
/// Only rank 0 removes leftovers: on a mesh the other ranks may already be
/// writing parts, and no rank writes one before every rank has started.
Status prepareCheckpointDir(const std::string &dir, int64_t rank = 0);

/// Writes checkpoint `meta.step` of `tensors` into `dir` (created if
/// needed), replacing one of the same step, then deletes all but the newest
/// `keep` checkpoints. `path` receives the checkpoint's directory.
Status writeCheckpoint(const std::string &dir, const CheckpointMeta &meta,
                       const std::vector<CheckpointTensor> &tensors, int keep,
                       std::string &path);

/// How long rank 0 waits for the other ranks' parts of a sharded checkpoint
/// by default.
constexpr double kShardedCheckpointWaitSeconds = 600;

/// Writes rank `rank`'s part of sharded checkpoint `meta.step`: the blocks
/// of `tensors` (local shapes, split as `layout` says) that this rank
/// stores, to `DIR/.tmp-step-N/rank-R-of-W.safetensors` with its size and
/// checksum beside it, each written to a temporary name, fsynced and
/// renamed. Rank 0 then waits up to `waitSeconds` for every other rank's
/// part, writes the manifest, renames the folder to `step-N` (replacing
/// one of the same step) and keeps the newest `keep`; other ranks return
/// once their part is durable. `world` must be `layout.numRanks()`. With
/// no mesh this is the single-file writeCheckpoint above. The checkpoint
/// folder must be one file system shared by all ranks.
Status writeCheckpoint(const std::string &dir, const CheckpointMeta &meta,
                       const std::vector<CheckpointTensor> &tensors,
                       const ShardLayout &layout, int64_t rank, int64_t world,
                       int keep, std::string &path,
                       double waitSeconds = kShardedCheckpointWaitSeconds);

/// The outcome of restoreLatestCheckpoint.
struct RestoreResult {
  /// False when `dir` holds no checkpoint (a fresh run).
  bool found = false;
  std::string path;
  CheckpointMeta meta;
  /// Damaged checkpoints that were skipped and what is wrong with them,
  /// and other things the user should know; one line each.
  std::vector<std::string> warnings;
};

/// Restores the newest usable checkpoint in `dir` into `tensors`, which
/// describe the compiled model. A checkpoint is usable when its manifest
/// parses, its safetensors file matches the manifest's checksum and holds
/// every tensor. Unusable checkpoints newer than the one restored are
/// renamed to `corrupt-step-...` so they are neither retried nor counted.
/// Errors: a checkpoint of another model (the first tensor that differs),
/// one of a newer format, or checkpoints that exist but none is usable.
Status restoreLatestCheckpoint(const std::string &dir,
                               const std::vector<CheckpointTensor> &tensors,
                               const std::string &modelJson,
                               RestoreResult &result);

/// The same for rank `rank` of a run split as `layout`: each tensor's
/// block is assembled from whatever blocks the checkpoint holds, whichever
/// mesh wrote it (concatenating shards, slicing whole tensors). Global
/// shapes are compared with the model's. Every rank verifies every part,
/// so all ranks reach the same decision without talking to each other;
/// only rank 0 moves damaged checkpoints aside.
Status restoreLatestCheckpoint(const std::string &dir,
                               const std::vector<CheckpointTensor> &tensors,
                               const ShardLayout &layout, int64_t rank,
                               const std::string &modelJson,
                               RestoreResult &result);

/// A checkpoint read back whole, without the model that wrote it.
struct StoredCheckpoint {
  /// The checkpoint's directory.
  std::string path;
  CheckpointMeta meta;
  /// The mesh that wrote it (empty for a single-process checkpoint).
  std::vector<ShardLayout::Axis> mesh;
  /// Files holding tensor data.
  int numFiles = 1;
  struct Tensor {
    std::string name;
    /// "param", "state" or "buffer".
    std::string kind;
    /// The global tensor, assembled from its blocks.
    HostArray array;
    /// Per dimension, the mesh axes it was split over (empty when stored
    /// whole); dims of `viewShape` when that is set.
    std::vector<std::vector<std::string>> dims;
    /// The shape the run held it in when that was a view of its stored
    /// shape; empty otherwise.
    std::vector<int64_t> viewShape;
    /// Blocks it was stored in: the part files holding some of it.
    int numBlocks = 1;
  };
  /// In the manifest's order.
  std::vector<Tensor> tensors;
  /// Damaged newer checkpoints that were skipped, one line each.
  std::vector<std::string> warnings;
};

/// Reads checkpoint `path`, or, when `path` is a folder of checkpoints, its
/// newest usable one, checking the manifest, the size and checksum of its
/// tensors and that they are what the manifest lists. Sharded checkpoints
/// are assembled into global tensors. Nothing is moved or deleted (unlike
/// restoreLatestCheckpoint).
Status readCheckpoint(const std::string &path, StoredCheckpoint &out);

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_CHECKPOINT_H
