#include "codegen/row_analysis.h"

#include <optional>
#include <string>

#include "ops/scalar_functions.h"

namespace ferrite {

std::vector<bool> depends_on_dims(const Kernel& k, size_t lo, size_t hi) {
  std::vector<bool> dep(k.body.size(), false);
  for (size_t i = 0; i < k.body.size(); ++i) {
    const ScalarExpr& e = k.body.at(static_cast<int>(i));
    if (e.kind == ScalarKind::kLoad || e.kind == ScalarKind::kSymbol) {
      std::vector<std::string> names;
      e.address.collect_symbols(names);
      for (const auto& name : names) {
        size_t d;
        if (is_loop_var(name, &d) && d >= lo && d < hi) dep[i] = true;
      }
    } else if (e.kind != ScalarKind::kReduce) {
      for (int a : e.args) dep[i] = dep[i] || dep[a];
    }
  }
  return dep;
}

bool costly(const ScalarExpr& e) {
  if (e.kind != ScalarKind::kUnary && e.kind != ScalarKind::kBinary) return false;
  const ScalarFunction* f = find_scalar_function(e.fn);
  return f && f->cost == FnCost::kCostly;
}

RowPhases::RowPhases(const Kernel& k) : k_(k) {
  const size_t n = k.body.size();
  varies = depends_on_dims(k, k.outer_rank(), k.shape.size());
  // Live phases: those the root uses, directly or through later phases.
  live = needed(k.root, false);
  for (int64_t i = static_cast<int64_t>(n) - 1; i >= 0; --i) {
    if (!live[i] || k.body.at(static_cast<int>(i)).kind != ScalarKind::kReduce) continue;
    std::vector<bool> more = needed(static_cast<int>(i), true);
    for (size_t j = 0; j < n; ++j) live[j] = live[j] || more[j];
  }
  for (size_t i = 0; i < n; ++i)
    if (live[i] && k.body.at(static_cast<int>(i)).kind == ScalarKind::kReduce)
      last_phase = static_cast<int>(i);
  if (k.per_row || last_phase < 0) return;
  // Costly: a costly function, or computed from one (recomputing it recomputes that).
  std::vector<bool> in_last = needed(last_phase, true), in_store = needed(k.root, false);
  std::vector<bool> cost(n, false);
  for (size_t i = 0; i < n; ++i) {
    const ScalarExpr& e = k.body.at(static_cast<int>(i));
    if (!varies[i] || e.kind == ScalarKind::kReduce) continue;
    cost[i] = costly(e);
    for (int a : e.args) cost[i] = cost[i] || cost[a];
    if (cost[i] && in_last[i] && in_store[i] && e.dtype == k.out_dtype &&
        static_cast<int>(i) != last_phase)
      stash = static_cast<int>(i);
  }
}

std::vector<bool> RowPhases::needed(int root, bool through, int leaf) const {
  std::vector<bool> need(k_.body.size(), false);
  need[root] = true;
  for (int64_t i = root; i >= 0; --i) {
    if (!need[i] || i == leaf) continue;
    const ScalarExpr& e = k_.body.at(static_cast<int>(i));
    if (e.kind == ScalarKind::kReduce && !(through && i == root)) continue;
    for (int a : e.args) need[a] = true;
  }
  return need;
}

namespace {

// Element stride of a load's address along loop variable `d`: the change from x_d = 0 to 1 with
// the other loop variables at 0 and every other symbol at 2; nullopt when it cannot be evaluated
// or is not the same from x_d = 1 to 2 (a non-linear address). Only steers a loop-order choice.
std::optional<int64_t> load_stride(const SymExpr& address, size_t d) {
  std::vector<std::string> names;
  address.collect_symbols(names);
  SymBindings at;
  for (const std::string& n : names) at[n] = is_loop_var(n) ? 0 : 2;
  std::optional<int64_t> v[3];
  for (int64_t x = 0; x < 3; ++x) {
    at[loop_var(d)] = x;
    v[x] = address.evaluate(at);
    if (!v[x]) return std::nullopt;
  }
  if (*v[1] - *v[0] != *v[2] - *v[1]) return std::nullopt;
  return *v[1] - *v[0];
}

}  // namespace

int column_reduce(const Kernel& k, const RowPhases& ph) {
  const size_t rank = k.shape.size(), outer = k.outer_rank();
  if (!k.per_row || outer == 0 || ph.stash >= 0 || !k.segments.empty()) return -1;
  // Too few rows side by side to fill a vector: the row loop's own reduction is as good.
  if (k.shape[outer - 1].value().value_or(16) < 4) return -1;
  int reduce = -1;
  for (size_t i = 0; i < k.body.size(); ++i) {
    const ScalarExpr& e = k.body.at(static_cast<int>(i));
    if (!ph.live[i] || e.kind != ScalarKind::kReduce) continue;
    if (reduce >= 0 || e.fn != "sum") return -1;
    reduce = static_cast<int>(i);
  }
  if (reduce < 0) return -1;
  bool any = false;
  for (size_t i = 0; i < k.body.size(); ++i) {
    const ScalarExpr& e = k.body.at(static_cast<int>(i));
    if (!ph.live[i] || !ph.varies[i] || e.kind != ScalarKind::kLoad) continue;
    const auto across = load_stride(e.address, outer - 1);
    const auto along = load_stride(e.address, rank - 1);
    if (!across || !along || *across != 1 || *along == 1) return -1;
    any = true;
  }
  return any ? reduce : -1;
}

}  // namespace ferrite
