#include "runtime/compile_cache_store.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <random>

namespace ferrite::cache_store {
namespace {

constexpr char kMagic[8] = {'F', 'E', 'R', 'R', 'C', 'A', 'C', 'H'};
constexpr size_t kHashedHeaderBytes = 96;

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

}  // namespace

void Fd::reset(int fd) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
}

int Fd::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

int Fd::close_checked() {
  int r = ::close(fd_);
  fd_ = -1;
  return r;
}

Status errno_status(std::string_view what, const fs::path& path, int error) {
  return err(what, " '", path.string(), "': ", std::strerror(error));
}

namespace {

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

}  // namespace

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

namespace {

struct HeaderInfo {
  uint32_t kind = 0;
  uint64_t metadata_size = 0;
  uint64_t payload_size = 0;
};

// Validates everything but the content hash, before the body is read, so that a garbage file of
// any size costs one small read. The error message is the rejection reason.
Expected<HeaderInfo> check_header(std::string_view h, uint64_t file_size, const std::string& key) {
  if (h.size() < kHeaderSize || file_size < kHeaderSize)
    return err("truncated header (", std::min<uint64_t>(h.size(), file_size), " of ", kHeaderSize,
               " bytes)");
  if (std::memcmp(h.data(), kMagic, sizeof(kMagic)) != 0) return err("bad magic");
  uint32_t version = load_u32(h.data() + 8);
  if (version != CompileCache::kFormatVersion)
    return err("format version ", version, " (expected ", CompileCache::kFormatVersion, ")");
  std::string_view stored_key = h.substr(16, kKeyHexSize);
  if (stored_key != key) {
    bool printable = is_hex_name(stored_key);
    return err("entry holds key ", printable ? std::string(stored_key) : "<garbage>",
               ", not the requested key");
  }
  HeaderInfo info;
  info.kind = load_u32(h.data() + 12);
  info.payload_size = load_u64(h.data() + 80);
  info.metadata_size = load_u32(h.data() + 88);
  uint64_t body = file_size - kHeaderSize;
  if (info.metadata_size > CompileCache::kMaxMetadataBytes || info.payload_size > body ||
      info.metadata_size + info.payload_size != body)
    return err("size mismatch: header promises ", info.metadata_size, "+", info.payload_size,
               " bytes of metadata+payload, file has ", body, " (truncated or corrupt)");
  return info;
}

// `body` is the metadata followed by the payload.
Expected<ParsedEntry> check_body(std::string_view header, const HeaderInfo& info,
                                 std::string_view body) {
  if (body.size() != info.metadata_size + info.payload_size)
    return err("truncated while reading (", body.size(), " of ",
               info.metadata_size + info.payload_size, " body bytes)");
  Digest256 actual = Sha256().update(header.substr(0, kHashedHeaderBytes)).update(body).finish();
  if (std::memcmp(actual.bytes.data(), header.data() + kHashedHeaderBytes, actual.bytes.size()) !=
      0)
    return err("content hash mismatch (corrupt payload or header)");
  if (info.kind != kBlobEntry && info.kind != kFileEntry)
    return err("unknown entry kind ", info.kind);
  ParsedEntry e;
  e.kind = info.kind;
  e.metadata = std::string(body.substr(0, info.metadata_size));
  e.payload = std::string(body.substr(info.metadata_size));
  return e;
}

}  // namespace

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

std::string sanitized_extension(const fs::path& source) {
  std::string ext = source.extension().string(), out;
  for (char c : ext)
    if (std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_') out += c;
  return out.size() > 16 ? std::string() : out;
}

void remove_if_same(const fs::path& path, const struct stat& validated) {
  struct stat now;
  if (::lstat(path.c_str(), &now) == 0 && now.st_ino == validated.st_ino &&
      now.st_dev == validated.st_dev)
    ::unlink(path.c_str());
}

Expected<int> open_regular_file(const fs::path& path, struct stat* st) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever (and a
  // device file could block too); fstat then rejects everything but a regular file.
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) return errno_status("cannot open", path, errno);
  if (::fstat(fd.get(), st) != 0) return errno_status("cannot stat", path, errno);
  if (!S_ISREG(st->st_mode)) return err("'", path.string(), "' is not a regular file");
  // Reads of a regular file never block; clear the flag anyway so nothing depends on it.
  int flags = ::fcntl(fd.get(), F_GETFL);
  if (flags >= 0) ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  int raw = fd.get();
  fd.release();
  return raw;
}

EntryRead read_entry(const fs::path& path, const std::string& key, bool touch) {
  EntryRead r;
  Fd fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
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
  if (int flags = ::fcntl(fd.get(), F_GETFL); flags >= 0)
    ::fcntl(fd.get(), F_SETFL, flags & ~O_NONBLOCK);
  auto reject = [&](const Status& why) {
    remove_if_same(path, st);
    r.outcome = CacheOutcome::kRejected;
    r.reason = str_cat("cache entry '", path.string(), "' rejected: ", why.message(), "; removed");
    return r;
  };
  auto io_error = [&](const Status& why) {
    r.outcome = CacheOutcome::kIoError;
    r.reason = why.message();
    return r;
  };
  std::string header(kHeaderSize, '\0');
  auto got = read_up_to(fd.get(), header.data(), header.size(), path);
  if (!got) return io_error(got.status());
  header.resize(*got);
  auto info = check_header(header, static_cast<uint64_t>(st.st_size), key);
  if (!info) return reject(info.status());
  std::string body(info->metadata_size + info->payload_size, '\0');
  got = read_up_to(fd.get(), body.data(), body.size(), path);
  if (!got) return io_error(got.status());
  body.resize(*got);
  auto parsed = check_body(header, *info, body);
  if (!parsed) return reject(parsed.status());
  // Best effort: a read-only cache directory still serves hits.
  if (touch) ::futimens(fd.get(), nullptr);
  r.outcome = CacheOutcome::kHit;
  r.entry = std::move(*parsed);
  return r;
}

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
        // Younger ones may be writes in progress elsewhere: counted, never removed.
        if (now - mtime > kStaleAge) scan.stale_temps.emplace_back(f.path(), size);
        scan.total_bytes += size;
        continue;
      }
      if (name.size() < kKeyHexSize || !is_hex_name(name.substr(0, kKeyHexSize)) ||
          name.compare(0, 2, shard_name) != 0)
        continue;
      std::string rest = name.substr(kKeyHexSize);
      bool is_entry = rest == kEntrySuffix, is_artifact = !rest.empty() && rest[0] == '-';
      if (!is_entry && !is_artifact) continue;
      DiskGroup& g = scan.groups[name.substr(0, kKeyHexSize)];
      if (is_entry) {
        g.entry = f.path();
        g.mtime = mtime;
      } else {
        g.artifacts.emplace_back(f.path(), mtime);
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

}  // namespace ferrite::cache_store
