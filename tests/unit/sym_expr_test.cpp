#include "ir/sym_expr.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>

#include "ir/shape.h"
#include "ir/sym_ranges.h"

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

namespace ferrite {

TEST(SymExpr, CanonicalFormsAndPrinting) {
  SymExpr b = SymExpr::symbol("batch"), s = SymExpr::symbol("seq");
  EXPECT_EQ((b * s).to_string(), (s * b).to_string());
  EXPECT_EQ(((b + s) * (b - s)), b * b - s * s);
  EXPECT_EQ((-b).to_string(), "-batch");
  EXPECT_EQ((SymExpr(3) - b * 2).to_string(), "-batch*2+3");
  EXPECT_EQ((b * 0).to_string(), "0");
  EXPECT_TRUE((b * 0).is_constant());
  EXPECT_TRUE(b.is_symbol());
  EXPECT_FALSE((b * 2).is_symbol());
  EXPECT_FALSE((b + 1).is_symbol());
  EXPECT_EQ(b.constant(), std::nullopt);
  EXPECT_EQ(SymExpr().constant(), 0);
}

TEST(SymExpr, DivisionModMaxMin) {
  SymExpr h = SymExpr::symbol("h");
  EXPECT_EQ((h * 6 + 4).floordiv(2), h * 3 + 2);
  EXPECT_EQ((h * 4).mod(2), SymExpr(0));
  EXPECT_EQ(h.floordiv(h), SymExpr(1));
  EXPECT_EQ(h.floordiv(1), h);
  EXPECT_EQ(SymExpr(7).ceildiv(2).constant(), 4);
  EXPECT_EQ(SymExpr(-7).ceildiv(2).constant(), -3);
  EXPECT_EQ(SymExpr(-7).mod(3).constant(), 2);
  EXPECT_EQ(SymExpr(7).mod(-3).constant(), -2);
  EXPECT_EQ(h.ceildiv(4).evaluate({{"h", 9}}), 3);
  // Conv-style output size: (h + 2*1 - 3)//2 + 1.
  SymExpr out = (h + 2 - 3).floordiv(2) + 1;
  EXPECT_EQ(out.to_string(), "(h-1)//2+1");
  EXPECT_EQ(out.evaluate({{"h", 224}}), 112);
  // max/min operands are ordered canonically.
  SymExpr w = SymExpr::symbol("w");
  EXPECT_EQ(SymExpr::max(h, w), SymExpr::max(w, h));
  EXPECT_EQ(SymExpr::min(h, w).evaluate({{"h", 3}, {"w", 5}}), 3);
  EXPECT_EQ(SymExpr::max(SymExpr(2), SymExpr(9)).constant(), 9);
  EXPECT_EQ(SymExpr::max(h, h), h);
}

TEST(SymExpr, DivisionByZeroStaysSymbolic) {
  SymExpr h = SymExpr::symbol("h");
  SymExpr z = h.floordiv(0);
  EXPECT_FALSE(z.is_constant());
  EXPECT_EQ(z.evaluate({{"h", 3}}), std::nullopt);
  EXPECT_EQ(h.mod(h - h).evaluate({{"h", 3}}), std::nullopt);
  SymExpr n = SymExpr::symbol("n");
  EXPECT_EQ(h.floordiv(n).evaluate({{"h", 3}, {"n", 0}}), std::nullopt);
}

TEST(SymExpr, CollectSymbolsIncludesNestedOnes) {
  SymExpr e = (SymExpr::symbol("a") + 1).floordiv(SymExpr::symbol("b")) * SymExpr::symbol("c");
  std::vector<std::string> names;
  e.collect_symbols(names);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "c"}));
}

