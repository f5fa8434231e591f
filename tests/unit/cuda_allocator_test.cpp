// The cuda device's caching allocator (backends/cuda/caching_allocator.h) over a fake block
// source: size classes, reuse, trimming, statistics and error paths, without a GPU.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#if FERRITE_HAVE_CUDA
#include "backends/cuda/caching_allocator.h"
#endif
#include "test_util.h"

namespace ferrite {
namespace {

#if FERRITE_HAVE_CUDA

using cuda::CachingAllocator;

Expected<std::unique_ptr<Session>> testing_parse_session(const std::string& text,
                                                         const std::string& device) {
  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, text.c_str());
  if (!status.IsOK()) return err("parse: ", status.ErrorMessage());
  std::string bytes;
  model.SerializeToString(&bytes);
  FERRITE_ASSIGN_OR_RETURN(auto g, import_onnx_bytes(bytes, ""));
  return Session::from_graph(std::move(g), device);
}

// Hands out fake addresses, counts calls, and fails on request.
class FakeSource : public cuda::BlockSource {
 public:
  Expected<void*> allocate(size_t bytes) override {
    ++allocs;
    if (fail_allocs > 0) {
      --fail_allocs;
      return err("cuda: allocating ", bytes, " bytes of device memory: ", oom_message);
    }
    if (limit && held + bytes > limit)
      return err("cuda: allocating ", bytes, " bytes of device memory: ", oom_message);
    next += (bytes + 4095) / 4096 * 4096;
    void* p = reinterpret_cast<void*>(next);
    live[p] = bytes;
    held += bytes;
    return p;
  }
  Status release(void* p) override {
    ++releases;
    if (fail_releases > 0) {
      --fail_releases;
      return err("cuMemFree: CUDA_ERROR_ILLEGAL_ADDRESS");
    }
    auto it = live.find(p);
    if (it == live.end()) return err("release of an unknown block");
    held -= it->second;
    live.erase(it);
    return Status::ok();
  }
  uintptr_t next = 1 << 20;
  std::map<void*, size_t> live;
  size_t held = 0, limit = 0;
  int allocs = 0, releases = 0, fail_allocs = 0, fail_releases = 0;
  std::string oom_message = "CUDA_ERROR_OUT_OF_MEMORY: out of memory";
};

TEST(CudaAllocator, SizeClassesRoundUpByAtMostAQuarterOr2MiB) {
  EXPECT_EQ(CachingAllocator::size_class(0), 512u);
  EXPECT_EQ(CachingAllocator::size_class(1), 512u);
  EXPECT_EQ(CachingAllocator::size_class(512), 512u);
  EXPECT_EQ(CachingAllocator::size_class(513), 1024u);
  EXPECT_EQ(CachingAllocator::size_class(4096), 4096u);
  EXPECT_EQ(CachingAllocator::size_class(4097), 5120u);
  EXPECT_EQ(CachingAllocator::size_class(7000), 7168u);
  const size_t mib = size_t{1} << 20;
  EXPECT_EQ(CachingAllocator::size_class(100 * mib + 1), 102 * mib);
  size_t prev = 0;
  for (size_t b = 1; b < (size_t{64} << 20); b = b * 3 / 2 + 7) {
    size_t c = CachingAllocator::size_class(b);
    EXPECT_GE(c, b);
    EXPECT_LE(c - b, std::max<size_t>(b / 4, 512)) << b;
    EXPECT_LT(c - b, size_t{2} << 20) << b;
    EXPECT_EQ(c % 512, 0u) << b;
    EXPECT_GE(c, prev);  // monotone
    EXPECT_EQ(CachingAllocator::size_class(c), c) << "a class is its own class: " << b;
    prev = c;
  }
}

TEST(CudaAllocator, ReusesFreedBlocksOfTheSameClass) {
  FakeSource src;
  {
    CachingAllocator a(src);
    auto p = a.get(1000);
    ASSERT_TRUE(p);
    EXPECT_EQ(a.stats().in_use_bytes, 1024);
    ASSERT_TRUE(a.put(*p));
    EXPECT_EQ(a.stats().in_use_bytes, 0);
    EXPECT_EQ(a.stats().cached_bytes, 1024);
    EXPECT_EQ(a.stats().reserved_bytes, 1024);
    auto q = a.get(900);  // same class: the cached block
    ASSERT_TRUE(q);
    EXPECT_EQ(*q, *p);
    EXPECT_EQ(src.allocs, 1);
    EXPECT_EQ(a.stats().cache_hits, 1);
    EXPECT_EQ(a.stats().requests, 2);
    // A different class that is not within 2x of the cached one is a new block.
    auto big = a.get(10000);
    ASSERT_TRUE(big);
    EXPECT_EQ(src.allocs, 2);
    EXPECT_EQ(a.stats().peak_in_use_bytes, 1024 + 10240);
    ASSERT_TRUE(a.put(*big));
    // A smaller request may take a cached block of up to twice its class.
    auto mid = a.get(6000);  // class 6144; 10240 <= 12288
    ASSERT_TRUE(mid);
    EXPECT_EQ(*mid, *big);
    EXPECT_EQ(a.stats().cache_hits, 2);
    auto tiny = a.get(10);  // class 512; nothing cached within 1024
    ASSERT_TRUE(tiny);
    EXPECT_EQ(src.allocs, 3);
  }
  // The destructor gives everything back, in use or cached.
  EXPECT_TRUE(src.live.empty());
  EXPECT_EQ(src.held, 0u);
}

TEST(CudaAllocator, TrimReleasesCachedBlocksLargestFirst) {
  FakeSource src;
  CachingAllocator a(src);
  std::vector<void*> ps;
  for (size_t b : {1000, 5000, 20000, 98304}) ps.push_back(*a.get(b));
  void* keep_in_use = *a.get(3000);
  for (void* p : ps) ASSERT_TRUE(a.put(p));
  const int64_t cached = a.stats().cached_bytes;
  EXPECT_EQ(cached, 1024 + 5120 + 20480 + 98304);
  ASSERT_TRUE(a.trim(30000));
  EXPECT_EQ(a.stats().cached_bytes, 1024 + 5120 + 20480);
  EXPECT_EQ(a.stats().source_releases, 1);
  ASSERT_TRUE(a.release_cached());
  EXPECT_EQ(a.stats().cached_bytes, 0);
  EXPECT_EQ(a.stats().reserved_bytes, a.stats().in_use_bytes);
  EXPECT_EQ(a.stats().in_use_bytes, 3072);
  EXPECT_EQ(src.live.size(), 1u);
  ASSERT_TRUE(a.put(keep_in_use));
  EXPECT_EQ(a.stats().peak_reserved_bytes, cached + 3072);
}

TEST(CudaAllocator, PersistentBlocksAreExactAndNeverCached) {
  FakeSource src;
  CachingAllocator a(src);
  auto p = a.get_persistent(1000);
  ASSERT_TRUE(p);
  EXPECT_EQ(a.stats().in_use_bytes, 1024);  // 256-byte granules
  auto q = a.get_persistent(3 << 20);
  ASSERT_TRUE(q);
  EXPECT_EQ(src.live[*q], size_t{3} << 20);
  EXPECT_EQ(a.stats().requests, 0);
  ASSERT_TRUE(a.put(*q));
  EXPECT_EQ(a.stats().cached_bytes, 0);
  EXPECT_EQ(src.live.count(*q), 0u);
  EXPECT_EQ(a.stats().reserved_bytes, 1024);
}

TEST(CudaAllocator, FreshBlocksAreNeverCachedOnesButAreCachedWhenReturned) {
  FakeSource src;
  CachingAllocator a(src);
  void* p = *a.get(4096);
  ASSERT_TRUE(a.put(p));
  auto f = a.get_fresh(4096);
  ASSERT_TRUE(f);
  EXPECT_NE(*f, p);
  EXPECT_EQ(a.stats().cache_hits, 0);
  ASSERT_TRUE(a.put(*f));
  EXPECT_EQ(a.stats().cached_bytes, 2 * 4096);
}

TEST(CudaAllocator, OutOfMemoryReleasesTheCacheAndRetries) {
  FakeSource src;
  src.limit = 64 << 10;
  CachingAllocator a(src);
  void* p = *a.get(40 << 10);
  ASSERT_TRUE(a.put(p));  // cached: 40 KiB of the 64 held
  auto q = a.get(50 << 10);
  ASSERT_TRUE(q) << q.status().message();
  EXPECT_EQ(a.stats().cached_bytes, 0);
  EXPECT_EQ(a.stats().source_releases, 1);
  // Nothing left to release: the error is the source's, as a value.
  auto r = a.get(60 << 10);
  ASSERT_FALSE(r);
  EXPECT_NE(r.status().message().find("out of memory"), std::string::npos);
  EXPECT_EQ(a.stats().in_use_bytes, 57344);  // 50 KiB's class
}

TEST(CudaAllocator, ErrorsAreValues) {
  FakeSource src;
  CachingAllocator a(src);
  int not_ours = 0;
  EXPECT_FALSE(a.put(&not_ours));
  void* p = *a.get(100);
  ASSERT_TRUE(a.put(p));
  EXPECT_FALSE(a.put(p));  // returned twice
  src.fail_releases = 1;
  Status s = a.release_cached();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("cuMemFree"), std::string::npos);
  EXPECT_EQ(a.stats().release_errors, 1);
  EXPECT_EQ(a.stats().reserved_bytes, 0);  // forgotten: nothing to retry with
  src.fail_allocs = 1;
  src.oom_message = "CUDA_ERROR_INVALID_VALUE";
  auto q = a.get(100);
  ASSERT_FALSE(q);
  EXPECT_EQ(a.stats().in_use_bytes, 0);
  EXPECT_EQ(a.stats().reserved_bytes, 0);
  src.live.clear();  // the failed release left a block the fake still counts
}

