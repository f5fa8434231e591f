// The C API (include/ferrite/ferrite.h) through libferrite.so only: metadata, runs, malformed
// input (every mistake a status with a message, never a crash) and the concurrency contract
// (many threads running one session, outputs checked against single-threaded runs). Built
// against the library in the build tree; tests/capi/consumer/ builds against the installed one.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "capi_test_util.h"
#include "ferrite/ferrite.h"

namespace {

using namespace capi_test;  // NOLINT

TEST(CApi, VersionAndDevices) {
  int major = 0, minor = -1;
  ferrite_api_version(&major, &minor);
  EXPECT_EQ(major, FERRITE_API_VERSION_MAJOR);
  EXPECT_EQ(minor, FERRITE_API_VERSION_MINOR);
  EXPECT_STRNE(ferrite_version_string(), "");
  ferrite_env* env = nullptr;
  ASSERT_OK(ferrite_env_create(&env));
  size_t n = 0;
  ASSERT_OK(ferrite_env_device_count(env, &n));
  bool cpu = false, reference = false;
  for (size_t i = 0; i < n; ++i) {
    const char *name = nullptr, *detail = nullptr;
    int usable = -1;
    ASSERT_OK(ferrite_env_device(env, i, &name, &usable, &detail));
    ASSERT_TRUE(name && detail);
    if (std::string(name) == "cpu") cpu = usable == 1;
    if (std::string(name) == "reference") reference = usable == 1;
  }
  EXPECT_TRUE(cpu && reference);
  EXPECT_EQ(take(ferrite_env_device(env, n, nullptr, nullptr, nullptr)).code, FERRITE_NOT_FOUND);
  const char *def = nullptr, *why = nullptr;
  ASSERT_OK(ferrite_env_default_device(env, &def, &why));
  EXPECT_TRUE(std::string(def) == "cpu" || std::string(def) == "cuda") << def;
  // No device named: the session says which one it picked, the same as the environment.
  ferrite_session* s = nullptr;
  ASSERT_OK(ferrite_session_create((kData + "/mlp_batch.onnx").c_str(), nullptr, &s));
  const char* dev = nullptr;
  int chosen = 0;
  ASSERT_OK(ferrite_session_device(s, &dev, &chosen));
  EXPECT_STREQ(dev, def);
  EXPECT_EQ(chosen, 1);
  ferrite_session_release(s);
  ferrite_env_release(env);
}

TEST(CApi, Metadata) {
  ferrite_session* s = open(kData + "/mlp_batch.onnx");
  ASSERT_TRUE(s);
  size_t ni = 0, no = 0;
  ASSERT_OK(ferrite_session_input_count(s, &ni));
  ASSERT_OK(ferrite_session_output_count(s, &no));
  ASSERT_EQ(ni, 1u);
  ASSERT_EQ(no, 1u);
  const char* name = nullptr;
  ferrite_dtype dtype = FERRITE_DTYPE_UNDEFINED;
  int rank = 0;
  ASSERT_OK(ferrite_session_input_info(s, 0, &name, &dtype, &rank));
  EXPECT_STREQ(name, "x");
  EXPECT_EQ(dtype, FERRITE_DTYPE_FLOAT32);
  ASSERT_EQ(rank, 2);
  int64_t size = 0;
  const char* sym = nullptr;
  ASSERT_OK(ferrite_session_input_dim(s, 0, 0, &size, &sym));
  EXPECT_EQ(size, -1);
  EXPECT_STREQ(sym, "batch");
  ASSERT_OK(ferrite_session_input_dim(s, 0, 1, &size, &sym));
  EXPECT_EQ(size, 16);
  EXPECT_EQ(sym, nullptr);
  ASSERT_OK(ferrite_session_output_info(s, 0, &name, &dtype, &rank));
  EXPECT_STREQ(name, "y");
  ASSERT_OK(ferrite_session_output_dim(s, 0, 0, &size, &sym));
  EXPECT_EQ(size, -1);
  EXPECT_STREQ(sym, "batch");
  EXPECT_EQ(take(ferrite_session_input_dim(s, 0, 2, &size, &sym)).code, FERRITE_NOT_FOUND);
  EXPECT_EQ(take(ferrite_session_output_info(s, 1, &name, &dtype, &rank)).code, FERRITE_NOT_FOUND);
  ferrite_session_release(s);

  // A dim the model leaves unnamed: -1 and "?".
  s = open(kData + "/mlp_open.onnx");
  ASSERT_TRUE(s);
  ASSERT_OK(ferrite_session_input_dim(s, 0, 0, &size, &sym));
  EXPECT_EQ(size, -1);
  EXPECT_STREQ(sym, "?");
  ferrite_session_release(s);
}

TEST(CApi, RunAllocatedAndProvidedOutputsAgree) {
  ferrite_session* s = open(kData + "/mlp_batch.onnx");
  ASSERT_TRUE(s);
  std::vector<float> x = input_for(3, 1), y;
  ferrite_run_stats stats;
  std::memset(&stats, 0, sizeof stats);
  stats.struct_size = sizeof stats;
  Result r = run_mlp(s, x, y, &stats);
  ASSERT_EQ(r.code, FERRITE_OK) << r.message;
  EXPECT_GT(stats.wall_seconds, 0.0);
  EXPECT_EQ(stats.compiles, 1);  // a symbolic batch compiled once, at creation
  EXPECT_EQ(stats.compiled, 0);
  EXPECT_GT(stats.arena_bytes, 0);
  for (int row = 0; row < 3; ++row) {  // softmax rows
    float sum = 0;
    for (int j = 0; j < 8; ++j) sum += y[row * 8 + j];
    EXPECT_NEAR(sum, 1.0f, 1e-5f);
  }
  // Ferrite-allocated output: the same numbers.
  const int64_t dims[2] = {3, 16};
  ferrite_value* in = nullptr;
  ASSERT_OK(ferrite_value_create(FERRITE_DTYPE_FLOAT32, dims, 2, x.data(), x.size() * 4,
                                 FERRITE_MEMORY_HOST, &in));
  ferrite_value* out[1] = {nullptr};
  const ferrite_value* ins[1] = {in};
  ASSERT_OK(ferrite_session_run(s, nullptr, ins, 1, out, 1, nullptr, nullptr));
  ASSERT_TRUE(out[0]);
  void* data = nullptr;
  size_t bytes = 0;
  ASSERT_OK(ferrite_value_data(out[0], &data, &bytes));
  ASSERT_EQ(bytes, y.size() * 4);
  EXPECT_EQ(std::memcmp(data, y.data(), bytes), 0);
  ferrite_value_release(out[0]);
  ferrite_value_release(in);
  ferrite_session_release(s);
}

TEST(CApi, SessionFromMemory) {
  std::ifstream f(kData + "/mlp_batch.onnx", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  ferrite_session* s = nullptr;
  ASSERT_OK(ferrite_session_create_from_memory(bytes.data(), bytes.size(), nullptr, &s));
  std::vector<float> x = input_for(2, 5), y;
  Result r = run_mlp(s, x, y);
  EXPECT_EQ(r.code, FERRITE_OK) << r.message;
  ferrite_session_release(s);
}

TEST(CApi, MalformedInputIsAStatus) {
  ferrite_session* s = nullptr;
  Result r = take(ferrite_session_create("/nonexistent/model.onnx", nullptr, &s));
  EXPECT_EQ(r.code, FERRITE_NOT_FOUND);
  EXPECT_NE(r.message.find("/nonexistent/model.onnx"), std::string::npos) << r.message;
  EXPECT_EQ(s, nullptr);
  const char garbage[] = "this is not an ONNX model \x01\x02\x03\xff";
  r = take(ferrite_session_create_from_memory(garbage, sizeof garbage, nullptr, &s));
  EXPECT_EQ(r.code, FERRITE_INVALID_MODEL) << r.message;
  EXPECT_FALSE(r.message.empty());
  // A real model cut short.
  std::ifstream f(kData + "/mlp_batch.onnx", std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  r = take(ferrite_session_create_from_memory(bytes.data(), bytes.size() / 2, nullptr, &s));
  EXPECT_EQ(r.code, FERRITE_INVALID_MODEL) << r.message;
  EXPECT_EQ(take(ferrite_session_create(nullptr, nullptr, &s)).code, FERRITE_INVALID_ARGUMENT);

  ferrite_session_options* o = nullptr;
  ASSERT_OK(ferrite_session_options_create(&o));
  EXPECT_EQ(take(ferrite_session_options_set_precision(o, "f8")).code, FERRITE_INVALID_ARGUMENT);
  EXPECT_EQ(take(ferrite_session_options_set_threads(o, -1)).code, FERRITE_INVALID_ARGUMENT);
  ASSERT_OK(ferrite_session_options_set_device(o, "no-such-device"));
  r = take(ferrite_session_create((kData + "/mlp_batch.onnx").c_str(), o, &s));
  EXPECT_EQ(r.code, FERRITE_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("no-such-device"), std::string::npos) << r.message;
  // A unit of an unknown device is unknown; a unit of a device without units says so.
  ASSERT_OK(ferrite_session_options_set_device(o, "no-such-device:0"));
  r = take(ferrite_session_create((kData + "/mlp_batch.onnx").c_str(), o, &s));
  EXPECT_EQ(r.code, FERRITE_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("unknown device 'no-such-device:0'"), std::string::npos) << r.message;
  ASSERT_OK(ferrite_session_options_set_device(o, "cpu:1"));
  r = take(ferrite_session_create((kData + "/mlp_batch.onnx").c_str(), o, &s));
  EXPECT_NE(r.code, FERRITE_OK);
  EXPECT_NE(r.message.find("has no units"), std::string::npos) << r.message;
  ASSERT_OK(ferrite_session_options_set_device(o, "cpu"));
  ASSERT_OK(ferrite_session_options_set_passes(o, "no-such-pass"));
  r = take(ferrite_session_create((kData + "/mlp_batch.onnx").c_str(), o, &s));
  EXPECT_NE(r.code, FERRITE_OK);
  EXPECT_NE(r.message.find("no-such-pass"), std::string::npos) << r.message;
  ferrite_session_options_release(o);

  s = open(kData + "/mlp_batch.onnx");
  ASSERT_TRUE(s);
  std::vector<float> x = input_for(2, 0), y(16);
  const int64_t good[2] = {2, 16}, wrong_dim[2] = {2, 15}, rank3[3] = {1, 2, 16};
  ferrite_value *in = nullptr, *bad = nullptr;
  ASSERT_OK(ferrite_value_create(FERRITE_DTYPE_FLOAT32, good, 2, x.data(), x.size() * 4,
                                 FERRITE_MEMORY_HOST, &in));
  // A buffer smaller than its dims, a negative dim, an unknown dtype.
  const int64_t neg[2] = {-2, 16};
  EXPECT_EQ(take(ferrite_value_create(FERRITE_DTYPE_FLOAT32, good, 2, x.data(), 8,
                                      FERRITE_MEMORY_HOST, &bad))
                .code,
            FERRITE_INVALID_ARGUMENT);
  EXPECT_EQ(take(ferrite_value_create(FERRITE_DTYPE_FLOAT32, neg, 2, x.data(), x.size() * 4,
                                      FERRITE_MEMORY_HOST, &bad))
                .code,
            FERRITE_INVALID_ARGUMENT);
  EXPECT_EQ(take(ferrite_value_create(static_cast<ferrite_dtype>(99), good, 2, x.data(),
                                      x.size() * 4, FERRITE_MEMORY_HOST, &bad))
                .code,
            FERRITE_INVALID_ARGUMENT);
  ferrite_value* outs[1] = {nullptr};
  const ferrite_value* ins[1] = {in};
  // Unknown input name.
  const char* wrong_name[1] = {"z"};
  r = take(ferrite_session_run(s, wrong_name, ins, 1, outs, 1, nullptr, nullptr));
  EXPECT_EQ(r.code, FERRITE_INVALID_ARGUMENT);
  EXPECT_NE(r.message.find("'z'"), std::string::npos) << r.message;
  // Wrong output count; NULL session; a missing input.
  EXPECT_EQ(take(ferrite_session_run(s, nullptr, ins, 1, outs, 2, nullptr, nullptr)).code,
            FERRITE_INVALID_ARGUMENT);
  EXPECT_EQ(take(ferrite_session_run(nullptr, nullptr, ins, 1, outs, 1, nullptr, nullptr)).code,
            FERRITE_INVALID_ARGUMENT);
  r = take(ferrite_session_run(s, nullptr, nullptr, 0, outs, 1, nullptr, nullptr));
  EXPECT_EQ(r.code, FERRITE_INVALID_ARGUMENT) << r.message;
  EXPECT_NE(r.message.find("missing input 'x'"), std::string::npos) << r.message;
  // Wrong fixed dim, wrong rank, wrong dtype: each names the input.
  std::vector<int32_t> ints(32);
  std::vector<float> big(64);
  struct Case {
    ferrite_dtype dtype;
    const int64_t* dims;
    size_t rank;
    void* data;
    size_t bytes;
    const char* says;
  } cases[] = {
      {FERRITE_DTYPE_FLOAT32, wrong_dim, 2, big.data(), big.size() * 4, "dim 1 is 15"},
      {FERRITE_DTYPE_FLOAT32, rank3, 3, big.data(), big.size() * 4, "rank 3"},
      {FERRITE_DTYPE_INT32, good, 2, ints.data(), ints.size() * 4, "dtype"},
  };
  for (const Case& c : cases) {
    ASSERT_OK(
        ferrite_value_create(c.dtype, c.dims, c.rank, c.data, c.bytes, FERRITE_MEMORY_HOST, &bad));
    const ferrite_value* b[1] = {bad};
    r = take(ferrite_session_run(s, nullptr, b, 1, outs, 1, nullptr, nullptr));
    EXPECT_EQ(r.code, FERRITE_INVALID_ARGUMENT) << r.message;
    EXPECT_NE(r.message.find("input 'x'"), std::string::npos) << r.message;
    EXPECT_NE(r.message.find(c.says), std::string::npos) << r.message;
    EXPECT_EQ(outs[0], nullptr);
    ferrite_value_release(bad);
  }
  // A caller-provided output of the wrong shape; one in device memory on a cpu session.
  const int64_t wrong_out[2] = {2, 7};
  ASSERT_OK(ferrite_value_create(FERRITE_DTYPE_FLOAT32, wrong_out, 2, y.data(), y.size() * 4,
                                 FERRITE_MEMORY_HOST, &bad));
  outs[0] = bad;
  r = take(ferrite_session_run(s, nullptr, ins, 1, outs, 1, nullptr, nullptr));
  EXPECT_EQ(r.code, FERRITE_INVALID_ARGUMENT) << r.message;
  EXPECT_NE(r.message.find("[2,8]"), std::string::npos) << r.message;
  ferrite_value_release(bad);
  const int64_t out_dims[2] = {2, 8};
  ASSERT_OK(ferrite_value_create(FERRITE_DTYPE_FLOAT32, out_dims, 2, y.data(), y.size() * 4,
                                 FERRITE_MEMORY_DEVICE, &bad));
  outs[0] = bad;
  r = take(ferrite_session_run(s, nullptr, ins, 1, outs, 1, nullptr, nullptr));
  EXPECT_NE(r.code, FERRITE_OK);
  EXPECT_FALSE(r.message.empty());
  ferrite_value_release(bad);
  // The session still runs after all that.
  outs[0] = nullptr;
  ASSERT_OK(ferrite_session_run(s, nullptr, ins, 1, outs, 1, nullptr, nullptr));
  ferrite_value_release(outs[0]);
  ferrite_value_release(in);
  ferrite_session_release(s);

  // A corrupt TensorProto file; a missing one.
  ferrite_value* v = nullptr;
  EXPECT_EQ(take(ferrite_value_load_pb("/nonexistent.pb", &v, nullptr)).code, FERRITE_NOT_FOUND);
  r = take(ferrite_value_load_pb((kData + "/make_models.py").c_str(), &v, nullptr));
  EXPECT_EQ(r.code, FERRITE_INVALID_ARGUMENT) << r.message;
  EXPECT_EQ(v, nullptr);
}

// The compile cache is process-wide: once a session compiled, another directory is refused
// with a message; the directory in use is accepted.
TEST(CApi, CacheDirIsProcessWide) {
  ferrite_session* s = open(kData + "/mlp_batch.onnx");  // compiles: the cache now exists
  ASSERT_TRUE(s);
  ferrite_session_release(s);
  ferrite_session_options* o = nullptr;
  ASSERT_OK(ferrite_session_options_create(&o));
  ASSERT_OK(ferrite_session_options_set_device(o, "cpu"));
  ASSERT_OK(ferrite_session_options_set_cache_dir(o, "/nonexistent/elsewhere"));
  Result r = take(ferrite_session_create((kData + "/mlp_batch.onnx").c_str(), o, &s));
  EXPECT_EQ(r.code, FERRITE_INVALID_ARGUMENT) << r.message;
  EXPECT_NE(r.message.find("process-wide"), std::string::npos) << r.message;
  ferrite_session_options_release(o);
}

TEST(CApiConcurrency, SymbolicBatchEightThreads) {
  concurrent_runs(kData + "/mlp_batch.onnx", stress_runs(1000), 1, true);
}

// Also with 2 worker threads per context: each context's pool and oneDNN's threads under load.
TEST(CApiConcurrency, RecompilesWhileOthersRun) {
  concurrent_runs(kData + "/mlp_open.onnx", stress_runs(1000), 2, false);
}

}  // namespace
