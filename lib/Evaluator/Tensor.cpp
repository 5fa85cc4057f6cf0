//===- Tensor.cpp - Evaluator values and their conversions ----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Values enter the evaluator from IR constants and host arrays (.npy inputs,
// weights) and leave it as attributes and host arrays. Every float is held
// as a double already rounded to its element type, so these conversions are
// where rounding and range checks live, together with the index arithmetic
// the op families share.
//
//===----------------------------------------------------------------------===//

#include "EvaluatorInternal.h"
#include "weft/Support/DTypes.h"

#include "mlir/IR/BuiltinDialect.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/DialectResourceBlobManager.h"
#include "llvm/ADT/APFloat.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/MathExtras.h"
#include "llvm/Support/raw_ostream.h"

#include <cstring>
#include <limits>

using namespace mlir;
using namespace weft;
using namespace weft::eval;
using namespace weft::eval::detail;

//===----------------------------------------------------------------------===//
// Rounding
//===----------------------------------------------------------------------===//

double weft::eval::detail::roundNarrow(double v, int mantissaBits,
                                       int minExponent, double maxFinite) {
  if (!std::isfinite(v) || v == 0)
    return v;
  double a = std::fabs(v);
  int binade;
  std::frexp(a, &binade);
  // `a` lies in [2^(binade-1), 2^binade); below the smallest normal exponent
  // the spacing of representable values stops shrinking (subnormals).
  int exponent = std::max(binade - 1, minExponent);
  int quantumExp = exponent - mantissaBits;
  // Scaling by a power of two and splitting off the fraction are exact, and
  // the explicit tie test makes the result independent of the FPU rounding
  // mode.
  double scaled = std::ldexp(a, -quantumExp);
  double whole = std::floor(scaled);
  double frac = scaled - whole;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(whole, 2.0) != 0))
    whole += 1;
  double r = std::ldexp(whole, quantumExp);
  if (r > maxFinite)
    r = std::numeric_limits<double>::infinity();
  return std::copysign(r, v);
}

double eval::roundToFloat(FloatType type, double v) {
  if (type.isF64())
    return v;
  if (type.isF32())
    return static_cast<double>(static_cast<float>(v));
  if (type.isBF16() || type.isF16())
    return Rounder(type)(v);
  llvm::APFloat f(v);
  bool losesInfo;
  f.convert(type.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
            &losesInfo);
  return f.convertToDouble();
}

int64_t eval::wrapToInteger(IntegerType type, int64_t v) {
  unsigned width = type.getWidth();
  if (width >= 64)
    return v;
  if (width == 1)
    return v & 1;
  if (type.isUnsigned())
    return static_cast<int64_t>(static_cast<uint64_t>(v) &
                                ((uint64_t(1) << width) - 1));
  return llvm::SignExtend64(static_cast<uint64_t>(v), width);
}

Rounder::Rounder(Type elementType) {
  type = dyn_cast<FloatType>(elementType);
  if (!type || type.isF64())
    kind = Kind::F64;
  else if (type.isF32())
    kind = Kind::F32;
  else if (type.isBF16())
    kind = Kind::BF16;
  else if (type.isF16())
    kind = Kind::F16;
  else
    kind = Kind::Other;
}

Wrapper::Wrapper(Type elementType) {
  type = dyn_cast<IntegerType>(elementType);
  if (type)
    width = type.getWidth();
}

//===----------------------------------------------------------------------===//
// Index arithmetic
//===----------------------------------------------------------------------===//

