//===- HostArray.cpp - Dense host arrays and file helpers -----------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Element access decodes bf16 and f16 in software: training binaries run on
// hosts whose compilers may lack _Float16 / __bf16, and the conversions must
// be bit-exact so that checkpoints round-trip.
//
//===----------------------------------------------------------------------===//

#include "weft/Formats/HostArray.h"

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "Weft's runtime keeps arrays little-endian and assumes a matching host"
#endif

using namespace weft::rt;

size_t weft::rt::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
  case DType::I16:
  case DType::U16:
    return 2;
  case DType::I8:
  case DType::U8:
  case DType::Bool:
    return 1;
  }
  return 0;
}

const char *weft::rt::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return "F64";
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I64:
    return "I64";
  case DType::I32:
    return "I32";
  case DType::I16:
    return "I16";
  case DType::I8:
    return "I8";
  case DType::U16:
    return "U16";
  case DType::U8:
    return "U8";
  case DType::Bool:
    return "BOOL";
  }
  return "?";
}

bool weft::rt::computeByteSize(DType dtype, const std::vector<int64_t> &shape,
                               size_t &bytes) {
  // Multiplying by the element size first keeps every intermediate a byte
  // count, so one overflow check per dimension covers the whole product.
  size_t total = dtypeSize(dtype);
  for (int64_t d : shape) {
    if (d < 0)
      return false;
    if (d != 0 && total > std::numeric_limits<size_t>::max() / uint64_t(d))
      return false;
    total *= size_t(d);
  }
  bytes = total;
  return true;
}

std::string weft::rt::formatShape(const std::vector<int64_t> &shape) {
  if (shape.empty())
    return "scalar";
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i)
    out += (i ? "x" : "") + std::to_string(shape[i]);
  return out;
}

//===----------------------------------------------------------------------===//
// Software half-precision conversions
//===----------------------------------------------------------------------===//

namespace {

/// Field widths of a binary floating-point format narrower than double.
struct NarrowFloat {
  int exponentBits;
  int mantissaBits;

  int bias() const { return (1 << (exponentBits - 1)) - 1; }
  uint32_t maxExponentField() const { return (1u << exponentBits) - 1; }
  uint32_t signBit() const { return 1u << (exponentBits + mantissaBits); }
};

constexpr NarrowFloat kF32 = {8, 23};
constexpr NarrowFloat kF16 = {5, 10};
constexpr NarrowFloat kBF16 = {8, 7};

double decodeNarrow(uint32_t bits, NarrowFloat fmt) {
  uint32_t mantissaMask = (1u << fmt.mantissaBits) - 1;
  uint32_t mantissa = bits & mantissaMask;
  uint32_t exponent = (bits >> fmt.mantissaBits) & fmt.maxExponentField();
  double sign = (bits & fmt.signBit()) ? -1.0 : 1.0;
  if (exponent == fmt.maxExponentField())
    return mantissa ? std::numeric_limits<double>::quiet_NaN()
                    : sign * std::numeric_limits<double>::infinity();
  // Subnormals share the smallest normal exponent but lack the implicit 1.
  int scale = std::max<int>(int(exponent), 1) - fmt.bias() - fmt.mantissaBits;
  uint32_t significand = exponent ? (mantissa | (mantissaMask + 1)) : mantissa;
  return sign * std::ldexp(double(significand), scale);
}

/// Rounds `v` to the nearest value of `fmt`, ties to even, and returns its
/// bits. Working from the double (not via float) avoids double rounding, and
/// the explicit tie test keeps the result independent of the FPU rounding
/// mode. Every step is exact: scaling by a power of two and splitting off the
/// fraction never lose bits of a 53-bit significand.
uint32_t encodeNarrow(double v, NarrowFloat fmt) {
  const int m = fmt.mantissaBits;
  const uint32_t sign = std::signbit(v) ? fmt.signBit() : 0;
  const uint32_t infBits = fmt.maxExponentField() << m;
  if (std::isnan(v))
    return sign | infBits | (1u << (m - 1));
  double a = std::fabs(v);
  if (std::isinf(a))
    return sign | infBits;
  if (a == 0)
    return sign;

  int binade;
  std::frexp(a, &binade);
  int e = binade - 1; // a is in [2^e, 2^(e+1)).
  if (e > fmt.bias())
    return sign | infBits;
  const int minNormalExp = 1 - fmt.bias();
  bool subnormal = e < minNormalExp;
  int quantumExp = (subnormal ? minNormalExp : e) - m;

  double scaled = std::ldexp(a, -quantumExp);
  double n = std::floor(scaled);
  double frac = scaled - n;
  if (frac > 0.5 || (frac == 0.5 && std::fmod(n, 2.0) != 0))
    n += 1;

  // Rounding up to the next binade (or from the largest subnormal to the
  // smallest normal) carries out of the mantissa into the exponent field,
  // which is exactly the right encoding; a carry into the all-ones exponent
  // is overflow to infinity.
  uint32_t bits =
      subnormal ? uint32_t(n)
                : (uint32_t(e + fmt.bias()) << m) + (uint32_t(n) - (1u << m));
  return sign | std::min(bits, infBits);
}

/// Truncates toward zero and saturates; NaN becomes 0 rather than UB.
template <typename T> T saturatingCast(double v) {
  if (std::isnan(v))
    return 0;
  double t = std::trunc(v);
  // double(max) rounds up to 2^k for 64-bit T, so `>=` also catches it.
  if (t <= double(std::numeric_limits<T>::min()))
    return std::numeric_limits<T>::min();
  if (t >= double(std::numeric_limits<T>::max()))
    return std::numeric_limits<T>::max();
  return T(t);
}

template <typename T> T loadElement(const HostArray &a, int64_t i) {
  assert(i >= 0 && size_t(i + 1) * sizeof(T) <= a.data.size() &&
         "element index out of range");
  T value;
  std::memcpy(&value, a.data.data() + size_t(i) * sizeof(T), sizeof(T));
  return value;
}

template <typename T> void storeElement(HostArray &a, int64_t i, T value) {
  assert(i >= 0 && size_t(i + 1) * sizeof(T) <= a.data.size() &&
         "element index out of range");
  std::memcpy(a.data.data() + size_t(i) * sizeof(T), &value, sizeof(T));
}

} // namespace

