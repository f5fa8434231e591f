// The per-op table: one entry per op whose cases need valid-range inputs, constant operands
// (axes, shapes, weights), attribute variants or several outputs. Ops without an entry get
// generic cases from their schema (op_cases.cpp).
#include <cmath>
#include <functional>
#include <limits>
#include <map>

#include "cts/case_util.h"

namespace ferrite::cts {

namespace {

using Fn = CaseFn;
using V = ValueGen;
const std::string N = "N";  // the symbolic dim of the cases that have one
const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

Fn unary(V g, std::vector<std::pair<std::string, Attrs>> variants = {}) {
  return [g, variants](const OpSchema& s, std::vector<Case>& out) {
    unary_cases(s, {g, variants}, out);
  };
}
Fn binary(BinaryOpts o) {
  return [o](const OpSchema& s, std::vector<Case>& out) { binary_cases(s, o, out); };
}

void variadic(const OpSchema& s, std::vector<Case>& out) {
  for (DType t : pick_dtypes(input_types(s, 0))) {
    std::string d = dtype_tag(t);
    out.push_back(single(s.name, d + "/one", {in("a", t, {3, 4})}));
    out.push_back(single(s.name, d + "/two-broadcast", {in("a", t, {2, 3, 4}), in("b", t, {4})}));
    if (t == kF32) {
      out.push_back(
          single(s.name, d + "/special",
                 {in("a", t, {3, 12}, special_values()), in("b", t, {3, 12}, special_values(5))}));
      out.push_back(
          with_runs(single(s.name, d + "/three-symbolic",
                           {in("a", t, {N, 1, 4}), in("b", t, {3, 1}), in("c", t, {N, 3, 4})}),
                    {2}));
    }
  }
}

// Compare ops see many equal pairs when values come from a few integers.
void compare(const OpSchema& s, std::vector<Case>& out) {
  BinaryOpts o;
  o.a_float = o.b_float = V::ints(-2, 2);
  binary_cases(s, o, out);
}

void reduce(const OpSchema& s, std::vector<Case>& out) {
  V g = V::uniform(-2, 2);
  if (s.name == "ReduceLogSum") g = V::uniform(0.1, 3);  // log of a positive sum
  if (s.name == "ReduceProd") g = V::uniform(0.6, 1.6);  // keeps products near 1
  auto add = [&](const std::string& v, DType t, std::vector<DimSpec> dims,
                 std::optional<std::vector<int64_t>> axes, int64_t keepdims) {
    ValueGen vg = is_float(t) ? g : default_gen(t);
    if (!is_float(t) && s.name == "ReduceProd") vg = V::ints(-2, 2);
    out.push_back(single(s.name, dtype_tag(t) + "/" + v,
                         {in("x", t, dims, vg), axes ? ints("axes", *axes) : omitted()},
                         {{"keepdims", keepdims}}));
  };
  add("axis1-keep", kF32, {3, 4, 5}, std::vector<int64_t>{1}, 1);
  add("last-axis", kF32, {4, 33}, std::vector<int64_t>{-1}, 0);
  add("axes02", kF32, {3, 4, 5}, std::vector<int64_t>{0, 2}, 0);
  add("all", kF32, {3, 4, 5}, std::nullopt, 1);
  add("all-to-scalar", kF32, {3, 4, 5}, std::nullopt, 0);
  out.push_back(single(s.name, "f32/empty-axes-noop",
                       {in("x", kF32, {3, 4}, g), cst("axes", kI64, {0}, std::vector<double>{})},
                       {{"noop_with_empty_axes", int64_t{1}}}));
  out.push_back(
      with_runs(single(s.name, "f32/symbolic-rows", {in("x", kF32, {N, 6}, g), ints("axes", {1})},
                       {{"keepdims", int64_t{1}}}),
                {5}));
  add("large-rows", kF32, {16, 4099}, std::vector<int64_t>{-1}, 0);
  add("large-columns", kF32, {1031, 24}, std::vector<int64_t>{0}, 1);
  out.push_back(
      single(s.name, "f32/special", {in("x", kF32, {4, 12}, special_values()), ints("axes", {1})}));
  add("f16", kF16, {4, 6}, std::vector<int64_t>{1}, 1);
  add("f64", kF64, {4, 6}, std::vector<int64_t>{0}, 0);
  add("i32", kI32, {4, 6}, std::vector<int64_t>{1}, 1);
  add("i64", kI64, {4, 6}, std::vector<int64_t>{0}, 0);
}

void softmax_like(const OpSchema& s, std::vector<Case>& out) {
  out.push_back(single(s.name, "f32/last-axis", {in("x", kF32, {3, 4, 10})}));
  out.push_back(single(s.name, "f32/axis1", {in("x", kF32, {2, 3, 4})}, {{"axis", int64_t{1}}}));
  // Large logits: a kernel that skips the max subtraction overflows.
  out.push_back(single(s.name, "f32/large", {in("x", kF32, {4, 16}, V::uniform(-80, 80))}));
  out.push_back(with_runs(single(s.name, "f32/symbolic", {in("x", kF32, {N, 2, 7})}), {3}));
  out.push_back(single(s.name, "f16", {in("x", kF16, {3, 8})}));
  out.push_back(single(s.name, "f64", {in("x", kF64, {3, 8})}));
  out.push_back(single(s.name, "f32/large-rows", {in("x", kF32, {8, 4099})}));
  // A fully masked row: 0/0 in the reference, so NaN (or the device's documented choice).
  out.push_back(
      single(s.name, "f32/fully-masked-row",
             {in("x", kF32, {2, 4}, V::exactly({1, 2, 3, 4, -kInf, -kInf, -kInf, -kInf}))}));
  // Masked (-inf) entries in some rows; no row is fully masked.
  out.push_back(
      single(s.name, "f32/masked",
             {in("x", kF32, {4, 6}, V::exactly({0.5, -kInf, 1, 2, -kInf, 0, 3, 1, -1}))}));
}

void argminmax(const OpSchema& s, std::vector<Case>& out) {
  out.push_back(single(s.name, "f32/axis0", {in("x", kF32, {4, 5})}));
  out.push_back(single(s.name, "f32/axis1-nokeep", {in("x", kF32, {3, 4, 5})},
                       {{"axis", int64_t{1}}, {"keepdims", int64_t{0}}}));
  // Few distinct values: ties decide between first and last index.
  out.push_back(single(s.name, "i32/ties-first", {in("x", kI32, {4, 6}, V::ints(0, 2))},
                       {{"axis", int64_t{-1}}}));
  out.push_back(single(s.name, "i64/ties-last", {in("x", kI64, {4, 6}, V::ints(0, 2))},
                       {{"axis", int64_t{1}}, {"select_last_index", int64_t{1}}}));
}

void pool(const OpSchema& s, std::vector<Case>& out) {
  auto k = [](std::vector<int64_t> v) { return Attribute(std::move(v)); };
  out.push_back(single(s.name, "k3s2", {in("x", kF32, {1, 2, 7, 7})},
                       {{"kernel_shape", k({3, 3})}, {"strides", k({2, 2})}}));
  out.push_back(single(s.name, "k3-pads", {in("x", kF32, {2, 3, 6, 6})},
                       {{"kernel_shape", k({3, 3})}, {"pads", k({1, 1, 1, 1})}}));
  out.push_back(
      single(s.name, "ceil", {in("x", kF32, {1, 2, 6, 6})},
             {{"kernel_shape", k({3, 3})}, {"strides", k({2, 2})}, {"ceil_mode", int64_t{1}}}));
  out.push_back(single(s.name, "1d", {in("x", kF32, {2, 3, 9})}, {{"kernel_shape", k({2})}}));
  out.push_back(single(s.name, "same-upper", {in("x", kF32, {1, 2, 5, 5})},
                       {{"kernel_shape", k({2, 2})}, {"auto_pad", "SAME_UPPER"}}));
  out.push_back(with_runs(single(s.name, "symbolic-batch", {in("x", kF32, {N, 2, 6, 6})},
                                 {{"kernel_shape", k({2, 2})}, {"strides", k({2, 2})}}),
                          {3}));
  if (s.name == "AveragePool")
    out.push_back(single(s.name, "count-pad", {in("x", kF32, {1, 2, 5, 5})},
                         {{"kernel_shape", k({3, 3})},
                          {"pads", k({1, 1, 1, 1})},
                          {"count_include_pad", int64_t{1}}}));
  if (s.name == "MaxPool") {
    out.push_back(single(s.name, "dilated", {in("x", kF32, {1, 2, 8, 8})},
                         {{"kernel_shape", k({2, 2})}, {"dilations", k({2, 2})}}));
    out.push_back(single(s.name, "indices", {in("x", kF32, {1, 2, 6, 6})},
                         {{"kernel_shape", k({2, 2})}, {"strides", k({2, 2})}}, 2));
    // ResNet's stem pool with its indices (training graphs), column-major as well.
    out.push_back(single(
        s.name, "indices-overlap-pad", {in("x", kF32, {2, 3, 9, 7})},
        {{"kernel_shape", k({3, 3})}, {"strides", k({2, 2})}, {"pads", k({1, 1, 1, 1})}}, 2));
    out.push_back(single(s.name, "indices-column-major", {in("x", kBF16, {1, 2, 5, 6})},
                         {{"kernel_shape", k({2, 3})}, {"storage_order", int64_t{1}}}, 2));
    out.push_back(
        single(s.name, "f16", {in("x", kF16, {1, 2, 6, 6})}, {{"kernel_shape", k({3, 3})}}));
  }
}

void global_pool(const OpSchema& s, std::vector<Case>& out) {
  out.push_back(single(s.name, "f32", {in("x", kF32, {2, 3, 5, 5})}));
  out.push_back(single(s.name, "f32/1d", {in("x", kF32, {2, 3, 7})}));
  out.push_back(with_runs(single(s.name, "f32/symbolic", {in("x", kF32, {N, 4, 3, 3})}), {2}));
}

Attribute I(std::vector<int64_t> v) {
  return Attribute(std::move(v));
}

void conv(const OpSchema& s, std::vector<Case>& out) {
  auto w = [](std::vector<int64_t> d) { return cst("w", kF32, d, V::uniform(-1, 1)); };
  auto b = [](int64_t n) { return cst("b", kF32, {n}, V::uniform(-1, 1)); };
  out.push_back(single(s.name, "3x3-pad1-bias",
                       {in("x", kF32, {1, 3, 8, 8}), w({4, 3, 3, 3}), b(4)},
                       {{"pads", I({1, 1, 1, 1})}}));
  out.push_back(single(s.name, "stride2", {in("x", kF32, {2, 3, 9, 9}), w({5, 3, 3, 3})},
                       {{"strides", I({2, 2})}}));
  out.push_back(single(s.name, "depthwise", {in("x", kF32, {1, 4, 6, 6}), w({4, 1, 3, 3}), b(4)},
                       {{"group", int64_t{4}}, {"pads", I({1, 1, 1, 1})}}));
  out.push_back(single(s.name, "group2-dilated", {in("x", kF32, {1, 4, 9, 9}), w({6, 2, 3, 3})},
                       {{"group", int64_t{2}}, {"dilations", I({2, 2})}}));
  out.push_back(single(s.name, "1x1", {in("x", kF32, {2, 8, 5, 5}), w({16, 8, 1, 1}), b(16)}));
  out.push_back(single(s.name, "1d", {in("x", kF32, {2, 3, 12}), w({4, 3, 3})}));
  out.push_back(single(s.name, "same-upper", {in("x", kF32, {1, 2, 7, 7}), w({3, 2, 2, 2})},
                       {{"auto_pad", "SAME_UPPER"}}));
  out.push_back(with_runs(
      single(s.name, "symbolic-batch", {in("x", kF32, {N, 3, 6, 6}), w({4, 3, 3, 3}), b(4)}), {2}));
  out.push_back(single(s.name, "large", {in("x", kF32, {2, 32, 23, 23}), w({48, 32, 3, 3}), b(48)},
                       {{"pads", I({1, 1, 1, 1})}}));
  // Weights as a run-time input rather than a constant.
  out.push_back(single(s.name, "runtime-weights",
                       {in("x", kF32, {1, 2, 5, 5}), in("w", kF32, {3, 2, 3, 3})}));
}

void conv_transpose(const OpSchema& s, std::vector<Case>& out) {
  auto w = [](std::vector<int64_t> d) { return cst("w", kF32, d, V::uniform(-1, 1)); };
  out.push_back(single(s.name, "basic", {in("x", kF32, {1, 3, 4, 4}), w({3, 2, 3, 3})}));
  out.push_back(
      single(s.name, "stride2-pad-outpad",
             {in("x", kF32, {1, 2, 5, 5}), w({2, 3, 3, 3}), cst("b", kF32, {3}, V::uniform(-1, 1))},
             {{"strides", I({2, 2})}, {"pads", I({1, 1, 1, 1})}, {"output_padding", I({1, 1})}}));
  out.push_back(single(s.name, "group2", {in("x", kF32, {2, 4, 3, 3}), w({4, 1, 2, 2})},
                       {{"group", int64_t{2}}, {"strides", I({2, 2})}}));
  out.push_back(single(s.name, "1d", {in("x", kF32, {1, 2, 6}), w({2, 2, 3})}));
}

void gemm_like(const OpSchema& s, std::vector<Case>& out) {
  if (s.name == "MatMul") {
    auto mm = [&](const std::string& v, DType t, std::vector<DimSpec> a, std::vector<DimSpec> b) {
      out.push_back(single(s.name, v, {in("a", t, a), in("b", t, b)}));
    };
    mm("f32/2d", kF32, {3, 4}, {4, 5});
    mm("f32/batched", kF32, {2, 3, 4}, {2, 4, 5});
    mm("f32/broadcast-batch", kF32, {2, 1, 3, 4}, {3, 4, 5});
    mm("f32/vec-mat", kF32, {4}, {4, 5});
    mm("f32/mat-vec", kF32, {3, 4}, {4});
    mm("f32/large-k", kF32, {5, 300}, {300, 7});
    // Big enough for blocked/threaded GEMM paths, with ragged tiles.
    mm("f32/large", kF32, {129, 257}, {257, 193});
    out.push_back(
        with_runs(single(s.name, "f32/symbolic-const-weights",
                         {in("a", kF32, {N, 8}), cst("b", kF32, {8, 16}, V::uniform(-1, 1))}),
                  {3}));
    mm("f16", kF16, {3, 8}, {8, 5});
    mm("f64", kF64, {3, 4}, {4, 5});
    mm("i32", kI32, {3, 4}, {4, 5});
    mm("i64", kI64, {2, 3}, {3, 2});
    return;
  }
  // Gemm
  auto g = [&](const std::string& v, std::vector<DimSpec> a, std::vector<DimSpec> b,
               std::vector<int64_t> c, Attrs at) {
    out.push_back(single(s.name, v,
                         {in("a", kF32, a), in("b", kF32, b),
                          c.empty() ? omitted() : in("c", kF32, {c.begin(), c.end()})},
                         at));
  };
  g("bias-row", {3, 4}, {4, 5}, {5}, {});
  g("no-bias", {3, 4}, {4, 5}, {}, {});
  g("transA-transB", {4, 3}, {5, 4}, {3, 5}, {{"transA", int64_t{1}}, {"transB", int64_t{1}}});
  g("alpha-beta-col", {3, 4}, {4, 5}, {3, 1}, {{"alpha", 0.5f}, {"beta", 2.0f}});
  g("scalar-c", {3, 4}, {4, 5}, {1}, {});
  out.push_back(with_runs(single(s.name, "symbolic-const-weights",
                                 {in("a", kF32, {N, 6}), cst("b", kF32, {8, 6}, V::uniform(-1, 1)),
                                  cst("c", kF32, {8}, V::uniform(-1, 1))},
                                 {{"transB", int64_t{1}}}),
                          {4}));
  out.push_back(single(s.name, "f64", {in("a", kF64, {3, 4}), in("b", kF64, {4, 2})}));
  out.push_back(single(s.name, "large-transB",
                       {in("a", kF32, {97, 160}), cst("b", kF32, {130, 160}, V::uniform(-1, 1)),
                        cst("c", kF32, {130}, V::uniform(-1, 1))},
                       {{"transB", int64_t{1}}}));
}

void einsum(const OpSchema& s, std::vector<Case>& out) {
  auto e = [&](const std::string& v, const std::string& eq, std::vector<TensorSpec> ins) {
    out.push_back(single(s.name, v, std::move(ins), {{"equation", eq}}));
  };
  e("matmul", "ij,jk->ik", {in("a", kF32, {3, 4}), in("b", kF32, {4, 5})});
  e("batched", "bij,bjk->bik", {in("a", kF32, {2, 3, 4}), in("b", kF32, {2, 4, 5})});
  e("transpose", "ij->ji", {in("a", kF32, {3, 4})});
  e("dot", "i,i->", {in("a", kF32, {6}), in("b", kF32, {6})});
  e("ellipsis", "...ij,...jk->...ik", {in("a", kF32, {2, 3, 4}), in("b", kF32, {2, 4, 5})});
  e("sum-axis", "ij->i", {in("a", kF32, {3, 7})});
  e("diagonal", "ii->i", {in("a", kF32, {4, 4})});
  e("outer", "i,j->ij", {in("a", kF32, {3}), in("b", kF32, {4})});
  e("attention-scores", "bhqd,bhkd->bhqk",
    {in("a", kF32, {1, 2, 3, 4}), in("b", kF32, {1, 2, 5, 4})});
}

void batchnorm(const OpSchema& s, std::vector<Case>& out) {
  auto ins = [](std::vector<DimSpec> x, int64_t c, bool runtime_stats) {
    std::vector<TensorSpec> v = {in("x", kF32, std::move(x)),
                                 cst("scale", kF32, {c}, V::uniform(0.5, 1.5)),
                                 cst("bias", kF32, {c}, V::uniform(-1, 1))};
    if (runtime_stats) {
      v.push_back(in("mean", kF32, {c}, V::uniform(-1, 1)));
      v.push_back(in("var", kF32, {c}, V::uniform(0.5, 2)));
    } else {
      v.push_back(cst("mean", kF32, {c}, V::uniform(-1, 1)));
      v.push_back(cst("var", kF32, {c}, V::uniform(0.5, 2)));
    }
    return v;
  };
  out.push_back(single(s.name, "f32/nchw", ins({2, 3, 4, 5}, 3, false)));
  out.push_back(single(s.name, "f32/nc", ins({4, 3}, 3, false)));
  out.push_back(single(s.name, "f32/runtime-stats", ins({2, 3, 5}, 3, true), {{"epsilon", 1e-3f}}));
  out.push_back(with_runs(single(s.name, "f32/symbolic", ins({N, 3, 4, 4}, 3, false)), {2}));
}

void layernorm(const OpSchema& s, std::vector<Case>& out) {
  auto sc = [](std::vector<int64_t> d) { return cst("scale", kF32, d, V::uniform(0.5, 1.5)); };
  auto bi = [](std::vector<int64_t> d) { return cst("bias", kF32, d, V::uniform(-1, 1)); };
  out.push_back(single(s.name, "f32/last", {in("x", kF32, {2, 3, 16}), sc({16}), bi({16})}));
  out.push_back(single(s.name, "f32/axis1", {in("x", kF32, {2, 3, 4}), sc({3, 4}), bi({3, 4})},
                       {{"axis", int64_t{1}}}));
  out.push_back(
      single(s.name, "f32/no-bias", {in("x", kF32, {4, 8}), sc({8})}, {{"epsilon", 1e-3f}}));
  out.push_back(
      single(s.name, "f32/large-rows", {in("x", kF32, {9, 4100}), sc({4100}), bi({4100})}));
  out.push_back(single(s.name, "f32/offset-mean",
                       {in("x", kF32, {4, 32}, V::uniform(90, 110)), sc({32}), bi({32})}));
  out.push_back(with_runs(
      single(s.name, "f32/symbolic", {in("x", kF32, {N, 5, 12}), sc({12}), bi({12})}), {3}));
  out.push_back(
      single(s.name, "f32/three-outputs", {in("x", kF32, {3, 8}), sc({8}), bi({8})}, {}, 3));
  out.push_back(single(s.name, "f16",
                       {in("x", kF16, {3, 8}), cst("scale", kF16, {8}, V::uniform(0.5, 1.5)),
                        cst("bias", kF16, {8}, V::uniform(-1, 1))}));
}

// Unary math: inputs inside each function's domain and away from overflow.
void unary_ops(std::map<std::string, Fn>& m) {
  m["Exp"] = unary(V::uniform(-4, 4));
  m["Log"] = unary(V::uniform(0.05, 5));
  m["Sqrt"] = unary(V::uniform(0, 5));
  m["Reciprocal"] = unary(V::uniform(-3, 3, 0.2));
  m["Sin"] = m["Cos"] = unary(V::uniform(-4, 4));
  m["Tan"] = unary(V::uniform(-1.3, 1.3));
  m["Asin"] = m["Acos"] = m["Atanh"] = unary(V::uniform(-0.95, 0.95));
  m["Acosh"] = unary(V::uniform(1.05, 6));
  m["Sinh"] = m["Cosh"] = unary(V::uniform(-3, 3));
  m["Sigmoid"] = m["Tanh"] = m["Erf"] = unary(V::uniform(-6, 6));
  m["Softplus"] = m["Mish"] = unary(V::uniform(-6, 6));
  // Exact ties: Round is half-to-even.
  m["Round"] = unary(V::exactly({0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, 3.7, -0.0, 7}));
  m["HardSwish"] = m["HardSigmoid"] = unary(V::uniform(-4, 4));
  m["LeakyRelu"] = unary(V::uniform(-2, 2), {{"alpha", {{"alpha", 0.2f}}}});
  m["Elu"] = unary(V::uniform(-2, 2), {{"alpha", {{"alpha", 0.5f}}}});
  m["Celu"] = unary(V::uniform(-2, 2), {{"alpha", {{"alpha", 2.0f}}}});
  m["Selu"] = unary(V::uniform(-2, 2), {{"alpha-gamma", {{"alpha", 1.5f}, {"gamma", 1.1f}}}});
  m["ThresholdedRelu"] = unary(V::uniform(-2, 2), {{"alpha", {{"alpha", 0.7f}}}});
  m["Gelu"] = unary(V::uniform(-4, 4), {{"tanh", {{"approximate", "tanh"}}}});
  m["Shrink"] = unary(V::uniform(-2, 2), {{"bias-lambd", {{"bias", 0.2f}, {"lambd", 0.3f}}}});
  m["Shape"] =
      unary(V::uniform(-2, 2), {{"start-end", {{"start", int64_t{1}}, {"end", int64_t{-1}}}}});
  m["IsNaN"] = m["IsInf"] = [](const OpSchema& s, std::vector<Case>& out) {
    V special = V::exactly({1.5, kNaN, kInf, -kInf, 0, -2.5, kNaN, 7});
    out.push_back(single(s.name, "f32", {in("x", kF32, {4, 6}, special)}));
    out.push_back(single(s.name, "f16", {in("x", kF16, {3, 8}, special)}));
    out.push_back(single(s.name, "f64", {in("x", kF64, {2, 4}, special)}));
    if (s.name == "IsInf")
      out.push_back(single(s.name, "f32/negative-only", {in("x", kF32, {4, 6}, special)},
                           {{"detect_positive", int64_t{0}}}));
  };
}

// Binary arithmetic (no division by zero, powers of positive bases), comparisons, Where, Clip
// and the casts.
void binary_and_cast_ops(std::map<std::string, Fn>& m) {
  BinaryOpts div;
  div.b_float = V::uniform(-3, 3, 0.25);
  // Both signs of divisor: integer Div truncates, Mod (fmod=0) takes the divisor's sign.
  div.b_int = V::exactly({-7, 3, -1, 2, 5, -3, 1});
  div.a_int = V::ints(-20, 20);
  m["Div"] = binary(div);
  m["Mod"] = [div](const OpSchema& s, std::vector<Case>& out) {
    BinaryOpts ints_only = div;
    ints_only.dtypes = {kI32, kI64};
    binary_cases(s, ints_only, out);
    BinaryOpts fmod = div;
    fmod.dtypes = {kF32};
    fmod.attrs = {{"fmod", int64_t{1}}};
    binary_cases(s, fmod, out);
  };
  BinaryOpts pow;
  pow.a_float = V::uniform(0.1, 3);
  pow.b_float = V::uniform(-2, 2);
  pow.a_int = V::ints(-3, 3);
  pow.b_int = V::ints(0, 3);
  m["Pow"] = [pow](const OpSchema& s, std::vector<Case>& out) {
    binary_cases(s, pow, out);
    // Negative bases with integral exponents are defined (pow(-2, 3) = -8); exp(b*log(a))
    // gives NaN there.
    out.push_back(single(s.name, "f32/negative-base",
                         {in("a", kF32, {4, 5}, V::uniform(-3, 3)),
                          in("b", kF32, {4, 5}, V::exactly({2, 3, -1, 0, 1, -2}))}));
    out.push_back(single(s.name, "f32/int-exponent",
                         {in("a", kF32, {3, 4}), in("b", kI64, {}, V::exactly({3}))}));
  };
  m["Equal"] = m["Less"] = m["LessOrEqual"] = m["Greater"] = m["GreaterOrEqual"] = compare;
  m["BitShift"] = [](const OpSchema& s, std::vector<Case>& out) {
    for (const char* dir : {"LEFT", "RIGHT"})
      for (DType t : {kU8, kU32}) {
        BinaryOpts o;
        o.dtypes = {t};
        o.a_int = V::ints(0, 255);
        o.b_int = V::ints(0, 7);
        o.attrs = {{"direction", dir}};
        size_t first = out.size();
        binary_cases(s, o, out);
        for (size_t i = first; i < out.size(); ++i) out[i].name += std::string("/") + dir;
      }
  };
  m["Max"] = m["Min"] = m["Sum"] = m["Mean"] = variadic;
  m["PRelu"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(
        single(s.name, "channel-slope",
               {in("x", kF32, {2, 3, 4, 5}), cst("slope", kF32, {3, 1, 1}, V::uniform(0, 1))}));
    out.push_back(single(s.name, "last-dim-slope",
                         {in("x", kF32, {2, 3, 4}), in("slope", kF32, {4}, V::uniform(0, 1))}));
    out.push_back(
        single(s.name, "i32", {in("x", kI32, {3, 4}), in("slope", kI32, {4}, V::ints(0, 3))}));
    out.push_back(
        single(s.name, "special",
               {in("x", kF32, {3, 12}, special_values()), cst("slope", kF32, {1}, {0.25})}));
  };
  m["Where"] = [](const OpSchema& s, std::vector<Case>& out) {
    for (DType t : {kF32, kI64, kBool, kF16})
      out.push_back(single(s.name, dtype_tag(t) + "/broadcast",
                           {in("c", kBool, {3, 1}), in("a", t, {3, 4}), in("b", t, {4})}));
    out.push_back(
        with_runs(single(s.name, "f32/symbolic",
                         {in("c", kBool, {N, 4}), in("a", kF32, {N, 4}), in("b", kF32, {})}),
                  {5}));
  };
  m["Clip"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(
        single(s.name, "f32/min-max",
               {in("x", kF32, {3, 5}), cst("lo", kF32, {}, {-0.5}), cst("hi", kF32, {}, {0.7})}));
    out.push_back(
        single(s.name, "f32/min-only", {in("x", kF32, {3, 5}), cst("lo", kF32, {}, {0})}));
    out.push_back(single(s.name, "f32/max-only",
                         {in("x", kF32, {3, 5}), omitted(), cst("hi", kF32, {}, {6})}));
    out.push_back(single(s.name, "f32/runtime-bounds",
                         {in("x", kF32, {3, 5}), in("lo", kF32, {}, V::uniform(-1, 0)),
                          in("hi", kF32, {}, V::uniform(0, 1))}));
    out.push_back(single(s.name, "f32/none", {in("x", kF32, {3, 5})}));
    out.push_back(single(s.name, "f32/special",
                         {in("x", kF32, {3, 12}, special_values()), cst("lo", kF32, {}, {-0.5}),
                          cst("hi", kF32, {}, {0.7})}));
    out.push_back(
        single(s.name, "i32",
               {in("x", kI32, {3, 5}), cst("lo", kI32, {}, {-2}), cst("hi", kI32, {}, {3})}));
    out.push_back(
        single(s.name, "f16",
               {in("x", kF16, {3, 5}), cst("lo", kF16, {}, {-1}), cst("hi", kF16, {}, {1})}));
  };
  m["Cast"] = [](const OpSchema& s, std::vector<Case>& out) {
    auto cast = [&](DType from, DType to, V g) {
      out.push_back(single(s.name, dtype_tag(from) + "-to-" + dtype_tag(to),
                           {in("x", from, {4, 6}, g)}, {{"to", int64_t{dtype_to_onnx(to)}}}));
    };
    V wide = V::uniform(-100, 100);
    cast(kF32, kI32, wide);
    cast(kF32, kI64, wide);
    cast(kF32, kF16, wide);
    // Beyond f16's range (inf), at its rounding boundary and in its subnormals.
    out.push_back(single(
        s.name, "f32-to-f16/edges",
        {in("x", kF32, {2, 4}, V::exactly({70000, -70000, 65519, 65520, 1e-8, 6e-8, -3e-5, 0.1}))},
        {{"to", int64_t{dtype_to_onnx(kF16)}}}));
    cast(kF32, kBF16, wide);
    cast(kF32, kF64, wide);
    cast(kF32, kBool, V::ints(-1, 1));
    cast(kF32, kU8, V::uniform(0, 250));
    cast(kF16, kF32, wide);
    cast(kF64, kF32, wide);
    cast(kI64, kF32, V::ints(-1000, 1000));
    cast(kI32, kI64, V::ints(-1000, 1000));
    cast(kI64, kI32, V::ints(-1000, 1000));
    cast(kBool, kF32, V::boolean());
    cast(kBool, kI64, V::boolean());
    cast(kF32, kF32, wide);
  };
  m["CastLike"] = [](const OpSchema& s, std::vector<Case>& out) {
    out.push_back(single(s.name, "f32-like-i64",
                         {in("x", kF32, {3, 4}, V::uniform(-50, 50)), in("like", kI64, {1})}));
    out.push_back(single(s.name, "i32-like-f16", {in("x", kI32, {3, 4}), in("like", kF16, {2})}));
  };
}

const std::map<std::string, Fn>& table() {
  static const std::map<std::string, Fn> t = [] {
    std::map<std::string, Fn> m;
    unary_ops(m);
    binary_and_cast_ops(m);
    m["MatMul"] = m["Gemm"] = gemm_like;
    m["Einsum"] = einsum;
    m["Conv"] = conv;
    m["ConvTranspose"] = conv_transpose;
    m["MaxPool"] = m["AveragePool"] = m["LpPool"] = pool;
    m["GlobalAveragePool"] = m["GlobalMaxPool"] = m["GlobalLpPool"] = global_pool;
    m["BatchNormalization"] = batchnorm;
    m["LayerNormalization"] = layernorm;
    m["ReduceSum"] = m["ReduceMean"] = m["ReduceMax"] = m["ReduceMin"] = m["ReduceProd"] =
        m["ReduceL1"] = m["ReduceL2"] = m["ReduceLogSum"] = m["ReduceLogSumExp"] =
            m["ReduceSumSquare"] = reduce;
    m["Softmax"] = m["LogSoftmax"] = m["Hardmax"] = softmax_like;
    m["ArgMax"] = m["ArgMin"] = argminmax;
    return m;
  }();
  return t;
}

}  // namespace

bool override_cases(const OpSchema& s, std::vector<Case>& out) {
  static const std::map<std::string, Fn> all = [] {
    std::map<std::string, Fn> m = table();
    register_more_overrides(m);
    return m;
  }();
  auto it = all.find(s.domain.empty() ? s.name : s.domain + "." + s.name);
  if (it == all.end()) return false;
  it->second(s, out);
  return true;
}

}  // namespace ferrite::cts