int64_t weft::eval::detail::product(ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

SmallVector<int64_t> weft::eval::detail::stridesOf(ArrayRef<int64_t> shape) {
  SmallVector<int64_t> strides(shape.size(), 1);
  for (int64_t d = static_cast<int64_t>(shape.size()) - 2; d >= 0; --d)
    strides[d] = strides[d + 1] * shape[d + 1];
  return strides;
}

std::vector<int64_t>
weft::eval::detail::stridedOffsets(ArrayRef<int64_t> shape,
                                   ArrayRef<int64_t> strides, int64_t base) {
  int64_t n = product(shape);
  std::vector<int64_t> offsets(n);
  if (n == 0)
    return offsets;
  int64_t rank = static_cast<int64_t>(shape.size());
  SmallVector<int64_t> index(rank, 0);
  int64_t offset = base;
  for (int64_t i = 0; i < n; ++i) {
    offsets[i] = offset;
    // Advance the odometer: bump the last axis, carrying into earlier ones.
    for (int64_t d = rank - 1; d >= 0; --d) {
      offset += strides[d];
      if (++index[d] < shape[d])
        break;
      offset -= strides[d] * shape[d];
      index[d] = 0;
    }
  }
  return offsets;
}

std::vector<int64_t>
weft::eval::detail::broadcastOffsets(ArrayRef<int64_t> result,
                                     ArrayRef<int64_t> source) {
  assert(result.size() >= source.size() && "source has a larger rank");
  size_t lead = result.size() - source.size();
  SmallVector<int64_t> sourceStrides = stridesOf(source);
  // Missing leading axes and stretched size-1 axes do not move in `source`.
  SmallVector<int64_t> strides(result.size(), 0);
  for (size_t d = 0; d < source.size(); ++d)
    if (source[d] != 1)
      strides[lead + d] = sourceStrides[d];
  return stridedOffsets(result, strides);
}

Tensor weft::eval::detail::takeElements(const Tensor &source,
                                        RankedTensorType type,
                                        ArrayRef<int64_t> offsets) {
  Tensor result = Tensor::zeros(type);
  assert(static_cast<int64_t>(offsets.size()) == result.numElements());
  if (source.isFloat())
    for (size_t i = 0, e = offsets.size(); i < e; ++i)
      result.fp[i] = source.fp[offsets[i]];
  else
    for (size_t i = 0, e = offsets.size(); i < e; ++i)
      result.ints[i] = source.ints[offsets[i]];
  return result;
}

Tensor weft::eval::detail::resultFor(Operation *op, unsigned index) {
  return Tensor::zeros(cast<RankedTensorType>(op->getResult(index).getType()));
}

//===----------------------------------------------------------------------===//
// Tensor
//===----------------------------------------------------------------------===//

int64_t Tensor::numElements() const { return product(shape); }

RankedTensorType Tensor::getType() const {
  return RankedTensorType::get(shape, elementType);
}

Tensor Tensor::zeros(RankedTensorType type) {
  Tensor t;
  t.elementType = type.getElementType();
  t.shape.assign(type.getShape().begin(), type.getShape().end());
  if (t.isFloat())
    t.fp.assign(t.numElements(), 0.0);
  else
    t.ints.assign(t.numElements(), 0);
  return t;
}

namespace {
/// i1 and unsigned integers are stored zero-extended, the rest sign-extended.
int64_t intFromAPInt(const llvm::APInt &v, IntegerType type) {
  if (type.getWidth() == 1 || type.isUnsigned())
    return static_cast<int64_t>(v.getZExtValue());
  return v.getSExtValue();
}

/// Decodes a dense resource blob: little-endian elements of the element
/// type's width rounded up to whole bytes (i1 takes a byte).
LogicalResult decodeRaw(ArrayRef<char> data, Tensor &t, std::string &error) {
  unsigned bits = t.elementType.getIntOrFloatBitWidth();
  size_t bytes = (bits + 7) / 8;
  int64_t n = t.numElements();
  if (data.size() != bytes * static_cast<size_t>(n)) {
    error = "resource holds " + std::to_string(data.size()) +
            " bytes but the type needs " + std::to_string(bytes * n);
    return failure();
  }
  if (bytes > 8) {
    error = "elements wider than 64 bits are not supported";
    return failure();
  }
  for (int64_t i = 0; i < n; ++i) {
    uint64_t raw = 0;
    std::memcpy(&raw, data.data() + i * bytes, bytes);
    llvm::APInt word(bits, raw, /*isSigned=*/false, /*implicitTrunc=*/true);
    if (auto ft = dyn_cast<FloatType>(t.elementType))
      t.fp[i] = llvm::APFloat(ft.getFloatSemantics(), word).convertToDouble();
    else
      t.ints[i] = intFromAPInt(word, cast<IntegerType>(t.elementType));
  }
  return success();
}

/// Decodes through DenseElementsAttr's typed iterators, which read the
/// storage directly for f32, f64, i1, i32 and i64 instead of via APFloat.
void decodeDense(DenseElementsAttr dense, Tensor &t) {
  Type et = t.elementType;
  if (dense.isSplat()) {
    if (t.isFloat())
      std::fill(t.fp.begin(), t.fp.end(),
                dense.getSplatValue<llvm::APFloat>().convertToDouble());
    else
      std::fill(t.ints.begin(), t.ints.end(),
                intFromAPInt(dense.getSplatValue<llvm::APInt>(),
                             cast<IntegerType>(et)));
    return;
  }
  if (et.isF32()) {
    llvm::copy(dense.getValues<float>(), t.fp.begin());
  } else if (et.isF64()) {
    llvm::copy(dense.getValues<double>(), t.fp.begin());
  } else if (isa<FloatType>(et)) {
    for (auto [i, v] : llvm::enumerate(dense.getValues<llvm::APFloat>()))
      t.fp[i] = v.convertToDouble();
  } else if (et.isInteger(1)) {
    llvm::copy(dense.getValues<bool>(), t.ints.begin());
  } else if (et.isSignlessInteger(64)) {
    llvm::copy(dense.getValues<int64_t>(), t.ints.begin());
  } else if (et.isSignlessInteger(32)) {
    llvm::copy(dense.getValues<int32_t>(), t.ints.begin());
  } else {
    for (auto [i, v] : llvm::enumerate(dense.getValues<llvm::APInt>()))
      t.ints[i] = intFromAPInt(v, cast<IntegerType>(et));
  }
}
} // namespace

FailureOr<Tensor> Tensor::tryFromAttr(ElementsAttr attr, std::string &error) {
  auto type = dyn_cast<RankedTensorType>(attr.getShapedType());
  if (!type || !type.hasStaticShape()) {
    error = "constant must be a statically shaped tensor";
    return failure();
  }
  Type et = type.getElementType();
  if (!isa<FloatType, IntegerType>(et) || et.getIntOrFloatBitWidth() > 64) {
    error = "unsupported constant element type";
    return failure();
  }
  Tensor t = zeros(type);
  if (auto dense = dyn_cast<DenseElementsAttr>(attr)) {
    decodeDense(dense, t);
    return t;
  }
  if (auto resource = dyn_cast<DenseResourceElementsAttr>(attr)) {
    if (!resource.getRawHandle().getBlob()) {
      error = "dense resource '" + resource.getRawHandle().getKey().str() +
              "' has no data (was it elided?)";
      return failure();
    }
    if (failed(decodeRaw(resource.getData(), t, error)))
      return failure();
    return t;
  }
  // Any other ElementsAttr implementation, through the generic interface.
  if (t.isFloat()) {
    if (auto values = attr.tryGetValues<llvm::APFloat>()) {
      for (auto [i, v] : llvm::enumerate(*values))
        t.fp[i] = v.convertToDouble();
      return t;
    }
  } else if (auto values = attr.tryGetValues<llvm::APInt>()) {
    for (auto [i, v] : llvm::enumerate(*values))
      t.ints[i] = intFromAPInt(v, cast<IntegerType>(et));
    return t;
  }
  error = "cannot read the elements of this constant attribute";
  return failure();
}

Tensor Tensor::fromAttr(ElementsAttr attr) {
  std::string error;
  FailureOr<Tensor> t = tryFromAttr(attr, error);
  if (failed(t))
    llvm::report_fatal_error(llvm::Twine("Tensor::fromAttr: ") + error);
  return std::move(*t);
}

DenseElementsAttr Tensor::toAttr() const {
  RankedTensorType type = getType();
  Type et = elementType;
  if (et.isF64())
    return DenseElementsAttr::get(type, ArrayRef<double>(fp));
  if (et.isF32()) {
    std::vector<float> values(fp.begin(), fp.end());
    return DenseElementsAttr::get(type, ArrayRef<float>(values));
  }
  if (auto ft = dyn_cast<FloatType>(et)) {
    SmallVector<llvm::APFloat> values;
    values.reserve(fp.size());
    for (double v : fp) {
      llvm::APFloat f(v);
      bool losesInfo;
      f.convert(ft.getFloatSemantics(), llvm::APFloat::rmNearestTiesToEven,
                &losesInfo);
      values.push_back(f);
    }
    return DenseElementsAttr::get(type, values);
  }
  if (et.isSignlessInteger(64))
    return DenseElementsAttr::get(type, ArrayRef<int64_t>(ints));
  auto it = cast<IntegerType>(et);
  bool isSigned = it.getWidth() > 1 && !it.isUnsigned();
  SmallVector<llvm::APInt> values;
  values.reserve(ints.size());
  for (int64_t v : ints)
    values.emplace_back(it.getWidth(), static_cast<uint64_t>(v), isSigned,
                        /*implicitTrunc=*/true);
  return DenseElementsAttr::get(type, values);
}

//===----------------------------------------------------------------------===//
// Host arrays
//===----------------------------------------------------------------------===//

namespace {
/// `tensor<3xf32>` unquoted, as the messages have always shown it.
std::string typeToString(Type type) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << type;
  return s;
}

bool isFloatDType(rt::DType d) {
  return d == rt::DType::F64 || d == rt::DType::F32 || d == rt::DType::F16 ||
         d == rt::DType::BF16;
}

/// The host dtype holding `type` exactly; types without a host dtype of
/// their own widen to F64 or I64.
rt::DType dtypeFor(Type type) {
  if (std::optional<rt::DType> exact = getDType(type))
    return *exact;
  return isa<FloatType>(type) ? rt::DType::F64 : rt::DType::I64;
}
} // namespace

