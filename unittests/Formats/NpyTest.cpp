//===- NpyTest.cpp - Tests for .npy I/O and HostArray conversions ---------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Formats/Npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <random>
#include <vector>

#include <dirent.h>
#include <unistd.h>

using namespace weft::rt;

namespace {

/// The files the tests write, removed when they end: the suite runs in every
/// CI and must not fill the temporary directory.
std::vector<std::string> &writtenFiles() {
  static std::vector<std::string> files;
  return files;
}

class RemoveWrittenFiles : public ::testing::Environment {
public:
  void TearDown() override {
    for (const std::string &path : writtenFiles())
      std::remove(path.c_str());
  }
};

[[maybe_unused]] ::testing::Environment *const removeWrittenFiles =
    ::testing::AddGlobalTestEnvironment(new RemoveWrittenFiles);

std::string tempPath(const std::string &name) {
  std::string path = ::testing::TempDir() + "weft_npy_" +
                     std::to_string(::getpid()) + "_" + name;
  writtenFiles().push_back(path);
  return path;
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// An .npy image laid out the way NumPy 1.24 writes it: the dict padded with
/// spaces (including NumPy's spare room for growing the shape) so that the
/// data starts at byte 128.
std::string numpyImage(const std::string &dict, const std::string &data,
                       unsigned major = 1) {
  size_t lenBytes = major == 1 ? 2 : 4;
  size_t headerLen = 128 - 8 - lenBytes;
  std::string out = std::string("\x93NUMPY", 6) + char(major) + '\0';
  for (size_t i = 0; i < lenBytes; ++i)
    out += char((headerLen >> (8 * i)) & 0xff);
  out += dict + std::string(headerLen - dict.size() - 1, ' ') + "\n";
  return out + data;
}

std::string expectError(const std::string &path) {
  HostArray a;
  Status s = readNpy(path, a);
  EXPECT_FALSE(s.ok()) << "accepted " << path;
  EXPECT_EQ(s.message.rfind(path + ": ", 0), 0u) << s.message;
  return s.message;
}

HostArray sample(DType dtype, std::vector<int64_t> shape) {
  HostArray a = HostArray::zeros(dtype, std::move(shape));
  for (int64_t i = 0; i < a.numElements(); ++i)
    a.setFromDouble(i, dtype == DType::Bool ? i % 2 : (i * 7) % 11 - 3);
  if (dtype == DType::U8 || dtype == DType::U16)
    for (int64_t i = 0; i < a.numElements(); ++i)
      a.setFromDouble(i, i * 37 + 200);
  return a;
}

} // namespace

TEST(NpyTest, RoundTripsEveryDType) {
  for (DType dtype :
       {DType::F64, DType::F32, DType::F16, DType::I64, DType::I32, DType::I16,
        DType::I8, DType::U16, DType::U8, DType::Bool}) {
    for (std::vector<int64_t> shape :
         {std::vector<int64_t>{2, 3}, {}, {0}, {4, 0, 2}, {5}}) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " " + formatShape(shape));
      HostArray a = sample(dtype, shape);
      std::string path = tempPath("rt.npy");
      ASSERT_TRUE(writeNpy(path, a).ok());
      HostArray b;
      Status s = readNpy(path, b);
      ASSERT_TRUE(s.ok()) << s.message;
      EXPECT_EQ(b.dtype, a.dtype);
      EXPECT_EQ(b.shape, a.shape);
      EXPECT_EQ(b.data, a.data);
      // The data starts on a 64-byte boundary, as NumPy aligns it.
      EXPECT_EQ((readBytes(path).size() - a.data.size()) % 64, 0u);
    }
  }
}

TEST(NpyTest, InMemoryRoundTrip) {
  HostArray a = sample(DType::I16, {3, 1});
  std::vector<uint8_t> image;
  ASSERT_TRUE(serializeNpy(a, "mem", image).ok());
  HostArray b;
  ASSERT_TRUE(parseNpy(image.data(), image.size(), "mem", b).ok());
  EXPECT_EQ(b.shape, a.shape);
  EXPECT_EQ(b.data, a.data);
}

