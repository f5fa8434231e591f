// `ferrite run --output-dir`: every write checked (a full disk is an error, not exit 0), results
// written atomically (support/result_dir.h).
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
      {"run", model.string(), "--input", "x=random:512x8", "--output-dir", out.string()});
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
      dir, 512, {"run", model.string(), "--input", "x=random:2x8", "--output-dir", out.string()});
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

}  // namespace
}  // namespace ferrite::testing
