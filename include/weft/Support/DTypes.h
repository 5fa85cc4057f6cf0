//===- DTypes.h - MLIR element types <-> host dtypes --------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// The one mapping between MLIR element types and the dtypes of host arrays,
// .npy/safetensors files and the runtime ABI. Callers that widen (the
// importer's narrow integer constants, the evaluator's exotic floats) do so
// on top of it.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_SUPPORT_DTYPES_H
#define WEFT_SUPPORT_DTYPES_H

#include "weft/Formats/HostArray.h"

#include "mlir/IR/Types.h"

#include <optional>

namespace weft {

/// The dtype holding `elementType` exactly: f64, f32, f16, bf16, signless
/// i64/i32/i16/i8, unsigned ui16/ui8, and i1 as Bool; nullopt otherwise.
std::optional<rt::DType> getDType(mlir::Type elementType);

/// The element type of `dtype` (U16/U8 as unsigned integers).
mlir::Type getElementType(mlir::MLIRContext *context, rt::DType dtype);

} // namespace weft

#endif // WEFT_SUPPORT_DTYPES_H
