#include "runtime/dump.h"

#include <fstream>
#include <map>

#include "support/result_dir.h"
#include "support/status.h"

namespace ferrite {

namespace fs = std::filesystem;

namespace {

const char* buffer_kind(Buffer::Kind k) {
  switch (k) {
    case Buffer::Kind::kInput:
      return "input";
    case Buffer::Kind::kConstant:
      return "constant";
    case Buffer::Kind::kIntermediate:
      return "intermediate";
    case Buffer::Kind::kOutput:
      return "output";
  }
  return "?";
}

std::string buffer_text(const LoweredGraph& lg, int b) {
  if (b < 0 || static_cast<size_t>(b) >= lg.buffers.size()) return "(none)";
  const Buffer& buf = lg.buffers[b];
  return str_cat("b", b, " '", buf.name, "' ", dtype_name(buf.dtype), buf.shape.to_string(), " (",
                 buffer_kind(buf.kind), ")");
}

std::string dims_text(const std::vector<Dim>& dims) {
  return Shape(dims).to_string();
}

// "name (Op)" for each node name; nodes the graph does not know (none expected) say so.
std::string nodes_text(const std::map<std::string, const Node*>& by_name,
                       const std::vector<std::string>& names) {
  std::string s;
  for (const auto& n : names) {
    auto it = by_name.find(n);
    s += str_cat(s.empty() ? "" : ", ", "'", n, "' (",
                 it == by_name.end() ? "?" : it->second->op_type, ")");
  }
  return s.empty() ? "(none: a copy)" : s;
}

std::map<std::string, const Node*> nodes_by_name(const Graph& g) {
  std::map<std::string, const Node*> m;
  for (const auto& n : g.nodes()) m.emplace(n->name, n.get());
  return m;
}

Status write_text(const fs::path& p, const std::string& text) {
  return write_file_atomic(p, text);
}

}  // namespace

std::string dump_step_map(const Graph& g, const LoweredGraph& lg) {
  auto by_name = nodes_by_name(g);
  std::string s = "// Steps in run order and the ONNX nodes each one runs:\n";
  for (size_t i = 0; i < lg.steps.size(); ++i) {
    const Step& st = lg.steps[i];
    if (st.kind == Step::Kind::kKernel)
      s += str_cat("//   step ", i, ": kernel ", st.kernel.name, " <- ",
                   nodes_text(by_name, st.kernel.source_nodes), "\n");
    else
      s += str_cat("//   step ", i, ": library <- '", st.node->name, "' (", st.node->op_type,
                   ") (op kernel, not in this file)\n");
  }
  return s;
}

std::string dump_fusion_plan(const Graph& g, const LoweredGraph& lg) {
  auto by_name = nodes_by_name(g);
  std::string s = str_cat(g.nodes().size(), " graph nodes -> ", lg.kernels, " generated kernels (",
                          lg.row_kernels, " with reductions, ", lg.fused_nodes, " nodes fused) + ",
                          lg.library_steps, " library steps\n");
  std::string syms;
  for (const auto& n : lg.symbols) syms += (syms.empty() ? "" : ", ") + n;
  s += str_cat("shape symbols: ", syms.empty() ? "(none)" : syms, "\n");
  for (size_t i = 0; i < lg.steps.size(); ++i) {
    const Step& st = lg.steps[i];
    s += "\n";
    if (st.kind == Step::Kind::kKernel) {
      const Kernel& k = st.kernel;
      s += str_cat("step ", i, ": kernel ", k.name, " (",
                   k.is_row() ? str_cat("row kernel, ", k.reduce_rank, " reduced dim(s)",
                                        k.per_row ? ", one value per row" : "")
                              : std::string("pointwise"),
                   ")\n");
      s += str_cat("  nodes: ", nodes_text(by_name, k.source_nodes), "\n");
      s += str_cat("  iteration: ", dims_text(k.shape), " (", k.outer_rank(),
                   " outer dim(s) split across threads)\n");
      for (size_t j = 0; j < k.input_buffers.size(); ++j)
        s += str_cat(
            "  in ", j, ": ", buffer_text(lg, k.input_buffers[j]),
            static_cast<int>(j) == k.in_place_slot ? "  [may be overwritten in place]" : "", "\n");
      s += str_cat("  out: ", buffer_text(lg, k.output_buffer), "\n");
      for (size_t x = 0; x < k.extra_outputs.size(); ++x)
        s += str_cat("  out ", x + 1, " (horizontally fused): ",
                     buffer_text(lg, k.extra_outputs[x].buffer), "\n");
    } else {
      s += str_cat("step ", i, ": library '", st.node->name, "' (", st.node->op_type, ")\n");
      for (size_t j = 0; j < st.inputs.size(); ++j) {
        std::string view;
        if (j < st.input_dims.size() && st.input_dims[j])
          view = "  viewed as " + dims_text(*st.input_dims[j]);
        s += str_cat("  in ", j, ": ", buffer_text(lg, st.inputs[j]), view, "\n");
      }
      for (size_t j = 0; j < st.outputs.size(); ++j)
        s += str_cat("  out ", j, ": ", buffer_text(lg, st.outputs[j]), "\n");
    }
  }
  return s;
}

std::string dump_memory_requests(const LoweredGraph& lg, const LoweredMemory& memory) {
  const auto& reqs = memory.requests();
  std::string s = str_cat(reqs.size(), " intermediate buffers planned into one arena",
                          " (live range = steps [first write, last read])\n");
  int intermediates = 0;
  for (const Buffer& b : lg.buffers) intermediates += b.kind == Buffer::Kind::kIntermediate;
  s += str_cat(intermediates - static_cast<int>(reqs.size()),
               " intermediates on the heap (unknown size, or written by several steps)\n\n");
  for (size_t r = 0; r < reqs.size(); ++r) {
    const SymbolicRequest& q = reqs[r];
    s += str_cat("r", r, ": ", buffer_text(lg, memory.buffer_of_request(r)), "\n    bytes ",
                 q.bytes.to_string(), ", live [", q.first, ", ", q.last, "]");
    if (q.in_place_of >= 0)
      s += str_cat(", may take over r", q.in_place_of, " (",
                   buffer_text(lg, memory.buffer_of_request(static_cast<size_t>(q.in_place_of))),
                   ") in place");
    s += "\n";
  }
  return s;
}

Expected<std::unique_ptr<CompileDump>> CompileDump::write(const fs::path& dir, const Graph& g,
                                                          const LoweredGraph& lg,
                                                          const std::string& source,
                                                          const LoweredMemory& memory) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return err("cannot create dump directory '", dir.string(), "': ", ec.message());
  FERRITE_RETURN_IF_ERROR(write_text(dir / "kernels.cpp", dump_step_map(g, lg) + "\n" + source));
  FERRITE_RETURN_IF_ERROR(write_text(dir / "fusion_plan.txt", dump_fusion_plan(g, lg)));
  FERRITE_RETURN_IF_ERROR(write_text(
      dir / "memory_plan.txt",
      dump_memory_requests(lg, memory) +
          "\nOffsets depend on the sizes: each binding the model runs with is appended below.\n"));
  FERRITE_RETURN_IF_ERROR(write_text(dir / "graph.txt", print_graph(g)));
  return std::unique_ptr<CompileDump>(new CompileDump(dir, lg));
}

