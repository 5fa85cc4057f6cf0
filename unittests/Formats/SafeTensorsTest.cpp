//===- SafeTensorsTest.cpp - Tests for safetensors I/O --------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#include "weft/Formats/SafeTensors.h"

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include <unistd.h>

using namespace weft::rt;

namespace {

std::string tempPath(const std::string &name) {
  return ::testing::TempDir() + "weft_st_" + std::to_string(::getpid()) + "_" +
         name;
}

void writeBytes(const std::string &path, const std::string &bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string readBytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

/// A safetensors image with `header` as its JSON and `dataLen` bytes of data.
std::string image(const std::string &header, size_t dataLen,
                  uint64_t headerLen = ~uint64_t(0)) {
  if (headerLen == ~uint64_t(0))
    headerLen = header.size();
  std::string out;
  for (int i = 0; i < 8; ++i)
    out += char((headerLen >> (8 * i)) & 0xff);
  return out + header + std::string(dataLen, '\x5a');
}

HostArray sample(DType dtype, std::vector<int64_t> shape) {
  HostArray a = HostArray::zeros(dtype, std::move(shape));
  for (int64_t i = 0; i < a.numElements(); ++i)
    a.setFromDouble(i, dtype == DType::Bool ? i % 2 : (i * 5) % 9 + 1);
  return a;
}

/// Reads `bytes` as a file and returns the error, which must name the file.
std::string readError(const std::string &bytes) {
  std::string path = tempPath("bad.safetensors");
  writeBytes(path, bytes);
  SafeTensorsFile f;
  Status s = readSafeTensors(path, f);
  EXPECT_FALSE(s.ok()) << "accepted: " << bytes.substr(8);
  EXPECT_EQ(s.message.rfind(path + ": ", 0), 0u) << s.message;
  return s.message;
}

void expectErrorMentions(const std::string &bytes, const std::string &what) {
  std::string message = readError(bytes);
  EXPECT_NE(message.find(what), std::string::npos) << message;
}

} // namespace

TEST(SafeTensorsTest, RoundTripPreservesOrderAndMetadata) {
  SafeTensorsFile f;
  // Deliberately unsorted names, every dtype, a scalar and empty tensors.
  const DType dtypes[] = {DType::F64, DType::F32, DType::F16, DType::BF16,
                          DType::I64, DType::I32, DType::I16, DType::I8,
                          DType::U16, DType::U8,  DType::Bool};
  int n = 0;
  for (DType d : dtypes)
    f.tensors.emplace_back("z" + std::to_string(10 - n++) + dtypeName(d),
                           sample(d, {2, 3}));
  f.tensors.emplace_back("scalar", sample(DType::F32, {}));
  f.tensors.emplace_back("empty.a", sample(DType::F32, {0, 4}));
  f.tensors.emplace_back("empty.b", sample(DType::I8, {0}));
  f.tensors.emplace_back("a.w\xc3\xa9ight \"quoted\"\n",
                         sample(DType::F16, {3}));
  f.metadata = {{"format", "pt"}, {"a", "\xe2\x9c\x93"}, {"empty", ""}};

  std::string path = tempPath("rt.safetensors");
  Status s = writeSafeTensors(path, f);
  ASSERT_TRUE(s.ok()) << s.message;
  SafeTensorsFile g;
  s = readSafeTensors(path, g);
  ASSERT_TRUE(s.ok()) << s.message;
  EXPECT_EQ(g.metadata, f.metadata);
  ASSERT_EQ(g.tensors.size(), f.tensors.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    SCOPED_TRACE(f.tensors[i].first);
    EXPECT_EQ(g.tensors[i].first, f.tensors[i].first);
    EXPECT_EQ(g.tensors[i].second.dtype, f.tensors[i].second.dtype);
    EXPECT_EQ(g.tensors[i].second.shape, f.tensors[i].second.shape);
    EXPECT_EQ(g.tensors[i].second.data, f.tensors[i].second.data);
  }

  // Writing the same contents again gives the same bytes.
  std::string first = readBytes(path);
  ASSERT_TRUE(writeSafeTensors(path, g).ok());
  EXPECT_EQ(readBytes(path), first);
}

TEST(SafeTensorsTest, WritesReferenceLayout) {
  SafeTensorsFile f;
  f.tensors.emplace_back("w", sample(DType::F32, {2}));
  f.tensors.emplace_back("b", sample(DType::BF16, {1}));
  f.metadata = {{"format", "pt"}};
  std::string path = tempPath("layout.safetensors");
  ASSERT_TRUE(writeSafeTensors(path, f).ok());
  std::string bytes = readBytes(path);
  std::string json = "{\"__metadata__\":{\"format\":\"pt\"},"
                     "\"w\":{\"dtype\":\"F32\",\"shape\":[2],"
                     "\"data_offsets\":[0,8]},"
                     "\"b\":{\"dtype\":\"BF16\",\"shape\":[1],"
                     "\"data_offsets\":[8,10]}}";
  size_t padded = (json.size() + 7) / 8 * 8;
  ASSERT_EQ(bytes.size(), 8 + padded + 10);
  EXPECT_EQ(bytes.substr(0, 8), image("", 0, padded));
  EXPECT_EQ(bytes.substr(8, padded),
            json + std::string(padded - json.size(), ' '));
}

TEST(SafeTensorsTest, ReadsForeignHeaders) {
  // Entries listed in a different order from their offsets, whitespace, an
  // unknown extra field, and no metadata: the reader follows header order.
  std::string header = R"( { "b" : {"data_offsets": [8, 10], "dtype": "U8",
      "shape": [2], "extra": {"x": [1]}},
    "a": {"dtype": "I32", "shape": [1, 2], "data_offsets": [0, 8]} }   )";
  std::string path = tempPath("foreign.safetensors");
  std::string bytes = image(header, 0);
  for (int32_t v : {-1, 7})
    bytes.append(reinterpret_cast<const char *>(&v), 4);
  bytes += "\x03\x04";
  writeBytes(path, bytes);
  SafeTensorsFile f;
  Status s = readSafeTensors(path, f);
  ASSERT_TRUE(s.ok()) << s.message;
  ASSERT_EQ(f.tensors.size(), 2u);
  EXPECT_EQ(f.tensors[0].first, "b");
  EXPECT_EQ(f.tensors[0].second.getAsInt(1), 4);
  EXPECT_EQ(f.tensors[1].first, "a");
  EXPECT_EQ(f.tensors[1].second.shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(f.tensors[1].second.getAsInt(0), -1);
  EXPECT_TRUE(f.metadata.empty());

  writeBytes(path, image("{}", 0));
  ASSERT_TRUE(readSafeTensors(path, f).ok());
  EXPECT_TRUE(f.tensors.empty());
}

