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
#include <string>
#include <utility>
#include <vector>

namespace weft {
namespace rt {

/// The manifest's "format_version"; readers refuse newer versions.
constexpr int kCheckpointFormatVersion = 1;

/// A tensor saved from, or restored into, a live buffer of the run.
struct CheckpointTensor {
  std::string name;
  /// "param", "state" or "buffer".
  std::string kind;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  /// Holds the tensor's dense bytes: read when saving, overwritten when
  /// restoring.
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
Status prepareCheckpointDir(const std::string &dir);

/// Writes checkpoint `meta.step` of `tensors` into `dir` (created if
/// needed), replacing one of the same step, then deletes all but the newest
/// `keep` checkpoints. `path` receives the checkpoint's directory.
Status writeCheckpoint(const std::string &dir, const CheckpointMeta &meta,
                       const std::vector<CheckpointTensor> &tensors, int keep,
                       std::string &path);

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

/// A checkpoint read back whole, without the model that wrote it.
struct StoredCheckpoint {
  /// The checkpoint's directory.
  std::string path;
  CheckpointMeta meta;
  struct Tensor {
    std::string name;
    /// "param", "state" or "buffer".
    std::string kind;
    HostArray array;
  };
  /// In the manifest's order.
  std::vector<Tensor> tensors;
  /// Damaged newer checkpoints that were skipped, one line each.
  std::vector<std::string> warnings;
};

/// Reads checkpoint `path`, or, when `path` is a folder of checkpoints, its
/// newest usable one, checking the manifest, the size and checksum of its
/// tensors and that they are what the manifest lists. Nothing is moved or
/// deleted (unlike restoreLatestCheckpoint).
Status readCheckpoint(const std::string &path, StoredCheckpoint &out);

} // namespace rt
} // namespace weft

#endif // WEFT_RUNTIME_CHECKPOINT_H
