// The C API on a GPU: many threads on one cuda session (each execution context on a stream of its
// own, sharing context 0's weights), and runs on device memory ordered on the caller's stream or
// on CUDA's legacy default stream. Skipped where no GPU answers. The driver is opened with dlopen
// (the tests link only libferrite.so), on the primary context, the one ferrite uses.
#include <dlfcn.h>

#include <type_traits>

#include "capi_test_util.h"

namespace {

using namespace capi_test;  // NOLINT

bool cuda_usable() {
  ferrite_env* env = nullptr;
  if (take(ferrite_env_create(&env)).code != FERRITE_OK) return false;
  size_t n = 0;
  bool usable = false;
  if (take(ferrite_env_device_count(env, &n)).code == FERRITE_OK)
    for (size_t i = 0; i < n; ++i) {
      const char* name = nullptr;
      int ok = 0;
      if (take(ferrite_env_device(env, i, &name, &ok, nullptr)).code == FERRITE_OK &&
          std::string(name) == "cuda")
        usable = ok != 0;
    }
  ferrite_env_release(env);
  return usable;
}

// The few driver calls the tests need.
struct Driver {
  void* lib = nullptr;
  int (*init)(unsigned) = nullptr;
  int (*device_get)(int*, int) = nullptr;
  int (*retain)(void**, int) = nullptr;
  int (*release)(int) = nullptr;
  int (*set_current)(void*) = nullptr;
  int (*alloc)(unsigned long long*, size_t) = nullptr;
  int (*free)(unsigned long long) = nullptr;
  int (*htod)(unsigned long long, const void*, size_t) = nullptr;
  int (*dtoh)(void*, unsigned long long, size_t) = nullptr;
  int (*stream_create)(void**, unsigned) = nullptr;
  int (*stream_destroy)(void*) = nullptr;
  int (*stream_sync)(void*) = nullptr;
  int device = 0;
  void* ctx = nullptr;

