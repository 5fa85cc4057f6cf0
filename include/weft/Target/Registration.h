//===- Registration.h - Dialects the code generator uses ----------*- C++
//-*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_TARGET_REGISTRATION_H
#define WEFT_TARGET_REGISTRATION_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace weft {

/// Registers the upstream dialects between linalg on tensors and the LLVM
/// dialect (linalg, tensor, scf, memref, bufferization, arith, math, affine,
/// cf, llvm) with the external interface models that tiling and
/// bufferization need, and the LLVM IR translations of builtin and llvm.
void registerCodegenDialects(mlir::DialectRegistry &registry);

} // namespace weft

#endif // WEFT_TARGET_REGISTRATION_H
