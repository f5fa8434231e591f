// The Triton backend's configuration logic without a server (src/serving/triton/model_config.h):
// reading a model's tensors through the C API, auto-completion, and the validation that turns a
// bad config.pbtxt into a message naming the model and tensor.
#include "serving/triton/model_config.h"

#include <gtest/gtest.h>

namespace ft = ferrite::triton;
using nlohmann::json;

namespace {

// The zoo's convnet as the C API reports it: input f32[batch,3,32,32], output f32[batch,10].
std::vector<ft::ModelIo> convnet_inputs() {
  return {{"input", FERRITE_DTYPE_FLOAT32, {-1, 3, 32, 32}, {"batch", "", "", ""}}};
}
std::vector<ft::ModelIo> convnet_outputs() {
  return {{"output", FERRITE_DTYPE_FLOAT32, {-1, 10}, {"batch", ""}}};
}

json complete(json config, bool* changed = nullptr) {
  bool c = false;
  EXPECT_EQ(ft::auto_complete(&config, convnet_inputs(), convnet_outputs(), 64, &c), "");
  if (changed) *changed = c;
  return config;
}

std::string parse(const json& config, ft::ModelSpec* spec = nullptr) {
  ft::ModelSpec local;
  return ft::parse_spec("m", config, convnet_inputs(), convnet_outputs(), spec ? spec : &local);
}

}  // namespace

TEST(TritonConfig, ReadsTheModelsTensorsThroughTheCApi) {
  ferrite_session* s = nullptr;
  ferrite_status* st = ferrite_session_create(FERRITE_EXAMPLE_MODEL, nullptr, &s);
  ASSERT_EQ(st, nullptr) << ferrite_status_message(st);
  std::vector<ft::ModelIo> in, out;
  EXPECT_EQ(ft::read_model_io(s, true, &in), "");
  EXPECT_EQ(ft::read_model_io(s, false, &out), "");
  ferrite_session_release(s);
  ASSERT_EQ(in.size(), 1u);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(in[0].dims[0], -1);
  EXPECT_EQ(in[0].symbols[0], "batch");
  EXPECT_TRUE(ft::model_can_batch(in, out));
}

TEST(TritonConfig, AutoCompletesAnEmptyConfig) {
  bool changed = false;
  json c = complete(json{{"backend", "ferrite"}}, &changed);
  EXPECT_TRUE(changed);
  EXPECT_EQ(c["max_batch_size"], 64);
  EXPECT_EQ(c["input"][0]["name"], "input");
  EXPECT_EQ(c["input"][0]["data_type"], "TYPE_FP32");
  EXPECT_EQ(c["input"][0]["dims"], json({3, 32, 32}));
  EXPECT_EQ(c["output"][0]["dims"], json({10}));
  EXPECT_TRUE(c.contains("dynamic_batching"));
  ft::ModelSpec spec;
  EXPECT_EQ(parse(c, &spec), "");
  EXPECT_EQ(spec.max_batch_size, 64);
  EXPECT_EQ(spec.inputs[0].triton_dtype, TRITONSERVER_TYPE_FP32);
}

TEST(TritonConfig, AutoCompleteKeepsWhatTheAuthorWrote) {
  // Tensors written out with max_batch_size 0: the full shape, no batching added.
  json c = complete(
      json{{"max_batch_size", 0}, {"input", {{{"name", "input"}, {"dims", {-1, 3, 32, 32}}}}}});
  EXPECT_EQ(c["max_batch_size"], 0);
  EXPECT_EQ(c["input"][0]["data_type"], "TYPE_FP32");  // filled in
  EXPECT_EQ(c["input"][0]["dims"], json({-1, 3, 32, 32}));
  EXPECT_EQ(c["output"][0]["dims"], json({-1, 10}));
  EXPECT_FALSE(c.contains("dynamic_batching"));
  EXPECT_EQ(parse(c), "");
  // A scheduler the author chose stays.
  json d = complete(json{{"sequence_batching", json::object()}});
  EXPECT_FALSE(d.contains("dynamic_batching"));
  bool changed = true;
  complete(complete(json::object()), &changed);
  EXPECT_FALSE(changed);  // a complete configuration is left alone
}

