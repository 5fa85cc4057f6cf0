//===- OnnxModelTest.cpp - Tests for the ONNX file layer ------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Models are built in C++ and written to a fresh temporary directory per test,
// so the tests need no checked-in binaries and can corrupt files at will.
//
//===----------------------------------------------------------------------===//

#include "weft/Import/OnnxModel.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

using namespace weft;
using namespace weft::onnximport;
namespace fs = std::filesystem;

namespace {

class OnnxModelTest : public ::testing::Test {
protected:
  void SetUp() override {
    std::string pattern =
        (fs::temp_directory_path() / "weft-onnx-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir = pattern;
  }
  void TearDown() override { fs::remove_all(dir); }

  std::string path(const std::string &name) const {
    return (fs::path(dir) / name).string();
  }
  void writeFile(const std::string &name, const std::string &bytes) const {
    std::ofstream(path(name), std::ios::binary) << bytes;
  }
  std::string writeModel(const onnx::ModelProto &model,
                         const std::string &name = "model.onnx") const {
    writeFile(name, model.SerializeAsString());
    return path(name);
  }

  std::string dir;
};

void addTensorValue(
    google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> *values,
    const std::string &name, std::vector<int64_t> dims) {
  onnx::ValueInfoProto *value = values->Add();
  value->set_name(name);
  auto *type = value->mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::FLOAT);
  for (int64_t d : dims)
    type->mutable_shape()->add_dim()->set_dim_value(d);
}

std::string floatBytes(const std::vector<float> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(float));
}

/// Y = MatMul(X, W) with W a 2x2 float initializer.
onnx::ModelProto makeModel() {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.set_producer_name("weft-test");
  onnx::OperatorSetIdProto *opset = model.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  onnx::GraphProto *graph = model.mutable_graph();
  graph->set_name("g");
  addTensorValue(graph->mutable_input(), "X", {1, 2});
  onnx::TensorProto *w = graph->add_initializer();
  w->set_name("W");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(2);
  w->set_raw_data(floatBytes({1, 2, 3, 4}));
  onnx::NodeProto *node = graph->add_node();
  node->set_name("mm");
  node->set_op_type("MatMul");
  node->add_input("X");
  node->add_input("W");
  node->add_output("Y");
  addTensorValue(graph->mutable_output(), "Y", {1, 2});
  return model;
}

/// Checks that an error message mentions `part`, printing it if not.
::testing::AssertionResult contains(const std::string &text,
                                    const std::string &part) {
  if (text.find(part) != std::string::npos)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\" does not contain \"" << part << "\"";
}

/// Element `i` of `array` reinterpreted as T, or T() if it is out of range.
template <typename T> T element(const rt::HostArray &array, size_t i) {
  T value{};
  EXPECT_LE((i + 1) * sizeof(T), array.data.size());
  if ((i + 1) * sizeof(T) <= array.data.size())
    std::memcpy(&value, array.data.data() + i * sizeof(T), sizeof(T));
  return value;
}

onnx::TensorProto makeTensor(const std::string &name, int dtype,
                             std::vector<int64_t> dims) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(dtype);
  for (int64_t d : dims)
    t.add_dims(d);
  return t;
}

void setExternal(onnx::TensorProto &t, const std::string &location,
                 const std::string &offset, const std::string &length) {
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char *key, const std::string &value) {
    if (value.empty())
      return;
    onnx::StringStringEntryProto *entry = t.add_external_data();
    entry->set_key(key);
    entry->set_value(value);
  };
  add("location", location);
  add("offset", offset);
  add("length", length);
}

//===----------------------------------------------------------------------===//
// loadOnnxModel
//===----------------------------------------------------------------------===//

TEST_F(OnnxModelTest, LoadsValidModel) {
  onnx::ModelProto model;
  rt::Status status = loadOnnxModel(writeModel(makeModel()), model);
  ASSERT_TRUE(status.ok()) << status.message;
  EXPECT_EQ(getDefaultOpset(model), 17);
  ASSERT_EQ(model.graph().node_size(), 1);
  EXPECT_EQ(model.graph().node(0).op_type(), "MatMul");
}

