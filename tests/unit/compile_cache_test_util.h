// Helpers shared by the compile cache tests. Self-contained (no test_util.h), so that these tests
// build with only the cache sources, e.g. for a ThreadSanitizer run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/compile_cache.h"

namespace ferrite::cache_testing {

namespace fs = std::filesystem;

// A fresh directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("ferrite_cache_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  fs::path write(const std::string& name, const std::string& bytes) const {
    fs::path p = path_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return p;
  }

 private:
  fs::path path_;
};

using Env = std::map<std::string, std::string>;

inline EnvLookup fake_env(Env env) {
  auto owned = std::make_shared<Env>(std::move(env));
  return [owned](const char* name) -> const char* {
    auto it = owned->find(name);
    return it == owned->end() ? nullptr : it->second.c_str();
  };
}

struct Warnings {
  std::shared_ptr<std::vector<std::string>> list = std::make_shared<std::vector<std::string>>();
  std::function<void(const std::string&)> sink() {
    auto l = list;
    return [l](const std::string& w) { l->push_back(w); };
  }
};

inline CompileCacheOptions options_for(const fs::path& dir, Warnings* warnings = nullptr,
                                       Env env = {}) {
  CompileCacheOptions o;
  o.dir = dir;
  o.getenv = fake_env(std::move(env));
  o.warn = warnings ? warnings->sink()
                    : [](const std::string& w) { ADD_FAILURE() << "unexpected warning: " << w; };
  return o;
}

inline CacheKey key_of(const std::string& name) {
  return CacheKey().add("test", name);
}

inline std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void write_file(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Files in the cache tree, relative names, for "nothing left behind" checks.
inline std::vector<std::string> tree(const fs::path& root) {
  std::vector<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.is_regular_file()) out.push_back(fs::relative(e.path(), root).string());
  std::sort(out.begin(), out.end());
  return out;
}

// Payloads that identify their writer and validate themselves, so a reader can tell a torn or
// mixed read from a legitimate one.
inline std::string make_payload(int writer, int iteration) {
  std::string head = "w" + std::to_string(writer) + "i" + std::to_string(iteration) + ":";
  std::string body(20000 + writer * 997 + iteration * 13, '\0');
  for (size_t i = 0; i < body.size(); ++i)
    body[i] = static_cast<char>(i * (writer + 3) + iteration);
  return head + body;
}
inline bool valid_payload(const std::string& p) {
  int writer = -1, iteration = -1;
  if (std::sscanf(p.c_str(), "w%di%d:", &writer, &iteration) != 2) return false;
  return p == make_payload(writer, iteration);
}

inline CompileCacheOptions disk_only(const fs::path& dir) {
  CompileCacheOptions o = options_for(dir);
  o.memory_budget_bytes = 0;  // every read goes to disk
  return o;
}

}  // namespace ferrite::cache_testing