TEST(TritonConfig, ReadsInt64FieldsWrittenAsStrings) {
  // protobuf's JSON mapping writes int64 as strings.
  json c = {
      {"max_batch_size", 8},
      {"input", {{{"name", "input"}, {"data_type", "TYPE_FP32"}, {"dims", {"3", "32", "32"}}}}},
      {"output", {{{"name", "output"}, {"data_type", "TYPE_FP32"}, {"dims", {"10"}}}}},
      {"instance_group", {{{"count", "3"}, {"kind", "KIND_CPU"}}}}};
  ft::ModelSpec spec;
  EXPECT_EQ(parse(c, &spec), "");
  EXPECT_EQ(spec.inputs[0].dims, (std::vector<int64_t>{3, 32, 32}));
  EXPECT_EQ(ft::parse_deployment("m", c, &spec), "");
  EXPECT_EQ(spec.instance_count, 3);
}

TEST(TritonConfig, MismatchesNameTheModelAndTensor) {
  json good = complete(json::object());
  auto with = [&](const char* list, const char* key, json value) {
    json c = good;
    c[list][0][key] = value;
    return parse(c);
  };
  EXPECT_EQ(with("input", "name", "pixels"),
            "model 'm', input 'pixels': the ONNX model has no input of that name");
  EXPECT_NE(with("input", "data_type", "TYPE_FP16")
                .find("model 'm', input 'input': data_type "
                      "TYPE_FP16 in the config"),
            std::string::npos);
  EXPECT_NE(with("input", "dims", {3, 32, 31}).find("model 'm', input 'input': dim 3 is 31"),
            std::string::npos);
  EXPECT_NE(with("output", "dims", {10, 1}).find("model 'm', output 'output': dims [10,1]"),
            std::string::npos);
  EXPECT_NE(with("input", "reshape", {{"shape", {3072}}}).find("'reshape' is not supported"),
            std::string::npos);
  json missing = good;
  missing["output"] = json::array();
  EXPECT_EQ(parse(missing), "model 'm', output 'output': missing from the configuration");
  // -1 where the model has a fixed dim: accepted, checked per request.
  EXPECT_EQ(with("input", "dims", {-1, 32, 32}), "");
}

TEST(TritonConfig, BatchingNeedsASharedSymbolicFirstDim) {
  std::vector<ft::ModelIo> fixed = {{"input", FERRITE_DTYPE_FLOAT32, {4, 512}, {"", ""}}};
  std::vector<ft::ModelIo> out = {{"output", FERRITE_DTYPE_FLOAT32, {4, 10}, {"", ""}}};
  EXPECT_FALSE(ft::model_can_batch(fixed, out));
  json c = {{"backend", "ferrite"}};
  bool changed = false;
  ASSERT_EQ(ft::auto_complete(&c, fixed, out, 64, &changed), "");
  EXPECT_EQ(c.value("max_batch_size", 0), 0);  // not batched: full shapes
  EXPECT_EQ(c["input"][0]["dims"], json({4, 512}));
  c["max_batch_size"] = 8;
  c["input"][0]["dims"] = {512};
  c["output"][0]["dims"] = {10};
  ft::ModelSpec spec;
  EXPECT_NE(ft::parse_spec("m", c, fixed, out, &spec).find("same symbolic batch dim"),
            std::string::npos);
  // Two different symbols cannot be one batch dim either.
  std::vector<ft::ModelIo> two = {{"a", FERRITE_DTYPE_FLOAT32, {-1, 2}, {"n", ""}},
                                  {"b", FERRITE_DTYPE_FLOAT32, {-1, 2}, {"m", ""}}};
  EXPECT_FALSE(ft::model_can_batch(two, convnet_outputs()));
}

