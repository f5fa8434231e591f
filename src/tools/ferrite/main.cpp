// ferrite: the command-line entry point.
#include <cstdio>
#include <cstring>
#include <string>

#include "tools/ferrite/cli.h"
#include "tools/ferrite/interrupt.h"

namespace {
const char* kUsage = R"(ferrite — a deep-learning compiler and runtime

usage: ferrite <command> [options]

commands:
  run MODEL --inputs DIR [--inputs DIR2 ...] --output-dir OUT [--device NAME]
      Load MODEL once, run it once per --inputs directory (DIR/input_*.pb), write outputs to
      OUT/<k>/output_<i>.pb and timings to OUT/run.json. `--input name=random:2x3x4` makes a
      random input instead.
  info MODEL [--ir]
      Inputs/outputs with symbolic shapes, opset, op histogram and unsupported ops; --ir prints
      the inferred graph IR.
  test-onnx [--device NAME] [--json FILE] [--verbose] CASE_DIR...
      Run ONNX test-case directories (model.onnx + test_data_set_*/) and report
      pass / fail / unsupported per case.
  bench MODEL (--inputs DIR | --input NAME=random:DIMS ...) [--device NAME] [--threads N]
        [--warmup K] [--runs R] [--min-seconds S] [--compare onnxruntime] [--json FILE]
      Compile time (cold and warm) and run latency (median, p10, p90, min, mean), optionally
      interleaved with ONNX Runtime on the same inputs with an output check and a speed ratio.
  cts --device NAME [--filter REGEX] [--list] [--known FILE] [--json FILE] [--verbose]
      Backend conformance suite: every op of the op table and a set of fusion patterns on
      NAME against `reference`, with per-op tolerances and a known-unsupported list.
  ops [--names]
      List the op table: every supported op with its opset range and attributes.
  devices [--verbose]
      List the available devices (built in and plugins), where each comes from, and with
      --verbose their properties.

Run `ferrite <command> --help` for the options of one command.
)";
}  // namespace

int main(int argc, char** argv) {
  // Before any thread starts: they inherit the blocked SIGINT/SIGTERM.
  ferrite::cli::install_interrupt_handling();
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string cmd = argv[1];
  if (cmd == "run") return ferrite::cli::run_command(argc - 2, argv + 2);
  if (cmd == "info") return ferrite::cli::info_command(argc - 2, argv + 2);
  if (cmd == "test-onnx") return ferrite::cli::test_onnx_command(argc - 2, argv + 2);
  if (cmd == "bench") return ferrite::cli::bench_command(argc - 2, argv + 2);
  if (cmd == "cts") return ferrite::cli::cts_command(argc - 2, argv + 2);
  if (cmd == "ops") return ferrite::cli::ops_command(argc - 2, argv + 2);
  if (cmd == "devices") {
    // ferrite devices [--verbose]: every registered device, where it came from, and (verbose)
    // its properties; plugins found but refused, with the reason.
    bool verbose = argc > 2 && (!std::strcmp(argv[2], "--verbose") || !std::strcmp(argv[2], "-v"));
    if (argc > 2 && !verbose) {
      std::printf("usage: ferrite devices [--verbose]\n\nLists the devices: built in, and plugins "
                  "found on FERRITE_BACKEND_PATH and <prefix>/lib/ferrite/backends.\n");
      return !std::strcmp(argv[2], "--help") ? 0 : 2;
    }
    auto& reg = ferrite::DeviceRegistry::global();
    for (const auto& name : reg.names()) {
      auto d = reg.create(name);
      if (!d) {
        std::printf("%-12s unavailable: %s [%s]\n", name.c_str(), d.status().message().c_str(),
                    reg.origin(name).c_str());
        continue;
      }
      std::printf("%-12s %s [%s]\n", name.c_str(), (*d)->description().c_str(),
                  reg.origin(name).c_str());
      if (verbose) std::printf("%s", (*d)->properties().describe().c_str());
    }
    for (const auto& r : reg.refused())
      std::printf("refused plugin %s: %s\n", r.path.c_str(), r.reason.c_str());
    // What `run` and `bench` (and the C API) take when no device is named.
    std::string why;
    std::string def = ferrite::default_device(&why);
    std::printf("default: %s (%s)\n", def.c_str(), why.c_str());
    return 0;
  }
  std::fprintf(stderr, "error: unknown command '%s' (see ferrite --help)\n", cmd.c_str());
  return 2;
}