TEST(NpyTest, WritesNumPyHeaderSyntax) {
  HostArray a = sample(DType::F32, {3});
  std::vector<uint8_t> image;
  ASSERT_TRUE(serializeNpy(a, "mem", image).ok());
  std::string text(image.begin(), image.end() - 12);
  EXPECT_EQ(text.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(size_t(uint8_t(text[8]) | uint8_t(text[9]) << 8), text.size() - 10);
  EXPECT_EQ(text.size() % 64, 0u);
  EXPECT_EQ(text.find("{'descr': '<f4', 'fortran_order': False, "
                      "'shape': (3,), }"),
            10u);
  EXPECT_EQ(text.back(), '\n');
}

TEST(NpyTest, ReadsNumPyWrittenFiles) {
  // Bytes as np.save writes np.array([[1, 2, 3], [4, 5, 6]], dtype='<i4').
  std::string data;
  for (int32_t v : {1, 2, 3, 4, 5, 6})
    data.append(reinterpret_cast<const char *>(&v), 4);
  std::string path = tempPath("numpy.npy");
  for (unsigned major : {1u, 2u, 3u}) {
    writeBytes(path, numpyImage("{'descr': '<i4', 'fortran_order': False, "
                                "'shape': (2, 3), }",
                                data, major));
    HostArray a;
    Status s = readNpy(path, a);
    ASSERT_TRUE(s.ok()) << s.message;
    EXPECT_EQ(a.dtype, DType::I32);
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.getAsInt(5), 6);
  }

  // A 0-d float32 (np.save of np.float32(2.5)), keys in another order and
  // Python 2 long literals.
  float f = 2.5f;
  writeBytes(path, numpyImage("{\"shape\": (), \"fortran_order\": False, "
                              "\"descr\": \"<f4\"}",
                              std::string(reinterpret_cast<char *>(&f), 4)));
  HostArray scalar;
  ASSERT_TRUE(readNpy(path, scalar).ok());
  EXPECT_TRUE(scalar.shape.empty());
  EXPECT_EQ(scalar.getAsDouble(0), 2.5);

  writeBytes(path, numpyImage("{'descr': '|b1', 'fortran_order': False, "
                              "'shape': (2L,), }",
                              std::string("\x01\x00", 2)));
  HostArray flags;
  ASSERT_TRUE(readNpy(path, flags).ok());
  EXPECT_EQ(flags.dtype, DType::Bool);
  EXPECT_EQ(flags.getAsInt(0), 1);
  EXPECT_EQ(flags.getAsInt(1), 0);
}

TEST(NpyTest, AcceptsByteOrderPrefixesWhereValid) {
  std::string path = tempPath("order.npy");
  auto tryDescr = [&](const std::string &descr, size_t size) {
    writeBytes(path, numpyImage("{'descr': '" + descr +
                                    "', 'fortran_order': False, 'shape': "
                                    "(1,), }",
                                std::string(size, '\0')));
    HostArray a;
    return readNpy(path, a);
  };
  EXPECT_TRUE(tryDescr("=f4", 4).ok());
  EXPECT_TRUE(tryDescr("|u1", 1).ok());
  EXPECT_TRUE(tryDescr("<i1", 1).ok());
  EXPECT_TRUE(tryDescr(">u1", 1).ok());
  EXPECT_NE(tryDescr(">f4", 4).message.find("big-endian"), std::string::npos);
  EXPECT_NE(tryDescr("|f4", 4).message.find("byte order"), std::string::npos);
  EXPECT_NE(tryDescr("<u4", 4).message.find("unsupported dtype '<u4'"),
            std::string::npos);
  EXPECT_NE(tryDescr("<c8", 8).message.find("unsupported dtype"),
            std::string::npos);
}

TEST(NpyTest, RefusesTruncatedFiles) {
  std::string path = tempPath("x.npy");
  HostArray a = HostArray::zeros(DType::F32, {4, 48});
  ASSERT_TRUE(writeNpy(path, a).ok());
  std::string full = readBytes(path);
  writeBytes(path, full.substr(0, full.size() - 256));
  EXPECT_EQ(expectError(path),
            path + ": truncated: header says 4x48 float32 = 768 bytes of "
                   "data but the file has 512");

  writeBytes(path, full + "xx");
  EXPECT_NE(expectError(path).find("2 extra bytes"), std::string::npos);

  // Every prefix of a valid image is refused, never read out of bounds.
  std::vector<uint8_t> image(full.begin(), full.end());
  for (size_t n = 0; n < image.size(); ++n) {
    HostArray b;
    Status s = parseNpy(image.data(), n, "cut.npy", b);
    ASSERT_FALSE(s.ok()) << n;
    EXPECT_EQ(s.message.rfind("cut.npy: ", 0), 0u);
  }
}

