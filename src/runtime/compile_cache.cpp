#include "runtime/compile_cache.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#ifndef FERRITE_VERSION
#define FERRITE_VERSION "unknown"
#endif

namespace ferrite {
namespace fs = std::filesystem;

namespace {

// Entry header, little-endian, kHeaderSize bytes:
//   0 magic[8]  8 format version u32  12 kind u32  16 key[64] (hex)  80 payload size u64
//   88 metadata size u32  92 reserved u32 (0)  96 SHA-256 over bytes [0, 96) + metadata + payload
// The hash covers the header fields too, so a flipped size or kind is caught like a flipped payload
// byte.
constexpr char kMagic[8] = {'F', 'E', 'R', 'R', 'C', 'A', 'C', 'H'};
constexpr size_t kHeaderSize = 128;
constexpr size_t kHashedHeaderBytes = 96;
constexpr size_t kKeyHexSize = 64;
constexpr uint32_t kBlobEntry = 1;
constexpr uint32_t kFileEntry = 2;
constexpr const char* kEntrySuffix = ".entry";
constexpr const char* kTempPrefix = ".tmp-";
// Temp files and unreferenced artifacts younger than this may belong to a write in progress in
// another process, so prune leaves them alone.
constexpr auto kStaleAge = std::chrono::hours(1);

void store_u32(char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
void store_u64(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
uint32_t load_u32(const char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}
uint64_t load_u64(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t{static_cast<uint8_t>(p[i])} << (8 * i);
  return v;
}

Status errno_status(std::string_view what, const fs::path& path, int error) {
  return err(what, " '", path.string(), "': ", std::strerror(error));
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  // close() reports deferred write errors (NFS, quota), so writers check it.
  int close_checked() {
    int r = ::close(fd_);
    fd_ = -1;
    return r;
  }

 private:
  int fd_;
};

Status write_all(int fd, const char* data, size_t size, const fs::path& path) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("cannot write", path, errno);
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return Status::ok();
}

// Reads up to `size` bytes; fewer only at end of file.
Expected<size_t> read_up_to(int fd, char* data, size_t size, const fs::path& path) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = ::read(fd, data + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_status("cannot read", path, errno);
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

bool is_hex_name(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

// Distinguishes temp files of concurrent writers: pid + per-process counter + a random nonce
// (pids repeat across containers sharing one cache directory).
std::string unique_suffix() {
  static const uint64_t nonce = [] {
    std::random_device rd;
    return (uint64_t{rd()} << 32) ^ rd();
  }();
  static std::atomic<uint64_t> counter{0};
  uint64_t n = counter.fetch_add(1);
  return str_cat(::getpid(), ".", n, ".", to_hex(reinterpret_cast<const uint8_t*>(&nonce), 8));
}

// Creates a fresh temp file next to `final_path` (same directory, so rename is atomic).
Expected<fs::path> create_temp(const fs::path& final_path, mode_t mode, Fd* fd) {
  for (int attempt = 0; attempt < 16; ++attempt) {
    fs::path tmp = final_path.parent_path() /
                   str_cat(kTempPrefix, final_path.filename().string(), ".", unique_suffix());
    int f = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
    if (f >= 0) {
      fd->reset(f);
      return tmp;
    }
    if (errno != EEXIST) return errno_status("cannot create", tmp, errno);
  }
  return err("cannot create a unique temp file next to '", final_path.string(), "'");
}

// fsync + close + rename; removes the temp file on any failure.
Status commit_temp(Fd& fd, const fs::path& tmp, const fs::path& final_path) {
  Status s;
  if (::fsync(fd.get()) != 0) s = errno_status("cannot fsync", tmp, errno);
  if (fd.close_checked() != 0 && s.is_ok()) s = errno_status("cannot close", tmp, errno);
  if (s.is_ok() && ::rename(tmp.c_str(), final_path.c_str()) != 0)
    s = errno_status("cannot rename into", final_path, errno);
  if (!s.is_ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  // Makes the rename itself durable; a failure here loses at most this entry after a crash.
  Fd dir(::open(final_path.parent_path().c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.valid()) ::fsync(dir.get());
  return Status::ok();
}

Status atomic_write(const fs::path& final_path, std::initializer_list<std::string_view> parts) {
  Fd fd;
  FERRITE_ASSIGN_OR_RETURN(fs::path tmp, create_temp(final_path, 0644, &fd));
  for (std::string_view part : parts) {
    Status s = write_all(fd.get(), part.data(), part.size(), tmp);
    if (!s.is_ok()) {
      fd.reset();
      ::unlink(tmp.c_str());
      return s;
    }
  }
  return commit_temp(fd, tmp, final_path);
}

Status ensure_dir(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return err("cannot create directory '", dir.string(), "': ", ec.message());
  return Status::ok();
}

std::string encode_header(uint32_t kind, const std::string& key, std::string_view metadata,
                          std::string_view payload) {
  std::string h(kHeaderSize, '\0');
  std::memcpy(h.data(), kMagic, sizeof(kMagic));
  store_u32(h.data() + 8, CompileCache::kFormatVersion);
  store_u32(h.data() + 12, kind);
  std::memcpy(h.data() + 16, key.data(), kKeyHexSize);
  store_u64(h.data() + 80, payload.size());
  store_u32(h.data() + 88, static_cast<uint32_t>(metadata.size()));
  Digest256 d = Sha256()
                    .update(std::string_view(h.data(), kHashedHeaderBytes))
                    .update(metadata)
                    .update(payload)
                    .finish();
  std::memcpy(h.data() + kHashedHeaderBytes, d.bytes.data(), d.bytes.size());
  return h;
}

struct ParsedEntry {
  uint32_t kind = 0;
  std::string metadata;
  std::string payload;
};

// Validates a whole entry file; the error message is the rejection reason.
Expected<ParsedEntry> parse_entry(std::string_view file, const std::string& key) {
  if (file.size() < kHeaderSize)
    return err("truncated header (", file.size(), " of ", kHeaderSize, " bytes)");
  const char* h = file.data();
  if (std::memcmp(h, kMagic, sizeof(kMagic)) != 0) return err("bad magic");
  uint32_t version = load_u32(h + 8);
  if (version != CompileCache::kFormatVersion)
    return err("format version ", version, " (expected ", CompileCache::kFormatVersion, ")");
  std::string_view stored_key(h + 16, kKeyHexSize);
  if (stored_key != key) {
    bool printable = is_hex_name(stored_key);
    return err("entry holds key ", printable ? std::string(stored_key) : "<garbage>",
               ", not the requested key");
  }
  uint64_t payload_size = load_u64(h + 80);
  uint64_t metadata_size = load_u32(h + 88);
  uint64_t body = file.size() - kHeaderSize;
  if (metadata_size > CompileCache::kMaxMetadataBytes || payload_size > body ||
      metadata_size + payload_size != body)
    return err("size mismatch: header promises ", metadata_size, "+", payload_size,
               " bytes of metadata+payload, file has ", body, " (truncated or corrupt)");
  std::string_view metadata = file.substr(kHeaderSize, metadata_size);
  std::string_view payload = file.substr(kHeaderSize + metadata_size);
  Digest256 actual = Sha256()
                         .update(file.substr(0, kHashedHeaderBytes))
                         .update(metadata)
                         .update(payload)
                         .finish();
  if (std::memcmp(actual.bytes.data(), h + kHashedHeaderBytes, actual.bytes.size()) != 0)
    return err("content hash mismatch (corrupt payload or header)");
  ParsedEntry e;
  e.kind = load_u32(h + 12);
  if (e.kind != kBlobEntry && e.kind != kFileEntry) return err("unknown entry kind ", e.kind);
  e.metadata = std::string(metadata);
  e.payload = std::string(payload);
  return e;
}

// Payload of a file entry: artifact size u64, artifact SHA-256, artifact file name.
struct FileRecord {
  uint64_t size = 0;
  Digest256 hash;
  std::string name;
};

std::string encode_file_record(const FileRecord& r) {
  std::string out(8 + 32, '\0');
  store_u64(out.data(), r.size);
  std::memcpy(out.data() + 8, r.hash.bytes.data(), 32);
  return out + r.name;
}

std::optional<FileRecord> decode_file_record(std::string_view s, const std::string& key) {
  if (s.size() <= 40) return std::nullopt;
  FileRecord r;
  r.size = load_u64(s.data());
  std::memcpy(r.hash.bytes.data(), s.data() + 8, 32);
  r.name = std::string(s.substr(40));
  // The name must stay inside the shard directory and belong to this key.
  if (r.name.find('/') != std::string::npos || r.name.rfind(key + "-", 0) != 0) return std::nullopt;
  return r;
}

// Keeps the characters of a source extension that are safe in a file name (".so", ".cubin").
std::string sanitized_extension(const fs::path& source) {
  std::string ext = source.extension().string(), out;
  for (char c : ext)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_') out += c;
  return out.size() > 16 ? std::string() : out;
}

struct EntryRead {
  CacheOutcome outcome = CacheOutcome::kAbsent;
  std::string reason;
  ParsedEntry entry;
  struct stat st {};  // of the file that was read
};

// Removes `path` only if it is still the file that was validated, so a reader never deletes a
// valid entry that a concurrent writer renamed into place after the read.
void remove_if_same(const fs::path& path, const struct stat& validated) {
  struct stat now;
  if (::lstat(path.c_str(), &now) == 0 && now.st_ino == validated.st_ino &&
      now.st_dev == validated.st_dev)
    ::unlink(path.c_str());
}

// `touch` marks the entry recently used for prune(); prune itself reads without touching.
EntryRead read_entry(const fs::path& path, const std::string& key, bool touch) {
  EntryRead r;
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ENOENT || errno == ENOTDIR) return r;
    r.outcome = CacheOutcome::kIoError;
    r.reason = errno_status("cannot open", path, errno).message();
    return r;
  }
  struct stat& st = r.st;
  if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    r.outcome = CacheOutcome::kIoError;
    r.reason = str_cat("cannot stat '", path.string(), "' or not a regular file");
    return r;
  }
  std::string file(static_cast<size_t>(st.st_size), '\0');
  auto got = read_up_to(fd.get(), file.data(), file.size(), path);
  if (!got) {
    r.outcome = CacheOutcome::kIoError;
    r.reason = got.status().message();
    return r;
  }
  file.resize(*got);
  auto parsed = parse_entry(file, key);
  if (!parsed) {
    remove_if_same(path, st);
    r.outcome = CacheOutcome::kRejected;
    r.reason = str_cat("cache entry '", path.string(), "' rejected: ", parsed.status().message(),
                       "; removed");
    return r;
  }
  // Best effort: a read-only cache directory still serves hits.
  if (touch) ::futimens(fd.get(), nullptr);
  r.outcome = CacheOutcome::kHit;
  r.entry = std::move(*parsed);
  return r;
}

// Streams `fd` through SHA-256, optionally copying to `out`.
Expected<std::pair<uint64_t, Digest256>> hash_stream(int fd, const fs::path& path, int out,
                                                     const fs::path& out_path) {
  std::vector<char> buf(size_t{1} << 20);
  Sha256 h;
  uint64_t total = 0;
  for (;;) {
    FERRITE_ASSIGN_OR_RETURN(size_t n, read_up_to(fd, buf.data(), buf.size(), path));
    if (n == 0) break;
    h.update(buf.data(), n);
    total += n;
    if (out >= 0) FERRITE_RETURN_IF_ERROR(write_all(out, buf.data(), n, out_path));
    if (n < buf.size()) break;
  }
  return std::make_pair(total, h.finish());
}

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

std::string_view ferrite_version() { return FERRITE_VERSION; }

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
    if (::stat(path.c_str(), &st) != 0) return std::string("nostamp");
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

CacheKey::CacheKey() { hash_.update(std::string_view("ferrite.cache-key.v1")); }

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
    case CacheOutcome::kHit: return "hit";
    case CacheOutcome::kAbsent: return "absent";
    case CacheOutcome::kDisabled: return "disabled";
    case CacheOutcome::kRejected: return "rejected";
    case CacheOutcome::kIoError: return "io-error";
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
  if (!s.is_ok()) {
    disabled_reason_ = str_cat("cache directory '", dir_.string(), "' unusable: ", s.message());
    options_.warn(str_cat("compile cache: ", disabled_reason_, "; disk cache disabled"));
    return;
  }
  disk_enabled_ = true;
}

CompileCache& CompileCache::global() {
  static CompileCache cache;
  return cache;
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

Status CompileCache::put(const CacheKey& key, std::string_view payload,
                         std::string_view metadata) {
  if (!enabled_) return Status::ok();
  if (metadata.size() > kMaxMetadataBytes)
    return err("compile cache: metadata of ", metadata.size(), " bytes exceeds the limit of ",
               kMaxMetadataBytes);
  std::string hex = key.hex();
  memory_put(hex, std::make_shared<CachedBlob>(CachedBlob{std::string(payload),
                                                          std::string(metadata)}));
  if (!disk_enabled_) return Status::ok();
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
  if (!disk_enabled_)
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

  Fd in(::open(source.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return errno_status("cannot open artifact", source, errno);
  struct stat src_st;
  if (::fstat(in.get(), &src_st) != 0 || !S_ISREG(src_st.st_mode))
    return err("artifact '", source.string(), "' is not a regular file");
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
  Status s = atomic_write(entry, {encode_header(kFileEntry, hex, metadata, payload), metadata,
                                  payload});
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
    return miss<CachedFile>(CacheOutcome::kRejected,
                            str_cat("cache entry '", entry.string(), "' rejected: ", why,
                                    "; removed"));
  };
  auto record = decode_file_record(e.entry.payload, hex);
  if (!record) return reject("malformed artifact record", {});
  fs::path artifact = entry.parent_path() / record->name;
  Fd fd(::open(artifact.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno != ENOENT) {
      return miss<CachedFile>(CacheOutcome::kIoError,
                              errno_status("cannot open", artifact, errno).message());
    }
    return reject(str_cat("artifact '", record->name, "' is missing"), {});
  }
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

namespace {

// One key's files on disk, for stats and prune.
struct DiskGroup {
  fs::path entry;
  fs::file_time_type mtime{};
  uint64_t bytes = 0;
  std::vector<std::pair<fs::path, fs::file_time_type>> artifacts;
};

struct DiskScan {
  std::unordered_map<std::string, DiskGroup> groups;  // by key hex
  std::vector<std::pair<fs::path, uint64_t>> stale_temps;
  uint64_t other_bytes = 0;  // young temp files and unowned artifacts still counted as usage
  uint64_t total_bytes = 0;
};

Expected<DiskScan> scan_disk(const fs::path& root) {
  DiskScan scan;
  std::error_code ec;
  fs::directory_iterator shards(root, ec);
  if (ec) return err("cannot list cache directory '", root.string(), "': ", ec.message());
  auto now = fs::file_time_type::clock::now();
  for (const auto& shard : shards) {
    std::string shard_name = shard.path().filename().string();
    if (shard_name.size() != 2 || !is_hex_name(shard_name) || !shard.is_directory(ec)) continue;
    fs::directory_iterator files(shard.path(), ec);
    if (ec) continue;
    for (const auto& f : files) {
      std::string name = f.path().filename().string();
      if (!f.is_regular_file(ec)) continue;
      uint64_t size = f.file_size(ec);
      if (ec) continue;
      auto mtime = f.last_write_time(ec);
      if (ec) continue;
      if (name.rfind(kTempPrefix, 0) == 0) {
        if (now - mtime > kStaleAge) {
          scan.stale_temps.emplace_back(f.path(), size);
        } else {
          scan.other_bytes += size;
        }
        scan.total_bytes += size;
        continue;
      }
      if (name.size() < kKeyHexSize || !is_hex_name(name.substr(0, kKeyHexSize)) ||
          name.compare(0, 2, shard_name) != 0)
        continue;
      std::string key = name.substr(0, kKeyHexSize);
      std::string rest = name.substr(kKeyHexSize);
      DiskGroup& g = scan.groups[key];
      if (rest == kEntrySuffix) {
        g.entry = f.path();
        g.mtime = mtime;
      } else if (!rest.empty() && rest[0] == '-') {
        g.artifacts.emplace_back(f.path(), mtime);
      } else {
        continue;
      }
      g.bytes += size;
      scan.total_bytes += size;
    }
  }
  return scan;
}

uint64_t remove_files(const std::vector<fs::path>& paths) {
  uint64_t removed = 0;
  for (const auto& p : paths) {
    std::error_code ec;
    uint64_t size = fs::file_size(p, ec);
    if (!ec && fs::remove(p, ec)) removed += size;
  }
  return removed;
}

}  // namespace

Status CompileCache::remove(const CacheKey& key) {
  std::string hex = key.hex();
  memory_erase(hex);
  if (!disk_enabled_) return Status::ok();
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
  if (!disk_enabled_) return result;
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