TEST(TritonConfig, Parameters) {
  ft::ModelSpec spec;
  json c = {{"parameters",
             {{"device", {{"string_value", "cpu"}}},
              {"threads", {{"string_value", "2"}}},
              {"precision", {{"string_value", "bf16"}}}}}};
  EXPECT_EQ(ft::parse_deployment("m", c, &spec), "");
  EXPECT_EQ(spec.device, "cpu");
  EXPECT_EQ(spec.threads, 2);
  EXPECT_EQ(spec.precision, "bf16");
  EXPECT_EQ(spec.instance_count, 1);
  c["parameters"]["threads"]["string_value"] = "two";
  EXPECT_NE(ft::parse_deployment("m", c, &spec).find("parameter threads='two'"), std::string::npos);
  json typo = {{"parameters", {{"thread", {{"string_value", "2"}}}}}};
  EXPECT_EQ(ft::parse_deployment("m", typo, &spec),
            "model 'm': unknown parameter 'thread' (the ferrite backend takes device, threads, "
            "precision)");
}

TEST(TritonConfig, DtypeTables) {
  EXPECT_EQ(ft::to_triton_dtype(FERRITE_DTYPE_INT64), TRITONSERVER_TYPE_INT64);
  EXPECT_EQ(ft::from_triton_dtype(TRITONSERVER_TYPE_BF16), FERRITE_DTYPE_BFLOAT16);
  EXPECT_EQ(ft::from_triton_dtype(TRITONSERVER_TYPE_BYTES), FERRITE_DTYPE_UNDEFINED);
  EXPECT_EQ(ft::config_dtype_name(FERRITE_DTYPE_FLOAT16), "TYPE_FP16");
  EXPECT_EQ(ft::from_config_dtype_name("TYPE_STRING"), FERRITE_DTYPE_UNDEFINED);
}

TEST(TritonConfig, InstanceDevices) {
  std::string d;
  EXPECT_EQ(ft::instance_device("m", "", TRITONSERVER_INSTANCEGROUPKIND_GPU, 1, &d), "");
  EXPECT_EQ(d, "cuda:1");
  EXPECT_EQ(ft::instance_device("m", "cuda", TRITONSERVER_INSTANCEGROUPKIND_GPU, 2, &d), "");
  EXPECT_EQ(d, "cuda:2");
  EXPECT_EQ(ft::instance_device("m", "cuda:3", TRITONSERVER_INSTANCEGROUPKIND_GPU, 0, &d), "");
  EXPECT_EQ(d, "cuda:3");
  EXPECT_EQ(
      ft::instance_device("m", "cpu", TRITONSERVER_INSTANCEGROUPKIND_GPU, 0, &d),
      "model 'm': a KIND_GPU instance group, but parameter device='cpu' is not a cuda device");
  EXPECT_NE(ft::instance_device("m", "cudax", TRITONSERVER_INSTANCEGROUPKIND_GPU, 0, &d), "");
  EXPECT_EQ(ft::instance_device("m", "", TRITONSERVER_INSTANCEGROUPKIND_CPU, 0, &d), "");
  EXPECT_EQ(d, "cpu");
  EXPECT_EQ(ft::instance_device("m", "cuda", TRITONSERVER_INSTANCEGROUPKIND_CPU, 0, &d),
            "model 'm': a KIND_CPU instance group, but parameter device='cuda' is not cpu");
  EXPECT_EQ(ft::instance_device("m", "gxu", TRITONSERVER_INSTANCEGROUPKIND_MODEL, 0, &d), "");
  EXPECT_EQ(d, "gxu");
  EXPECT_EQ(ft::instance_device("m", "", TRITONSERVER_INSTANCEGROUPKIND_MODEL, 0, &d), "");
  EXPECT_EQ(d, "");  // ferrite's default device
  EXPECT_TRUE(ft::is_host_device("cpu"));
  EXPECT_FALSE(ft::is_host_device(""));
}
