#include <gtest/gtest.h>

#include "ir/sym_expr.h"

namespace ferrite {

// Printed dims must read the same in Python, which evaluates dumps and golden files.
TEST(SymExprPrint, DivModTermsAreParenthesisedWhenScaledOrNegated) {
  SymExpr h = SymExpr::symbol("h");
  EXPECT_EQ(h.ceildiv(2).to_string(), "-((-h)//2)");
  EXPECT_EQ((h.floordiv(2) * 3).to_string(), "(h//2)*3");
  EXPECT_EQ((h - h.floordiv(2)).to_string(), "h-(h//2)");
  EXPECT_EQ((h + h.floordiv(2)).to_string(), "h+h//2");
  EXPECT_EQ(h.ceildiv(2).evaluate({{"h", 7}}), 4);
}

}  // namespace ferrite