  bool open() {
    lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    auto sym = [&](auto& f, const char* name) {
      f = reinterpret_cast<std::remove_reference_t<decltype(f)>>(dlsym(lib, name));
      return f != nullptr;
    };
    return sym(init, "cuInit") && sym(device_get, "cuDeviceGet") &&
           sym(retain, "cuDevicePrimaryCtxRetain") && sym(release, "cuDevicePrimaryCtxRelease") &&
           sym(set_current, "cuCtxSetCurrent") && sym(alloc, "cuMemAlloc_v2") &&
           sym(free, "cuMemFree_v2") && sym(htod, "cuMemcpyHtoD_v2") &&
           sym(dtoh, "cuMemcpyDtoH_v2") && sym(stream_create, "cuStreamCreate") &&
           sym(stream_destroy, "cuStreamDestroy_v2") && sym(stream_sync, "cuStreamSynchronize") &&
           init(0) == 0 && device_get(&device, 0) == 0 && retain(&ctx, device) == 0 &&
           set_current(ctx) == 0;
  }
  ~Driver() {
    if (ctx) release(device);
  }
};

// One run of the mlp on device copies of `x`, ordered on `stream` (null: the legacy default
// stream); the output is read back after that stream is synchronised.
Result run_on_device(Driver& d, ferrite_session* s, const std::vector<float>& x,
                     std::vector<float>& y, void* stream) {
  const int64_t batch = static_cast<int64_t>(x.size() / 16);
  const int64_t in_dims[2] = {batch, 16}, out_dims[2] = {batch, 8};
  y.assign(static_cast<size_t>(batch) * 8, -1.0f);
  unsigned long long dx = 0, dy = 0;
  const size_t xb = x.size() * sizeof(float), yb = y.size() * sizeof(float);
  if (d.set_current(d.ctx) || d.alloc(&dx, xb) || d.alloc(&dy, yb) || d.htod(dx, x.data(), xb))
    return {FERRITE_INTERNAL, "driver: allocation or copy failed"};
  ferrite_value *in = nullptr, *out = nullptr;
  Result r =
      take(ferrite_value_create(FERRITE_DTYPE_FLOAT32, in_dims, 2, reinterpret_cast<void*>(dx), xb,
                                FERRITE_MEMORY_DEVICE, &in));
  if (r.code == FERRITE_OK)
    r = take(ferrite_value_create(FERRITE_DTYPE_FLOAT32, out_dims, 2, reinterpret_cast<void*>(dy),
                                  yb, FERRITE_MEMORY_DEVICE, &out));
  if (r.code == FERRITE_OK) {
    const char* names[1] = {"x"};
    const ferrite_value* ins[1] = {in};
    ferrite_value* outs[1] = {out};
    r = take(ferrite_session_run(s, names, ins, 1, outs, 1, stream, nullptr));
  }
  // The copy back is a synchronous copy on the legacy stream: the explicit wait is what the
  // contract asks of the caller (and what a non-blocking caller stream needs).
  if (r.code == FERRITE_OK && (d.stream_sync(stream) || d.dtoh(y.data(), dy, yb)))
    r = {FERRITE_INTERNAL, "driver: synchronise or copy back failed"};
  ferrite_value_release(in);
  ferrite_value_release(out);
  d.free(dx);
  d.free(dy);
  return r;
}

TEST(CApiCuda, EightThreadsOnContextsWithStreamsOfTheirOwn) {
  if (!cuda_usable()) GTEST_SKIP() << "no usable cuda device";
  // 4 contexts (cuda's default) for 8 threads: contexts are shared in turn, and made while
  // others run. cuBLASLt may pick another algorithm per batch size, not per context: 1e-5.
  concurrent_runs(kData + "/mlp_batch.onnx", stress_runs(500), 1, true, "cuda", 1e-5f, 0);
  concurrent_runs(kData + "/mlp_open.onnx", stress_runs(200), 1, false, "cuda", 1e-5f, 0);
}

TEST(CApiCuda, DeviceMemoryOnTheCallersStreamAndTheLegacyStream) {
  if (!cuda_usable()) GTEST_SKIP() << "no usable cuda device";
  Driver d;
  ASSERT_TRUE(d.open()) << "libcuda.so.1 did not open";
  // By unit, as a Triton KIND_GPU instance names its GPU.
  ferrite_session* s = open(kData + "/mlp_batch.onnx", "cuda:0");
  ASSERT_TRUE(s);
  void* stream = nullptr;
  ASSERT_EQ(d.stream_create(&stream, 1 /* non-blocking */), 0);
  for (int b : {1, 3, 5}) {
    std::vector<float> x = input_for(b, b), expected, on_stream, on_legacy;
    Result r = run_mlp(s, x, expected);
    ASSERT_EQ(r.code, FERRITE_OK) << r.message;
    for (int rep = 0; rep < 3; ++rep) {  // step by step, recorded, replayed
      r = run_on_device(d, s, x, on_stream, stream);
      ASSERT_EQ(r.code, FERRITE_OK) << r.message;
      r = run_on_device(d, s, x, on_legacy, nullptr);
      ASSERT_EQ(r.code, FERRITE_OK) << r.message;
      for (size_t k = 0; k < expected.size(); ++k) {
        ASSERT_NEAR(on_stream[k], expected[k], 1e-5f) << "batch " << b << " element " << k;
        ASSERT_NEAR(on_legacy[k], expected[k], 1e-5f) << "batch " << b << " element " << k;
      }
    }
  }
  // Device runs from 8 threads at once, each on a stream of its own.
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([&, t] {
      void* own = nullptr;
      if (d.set_current(d.ctx) || d.stream_create(&own, 1)) {
        ++failures;
        return;
      }
      for (int i = 0; i < stress_runs(200) / 2 && failures.load() == 0; ++i) {
        const int b = 1 + (t + i) % 6;
        std::vector<float> x = input_for(b, b), want, got;
        Result r = run_mlp(s, x, want);
        if (r.code == FERRITE_OK) r = run_on_device(d, s, x, got, own);
        bool same = r.code == FERRITE_OK && got.size() == want.size();
        for (size_t k = 0; same && k < got.size(); ++k) same = std::fabs(got[k] - want[k]) <= 1e-5f;
        if (!same) {
          ADD_FAILURE() << "thread " << t << " batch " << b << ": " << r.message;
          ++failures;
        }
      }
      d.stream_destroy(own);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(failures.load(), 0);
  d.stream_destroy(stream);
  ferrite_session_release(s);
}

}  // namespace
