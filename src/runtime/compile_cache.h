// Compile cache: stores compiled artifacts (generated-source shared objects, kernel binaries,
// tuning records) under a content key, in memory (per process, LRU bounded by bytes) and on disk
// (shared by all processes of the user).
//
// Disk layout: <root>/<first 2 key hex>/<key>.entry, one file per key, holding a header (magic,
// format version, kind, key, sizes, SHA-256 over header+metadata+payload), the metadata string and
// the payload. Artifacts that must be files (a .so to dlopen) live next to their entry as
// <key>-<content hash prefix><ext>; the entry records their size and hash. Every write goes to a
// unique temp file in the same directory, is fsynced and renamed into place, so readers see either
// the old or the new file, never a partial one, and concurrent writers of one key both succeed (the
// last rename wins). Anything that fails validation on read is reported as a miss with a reason,
// removed, and never returned; the caller rebuilds and puts again.
//
// The cache never fails a compile: an unusable directory turns the disk level off with a warning,
// and write failures are returned as Status for the caller to log.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

#include "support/hash.h"
#include "support/status.h"

namespace ferrite {

// The ferrite release (project version).
std::string_view ferrite_version();
// Changes whenever the ferrite binary (or shared library) holding this code is rebuilt, so that a
// development build never picks up artifacts of an older build with the same version number.
const std::string& ferrite_build_stamp();

// A cache key: SHA-256 over a sequence of named fields. Each field is framed with its type and the
// lengths of its name and value, so no two different field sequences hash the same input.
class CacheKey {
 public:
  CacheKey();
  CacheKey& add(std::string_view field, std::string_view bytes);
  CacheKey& add(std::string_view field, std::span<const uint8_t> bytes);
  CacheKey& add_int(std::string_view field, int64_t value);
  // 64 lower-case hex digits. More fields may still be added afterwards.
  std::string hex() const;

 private:
  Sha256 hash_;
};

// What a compiled artifact depends on. The caller serializes each part canonically (same content ->
// same bytes); `graph` may be the graph bytes themselves or a content hash of them.
struct CompileKeyParts {
  std::string_view graph;
  std::string_view options;
  std::string_view device;            // device properties: kind, arch, features, driver version
  std::string_view compiler_version;  // backend toolchain identity, e.g. "gcc 12.2.0 -O2"
  std::string_view artifact_kind;     // what is stored under the key: "so", "kernel", "tuning"
  // Tuning records may want to survive rebuilds of ferrite itself; compiled code must not.
  bool include_build_stamp = true;
};
CacheKey make_compile_key(const CompileKeyParts& parts);

// Why a lookup returned nothing. kRejected: an entry existed but failed validation (corrupt,
// truncated, wrong magic/version/key); it has been removed.
enum class CacheOutcome { kHit, kAbsent, kDisabled, kRejected, kIoError };
std::string_view to_string(CacheOutcome outcome);

template <class T>
struct CacheLookup {
  std::optional<T> value;
  CacheOutcome outcome = CacheOutcome::kAbsent;
  std::string reason;  // for the caller's log; empty on a hit or a plain absent entry
  bool hit() const { return value.has_value(); }
};

struct CachedBlob {
  std::string payload;
  std::string metadata;
};

struct CachedFile {
  std::filesystem::path path;  // stays valid and unchanged until pruned
  std::string metadata;
};

struct CacheStats {
  uint64_t hits = 0;
  uint64_t memory_hits = 0;
  uint64_t disk_hits = 0;
  uint64_t misses = 0;
  uint64_t rejected = 0;  // entries that failed validation (also counted as misses)
  uint64_t writes = 0;
  uint64_t write_failures = 0;
  uint64_t memory_entries = 0;
  uint64_t memory_bytes = 0;
  uint64_t disk_entries = 0;  // scanned on request
  uint64_t disk_bytes = 0;    // entries, artifacts and temp files
};

struct PruneResult {
  uint64_t removed_entries = 0;
  uint64_t removed_bytes = 0;
  uint64_t remaining_entries = 0;
  uint64_t remaining_bytes = 0;
};

// Where the disk cache lives according to the environment.
struct CacheLocation {
  bool enabled = true;        // false when FERRITE_CACHE=0 (or off/false/no)
  std::filesystem::path dir;  // empty when no location could be determined
  std::string note;           // why disabled or why no dir
};
using EnvLookup = std::function<const char*(const char*)>;
// $FERRITE_CACHE_DIR, else $XDG_CACHE_HOME/ferrite (absolute paths only, per the XDG spec), else
// $HOME/.cache/ferrite.
CacheLocation resolve_cache_location(const EnvLookup& getenv);

struct CompileCacheOptions {
  // Disk location; empty means resolve_cache_location(). FERRITE_CACHE=0 disables the cache even
  // when a directory is given.
  std::filesystem::path dir;
  bool use_disk = true;
  uint64_t memory_budget_bytes = uint64_t{256} << 20;
  // Receives warnings (unusable directory, first failed write). Default: stderr.
  std::function<void(const std::string&)> warn;
  // Environment lookup, replaceable so tests are hermetic. Default: ::getenv.
  EnvLookup getenv;
};

class CompileCache {
 public:
  static constexpr uint32_t kFormatVersion = 1;
  static constexpr size_t kMaxMetadataBytes = size_t{1} << 20;

