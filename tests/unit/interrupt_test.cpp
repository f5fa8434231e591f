// SIGINT / SIGTERM while `ferrite run` compiles (tools/ferrite/interrupt.h): `error: interrupted`,
// exit status 128 + signal, the compiler child terminated, and no temporary directory left. A
// compiler killed by a signal on its own is reported as interrupted, not as a compile failure.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "cli_util.h"

extern char** environ;

namespace ferrite::testing {
namespace {

// A fake C++ compiler: answers --version, otherwise records its pid in $FERRITE_TEST_MARKER and
// becomes `sleep` (same pid), so the compile hangs until a signal ends it.
const char* kSlowCompiler = R"(if [ "$1" = --version ]; then echo fake-cxx 1.0; exit 0; fi
echo $$ > "$FERRITE_TEST_MARKER.tmp" && mv "$FERRITE_TEST_MARKER.tmp" "$FERRITE_TEST_MARKER"
exec sleep 60
)";

struct Started {
  pid_t pid = -1;
  fs::path err;
};

// `ferrite run` on the cpu device in a process group of its own, compiling with `compiler`.
Started start_ferrite(const TempDir& dir, const std::string& compiler_script) {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {4, 8});
  b.node("Exp", {"x"}, {"y"}, "exp");
  b.output("y");
  fs::path model = dir.write("m.onnx", b.bytes());
  fs::path script = dir.write("cxx.sh", compiler_script);
  fs::create_directories(dir / "tmp");
  Started s;
  s.err = dir / "stderr";
  std::vector<std::string> env_strings;
  for (char** e = environ; *e; ++e) env_strings.push_back(*e);
  for (std::string kv : {"FERRITE_CXX=sh " + script.string(), "TMPDIR=" + (dir / "tmp").string(),
                         "FERRITE_CACHE_DIR=" + (dir / "cache").string(),
                         "FERRITE_TEST_MARKER=" + (dir / "marker").string()})
    env_strings.push_back(kv);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> args{FERRITE_CLI_PATH, "run",          model.string(), "--device", "cpu",
                                "--input",        "x=random:4x8", "--quiet"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, s.err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  EXPECT_EQ(posix_spawn(&s.pid, argv[0], &fa, &attr, argv.data(), envp.data()), 0);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  return s;
}

// The compiler's pid once it runs (0 after a minute without it).
pid_t wait_for_compiler(const TempDir& dir) {
  for (int i = 0; i < 6000; ++i) {
    std::ifstream in(dir / "marker");
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

int wait_status(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

bool gone(pid_t pid) {
  for (int i = 0; i < 300 && kill(pid, 0) == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return kill(pid, 0) != 0;
}

void expect_interrupted(const TempDir& dir, int status, int sig) {
  ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 128 + sig);
  EXPECT_EQ(read_text(dir / "stderr"), "error: interrupted\n");
  for (const auto& e : fs::directory_iterator(dir / "tmp")) ADD_FAILURE() << "left: " << e.path();
}

// Ctrl-C: the terminal signals the whole foreground process group, the compiler included.
TEST(Interrupt, CtrlCDuringCompile) {
  TempDir dir;
  Started s = start_ferrite(dir, kSlowCompiler);
  ASSERT_GT(s.pid, 0);
  pid_t cxx = wait_for_compiler(dir);
  ASSERT_GT(cxx, 0) << read_text(s.err);
  ASSERT_EQ(kill(-s.pid, SIGINT), 0);
  expect_interrupted(dir, wait_status(s.pid), SIGINT);
  EXPECT_TRUE(gone(cxx));
}

// SIGTERM to ferrite alone: it terminates its compiler child itself.
TEST(Interrupt, SigtermDuringCompile) {
  TempDir dir;
  Started s = start_ferrite(dir, kSlowCompiler);
  ASSERT_GT(s.pid, 0);
  pid_t cxx = wait_for_compiler(dir);
  ASSERT_GT(cxx, 0) << read_text(s.err);
  ASSERT_EQ(kill(s.pid, SIGTERM), 0);
  expect_interrupted(dir, wait_status(s.pid), SIGTERM);
  EXPECT_TRUE(gone(cxx));
}

// A compiler killed by a signal nobody sent ferrite (the OOM killer, a kill by hand) is an
// interrupted compile, not "generated code failed to compile".
TEST(Interrupt, CompilerKilledBySignalIsNotACompileError) {
  TempDir dir;
  const char* killed = R"(if [ "$1" = --version ]; then echo fake-cxx 1.0; exit 0; fi
kill -KILL $$
)";
  Started s = start_ferrite(dir, killed);
  ASSERT_GT(s.pid, 0);
  int status = wait_status(s.pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1);
  std::string err = read_text(s.err);
  EXPECT_EQ(err.rfind("error: ", 0), 0u) << err;
  EXPECT_NE(err.find("interrupted"), std::string::npos) << err;
  EXPECT_NE(err.find("killed by signal 9"), std::string::npos) << err;
  EXPECT_EQ(err.find("failed to compile"), std::string::npos) << err;
  for (const auto& e : fs::directory_iterator(dir / "tmp")) ADD_FAILURE() << "left: " << e.path();
}

}  // namespace
}  // namespace ferrite::testing
