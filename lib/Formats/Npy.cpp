//===- Npy.cpp - NumPy .npy reader and writer -----------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// An .npy file is a 6-byte magic, a version, a little-endian header length,
// a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces to a 64-byte boundary, and then the raw data. The dict
// is parsed by a small non-recursive scanner over exactly this subset of
// Python syntax, so no header can make it recurse, loop or read out of bounds.
//
//===----------------------------------------------------------------------===//

#include "weft/Formats/Npy.h"

#include <cstring>

using namespace weft::rt;

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicLen = 6;
/// NumPy itself refuses headers over 10000 bytes by default; this is far
/// above any legitimate header yet keeps a corrupt length from allocating
/// gigabytes.
constexpr size_t kMaxHeaderLen = 1 << 20;
/// NPY_MAXDIMS in NumPy 2.
constexpr size_t kMaxRank = 64;
constexpr size_t kAlign = 64;

struct NpyDType {
  const char *code; // descr without the byte-order character
  DType dtype;
  const char *numpyName;
};

constexpr NpyDType kDTypes[] = {
    {"f8", DType::F64, "float64"}, {"f4", DType::F32, "float32"},
    {"f2", DType::F16, "float16"}, {"i8", DType::I64, "int64"},
    {"i4", DType::I32, "int32"},   {"i2", DType::I16, "int16"},
    {"i1", DType::I8, "int8"},     {"u2", DType::U16, "uint16"},
    {"u1", DType::U8, "uint8"},    {"b1", DType::Bool, "bool"},
};

const NpyDType *lookupDType(DType dtype) {
  for (const NpyDType &d : kDTypes)
    if (d.dtype == dtype)
      return &d;
  return nullptr;
}


