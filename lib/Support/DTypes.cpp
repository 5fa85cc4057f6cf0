//===- DTypes.cpp - MLIR element types <-> host dtypes --------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Support/DTypes.h"

#include "mlir/IR/BuiltinTypes.h"

using namespace mlir;

std::optional<weft::rt::DType> weft::getDType(Type type) {
  using rt::DType;
  if (type.isF64())
    return DType::F64;
  if (type.isF32())
    return DType::F32;
  if (type.isF16())
    return DType::F16;
  if (type.isBF16())
    return DType::BF16;
  auto integer = dyn_cast<IntegerType>(type);
  if (!integer)
    return std::nullopt;
  if (integer.getWidth() == 1)
    return DType::Bool;
  bool isUnsigned = integer.isUnsigned();
  switch (integer.getWidth()) {
  case 64:
    return isUnsigned ? std::nullopt : std::optional<DType>(DType::I64);
  case 32:
    return isUnsigned ? std::nullopt : std::optional<DType>(DType::I32);
  case 16:
    return isUnsigned ? DType::U16 : DType::I16;
  case 8:
    return isUnsigned ? DType::U8 : DType::I8;
  default:
    return std::nullopt;
  }
}

Type weft::getElementType(MLIRContext *ctx, rt::DType dtype) {
  using rt::DType;
  switch (dtype) {
  case DType::F64:
    return Float64Type::get(ctx);
  case DType::F32:
    return Float32Type::get(ctx);
  case DType::F16:
    return Float16Type::get(ctx);
  case DType::BF16:
    return BFloat16Type::get(ctx);
  case DType::I64:
    return IntegerType::get(ctx, 64);
  case DType::I32:
    return IntegerType::get(ctx, 32);
  case DType::I16:
    return IntegerType::get(ctx, 16);
  case DType::I8:
    return IntegerType::get(ctx, 8);
  case DType::U16:
    return IntegerType::get(ctx, 16, IntegerType::Unsigned);
  case DType::U8:
    return IntegerType::get(ctx, 8, IntegerType::Unsigned);
  case DType::Bool:
    return IntegerType::get(ctx, 1);
  }
  llvm_unreachable("unknown dtype");
}