double HostArray::getAsDouble(int64_t i) const {
  switch (dtype) {
  case DType::F64:
    return loadElement<double>(*this, i);
  case DType::F32:
    return loadElement<float>(*this, i);
  case DType::F16:
    return decodeNarrow(loadElement<uint16_t>(*this, i), kF16);
  case DType::BF16:
    return decodeNarrow(loadElement<uint16_t>(*this, i), kBF16);
  case DType::I64:
  case DType::I32:
  case DType::I16:
  case DType::I8:
  case DType::U16:
  case DType::U8:
  case DType::Bool:
    // Exact but for int64 values beyond 2^53, which round to nearest.
    return double(getAsInt(i));
  }
  return 0;
}

int64_t HostArray::getAsInt(int64_t i) const {
  switch (dtype) {
  case DType::F64:
  case DType::F32:
  case DType::F16:
  case DType::BF16:
    return saturatingCast<int64_t>(getAsDouble(i));
  case DType::I64:
    return loadElement<int64_t>(*this, i);
  case DType::I32:
    return loadElement<int32_t>(*this, i);
  case DType::I16:
    return loadElement<int16_t>(*this, i);
  case DType::I8:
    return loadElement<int8_t>(*this, i);
  case DType::U16:
    return loadElement<uint16_t>(*this, i);
  case DType::U8:
    return loadElement<uint8_t>(*this, i);
  case DType::Bool:
    return loadElement<uint8_t>(*this, i) ? 1 : 0;
  }
  return 0;
}

void HostArray::setFromDouble(int64_t i, double v) {
  switch (dtype) {
  case DType::F64:
    return storeElement<double>(*this, i, v);
  case DType::F32: {
    // Through the same rounding as the half types: a plain cast of an
    // out-of-range double is undefined behaviour.
    uint32_t bits = encodeNarrow(v, kF32);
    float f;
    std::memcpy(&f, &bits, sizeof(f));
    return storeElement<float>(*this, i, f);
  }
  case DType::F16:
    return storeElement<uint16_t>(*this, i, uint16_t(encodeNarrow(v, kF16)));
  case DType::BF16:
    return storeElement<uint16_t>(*this, i, uint16_t(encodeNarrow(v, kBF16)));
  case DType::I64:
    return storeElement<int64_t>(*this, i, saturatingCast<int64_t>(v));
  case DType::I32:
    return storeElement<int32_t>(*this, i, saturatingCast<int32_t>(v));
  case DType::I16:
    return storeElement<int16_t>(*this, i, saturatingCast<int16_t>(v));
  case DType::I8:
    return storeElement<int8_t>(*this, i, saturatingCast<int8_t>(v));
  case DType::U16:
    return storeElement<uint16_t>(*this, i, saturatingCast<uint16_t>(v));
  case DType::U8:
    return storeElement<uint8_t>(*this, i, saturatingCast<uint8_t>(v));
  case DType::Bool:
    return storeElement<uint8_t>(*this, i, v != 0 ? 1 : 0);
  }
}

HostArray HostArray::zeros(DType dtype, std::vector<int64_t> shape) {
  HostArray a;
  a.dtype = dtype;
  size_t bytes = 0;
  bool valid = computeByteSize(dtype, shape, bytes);
  assert(valid && "zeros() needs a non-negative shape whose size fits");
  (void)valid;
  a.shape = std::move(shape);
  a.data.assign(bytes, 0);
  return a;
}

