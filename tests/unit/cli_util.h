// Runs the `ferrite` binary of this build from the tests: no shell (support/subprocess.h), stdout
// and stderr captured separately, extra environment variables for the child only.
#pragma once

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "support/subprocess.h"
#include "test_util.h"

#ifndef FERRITE_CLI_PATH
#error "FERRITE_CLI_PATH must name the ferrite binary"
#endif

namespace ferrite::testing {

struct CliResult {
  bool exited = false;  // false: killed by a signal
  int code = -1;
  int signal = 0;
  std::string out, err;
};

using EnvVars = std::vector<std::pair<std::string, std::string>>;

inline std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `argv` (a program and its arguments) with stdout and stderr in files under `dir`.
inline CliResult run_program(const TempDir& dir, const std::vector<std::string>& argv,
                             const EnvVars& env = {}, const fs::path& cwd = {}) {
  static int counter = 0;
  std::string tag = std::to_string(counter++);
  ProcessOptions opts;
  opts.stdout_file = dir / ("cli" + tag + ".stdout");
  opts.stderr_file = dir / ("cli" + tag + ".stderr");
  opts.env = env;
  opts.cwd = cwd;
  CliResult r;
  auto run = run_process(argv, opts);
  EXPECT_TRUE(run) << run.status().message();
  if (!run) return r;
  r.exited = run->exited;
  r.code = run->exit_code;
  r.signal = run->signal;
  r.out = read_text(opts.stdout_file);
  r.err = read_text(opts.stderr_file);
  return r;
}

// `ferrite ARGS...`
inline CliResult run_ferrite(const TempDir& dir, const std::vector<std::string>& args,
                             const EnvVars& env = {}, const fs::path& cwd = {}) {
  std::vector<std::string> argv{FERRITE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(dir, argv, env, cwd);
}

// Exit code 1 (not a signal, not a shell-reported 128+N), one "error:" line containing every
// fragment.
inline ::testing::AssertionResult clean_failure(const CliResult& r,
                                                std::initializer_list<std::string> fragments) {
  if (!r.exited)
    return ::testing::AssertionFailure() << "killed by signal " << r.signal << "\n" << r.err;
  if (r.code == 0) return ::testing::AssertionFailure() << "exit code 0";
  if (r.code >= 128)
    return ::testing::AssertionFailure() << "exit code " << r.code << "\n" << r.err;
  if (r.err.rfind("error: ", 0) != 0)
    return ::testing::AssertionFailure() << "stderr does not start with 'error: ': " << r.err;
  if (r.err.empty() || r.err.back() != '\n' || r.err.find('\n') != r.err.size() - 1)
    return ::testing::AssertionFailure() << "stderr is not exactly one line: [" << r.err << "]";
  for (const auto& f : fragments)
    if (r.err.find(f) == std::string::npos)
      return ::testing::AssertionFailure() << "stderr lacks '" << f << "': " << r.err;
  return ::testing::AssertionSuccess();
}

}  // namespace ferrite::testing
