// Helpers of the C API tests (capi_test.cpp, capi_cuda_test.cpp): statuses as values, sessions
// of the test models, the mlp's inputs and runs, and the concurrency check.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "ferrite/ferrite.h"

namespace capi_test {

inline const std::string kData = FERRITE_CAPI_TEST_DATA;

// The status's code (and message, for the failure report); releases it.
struct Result {
  ferrite_code code;
  std::string message;
};
inline Result take(ferrite_status* s) {
  Result r{ferrite_status_code(s), ferrite_status_message(s)};
  ferrite_status_release(s);
  return r;
}
#define ASSERT_OK(expr)                           \
  do {                                            \
    Result r_ = take(expr);                       \
    ASSERT_EQ(r_.code, FERRITE_OK) << r_.message; \
  } while (0)

inline ferrite_session* open(const std::string& model, const char* device = "cpu", int contexts = 0,
                             int threads = 1) {
  ferrite_session_options* o = nullptr;
  EXPECT_EQ(take(ferrite_session_options_create(&o)).code, FERRITE_OK);
  EXPECT_EQ(take(ferrite_session_options_set_device(o, device)).code, FERRITE_OK);
  EXPECT_EQ(take(ferrite_session_options_set_threads(o, threads)).code, FERRITE_OK);
  EXPECT_EQ(take(ferrite_session_options_set_max_concurrency(o, contexts)).code, FERRITE_OK);
  ferrite_session* s = nullptr;
  Result r = take(ferrite_session_create(model.c_str(), o, &s));
  ferrite_session_options_release(o);
  EXPECT_EQ(r.code, FERRITE_OK) << r.message;
  return s;
}

// A batch of inputs whose values depend on (batch, seed) only.
inline std::vector<float> input_for(int64_t batch, int seed) {
  std::vector<float> x(static_cast<size_t>(batch) * 16);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = std::sin(0.37f * static_cast<float>(i) + static_cast<float>(seed)) * 2.0f;
  return x;
}

// One run of the mlp on `x` (batch rows) into `y`, through a caller-provided output.
inline Result run_mlp(ferrite_session* s, std::vector<float>& x, std::vector<float>& y,
                      ferrite_run_stats* stats = nullptr) {
  const int64_t batch = static_cast<int64_t>(x.size() / 16);
  const int64_t in_dims[2] = {batch, 16}, out_dims[2] = {batch, 8};
  y.assign(static_cast<size_t>(batch) * 8, -1.0f);
  ferrite_value *in = nullptr, *out = nullptr;
  Result r = take(ferrite_value_create(FERRITE_DTYPE_FLOAT32, in_dims, 2, x.data(),
                                       x.size() * sizeof(float), FERRITE_MEMORY_HOST, &in));
  if (r.code != FERRITE_OK) return r;
  r = take(ferrite_value_create(FERRITE_DTYPE_FLOAT32, out_dims, 2, y.data(),
                                y.size() * sizeof(float), FERRITE_MEMORY_HOST, &out));
  if (r.code == FERRITE_OK) {
    const char* names[1] = {"x"};
    const ferrite_value* ins[1] = {in};
    ferrite_value* outs[1] = {out};
    r = take(ferrite_session_run(s, names, ins, 1, outs, 1, nullptr, stats));
  }
  ferrite_value_release(in);
  ferrite_value_release(out);
  return r;
}

// Runs per thread of the concurrency test: FERRITE_CAPI_STRESS_RUNS, else `fallback`.
inline int stress_runs(int fallback) {
  const char* v = std::getenv("FERRITE_CAPI_STRESS_RUNS");
  return v && std::atoi(v) > 0 ? std::atoi(v) : fallback;
}

// 8 threads run one session at once on mixed batch sizes; every output must equal the
// single-threaded run of the same input. `model`'s batch is symbolic (one compile) or unnamed
// (a specialisation, then a recompile while other threads wait or run).
// `expect_overlap`: some run must have used a context beyond the first. Only asked where there
// are enough runs for the threads to meet (a run takes microseconds, a compile milliseconds).
// `device` runs both sessions (expected outputs from a one-context one); `tol` the largest
// difference allowed (a device may pick other GEMM algorithms for other batch sizes at once).
inline void concurrent_runs(const std::string& model, int runs_per_thread, int threads_per_context,
                            bool expect_overlap, const char* device = "cpu", float tol = 1e-6f,
                            int contexts = 8) {
  constexpr int kThreads = 8, kBatches = 6;
  // Expected outputs from another session, so that this one's compiles happen under load.
  std::vector<std::vector<float>> expected(kBatches + 1);
  {
    ferrite_session* ref = open(model, device, 1);
    ASSERT_TRUE(ref);
    for (int b = 1; b <= kBatches; ++b) {
      std::vector<float> x = input_for(b, b);
      Result r = run_mlp(ref, x, expected[b]);
      ASSERT_EQ(r.code, FERRITE_OK) << r.message;
    }
    ferrite_session_release(ref);
  }
  ferrite_session* s = open(model, device, contexts, threads_per_context);
  ASSERT_TRUE(s);
  std::atomic<int> failures{0}, max_context{0}, ready{0};
  std::vector<std::string> first_error(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      // All threads start together, so that their runs meet.
      ++ready;
      while (ready.load() < kThreads) std::this_thread::yield();
      for (int i = 0; i < runs_per_thread && failures.load() < 10; ++i) {
        const int b = 1 + (t * 5 + i * 7) % kBatches;
        std::vector<float> x = input_for(b, b), y;
        ferrite_run_stats st;
        std::memset(&st, 0, sizeof st);
        st.struct_size = sizeof st;
        Result r = run_mlp(s, x, y, &st);
        bool same = y.size() == expected[b].size();
        for (size_t k = 0; same && k < y.size(); ++k)
          same = std::fabs(y[k] - expected[b][k]) <= tol;
        if (r.code != FERRITE_OK || !same) {
          if (first_error[t].empty())
            first_error[t] =
                r.code != FERRITE_OK ? r.message : "output differs, batch " + std::to_string(b);
          ++failures;
        }
        int seen = max_context.load();
        while (st.context > seen && !max_context.compare_exchange_weak(seen, st.context)) {
        }
      }
    });
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(first_error[t], "") << "thread " << t;
  EXPECT_EQ(failures.load(), 0);
  // The runs did overlap: a context beyond the first served some of them.
  if (expect_overlap) {
    EXPECT_GT(max_context.load(), 0);
  }
  ferrite_session_release(s);
}

}  // namespace capi_test
