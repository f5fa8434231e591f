// Ranges of symbols while index expressions are built: within a SymRangeScope, symbol s takes
// values in [0, extent(s)) (a generated kernel's loop variables over its static dims). SymExpr's
// floordiv and mod then split an index into the digits they select, as mixed-radix arithmetic,
// where the expression alone keeps an opaque division: `(x*64 + y) // 64` is `x` and
// `(x*64 + y) % 64` is `y` once y < 64 is known. Scopes are per thread and nest (the innermost
// one answers).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

namespace ferrite {

class SymRangeScope {
 public:
  explicit SymRangeScope(std::unordered_map<std::string, int64_t> extents);
  ~SymRangeScope();
  SymRangeScope(const SymRangeScope&) = delete;
  SymRangeScope& operator=(const SymRangeScope&) = delete;

  // The extent of `symbol` in the innermost scope of this thread, if it has one.
  static std::optional<int64_t> extent(const std::string& symbol);

 private:
  std::unordered_map<std::string, int64_t> extents_;
  const SymRangeScope* outer_;
};

}  // namespace ferrite