  explicit CompileCache(CompileCacheOptions options = {});
  CompileCache(const CompileCache&) = delete;
  CompileCache& operator=(const CompileCache&) = delete;

  // The process-wide cache, configured from the environment on first use.
  static CompileCache& global();
  // Puts the process-wide cache's disk level in `dir` (instead of the environment's choice):
  // only before its first use, or naming the directory it already has; an error otherwise
  // (an embedding application's cache_dir option, capi/).
  static Status set_global_dir(const std::filesystem::path& dir);

  bool enabled() const { return enabled_; }
  bool disk_enabled() const { return disk_enabled_; }
  // The directory could not be written at start (permissions, a read-only mount): entries are
  // still read, nothing is stored on disk.
  bool read_only() const { return read_only_; }
  const std::filesystem::path& dir() const { return dir_; }
  // Why the cache or its disk level is off; empty when fully enabled.
  const std::string& disabled_reason() const { return disabled_reason_; }

  CacheLookup<CachedBlob> get(const CacheKey& key);
  // Stores in memory and on disk. A disabled cache accepts and drops the value.
  Status put(const CacheKey& key, std::string_view payload, std::string_view metadata = {});

  // Artifacts that must be files. put_file copies `source` into the cache and returns the stable
  // path of the stored copy; it needs the disk level (an error otherwise, so the caller keeps using
  // its own file). get_file verifies the file's size and hash before returning its path.
  Expected<std::filesystem::path> put_file(const CacheKey& key, const std::filesystem::path& source,
                                           std::string_view metadata = {});
  CacheLookup<CachedFile> get_file(const CacheKey& key);

  // Removes the key from both levels (absent is not an error).
  Status remove(const CacheKey& key);
  // Removes least-recently-used disk entries (by entry mtime; hits refresh it) until the disk
  // cache holds at most max_bytes, plus stale temp files and orphaned artifacts.
  Expected<PruneResult> prune(uint64_t max_bytes);
  CacheStats stats(bool scan_disk = true) const;
  void clear_memory();

  // Path of the entry file for `key` (whether or not it exists); for tools and tests.
  std::filesystem::path entry_path(const CacheKey& key) const;

 private:
  struct MemoryEntry {
    std::string key;
    std::shared_ptr<const CachedBlob> blob;
    uint64_t bytes = 0;
  };

  std::optional<CachedBlob> memory_get(const std::string& key);
  void memory_put(const std::string& key, std::shared_ptr<const CachedBlob> blob);
  void memory_erase(const std::string& key);
  void note_write_failure(const Status& s);
  template <class T>
  CacheLookup<T> miss(CacheOutcome outcome, std::string reason);

  CompileCacheOptions options_;
  bool enabled_ = true;
  bool disk_enabled_ = false;
  bool read_only_ = false;
  std::filesystem::path dir_;
  std::string disabled_reason_;

  mutable std::mutex memory_mutex_;
  std::list<MemoryEntry> lru_;  // most recently used first
  std::unordered_map<std::string, std::list<MemoryEntry>::iterator> memory_index_;
  uint64_t memory_bytes_ = 0;

  std::atomic<uint64_t> hits_{0}, memory_hits_{0}, disk_hits_{0}, misses_{0}, rejected_{0},
      writes_{0}, write_failures_{0};
  std::atomic<bool> warned_write_failure_{false};
};

}  // namespace ferrite