FailureOr<Tensor> Tensor::fromHostArray(const rt::HostArray &array,
                                        RankedTensorType type, StringRef what,
                                        Location loc) {
  if (llvm::ArrayRef<int64_t>(array.shape) != type.getShape())
    return emitError(loc) << what << " has shape "
                          << rt::formatShape(array.shape)
                          << " but the function expects "
                          << typeToString(type);
  Tensor t = zeros(type);
  bool wantFloat = t.isFloat();
  if (!isa<FloatType, IntegerType>(type.getElementType()) ||
      wantFloat != isFloatDType(array.dtype))
    return emitError(loc) << what << " has element type "
                          << rt::dtypeName(array.dtype)
                          << " but the function expects "
                          << typeToString(type);
  int64_t n = t.numElements();
  if (wantFloat) {
    Rounder round(t.elementType);
    for (int64_t i = 0; i < n; ++i)
      t.fp[i] = round(array.getAsDouble(i));
    return t;
  }
  auto it = cast<IntegerType>(t.elementType);
  for (int64_t i = 0; i < n; ++i) {
    int64_t v = array.getAsInt(i);
    if (wrapToInteger(it, v) != v)
      return emitError(loc) << what << ": element " << i << " (" << v
                            << ") does not fit " << typeToString(it);
    t.ints[i] = v;
  }
  return t;
}

rt::HostArray Tensor::toHostArray() const {
  rt::DType dtype = dtypeFor(elementType);
  rt::HostArray a = rt::HostArray::zeros(
      dtype, std::vector<int64_t>(shape.begin(), shape.end()));
  int64_t n = numElements();
  switch (dtype) {
  case rt::DType::F64:
    std::memcpy(a.data.data(), fp.data(), n * sizeof(double));
    break;
  case rt::DType::I64:
    std::memcpy(a.data.data(), ints.data(), n * sizeof(int64_t));
    break;
  case rt::DType::F32:
    for (int64_t i = 0; i < n; ++i) {
      float v = static_cast<float>(fp[i]);
      std::memcpy(a.data.data() + i * sizeof(float), &v, sizeof(float));
    }
    break;
  default:
    // Narrow types: setFromDouble is exact for values already in range.
    for (int64_t i = 0; i < n; ++i)
      a.setFromDouble(i, isFloat() ? fp[i] : static_cast<double>(ints[i]));
    break;
  }
  return a;
}

std::string weft::eval::detail::describeValue(const Tensor &t) {
  if (!t.elementType)
    return "an uninitialized value";
  std::string s;
  llvm::raw_string_ostream os(s);
  os << t.getType();
  return s;
}
