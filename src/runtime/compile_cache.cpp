#include "runtime/compile_cache.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/compile_cache_store.h"

#ifndef FERRITE_VERSION
#define FERRITE_VERSION "unknown"
#endif

namespace ferrite {
// The disk format and file primitives (and the `fs` alias).
using namespace cache_store;

namespace {

bool env_says_disabled(const char* v) {
  if (v == nullptr) return false;
  std::string s(v);
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s == "0" || s == "off" || s == "false" || s == "no" || s == "disabled";
}

void default_warn(const std::string& message) {
  std::fprintf(stderr, "ferrite: warning: %s\n", message.c_str());
}

}  // namespace

std::string_view ferrite_version() {
  return FERRITE_VERSION;
}

const std::string& ferrite_build_stamp() {
  static const std::string stamp = [] {
    // The object holding this code: a shared library when ferrite is loaded as one, else the
    // executable (dladdr names the main program by argv[0], which may be relative).
    std::string path = "/proc/self/exe";
    Dl_info info;
    if (::dladdr(reinterpret_cast<void*>(&ferrite_version), &info) != 0 && info.dli_fname &&
        std::strstr(info.dli_fname, ".so") != nullptr)
      path = info.dli_fname;
    struct stat st;
    // Without the binary, the compile time of this file is the best stand-in.
    if (::stat(path.c_str(), &st) != 0) return sha256(__DATE__ " " __TIME__).hex().substr(0, 16);
    std::string real = path;
    std::error_code ec;
    fs::path canon = fs::canonical(path, ec);
    if (!ec) real = canon.string();
    Sha256 h;
    h.update(real).update_u64(static_cast<uint64_t>(st.st_size));
    h.update_u64(static_cast<uint64_t>(st.st_mtim.tv_sec)).update_u64(st.st_mtim.tv_nsec);
    return h.finish().hex().substr(0, 16);
  }();
  return stamp;
}

CacheKey::CacheKey() {
  hash_.update(std::string_view("ferrite.cache-key.v1"));
}

CacheKey& CacheKey::add(std::string_view field, std::string_view bytes) {
  hash_.update(std::string_view("b")).update_u64(field.size()).update(field);
  hash_.update_u64(bytes.size()).update(bytes);
  return *this;
}

CacheKey& CacheKey::add(std::string_view field, std::span<const uint8_t> bytes) {
  return add(field, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

CacheKey& CacheKey::add_int(std::string_view field, int64_t value) {
  hash_.update(std::string_view("i")).update_u64(field.size()).update(field);
  hash_.update_u64(static_cast<uint64_t>(value));
  return *this;
}

std::string CacheKey::hex() const {
  Sha256 copy = hash_;
  return copy.finish().hex();
}

CacheKey make_compile_key(const CompileKeyParts& parts) {
  CacheKey k;
  k.add("graph", parts.graph)
      .add("options", parts.options)
      .add("device", parts.device)
      .add("compiler_version", parts.compiler_version)
      .add("artifact_kind", parts.artifact_kind)
      .add("ferrite_version", ferrite_version());
  if (parts.include_build_stamp) k.add("ferrite_build", ferrite_build_stamp());
  return k;
}

std::string_view to_string(CacheOutcome outcome) {
  switch (outcome) {
    case CacheOutcome::kHit:
      return "hit";
    case CacheOutcome::kAbsent:
      return "absent";
    case CacheOutcome::kDisabled:
      return "disabled";
    case CacheOutcome::kRejected:
      return "rejected";
    case CacheOutcome::kIoError:
      return "io-error";
  }
  return "?";
}

CacheLocation resolve_cache_location(const EnvLookup& getenv) {
  CacheLocation loc;
  if (env_says_disabled(getenv("FERRITE_CACHE"))) {
    loc.enabled = false;
    loc.note = "disabled by FERRITE_CACHE";
    return loc;
  }
  auto nonempty = [](const char* v) { return v != nullptr && v[0] != '\0'; };
  if (const char* d = getenv("FERRITE_CACHE_DIR"); nonempty(d)) {
    std::error_code ec;
    fs::path p = fs::absolute(d, ec);
    loc.dir = ec ? fs::path(d) : p;
    return loc;
  }
  if (const char* x = getenv("XDG_CACHE_HOME"); nonempty(x) && fs::path(x).is_absolute()) {
    loc.dir = fs::path(x) / "ferrite";
    return loc;
  }
  if (const char* home = getenv("HOME"); nonempty(home)) {
    loc.dir = fs::path(home) / ".cache" / "ferrite";
    return loc;
  }
  loc.note = "no cache directory: FERRITE_CACHE_DIR, XDG_CACHE_HOME and HOME are unset";
  return loc;
}

namespace {
bool readable_directory(const fs::path& dir) {
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  return fd.valid() && ::access(dir.c_str(), R_OK | X_OK) == 0;
}
}  // namespace

CompileCache::CompileCache(CompileCacheOptions options) : options_(std::move(options)) {
  if (!options_.warn) options_.warn = default_warn;
  if (!options_.getenv) options_.getenv = [](const char* name) { return std::getenv(name); };
  CacheLocation loc = resolve_cache_location(options_.getenv);
  if (!loc.enabled) {
    enabled_ = false;
    disabled_reason_ = loc.note;
    return;
  }
  if (!options_.use_disk) {
    disabled_reason_ = "disk cache not requested";
    return;
  }
  dir_ = options_.dir.empty() ? loc.dir : options_.dir;
  if (dir_.empty()) {
    disabled_reason_ = loc.note;
    options_.warn(str_cat("compile cache: ", loc.note, "; disk cache disabled"));
    return;
  }
  // Probes with a real file: access(W_OK) misses read-only mounts, ACLs and quota-less dirs alike.
  Status s = ensure_dir(dir_);
  if (s.is_ok()) {
    Fd fd;
    auto tmp = create_temp(dir_ / "probe", 0644, &fd);
    if (tmp) {
      fd.reset();
      ::unlink(tmp->c_str());
    } else {
      s = tmp.status();
    }
  }
  if (!s.is_ok() && readable_directory(dir_)) {
    // A read-only cache (a shared, pre-populated directory; a read-only mount) still serves its
    // entries: every read validates the entry's hash, and nothing is written.
    disk_enabled_ = true;
    read_only_ = true;
    disabled_reason_ = str_cat("cache directory '", dir_.string(), "' is read-only (", s.message(),
                               "): entries are read, none stored");
    return;
  }
  if (!s.is_ok()) {
    disabled_reason_ = str_cat("cache directory '", dir_.string(), "' unusable: ", s.message());
    options_.warn(str_cat("compile cache: ", disabled_reason_, "; disk cache disabled"));
    return;
  }
  disk_enabled_ = true;
}

namespace {
std::mutex g_global_mutex;
std::optional<fs::path> g_global_dir;  // set_global_dir's choice, before global() exists
bool g_global_made = false;

CompileCacheOptions global_options() {
  std::lock_guard<std::mutex> lock(g_global_mutex);
  g_global_made = true;
  CompileCacheOptions o;
  if (g_global_dir) o.dir = *g_global_dir;
  return o;
}
}  // namespace

CompileCache& CompileCache::global() {
  static CompileCache cache(global_options());
  return cache;
}

Status CompileCache::set_global_dir(const fs::path& dir) {
  std::error_code ec;
  fs::path want = fs::absolute(dir, ec);
  if (ec || dir.empty()) return err("cache directory '", dir.string(), "' is not a usable path");
  {
    std::lock_guard<std::mutex> lock(g_global_mutex);
    if (!g_global_made) {
      g_global_dir = want;
      return Status::ok();
    }
  }
  // The cache exists: only its own directory is accepted (it is shared by every session).
  fs::path have = global().dir();
  if (!have.empty() && fs::weakly_canonical(have, ec) == fs::weakly_canonical(want, ec))
    return Status::ok();
  return err("the compile cache is process-wide and already in use at '",
             have.empty() ? std::string("(no directory)") : have.string(), "'; cannot move it to '",
             want.string(), "'");
}

fs::path CompileCache::entry_path(const CacheKey& key) const {
  std::string hex = key.hex();
  return dir_ / hex.substr(0, 2) / (hex + kEntrySuffix);
}

template <class T>
CacheLookup<T> CompileCache::miss(CacheOutcome outcome, std::string reason) {
  ++misses_;
  if (outcome == CacheOutcome::kRejected) ++rejected_;
  CacheLookup<T> r;
  r.outcome = outcome;
  r.reason = std::move(reason);
  return r;
}

void CompileCache::note_write_failure(const Status& s) {
  ++write_failures_;
  if (!warned_write_failure_.exchange(true))
    options_.warn(str_cat("compile cache: ", s.message(), " (further write failures not shown)"));
}

std::optional<CachedBlob> CompileCache::memory_get(const std::string& key) {
  std::lock_guard<std::mutex> lock(memory_mutex_);
  auto it = memory_index_.find(key);
  if (it == memory_index_.end()) return std::nullopt;
  lru_.splice(lru_.begin(), lru_, it->second);
  return *it->second->blob;
}

void CompileCache::memory_erase(const std::string& key) {
  std::lock_guard<std::mutex> lock(memory_mutex_);
  auto it = memory_index_.find(key);
  if (it == memory_index_.end()) return;
  memory_bytes_ -= it->second->bytes;
  lru_.erase(it->second);
  memory_index_.erase(it);
}

void CompileCache::memory_put(const std::string& key, std::shared_ptr<const CachedBlob> blob) {
  uint64_t bytes = key.size() + blob->payload.size() + blob->metadata.size();
  memory_erase(key);
  std::lock_guard<std::mutex> lock(memory_mutex_);
  if (bytes > options_.memory_budget_bytes) return;  // would evict everything else for one entry
  lru_.push_front(MemoryEntry{key, std::move(blob), bytes});
  memory_index_[key] = lru_.begin();
  memory_bytes_ += bytes;
  while (memory_bytes_ > options_.memory_budget_bytes) {
    MemoryEntry& victim = lru_.back();
    memory_bytes_ -= victim.bytes;
    memory_index_.erase(victim.key);
    lru_.pop_back();
  }
}

void CompileCache::clear_memory() {
  std::lock_guard<std::mutex> lock(memory_mutex_);
  lru_.clear();
  memory_index_.clear();
  memory_bytes_ = 0;
}

CacheLookup<CachedBlob> CompileCache::get(const CacheKey& key) {
  if (!enabled_) return miss<CachedBlob>(CacheOutcome::kDisabled, disabled_reason_);
  std::string hex = key.hex();
  if (auto blob = memory_get(hex)) {
    ++hits_;
    ++memory_hits_;
    CacheLookup<CachedBlob> r;
    r.value = std::move(*blob);
    r.outcome = CacheOutcome::kHit;
    return r;
  }
  if (!disk_enabled_) return miss<CachedBlob>(CacheOutcome::kAbsent, {});
  EntryRead e = read_entry(entry_path(key), hex, true);
  if (e.outcome != CacheOutcome::kHit) return miss<CachedBlob>(e.outcome, std::move(e.reason));
  if (e.entry.kind != kBlobEntry)
    return miss<CachedBlob>(CacheOutcome::kAbsent, "entry holds a file artifact, not a blob");
  auto blob = std::make_shared<CachedBlob>(
      CachedBlob{std::move(e.entry.payload), std::move(e.entry.metadata)});
  memory_put(hex, blob);
  ++hits_;
  ++disk_hits_;
  CacheLookup<CachedBlob> r;
  r.value = *blob;
  r.outcome = CacheOutcome::kHit;
  return r;
}

Status CompileCache::put(const CacheKey& key, std::string_view payload, std::string_view metadata) {
  if (!enabled_) return Status::ok();
  if (metadata.size() > kMaxMetadataBytes)
    return err("compile cache: metadata of ", metadata.size(), " bytes exceeds the limit of ",
               kMaxMetadataBytes);
  std::string hex = key.hex();
  memory_put(hex,
             std::make_shared<CachedBlob>(CachedBlob{std::string(payload), std::string(metadata)}));
  if (!disk_enabled_ || read_only_) return Status::ok();
  fs::path path = entry_path(key);
  Status s = ensure_dir(path.parent_path());
  if (s.is_ok())
    s = atomic_write(path, {encode_header(kBlobEntry, hex, metadata, payload), metadata, payload});
  if (!s.is_ok()) {
    note_write_failure(s);
    return s.with_context("compile cache");
  }
  ++writes_;
  return Status::ok();
}

Expected<fs::path> CompileCache::put_file(const CacheKey& key, const fs::path& source,
                                          std::string_view metadata) {
  if (!disk_enabled_ || read_only_)
    return err("compile cache: cannot store file artifacts: ",
               disabled_reason_.empty() ? "disk cache disabled" : disabled_reason_);
  if (metadata.size() > kMaxMetadataBytes)
    return err("compile cache: metadata of ", metadata.size(), " bytes exceeds the limit of ",
               kMaxMetadataBytes);
  std::string hex = key.hex();
  fs::path entry = entry_path(key);
  auto fail = [&](const Status& s) -> Status {
    note_write_failure(s);
    return s.with_context("compile cache");
  };

  struct stat src_st;
  auto opened = open_regular_file(source, &src_st);
  if (!opened) return opened.status().with_context("artifact");
  Fd in(*opened);
  if (Status s = ensure_dir(entry.parent_path()); !s.is_ok()) return fail(s);

  // The final name depends on the content hash, known only after copying; the temp file is named
  // after the key so a stale one is recognizable.
  Fd out;
  auto tmp = create_temp(entry.parent_path() / hex, src_st.st_mode & 0777, &out);
  if (!tmp) return fail(tmp.status());
  auto copied = hash_stream(in.get(), source, out.get(), *tmp);
  if (!copied) {
    out.reset();
    ::unlink(tmp->c_str());
    return fail(copied.status());
  }
  FileRecord record;
  record.size = copied->first;
  record.hash = copied->second;
  record.name = hex + "-" + record.hash.hex().substr(0, 16) + sanitized_extension(source);
  fs::path artifact = entry.parent_path() / record.name;
  // Same name means same content, so replacing a concurrent writer's identical copy is harmless
  // (and a process that already mapped the old inode keeps it).
  if (Status s = commit_temp(out, *tmp, artifact); !s.is_ok()) return fail(s);
  std::string payload = encode_file_record(record);
  Status s =
      atomic_write(entry, {encode_header(kFileEntry, hex, metadata, payload), metadata, payload});
  if (!s.is_ok()) return fail(s);
  ++writes_;
  return artifact;
}

CacheLookup<CachedFile> CompileCache::get_file(const CacheKey& key) {
  if (!enabled_) return miss<CachedFile>(CacheOutcome::kDisabled, disabled_reason_);
  if (!disk_enabled_) return miss<CachedFile>(CacheOutcome::kAbsent, {});
  std::string hex = key.hex();
  fs::path entry = entry_path(key);
  EntryRead e = read_entry(entry, hex, true);
  if (e.outcome != CacheOutcome::kHit) return miss<CachedFile>(e.outcome, std::move(e.reason));
  if (e.entry.kind != kFileEntry)
    return miss<CachedFile>(CacheOutcome::kAbsent, "entry holds a blob, not a file artifact");

  // The entry passed its hash check, so a bad record or artifact means the artifact was damaged
  // or removed behind our back: drop both and let the caller rebuild.
  auto reject = [&](const std::string& why, const fs::path& artifact) {
    if (!artifact.empty()) ::unlink(artifact.c_str());
    remove_if_same(entry, e.st);
    return miss<CachedFile>(CacheOutcome::kRejected, str_cat("cache entry '", entry.string(),
                                                             "' rejected: ", why, "; removed"));
  };
  auto record = decode_file_record(e.entry.payload, hex);
  if (!record) return reject("malformed artifact record", {});
  fs::path artifact = entry.parent_path() / record->name;
  struct stat artifact_st;
  if (::lstat(artifact.c_str(), &artifact_st) != 0 && errno == ENOENT)
    return reject(str_cat("artifact '", record->name, "' is missing"), {});
  auto opened = open_regular_file(artifact, &artifact_st);
  if (!opened) return miss<CachedFile>(CacheOutcome::kIoError, opened.status().message());
  Fd fd(*opened);
  auto hashed = hash_stream(fd.get(), artifact, -1, {});
  if (!hashed) return miss<CachedFile>(CacheOutcome::kIoError, hashed.status().message());
  if (hashed->first != record->size)
    return reject(str_cat("artifact '", record->name, "' has ", hashed->first, " bytes, expected ",
                          record->size),
                  artifact);
  if (hashed->second != record->hash)
    return reject(str_cat("artifact '", record->name, "' content hash mismatch"), artifact);
  ++hits_;
  ++disk_hits_;
  CacheLookup<CachedFile> r;
  r.value = CachedFile{artifact, std::move(e.entry.metadata)};
  r.outcome = CacheOutcome::kHit;
  return r;
}

Status CompileCache::remove(const CacheKey& key) {
  std::string hex = key.hex();
  memory_erase(hex);
  if (!disk_enabled_ || read_only_) return Status::ok();
  fs::path entry = entry_path(key);
  std::vector<fs::path> doomed{entry};
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(entry.parent_path(), ec))
    if (f.path().filename().string().rfind(hex + "-", 0) == 0) doomed.push_back(f.path());
  remove_files(doomed);
  return Status::ok();
}

Expected<PruneResult> CompileCache::prune(uint64_t max_bytes) {
  PruneResult result;
  if (!disk_enabled_ || read_only_) return result;
  FERRITE_ASSIGN_OR_RETURN(DiskScan scan, scan_disk(dir_));
  uint64_t total = scan.total_bytes;
  auto drop = [&](const std::vector<fs::path>& paths) {
    uint64_t freed = remove_files(paths);
    result.removed_bytes += freed;
    total -= std::min(total, freed);
  };
  std::vector<fs::path> stale;
  for (auto& [path, size] : scan.stale_temps) stale.push_back(path);
  drop(stale);

  auto now = fs::file_time_type::clock::now();
  std::vector<std::pair<fs::file_time_type, std::string>> by_age;
  for (auto& [key, g] : scan.groups) {
    if (g.entry.empty()) {
      // Artifacts without an entry: a writer still between its two renames, or a leftover.
      std::vector<fs::path> orphans;
      for (auto& [p, t] : g.artifacts)
        if (now - t > kStaleAge) orphans.push_back(p);
      drop(orphans);
      continue;
    }
    if (g.artifacts.size() > 1) {
      // Losers of concurrent put_file calls with different content; keep the referenced one.
      EntryRead e = read_entry(g.entry, key, false);
      auto record = e.outcome == CacheOutcome::kHit && e.entry.kind == kFileEntry
                        ? decode_file_record(e.entry.payload, key)
                        : std::nullopt;
      std::vector<fs::path> unreferenced;
      for (auto& [p, t] : g.artifacts)
        if ((!record || p.filename() != record->name) && now - t > kStaleAge)
          unreferenced.push_back(p);
      drop(unreferenced);
    }
    by_age.emplace_back(g.mtime, key);
  }
  std::sort(by_age.begin(), by_age.end());
  size_t next = 0;
  for (; next < by_age.size() && total > max_bytes; ++next) {
    const std::string& key = by_age[next].second;
    DiskGroup& g = scan.groups[key];
    std::vector<fs::path> files{g.entry};  // entry first: readers then miss cleanly
    for (auto& [p, t] : g.artifacts) files.push_back(p);
    drop(files);
    memory_erase(key);
    ++result.removed_entries;
  }
  result.remaining_entries = by_age.size() - next;
  result.remaining_bytes = total;
  return result;
}

CacheStats CompileCache::stats(bool scan_disk_usage) const {
  CacheStats s;
  s.hits = hits_;
  s.memory_hits = memory_hits_;
  s.disk_hits = disk_hits_;
  s.misses = misses_;
  s.rejected = rejected_;
  s.writes = writes_;
  s.write_failures = write_failures_;
  {
    std::lock_guard<std::mutex> lock(memory_mutex_);
    s.memory_entries = lru_.size();
    s.memory_bytes = memory_bytes_;
  }
  if (scan_disk_usage && disk_enabled_) {
    if (auto scan = scan_disk(dir_)) {
      for (auto& [key, g] : scan->groups)
        if (!g.entry.empty()) ++s.disk_entries;
      s.disk_bytes = scan->total_bytes;
    }
  }
  return s;
}

}  // namespace ferrite
