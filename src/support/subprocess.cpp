#include "support/subprocess.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <map>

#include "support/cleanup.h"

extern char** environ;

namespace ferrite {

namespace {

// posix_spawn's attribute and file-action objects, destroyed on every return path.
struct SpawnSetup {
  posix_spawnattr_t attr;
  posix_spawn_file_actions_t actions;
  SpawnSetup() {
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
  }
  ~SpawnSetup() {
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
  }
};

std::vector<std::string> merged_environment(
    const std::vector<std::pair<std::string, std::string>>& overrides) {
  std::map<std::string, std::string> vars;
  std::vector<std::string> order;
  for (char** e = environ; e && *e; ++e) {
    std::string kv = *e;
    size_t eq = kv.find('=');
    std::string name = kv.substr(0, eq);
    if (!vars.count(name)) order.push_back(name);
    vars[name] = eq == std::string::npos ? "" : kv.substr(eq + 1);
  }
  for (const auto& [name, value] : overrides) {
    if (!vars.count(name)) order.push_back(name);
    vars[name] = value;
  }
  std::vector<std::string> out;
  for (const auto& name : order) out.push_back(name + "=" + vars[name]);
  return out;
}

void add_output(SpawnSetup& s, int fd, const std::filesystem::path& file, int pipe_fd) {
  // No O_CLOEXEC here: the descriptor is the child's stdout / stderr across exec.
  if (!file.empty())
    posix_spawn_file_actions_addopen(&s.actions, fd, file.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                     0644);
  else
    posix_spawn_file_actions_adddup2(&s.actions, pipe_fd, fd);
}

}  // namespace

std::string ProcessResult::describe() const {
  if (exited) return str_cat("exit code ", exit_code);
  const char* name = strsignal(signal);
  return str_cat("killed by signal ", signal, " (", name ? name : "unknown", ")");
}

std::vector<std::string> split_command(const std::string& command) {
  std::vector<std::string> words;
  std::string word;
  for (char c : command) {
    if (c == ' ' || c == '\t' || c == '\n') {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

Expected<ProcessResult> run_process(const std::vector<std::string>& argv,
                                    const ProcessOptions& options) {
  if (argv.empty() || argv[0].empty()) return err("no program to run");
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return err("pipe: ", std::strerror(errno));
  SpawnSetup s;
  if (!options.cwd.empty()) posix_spawn_file_actions_addchdir_np(&s.actions, options.cwd.c_str());
  posix_spawn_file_actions_addopen(&s.actions, 0, "/dev/null", O_RDONLY, 0);
  add_output(s, 1, options.stdout_file, pipe_fds[1]);
  add_output(s, 2, options.discard_stderr ? "/dev/null" : options.stderr_file, pipe_fds[1]);
  // The CLI blocks SIGINT/SIGTERM in its threads (a signal thread handles them); the child must
  // start with them deliverable and at their default actions.
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  for (int sig : {SIGINT, SIGTERM, SIGPIPE, SIGHUP, SIGQUIT}) sigaddset(&defaults, sig);
  posix_spawnattr_setsigmask(&s.attr, &empty);
  posix_spawnattr_setsigdefault(&s.attr, &defaults);
  posix_spawnattr_setflags(&s.attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env = merged_environment(options.env);
  std::vector<char*> envp;
  for (auto& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  pid_t pid = -1;
  int rc = posix_spawnp(&pid, args[0], &s.actions, &s.attr, args.data(), envp.data());
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    return err("cannot run '", argv[0], "': ", std::strerror(rc));
  }
  ChildRegistration registration(pid);
  ProcessResult result;
  char buf[4096];
  for (;;) {
    ssize_t n = read(pipe_fds[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    size_t room = options.max_output - std::min(options.max_output, result.output.size());
    result.output.append(buf, std::min(room, static_cast<size_t>(n)));
  }
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return err("waiting for '", argv[0], "': ", std::strerror(errno));
  }
  result.exited = WIFEXITED(status);
  if (result.exited) result.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
  if (!result.exited) wait_if_interrupted(result.signal);
  return result;
}

}  // namespace ferrite
