// What ferrite undoes when it is interrupted: the temporary directories it created and the child
// processes it runs. Code that creates either registers it here for its lifetime; the CLI's
// signal handling (tools/ferrite/interrupt.h) calls cleanup_registered() before it exits.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <string>

#include "support/status.h"

namespace ferrite {

// A fresh directory "<$TMPDIR or /tmp>/<prefix>XXXXXX" (mode 0700, from mkdtemp), registered
// while it exists and removed with its contents on destruction unless keep() was called.
class TempDirectory {
 public:
  static Expected<TempDirectory> create(const std::string& prefix);
  TempDirectory() = default;
  TempDirectory(TempDirectory&& other) noexcept;
  TempDirectory& operator=(TempDirectory&& other) noexcept;
  TempDirectory(const TempDirectory&) = delete;
  TempDirectory& operator=(const TempDirectory&) = delete;
  ~TempDirectory();

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }
  // Leaves the directory on disk (and unregisters it), e.g. for FERRITE_KEEP_SOURCE.
  void keep();
  // Removes it now; the object is empty afterwards.
  void remove();

 private:
  std::filesystem::path path_;
};

// Registers a running child; unregistered on destruction. Used by run_process.
class ChildRegistration {
 public:
  explicit ChildRegistration(pid_t pid);
  ~ChildRegistration();
  ChildRegistration(const ChildRegistration&) = delete;
  ChildRegistration& operator=(const ChildRegistration&) = delete;

 private:
  pid_t pid_;
};

void register_temp_dir(const std::filesystem::path& dir);
void unregister_temp_dir(const std::filesystem::path& dir);

// Sends SIGTERM to every registered child, waits up to about two seconds for them to go, then
// removes every registered directory. Safe to call from a thread other than the ones that
// registered (the CLI's signal thread); the registries stay locked, so no directory is
// registered or removed concurrently.
void cleanup_registered();

// The signal the interrupt handling took (0: none yet).
int interrupt_signal();
void set_interrupt_signal(int sig);
// Set by the CLI when it installs its interrupt handling (tools/ferrite/interrupt.h).
void set_interrupt_handling_installed();

// For a caller whose child process died of `child_signal`: when that signal was an interrupt
// (SIGINT, SIGTERM) that the installed interrupt handling is taking too -- Ctrl-C reaches the
// whole process group -- this blocks until the handling ends the process, so the caller never
// reports the child's death as its own failure first. Returns at once otherwise.
void wait_if_interrupted(int child_signal);

}  // namespace ferrite
