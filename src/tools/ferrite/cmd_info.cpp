// `ferrite info`: what a model contains and whether ferrite supports all of it.
#include <cstdio>
#include <map>

#include "tools/ferrite/cli.h"

namespace ferrite::cli {

namespace {
const char* kInfoHelp = R"(usage: ferrite info MODEL [--ir]

  Prints the model's inputs and outputs with their (symbolic) shapes, the opsets it imports,
  a histogram of its ops, and every op ferrite does not support, before running anything.
  --ir    also print the graph IR after import and shape inference
)";
}  // namespace

int info_command(int argc, char** argv) {
  auto args = Args::parse(argc, argv, {"help", "ir"}, {});
  if (!args) {
    std::fprintf(stderr, "error: %s\n", args.status().message().c_str());
    return 1;
  }
  if (args->flag("help")) {
    std::fputs(kInfoHelp, stdout);
    return 0;
  }
  if (args->positional().size() != 1) {
    std::fputs(kInfoHelp, stderr);
    std::fprintf(stderr, "error: info takes exactly one MODEL\n");
    return 1;
  }
  ImportOptions opts;
  opts.allow_unknown_ops = true;
  ImportReport report;
  auto graph = import_onnx_file(args->positional()[0], opts, &report);
  if (!graph) {
    std::fprintf(stderr, "error: %s\n", graph.status().message().c_str());
    return 1;
  }
  const Graph& g = **graph;
  std::printf("model: %s\n", args->positional()[0].c_str());
  std::printf("ir_version: %lld, producer: %s\n", static_cast<long long>(report.ir_version),
              report.producer.c_str());
  for (const auto& [domain, v] : g.opsets())
    std::printf("opset: %s %d\n", domain.empty() ? "ai.onnx" : domain.c_str(), v);
  std::printf("inputs:\n");
  for (const Value* v : g.inputs()) std::printf("  %s: %s\n", v->name.c_str(), v->type.to_string().c_str());
  std::printf("outputs:\n");
  for (const Value* v : g.outputs()) std::printf("  %s: %s\n", v->name.c_str(), v->type.to_string().c_str());
  int64_t params = 0;
  for (const Value* v : g.initializers()) params += v->constant->numel();
  std::printf("nodes: %zu, initializers: %zu (%lld elements)\n", g.nodes().size(),
              g.initializers().size(), static_cast<long long>(params));
  std::map<std::string, int> hist;
  for (const auto& n : g.nodes()) hist[n->op_type]++;
  std::printf("ops:\n");
  for (const auto& [op, count] : hist) std::printf("  %-24s %d\n", op.c_str(), count);
  if (!report.unsupported_ops.empty()) {
    std::printf("unsupported (%zu):\n", report.unsupported_ops.size());
    for (const auto& u : report.unsupported_ops) std::printf("  %s\n", u.c_str());
    return 1;
  }
  std::printf("all ops supported\n");
  if (args->flag("ir")) std::fputs(print_graph(g).c_str(), stdout);
  return 0;
}

}  // namespace ferrite::cli