// Dims come from untrusted files: extreme values must not be undefined behaviour (UBSan aborts
// the sanitizer build on any of these if the arithmetic overflows).
TEST(SymExpr, ExtremeValuesAreDefined) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  SymExpr big(kMax);
  EXPECT_TRUE((big + 1).is_constant());
  EXPECT_TRUE((big * big).is_constant());
  EXPECT_TRUE((-SymExpr(kMin)).is_constant());
  EXPECT_EQ(SymExpr(kMin).floordiv(-1).constant(), kMin);  // wraps
  EXPECT_EQ(SymExpr(kMin).mod(-1).constant(), 0);
  SymExpr x = SymExpr::symbol("x");
  SymExpr huge = x * kMin;
  EXPECT_FALSE(huge.floordiv(-1).is_constant());
  EXPECT_EQ(huge.mod(-1), SymExpr(0));
  EXPECT_FALSE((x * kMax * kMax).is_constant());
  EXPECT_FALSE((-(x * kMin)).is_constant());
  // Evaluation reports overflow instead of wrapping.
  EXPECT_EQ((x * 2).evaluate({{"x", kMax}}), std::nullopt);
  EXPECT_EQ((x + 1).evaluate({{"x", kMax}}), std::nullopt);
  EXPECT_EQ(x.floordiv(SymExpr::symbol("y")).evaluate({{"x", kMin}, {"y", -1}}).has_value(), true);
  EXPECT_EQ(x.mod(SymExpr::symbol("y")).evaluate({{"x", kMin}, {"y", -1}}), 0);
  // Dims built from huge static values propagate rather than trap.
  Dim d = Dim(kMax) * Dim(2);
  EXPECT_TRUE(d.is_known());
}

}  // namespace ferrite