TEST_F(OnnxModelTest, AcceptsAiOnnxDomainAndOptionalInputs) {
  onnx::ModelProto model = makeModel();
  model.mutable_opset_import(0)->set_domain("ai.onnx");
  onnx::NodeProto *clip = model.mutable_graph()->add_node();
  clip->set_op_type("Clip");
  clip->add_input("Y");
  clip->add_input("");
  clip->add_input("W");
  clip->add_output("Z");
  onnx::ModelProto loaded;
  rt::Status status = loadOnnxModel(writeModel(model), loaded);
  EXPECT_TRUE(status.ok()) << status.message;
  EXPECT_EQ(getDefaultOpset(loaded), 17);
}

TEST_F(OnnxModelTest, RefusesEveryTruncation) {
  std::string bytes = makeModel().SerializeAsString();
  for (size_t n = 0; n < bytes.size(); ++n) {
    writeFile("cut.onnx", bytes.substr(0, n));
    onnx::ModelProto model;
    EXPECT_FALSE(loadOnnxModel(path("cut.onnx"), model).ok())
        << "prefix of " << n << " bytes accepted";
  }
  writeFile("cut.onnx", bytes.substr(0, bytes.size() - 7));
  onnx::ModelProto model;
  EXPECT_EQ(loadOnnxModel(path("cut.onnx"), model).message,
            path("cut.onnx") + ": not a valid ONNX model (protobuf parse "
                               "failed); is the file truncated?");
}

TEST_F(OnnxModelTest, RefusesGarbage) {
  std::mt19937 rng(1234);
  for (int trial = 0; trial < 300; ++trial) {
    std::string bytes(1 + rng() % 2048, '\0');
    for (char &c : bytes)
      c = static_cast<char>(rng());
    writeFile("junk.onnx", bytes);
    onnx::ModelProto model;
    EXPECT_FALSE(loadOnnxModel(path("junk.onnx"), model).ok());
  }
}

TEST_F(OnnxModelTest, RefusesTrailingJunk) {
  // A zero byte ends a protobuf message, so the parser alone accepts this.
  writeFile("tail.onnx",
            makeModel().SerializeAsString() + std::string(1, '\0') + "junk");
  onnx::ModelProto model;
  EXPECT_TRUE(contains(loadOnnxModel(path("tail.onnx"), model).message,
                       "protobuf parse failed"));
}

TEST_F(OnnxModelTest, RefusesMissingFileAndDirectory) {
  onnx::ModelProto model;
  std::string missing = path("nope.onnx");
  rt::Status status = loadOnnxModel(missing, model);
  EXPECT_TRUE(contains(status.message, missing));
  EXPECT_TRUE(contains(status.message, "No such file"));
  EXPECT_TRUE(contains(loadOnnxModel(dir, model).message, "is a directory"));
}

/// Loads `file` and returns the error message ("" on success).
std::string loadError(const std::string &file) {
  onnx::ModelProto model;
  return loadOnnxModel(file, model).message;
}

TEST_F(OnnxModelTest, RefusesStructuralErrors) {
  onnx::ModelProto model = makeModel();
  model.set_ir_version(0);
  EXPECT_TRUE(contains(loadError(writeModel(model)), "ir_version"));

  model = makeModel();
  model.clear_graph();
  EXPECT_TRUE(contains(loadError(writeModel(model)), "no graph"));

  model = makeModel();
  model.mutable_opset_import(0)->set_domain("com.example");
  EXPECT_TRUE(contains(loadError(writeModel(model)),
                       "no opset for the default ONNX domain"));

  model = makeModel();
  model.mutable_graph()->mutable_node(0)->clear_op_type();
  EXPECT_TRUE(
      contains(loadError(writeModel(model)), "node #0 'mm' has no op_type"));

  model = makeModel();
  model.mutable_graph()->mutable_node(0)->set_input(1, "V");
  EXPECT_TRUE(contains(loadError(writeModel(model)),
                       "node 'mm' (MatMul) input 'V' is not a graph input"));

  model = makeModel();
  model.mutable_graph()->mutable_output(0)->set_name("Q");
  EXPECT_TRUE(contains(loadError(writeModel(model)), "graph output 'Q'"));
}

