// Spells the scalar expressions of kernel IR (kernel_ir.h) as C-family source. Shared by every
// codegen dialect: the dialect's ScalarSpelling decides types and math-function spelling, the
// dialect's prelude defines the fe_* helpers the expressions call (scalar_helpers_source()).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "backend_api/dialect.h"
#include "lower/kernel_ir.h"

namespace ferrite {

// Maps SymExpr symbols (loop variables, shape symbols) to C identifiers.
using Ident = std::function<std::string(const std::string&)>;

struct LoweredGraph;
// The identifiers every dialect uses: loop variable i is x<i>, shape symbol s (in
// LoweredGraph::symbols order) is s<s>.
Ident symbol_ident(const LoweredGraph& lg);

class ScalarEmitter {
 public:
  explicit ScalarEmitter(ScalarSpelling spelling = {});

  // The C type of `t`; nullopt when the dialect cannot generate code for it.
  std::optional<std::string> type(DType t) const;
  const std::string& restrict_keyword() const { return s_.restrict_keyword; }
  std::string literal(DType t, double v) const;
  std::string cast(DType from, DType to, const std::string& value) const;
  // `const T tI = <expr>;\n` for expression i of k (names in `t`, loads from `in_names`).
  std::string def(const Kernel& k, size_t i, const std::vector<std::string>& t,
                  const std::vector<std::string>& in_names, const Ident& ident) const;
  // The right-hand side of expression e (kReduce and kCast are the caller's business).
  std::string expr(const ScalarExpr& e, const std::vector<std::string>& t,
                   const std::vector<std::string>& in_names, const Ident& ident) const;
  std::string math(const std::string& fn) const { return s_.math_prefix + fn; }

 private:
  ScalarSpelling s_;
};

// fe_floordiv, fe_mod, fe_f2i, fe_sigmoid, ... written against macros the dialect's prelude
// defines first: FE_FN (function qualifiers), FE_MATH(fn) (math spelling), fe_isnan(x),
// fe_nan<T>(), fe_inf<T>(), fe_int_min<I>(), fe_int_max<I>().
const char* scalar_helpers_source();

}  // namespace ferrite
