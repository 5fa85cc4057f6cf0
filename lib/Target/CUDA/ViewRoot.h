//===- ViewRoot.h - The buffer a memref value views -------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_LIB_TARGET_CUDA_VIEWROOT_H
#define WEFT_LIB_TARGET_CUDA_VIEWROOT_H

#include "mlir/Interfaces/ViewLikeInterface.h"

namespace weft::cuda {

/// The function argument or other root a memref value is a view of
/// (through subviews, views, reshapes).
inline mlir::Value viewRoot(mlir::Value v) {
  while (mlir::Operation *def = v.getDefiningOp()) {
    auto view = llvm::dyn_cast<mlir::ViewLikeOpInterface>(def);
    if (!view)
      break;
    v = view.getViewSource();
  }
  return v;
}

} // namespace weft::cuda

#endif // WEFT_LIB_TARGET_CUDA_VIEWROOT_H
