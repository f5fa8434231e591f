#include "support/cleanup.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace ferrite {

namespace fs = std::filesystem;

namespace {

struct Registry {
  std::mutex mutex;
  std::set<fs::path> dirs;
  std::set<pid_t> children;
};

// Never destroyed: the signal thread may use it while static destructors run at exit.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

std::atomic<int> g_interrupt_signal{0};
std::atomic<bool> g_handling_installed{false};

}  // namespace

void register_temp_dir(const fs::path& dir) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().dirs.insert(dir);
}

void unregister_temp_dir(const fs::path& dir) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().dirs.erase(dir);
}

ChildRegistration::ChildRegistration(pid_t pid) : pid_(pid) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().children.insert(pid_);
}

ChildRegistration::~ChildRegistration() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  registry().children.erase(pid_);
}

void cleanup_registered() {
  Registry& r = registry();
  // Held until the process exits: nothing registers, removes or reuses a directory meanwhile.
  r.mutex.lock();
  for (pid_t pid : r.children) kill(pid, SIGTERM);
  // The threads that started the children reap them; a child is gone once kill() finds no such
  // process. Waiting lets a compiler stop writing into a directory before it is removed.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (pid_t pid : r.children) {
    while (kill(pid, 0) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (const fs::path& dir : r.dirs) {
    std::error_code ec;
    // A second pass catches files a dying child created during the first.
    if (!fs::remove_all(dir, ec) || ec) fs::remove_all(dir, ec);
  }
}

int interrupt_signal() {
  return g_interrupt_signal.load();
}
void set_interrupt_signal(int sig) {
  g_interrupt_signal.store(sig);
}
void set_interrupt_handling_installed() {
  g_handling_installed.store(true);
}

void wait_if_interrupted(int child_signal) {
  if (!g_handling_installed.load() || (child_signal != SIGINT && child_signal != SIGTERM)) return;
  auto taken = [] {
    sigset_t pending;
    return interrupt_signal() != 0 ||
           (sigpending(&pending) == 0 &&
            (sigismember(&pending, SIGINT) == 1 || sigismember(&pending, SIGTERM) == 1));
  };
  // The process-group signal is generated for ferrite before the child can die of it, but the
  // signal thread may be between taking it and recording it: allow it a moment.
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (!taken() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (!taken()) return;
  for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

Expected<TempDirectory> TempDirectory::create(const std::string& prefix) {
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec || base.empty()) base = "/tmp";
  std::string tmpl = (base / (prefix + "XXXXXX")).string();
  if (!mkdtemp(tmpl.data()))
    return err("cannot create a temporary directory in '", base.string(),
               "': ", std::strerror(errno));
  TempDirectory d;
  d.path_ = tmpl;
  register_temp_dir(d.path_);
  return d;
}

TempDirectory::TempDirectory(TempDirectory&& other) noexcept : path_(std::move(other.path_)) {
  other.path_.clear();
}

TempDirectory& TempDirectory::operator=(TempDirectory&& other) noexcept {
  if (this != &other) {
    remove();
    path_ = std::move(other.path_);
    other.path_.clear();
  }
  return *this;
}

TempDirectory::~TempDirectory() {
  remove();
}

void TempDirectory::keep() {
  if (!path_.empty()) unregister_temp_dir(path_);
  path_.clear();
}

void TempDirectory::remove() {
  if (path_.empty()) return;
  std::error_code ec;
  fs::remove_all(path_, ec);
  unregister_temp_dir(path_);
  path_.clear();
}

}  // namespace ferrite