TEST_F(OnnxModelTest, RefusesNodesOutOfOrder) {
  onnx::ModelProto model = makeModel();
  onnx::NodeProto *relu = model.mutable_graph()->add_node();
  relu->set_op_type("Relu");
  relu->add_input("Y");
  relu->add_output("R");
  model.mutable_graph()->mutable_node()->SwapElements(0, 1);
  EXPECT_TRUE(
      contains(loadError(writeModel(model)), "node #0 (Relu) input 'Y'"));
}

TEST_F(OnnxModelTest, ChecksSubgraphsWithOuterScope) {
  onnx::ModelProto model = makeModel();
  onnx::NodeProto *node = model.mutable_graph()->add_node();
  node->set_name("if");
  node->set_op_type("If");
  node->add_input("X");
  node->add_output("Z");
  onnx::AttributeProto *attr = node->add_attribute();
  attr->set_name("then_branch");
  attr->set_type(onnx::AttributeProto::GRAPH);
  onnx::NodeProto *inner = attr->mutable_g()->add_node();
  inner->set_op_type("Identity");
  inner->add_input("W"); // Outer-scope name: legal.
  inner->add_output("T");
  addTensorValue(attr->mutable_g()->mutable_output(), "T", {2, 2});
  EXPECT_EQ(loadError(writeModel(model)), "");

  inner->set_input(0, "Z"); // The If's own output is not visible inside.
  EXPECT_TRUE(contains(loadError(writeModel(model)),
                       "in subgraph 'then_branch' of node 'if' (If): node "
                       "#0 (Identity) input 'Z'"));
}

TEST_F(OnnxModelTest, RefusesOnnxMlAndFunctions) {
  onnx::ModelProto model = makeModel();
  onnx::OperatorSetIdProto *ml = model.add_opset_import();
  ml->set_domain("ai.onnx.ml");
  ml->set_version(3);
  onnx::NodeProto *node = model.mutable_graph()->add_node();
  node->set_name("enc");
  node->set_op_type("LabelEncoder");
  node->set_domain("ai.onnx.ml");
  node->add_input("Y");
  node->add_output("L");
  EXPECT_TRUE(contains(loadError(writeModel(model)),
                       "node 'enc' (LabelEncoder) is in the ONNX-ML domain "
                       "'ai.onnx.ml'"));

  model = makeModel();
  onnx::FunctionProto *fn = model.add_functions();
  fn->set_name("MyGelu");
  fn->set_domain("custom.fns");
  EXPECT_TRUE(contains(loadError(writeModel(model)),
                       "function 'MyGelu' in domain 'custom.fns'"));

  model = makeModel();
  model.mutable_graph()->mutable_node(0)->set_domain("com.example");
  EXPECT_TRUE(contains(loadError(writeModel(model)),
                       "domain 'com.example', for which the model imports no "
                       "opset"));
}

//===----------------------------------------------------------------------===//
// tensorToHostArray
//===----------------------------------------------------------------------===//