TEST(CudaAllocator, StatisticsOverManyRunsOfOneShape) {
  // What a model does: the same requests every run; after the first run, every request is a
  // cache hit and the driver is not called again.
  FakeSource src;
  CachingAllocator a(src);
  const std::vector<size_t> sizes = {3072, 150000, 3072, 4 << 20, 77};
  for (int run = 0; run < 5; ++run) {
    std::vector<void*> held;
    for (size_t b : sizes) {
      auto p = a.get(b);
      ASSERT_TRUE(p);
      held.push_back(*p);
    }
    std::set<void*> distinct(held.begin(), held.end());
    EXPECT_EQ(distinct.size(), held.size());
    for (void* p : held) ASSERT_TRUE(a.put(p));
    ASSERT_TRUE(a.trim(size_t{1} << 30));
  }
  EXPECT_EQ(a.stats().source_allocs, static_cast<int64_t>(sizes.size()));
  EXPECT_EQ(a.stats().requests, 5 * static_cast<int64_t>(sizes.size()));
  EXPECT_EQ(a.stats().cache_hits, 4 * static_cast<int64_t>(sizes.size()));
  EXPECT_EQ(a.stats().in_use_bytes, 0);
  EXPECT_EQ(a.stats().peak_in_use_bytes, a.stats().reserved_bytes);
}

