// `ferrite run`: load once, run once per input set, write outputs and run.json.
#include <chrono>
#include <cstdio>
#include <optional>
#include <sstream>

#include "frontend/onnx/tensor_proto.h"
#include "passes/pass.h"
#include "runtime/compare.h"
#include "tools/ferrite/cli.h"
#include "tools/ferrite/run_output.h"

namespace ferrite::cli {

namespace fs = std::filesystem;

namespace {
const char* kRunHelp = R"(usage: ferrite run MODEL [--inputs DIR]... [--input NAME=random:DIMS]...
                    [--output-dir OUT] [--device NAME] [--dump DIR] [--trace FILE] [--quiet]

  --inputs DIR        a directory of input_*.pb TensorProto files (matched to graph inputs by
                      name, else by order); repeat to run several input sets with one compile
  --input SPEC        NAME=random:DIMS, e.g. input=random:1x3x224x224 (one run with these)
  --output-dir OUT    write OUT/<k>/output_<i>.pb for run k and OUT/run.json
  --device NAME       device to run on (default: reference; see `ferrite devices`)
  --check             compare each run's outputs with DIR/output_*.pb (when present) using the
                      per-dtype tolerances of `ferrite test-onnx --help` (at bf16 / fp16 / tf32,
                      float outputs use that precision's tolerance, see --precision); exit 1 on
                      a mismatch
  --precision P       f32 (default; TF32 off), tf32 (f32 storage, TF32 tensor-core GEMMs; cuda),
                      bf16 or fp16 (weights and activations stored in the low dtype, float32
                      compute and accumulation; inputs and outputs stay f32). --check tolerances
                      (atol = rtol): bf16 0.0625, fp16 and tf32 0.0078 (docs/cuda-backend.md)
  --passes LIST       graph passes before preparing: "default", "none" or a comma-separated list
                      (see `ferrite info --list-passes`); by default none on `reference` (the
                      oracle) and the default pipeline on compiling devices such as `cpu`
  --threads N         worker threads for devices that use them (default: all cores)
  --autotune          time candidate launch configurations of every generated kernel on the
                      first run at each size and keep the fastest; choices persist in the tuning
                      database (compile cache dir), so a later compile reuses them and times
                      nothing (progress bar on a terminal; FERRITE_PROGRESS=1 forces it)
  --dump DIR          write what the device compiled into DIR: kernels.cpp (generated source,
                      each step mapped to its ONNX nodes), fusion_plan.txt, memory_plan.txt
                      (buffers, live ranges, offsets per input binding) and graph.txt (IR after
                      the passes); a recompile writes DIR/compile_<n>/ (compiling devices only)
  --trace FILE        write a Chrome / Perfetto trace (JSON) of every step of every run, named
                      by its kernel and ONNX nodes (open in ui.perfetto.dev or chrome://tracing)

  Dims the model leaves unknown are specialised to the first sizes seen; a size that changes
  makes that dim dynamic and recompiles once (FERRITE_LOG=recompile prints why; run.json counts
  `compiles`).
  --quiet             do not print the per-output summary
)";

int fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return 1;
}
}  // namespace

int run_command(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"help", "quiet", "check", "autotune"},
                          {"inputs", "input", "output-dir", "device", "passes", "threads", "dump",
                           "precision", "trace"});
  if (!args) return fail(args.status());
  if (args->flag("help")) {
    std::fputs(kRunHelp, stdout);
    return 0;
  }
  if (args->positional().size() != 1) {
    std::fputs(kRunHelp, stderr);
    return fail(Status::error("run takes exactly one MODEL"));
  }
  // What an earlier run left in OUT goes before anything else (run_output.h), so that a run
  // that fails or is interrupted from here on leaves no stale run.json behind.
  std::optional<RunOutput> output;
  if (auto dirs = args->all("output-dir"); !dirs.empty()) {
    auto started = RunOutput::start(dirs.back());
    if (!started) return fail(started.status());
    output = std::move(started).value();
  }
  std::string device = args->get("device", "reference");
  auto t0 = std::chrono::steady_clock::now();
  auto graph = import_onnx_file(args->positional()[0]);
  if (!graph) return fail(graph.status());
  RunOptions run_opts;
  if (std::string passes = args->get("passes"); !passes.empty()) {
    std::vector<std::string> pipeline;
    if (passes == "default") {
      pipeline = default_pipeline();
    } else if (passes != "none") {
      for (size_t pos = 0; pos <= passes.size();) {
        size_t end = passes.find(',', pos);
        if (end == std::string::npos) end = passes.size();
        if (end > pos) pipeline.push_back(passes.substr(pos, end - pos));
        pos = end + 1;
      }
    }
    run_opts.passes = pipeline;
  }
  run_opts.autotune = args->flag("autotune");
  if (std::string p = args->get("precision"); !p.empty()) {
    auto prec = precision_from_name(p);
    if (!prec) return fail(err("--precision expects f32, tf32, bf16 or fp16, got '", p, "'"));
    run_opts.precision = *prec;
  }
  if (std::string threads = args->get("threads"); !threads.empty()) {
    if (threads.find_first_not_of("0123456789") != std::string::npos || threads.size() > 4)
      return fail(err("--threads expects a positive integer, got '", threads, "'"));
    run_opts.threads = std::stoi(threads);
  }
  if (std::string dump = args->get("dump"); !dump.empty()) run_opts.dump_dir = fs::path(dump);
  if (std::string trace = args->get("trace"); !trace.empty()) run_opts.trace = fs::path(trace);
  size_t nodes_before = (*graph)->nodes().size();
  auto t1 = std::chrono::steady_clock::now();
  auto session = Session::from_graph(std::move(graph).value(), device, run_opts);
  if (!session) return fail(session.status());
  (*session)->set_label(fs::path(args->positional()[0]).filename().string());
  auto t2 = std::chrono::steady_clock::now();

  std::vector<std::vector<Session::NamedInput>> input_sets;
  std::vector<std::string> labels;
  for (const auto& dir : args->all("inputs")) {
    auto in = read_input_dir(dir);
    if (!in) return fail(in.status());
    input_sets.push_back(std::move(in).value());
    labels.push_back(dir);
  }
  if (!args->all("input").empty()) {
    std::vector<Session::NamedInput> set;
    for (const auto& spec : args->all("input")) {
      auto in = random_input((*session)->graph(), spec);
      if (!in) return fail(in.status());
      set.push_back(std::move(in).value());
    }
    input_sets.push_back(std::move(set));
    labels.push_back("random");
  }
  if (input_sets.empty()) {
    if (!(*session)->graph().inputs().empty())
      return fail(Status::error("no inputs: give --inputs DIR or --input SPEC"));
    // A model without graph inputs (its outputs come from constants) runs once as it is.
    input_sets.emplace_back();
    labels.push_back("(no inputs)");
  }

  const Graph& g = (*session)->graph();
  std::vector<std::string> output_names;
  for (const Value* v : g.outputs()) output_names.push_back(v->name);
  std::vector<double> seconds;
  std::vector<std::optional<MemoryStats>> memory;  // per run, where the device plans memory
  std::vector<std::optional<TuningStats>> tuning;  // cumulative after each run (--autotune)
  std::optional<DeviceMemoryStats> device_memory;  // the device's allocator, after the last run
  std::vector<std::string> checks(input_sets.size(), "");
  bool all_match = true;
  for (size_t k = 0; k < input_sets.size(); ++k) {
    auto r0 = std::chrono::steady_clock::now();
    auto outs = (*session)->run(input_sets[k]);
    auto r1 = std::chrono::steady_clock::now();
    if (!outs) return fail(outs.status().with_context("run " + std::to_string(k) + " (" + labels[k] + ")"));
    seconds.push_back(std::chrono::duration<double>(r1 - r0).count());
    memory.push_back((*session)->stats().memory);
    tuning.push_back((*session)->stats().tuning);
    device_memory = (*session)->stats().device_memory;
    if (!args->flag("quiet")) {
      std::printf("run %zu (%s): %.3f s\n", k, labels[k].c_str(), seconds.back());
      for (size_t i = 0; i < outs->size(); ++i)
        std::printf("  %s: %s\n", g.outputs()[i]->name.c_str(), tensor_summary((*outs)[i]).c_str());
    }
    if (args->flag("check") && labels[k] != "random" && !input_sets[k].empty()) {
      auto expected = read_output_dir(labels[k]);
      if (!expected) return fail(expected.status());
      checks[k] = expected->empty() ? "no expected outputs" : "pass";
      if (!expected->empty() && expected->size() != outs->size()) {
        checks[k] = str_cat("fail: ", outs->size(), " outputs, expected ", expected->size());
      } else {
        for (size_t i = 0; i < expected->size(); ++i) {
          const Tensor& want = (*expected)[i].tensor;
          auto cmp = compare_tensors((*outs)[i], want, precision_tolerance(run_opts.precision, want.dtype()));
          if (!cmp.ok) {
            checks[k] = str_cat("fail: output ", i, " (", g.outputs()[i]->name, "): ", cmp.message);
            break;
          }
        }
      }
      if (checks[k].rfind("fail", 0) == 0) all_match = false;
      std::printf("  check: %s\n", checks[k].c_str());
    }
    if (output) {
      if (Status st = output->write_outputs(k, output_names, *outs); !st) return fail(st);
    }
  }
  // Devices that compile nothing (the reference interpreter) ignore dump_dir: say so.
  if (run_opts.dump_dir && !fs::exists(*run_opts.dump_dir / "graph.txt"))
    std::fprintf(stderr, "note: --dump: device '%s' compiles nothing, so it wrote no dump\n",
                 device.c_str());
  double load_s = std::chrono::duration<double>(t1 - t0).count();
  double prepare_s = std::chrono::duration<double>(t2 - t1).count();
  if (!args->flag("quiet"))
    std::printf("device %s: load %.3f s, prepare %.3f s (%zu -> %zu nodes), %zu run(s), compiles %d\n",
                device.c_str(), load_s, prepare_s, nodes_before, (*session)->compiled_graph().nodes().size(),
                seconds.size(), (*session)->compiles());
  const TuningStats* tuned = !tuning.empty() && tuning.back() ? &*tuning.back() : nullptr;
  if (tuned)
    std::printf("autotune: %d kernel launches timed (%d configurations, %.3f s), %d reused from "
                "the tuning database\n",
                tuned->kernels_tuned, tuned->configs_timed, tuned->seconds, tuned->kernels_reused);
  if (output) {
    // Built in memory and written last, atomically: a run.json on disk means every output of
    // this invocation is complete.
    std::ostringstream js;
    js << "{\"device\": \"" << json_escape(device) << "\", \"model\": \""
       << json_escape(args->positional()[0]) << "\", \"compiles\": " << (*session)->compiles()
       << ", \"load_seconds\": " << load_s << ", \"prepare_seconds\": " << prepare_s
       << ", \"runs\": [";
    // Memory of the intermediates: per run (plans depend on the input shapes), and the largest
    // over the runs at the top level.
    auto memory_json = [](const MemoryStats& m) {
      return str_cat("{\"planned_peak_bytes\": ", m.planned_peak_bytes,
                     ", \"intermediate_bytes\": ", m.intermediate_bytes,
                     ", \"live_peak_bytes\": ", m.live_peak_bytes,
                     ", \"planned_buffers\": ", m.planned_buffers, ", \"in_place\": ", m.in_place,
                     ", \"unplanned_buffers\": ", m.unplanned_buffers, "}");
    };
    std::optional<MemoryStats> peak;
    for (size_t k = 0; k < seconds.size(); ++k) {
      js << (k ? ", " : "") << "{\"inputs\": \"" << json_escape(labels[k])
         << "\", \"seconds\": " << seconds[k]
         << (checks[k].empty() ? "" : ", \"check\": \"" + json_escape(checks[k]) + "\"");
      if (memory[k]) {
        js << ", \"memory\": " << memory_json(*memory[k]);
        if (!peak || memory[k]->planned_peak_bytes > peak->planned_peak_bytes) peak = memory[k];
      }
      js << "}";
    }
    js << "]";
    if (peak) js << ", \"memory\": " << memory_json(*peak);
    if (device_memory) {
      const DeviceMemoryStats& d = *device_memory;
      js << ", \"device_memory\": {\"in_use_bytes\": " << d.in_use_bytes
         << ", \"peak_in_use_bytes\": " << d.peak_in_use_bytes
         << ", \"reserved_bytes\": " << d.reserved_bytes
         << ", \"peak_reserved_bytes\": " << d.peak_reserved_bytes
         << ", \"driver_allocs\": " << d.driver_allocs << ", \"driver_frees\": " << d.driver_frees
         << ", \"requests\": " << d.requests << ", \"cache_hits\": " << d.cache_hits << "}";
    }
    if (tuned)
      js << ", \"autotune\": {\"kernels_tuned\": " << tuned->kernels_tuned
         << ", \"kernels_reused\": " << tuned->kernels_reused
         << ", \"configs_timed\": " << tuned->configs_timed
         << ", \"tuning_seconds\": " << tuned->seconds << "}";
    js << "}\n";
    if (Status st = output->write_run_json(js.str()); !st) return fail(st);
  }
  if (!all_match) {
    std::fprintf(stderr, "error: outputs differ from the expected outputs (see check lines)\n");
    return 1;
  }
  return 0;
}

}  // namespace ferrite::cli
