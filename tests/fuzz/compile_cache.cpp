// Fuzz target compile_cache: bytes as a compile-cache entry file (runtime/compile_cache_store.h)
// -> CompileCache::get and get_file for the entry's key, and the tuning-record parser on a blob
// hit (tune/autotuner.cpp reads its records from the cache). Each input is read twice: as given
// (almost every mutation then fails the SHA-256 check), and with the header's hash recomputed
// over the mutated bytes, as anyone who can write to the cache directory can do (the hash
// detects damage, it is no signature), so the fields behind the hash check are fuzzed too. The
// reader must accept or reject, never crash, and a hit must name a file inside the cache.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "cache_fixture.h"
#include "fuzz_util.h"
#include "runtime/compile_cache_store.h"
#include "tune/autotuner.h"

using namespace ferrite;
namespace fs = std::filesystem;

namespace {

struct Fixture {
  fs::path dir = fuzz::scratch_dir() / "cache";
  CompileCache cache{fuzz::cache_fuzz_options(dir)};
  CacheKey key = fuzz::cache_fuzz_key();
  fs::path entry = cache.entry_path(key);
  fs::path artifact = entry.parent_path() / fuzz::cache_fuzz_artifact_name();
};

Fixture& fixture() {
  static Fixture* f = [] {
    auto* fx = new Fixture();
    if (!fx->cache.disk_enabled() || fx->cache.read_only()) {
      std::fprintf(stderr, "fuzz: cache in %s unusable\n", fx->dir.c_str());
      std::abort();
    }
    fs::create_directories(fx->entry.parent_path());
    return fx;
  }();
  return *f;
}

// The reader removes what it rejects (and the artifact of a file entry that does not match), so
// every read starts from freshly written files.
void place(Fixture& f, const std::string& entry_bytes) {
  fuzz::write_file(f.entry, entry_bytes);
  fuzz::write_file(f.artifact, fuzz::cache_fuzz_artifact());
}

void read_both_ways(Fixture& f, const std::string& bytes) {
  place(f, bytes);
  f.cache.clear_memory();  // else a blob hit of an earlier input would be served from memory
  auto blob = f.cache.get(f.key);
  if (blob.hit()) (void)parse_launch(blob.value->payload);
  place(f, bytes);
  auto file = f.cache.get_file(f.key);
  if (file.hit()) {
    const fs::path& p = file.value->path;
    if (p.parent_path() != f.entry.parent_path())
      fuzz::finding("get_file returned a path outside the entry's directory: " + p.string());
    std::error_code ec;
    if (!fs::is_regular_file(p, ec)) fuzz::finding("get_file hit names no file: " + p.string());
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Fixture& f = fixture();
  std::string bytes(reinterpret_cast<const char*>(data), size);
  read_both_ways(f, bytes);
  constexpr size_t kHashed = 96;  // header bytes covered by the hash (compile_cache_store.h)
  if (bytes.size() < cache_store::kHeaderSize) return 0;
  Digest256 d = Sha256()
                    .update(std::string_view(bytes.data(), kHashed))
                    .update(std::string_view(bytes).substr(cache_store::kHeaderSize))
                    .finish();
  std::memcpy(bytes.data() + kHashed, d.bytes.data(), d.bytes.size());
  read_both_ways(f, bytes);
  return 0;
}