/// The header text for messages: bounded and with control bytes escaped, so
/// a binary blob cannot flood or corrupt the terminal.
std::string printableSnippet(const char *begin, const char *end) {
  constexpr size_t kMaxShown = 120;
  std::string out;
  for (const char *p = begin; p != end && out.size() < kMaxShown; ++p) {
    unsigned char c = static_cast<unsigned char>(*p);
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      static const char kHex[] = "0123456789abcdef";
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (size_t(end - begin) > kMaxShown)
    out += "...";
  return out;
}

/// Maps a descr such as '<f4' to a DType, rejecting byte orders and types the
/// runtime does not handle.
Status parseDescr(const std::string &descr, const std::string &name,
                  DType &out) {
  std::string supported;
  for (const NpyDType &d : kDTypes)
    supported += std::string(supported.empty() ? "" : ", ") + d.numpyName;
  if (descr.size() >= 2) {
    char order = descr[0];
    std::string code = descr.substr(1);
    for (const NpyDType &d : kDTypes) {
      if (code != d.code)
        continue;
      bool singleByte = dtypeSize(d.dtype) == 1;
      if (order == '>' && !singleByte)
        return Status::error(
            name + ": big-endian dtype " + quote(descr) +
            " is not supported; save it little-endian, e.g. with "
            "arr.astype(arr.dtype.newbyteorder('<'))");
      if (order == '|' && !singleByte)
        return Status::error(name + ": dtype " + quote(descr) +
                             " lacks a byte order ('|' is only valid for "
                             "1-byte types)");
      if (order != '<' && order != '=' && order != '|' && order != '>')
        break;
      out = d.dtype;
      return Status::success();
    }
  }
  return Status::error(name + ": unsupported dtype " + quote(descr) +
                       " (supported: " + supported + ")");
}

/// Scanner for the header dict. Each method consumes input or fails; none
/// recurses.
class HeaderParser {
public:
  HeaderParser(const char *begin, const char *end, const std::string &name)
      : begin(begin), cur(begin), end(end), name(name) {}

  Status parse(DType &dtype, std::vector<int64_t> &shape);

private:
  const char *begin, *cur, *end;
  const std::string &name;

  Status error(const std::string &what) const {
    return Status::error(name + ": malformed npy header: " + what +
                         " (header: \"" + printableSnippet(begin, end) + "\")");
  }
  void skipSpace() {
    while (cur != end &&
           (*cur == ' ' || *cur == '\t' || *cur == '\n' || *cur == '\r'))
      ++cur;
  }
  bool consume(char c) {
    skipSpace();
    if (cur == end || *cur != c)
      return false;
    ++cur;
    return true;
  }
  bool consumeWord(const char *word) {
    skipSpace();
    size_t n = std::strlen(word);
    if (size_t(end - cur) < n || std::memcmp(cur, word, n) != 0)
      return false;
    cur += n;
    return true;
  }
  Status parseString(std::string &out);
  Status parseShape(std::vector<int64_t> &shape);
};

Status HeaderParser::parseString(std::string &out) {
  skipSpace();
  if (cur == end || (*cur != '\'' && *cur != '"'))
    return error("expected a quoted string");
  char delimiter = *cur++;
  const char *start = cur;
  while (cur != end && *cur != delimiter) {
    // Keys and descrs never need escapes; refusing them keeps this exact.
    if (*cur == '\\' || *cur == '\n')
      return error("unsupported character in string");
    ++cur;
  }
  if (cur == end)
    return error("unterminated string");
  out.assign(start, cur);
  ++cur;
  return Status::success();
}

Status HeaderParser::parseShape(std::vector<int64_t> &shape) {
  if (!consume('('))
    return error("'shape' must be a tuple");
  bool sawComma = false;
  while (!consume(')')) {
    if (!shape.empty() && !sawComma)
      return error("expected ',' or ')' in shape");
    skipSpace();
    if (cur == end || *cur < '0' || *cur > '9')
      return error("shape entries must be non-negative integers");
    int64_t dim = 0;
    for (; cur != end && *cur >= '0' && *cur <= '9'; ++cur) {
      int digit = *cur - '0';
      if (dim > (INT64_MAX - digit) / 10)
        return error("shape entry out of range");
      dim = dim * 10 + digit;
    }
    // Python 2 wrote long integers with an 'L' suffix.
    if (cur != end && *cur == 'L')
      ++cur;
    if (shape.size() == kMaxRank)
      return error("more than " + std::to_string(kMaxRank) + " dimensions");
    shape.push_back(dim);
    sawComma = consume(',');
  }
  // In Python "(3)" is an int, not a tuple; NumPy never writes it.
  if (shape.size() == 1 && !sawComma)
    return error("'shape' must be a tuple");
  return Status::success();
}

Status HeaderParser::parse(DType &dtype, std::vector<int64_t> &shape) {
  if (!consume('{'))
    return error("expected a dict");
  bool haveDescr = false, haveOrder = false, haveShape = false;
  bool fortranOrder = false;
  std::string descr;
  while (!consume('}')) {
    std::string key;
    if (Status s = parseString(key); !s.ok())
      return s;
    if (!consume(':'))
      return error("expected ':' after " + quote(key));
    if (key == "descr" && !haveDescr) {
      skipSpace();
      if (cur != end && (*cur == '[' || *cur == '('))
        return Status::error(name + ": structured dtypes are not supported");
      if (Status s = parseString(descr); !s.ok())
        return s;
      haveDescr = true;
    } else if (key == "fortran_order" && !haveOrder) {
      if (consumeWord("True"))
        fortranOrder = true;
      else if (!consumeWord("False"))
        return error("'fortran_order' must be True or False");
      haveOrder = true;
    } else if (key == "shape" && !haveShape) {
      if (Status s = parseShape(shape); !s.ok())
        return s;
      haveShape = true;
    } else {
      return error("unexpected or repeated key " + quote(key));
    }
    if (!consume(',')) {
      if (!consume('}'))
        return error("expected ',' or '}'");
      break;
    }
  }
  skipSpace();
  if (cur != end)
    return error("unexpected text after the dict");
  if (!haveDescr || !haveOrder || !haveShape)
    return error("the dict needs the keys 'descr', 'fortran_order' and "
                 "'shape'");
  if (fortranOrder)
    return Status::error(name + ": Fortran-order arrays are not supported; "
                                "save the array with np.save(path, "
                                "np.ascontiguousarray(arr))");
  return parseDescr(descr, name, dtype);
}

/// Validates the fixed preamble and reports where the header lies. `size`
/// is the whole input; only its first 12 bytes need to be in `p`.
Status parsePreamble(const uint8_t *p, size_t avail, uint64_t size,
                     const std::string &name, size_t &headerStart,
                     size_t &headerLen) {
  if (avail < kMagicLen + 2 || std::memcmp(p, kMagic, kMagicLen) != 0)
    return Status::error(name + ": not an npy file (no \\x93NUMPY magic)");
  unsigned major = p[6], minor = p[7];
  size_t lenBytes;
  if (major == 1 && minor == 0)
    lenBytes = 2;
  else if ((major == 2 || major == 3) && minor == 0)
    lenBytes = 4;
  else
    return Status::error(name + ": unsupported npy format version " +
                         std::to_string(major) + "." + std::to_string(minor) +
                         " (supported: 1.0, 2.0, 3.0)");
  headerStart = kMagicLen + 2 + lenBytes;
  if (avail < headerStart)
    return Status::error(name + ": truncated: file ends inside the preamble");
  headerLen = 0;
  for (size_t i = 0; i < lenBytes; ++i)
    headerLen |= size_t(p[kMagicLen + 2 + i]) << (8 * i);
  if (headerLen > kMaxHeaderLen)
    return Status::error(name + ": header length " + std::to_string(headerLen) +
                         " exceeds the limit of " +
                         std::to_string(kMaxHeaderLen) + " bytes");
  if (headerLen > size - headerStart)
    return Status::error(name + ": truncated: header length is " +
                         std::to_string(headerLen) + " bytes but only " +
                         std::to_string(size - headerStart) + " follow");
  return Status::success();
}

/// Parses the header dict into `out`'s dtype and shape and checks that
/// exactly its data follows.
Status parseHeader(const char *text, size_t headerLen, uint64_t dataAvail,
                   const std::string &name, NpyHeader &out) {
  HeaderParser parser(text, text + headerLen, name);
  if (Status s = parser.parse(out.dtype, out.shape); !s.ok())
    return s;
  const char *typeName = lookupDType(out.dtype)->numpyName;
  size_t bytes = 0;
  if (!computeByteSize(out.dtype, out.shape, bytes))
    return Status::error(name + ": shape " + formatShape(out.shape) + " of " +
                         typeName + " is too large to address");
  std::string says = "header says " + formatShape(out.shape) + " " + typeName +
                     " = " + std::to_string(bytes) + " bytes of data";
  if (bytes > dataAvail)
    return Status::error(name + ": truncated: " + says + " but the file has " +
                         std::to_string(dataAvail));
  if (bytes < dataAvail)
    return Status::error(name + ": " + says + " but the file has " +
                         std::to_string(dataAvail - bytes) +
                         " extra bytes after it");
  return Status::success();
}

} // namespace