TEST(NpyTest, RefusesGarbageHeaders) {
  std::string path = tempPath("bad.npy");
  const char *dicts[] = {
      "[1, 2]",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)",
      "{'descr': '<f4', 'fortran_order': False}",
      "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': [2]}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}",
      "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False}",
      "{'descr': '<f4, 'fortran_order': False, 'shape': (2,)}",
      "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,)}",
      "{'descr': '<f4', 'fortran_order': False, 'shape': (2,)} junk",
      "{'descr': '<f4', 'fortran_order': False, "
      "'shape': (99999999999999999999,)}",
      "{'descr': '<f8', 'fortran_order': False, "
      "'shape': (4294967296, 4294967296)}",
      "{'descr': '<f8', 'fortran_order': False, "
      "'shape': (3037000500, 3037000500)}",
      "\x01\xff\x80{garbage\x7f",
  };
  for (const char *dict : dicts) {
    SCOPED_TRACE(dict);
    writeBytes(path, numpyImage(dict, std::string(8, '\0')));
    expectError(path);
  }

  writeBytes(path, "PK\x03\x04 this is a zip file, not npy");
  EXPECT_NE(expectError(path).find("not an npy file"), std::string::npos);
  writeBytes(path, numpyImage("{}", "", 4));
  EXPECT_NE(expectError(path).find("version 4.0"), std::string::npos);
  std::string huge = std::string("\x93NUMPY\x02\x00", 8) + "\xff\xff\xff\x7f";
  writeBytes(path, huge);
  EXPECT_NE(expectError(path).find("header length"), std::string::npos);
  EXPECT_NE(expectError(tempPath("missing.npy")).find("cannot open"),
            std::string::npos);
}

TEST(NpyTest, RefusesFortranOrder) {
  std::string path = tempPath("fortran.npy");
  writeBytes(path, numpyImage("{'descr': '<f4', 'fortran_order': True, "
                              "'shape': (2, 2), }",
                              std::string(16, '\0')));
  EXPECT_NE(expectError(path).find("np.ascontiguousarray"), std::string::npos);
}

TEST(NpyTest, SurvivesRandomCorruption) {
  HostArray a = sample(DType::I64, {3, 4});
  std::vector<uint8_t> image;
  ASSERT_TRUE(serializeNpy(a, "fuzz", image).ok());
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 20000; ++iter) {
    std::vector<uint8_t> bytes = image;
    int flips = 1 + int(rng() % 4);
    for (int k = 0; k < flips; ++k)
      bytes[rng() % 128] = uint8_t(rng());
    HostArray b;
    Status s = parseNpy(bytes.data(), bytes.size(), "fuzz", b);
    if (s.ok())
      EXPECT_EQ(b.data.size(), size_t(b.numElements()) * dtypeSize(b.dtype));
    else
      EXPECT_EQ(s.message.rfind("fuzz: ", 0), 0u);
  }
}

TEST(NpyTest, WritesAtomically) {
  std::string path = tempPath("atomic.npy");
  ASSERT_TRUE(writeNpy(path, sample(DType::F32, {2})).ok());
  std::string before = readBytes(path);

  // A refused write leaves the old file alone.
  Status s = writeNpy(path, HostArray::zeros(DType::BF16, {2}));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message.rfind(path + ": ", 0), 0u);
  EXPECT_NE(s.message.find("cast the array to F32"), std::string::npos);
  HostArray bad = HostArray::zeros(DType::F32, {3});
  bad.data.pop_back();
  EXPECT_NE(writeNpy(path, bad).message.find("needs 12 bytes"),
            std::string::npos);
  EXPECT_EQ(readBytes(path), before);

  // No temporary file is left behind next to the target.
  DIR *dir = opendir(::testing::TempDir().c_str());
  ASSERT_NE(dir, nullptr);
  while (dirent *e = readdir(dir))
    EXPECT_EQ(std::string(e->d_name).find("atomic.npy.tmp"), std::string::npos);
  closedir(dir);

  Status noDir = writeNpy(tempPath("no/such/dir.npy"), sample(DType::F32, {}));
  EXPECT_EQ(noDir.message.rfind(tempPath("no/such/dir.npy: "), 0), 0u)
      << noDir.message;
}

//===----------------------------------------------------------------------===//
// HostArray element conversions (exercised here because .npy carries f16)
//===----------------------------------------------------------------------===//

namespace {

uint16_t encode(DType dtype, double v) {
  HostArray a = HostArray::zeros(dtype, {});
  a.setFromDouble(0, v);
  uint16_t bits;
  std::memcpy(&bits, a.data.data(), 2);
  return bits;
}

double decode(DType dtype, uint16_t bits) {
  HostArray a = HostArray::zeros(dtype, {});
  std::memcpy(a.data.data(), &bits, 2);
  return a.getAsDouble(0);
}

} // namespace

