#include "lower/multi_tensor.h"

#include <algorithm>
#include <map>

namespace ferrite {

namespace {

// A pointwise kernel with static dims and elements to compute can be a segment.
bool segment_candidate(const Kernel& k) {
  if (k.is_row() || !k.segments.empty()) return false;
  int64_t n = 1;
  for (const Dim& d : k.shape) {
    if (!d.is_static()) return false;
    n *= *d.value();
  }
  return n > 0;
}

int64_t numel(const Kernel& k) {
  int64_t n = 1;
  for (const Dim& d : k.shape) n *= *d.value();
  return n;
}

Kernel combine(std::vector<Kernel> parts) {
  Kernel m;
  m.name = parts[0].name + "_mt";
  int64_t rows = 0, elems = 0;
  for (size_t i = 0; i < parts.size(); ++i) {
    const Kernel& p = parts[i];
    rows += segment_rows(p);
    elems += numel(p);
    m.input_buffers.insert(m.input_buffers.end(), p.input_buffers.begin(), p.input_buffers.end());
    if (i == 0) {
      m.output_buffer = p.output_buffer;
      m.out_dtype = p.out_dtype;
    } else {
      m.extra_outputs.push_back({-1, p.output_buffer, p.out_dtype});
    }
    for (const auto& x : p.extra_outputs) m.extra_outputs.push_back({-1, x.buffer, x.dtype});
    m.source_nodes.insert(m.source_nodes.end(), p.source_nodes.begin(), p.source_nodes.end());
  }
  m.shape = {Dim(rows), Dim(std::max<int64_t>(1, elems / rows))};
  m.segments = std::move(parts);
  return m;
}

}  // namespace

int64_t segment_rows(const Kernel& k) {
  int64_t r = 1;
  for (size_t d = 0; d < k.outer_rank(); ++d) r *= *k.shape[d].value();
  return r;
}

namespace {

// A level's kernels (in step order) as merged groups: consecutive runs whose parameters (inputs,
// outputs and the symbols every kernel takes) stay within max_params (0: one group).
std::vector<std::vector<size_t>> chunk_level(const LoweredGraph& lg, const std::vector<size_t>& g,
                                             size_t max_params) {
  std::vector<std::vector<size_t>> out(1);
  size_t used = 0;
  for (size_t i : g) {
    const Kernel& k = lg.steps[i].kernel;
    const size_t own = k.input_buffers.size() + 1 + k.extra_outputs.size();
    if (max_params > 0 && !out.back().empty() && used + own + lg.symbols.size() > max_params) {
      out.emplace_back();
      used = 0;
    }
    out.back().push_back(i);
    used += own;
  }
  return out;
}

}  // namespace

int fuse_multi_tensor(LoweredGraph& lg, size_t max_params) {
  const size_t n = lg.steps.size();
  std::vector<int> def(lg.buffers.size(), -1), level(n, 0);
  for (size_t i = 0; i < n; ++i) {
    const Step& s = lg.steps[i];
    const bool kernel = s.kind == Step::Kind::kKernel;
    for (int b : kernel ? s.kernel.input_buffers : s.inputs)
      if (b >= 0 && def[b] >= 0) level[i] = std::max(level[i], level[def[b]] + 1);
    auto wrote = [&](int b) {
      if (b >= 0) def[b] = static_cast<int>(i);
    };
    if (kernel) {
      wrote(s.kernel.output_buffer);
      for (const auto& x : s.kernel.extra_outputs) wrote(x.buffer);
    } else {
      for (int b : s.outputs) wrote(b);
    }
  }
  std::map<int, std::vector<size_t>> levels;  // level -> its candidate kernels, in step order
  for (size_t i = 0; i < n; ++i)
    if (lg.steps[i].kind == Step::Kind::kKernel && segment_candidate(lg.steps[i].kernel))
      levels[level[i]].push_back(i);
  std::vector<std::vector<size_t>> groups;  // the merged kernels to make (2 or more members)
  std::vector<int> group_of(n, -1);
  for (const auto& [l, g] : levels)
    for (std::vector<size_t>& c : chunk_level(lg, g, max_params)) {
      if (c.size() < 2) continue;
      for (size_t i : c) group_of[i] = static_cast<int>(groups.size());
      groups.push_back(std::move(c));
    }
  int merged = 0;
  for (const auto& g : groups) merged += static_cast<int>(g.size()) - 1;
  if (merged == 0) return 0;
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return level[a] < level[b]; });
  std::vector<Step> steps;
  for (size_t i : order) {
    if (group_of[i] < 0) {
      steps.push_back(std::move(lg.steps[i]));
      continue;
    }
    const auto& g = groups[group_of[i]];
    if (i != g.front()) continue;  // the group's step is made at its first member
    std::vector<Kernel> parts;
    for (size_t j : g) parts.push_back(std::move(lg.steps[j].kernel));
    Step s;
    s.kind = Step::Kind::kKernel;
    s.kernel = combine(std::move(parts));
    steps.push_back(std::move(s));
  }
  lg.steps = std::move(steps);
  lg.kernels -= merged;
  return merged;
}

}  // namespace ferrite
