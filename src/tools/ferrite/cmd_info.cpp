// `ferrite info`: what a model contains and whether ferrite supports all of it.
#include <algorithm>
#include <climits>
#include <cstdio>
#include <map>
#include <tuple>

#include "ops/op_schema.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "tools/ferrite/cli.h"
#include "tools/ferrite/command.h"

namespace ferrite::cli {

namespace {

// The command line of `ferrite info`.
struct InfoArgs {
  std::string model, after, passes, device;
  bool ir = false, list_passes = false;
};

int info_command(const InfoArgs& args) {
  // The pipeline --after and --list-passes speak of: the device's, or the default one.
  std::vector<std::string> pipeline = default_pipeline();
  if (!args.device.empty()) {
    auto dev = DeviceRegistry::global().create(args.device);
    auto passes = dev ? default_passes(**dev) : Expected<std::vector<std::string>>(dev.status());
    if (!passes) {
      std::fprintf(stderr, "error: %s\n", passes.status().message().c_str());
      return 1;
    }
    pipeline = *passes;
  }
  if (args.list_passes) {
    for (const auto& p : PassRegistry::global().all())
      std::printf("%-36s %s%s\n", p.name.c_str(), p.opt_in ? "(opt-in) " : "",
                  p.description.c_str());
    std::string def;
    for (const auto& p : pipeline) def += (def.empty() ? "" : ",") + p;
    if (args.device.empty())
      std::printf("default pipeline: %s\n", def.c_str());
    else
      std::printf("pipeline on %s: %s\n", args.device.c_str(),
                  def.empty() ? "(none)" : def.c_str());
    return 0;
  }
  ImportOptions opts;
  opts.allow_unknown_ops = true;
  ImportReport report;
  auto graph = import_onnx_file(args.model, opts, &report);
  if (!graph) {
    std::fprintf(stderr, "error: %s\n", graph.status().message().c_str());
    return 1;
  }
  const Graph& g = **graph;
  std::printf("model: %s\n", args.model.c_str());
  std::printf("ir_version: %lld, producer: %s\n", static_cast<long long>(report.ir_version),
              report.producer.c_str());
  for (const auto& [domain, v] : g.opsets())
    std::printf("opset: %s %d\n", domain.empty() ? "ai.onnx" : domain.c_str(), v);
  std::printf("inputs:\n");
  for (const Value* v : g.inputs())
    std::printf("  %s: %s\n", v->name.c_str(), v->type.to_string().c_str());
  std::printf("outputs:\n");
  for (const Value* v : g.outputs())
    std::printf("  %s: %s\n", v->name.c_str(), v->type.to_string().c_str());
  int64_t params = 0;
  for (const Value* v : g.initializers()) params += v->constant->numel();
  std::printf("nodes: %zu, initializers: %zu (%lld elements)\n", g.nodes().size(),
              g.initializers().size(), static_cast<long long>(params));
  std::map<std::string, int> hist;
  for (const auto& n : g.nodes()) hist[n->op_type]++;
  std::printf("ops:\n");
  for (const auto& [op, count] : hist) std::printf("  %-24s %d\n", op.c_str(), count);
  if (!report.unsupported_ops.empty()) {
    // Grouped by op: "Conv: 2 nodes (/conv1/Conv, /conv2/Conv)".
    std::map<std::string, std::vector<std::string>> by_op;
    for (const auto& n : g.nodes())
      if (!n->schema) by_op[n->op_type].push_back(n->name);
    std::printf("unsupported ops (%zu):\n", by_op.size());
    for (const auto& [op, names] : by_op) {
      std::string list;
      for (size_t i = 0; i < names.size() && i < 4; ++i) list += (i ? ", " : "") + names[i];
      if (names.size() > 4) list += ", ...";
      std::printf("  %s: %zu node(s) (%s)\n", op.c_str(), names.size(), list.c_str());
    }
    // The exit status says the model cannot run; say why on stderr like every other failure.
    std::string ops;
    for (const auto& [op, names] : by_op) ops += (ops.empty() ? "" : ", ") + op;
    std::fprintf(stderr, "error: the model uses %zu unsupported op(s): %s\n", by_op.size(),
                 ops.c_str());
    return 1;
  }
  std::printf("all ops supported\n");
  if (args.ir && args.after.empty()) std::fputs(print_graph(g).c_str(), stdout);
  if (const std::string& after = args.after; !after.empty()) {
    if (!args.passes.empty()) pipeline = split_list(args.passes);
    if (after != "all") {
      auto it = std::find(pipeline.begin(), pipeline.end(), after);
      if (it == pipeline.end()) {
        std::fprintf(stderr, "error: pass '%s' is not in the pipeline (see --list-passes)\n",
                     after.c_str());
        return 1;
      }
      pipeline.erase(it + 1, pipeline.end());
    }
    Graph& mut = **graph;
    Status st = run_pipeline(mut, pipeline);
    if (!st) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      return 1;
    }
    std::printf("after %s: %zu nodes\n", after.c_str(), mut.nodes().size());
    std::fputs(print_graph(mut).c_str(), stdout);
  }
  return 0;
}

// `ferrite ops`: the op table, one line per registration.
int ops_command(bool names_only) {
  std::vector<const OpSchema*> all;
  for (const auto& s : OpRegistry::global().all()) all.push_back(&s);
  std::sort(all.begin(), all.end(), [](const OpSchema* a, const OpSchema* b) {
    return std::tie(a->domain, a->name, a->since_version) <
           std::tie(b->domain, b->name, b->since_version);
  });
  for (const OpSchema* s : all) {
    if (names_only) {  // internal domains qualified: they must not shadow ONNX names
      std::printf("%s\n", (s->domain.empty() ? s->name : s->domain + "." + s->name).c_str());
      continue;
    }
    std::string range = s->last_version == INT_MAX
                            ? str_cat(s->since_version, "+")
                            : str_cat(s->since_version, "-", s->last_version);
    std::string attrs;
    for (const auto& a : s->attrs) attrs += (attrs.empty() ? "" : " ") + a.name;
    std::printf("%-26s opset %-6s %s\n",
                (s->domain.empty() ? s->name : s->domain + "." + s->name).c_str(), range.c_str(),
                attrs.c_str());
  }
  return 0;
}

}  // namespace

