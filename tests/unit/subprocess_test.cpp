// Child processes without a shell (support/subprocess.h): arguments reach the program verbatim,
// exit codes and signals are reported, and a $TMPDIR holding shell syntax is never executed by
// the compilers of the cpu device or the GXU plugin.
#include <csignal>
#include <fstream>

#include "cli_util.h"
#include "runtime/device.h"
#include "support/cleanup.h"

namespace ferrite::testing {
namespace {

TEST(Subprocess, ArgumentsAreNotShellParsed) {
  const std::string hostile = "a';touch x;'$(echo y) `z` \"q\"";
  auto r = run_process({"printf", "%s", hostile});
  ASSERT_TRUE(r) << r.status().message();
  EXPECT_TRUE(r->ok()) << r->describe();
  EXPECT_EQ(r->output, hostile);
}

TEST(Subprocess, ExitCodesSignalsAndMissingPrograms) {
  auto exit3 = run_process({"sh", "-c", "exit 3"});
  ASSERT_TRUE(exit3);
  EXPECT_TRUE(exit3->exited);
  EXPECT_EQ(exit3->exit_code, 3);
  EXPECT_EQ(exit3->describe(), "exit code 3");
  auto killed = run_process({"sh", "-c", "kill -INT $$"});
  ASSERT_TRUE(killed);
  EXPECT_FALSE(killed->exited);
  EXPECT_EQ(killed->signal, SIGINT);
  EXPECT_NE(killed->describe().find("killed by signal 2"), std::string::npos);
  EXPECT_TRUE(failed_with(run_process({"/nonexistent/ferrite-no-such-tool"}),
                          {"cannot run '/nonexistent/ferrite-no-such-tool'"}));
}

TEST(Subprocess, EnvironmentAndCapture) {
  ProcessOptions opts;
  opts.env = {{"FERRITE_SUBPROCESS_TEST", "v a l"}};
  opts.max_output = 4;
  auto r =
      run_process({"sh", "-c", "printf '%s' \"$FERRITE_SUBPROCESS_TEST\"; echo err >&2"}, opts);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->output.size(), 4u);
  EXPECT_EQ(split_command("  ccache\tg++  -x "), (std::vector<std::string>{"ccache", "g++", "-x"}));
}

TEST(Subprocess, TempDirectoryIsRemovedAndRegistered) {
  fs::path p;
  {
    auto d = TempDirectory::create("ferrite-test-");
    ASSERT_TRUE(d) << d.status().message();
    p = d->path();
    std::ofstream(*d / "f") << "x";
    EXPECT_TRUE(fs::is_directory(p));
  }
  EXPECT_FALSE(fs::exists(p));
}

// The reproduction: a TMPDIR whose name closes a quote and runs a command. Before the
// fix, the cpu host compiler and the GXU plugin built `c++ ... -o '<TMPDIR>/...'` command lines
// for /bin/sh, which ran `touch "$FERRITE_TEST_PWNED"`.
TEST(Subprocess, HostileTmpdirIsNotExecutedByCompilers) {
  TempDir dir;
  const fs::path pwned = dir / "PWNED";
  const fs::path tmp = dir / "x';touch \"$FERRITE_TEST_PWNED\";'";
  fs::create_directories(tmp);
  ModelBuilder b;
  b.input("x", kOnnxFloat, {4, 8});
  b.node("Exp", {"x"}, {"e"}, "exp");
  b.node("Relu", {"e"}, {"y"}, "relu");
  b.output("y");
  const fs::path model = dir.write("small.onnx", b.bytes());
  std::vector<std::string> devices{"cpu"};
  if (!DeviceRegistry::global().origin("gxu").empty()) devices.push_back("gxu");
  for (const std::string& device : devices) {
    SCOPED_TRACE(device);
    CliResult r = run_ferrite(
        dir, {"run", model.string(), "--input", "x=random:4x8", "--device", device, "--quiet"},
        {{"TMPDIR", tmp.string()},
         {"FERRITE_TEST_PWNED", pwned.string()},
         {"FERRITE_CACHE_DIR", (dir / ("cache-" + device)).string()}});
    EXPECT_TRUE(r.exited && r.code == 0) << r.err;
    EXPECT_FALSE(fs::exists(pwned)) << "the temp path was run by a shell";
    // Every temporary directory was removed again.
    EXPECT_TRUE(fs::is_empty(tmp)) << fs::directory_iterator(tmp)->path();
  }
}

}  // namespace
}  // namespace ferrite::testing