TEST(HostArrayTest, BF16RoundsToNearestEven) {
  EXPECT_EQ(decode(DType::BF16, encode(DType::BF16, 1.00390625f)), 1.0);
  EXPECT_EQ(decode(DType::BF16, encode(DType::BF16, 1.01171875f)), 1.015625);
  // Just above the tie as a double but exactly on it once narrowed to f32:
  // rounding through float would wrongly give 1.0.
  EXPECT_EQ(decode(DType::BF16, encode(DType::BF16, 1.0039063)), 1.0078125);
  EXPECT_EQ(encode(DType::BF16, -0.0), 0x8000);
  EXPECT_EQ(encode(DType::BF16, 3.4e38), 0x7f80); // Rounds past max: inf.
  EXPECT_TRUE(std::isnan(decode(DType::BF16, encode(DType::BF16, NAN))));

  // Agrees with the usual bit trick on f32 inputs, and every finite bf16
  // survives decode + encode.
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f))
      continue;
    uint32_t expected = (bits + 0x7fff + ((bits >> 16) & 1)) >> 16;
    ASSERT_EQ(encode(DType::BF16, f), expected) << std::hex << bits;
  }
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0)
      continue; // NaN payloads are not preserved.
    ASSERT_EQ(encode(DType::BF16, decode(DType::BF16, uint16_t(b))), b);
  }
}

TEST(HostArrayTest, F16SubnormalsAndRounding) {
  const double tiny = std::ldexp(1.0, -24); // Smallest f16 subnormal.
  EXPECT_EQ(decode(DType::F16, 0x0001), tiny);
  EXPECT_EQ(decode(DType::F16, 0x8001), -tiny);
  EXPECT_EQ(decode(DType::F16, 0x03ff), 1023 * tiny);
  EXPECT_EQ(decode(DType::F16, 0x0400), std::ldexp(1.0, -14));
  EXPECT_EQ(decode(DType::F16, 0x7bff), 65504.0);
  EXPECT_EQ(encode(DType::F16, tiny), 0x0001);
  EXPECT_EQ(encode(DType::F16, tiny / 2), 0x0000);      // Tie to even: 0.
  EXPECT_EQ(encode(DType::F16, tiny * 1.5), 0x0002);    // Tie to even: 2.
  EXPECT_EQ(encode(DType::F16, tiny * 0.5000001), 1);   // Above the tie.
  EXPECT_EQ(encode(DType::F16, 1023.5 * tiny), 0x0400); // Into the normals.
  EXPECT_EQ(encode(DType::F16, 65519.0), 0x7bff);
  EXPECT_EQ(encode(DType::F16, 65520.0), 0x7c00); // Tie rounds up to inf.
  EXPECT_EQ(encode(DType::F16, -1e10), 0xfc00);
  EXPECT_EQ(encode(DType::F16, 1.0 + 1.0 / 2048), 0x3c00);
  EXPECT_EQ(encode(DType::F16, 1.0 + 3.0 / 2048), 0x3c02);
  for (uint32_t b = 0; b < 0x10000; ++b) {
    if ((b & 0x7c00) == 0x7c00 && (b & 0x3ff) != 0)
      continue; // NaN payloads are not preserved.
    ASSERT_EQ(encode(DType::F16, decode(DType::F16, uint16_t(b))), b);
  }
#ifdef __FLT16_MAX__
  std::mt19937 rng(11);
  for (int i = 0; i < 200000; ++i) {
    uint32_t bits = rng();
    float f;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f))
      continue;
    _Float16 h = static_cast<_Float16>(f);
    uint16_t expected;
    std::memcpy(&expected, &h, 2);
    ASSERT_EQ(encode(DType::F16, f), expected) << std::hex << bits;
  }
#endif
}

TEST(HostArrayTest, IntegerAndBoolConversions) {
  HostArray a = HostArray::zeros(DType::I32, {6});
  const double in[] = {-2.7, 2.7, 1e20, -1e20, NAN, 7};
  const int64_t out[] = {-2, 2, INT32_MAX, INT32_MIN, 0, 7};
  for (int i = 0; i < 6; ++i)
    a.setFromDouble(i, in[i]);
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(a.getAsInt(i), out[i]);

  HostArray u = HostArray::zeros(DType::U8, {2});
  u.setFromDouble(0, -5);
  u.setFromDouble(1, 300);
  EXPECT_EQ(u.getAsInt(0), 0);
  EXPECT_EQ(u.getAsInt(1), 255);

  HostArray b = HostArray::zeros(DType::Bool, {2});
  b.setFromDouble(0, 0.5);
  EXPECT_EQ(b.getAsInt(0), 1);
  EXPECT_EQ(b.getAsDouble(1), 0.0);

  HostArray f = HostArray::zeros(DType::F32, {2});
  f.setFromDouble(0, -2.7);
  f.setFromDouble(1, 1e300);
  EXPECT_EQ(f.getAsInt(0), -2);
  EXPECT_TRUE(std::isinf(f.getAsDouble(1)));
  EXPECT_EQ(f.getAsInt(1), INT64_MAX);

  HostArray big = HostArray::zeros(DType::I64, {1});
  big.setFromDouble(0, 9.3e18);
  EXPECT_EQ(big.getAsInt(0), INT64_MAX);
}
