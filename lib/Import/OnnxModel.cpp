//===- OnnxModel.cpp - Reading and checking ONNX model files --------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Model files come from users and the internet, so everything here treats its
// input as hostile: parse failures and graph errors become Status messages,
// sizes are checked before anything is allocated, and external data can only
// be read from regular files inside the model's directory.
//
//===----------------------------------------------------------------------===//

#include "weft/Import/OnnxModel.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <unordered_set>

using namespace weft;
using rt::DType;
using rt::Status;

namespace {

/// Closes a POSIX file descriptor when it goes out of scope.
class ScopedFd {
public:
  explicit ScopedFd(int fd = -1) : fd(fd) {}
  ScopedFd(const ScopedFd &) = delete;
  ScopedFd &operator=(const ScopedFd &) = delete;
  ~ScopedFd() { reset(-1); }

  void reset(int newFd) {
    if (fd >= 0)
      ::close(fd);
    fd = newFd;
  }
  int get() const { return fd; }

private:
  int fd;
};

bool isDefaultDomain(const std::string &domain) {
  return domain.empty() || domain == "ai.onnx";
}

//===----------------------------------------------------------------------===//
// Graph validation
//===----------------------------------------------------------------------===//

/// Names visible to the graph being checked, one set per enclosing graph with
/// the innermost last. Subgraphs (If/Loop/Scan bodies) may use outer names.
using Scopes = std::vector<std::unordered_set<std::string>>;

bool isVisible(const Scopes &scopes, const std::string &name) {
  for (const auto &scope : scopes)
    if (scope.count(name))
      return true;
  return false;
}

std::string describeNode(const onnx::NodeProto &node, int index) {
  std::string who = node.name().empty() ? "#" + std::to_string(index)
                                        : "'" + node.name() + "'";
  return "node " + who + " (" + node.op_type() + ")";
}

/// Checks one graph and, recursively, its subgraphs; returns the first
/// problem or "". Recursion is bounded by protobuf's message nesting limit
/// (100), so a hostile file cannot exhaust the stack here.
std::string checkGraph(const onnx::GraphProto &graph,
                       const std::unordered_set<std::string> &opsetDomains,
                       Scopes &scopes) {
  if (graph.sparse_initializer_size() > 0)
    return "sparse initializer '" +
           graph.sparse_initializer(0).values().name() + "' is not supported";

  // Index rather than reference: recursion below may grow `scopes`.
  size_t level = scopes.size();
  scopes.emplace_back();
  for (const onnx::ValueInfoProto &input : graph.input())
    scopes[level].insert(input.name());
  for (int i = 0; i < graph.initializer_size(); ++i) {
    if (graph.initializer(i).name().empty())
      return "initializer #" + std::to_string(i) + " has no name";
    scopes[level].insert(graph.initializer(i).name());
  }

  for (int i = 0; i < graph.node_size(); ++i) {
    const onnx::NodeProto &node = graph.node(i);
    if (node.op_type().empty())
      return "node #" + std::to_string(i) +
             (node.name().empty() ? "" : " '" + node.name() + "'") +
             " has no op_type";
    std::string who = describeNode(node, i);
    if (node.domain() == "ai.onnx.ml")
      return who + " is in the ONNX-ML domain 'ai.onnx.ml', which Weft does "
                   "not support";
    if (!isDefaultDomain(node.domain()) && !opsetDomains.count(node.domain()))
      return who + " is in domain '" + node.domain() +
             "', for which the model imports no opset";
    for (const std::string &input : node.input())
      if (!input.empty() && !isVisible(scopes, input))
        return who + " input '" + input +
               "' is not a graph input, initializer or output of an earlier "
               "node";
    for (const onnx::AttributeProto &attr : node.attribute()) {
      std::vector<const onnx::GraphProto *> bodies;
      if (attr.has_g())
        bodies.push_back(&attr.g());
      for (const onnx::GraphProto &body : attr.graphs())
        bodies.push_back(&body);
      for (const onnx::GraphProto *body : bodies) {
        std::string error = checkGraph(*body, opsetDomains, scopes);
        if (!error.empty())
          return "in subgraph '" + attr.name() + "' of " + who + ": " + error;
      }
    }
    for (const std::string &output : node.output()) {
      if (output.empty())
        continue;
      if (!scopes[level].insert(output).second)
        return who + " output '" + output +
               "' is already defined; ONNX graphs must assign each name once";
    }
  }

  for (const onnx::ValueInfoProto &output : graph.output())
    if (output.name().empty() || !isVisible(scopes, output.name()))
      return "graph output '" + output.name() +
             "' is not a graph input, initializer or node output";
  scopes.pop_back();
  return "";
}

/// Returns the first reason the importer cannot walk `model`, or "".
std::string checkModel(const onnx::ModelProto &model) {
  if (model.ir_version() <= 0)
    return "ir_version is missing or not positive";
  if (!model.has_graph())
    return "the model has no graph";
  std::unordered_set<std::string> opsetDomains;
  bool hasDefault = false;
  for (const onnx::OperatorSetIdProto &opset : model.opset_import()) {
    opsetDomains.insert(opset.domain());
    hasDefault |= isDefaultDomain(opset.domain());
  }
  if (!hasDefault)
    return "the model imports no opset for the default ONNX domain";
  if (model.functions_size() > 0) {
    const onnx::FunctionProto &fn = model.functions(0);
    return "model-local function '" + fn.name() + "' in domain '" +
           fn.domain() + "' is not supported";
  }
  Scopes scopes;
  return checkGraph(model.graph(), opsetDomains, scopes);
}

//===----------------------------------------------------------------------===//
// Tensor decoding
//===----------------------------------------------------------------------===//

bool toDType(int onnxType, DType &dtype) {
  switch (onnxType) {
  case onnx::TensorProto::FLOAT:
    dtype = DType::F32;
    return true;
  case onnx::TensorProto::DOUBLE:
    dtype = DType::F64;
    return true;
  case onnx::TensorProto::FLOAT16:
    dtype = DType::F16;
    return true;
  case onnx::TensorProto::BFLOAT16:
    dtype = DType::BF16;
    return true;
  case onnx::TensorProto::INT64:
    dtype = DType::I64;
    return true;
  case onnx::TensorProto::INT32:
    dtype = DType::I32;
    return true;
  case onnx::TensorProto::INT16:
    dtype = DType::I16;
    return true;
  case onnx::TensorProto::INT8:
    dtype = DType::I8;
    return true;
  case onnx::TensorProto::UINT16:
    dtype = DType::U16;
    return true;
  case onnx::TensorProto::UINT8:
    dtype = DType::U8;
    return true;
  case onnx::TensorProto::BOOL:
    dtype = DType::Bool;
    return true;
  default:
    return false;
  }
}

std::string onnxTypeName(int onnxType) {
  if (onnx::TensorProto::DataType_IsValid(onnxType))
    return onnx::TensorProto::DataType_Name(
        static_cast<onnx::TensorProto::DataType>(onnxType));
  return "data type " + std::to_string(onnxType);
}

/// Stores the low `n` bytes of `bits` little-endian, the byte order of
/// HostArray and of ONNX raw_data, whatever the host's order.
void storeLittleEndian(uint8_t *dst, uint64_t bits, size_t n) {
  for (size_t i = 0; i < n; ++i)
    dst[i] = static_cast<uint8_t>(bits >> (8 * i));
}

/// Decodes the typed repeated field the ONNX spec assigns to `dtype`: the
/// 8-, 16- and 32-bit types (float16/bfloat16 as bit patterns) all live in
/// int32_data. Returns "" or an error message.
std::string decodeTypedData(const onnx::TensorProto &t, DType dtype,
                            size_t numel, std::vector<uint8_t> &data) {
  int count = t.int32_data_size();
  const char *field = "int32_data";
  if (dtype == DType::F32)
    count = t.float_data_size(), field = "float_data";
  else if (dtype == DType::F64)
    count = t.double_data_size(), field = "double_data";
  else if (dtype == DType::I64)
    count = t.int64_data_size(), field = "int64_data";
  if (static_cast<size_t>(count) != numel)
    return "has " + std::to_string(count) + " values in " + field +
           " but its dims need " + std::to_string(numel);

  // Range of int32_data values that fit the element type; the default covers
  // u16 and the float16/bfloat16 bit patterns.
  int64_t lo = 0, hi = UINT16_MAX;
  if (dtype == DType::I32)
    lo = INT32_MIN, hi = INT32_MAX;
  else if (dtype == DType::I16)
    lo = INT16_MIN, hi = INT16_MAX;
  else if (dtype == DType::I8)
    lo = INT8_MIN, hi = INT8_MAX;
  else if (dtype == DType::U8)
    hi = UINT8_MAX;

  size_t esize = rt::dtypeSize(dtype);
  data.resize(numel * esize);
  for (size_t i = 0; i < numel; ++i) {
    uint64_t bits;
    if (dtype == DType::F32) {
      uint32_t b;
      float v = t.float_data(i);
      std::memcpy(&b, &v, sizeof(b));
      bits = b;
    } else if (dtype == DType::F64) {
      double v = t.double_data(i);
      std::memcpy(&bits, &v, sizeof(bits));
    } else if (dtype == DType::I64) {
      bits = static_cast<uint64_t>(t.int64_data(i));
    } else {
      int64_t v = t.int32_data(i);
      if (dtype == DType::Bool)
        v = v != 0;
      else if (v < lo || v > hi)
        return "int32_data value " + std::to_string(v) + " at index " +
               std::to_string(i) + " does not fit its element type";
      bits = static_cast<uint64_t>(v);
    }
    storeLittleEndian(&data[i * esize], bits, esize);
  }
  return "";
}

/// Parses a non-negative decimal integer as external_data stores offsets.
bool parseSize(const std::string &s, int64_t &value) {
  value = 0;
  for (char c : s) {
    if (c < '0' || c > '9' || value > (INT64_MAX - (c - '0')) / 10)
      return false;
    value = value * 10 + (c - '0');
  }
  return !s.empty();
}

/// Reads `numBytes` of external data for `t` into `data`; returns "" or an
/// error message. Every component of the location is lstat'ed and opened
/// with O_NOFOLLOW relative to the previous one, so neither a symlink in the
/// model directory nor one swapped in after the check can redirect the read.
std::string readExternalData(const onnx::TensorProto &t,
                             const std::string &modelDir, size_t numBytes,
                             std::vector<uint8_t> &data) {
  std::string location, offsetStr = "0", lengthStr;
  for (const onnx::StringStringEntryProto &entry : t.external_data()) {
    if (entry.key() == "location")
      location = entry.value();
    else if (entry.key() == "offset")
      offsetStr = entry.value();
    else if (entry.key() == "length")
      lengthStr = entry.value();
  }
  if (location.empty())
    return "external data has no location";
  std::string where = "external data '" + location + "'";
  if (location[0] == '/')
    return where + " is an absolute path; it must be relative to the model "
                   "directory";

  std::vector<std::string> parts;
  for (size_t begin = 0; begin <= location.size();) {
    size_t end = std::min(location.find('/', begin), location.size());
    std::string part = location.substr(begin, end - begin);
    if (part == "..")
      return where + " contains '..'; it must stay inside the model directory";
    if (!part.empty() && part != ".")
      parts.push_back(part);
    begin = end + 1;
  }
  if (parts.empty())
    return where + " does not name a file";

  int64_t offset = 0;
  if (!parseSize(offsetStr, offset))
    return where + " has an invalid offset '" + offsetStr + "'";
  if (numBytes > static_cast<uint64_t>(INT64_MAX))
    return where + " is larger than any file can be";
  int64_t length = static_cast<int64_t>(numBytes);
  if (!lengthStr.empty() && (!parseSize(lengthStr, length) ||
                             static_cast<size_t>(length) != numBytes))
    return where + " has length '" + lengthStr +
           "' but the tensor's dims need " + std::to_string(numBytes) +
           " bytes";

  std::string dir = modelDir.empty() ? "." : modelDir;
  ScopedFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0)
    return "cannot open model directory '" + dir + "': " + std::strerror(errno);
  std::string sofar;
  struct stat st;
  for (size_t i = 0; i < parts.size(); ++i) {
    bool last = i + 1 == parts.size();
    sofar += (i ? "/" : "") + parts[i];
    if (::fstatat(fd.get(), parts[i].c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return where + ": cannot open '" + dir + "/" + sofar +
             "': " + std::strerror(errno);
    if (S_ISLNK(st.st_mode))
      return where + ": '" + sofar +
             "' is a symlink; external data must not leave the model "
             "directory through links";
    if (!last && !S_ISDIR(st.st_mode))
      return where + ": '" + sofar + "' is not a directory";
    int flags =
        O_RDONLY | O_NOFOLLOW | O_CLOEXEC | (last ? O_NONBLOCK : O_DIRECTORY);
    int next = ::openat(fd.get(), parts[i].c_str(), flags);
    if (next < 0)
      return where + ": cannot open '" + dir + "/" + sofar +
             "': " + std::strerror(errno);
    fd.reset(next);
  }
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
    return where + " is not a regular file";
  if (offset > st.st_size || length > st.st_size - offset)
    return where + ": offset " + std::to_string(offset) + " + length " +
           std::to_string(length) + " is past the end of the " +
           std::to_string(st.st_size) + "-byte file";

  data.resize(length);
  for (int64_t done = 0; done < length;) {
    ssize_t n =
        ::pread(fd.get(), data.data() + done, length - done, offset + done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return where + ": read failed: " +
             (n == 0 ? "unexpected end of file" : std::strerror(errno));
    done += n;
  }
  return "";
}

} // namespace

//===----------------------------------------------------------------------===//
// Public API
//===----------------------------------------------------------------------===//

Status weft::onnximport::loadOnnxModel(const std::string &path,
                                       onnx::ModelProto &model) {
  // stat before open: opening a FIFO would block and a directory opens fine
  // on Linux but then fails to read with a less helpful message.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    return Status::error(path + ": cannot open model: " + std::strerror(errno));
  if (S_ISDIR(st.st_mode))
    return Status::error(path + ": is a directory, not an ONNX model file");
  if (!S_ISREG(st.st_mode))
    return Status::error(path + ": is not a regular file");
  ScopedFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0)
    return Status::error(path + ": cannot open model: " + std::strerror(errno));
  if (st.st_size > INT_MAX)
    return Status::error(
        path + ": model is " + std::to_string(st.st_size) +
        " bytes, over protobuf's 2 GiB limit; save it with external data");

  bool parsed;
  int readErrno;
  int64_t consumed;
  {
    // Streaming from the fd avoids holding the file twice in memory.
    google::protobuf::io::FileInputStream fileStream(fd.get());
    google::protobuf::io::CodedInputStream coded(&fileStream);
    coded.SetTotalBytesLimit(INT_MAX);
    parsed =
        model.ParseFromCodedStream(&coded) && coded.ConsumedEntireMessage();
    consumed = coded.CurrentPosition();
    readErrno = fileStream.GetErrno();
  }
  if (readErrno != 0)
    return Status::error(path + ": read failed: " + std::strerror(readErrno));
  // A zero or end-group tag stops the parser with success, so a valid model
  // followed by junk would load; insist that the whole file was consumed.
  if (!parsed || consumed != st.st_size)
    return Status::error(path + ": not a valid ONNX model (protobuf parse "
                                "failed); is the file truncated?");

  // Truncation at a field boundary and short garbage can both parse cleanly,
  // so the structure is checked before anyone walks the graph.
  std::string error = checkModel(model);
  if (!error.empty())
    return Status::error(path + ": invalid ONNX model: " + error);
  return Status::success();
}

int64_t weft::onnximport::getDefaultOpset(const onnx::ModelProto &model) {
  for (const onnx::OperatorSetIdProto &opset : model.opset_import())
    if (isDefaultDomain(opset.domain()))
      return opset.version();
  return 0;
}

Status weft::onnximport::tensorToHostArray(const onnx::TensorProto &t,
                                           const std::string &modelDir,
                                           rt::HostArray &out) {
  std::string who = "tensor '" + t.name() + "'";
  DType dtype;
  if (!toDType(t.data_type(), dtype))
    return Status::error(who + ": unsupported element type " +
                         onnxTypeName(t.data_type()));
  if (t.has_segment())
    return Status::error(who + ": segmented tensors are not supported");

  std::vector<int64_t> shape(t.dims().begin(), t.dims().end());
  size_t numBytes = 0;
  if (!rt::computeByteSize(dtype, shape, numBytes))
    return Status::error(who + ": invalid dims " + rt::formatShape(shape));

  std::vector<uint8_t> data;
  std::string error;
  if (t.data_location() == onnx::TensorProto::EXTERNAL) {
    error = readExternalData(t, modelDir, numBytes, data);
  } else if (t.has_raw_data()) {
    // raw_data is little-endian like HostArray, so it is copied as is.
    const std::string &raw = t.raw_data();
    if (raw.size() != numBytes)
      error = "raw_data has " + std::to_string(raw.size()) +
              " bytes but dims " + rt::formatShape(shape) + " of " +
              onnxTypeName(t.data_type()) + " need " + std::to_string(numBytes);
    else
      data.assign(raw.begin(), raw.end());
  } else {
    error = decodeTypedData(t, dtype, numBytes / rt::dtypeSize(dtype), data);
  }
  if (!error.empty())
    return Status::error(who + ": " + error);

  out.dtype = dtype;
  out.shape = std::move(shape);
  out.data = std::move(data);
  return Status::success();
}

Status weft::onnximport::readValueInfoShape(
    const onnx::ValueInfoProto &info, std::vector<int64_t> &dims,
    std::vector<std::string> &symbolicNames, DType &elemType) {
  dims.clear();
  symbolicNames.clear();
  std::string who = "value '" + info.name() + "'";
  if (!info.type().has_tensor_type())
    return Status::error(who + ": has no tensor type; sequence, map and "
                               "optional values are not supported");
  const onnx::TypeProto::Tensor &type = info.type().tensor_type();
  if (!toDType(type.elem_type(), elemType))
    return Status::error(who + ": unsupported element type " +
                         onnxTypeName(type.elem_type()));
  if (!type.has_shape())
    return Status::error(who + ": has unknown rank");
  for (const onnx::TensorShapeProto::Dimension &dim : type.shape().dim()) {
    if (dim.has_dim_value() && dim.dim_value() < 0)
      return Status::error(who + ": negative dimension " +
                           std::to_string(dim.dim_value()));
    dims.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
    symbolicNames.push_back(dim.dim_param());
  }
  return Status::success();
}