// A GPU model's allocator statistics: present, consistent, and once a shape has run, later runs
// of it take every pooled block from the cache (no driver allocation). Graphs are off so that
// every run goes step by step through the pool. Skipped without a GPU.
TEST(CudaAllocator, GpuStatsAfterRuns) {
  const char* text = R"(<ir_version: 8, opset_import: ["" : 18]>
g (float[b,n] x, float[n,n] w) => (float[b,n] y, float[b,n] z) {
  m = MatMul(x, w)
  y = Relu(m)
  z = Softmax<axis = -1>(m)
}
)";
  // Models are prepared on their first run: graphs stay off until the test ends.
  struct NoGraphs {
    NoGraphs() { ::setenv("FERRITE_CUDA_GRAPHS", "0", 1); }
    ~NoGraphs() { ::unsetenv("FERRITE_CUDA_GRAPHS"); }
  } no_graphs;
  auto gpu = testing_parse_session(text, "cuda");
  if (!gpu) GTEST_SKIP() << "no GPU: " << gpu.status().message();
  auto ref = testing_parse_session(text, "reference");
  ASSERT_TRUE(ref) << ref.status().message();
  auto input = [](int64_t b, int64_t n) {
    Tensor x = Tensor::zeros(DType::kF32, {b, n});
    Tensor w = Tensor::zeros(DType::kF32, {n, n});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 7) * 0.1f;
    for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = static_cast<float>(i % 5) * 0.01f;
    return std::vector<Session::NamedInput>{{"x", x}, {"w", w}};
  };
  std::optional<DeviceMemoryStats> prev;
  for (int run = 0; run < 4; ++run) {
    const int64_t b = run < 3 ? 4 : 9;  // a second shape on the last run
    auto in = input(b, 300);
    auto got = (*gpu)->run(in);
    ASSERT_TRUE(got) << got.status().message();
    auto want = (*ref)->run(in);
    ASSERT_TRUE(want) << want.status().message();
    for (size_t o = 0; o < got->size(); ++o)
      for (int64_t i = 0; i < (*got)[o].numel(); ++i)
        ASSERT_NEAR((*got)[o].data<float>()[i], (*want)[o].data<float>()[i], 1e-4)
            << "run " << run << " output " << o << " element " << i;
    auto st = (*gpu)->stats().device_memory;
    ASSERT_TRUE(st.has_value());
    EXPECT_GT(st->in_use_bytes, 0);  // the arena and the constants stay
    EXPECT_GE(st->reserved_bytes, st->in_use_bytes);
    EXPECT_GE(st->peak_in_use_bytes, st->in_use_bytes);
    EXPECT_GE(st->peak_reserved_bytes, st->reserved_bytes);
    EXPECT_GE(st->peak_reserved_bytes, st->peak_in_use_bytes);
    EXPECT_GT(st->requests, 0);  // the outputs come from the pool
    EXPECT_GE(st->driver_allocs, st->driver_frees);
    if (prev && run < 3) {
      EXPECT_EQ(st->driver_allocs, prev->driver_allocs) << "run " << run;
      EXPECT_EQ(st->cache_hits - prev->cache_hits, st->requests - prev->requests) << "run " << run;
      EXPECT_EQ(st->reserved_bytes, prev->reserved_bytes) << "run " << run;
    }
    prev = st;
  }
}

#endif  // FERRITE_HAVE_CUDA

}  // namespace
}  // namespace ferrite