TEST(SafeTensorsTest, RefusesBadHeaderLength) {
  std::string ok = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  expectErrorMentions(image(ok, 4, ok.size() + 5), "header length");
  expectErrorMentions(image(ok, 4, ~uint64_t(0) - 1), "header length");
  expectErrorMentions(image(ok, 4, 0), "not valid JSON");
  expectErrorMentions("\x01\x02\x03", "too short");
  expectErrorMentions(image(ok, 4, ok.size() - 3), "not valid JSON");
  expectErrorMentions(image(ok, 3), "run past the 3-byte data buffer");
}

TEST(SafeTensorsTest, RefusesBadOffsets) {
  auto entry = [](const std::string &name, const std::string &offsets) {
    return "\"" + name +
           "\":{\"dtype\":\"F32\",\"shape\":[2],"
           "\"data_offsets\":" +
           offsets + "}";
  };
  expectErrorMentions(image("{" + entry("a", "[0,8]") + "}", 4),
                      "run past the 4-byte data buffer");
  expectErrorMentions(
      image("{" + entry("a", "[0,8]") + "," + entry("b", "[4,12]") + "}", 12),
      "tensors 'a' [0, 8) and 'b' [4, 12) overlap");
  expectErrorMentions(
      image("{" + entry("a", "[0,8]") + "," + entry("b", "[0,8]") + "}", 8),
      "overlap");
  expectErrorMentions(
      image("{" + entry("a", "[0,8]") + "," + entry("b", "[12,20]") + "}", 20),
      "bytes [8, 12) of the data buffer belong to no tensor");
  expectErrorMentions(image("{" + entry("a", "[0,8]") + "}", 9),
                      "bytes [8, 9) of the data buffer belong to no tensor");
  expectErrorMentions(image("{" + entry("a", "[0,4]") + "}", 4),
                      "hold 4 bytes but 2 F32 needs 8");
  expectErrorMentions(image("{" + entry("a", "[8,0]") + "}", 8), "reversed");
  expectErrorMentions(image("{" + entry("a", "[0]") + "}", 8),
                      "'data_offsets'");
  expectErrorMentions(image("{" + entry("a", "[0,-8]") + "}", 8),
                      "'data_offsets'");
}

