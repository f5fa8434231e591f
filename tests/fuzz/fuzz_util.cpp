#include "fuzz_util.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>

// Under AddressSanitizer a failed huge allocation returns null as the real allocator does, so
// ferrite's "out of memory" errors are exercised instead of ASan aborting (as in the unit tests,
// tests/unit/sanitizer_options.cpp). libFuzzer's own -malloc_limit_mb still reports any single
// allocation above the limit: a few KB of input must not make ferrite ask for gigabytes.
extern "C" const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}

namespace ferrite::fuzz {

namespace fs = std::filesystem;

void finding(const std::string& what) {
  std::fprintf(stderr, "\n==ferrite fuzz finding==\n%s\n", what.c_str());
  std::fflush(stderr);
  __builtin_trap();
}

void check_error(const Status& s, const char* stage) {
  if (s.is_ok()) return;
  const std::string& m = s.message();
  if (m.empty()) finding(str_cat(stage, ": error without a message"));
  if (m.find('\n') != std::string::npos)
    finding(str_cat(stage, ": error message spans lines: ", m));
}

const fs::path& scratch_dir() {
  static const fs::path dir = [] {
    std::error_code ec;
    fs::path d = fs::temp_directory_path(ec) / str_cat("ferrite-fuzz-", ::getpid());
    fs::remove_all(d, ec);
    fs::create_directories(d, ec);
    if (ec) {
      std::fprintf(stderr, "fuzz: cannot create %s: %s\n", d.c_str(), ec.message().c_str());
      std::abort();
    }
    static const fs::path removed_at_exit = d;
    std::atexit([] {
      std::error_code ignored;
      fs::remove_all(removed_at_exit, ignored);
    });
    return d;
  }();
  return dir;
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write %s\n", path.c_str());
    std::abort();
  }
}

std::optional<std::vector<Session::NamedInput>> small_inputs(const Graph& g, uint64_t seed,
                                                             int64_t max_elements) {
  std::vector<Session::NamedInput> inputs;
  std::mt19937_64 rng(seed);
  int64_t total = 0;
  for (const Value* v : g.inputs()) {
    if (v->constant) continue;  // an input with a default may be left out
    if (!v->type.shape.rank_known()) return std::nullopt;
    std::vector<int64_t> dims;
    for (const Dim& d : v->type.shape.dims()) dims.push_back(d.value().value_or(2));
    auto t = Tensor::create(v->type.dtype, dims);
    if (!t) return std::nullopt;
    total += t->numel();
    if (total > max_elements) return std::nullopt;
    bool known = visit_dtype(t->dtype(), [&]<class T>() {
      T* p = t->data<T>();
      for (int64_t i = 0; i < t->numel(); ++i) {
        if constexpr (is_float_v<T>)
          p[i] = convert<T>(static_cast<float>(static_cast<int>(rng() % 17) - 8) / 4);
        else
          p[i] = static_cast<T>(rng() % 4);
      }
    });
    if (!known) return std::nullopt;  // float8 inputs: left to the op tests
    inputs.push_back({v->name, std::move(t).value()});
  }
  return inputs;
}

}  // namespace ferrite::fuzz