Status weft::rt::parseNpy(const uint8_t *bytes, size_t size,
                          const std::string &nameForErrors, HostArray &out) {
  size_t headerStart = 0, headerLen = 0;
  if (Status s = parsePreamble(bytes, size, size, nameForErrors, headerStart,
                               headerLen);
      !s.ok())
    return s;
  NpyHeader header;
  size_t dataStart = headerStart + headerLen;
  if (Status s =
          parseHeader(reinterpret_cast<const char *>(bytes) + headerStart,
                      headerLen, size - dataStart, nameForErrors, header);
      !s.ok())
    return s;
  HostArray result;
  result.dtype = header.dtype;
  result.shape = std::move(header.shape);
  result.data.assign(bytes + dataStart, bytes + size);
  out = std::move(result);
  return Status::success();
}

Status weft::rt::readNpyHeader(const InputFile &file, const std::string &path,
                               NpyHeader &out) {
  uint8_t preamble[12];
  size_t avail = size_t(std::min<uint64_t>(file.size(), sizeof(preamble)));
  if (Status s = file.readAt(0, preamble, avail); !s.ok())
    return s;
  size_t headerStart = 0, headerLen = 0;
  if (Status s = parsePreamble(preamble, avail, file.size(), path, headerStart,
                               headerLen);
      !s.ok())
    return s;
  std::string text(headerLen, '\0');
  if (Status s = file.readAt(headerStart, text.data(), headerLen); !s.ok())
    return s;
  NpyHeader header;
  header.dataOffset = headerStart + headerLen;
  if (Status s = parseHeader(text.data(), headerLen,
                             file.size() - header.dataOffset, path, header);
      !s.ok())
    return s;
  out = std::move(header);
  return Status::success();
}

