//===- Passes.h - Pipeline-parallel passes ----------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TRANSFORMS_PIPELINE_PASSES_H
#define WEFT_TRANSFORMS_PIPELINE_PASSES_H

#include "weft/Dialect/Weft/IR/WeftDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/Pass/Pass.h"

namespace weft {

/// On an op: the pipeline stage that runs it. On a parameter: the stages
/// that read it (array<i64>).
inline constexpr llvm::StringLiteral kStageAttrName =
    WeftDialect::kStageAttrName;
inline constexpr llvm::StringLiteral kStagesAttrName = "weft.stages";
/// On the module: one dictionary per stage (ops, flops, params, bytes
/// sent on to the next stage).
inline constexpr llvm::StringLiteral kPipelineStagesAttrName =
    "weft.pipeline_stages";

/// On a weft.send / weft.recv of a pipeline rank's step: what it carries,
/// for errors ("an activation of micro-batch 3 from stage 0").
inline constexpr llvm::StringLiteral kMessageAttrName = "weft.message";

/// Checks that the sends and receives of the pipeline ranks' steps
/// (functions with `weft.pipeline_rank`) meet: run in order, each rank
/// blocking on every transfer until its peer reaches the matching one
/// (same tag, same type), every rank finishes. A transfer that meets the
/// wrong one, or a set of ranks waiting on each other, is an error that
/// names the ranks, the tags and what each message carries.
mlir::LogicalResult verifyPipelineTransfers(mlir::ModuleOp module);

/// Bytes a statically shaped tensor of `type` occupies (an i1 element in
/// a byte, as buffers hold it); 0 for anything else. What stages send and
/// what a rank holds are both counted with it.
inline int64_t staticTensorBytes(mlir::Type type) {
  auto t = llvm::dyn_cast<mlir::RankedTensorType>(type);
  if (!t || !t.hasStaticShape())
    return 0;
  return t.getNumElements() * int64_t((t.getElementTypeBitWidth() + 7) / 8);
}

#define GEN_PASS_DECL
#include "weft/Transforms/Pipeline/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "weft/Transforms/Pipeline/Passes.h.inc"

} // namespace weft

#endif // WEFT_TRANSFORMS_PIPELINE_PASSES_H
