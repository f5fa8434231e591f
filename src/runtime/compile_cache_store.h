// On-disk format and POSIX file handling of the compile cache (compile_cache.h is the interface;
// this is its internal layer, split out to keep the cache policy readable).
//
// Entry file, little-endian, kHeaderSize-byte header then metadata then payload:
//   0 magic[8]  8 format version u32  12 kind u32  16 key[64] (hex)  80 payload size u64
//   88 metadata size u32  92 reserved u32 (0)  96 SHA-256 over bytes [0, 96) + metadata + payload
// The hash covers the header fields too, so a flipped size or kind is caught like a flipped
// payload byte.
#pragma once

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "runtime/compile_cache.h"
#include "support/hash.h"
#include "support/status.h"

namespace ferrite::cache_store {

namespace fs = std::filesystem;

inline constexpr size_t kHeaderSize = 128;
inline constexpr size_t kKeyHexSize = 64;
inline constexpr uint32_t kBlobEntry = 1;
inline constexpr uint32_t kFileEntry = 2;
inline constexpr const char* kEntrySuffix = ".entry";
inline constexpr const char* kTempPrefix = ".tmp-";
// Temp files and unreferenced artifacts younger than this may belong to a write in progress in
// another process, so prune leaves them alone.
inline constexpr auto kStaleAge = std::chrono::hours(1);

Status errno_status(std::string_view what, const fs::path& path, int error);

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void reset(int fd = -1);
  int release();  // gives up ownership
  // close() reports deferred write errors (NFS, quota), so writers check it.
  int close_checked();

 private:
  int fd_;
};

Status ensure_dir(const fs::path& dir);
// Creates a fresh temp file next to `final_path` (same directory, so rename is atomic).
Expected<fs::path> create_temp(const fs::path& final_path, mode_t mode, Fd* fd);
// fsync + close + rename (+ fsync of the directory); removes the temp file on any failure.
Status commit_temp(Fd& fd, const fs::path& tmp, const fs::path& final_path);
// Writes the concatenation of `parts` to `final_path` atomically.
Status atomic_write(const fs::path& final_path, std::initializer_list<std::string_view> parts);

std::string encode_header(uint32_t kind, const std::string& key, std::string_view metadata,
                          std::string_view payload);

struct ParsedEntry {
  uint32_t kind = 0;
  std::string metadata;
  std::string payload;
};

struct EntryRead {
  CacheOutcome outcome = CacheOutcome::kAbsent;
  std::string reason;
  ParsedEntry entry;
  struct stat st {};  // of the file that was read
};
// Opens `path` for reading only if it is a regular file: a FIFO, socket or device planted in the
// cache directory is an error instead of a read that never returns.
Expected<int> open_regular_file(const fs::path& path, struct stat* st);
// Reads and validates the entry at `path` for `key`. Opened like open_regular_file. A file that
// fails validation is removed (if it is still the one read) and reported as kRejected. `touch`
// marks the entry recently used for prune(); prune itself reads without touching.
EntryRead read_entry(const fs::path& path, const std::string& key, bool touch);
// Removes `path` only if it is still the file that was validated, so a reader never deletes a
// valid entry that a concurrent writer renamed into place after the read.
void remove_if_same(const fs::path& path, const struct stat& validated);

// Payload of a file entry: artifact size u64, artifact SHA-256, artifact file name.
struct FileRecord {
  uint64_t size = 0;
  Digest256 hash;
  std::string name;
};
std::string encode_file_record(const FileRecord& r);
std::optional<FileRecord> decode_file_record(std::string_view s, const std::string& key);
// Keeps the characters of a source extension that are safe in a file name (".so", ".cubin").
std::string sanitized_extension(const fs::path& source);

// Streams `fd` through SHA-256, copying to `out` unless it is -1. Returns (bytes, digest).
Expected<std::pair<uint64_t, Digest256>> hash_stream(int fd, const fs::path& path, int out,
                                                     const fs::path& out_path);

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
  uint64_t total_bytes = 0;  // everything of ours, young temp files included
};
// Looks only at files the cache names itself, in two-hex-digit shard directories.
Expected<DiskScan> scan_disk(const fs::path& root);
// Returns the bytes freed.
uint64_t remove_files(const std::vector<fs::path>& paths);

}  // namespace ferrite::cache_store