Status weft::rt::readNpy(const std::string &path, HostArray &out) {
  InputFile file;
  if (Status s = file.open(path); !s.ok())
    return s;
  NpyHeader header;
  if (Status s = readNpyHeader(file, path, header); !s.ok())
    return s;
  HostArray result;
  result.dtype = header.dtype;
  result.shape = std::move(header.shape);
  // readNpyHeader checked the data size against the file, so this
  // allocation is bounded by what is really there.
  result.data.resize(size_t(file.size() - header.dataOffset));
  if (Status s = file.readAt(header.dataOffset, result.data.data(),
                             result.data.size());
      !s.ok())
    return s;
  out = std::move(result);
  return Status::success();
}

/// Builds the preamble and padded header dict for `a`.
static Status buildHeader(const HostArray &a, const std::string &name,
                          std::string &out) {
  if (Status s = a.checkLayout(); !s.ok())
    return Status::error(name + ": cannot write: " + s.message);
  const NpyDType *d = lookupDType(a.dtype);
  if (!d)
    return Status::error(name + ": " + dtypeName(a.dtype) +
                         " has no NumPy dtype; cast the array to F32 before "
                         "saving it as .npy");
  std::string order = dtypeSize(a.dtype) == 1 ? "|" : "<";
  std::string dict =
      "{'descr': '" + order + d->code + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < a.shape.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(a.shape[i]);
  dict += a.shape.size() == 1 ? ",), }" : "), }";

  // Version 1.0 unless the header outgrows its 16-bit length field. The
  // padding puts the data on a 64-byte boundary, as NumPy does.
  for (unsigned major : {1u, 2u}) {
    size_t lenBytes = major == 1 ? 2 : 4;
    size_t prefix = kMagicLen + 2 + lenBytes;
    size_t pad = (kAlign - (prefix + dict.size() + 1) % kAlign) % kAlign;
    size_t headerLen = dict.size() + pad + 1;
    if (major == 1 && headerLen > 0xffff)
      continue;
    out.assign(kMagic, kMagicLen);
    out += char(major);
    out += char(0);
    for (size_t i = 0; i < lenBytes; ++i)
      out += char((headerLen >> (8 * i)) & 0xff);
    out += dict;
    out.append(pad, ' ');
    out += '\n';
    break;
  }
  return Status::success();
}

Status weft::rt::serializeNpy(const HostArray &a,
                              const std::string &nameForErrors,
                              std::vector<uint8_t> &out) {
  std::string header;
  if (Status s = buildHeader(a, nameForErrors, header); !s.ok())
    return s;
  out.assign(header.begin(), header.end());
  out.insert(out.end(), a.data.begin(), a.data.end());
  return Status::success();
}

Status weft::rt::writeNpy(const std::string &path, const HostArray &a) {
  std::string header;
  if (Status s = buildHeader(a, path, header); !s.ok())
    return s;
  return writeFileAtomic(
      path, {{header.data(), header.size()}, {a.data.data(), a.data.size()}});
}
