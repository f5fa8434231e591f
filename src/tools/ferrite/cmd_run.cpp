// `ferrite run`: load once, run once per input set, write outputs and run.json.
#include <chrono>
#include <cstdio>
#include <optional>

#include "distributed/tensor_parallel.h"
#include "execute/step_plan.h"
#include "frontend/onnx/tensor_proto.h"
#include "passes/pass.h"
#include "runtime/compare.h"
#include "support/json.h"
#include "tools/ferrite/cli.h"
#include "tools/ferrite/command.h"
#include "tools/ferrite/run_output.h"

namespace ferrite::cli {

namespace fs = std::filesystem;

namespace {
int fail(const Status& s) {
  std::fprintf(stderr, "error: %s\n", s.message().c_str());
  return 1;
}

// The command line of `ferrite run`.
struct RunArgs {
  std::string model, device, passes, threads, dump, precision, trace, tensor_parallel, output_dir;
  std::vector<std::string> inputs, input;
  bool has_output_dir = false, quiet = false, check = false, autotune = false;
};

// The compile options of --passes, --autotune, --precision, --threads, --dump and --trace.
Expected<RunOptions> run_options(const RunArgs& args) {
  RunOptions run_opts;
  if (const std::string& passes = args.passes; !passes.empty()) {
    std::vector<std::string> pipeline;
    if (passes == "default") {
      pipeline = default_pipeline();
    } else if (passes != "none") {
      pipeline = split_list(passes);
    }
    run_opts.passes = pipeline;
  }
  run_opts.autotune = args.autotune;
  if (const std::string& p = args.precision; !p.empty()) {
    auto prec = precision_from_name(p);
    if (!prec) return err("--precision expects f32, tf32, bf16 or fp16, got '", p, "'");
    run_opts.precision = *prec;
  }
  if (const std::string& threads = args.threads; !threads.empty()) {
    if (threads.find_first_not_of("0123456789") != std::string::npos || threads.size() > 4)
      return err("--threads expects a positive integer, got '", threads, "'");
    run_opts.threads = std::stoi(threads);
  }
  if (!args.dump.empty()) run_opts.dump_dir = fs::path(args.dump);
  if (!args.trace.empty()) run_opts.trace = fs::path(args.trace);
  return run_opts;
}

struct InputSets {
  std::vector<std::vector<Session::NamedInput>> sets;
  std::vector<std::string> labels;  // the --inputs DIR, "random" or "(no inputs)"
};

// One set per --inputs DIR, one for all --input SPECs together; a model without graph inputs
// runs once as it is.
Expected<InputSets> collect_inputs(const RunArgs& args, const Graph& graph) {
  InputSets in;
  for (const auto& dir : args.inputs) {
    FERRITE_ASSIGN_OR_RETURN(auto set, read_input_dir(dir, &graph.inputs()));
    in.sets.push_back(std::move(set));
    in.labels.push_back(dir);
  }
  if (!args.input.empty()) {
    std::vector<Session::NamedInput> set;
    for (const auto& spec : args.input) {
      FERRITE_ASSIGN_OR_RETURN(auto t, random_input(graph, spec));
      set.push_back(std::move(t));
    }
    in.sets.push_back(std::move(set));
    in.labels.push_back("random");
  }
  if (in.sets.empty()) {
    if (!graph.inputs().empty())
      return Status::error("no inputs: give --inputs DIR or --input SPEC");
    in.sets.emplace_back();
    in.labels.push_back("(no inputs)");
  }
  return in;
}

// --check: the outputs against DIR's expected ones, as "pass", "no expected outputs" or
// "fail: ...".
Expected<std::string> check_outputs(const std::string& dir, const std::vector<Tensor>& outs,
                                    const Graph& g, Precision precision) {
  FERRITE_ASSIGN_OR_RETURN(auto expected, read_output_dir(dir, &g.outputs()));
  if (expected.empty()) return std::string("no expected outputs");
  if (expected.size() != outs.size())
    return str_cat("fail: ", outs.size(), " outputs, expected ", expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    const Tensor& want = expected[i].tensor;
    auto cmp = compare_tensors(outs[i], want, precision_tolerance(precision, want.dtype()));
    if (!cmp.ok) return str_cat("fail: output ", i, " (", g.outputs()[i]->name, "): ", cmp.message);
  }
  return std::string("pass");
}

// What the runs measured, for the report and run.json.
struct RunRecord {
  std::vector<std::string> labels, checks;
  std::vector<double> seconds;
  std::vector<std::optional<MemoryStats>> memory;  // per run, where the device plans memory
  std::optional<DeviceMemoryStats> device_memory;  // the device's allocator, after the last run
  const TuningStats* tuned = nullptr;              // cumulative (--autotune)
  double load_s = 0, prepare_s = 0;
};

Json memory_json(const MemoryStats& m) {
  return {{"planned_peak_bytes", m.planned_peak_bytes},
          {"intermediate_bytes", m.intermediate_bytes},
          {"live_peak_bytes", m.live_peak_bytes},
          {"planned_buffers", m.planned_buffers},
          {"in_place", m.in_place},
          {"unplanned_buffers", m.unplanned_buffers}};
}

// run.json: built in memory and written last, atomically, so that a run.json on disk means every
// output of this invocation is complete. Memory of the intermediates per run (plans depend on
// the input shapes), and the largest over the runs at the top level.
std::string run_json(const std::string& device, const std::string& model, int compiles,
                     const RunRecord& r) {
  Json js = {{"device", device},
             {"model", model},
             {"compiles", compiles},
             {"load_seconds", r.load_s},
             {"prepare_seconds", r.prepare_s},
             {"runs", Json::array()}};
  std::optional<MemoryStats> peak;
  for (size_t k = 0; k < r.seconds.size(); ++k) {
    Json run = {{"inputs", r.labels[k]}, {"seconds", r.seconds[k]}};
    if (!r.checks[k].empty()) run["check"] = r.checks[k];
    if (r.memory[k]) {
      run["memory"] = memory_json(*r.memory[k]);
      if (!peak || r.memory[k]->planned_peak_bytes > peak->planned_peak_bytes) peak = r.memory[k];
    }
    js["runs"].push_back(std::move(run));
  }
  if (peak) js["memory"] = memory_json(*peak);
  if (r.device_memory) {
    const DeviceMemoryStats& d = *r.device_memory;
    js["device_memory"] = {{"in_use_bytes", d.in_use_bytes},
                           {"peak_in_use_bytes", d.peak_in_use_bytes},
                           {"reserved_bytes", d.reserved_bytes},
                           {"peak_reserved_bytes", d.peak_reserved_bytes},
                           {"driver_allocs", d.driver_allocs},
                           {"driver_frees", d.driver_frees},
                           {"requests", d.requests},
                           {"cache_hits", d.cache_hits}};
  }
  if (r.tuned)
    js["autotune"] = {{"kernels_tuned", r.tuned->kernels_tuned},
                      {"kernels_reused", r.tuned->kernels_reused},
                      {"configs_timed", r.tuned->configs_timed},
                      {"tuning_seconds", r.tuned->seconds}};
  return json_text(js);
}

// The Session the runs go through, or with --tensor-parallel N the group of N (runs go through the
// group; `session` is rank 0's, for statistics).
struct OpenedSession {
  std::unique_ptr<Session> owned;
  std::unique_ptr<TensorParallelSession> tp;
  Session* session = nullptr;
};

Expected<OpenedSession> open_session(const RunArgs& args, std::unique_ptr<Graph> graph,
                                     const std::string& device, const RunOptions& opts) {
  OpenedSession o;
  const std::string& n = args.tensor_parallel;
  if (n.empty() || n == "1") {
    FERRITE_ASSIGN_OR_RETURN(o.owned, Session::from_graph(std::move(graph), device, opts));
    o.session = o.owned.get();
    return o;
  }
  if (n.find_first_not_of("0123456789") != std::string::npos || n.size() > 2)
    return err("--tensor-parallel expects a group size from 1 to 64, got '", n, "'");
  FERRITE_ASSIGN_OR_RETURN(
      o.tp, TensorParallelSession::from_graph(std::move(graph), device, opts, std::stoi(n)));
  std::fprintf(stderr, "%s; collectives: %s\n", o.tp->report().summary().c_str(),
               o.tp->collectives().c_str());
  if (log_enabled("tp"))
    for (const std::string& line : o.tp->report().lines)
      std::fprintf(stderr, "  %s\n", line.c_str());
  o.session = &o.tp->local(0);
  return o;
}

int run_command(const RunArgs& args) {
  // What an earlier run left in OUT goes before anything else (run_output.h), so that a run
  // that fails or is interrupted from here on leaves no stale run.json behind.
  std::optional<RunOutput> output;
  if (args.has_output_dir) {
    auto started = RunOutput::start(args.output_dir);
    if (!started) return fail(started.status());
    output = std::move(started).value();
  }
  const std::string& model = args.model;
  std::string device = args.device;
  auto t0 = std::chrono::steady_clock::now();
  auto graph = import_onnx_file(model);
  if (!graph) return fail(graph.status());
  auto run_opts = run_options(args);
  if (!run_opts) return fail(run_opts.status());
  size_t nodes_before = (*graph)->nodes().size();
  // Chosen once the model imports, so that a model error stays the only line on stderr.
  if (device.empty()) device = announce_default_device();
  auto t1 = std::chrono::steady_clock::now();
  auto opened = open_session(args, std::move(graph).value(), device, *run_opts);
  if (!opened) return fail(opened.status());
  Session* session = opened->session;
  session->set_label(fs::path(model).filename().string());
  auto t2 = std::chrono::steady_clock::now();
  const Graph& g = session->graph();
  auto inputs = collect_inputs(args, g);
  if (!inputs) return fail(inputs.status());

  std::vector<std::string> output_names;
  for (const Value* v : g.outputs()) output_names.push_back(v->name);
  RunRecord rec;
  rec.labels = inputs->labels;
  rec.checks.assign(inputs->sets.size(), "");
  std::optional<TuningStats> tuning;
  bool all_match = true;
  for (size_t k = 0; k < inputs->sets.size(); ++k) {
    const std::string& label = rec.labels[k];
    auto r0 = std::chrono::steady_clock::now();
    auto outs = opened->tp ? opened->tp->run(inputs->sets[k]) : session->run(inputs->sets[k]);
    auto r1 = std::chrono::steady_clock::now();
    if (!outs)
      return fail(outs.status().with_context("run " + std::to_string(k) + " (" + label + ")"));
    rec.seconds.push_back(std::chrono::duration<double>(r1 - r0).count());
    rec.memory.push_back(session->stats().memory);
    tuning = session->stats().tuning;
    rec.device_memory = session->stats().device_memory;
    if (!args.quiet) {
      std::printf("run %zu (%s): %.3f s\n", k, label.c_str(), rec.seconds.back());
      for (size_t i = 0; i < outs->size(); ++i)
        std::printf("  %s: %s\n", g.outputs()[i]->name.c_str(), tensor_summary((*outs)[i]).c_str());
    }
    if (args.check && label != "random" && !inputs->sets[k].empty()) {
      auto check = check_outputs(label, *outs, g, run_opts->precision);
      if (!check) return fail(check.status());
      rec.checks[k] = *check;
      if (rec.checks[k].rfind("fail", 0) == 0) all_match = false;
      std::printf("  check: %s\n", rec.checks[k].c_str());
    }
    if (output) {
      if (Status st = output->write_outputs(k, output_names, *outs); !st) return fail(st);
    }
  }
  // Devices that compile nothing (the reference interpreter) ignore dump_dir: say so.
  if (run_opts->dump_dir && !fs::exists(*run_opts->dump_dir / "graph.txt"))
    std::fprintf(stderr, "note: --dump: device '%s' compiles nothing, so it wrote no dump\n",
                 device.c_str());
  rec.load_s = std::chrono::duration<double>(t1 - t0).count();
  rec.prepare_s = std::chrono::duration<double>(t2 - t1).count();
  if (!args.quiet)
    std::printf(
        "device %s: load %.3f s, prepare %.3f s (%zu -> %zu nodes), %zu run(s), compiles %d\n",
        device.c_str(), rec.load_s, rec.prepare_s, nodes_before,
        session->compiled_graph().nodes().size(), rec.seconds.size(), session->compiles());
  rec.tuned = tuning ? &*tuning : nullptr;
  if (rec.tuned)
    std::printf(
        "autotune: %d kernel launches timed (%d configurations, %.3f s), %d reused from "
        "the tuning database\n",
        rec.tuned->kernels_tuned, rec.tuned->configs_timed, rec.tuned->seconds,
        rec.tuned->kernels_reused);
  if (output) {
    if (Status st = output->write_run_json(run_json(device, model, session->compiles(), rec)); !st)
      return fail(st);
  }
  if (!all_match) {
    std::fprintf(stderr, "error: outputs differ from the expected outputs (see check lines)\n");
    return 1;
  }
  return 0;
}

}  // namespace

Command add_run_command(CLI::App& ferrite) {
  auto a = std::make_shared<RunArgs>();
  CLI::App* app = add_command(
      ferrite, "run",
      "Load MODEL once, run it once per --inputs directory (DIR/input_*.pb),\n"
      "write outputs to OUT/<k>/output_<i>.pb and timings to OUT/run.json.\n"
      "`--input name=random:2x3x4` makes a random input instead.",
      R"(Dims the model leaves unknown are specialised to the first sizes seen; a size that changes
makes that dim dynamic and recompiles once (FERRITE_LOG=recompile prints why; run.json counts
`compiles`).)");
  app->add_option("MODEL", a->model, "the ONNX model file")->type_name("");
  add_repeated(*app, "--inputs", a->inputs, "DIR",
               "a directory of input_*.pb TensorProto files (matched to graph inputs by\n"
               "name, else by order); repeat to run several input sets with one compile");
  add_repeated(*app, "--input", a->input, "SPEC",
               "NAME=random:DIMS, e.g. input=random:1x3x224x224 (one run with these)");
  CLI::Option* out = app->add_option("--output-dir", a->output_dir,
                                     "write OUT/<k>/output_<i>.pb for run k and OUT/run.json");
  out->type_name("OUT")->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_value(*app, "--device", a->device, "NAME",
            "device to run on (see `ferrite devices`); default: the best usable one,\n"
            "cuda where a GPU answers, else cpu (said on stderr). `reference` is the\n"
            "unoptimised correctness oracle, used only when named");
  app->add_flag("--check", a->check,
                "compare each run's outputs with DIR/output_*.pb (when present) using the\n"
                "per-dtype tolerances of `ferrite test-onnx --help` (at bf16 / fp16 / tf32,\n"
                "float outputs use that precision's tolerance, see --precision); exit 1 on\n"
                "a mismatch");
  add_value(*app, "--precision", a->precision, "P",
            "f32 (default; TF32 off), tf32 (f32 storage, TF32 tensor-core GEMMs; cuda),\n"
            "bf16 or fp16 (weights and activations stored in the low dtype, float32\n"
            "compute and accumulation; inputs and outputs stay f32). --check tolerances\n"
            "(atol = rtol): bf16 0.0625, fp16 and tf32 0.0078 (docs/cuda-backend.md)");
  add_value(*app, "--passes", a->passes, "LIST",
            "graph passes before preparing: \"default\", \"none\" or a comma-separated list\n"
            "(see `ferrite info --list-passes`); by default none on `reference` (the\n"
            "oracle) and the default pipeline on compiling devices such as `cpu`");
  add_value(*app, "--threads", a->threads, "N",
            "worker threads for devices that use them (default: all cores)");
  app->add_flag("--autotune", a->autotune,
                "time candidate launch configurations of every generated kernel on the\n"
                "first run at each size and keep the fastest; choices persist in the tuning\n"
                "database (compile cache dir), so a later compile reuses them and times\n"
                "nothing (progress bar on a terminal; FERRITE_PROGRESS=1 forces it)");
  add_value(*app, "--dump", a->dump, "DIR",
            "write what the device compiled into DIR: kernels.cpp (generated source,\n"
            "each step mapped to its ONNX nodes), fusion_plan.txt, memory_plan.txt\n"
            "(buffers, live ranges, offsets per input binding) and graph.txt (IR after\n"
            "the passes); a recompile writes DIR/compile_<n>/ (compiling devices only)");
  add_value(*app, "--trace", a->trace, "FILE",
            "write a Chrome / Perfetto trace (JSON) of every step of every run, named\n"
            "by its kernel and ONNX nodes (open in ui.perfetto.dev or chrome://tracing)");
  add_value(*app, "--tensor-parallel", a->tensor_parallel, "N",
            "split the model over N ranks (attention by heads, MLPs by columns then\n"
            "rows, embeddings by hidden columns; AllReduce / AllGather between them) and\n"
            "run them at once as threads of this process: on cuda rank r on GPU r with\n"
            "NCCL, elsewhere exchanging data in host memory; prints what it split\n"
            "(FERRITE_LOG=tp: every decision). Outputs are rank 0's\n"
            "(docs/distributed.md)");
  app->add_flag("--quiet", a->quiet, "do not print the per-output summary");
  return {app, [app, a, out] {
            a->has_output_dir = out->count() > 0;
            if (a->model.empty() || !app->remaining().empty()) {
              std::fputs(app->help("ferrite").c_str(), stderr);
              return fail(Status::error("run takes exactly one MODEL"));
            }
            return run_command(*a);
          }};
}

}  // namespace ferrite::cli