Status HostArray::checkLayout() const {
  size_t bytes = 0;
  if (!computeByteSize(dtype, shape, bytes))
    return Status::error("shape has a negative dimension or its byte size "
                         "overflows");
  if (data.size() != bytes)
    return Status::error(std::string(dtypeName(dtype)) + " array of shape " +
                         formatShape(shape) + " needs " +
                         std::to_string(bytes) + " bytes of data but has " +
                         std::to_string(data.size()));
  return Status::success();
}

//===----------------------------------------------------------------------===//
// File helpers
//===----------------------------------------------------------------------===//

/// Formats the current errno, so callers pass only literals for `what`: an
/// allocating argument expression could clobber errno first.
static std::string errnoMessage(const std::string &path, const char *what) {
  const char *reason = std::strerror(errno);
  return path + ": " + what + ": " + reason;
}

InputFile::~InputFile() {
  if (fd >= 0)
    ::close(fd);
}

Status InputFile::open(const std::string &path) {
  if (fd >= 0)
    ::close(fd);
  filePath = path;
  fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Status::error(errnoMessage(path, "cannot open"));
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return Status::error(errnoMessage(path, "cannot stat"));
  if (!S_ISREG(st.st_mode))
    return Status::error(path + ": not a regular file");
  fileSize = uint64_t(st.st_size);
  return Status::success();
}

Status InputFile::readAt(uint64_t offset, void *dst, size_t n) const {
  auto *out = static_cast<uint8_t *>(dst);
  while (n > 0) {
    // Linux caps a single read at about 2 GiB; larger tensors need a loop.
    size_t chunk = std::min<size_t>(n, size_t(1) << 30);
    ssize_t got = ::pread(fd, out, chunk, off_t(offset));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return Status::error(errnoMessage(filePath, "read failed"));
    if (got == 0)
      return Status::error(filePath + ": unexpected end of file at offset " +
                           std::to_string(offset) +
                           " (was the file truncated while reading?)");
    out += got;
    offset += uint64_t(got);
    n -= size_t(got);
  }
  return Status::success();
}

static Status writeAll(int fd, const uint8_t *p, size_t n,
                       const std::string &path) {
  while (n > 0) {
    ssize_t put = ::write(fd, p, std::min<size_t>(n, size_t(1) << 30));
    if (put < 0 && errno == EINTR)
      continue;
    if (put < 0)
      return Status::error(errnoMessage(path, "write failed"));
    p += put;
    n -= size_t(put);
  }
  return Status::success();
}

Status weft::rt::writeFileAtomic(
    const std::string &path,
    const std::vector<std::pair<const void *, size_t>> &pieces) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0)
    return Status::error(errnoMessage(path, "cannot create temporary file") +
                         " (" + tmp + ")");

  Status status;
  for (const auto &[ptr, size] : pieces) {
    status = writeAll(fd, static_cast<const uint8_t *>(ptr), size, path);
    if (!status.ok())
      break;
  }
  // Without the fsync a crash after the rename can expose a file whose
  // metadata is durable but whose data blocks are not.
  if (status.ok() && ::fsync(fd) != 0)
    status =
        Status::error(errnoMessage(path, "fsync of temporary file failed"));
  if (::close(fd) != 0 && status.ok())
    status =
        Status::error(errnoMessage(path, "close of temporary file failed"));
  if (status.ok() && ::rename(tmp.c_str(), path.c_str()) != 0)
    status = Status::error(errnoMessage(path, "cannot rename temporary file"));
  if (!status.ok()) {
    ::unlink(tmp.c_str());
    return status;
  }

  size_t slash = path.find_last_of('/');
  std::string dir = slash == std::string::npos ? "."
                    : slash == 0               ? "/"
                                               : path.substr(0, slash);
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0)
    return Status::error(
        errnoMessage(path, "cannot open its directory to fsync"));
  int rc = ::fsync(dirFd);
  int fsyncErrno = errno;
  ::close(dirFd);
  // Some filesystems cannot sync directories; the file itself is complete.
  errno = fsyncErrno;
  if (rc != 0 && errno != EINVAL)
    return Status::error(errnoMessage(path, "fsync of its directory failed"));
  return Status::success();
}

uint64_t weft::rt::fnv1a64(const void *data, size_t n, uint64_t hash) {
  const uint8_t *p = static_cast<const uint8_t *>(data);
  for (size_t i = 0; i < n; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string weft::rt::quote(const std::string &name) {
  static const char digits[] = "0123456789abcdef";
  std::string out = "'";
  for (size_t i = 0; i < name.size();) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
      ++i;
      continue;
    }
    size_t len = c >= 0xf0 && c < 0xf5   ? 4
                 : c >= 0xe0 && c < 0xf0 ? 3
                 : c >= 0xc2 && c < 0xe0 ? 2
                                         : 0;
    bool ok = len && i + len <= name.size();
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(name[i + k]) & 0xc0) == 0x80;
    if (ok) {
      out.append(name, i, len);
      i += len;
      continue;
    }
    out += "\\x";
    out += digits[c >> 4];
    out += digits[c & 15];
    ++i;
  }
  return out + "'";
}
