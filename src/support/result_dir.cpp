#include "support/result_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace ferrite {

namespace fs = std::filesystem;

namespace {

Status errno_error(std::string_view what, const fs::path& path, int error) {
  return err(what, " '", path.string(), "': ", std::strerror(error));
}

bool is_single_component(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos;
}

Status write_all(int fd, std::string_view bytes, const fs::path& path) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno_error("cannot write", path, errno);
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  return Status::ok();
}

}  // namespace

Expected<ResultDir> ResultDir::open(const fs::path& path) {
  if (path.empty()) return err("empty directory name");
  std::error_code ec;
  fs::create_directories(path, ec);
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOTDIR) return err("'", path.string(), "' is not a directory");
    if (ec) return err("cannot create directory '", path.string(), "': ", ec.message());
    return errno_error("cannot open directory", path, errno);
  }
  return ResultDir(std::shared_ptr<const int>(new int(fd),
                                              [](const int* p) {
                                                ::close(*p);
                                                delete p;
                                              }),
                   path);
}

Expected<ResultDir::Kind> ResultDir::kind(const std::string& name) const {
  if (!is_single_component(name)) return err("bad file name '", name, "'");
  struct stat st;
  if (::fstatat(fd(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT) return Kind::kAbsent;
    return errno_error("cannot stat", path_ / name, errno);
  }
  if (S_ISREG(st.st_mode)) return Kind::kFile;
  if (S_ISDIR(st.st_mode)) return Kind::kDirectory;
  if (S_ISLNK(st.st_mode)) return Kind::kSymlink;
  return Kind::kOther;
}

Status ResultDir::refuse(const std::string& name, Kind kind) const {
  std::string p = (path_ / name).string();
  if (kind == Kind::kSymlink)
    return err("refusing to follow symbolic link '", p, "' in output directory '", path_.string(),
               "'");
  if (kind == Kind::kDirectory) return err("'", p, "' is a directory, not a file");
  return err("'", p, "' is not a regular file or directory");
}

Expected<ResultDir> ResultDir::subdir(const std::string& name) const {
  if (!is_single_component(name)) return err("bad directory name '", name, "'");
  if (::mkdirat(fd(), name.c_str(), 0777) != 0 && errno != EEXIST)
    return errno_error("cannot create directory", path_ / name, errno);
  int sub = ::openat(fd(), name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (sub < 0) {
    int e = errno;
    auto k = kind(name);
    if (k && *k == Kind::kSymlink) return refuse(name, *k);
    if (e == ENOTDIR) return err("'", (path_ / name).string(), "' is not a directory");
    return errno_error("cannot open directory", path_ / name, e);
  }
  return ResultDir(std::shared_ptr<const int>(new int(sub),
                                              [](const int* p) {
                                                ::close(*p);
                                                delete p;
                                              }),
                   path_ / name);
}

Status ResultDir::write_file(const std::string& name, std::string_view bytes) const {
  FERRITE_ASSIGN_OR_RETURN(Kind existing, kind(name));
  if (existing != Kind::kAbsent && existing != Kind::kFile) return refuse(name, existing);
  const fs::path final_path = path_ / name;
  static std::atomic<uint64_t> counter{0};
  std::string tmp;
  int f = -1;
  for (int attempt = 0; attempt < 16 && f < 0; ++attempt) {
    tmp = str_cat(".", name, ".tmp-", ::getpid(), "-", counter.fetch_add(1));
    f = ::openat(fd(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (f < 0 && errno != EEXIST) return errno_error("cannot create a file in", path_, errno);
  }
  if (f < 0) return err("cannot create a temporary file in '", path_.string(), "'");
  Status s = write_all(f, bytes, final_path);
  // fsync and close report what write() deferred (a full disk on NFS, quota).
  if (s.is_ok() && ::fsync(f) != 0) s = errno_error("cannot write", final_path, errno);
  if (::close(f) != 0 && s.is_ok()) s = errno_error("cannot write", final_path, errno);
  if (s.is_ok() && ::renameat(fd(), tmp.c_str(), fd(), name.c_str()) != 0)
    s = errno_error("cannot rename a temporary file to", final_path, errno);
  if (!s.is_ok()) {
    ::unlinkat(fd(), tmp.c_str(), 0);
    return s;
  }
  // Makes the rename durable, so a crash leaves the old file or the new one.
  if (::fsync(fd()) != 0) return errno_error("cannot sync directory", path_, errno);
  return Status::ok();
}

Status ResultDir::remove_file(const std::string& name) const {
  FERRITE_ASSIGN_OR_RETURN(Kind existing, kind(name));
  if (existing == Kind::kAbsent) return Status::ok();
  if (existing != Kind::kFile) return refuse(name, existing);
  if (::unlinkat(fd(), name.c_str(), 0) != 0 && errno != ENOENT)
    return errno_error("cannot remove", path_ / name, errno);
  return Status::ok();
}

bool ResultDir::remove_dir_if_empty(const std::string& name) const {
  return is_single_component(name) && ::unlinkat(fd(), name.c_str(), AT_REMOVEDIR) == 0;
}

Expected<std::vector<std::string>> ResultDir::list() const {
  int copy = ::openat(fd(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return errno_error("cannot list", path_, errno);
  DIR* d = ::fdopendir(copy);
  if (!d) {
    ::close(copy);
    return errno_error("cannot list", path_, errno);
  }
  std::vector<std::string> names;
  while (struct dirent* e = ::readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  return names;
}

Status write_file_atomic(const fs::path& path, std::string_view bytes) {
  fs::path parent = path.parent_path();
  FERRITE_ASSIGN_OR_RETURN(ResultDir dir, ResultDir::open(parent.empty() ? "." : parent));
  return dir.write_file(path.filename().string(), bytes);
}

}  // namespace ferrite
