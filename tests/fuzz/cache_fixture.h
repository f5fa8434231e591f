// The cache entry the compile_cache target reads and fuzz_cache_seeds writes: one fixed key,
// and one fixed artifact for file entries (stored under the name the writer gives it).
#pragma once

#include <string>

#include "runtime/compile_cache.h"

namespace ferrite::fuzz {

inline CacheKey cache_fuzz_key() {
  return CacheKey().add("fuzz", "compile_cache target");
}

inline std::string cache_fuzz_artifact() {
  return "not really a shared object: the fuzzed entries point at these bytes\n";
}

// The file name put_file gives the artifact (compile_cache.cpp): <key>-<hash prefix>.so.
inline std::string cache_fuzz_artifact_name() {
  return cache_fuzz_key().hex() + "-" + sha256(cache_fuzz_artifact()).hex().substr(0, 16) + ".so";
}

// A cache in `dir` that ignores the environment and stays quiet.
inline CompileCacheOptions cache_fuzz_options(const std::filesystem::path& dir) {
  CompileCacheOptions o;
  o.dir = dir;
  o.warn = [](const std::string&) {};
  o.getenv = [](const char*) -> const char* { return nullptr; };
  return o;
}

}  // namespace ferrite::fuzz
