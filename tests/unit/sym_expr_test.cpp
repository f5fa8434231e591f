#include "ir/sym_expr.h"

#include <gtest/gtest.h>

namespace ferrite {

TEST(SymExpr, CanonicalArithmetic) {
  SymExpr b = SymExpr::symbol("batch"), s = SymExpr::symbol("seq");
  EXPECT_EQ((b * 12).to_string(), "batch*12");
  EXPECT_EQ((s - 1).to_string(), "seq-1");
  EXPECT_EQ(b + s, s + b);
  EXPECT_EQ((b + 1) * 2, b * 2 + 2);
  EXPECT_TRUE((b - b).is_constant());
  EXPECT_EQ(((b * 12).floordiv(12)), b);
  EXPECT_EQ(SymExpr(7).floordiv(2).constant(), 3);
  EXPECT_EQ(SymExpr(-7).floordiv(2).constant(), -4);
}

TEST(SymExpr, EvaluateAndOpaqueTerms) {
  SymExpr h = SymExpr::symbol("h");
  SymExpr e = (h + 1).floordiv(2);
  EXPECT_EQ(e.to_string(), "(h+1)//2");
  EXPECT_EQ(e.evaluate({{"h", 7}}), 4);
  EXPECT_EQ(e.evaluate({}), std::nullopt);
  EXPECT_EQ(SymExpr::max(h, SymExpr(3)).evaluate({{"h", 1}}), 3);
  EXPECT_EQ(h.mod(4).evaluate({{"h", 10}}), 2);
}

}  // namespace ferrite
