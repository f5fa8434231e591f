#include "lower/horizontal_fusion.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <unordered_map>

namespace ferrite {

namespace {

bool log_fusion() {
  const char* v = std::getenv("FERRITE_LOG");
  return v && (std::string(v).find("fusion") != std::string::npos || std::string(v) == "all");
}

std::string shape_key(const Kernel& k) {
  std::string s;
  for (const Dim& d : k.shape) s += d.to_string() + ",";
  return s;
}

// Copies b's expressions into a's body (loads renumbered to a's input slots, new slots added
// for b's other inputs; identical expressions are shared by KernelBody) and adds b's output as
// an extra output of a.
void merge_into(Kernel& a, const Kernel& b) {
  std::vector<int> slot(b.input_buffers.size());
  for (size_t i = 0; i < b.input_buffers.size(); ++i) {
    int found = -1;
    for (size_t j = 0; j < a.input_buffers.size(); ++j)
      if (a.input_buffers[j] == b.input_buffers[i]) found = static_cast<int>(j);
    if (found < 0) {
      found = static_cast<int>(a.input_buffers.size());
      a.input_buffers.push_back(b.input_buffers[i]);
    }
    slot[i] = found;
  }
  std::vector<int> map(b.body.size(), -1);
  for (size_t i = 0; i < b.body.size(); ++i) {
    const ScalarExpr& e = b.body.at(static_cast<int>(i));
    auto arg = [&](size_t n) { return map[e.args[n]]; };
    int r = -1;
    switch (e.kind) {
      case ScalarKind::kLoad: r = a.body.load(slot[e.input], e.dtype, e.address); break;
      case ScalarKind::kConst: r = a.body.constant(e.dtype, e.value); break;
      case ScalarKind::kSymbol: r = a.body.symbol(e.dtype, e.address); break;
      case ScalarKind::kUnary: r = a.body.unary(e.fn, arg(0), e.dtype, e.params); break;
      case ScalarKind::kBinary: r = a.body.binary(e.fn, arg(0), arg(1), e.dtype); break;
      case ScalarKind::kSelect: r = a.body.select(arg(0), arg(1), arg(2)); break;
      case ScalarKind::kCast: r = a.body.cast(arg(0), e.dtype); break;
      case ScalarKind::kReduce: r = a.body.reduce(e.fn, arg(0)); break;
    }
    map[i] = r;
  }
  a.extra_outputs.push_back({map[b.root], b.output_buffer, b.out_dtype});
  for (const auto& x : b.extra_outputs) a.extra_outputs.push_back({map[x.root], x.buffer, x.dtype});
  for (const auto& n : b.source_nodes) a.source_nodes.push_back(n);
}

}  // namespace

int fuse_horizontal(LoweredGraph& lg, size_t max_exprs) {
  const size_t n = lg.steps.size();
  // The step that writes each buffer (-1: graph input, constant).
  std::vector<int> def(lg.buffers.size(), -1);
  for (size_t i = 0; i < n; ++i) {
    const Step& s = lg.steps[i];
    if (s.kind == Step::Kind::kKernel) {
      def[s.kernel.output_buffer] = static_cast<int>(i);
    } else {
      for (int b : s.outputs)
        if (b >= 0) def[b] = static_cast<int>(i);
    }
  }
  std::vector<bool> erased(n, false);
  int merged = 0;
  const bool log = log_fusion();
  for (size_t j = 0; j < n; ++j) {
    Step& sb = lg.steps[j];
    if (sb.kind != Step::Kind::kKernel || sb.kernel.is_row()) continue;
    const Kernel& b = sb.kernel;
    // The earliest step at which all of b's inputs exist.
    int ready = -1;
    for (int in : b.input_buffers) ready = std::max(ready, def[in]);
    // The nearest earlier pointwise kernel over the same space sharing an input (a window keeps
    // the search linear in practice and the lifetimes short).
    const std::string key = shape_key(b);
    for (size_t back = 1; back <= 16 && back <= j; ++back) {
      size_t i = j - back;
      // At or before the step that writes one of b's inputs, b cannot run yet.
      if (static_cast<int>(i) <= ready) break;
      if (erased[i]) continue;
      Step& sa = lg.steps[i];
      if (sa.kind != Step::Kind::kKernel || sa.kernel.is_row()) continue;
      Kernel& a = sa.kernel;
      if (shape_key(a) != key || a.body.size() + b.body.size() > 2 * max_exprs) continue;
      // Score: the bytes of the shared inputs, read once instead of twice (symbolic sizes are
      // scored per unit of their symbols).
      std::string saved;
      for (int in : b.input_buffers)
        for (int ain : a.input_buffers)
          if (in == ain) {
            const Buffer& buf = lg.buffers[in];
            Dim numel = buf.shape.rank_known() ? buf.shape.numel() : Dim::unknown();
            saved += (saved.empty() ? "" : " + ") + numel.to_string() + "*" +
                     std::to_string(dtype_size(buf.dtype));
          }
      if (saved.empty()) continue;
      if (log)
        std::fprintf(stderr, "[fusion] horizontal: %s + %s over [%s], saves %s bytes of reads\n",
                     a.name.c_str(), b.name.c_str(), key.c_str(), saved.c_str());
      merge_into(a, b);
      def[b.output_buffer] = static_cast<int>(i);
      for (const auto& x : b.extra_outputs) def[x.buffer] = static_cast<int>(i);
      erased[j] = true;
      ++merged;
      break;
    }
  }
  if (merged == 0) return 0;
  std::vector<Step> kept;
  for (size_t i = 0; i < n; ++i)
    if (!erased[i]) kept.push_back(std::move(lg.steps[i]));
  lg.steps = std::move(kept);
  lg.kernels -= merged;
  return merged;
}

}  // namespace ferrite
