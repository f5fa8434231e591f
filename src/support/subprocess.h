// Child processes without a shell: posix_spawn with an argument vector, so that paths and
// settings ($TMPDIR, $FERRITE_CXX, file names) are passed as single arguments and never parsed
// by /bin/sh. Every child of ferrite goes through run_process.
#pragma once

#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "support/status.h"

namespace ferrite {

struct ProcessOptions {
  // Where the child's stdout and stderr go. Empty: captured into ProcessResult::output (both
  // streams, interleaved). "/dev/null" discards.
  std::filesystem::path stdout_file, stderr_file;
  bool discard_stderr = false;           // send stderr to /dev/null instead of the capture
  size_t max_output = size_t{64} << 10;  // captured bytes kept; the rest is read and dropped
  std::filesystem::path cwd;             // the child's working directory; empty: this process's
  // Added to (or replacing) the variables of this process's environment, for this child only.
  std::vector<std::pair<std::string, std::string>> env;
};

struct ProcessResult {
  bool exited = false;  // false: killed by a signal
  int exit_code = -1;
  int signal = 0;
  std::string output;
  bool ok() const { return exited && exit_code == 0; }
  // "exit code 1" or "killed by signal 2 (Interrupt)".
  std::string describe() const;
};

// Runs argv (argv[0] is looked up on $PATH when it has no '/') with stdin from /dev/null, default
// signal dispositions and an empty signal mask (the CLI blocks SIGINT/SIGTERM in its own
// threads), and waits for it. The child's pid is registered with support/cleanup.h while it runs,
// so an interrupt of ferrite terminates it. Errors: the program cannot be started.
Expected<ProcessResult> run_process(const std::vector<std::string>& argv,
                                    const ProcessOptions& options = {});

// Splits a command setting such as $FERRITE_CXX ("ccache g++") into words at whitespace. No
// quoting or expansion: the words are passed to the program as they are.
std::vector<std::string> split_command(const std::string& command);

}  // namespace ferrite