TEST(SafeTensorsTest, RefusesMalformedEntries) {
  expectErrorMentions(
      image(R"({"w":{"dtype":"F8_E4M3","shape":[1],"data_offsets":[0,1]}})", 1),
      "tensor 'w': unsupported dtype 'F8_E4M3'");
  expectErrorMentions(image(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", 1),
                      "tensor 'w': missing or non-string 'dtype'");
  expectErrorMentions(image(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1),
                      "tensor 'w': missing 'shape'");
  expectErrorMentions(
      image(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1),
      "'shape'");
  expectErrorMentions(
      image(R"({"w":{"dtype":"U8","shape":[1.0],"data_offsets":[0,1]}})", 1),
      "'shape'");
  expectErrorMentions(
      image(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],)"
            R"("data_offsets":[0,1]}})",
            1),
      "too large");
  expectErrorMentions(image(R"({"w":{"dtype":"U8","shape":[1]}})", 1),
                      "'data_offsets'");
  expectErrorMentions(image(R"({"w":[1]})", 0), "not an object");
  expectErrorMentions(image("[]", 0), "header is not a JSON object");
  expectErrorMentions(image(R"({"__metadata__":{"k":1}})", 0),
                      "__metadata__ value for 'k' is not a string");
  expectErrorMentions(image(R"({"__metadata__":["k"]})", 0),
                      "__metadata__ is not an object");
  expectErrorMentions(image(R"({"__metadata__":{"k":"a","k":"b"}})", 0),
                      "repeats a key");
  std::string w = R"("w":{"dtype":"U8","shape":[0],"data_offsets":[0,0]})";
  expectErrorMentions(image("{" + w + "," + w + "}", 0), "lists 'w' twice");
  expectErrorMentions(image(R"({"w": {"dtype": "U8",, }})", 0),
                      "not valid JSON");
  expectErrorMentions(image(std::string(100000, '[') + "0", 0), "nests deeper");
}

TEST(SafeTensorsTest, SurvivesRandomCorruption) {
  SafeTensorsFile f;
  f.tensors.emplace_back("w", sample(DType::F32, {2, 2}));
  f.tensors.emplace_back("b", sample(DType::I64, {2}));
  f.metadata = {{"format", "pt"}};
  std::string path = tempPath("fuzz.safetensors");
  ASSERT_TRUE(writeSafeTensors(path, f).ok());
  std::string good = readBytes(path);
  size_t headerEnd = 8 + size_t(uint8_t(good[0]));
  std::mt19937 rng(99);
  for (int iter = 0; iter < 3000; ++iter) {
    std::string bytes = good;
    int flips = 1 + int(rng() % 3);
    for (int k = 0; k < flips; ++k)
      bytes[rng() % headerEnd] = char(rng());
    if (rng() % 4 == 0)
      bytes.resize(rng() % bytes.size());
    writeBytes(path, bytes);
    SafeTensorsFile g;
    Status s = readSafeTensors(path, g);
    if (s.ok())
      for (const auto &[name, a] : g.tensors)
        EXPECT_TRUE(a.checkLayout().ok()) << name;
    else
      EXPECT_EQ(s.message.rfind(path + ": ", 0), 0u) << s.message;
  }
}

TEST(SafeTensorsTest, RefusesUnwritableContents) {
  std::string path = tempPath("refused.safetensors");
  auto writeError = [&](SafeTensorsFile f) {
    Status s = writeSafeTensors(path, f);
    EXPECT_FALSE(s.ok());
    EXPECT_EQ(s.message.rfind(path + ": cannot write: ", 0), 0u) << s.message;
    return s.message;
  };
  HostArray a = sample(DType::F32, {1});
  EXPECT_NE(writeError({{{"w", a}, {"w", a}}, {}}).find("appears twice"),
            std::string::npos);
  EXPECT_NE(writeError({{{"__metadata__", a}}, {}}).find("__metadata__"),
            std::string::npos);
  EXPECT_NE(writeError({{{"bad\xff", a}}, {}}).find("UTF-8"),
            std::string::npos);
  EXPECT_NE(writeError({{}, {{"k", "\xed\xa0\x80"}}}).find("UTF-8"),
            std::string::npos);
  EXPECT_NE(writeError({{}, {{"k", "1"}, {"k", "2"}}}).find("appears twice"),
            std::string::npos);
  HostArray shortData = a;
  shortData.data.pop_back();
  EXPECT_NE(writeError({{{"w", shortData}}, {}}).find("needs 4 bytes"),
            std::string::npos);
  EXPECT_NE(access(path.c_str(), F_OK), 0) << "a refused write left a file";
}