Command add_info_command(CLI::App& ferrite) {
  auto a = std::make_shared<InfoArgs>();
  CLI::App* app = add_command(
      ferrite, "info",
      "Inputs/outputs with symbolic shapes, opset, op histogram and unsupported\n"
      "ops; --ir prints the inferred graph IR.",
      "Prints the model's inputs and outputs with their (symbolic) shapes, the opsets it imports,\n"
      "a histogram of its ops, and every op ferrite does not support, before running anything.");
  app->add_option("MODEL", a->model, "the ONNX model file")->type_name("");
  app->add_flag("--ir", a->ir, "also print the graph IR after import and shape inference");
  add_value(*app, "--after", a->after, "PASS",
            "run the default pass pipeline up to and including PASS, then print the IR\n"
            "(`--after all` runs the whole pipeline)");
  add_value(*app, "--passes", a->passes, "LIST",
            "use this comma-separated pipeline instead of the default");
  app->add_flag("--list-passes", a->list_passes,
                "print the available passes and the default pipeline (the device's with --device)");
  add_value(*app, "--device", a->device, "NAME",
            "with --list-passes and --after: the pipeline this device runs (its pass plan)");
  return {app, [app, a] {
            if (!a->list_passes && (a->model.empty() || !app->remaining().empty())) {
              std::fputs(app->help("ferrite").c_str(), stderr);
              std::fprintf(stderr, "error: info takes exactly one MODEL\n");
              return 1;
            }
            return info_command(*a);
          }};
}

Command add_ops_command(CLI::App& ferrite) {
  auto names = std::make_shared<bool>(false);
  CLI::App* app =
      add_command(ferrite, "ops",
                  "List the op table: every supported op with its opset range and\nattributes.");
  app->add_flag("--names", *names, "print op names only (internal domains qualified)");
  return {app, [names] { return ops_command(*names); }};
}

}  // namespace ferrite::cli
