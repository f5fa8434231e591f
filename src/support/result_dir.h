// Writing result files (run outputs, run.json, reports): every write checked, each file written
// to a temporary name in its directory, fsynced and renamed into place, and nothing below the
// directory the user named followed through a symbolic link.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "support/status.h"

namespace ferrite {

// A directory held open by descriptor. Names below it are single path components resolved
// relative to the descriptor with O_NOFOLLOW, so a symbolic link planted inside (a
// subdirectory, a result file) is refused with an error naming it instead of being followed out
// of the directory.
class ResultDir {
 public:
  enum class Kind { kAbsent, kFile, kDirectory, kSymlink, kOther };

  // Creates `path` and its parents when missing and opens it. `path` itself may be a symbolic
  // link to a directory: the user named it.
  static Expected<ResultDir> open(const std::filesystem::path& path);

  // Creates (when missing) and opens the subdirectory `name`; refuses a symbolic link or a
  // non-directory.
  Expected<ResultDir> subdir(const std::string& name) const;
  // Writes `bytes` as `name` atomically (temp file, write, fsync, rename, fsync of the
  // directory). Refuses when `name` exists and is not a regular file. Readers see the old file
  // or the complete new one; on any failure `name` is untouched and the temp file removed.
  Status write_file(const std::string& name, std::string_view bytes) const;
  // Removes the regular file `name` (absent is fine); refuses anything else.
  Status remove_file(const std::string& name) const;
  // Removes the directory `name` if it is empty; true when it was removed.
  bool remove_dir_if_empty(const std::string& name) const;
  Expected<Kind> kind(const std::string& name) const;
  Expected<std::vector<std::string>> list() const;

  const std::filesystem::path& path() const { return path_; }

 private:
  ResultDir(std::shared_ptr<const int> fd, std::filesystem::path path)
      : fd_(std::move(fd)), path_(std::move(path)) {}
  int fd() const { return *fd_; }
  Status refuse(const std::string& name, Kind kind) const;

  std::shared_ptr<const int> fd_;  // closed when the last copy goes
  std::filesystem::path path_;
};

// Writes `bytes` to `path` atomically through ResultDir (the parent directory must exist; a
// symbolic link at `path` is refused).
Status write_file_atomic(const std::filesystem::path& path, std::string_view bytes);

}  // namespace ferrite
