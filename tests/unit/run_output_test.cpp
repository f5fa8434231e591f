// `ferrite run --output-dir`: every write checked (a full disk is an error, not exit 0), results
// written atomically (support/result_dir.h), symbolic links inside the directory refused, and
// nothing of an earlier run left to pass for this one's.
#include <algorithm>
#include <fstream>

#include "cli_util.h"
#include "frontend/onnx/tensor_proto.h"
#include "support/result_dir.h"

namespace ferrite::testing {
namespace {

std::string relu_model() {
  ModelBuilder b;
  b.input("x", kOnnxFloat, {"n", 8});
  b.node("Relu", {"x"}, {"y"}, "relu");
  b.output("y");
  return b.bytes();
}

// `ferrite ARGS` with files limited to `max_bytes` (RLIMIT_FSIZE), SIGXFSZ ignored: writes
// past the limit fail with EFBIG the way they fail with ENOSPC on a full disk. The shell only
// sets the limit; the arguments reach ferrite through "$@" untouched.
CliResult run_with_file_limit(const TempDir& dir, size_t max_bytes,
                              const std::vector<std::string>& args) {
  std::vector<std::string> argv{"sh",
                                "-c",
                                "trap '' XFSZ; ulimit -f \"$1\"; shift; exec \"$@\"",
                                "sh",
                                std::to_string(max_bytes / 512),
                                FERRITE_CLI_PATH};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_program(dir, argv);
}

TEST(RunOutput, FullDiskWritingAnOutputIsAnError) {
  TempDir dir;
  auto model = dir.write("m.onnx", relu_model());
  fs::path out = dir / "out";
  // 512x8 floats (16 KiB) cannot be written under a 1 KiB limit.
  CliResult r = run_with_file_limit(
      dir, 1024,
      {"run", model.string(), "--input", "x=random:512x8", "--output-dir", out.string(), "--device", "reference"});
  EXPECT_TRUE(clean_failure(r, {"cannot write", "output_0.pb", "File too large"}));
  EXPECT_FALSE(fs::exists(out / "run.json"));
  EXPECT_FALSE(fs::exists(out / "0" / "output_0.pb"));
  for (const auto& e : fs::directory_iterator(out / "0"))
    ADD_FAILURE() << "left behind: " << e.path();
}

TEST(RunOutput, FullDiskWritingRunJsonIsAnError) {
  TempDir dir;
  // A long model path makes run.json (which names the model) larger than the limit while the
  // one output (2x8 floats) fits.
  fs::path deep = dir / std::string(200, 'a') / std::string(200, 'b');
  fs::create_directories(deep);
  fs::path model = deep / "m.onnx";
  std::ofstream(model, std::ios::binary) << relu_model();
  fs::path out = dir / "out";
  CliResult r = run_with_file_limit(
      dir, 512, {"run", model.string(), "--input", "x=random:2x8", "--output-dir", out.string(), "--device", "reference"});
  EXPECT_TRUE(clean_failure(r, {"cannot write", "run.json", "File too large"}));
  EXPECT_FALSE(fs::exists(out / "run.json"));
}

TEST(RunOutput, WriteFileIsAtomicAndChecked) {
  TempDir dir;
  auto d = ResultDir::open(dir / "r");
  ASSERT_TRUE(d) << d.status().message();
  ASSERT_TRUE(d->write_file("a.txt", "first"));
  ASSERT_TRUE(d->write_file("a.txt", "second"));
  EXPECT_EQ(read_text(dir / "r" / "a.txt"), "second");
  auto names = d->list();
  ASSERT_TRUE(names);
  EXPECT_EQ(*names, std::vector<std::string>{"a.txt"});  // no temporary file left
}

CliResult run_relu(const TempDir& dir, const fs::path& model, const fs::path& out,
                   const std::string& input = "x=random:2x8") {
  return run_ferrite(
      dir, {"run", model.string(), "--input", input, "--quiet", "--output-dir", out.string(), "--device", "reference"});
}

// Symbolic links planted inside the output directory are refused with an error naming them;
// nothing is written where they point.
TEST(RunOutput, SymlinksInsideTheOutputDirAreRefused) {
  TempDir dir;
  auto model = dir.write("m.onnx", relu_model());
  fs::path victim = dir / "victim";
  fs::create_directories(victim);
  dir.write("victim/keep.pb", "precious");

  fs::path out_a = dir / "a";
  fs::create_directories(out_a);
  fs::create_directory_symlink(victim, out_a / "0");
  EXPECT_TRUE(
      clean_failure(run_relu(dir, model, out_a), {(out_a / "0").string(), "symbolic link"}));

  fs::path out_b = dir / "b";
  fs::create_directories(out_b / "0");
  fs::create_symlink(victim / "keep.pb", out_b / "0" / "output_0.pb");
  EXPECT_TRUE(clean_failure(run_relu(dir, model, out_b),
                            {(out_b / "0" / "output_0.pb").string(), "symbolic link"}));

  fs::path out_c = dir / "c";
  fs::create_directories(out_c);
  fs::create_symlink(victim / "run.json", out_c / "run.json");
  EXPECT_TRUE(
      clean_failure(run_relu(dir, model, out_c), {(out_c / "run.json").string(), "symbolic link"}));

  // The issue's reproduction: an output file linked to /dev/full.
  fs::path out_d = dir / "d";
  fs::create_directories(out_d / "0");
  fs::create_symlink("/dev/full", out_d / "0" / "output_0.pb");
  EXPECT_TRUE(clean_failure(run_relu(dir, model, out_d), {"output_0.pb", "symbolic link"}));

  EXPECT_EQ(read_text(victim / "keep.pb"), "precious");
  std::vector<std::string> in_victim;
  for (const auto& e : fs::directory_iterator(victim)) in_victim.push_back(e.path().filename());
  EXPECT_EQ(in_victim, std::vector<std::string>{"keep.pb"});

  // The directory the user names may itself be a link.
  fs::path real = dir / "real";
  fs::create_directories(real);
  fs::create_directory_symlink(real, dir / "link");
  CliResult ok = run_relu(dir, model, dir / "link");
  EXPECT_TRUE(ok.exited && ok.code == 0) << ok.err;
  EXPECT_TRUE(fs::is_regular_file(real / "0" / "output_0.pb"));
  EXPECT_TRUE(fs::is_regular_file(real / "run.json"));
}

// What an earlier run left is removed before this one starts: an interrupted or failed rerun
// leaves no run.json claiming completion and no old outputs beside the new ones.
TEST(RunOutput, StaleResultsAreRemovedAtStart) {
  TempDir dir;
  auto model = dir.write("m.onnx", relu_model());
  fs::path out = dir / "out";
  dir.write("out/run.json", "{\"runs\": [{\"check\": \"pass\"}]}");
  dir.write("out/0/output_0.pb", "old");
  dir.write("out/0/output_1.pb", "old extra");
  dir.write("out/0/output_7.pb", "old extra");
  dir.write("out/0/.output_0.pb.tmp-1-1", "torn write");
  dir.write("out/0/notes.txt", "the user's");
  dir.write("out/3/output_0.pb", "old run");

  // This run fails at run time (the input does not fit the model) after the directory was
  // prepared, as an interrupted one would stop.
  EXPECT_TRUE(clean_failure(run_relu(dir, model, out, "x=random:2x9"), {"input 'x'"}));
  EXPECT_FALSE(fs::exists(out / "run.json"));
  EXPECT_FALSE(fs::exists(out / "0" / "output_0.pb"));
  EXPECT_FALSE(fs::exists(out / "0" / "output_1.pb"));
  EXPECT_FALSE(fs::exists(out / "0" / "output_7.pb"));
  EXPECT_FALSE(fs::exists(out / "0" / ".output_0.pb.tmp-1-1"));
  EXPECT_FALSE(fs::exists(out / "3"));
  EXPECT_EQ(read_text(out / "0" / "notes.txt"), "the user's");

  CliResult ok = run_relu(dir, model, out);
  ASSERT_TRUE(ok.exited && ok.code == 0) << ok.err;
  std::vector<std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(out))
    files.push_back(fs::relative(e.path(), out).string());
  std::sort(files.begin(), files.end());
  EXPECT_EQ(files, (std::vector<std::string>{"0", "0/notes.txt", "0/output_0.pb", "run.json"}));
}

}  // namespace
}  // namespace ferrite::testing
