// Concurrency of the compile cache: threads with their own cache objects, one object shared by
// threads, and separate processes, all on one key. Readers must only ever see whole entries.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "compile_cache_test_util.h"
#include "runtime/compile_cache.h"

namespace ferrite {
namespace {

using namespace cache_testing;
namespace fs = std::filesystem;

// One cache object shared by compiler threads.
TEST(CompileCache, OneObjectManyThreads) {
  TempDir tmp;
  CompileCacheOptions o = options_for(tmp.path());
  o.memory_budget_bytes = 200000;  // small enough to evict while the threads run
  CompileCache cache(std::move(o));
  constexpr int kThreads = 4, kKeys = 20;
  std::atomic<int> bad{0}, gets{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kKeys; ++i) {
        auto k = key_of("k" + std::to_string(i));
        if (!cache.put(k, make_payload(t, i)).is_ok()) ++bad;
        auto r = cache.get(k);
        ++gets;
        if (!r.hit() || !valid_payload(r.value->payload)) ++bad;
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, 0);
  CacheStats s = cache.stats();
  EXPECT_EQ(s.hits + s.misses, static_cast<uint64_t>(gets));
  EXPECT_LE(s.memory_bytes, 200000u);
  EXPECT_EQ(s.disk_entries, static_cast<uint64_t>(kKeys));
}

TEST(CompileCache, ConcurrentWritersAndReadersOnOneKey) {
  TempDir tmp;
  auto k = key_of("contended");
  constexpr int kWriters = 3, kIterations = 40;
  std::atomic<int> writers_done{0}, bad_reads{0}, hits{0}, write_errors{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      CompileCache cache(disk_only(tmp.path()));
      for (int i = 0; i < kIterations; ++i)
        if (!cache.put(k, make_payload(w, i)).is_ok()) ++write_errors;
      ++writers_done;
    });
  }
  for (int rd = 0; rd < 2; ++rd) {
    threads.emplace_back([&] {
      CompileCache cache(disk_only(tmp.path()));
      do {
        auto r = cache.get(k);
        if (r.hit()) {
          ++hits;
          if (!valid_payload(r.value->payload)) ++bad_reads;
        } else if (r.outcome != CacheOutcome::kAbsent) {
          ++bad_reads;
          ADD_FAILURE() << to_string(r.outcome) << ": " << r.reason;
        }
      } while (writers_done < kWriters);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(write_errors, 0);
  EXPECT_EQ(bad_reads, 0);
  EXPECT_GT(hits, 0);
  CompileCache after(disk_only(tmp.path()));
  auto r = after.get(k);
  ASSERT_TRUE(r.hit()) << r.reason;
  EXPECT_TRUE(valid_payload(r.value->payload));
  // No temp files left behind.
  EXPECT_EQ(tree(tmp.path()).size(), 1u);
}

TEST(CompileCache, ConcurrentFileArtifactWriters) {
  TempDir tmp;
  fs::path root = tmp.path() / "cache";
  auto k = key_of("so");
  constexpr int kWriters = 3, kIterations = 15;
  std::vector<fs::path> sources;
  for (int w = 0; w < kWriters; ++w)
    sources.push_back(tmp.write("src" + std::to_string(w) + ".so", make_payload(w, 0)));
  std::atomic<int> writers_done{0}, bad{0}, hits{0};
  std::vector<std::thread> threads;
  for (int w = 0; w < kWriters; ++w) {
    threads.emplace_back([&, w] {
      CompileCache cache(disk_only(root));
      for (int i = 0; i < kIterations; ++i)
        if (!cache.put_file(k, sources[w]).has_value()) ++bad;
      ++writers_done;
    });
  }
  threads.emplace_back([&] {
    CompileCache cache(disk_only(root));
    do {
      auto r = cache.get_file(k);
      if (r.hit()) {
        ++hits;
        if (!valid_payload(read_file(r.value->path))) ++bad;
      } else if (r.outcome != CacheOutcome::kAbsent) {
        ++bad;
        ADD_FAILURE() << to_string(r.outcome) << ": " << r.reason;
      }
    } while (writers_done < kWriters);
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(bad, 0);
  EXPECT_GT(hits, 0);
  CompileCache after(disk_only(root));
  auto r = after.get_file(k);
  ASSERT_TRUE(r.hit()) << r.reason;
  // The losers' artifacts are young, so prune keeps them; nothing else is left over.
  for (const auto& name : tree(root)) EXPECT_EQ(name.find(".tmp-"), std::string::npos) << name;
}

// Two processes compiling the same model at once: both succeed, every read is whole.
TEST(CompileCache, TwoProcessesShareOneKey) {
  TempDir tmp;
  auto k = key_of("two-procs");
  std::vector<pid_t> children;
  for (int w = 0; w < 2; ++w) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // Child: no gtest assertions; the exit code is the verdict.
      int code = 0;
      {
        CompileCache cache(disk_only(tmp.path()));
        for (int i = 0; i < 40 && code == 0; ++i) {
          if (!cache.put(k, make_payload(w, i)).is_ok()) code = 2;
          auto r = cache.get(k);
          if (!r.hit() || !valid_payload(r.value->payload)) code = 3;
        }
      }
      ::_exit(code);
    }
    children.push_back(pid);
  }
  int parent_hits = 0;
  CompileCache reader(disk_only(tmp.path()));
  for (int i = 0; i < 200; ++i) {
    auto r = reader.get(k);
    if (r.hit()) {
      ++parent_hits;
      EXPECT_TRUE(valid_payload(r.value->payload));
    } else {
      EXPECT_EQ(r.outcome, CacheOutcome::kAbsent) << r.reason;
    }
  }
  for (pid_t pid : children) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status));
    EXPECT_EQ(WEXITSTATUS(status), 0);
  }
  auto r = reader.get(k);
  ASSERT_TRUE(r.hit()) << r.reason;
  EXPECT_TRUE(valid_payload(r.value->payload));
  EXPECT_EQ(tree(tmp.path()).size(), 1u);
}

}  // namespace
}  // namespace ferrite