void CompileDump::on_run(const LoweredMemory& memory, const std::vector<int64_t>& values) {
  if (seen_.size() >= kMaxBindings || !seen_.insert(values).second) return;
  std::string binding;
  for (size_t i = 0; i < values.size() && i < lg_.symbols.size(); ++i)
    binding += str_cat(i ? ", " : "", lg_.symbols[i], "=", values[i]);
  std::string s = str_cat("\nbinding ", binding.empty() ? "(static)" : binding, ":\n");
  const MemoryPlan* plan = memory.current_plan();
  if (!plan) {
    s += "  no plan: every intermediate on the heap (FERRITE_MEMORY_PLAN=off, or sizes that do "
         "not evaluate)\n";
  } else {
    for (size_t r = 0; r < plan->offsets.size(); ++r) {
      s += str_cat("  r", r, " b", memory.buffer_of_request(r), ": offset ", plan->offsets[r], ", ",
                   plan->bytes[r], " bytes");
      if (plan->in_place_of[r] >= 0) s += str_cat(", in place over r", plan->in_place_of[r]);
      s += "\n";
    }
    s += str_cat("  planned peak ", plan->arena_bytes, " bytes; sum of intermediates ",
                 plan->total_bytes, " bytes (reuse ", plan->reuse_ratio(),
                 "x); live peak (lower bound) ", plan->live_peak_bytes, " bytes; ", plan->in_place,
                 " in place\n");
  }
  std::ofstream out(dir_ / "memory_plan.txt", std::ios::binary | std::ios::app);
  out << s;
}

}  // namespace ferrite