namespace ferrite {
TEST(SymExpr, UsesCountsOnlyPresentTerms) {
  SymExpr x = SymExpr::symbol("x"), n = SymExpr::symbol("n");
  SymExpr addr = x * 4096 + n;
  EXPECT_TRUE(addr.uses("x"));
  EXPECT_TRUE(addr.uses("n"));
  EXPECT_FALSE((addr - n).uses("n"));  // cancelled, though collect_symbols may still list it
  EXPECT_TRUE(x.floordiv(n).uses("n"));
  EXPECT_FALSE(SymExpr(7).uses("x"));
}
// A dim split by a Reshape and merged again indexes with the plain linear index.
TEST(SymExpr, SplitAndMergedDimFoldsBack) {
  SymExpr x = SymExpr::symbol("x"), b = SymExpr::symbol("b");
  EXPECT_EQ(x.floordiv(6) * 6 + x.mod(6), x);
  EXPECT_EQ(b * 24 + x.mod(6) + x.floordiv(6) * 6, b * 24 + x);
  EXPECT_EQ(x.mod(6) * 3 + x.floordiv(6) * 18 + 1, x * 3 + 1);
  // Not an identity: different divisors, or a coefficient that does not match.
  EXPECT_NE(x.floordiv(6) * 4 + x.mod(6), x);
  EXPECT_NE(x.floordiv(4) * 6 + x.mod(6), x);
}

TEST(SymExpr, ExactDivisionBySizeSymbols) {
  const SymExpr b = SymExpr::symbol("batch"), s = SymExpr::symbol("seq");
  EXPECT_EQ((b * s).floordiv(b), s);  // view(batch*seq) -> view(batch, -1)
  EXPECT_EQ((b * s * 12 + b * 4).floordiv(b * 4), s * 3 + 1);
  EXPECT_EQ((b * b * s).floordiv(b * s), b);
  // Not exact, or not by sizes: kept as divisions.
  EXPECT_EQ((b * s + 1).floordiv(b).to_string(), "(batch*seq+1)//batch");
  EXPECT_EQ((b * s * 3).floordiv(b * 2).to_string(), "(batch*seq*3)//(batch*2)");
  const SymExpr m = b.mod(3);
  EXPECT_EQ((m * s).floordiv(m).to_string(), "((batch%3)*seq)//(batch%3)");  // may be 0
  EXPECT_EQ((b * s).floordiv(-b).to_string(), "(batch*seq)//(-batch)");
}

TEST(SymExpr, RangesSplitAnIndexIntoDigits) {
  const SymExpr x = SymExpr::symbol("x"), y = SymExpr::symbol("y"), z = SymExpr::symbol("z");
  const SymExpr i = y * 64 + x;
  const std::string opaque = i.floordiv(64).to_string();  // no scope: kept as a division
  {
    SymRangeScope r({{"x", 64}, {"y", 12}});
    EXPECT_EQ(i.floordiv(64), y);
    EXPECT_EQ(i.mod(64), x);
    EXPECT_EQ((z * 2304 + y * 64 + x).floordiv(768), z * 3);  // z unbounded: a multiple of 768
    EXPECT_EQ((z * 2304 + y * 64 + x).mod(768), y * 64 + x);
    EXPECT_EQ((y.mod(12) * 64 + x).floordiv(768), SymExpr(0));  // x % k is in [0, k)
    EXPECT_EQ((i + 5).floordiv(1024), SymExpr(0));              // 11*64 + 63 + 5 < 1024
    // Not provably in one digit: kept as they were.
    EXPECT_NE((i - 1).floordiv(64), y);  // i - 1 may be negative
    EXPECT_NE((y * 64 + x * 2).floordiv(64), y);
    EXPECT_NE((y * 64 + z).floordiv(64), y);  // z has no range
    {
      SymRangeScope inner({{"x", 65}});  // the innermost scope answers
      EXPECT_NE(i.floordiv(64), y);
    }
    EXPECT_EQ(i.floordiv(64), y);
  }
  EXPECT_EQ(i.floordiv(64).to_string(), opaque);
}

// Every split equals Python's floor division and modulo at every point of the ranges.
TEST(SymExpr, RangedDivisionAgreesWithEvaluation) {
  const SymExpr x = SymExpr::symbol("x"), y = SymExpr::symbol("y"), w = SymExpr::symbol("w");
  const std::vector<SymExpr> exprs = {y * 96 + x * 3 + 2, w * 40 + y * 8 + x, y.mod(5) * 7 + x,
                                      w * 24 + x * 5 + 1, y * 12 - x + 30,    y * 8 + x - 7,
                                      w * 8 + 13,         x * 4 - 9};
  const std::vector<int64_t> divisors = {2, 3, 7, 8, 12, 40, 96, 97, 320, 1000};
  SymRangeScope r({{"x", 8}, {"y", 6}, {"w", 4}});
  for (const SymExpr& e : exprs)
    for (int64_t b : divisors) {
      const SymExpr q = e.floordiv(b), m = e.mod(b);
      for (int64_t xv = 0; xv < 8; ++xv)
        for (int64_t yv = 0; yv < 6; ++yv)
          for (int64_t wv = 0; wv < 4; ++wv) {
            SymBindings at{{"x", xv}, {"y", yv}, {"w", wv}};
            const int64_t v = *e.evaluate(at);
            const int64_t fq = v >= 0 ? v / b : -((-v + b - 1) / b);
            ASSERT_EQ(q.evaluate(at), fq) << e.to_string() << " // " << b;
            ASSERT_EQ(m.evaluate(at), v - fq * b) << e.to_string() << " % " << b;
          }
    }
}

TEST(SymExpr, RangesOfTermsAndAtoms) {
  const SymExpr x = SymExpr::symbol("x"), y = SymExpr::symbol("y"), z = SymExpr::symbol("z");
  using R = std::pair<int64_t, int64_t>;
  EXPECT_EQ(SymExpr(5).range(), (R{5, 5}));
  EXPECT_EQ(x.range(), std::nullopt);      // no scope: unbounded
  EXPECT_EQ(z.mod(4).range(), (R{0, 3}));  // x % k is in [0, k) anyway
  EXPECT_EQ((z * z).mod(3).range(), (R{0, 2}));
  SymRangeScope r({{"x", 8}, {"y", 6}});
  EXPECT_EQ((y * 12 - x + 30).range(), (R{23, 90}));
  EXPECT_EQ(x.floordiv(3).range(), (R{0, 2}));
  EXPECT_EQ(SymExpr::max(x - 4, y).range(), (R{0, 5}));
  EXPECT_EQ((x * y).range(), std::nullopt);  // products of atoms are not bounded
  EXPECT_EQ((x + z).range(), std::nullopt);
}

TEST(SymExpr, MaxAndMinOfOrderedRangesFold) {
  const SymExpr x = SymExpr::symbol("x"), y = SymExpr::symbol("y");
  EXPECT_EQ(SymExpr::max(y.mod(4), 0), y.mod(4));  // y % 4 >= 0 without a scope
  EXPECT_EQ(SymExpr::min(y.mod(4), 3), y.mod(4));
  EXPECT_NE(SymExpr::min(y.mod(4), 2), y.mod(4));
  SymRangeScope r({{"x", 8}});
  EXPECT_EQ(SymExpr::max(x - 8, 0), SymExpr(0));
  EXPECT_EQ(SymExpr::min(x + 8, 7), SymExpr(7));
  EXPECT_EQ(SymExpr::min(x, 7), x);
  EXPECT_EQ(SymExpr::max(x - 7, 0), SymExpr(0));  // x - 7 <= 0
  EXPECT_NE(SymExpr::max(x - 6, 0), SymExpr(0));  // 1 at x = 7
  EXPECT_EQ(SymExpr::max(x - 6, 0).range(), (std::pair<int64_t, int64_t>{0, 1}));
}

// A channel shuffle's index (two halves of 58 interleaved) with its loop variable split as
// x = 2q + r: each r reads one half at a plain offset q, the clamps drop out.
TEST(SymExpr, SubstituteSplitsAnInterleave) {
  const SymExpr x = SymExpr::symbol("x"), q = SymExpr::symbol("q"), b = SymExpr::symbol("b");
  const SymExpr c = x.mod(2) * 58 + x.floordiv(2);
  const SymExpr lo = SymExpr::min(c, 57) + b * 58, hi = SymExpr::max(c - 58, 0) + b * 58;
  EXPECT_EQ(lo.substitute("y", q), lo);  // an absent symbol: unchanged
  SymRangeScope r({{"q", 58}});
  EXPECT_EQ(lo.substitute("x", q * 2), q + b * 58);
  EXPECT_EQ(hi.substitute("x", q * 2), b * 58);
  EXPECT_EQ(lo.substitute("x", q * 2 + 1), b * 58 + 57);
  EXPECT_EQ(hi.substitute("x", q * 2 + 1), q + b * 58);
  EXPECT_EQ(c.substitute("x", q * 4 + 3).to_string(), "q*2+59");
}

// Substituting and then evaluating equals evaluating at the substituted value, at every point.
TEST(SymExpr, SubstituteAgreesWithEvaluation) {
  const SymExpr x = SymExpr::symbol("x"), y = SymExpr::symbol("y"), q = SymExpr::symbol("q");
  const std::vector<SymExpr> exprs = {
      x.mod(3) * 10 + x.floordiv(3),     SymExpr::max(x.mod(2) * 7 + x.floordiv(2) - 7, 0),
      SymExpr::min(x.floordiv(4), 2),    (x * y + 5).floordiv(6),
      SymExpr::max(x - y, 1) * x.mod(5), (x - 13).mod(4) + y};
  SymRangeScope r({{"q", 5}, {"y", 4}});
  for (int64_t c : {2, 3, 4, 6})
    for (int64_t rr = 0; rr < c; ++rr)
      for (const SymExpr& e : exprs) {
        const SymExpr s = e.substitute("x", q * c + rr);
        for (int64_t qv = 0; qv < 5; ++qv)
          for (int64_t yv = 0; yv < 4; ++yv)
            ASSERT_EQ(s.evaluate({{"q", qv}, {"y", yv}}),
                      e.evaluate({{"x", qv * c + rr}, {"y", yv}}))
                << e.to_string() << " at x = " << c << "q + " << rr << ": " << s.to_string();
      }
}

}  // namespace ferrite