TEST_F(OnnxModelTest, DecodesRawAndFloatData) {
  rt::HostArray array;
  onnx::TensorProto raw = makeModel().graph().initializer(0);
  ASSERT_TRUE(tensorToHostArray(raw, dir, array).ok());
  EXPECT_EQ(array.dtype, rt::DType::F32);
  EXPECT_EQ(array.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(element<float>(array, 3), 4.0f);

  onnx::TensorProto typed = makeTensor("f", onnx::TensorProto::FLOAT, {3});
  for (float v : {0.5f, -1.25f, 3e9f})
    typed.add_float_data(v);
  ASSERT_TRUE(tensorToHostArray(typed, dir, array).ok());
  EXPECT_EQ(element<float>(array, 1), -1.25f);
  EXPECT_EQ(element<float>(array, 2), 3e9f);

  onnx::TensorProto d = makeTensor("d", onnx::TensorProto::DOUBLE, {});
  d.add_double_data(2.75);
  ASSERT_TRUE(tensorToHostArray(d, dir, array).ok());
  EXPECT_TRUE(array.shape.empty());
  EXPECT_EQ(element<double>(array, 0), 2.75);
}

TEST_F(OnnxModelTest, DecodesIntBoolAndHalf) {
  rt::HostArray array;
  onnx::TensorProto i64 = makeTensor("i", onnx::TensorProto::INT64, {2});
  i64.add_int64_data(-5);
  i64.add_int64_data(int64_t(1) << 40);
  ASSERT_TRUE(tensorToHostArray(i64, dir, array).ok());
  EXPECT_EQ(array.dtype, rt::DType::I64);
  EXPECT_EQ(element<int64_t>(array, 0), -5);
  EXPECT_EQ(element<int64_t>(array, 1), int64_t(1) << 40);

  onnx::TensorProto b = makeTensor("b", onnx::TensorProto::BOOL, {3});
  for (int v : {1, 0, 1})
    b.add_int32_data(v);
  ASSERT_TRUE(tensorToHostArray(b, dir, array).ok());
  EXPECT_EQ(array.dtype, rt::DType::Bool);
  EXPECT_EQ(array.data, (std::vector<uint8_t>{1, 0, 1}));

  // float16 values travel as their bit patterns in int32_data.
  onnx::TensorProto h = makeTensor("h", onnx::TensorProto::FLOAT16, {2});
  h.add_int32_data(0x3C00); // 1.0
  h.add_int32_data(0xC000); // -2.0
  ASSERT_TRUE(tensorToHostArray(h, dir, array).ok());
  EXPECT_EQ(array.dtype, rt::DType::F16);
  EXPECT_EQ(element<uint16_t>(array, 0), 0x3C00);
  EXPECT_EQ(element<uint16_t>(array, 1), 0xC000);

  onnx::TensorProto i8 = makeTensor("i8", onnx::TensorProto::INT8, {2});
  i8.add_int32_data(-128);
  i8.add_int32_data(300);
  EXPECT_TRUE(contains(tensorToHostArray(i8, dir, array).message,
                       "tensor 'i8': int32_data value 300"));
}

TEST_F(OnnxModelTest, RefusesBadTensors) {
  rt::HostArray array;
  onnx::TensorProto s = makeTensor("names", onnx::TensorProto::STRING, {1});
  s.add_string_data("x");
  EXPECT_EQ(tensorToHostArray(s, dir, array).message,
            "tensor 'names': unsupported element type STRING");

  onnx::TensorProto raw = makeTensor("w", onnx::TensorProto::FLOAT, {2, 3});
  raw.set_raw_data(floatBytes({1, 2, 3}));
  EXPECT_TRUE(contains(
      tensorToHostArray(raw, dir, array).message,
      "tensor 'w': raw_data has 12 bytes but dims 2x3 of FLOAT need 24"));

  onnx::TensorProto typed = makeTensor("v", onnx::TensorProto::FLOAT, {4});
  typed.add_float_data(1);
  EXPECT_TRUE(contains(tensorToHostArray(typed, dir, array).message,
                       "tensor 'v': has 1 values in float_data"));

  onnx::TensorProto huge = makeTensor("big", onnx::TensorProto::FLOAT,
                                      {int64_t(1) << 40, int64_t(1) << 40});
  EXPECT_TRUE(contains(tensorToHostArray(huge, dir, array).message,
                       "tensor 'big': invalid dims"));
}

//===----------------------------------------------------------------------===//
// External data
//===----------------------------------------------------------------------===//

TEST_F(OnnxModelTest, LoadsExternalData) {
  fs::create_directory(path("data"));
  writeFile("data/weights.bin", "PAD!" + floatBytes({1.5f, -2.5f}));
  onnx::TensorProto t = makeTensor("w", onnx::TensorProto::FLOAT, {2});
  setExternal(t, "./data/weights.bin", "4", "8");
  rt::HostArray array;
  rt::Status status = tensorToHostArray(t, dir, array);
  ASSERT_TRUE(status.ok()) << status.message;
  EXPECT_EQ(element<float>(array, 0), 1.5f);
  EXPECT_EQ(element<float>(array, 1), -2.5f);

  // offset and length are optional.
  writeFile("w.bin", floatBytes({7, 8}));
  onnx::TensorProto u = makeTensor("u", onnx::TensorProto::FLOAT, {2});
  setExternal(u, "w.bin", "", "");
  ASSERT_TRUE(tensorToHostArray(u, dir, array).ok());
  EXPECT_EQ(element<float>(array, 1), 8.0f);
}

TEST_F(OnnxModelTest, RefusesUnsafeExternalData) {
  fs::create_directory(path("sub"));
  writeFile("w.bin", floatBytes({1, 2}));
  fs::create_symlink(path("w.bin"), path("link.bin"));
  fs::create_directory_symlink(path("sub"), path("linkdir"));
  writeFile("sub/w.bin", floatBytes({1, 2}));

  auto errorFor = [&](const std::string &location, const std::string &offset,
                      const std::string &length) {
    onnx::TensorProto t = makeTensor("w", onnx::TensorProto::FLOAT, {2});
    setExternal(t, location, offset, length);
    rt::HostArray array;
    return tensorToHostArray(t, path("sub"), array).message;
  };
  EXPECT_TRUE(contains(errorFor("../w.bin", "", ""),
                       "tensor 'w': external data '../w.bin' contains '..'"));
  EXPECT_TRUE(contains(errorFor(path("w.bin"), "", ""),
                       "tensor 'w': external data '" + path("w.bin") +
                           "' is an absolute path"));
  EXPECT_EQ(errorFor("w.bin", "", ""), "");

  auto errorInRoot = [&](const std::string &location) {
    onnx::TensorProto t = makeTensor("w", onnx::TensorProto::FLOAT, {2});
    setExternal(t, location, "", "");
    rt::HostArray array;
    return tensorToHostArray(t, dir, array).message;
  };
  EXPECT_TRUE(contains(errorInRoot("link.bin"),
                       "tensor 'w': external data 'link.bin': 'link.bin' is "
                       "a symlink"));
  EXPECT_TRUE(contains(errorInRoot("linkdir/w.bin"), "'linkdir' is a symlink"));
  EXPECT_TRUE(contains(errorInRoot("sub"), "is not a regular file"));
  EXPECT_TRUE(contains(errorInRoot("missing.bin"), "No such file"));

  EXPECT_TRUE(contains(errorFor("w.bin", "4", ""),
                       "tensor 'w': external data 'w.bin': offset 4 + length "
                       "8 is past the end of the 8-byte file"));
  EXPECT_TRUE(contains(errorFor("w.bin", "99999999999999999999", ""),
                       "invalid offset"));
  EXPECT_TRUE(contains(
      errorFor("w.bin", "0", "4"),
      "tensor 'w': external data 'w.bin' has length '4' but the tensor's "
      "dims need 8 bytes"));
}

//===----------------------------------------------------------------------===//
// readValueInfoShape
//===----------------------------------------------------------------------===//

TEST(OnnxValueInfoTest, ReadsDynamicDims) {
  onnx::ValueInfoProto info;
  info.set_name("x");
  auto *type = info.mutable_type()->mutable_tensor_type();
  type->set_elem_type(onnx::TensorProto::BFLOAT16);
  type->mutable_shape()->add_dim()->set_dim_param("batch");
  type->mutable_shape()->add_dim()->set_dim_value(3);
  type->mutable_shape()->add_dim();
  std::vector<int64_t> dims;
  std::vector<std::string> names;
  rt::DType dtype;
  ASSERT_TRUE(readValueInfoShape(info, dims, names, dtype).ok());
  EXPECT_EQ(dims, (std::vector<int64_t>{-1, 3, -1}));
  EXPECT_EQ(names, (std::vector<std::string>{"batch", "", ""}));
  EXPECT_EQ(dtype, rt::DType::BF16);

  type->set_elem_type(onnx::TensorProto::COMPLEX64);
  EXPECT_EQ(readValueInfoShape(info, dims, names, dtype).message,
            "value 'x': unsupported element type COMPLEX64");
  type->set_elem_type(onnx::TensorProto::FLOAT);
  type->clear_shape();
  EXPECT_TRUE(contains(readValueInfoShape(info, dims, names, dtype).message,
                       "unknown rank"));
}

} // namespace
