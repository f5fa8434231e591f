#include "runtime/guards.h"

#include <unordered_map>

#include "support/status.h"

namespace ferrite {

GuardSet GuardSet::for_inputs(const Graph& g) {
  GuardSet s;
  for (size_t i = 0; i < g.inputs().size(); ++i) {
    const Value* v = g.inputs()[i];
    int in = static_cast<int>(i);
    s.names_.push_back(v->name);
    s.declared_.push_back(v->type.shape.to_string());
    s.guards_.push_back({Guard::Kind::kDType, in, -1, static_cast<int64_t>(v->type.dtype), -1});
    // A sequence's or optional's shape is its elements' (the Session checks the kind itself).
    if (!v->type.is_tensor()) continue;
    const Shape& shape = v->type.shape;
    if (!shape.rank_known()) continue;
    s.guards_.push_back({Guard::Kind::kRank, in, -1, static_cast<int64_t>(shape.rank()), -1});
    for (size_t d = 0; d < shape.rank(); ++d) {
      const Dim& dim = shape[d];
      if (!dim.is_known()) continue;
      if (auto c = dim.value()) {
        s.guards_.push_back({Guard::Kind::kDim, in, static_cast<int>(d), *c, -1});
      } else if (dim.expr().is_symbol()) {
        std::vector<std::string> names;
        dim.expr().collect_symbols(names);
        s.add_symbol(in, static_cast<int>(d), names[0]);
      }
    }
  }
  return s;
}

int GuardSet::symbol_slot(const std::string& name) {
  for (size_t k = 0; k < symbols_.size(); ++k)
    if (symbols_[k] == name) return static_cast<int>(k);
  symbols_.push_back(name);
  return static_cast<int>(symbols_.size() - 1);
}

void GuardSet::add_specialised(int input, int dim, int64_t size) {
  guards_.push_back({Guard::Kind::kSpecialised, input, dim, size, -1});
}

void GuardSet::add_symbol(int input, int dim, const std::string& symbol) {
  guards_.push_back({Guard::Kind::kSymbol, input, dim, 0, symbol_slot(symbol)});
}

size_t GuardSet::add_assumptions(const std::vector<ShapeAssumption>& assumptions) {
  size_t added = 0;
  for (const auto& a : assumptions) {
    std::vector<std::string> names;
    a.expr.collect_symbols(names);
    bool bound = !names.empty();
    for (const auto& n : names) {
      bool found = false;
      for (const auto& s : symbols_) found = found || s == n;
      bound = bound && found;
    }
    // A symbol no input binds (none exist today) cannot be checked before running.
    if (!bound) continue;
    guards_.push_back(
        {Guard::Kind::kAssumption, -1, -1, a.value, static_cast<int>(assumptions_.size())});
    assumptions_.push_back(a);
    ++added;
  }
  return added;
}

std::optional<GuardFailure> GuardSet::check(const std::vector<Tensor>& inputs) const {
  // Symbol values by slot; the guard that bound each, for messages.
  constexpr int64_t kUnbound = -1;
  std::vector<int64_t> sym(symbols_.size(), kUnbound);
  std::vector<int> bound_by(symbols_.size(), -1);
  std::optional<GuardFailure> recompile, assumption;
  auto shape_of = [&](int in) { return dims_to_string(inputs[in].dims()); };
  for (size_t k = 0; k < guards_.size(); ++k) {
    const Guard& g = guards_[k];
    const int gi = static_cast<int>(k);
    switch (g.kind) {
      case Guard::Kind::kDType: {
        DType want = static_cast<DType>(g.value);
        if (inputs[g.input].dtype() != want)
          return GuardFailure{GuardFailure::Action::kError, gi,
                              str_cat("input '", names_[g.input], "' has dtype ",
                                      dtype_name(inputs[g.input].dtype()),
                                      ", but the model expects ", dtype_name(want))};
        break;
      }
      case Guard::Kind::kRank:
        if (static_cast<int64_t>(inputs[g.input].rank()) != g.value)
          return GuardFailure{
              GuardFailure::Action::kError, gi,
              str_cat("input '", names_[g.input], "' has rank ", inputs[g.input].rank(), " (",
                      shape_of(g.input), "), but the model expects ", g.value, " (",
                      declared_[g.input], ")")};
        break;
      case Guard::Kind::kDim:
        if (inputs[g.input].dim(g.dim) != g.value)
          return GuardFailure{
              GuardFailure::Action::kError, gi,
              str_cat("input '", names_[g.input], "' has shape ", shape_of(g.input),
                      ", but the model expects ", declared_[g.input], " (dim ", g.dim, ")")};
        break;
      case Guard::Kind::kSpecialised:
        if (inputs[g.input].dim(g.dim) != g.value && !recompile)
          recompile = GuardFailure{GuardFailure::Action::kRecompile, gi,
                                   str_cat(describe(g), " (got ", inputs[g.input].dim(g.dim), ")")};
        break;
      case Guard::Kind::kSymbol: {
        int64_t got = inputs[g.input].dim(g.dim);
        if (sym[g.slot] == kUnbound) {
          sym[g.slot] = got;
          bound_by[g.slot] = gi;
        } else if (sym[g.slot] != got) {
          return GuardFailure{
              GuardFailure::Action::kError, gi,
              str_cat("input '", names_[g.input], "' dim ", g.dim, " is ", got, ", but symbol '",
                      symbols_[g.slot], "' is already ", sym[g.slot], " from another input")};
        }
        break;
      }
      case Guard::Kind::kAssumption: {
        if (assumption) break;
        const ShapeAssumption& a = assumptions_[g.slot];
        SymBindings bind;
        for (size_t s = 0; s < symbols_.size(); ++s)
          if (sym[s] != kUnbound) bind[symbols_[s]] = sym[s];
        auto v = a.expr.evaluate(bind);
        if (!v || *v == 1 || *v == g.value) break;
        // Name the input dim that bound the first symbol of the expression.
        std::vector<std::string> names;
        a.expr.collect_symbols(names);
        std::string who;
        for (size_t s = 0; s < symbols_.size(); ++s) {
          if (symbols_[s] != names[0] || bound_by[s] < 0) continue;
          const Guard& b = guards_[bound_by[s]];
          who = str_cat("input '", names_[b.input], "' dim ", b.dim, " is ", sym[s]);
        }
        std::string value =
            a.expr.is_symbol() ? "" : str_cat(" (", a.expr.to_string(), " = ", *v, ")");
        assumption = GuardFailure{
            GuardFailure::Action::kError, gi,
            str_cat(who, value, ", but the compiled model assumes ", a.expr.to_string(),
                    " is 1 or ", g.value, a.where.empty() ? "" : " (broadcast in " + a.where + ")",
                    "; such inputs cannot broadcast")};
        break;
      }
    }
  }
  if (recompile) return recompile;
  return assumption;
}

std::string GuardSet::describe(const Guard& g) const {
  std::string in = g.input >= 0 ? str_cat("input '", names_[g.input], "'") : "";
  switch (g.kind) {
    case Guard::Kind::kDType:
      return str_cat(in, " dtype == ", dtype_name(static_cast<DType>(g.value)));
    case Guard::Kind::kRank:
      return str_cat(in, " rank == ", g.value);
    case Guard::Kind::kDim:
    case Guard::Kind::kSpecialised:
      return str_cat(in, " dim ", g.dim, " == ", g.value);
    case Guard::Kind::kSymbol:
      return str_cat(in, " dim ", g.dim, " == ", symbols_[g.slot]);
    case Guard::Kind::kAssumption: {
      const ShapeAssumption& a = assumptions_[g.slot];
      return str_cat(a.expr.to_string(), " in {1, ", g.value, "}",
                     a.where.empty() ? "" : " (broadcast in " + a.where + ")");
    }
  }
  return "?";
}

std::string GuardSet::to_string() const {
  std::string out;
  for (const Guard& g : guards_) {
    const char* kind = "";
    switch (g.kind) {
      case Guard::Kind::kDType:
        kind = "declared";
        break;
      case Guard::Kind::kRank:
        kind = "declared";
        break;
      case Guard::Kind::kDim:
        kind = "declared";
        break;
      case Guard::Kind::kSpecialised:
        kind = "specialised";
        break;
      case Guard::Kind::kSymbol:
        kind = "symbol";
        break;
      case Guard::Kind::kAssumption:
        kind = "assumed";
        break;
    }
    out += str_cat(kind, ": ", describe(g), "\n");
  }
  return out;
}

std::unique_ptr<Graph> copy_graph(const Graph& g) {
  return g.clone();
}

}  // namespace ferrite
