// Fusion patterns: multi-op graphs as exporters emit them, so that the device's default passes
// and its lowering (pointwise fusion, row kernels with prologues/epilogues, GEMM epilogues,
// attention) are exercised together. Each compiles alone.
#include <cmath>
#include <cstdint>

#include "cts/case_util.h"

namespace ferrite::cts {

namespace {

using V = ValueGen;
Attribute I(std::vector<int64_t> v) {
  return Attribute(std::move(v));
}
Attribute i(int64_t v) {
  return Attribute(v);
}
const std::string N = "N";

Case pattern(const std::string& name, std::vector<TensorSpec> tensors, std::vector<NodeSpec> nodes,
             std::vector<std::string> outputs, std::vector<int64_t> sizes = {}) {
  Case c;
  c.group = "fusion";
  c.name = "fusion/" + name;
  c.standalone = true;
  c.tensors = std::move(tensors);
  c.nodes = std::move(nodes);
  c.outputs = std::move(outputs);
  if (!sizes.empty()) c = with_runs(std::move(c), sizes);
  return c;
}

TensorSpec w(std::string name, std::vector<int64_t> dims, double lo = -0.5, double hi = 0.5) {
  return cst(std::move(name), kF32, std::move(dims), V::uniform(lo, hi));
}
TensorSpec scalar(std::string name, double v) {
  return cst(std::move(name), kF32, {}, {v});
}

// Gelu as PyTorch exports it: x * 0.5 * (1 + erf(x / sqrt(2))).
std::vector<NodeSpec> erf_gelu(const std::string& x, const std::string& y) {
  return {{"Div", {x, "sqrt2"}, {y + "_d"}, {}},
          {"Erf", {y + "_d"}, {y + "_e"}, {}},
          {"Add", {y + "_e", "one"}, {y + "_p"}, {}},
          {"Mul", {x, y + "_p"}, {y + "_m"}, {}},
          {"Mul", {y + "_m", "half"}, {y}, {}}};
}

// LayerNorm as exported before opset 17: mean, centred square mean, rsqrt, affine.
std::vector<NodeSpec> decomposed_layernorm(const std::string& x, const std::string& y) {
  Attrs keep = {{"keepdims", i(1)}};
  return {{"ReduceMean", {x, "ax"}, {y + "_mu"}, keep},
          {"Sub", {x, y + "_mu"}, {y + "_c"}, {}},
          {"Pow", {y + "_c", "two"}, {y + "_sq"}, {}},
          {"ReduceMean", {y + "_sq", "ax"}, {y + "_var"}, keep},
          {"Add", {y + "_var", "eps"}, {y + "_ve"}, {}},
          {"Sqrt", {y + "_ve"}, {y + "_sd"}, {}},
          {"Div", {y + "_c", y + "_sd"}, {y + "_n"}, {}},
          {"Mul", {y + "_n", "gamma"}, {y + "_g"}, {}},
          {"Add", {y + "_g", "beta"}, {y}, {}}};
}

std::vector<TensorSpec> gelu_consts() {
  return {scalar("sqrt2", std::sqrt(2.0)), scalar("one", 1), scalar("half", 0.5)};
}

template <class T>
std::vector<T> cat(std::vector<T> a, const std::vector<T>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Pointwise, row and GEMM/conv epilogue patterns, and an exported attention block.
void kernel_fusion_cases(std::vector<Case>& out) {
  // Views (transpose, slice, expand) feeding a pointwise chain with broadcasts.
  out.push_back(pattern("pointwise-views",
                        {in("x", kF32, {2, 8, 3}), in("b", kF32, {3, 1}), w("s", {6}),
                         ints("st", {1}), ints("en", {7}), ints("axs", {2})},
                        {{"Transpose", {"x"}, {"t"}, {{"perm", I({0, 2, 1})}}},
                         {"Slice", {"t", "st", "en", "axs"}, {"sl"}, {}},
                         {"Mul", {"sl", "s"}, {"m"}, {}},
                         {"Add", {"m", "b"}, {"a"}, {}},
                         {"Sigmoid", {"a"}, {"sg"}, {}},
                         {"Mul", {"a", "sg"}, {"y"}, {}}},
                        {"y"}));
  // Softmax with a scale-and-mask prologue and a multiply epilogue.
  out.push_back(pattern("softmax-prologue-epilogue",
                        {in("x", kF32, {2, 4, 9}), in("mask", kF32, {9}, V::uniform(-4, 0)),
                         scalar("sc", 0.125), in("g", kF32, {2, 4, 1})},
                        {{"Mul", {"x", "sc"}, {"xs"}, {}},
                         {"Add", {"xs", "mask"}, {"xm"}, {}},
                         {"Softmax", {"xm"}, {"p"}, {{"axis", i(-1)}}},
                         {"Mul", {"p", "g"}, {"y"}, {}}},
                        {"y"}));
  // Residual add, exported LayerNorm (fuse-layernorm), Relu epilogue.
  out.push_back(pattern(
      "layernorm-residual",
      {in("x", kF32, {N, 5, 16}), in("r", kF32, {N, 5, 16}), ints("ax", {-1}), scalar("two", 2),
       scalar("eps", 1e-5), w("gamma", {16}, 0.5, 1.5), w("beta", {16})},
      cat<NodeSpec>({{"Add", {"x", "r"}, {"h"}, {}}},
                    cat<NodeSpec>(decomposed_layernorm("h", "ln"), {{"Relu", {"ln"}, {"y"}, {}}})),
      {"y"}, {3}));
  // RMSNorm as Llama and T5 export it: the row's mean square, rsqrt, the scale read broadcast
  // over the row (one row kernel storing every element), then the weight.
  out.push_back(pattern(
      "rmsnorm",
      {in("x", kF32, {N, 5, 32}), ints("ax", {-1}), scalar("eps", 1e-6), w("g", {32}, 0.5, 1.5)},
      {{"Mul", {"x", "x"}, {"sq"}, {}},
       {"ReduceMean", {"sq", "ax"}, {"ms"}, {{"keepdims", i(1)}}},
       {"Add", {"ms", "eps"}, {"v"}, {}},
       {"Sqrt", {"v"}, {"r"}, {}},
       {"Reciprocal", {"r"}, {"inv"}, {}},
       {"Mul", {"x", "inv"}, {"n"}, {}},
       {"Mul", {"n", "g"}, {"y"}, {}}},
      {"y"}, {3}));
  // Rotary embedding: rotate_half = cat(-x2, x1) read by one Mul (the Concat folds into it),
  // and a three-piece Concat along a middle axis into an activation (a library copy).
  out.push_back(pattern("rotary-concat",
                        {in("x", kF32, {N, 2, 6, 8}), w("cos", {6, 8}, -1, 1),
                         w("sin", {6, 8}, -1, 1), in("z", kF32, {N, 3, 8}), ints("s0", {0}),
                         ints("s4", {4}), ints("s8", {8}), ints("ax", {3})},
                        {{"Slice", {"x", "s0", "s4", "ax"}, {"x1"}, {}},
                         {"Slice", {"x", "s4", "s8", "ax"}, {"x2"}, {}},
                         {"Neg", {"x2"}, {"nx2"}, {}},
                         {"Concat", {"nx2", "x1"}, {"rot"}, {{"axis", i(-1)}}},
                         {"Mul", {"x", "cos"}, {"a"}, {}},
                         {"Mul", {"rot", "sin"}, {"b"}, {}},
                         {"Add", {"a", "b"}, {"y"}, {}},
                         {"Concat", {"z", "z", "z"}, {"zc"}, {{"axis", i(1)}}},
                         {"Sigmoid", {"zc"}, {"y2"}, {}}},
                        {"y", "y2"}, {2}));
  // torch.roll as exported (Concat of two Slices per rolled dim: Swin's shifted windows), folded
  // into its readers as a rotated index: rolls along H (negative start) and W, then the window
  // partition (Reshape, Transpose, Reshape) into a MatMul; and a roll along the innermost axis
  // read by an Add.
  out.push_back(
      pattern("roll-windows",
              {in("x", kF32, {N, 8, 8, 4}), w("wm", {4, 4}), ints("m3", {-3}), ints("p3", {3}),
               ints("z", {0}), ints("big", {INT64_MAX}), ints("a1", {1}), ints("a2", {2}),
               ints("a3", {3}), ints("win", {0, 2, 4, 2, 4, 4}), ints("tok", {-1, 16, 4})},
              {{"Slice", {"x", "m3", "big", "a1"}, {"h1"}, {}},
               {"Slice", {"x", "z", "m3", "a1"}, {"h2"}, {}},
               {"Concat", {"h1", "h2"}, {"rh"}, {{"axis", i(1)}}},
               {"Slice", {"rh", "p3", "big", "a2"}, {"w1"}, {}},
               {"Slice", {"rh", "z", "p3", "a2"}, {"w2"}, {}},
               {"Concat", {"w1", "w2"}, {"rw"}, {{"axis", i(2)}}},
               {"Reshape", {"rw", "win"}, {"wv"}, {}},
               {"Transpose", {"wv"}, {"wt"}, {{"perm", I({0, 1, 3, 2, 4, 5})}}},
               {"Reshape", {"wt", "tok"}, {"t"}, {}},
               {"MatMul", {"t", "wm"}, {"y"}, {}},
               {"Slice", {"x", "p3", "big", "a3"}, {"c1"}, {}},
               {"Slice", {"x", "z", "p3", "a3"}, {"c2"}, {}},
               {"Concat", {"c1", "c2"}, {"rc"}, {{"axis", i(3)}}},
               {"Add", {"rc", "x"}, {"y2"}, {}}},
              {"y", "y2"}, {2}));
  // ShuffleNet's channel shuffle on channels-last maps: the Concat of two branches folds into the
  // shuffle's copy (Reshape, Transpose, Reshape), then the Split.
  out.push_back(pattern("channel-shuffle",
                        {in("a", kF32, {N, 4, 4, 6}), in("b", kF32, {N, 4, 4, 6}),
                         ints("s5", {0, 4, 4, 2, 6}), ints("s4", {0, 4, 4, 12})},
                        {{"Concat", {"a", "b"}, {"c"}, {{"axis", i(3)}}},
                         {"Reshape", {"c", "s5"}, {"v"}, {}},
                         {"Transpose", {"v"}, {"t"}, {{"perm", I({0, 1, 2, 4, 3})}}},
                         {"Reshape", {"t", "s4"}, {"w"}, {}},
                         {"Split", {"w"}, {"y0", "y1"}, {{"axis", i(3)}, {"num_outputs", i(2)}}}},
                        {"y0", "y1"}, {2}));
  // MatMul + bias + erf Gelu (fuse-gelu, fuse-matmul-epilogue), then a second MatMul.
  out.push_back(pattern(
      "mlp-gelu",
      cat(std::vector<TensorSpec>{in("x", kF32, {N, 32}), w("w1", {32, 64}), w("b1", {64}),
                                  w("w2", {64, 16}), w("b2", {16})},
          gelu_consts()),
      cat<NodeSpec>(
          cat<NodeSpec>({{"MatMul", {"x", "w1"}, {"h"}, {}}, {"Add", {"h", "b1"}, {"hb"}, {}}},
                        erf_gelu("hb", "g")),
          {{"MatMul", {"g", "w2"}, {"o"}, {}}, {"Add", {"o", "b2"}, {"y"}, {}}}),
      {"y"}, {4}));
  // MatMul + bias + each activation whose FusedMatMul epilogue no GEMM library computes itself
  // (fuse-matmul-epilogue): the devices run it in their own epilogue (cuda's library kernel, cpu
  // after oneDNN where its post-op would drop NaN). Inputs reach the activations' kinks.
  const std::vector<std::pair<std::string, NodeSpec>> epilogues = {
      {"leaky-relu", {"LeakyRelu", {"hb"}, {"y"}, {{"alpha", Attribute(0.2f)}}}},
      {"clip", {"Clip", {"hb", "lo", "hi"}, {"y"}, {}}},
      {"hard-sigmoid",
       {"HardSigmoid", {"hb"}, {"y"}, {{"alpha", Attribute(0.25f)}, {"beta", Attribute(0.4f)}}}},
      {"hard-swish", {"HardSwish", {"hb"}, {"y"}, {}}}};
  for (const auto& [name, act] : epilogues)
    out.push_back(pattern(
        "matmul-" + name,
        {in("x", kF32, {N, 16}, V::uniform(-2, 2)), w("wm", {16, 24}, -1, 1), w("bm", {24}, -1, 1),
         scalar("lo", -0.75), scalar("hi", 1.5)},
        {{"MatMul", {"x", "wm"}, {"h"}, {}}, {"Add", {"h", "bm"}, {"hb"}, {}}, act}, {"y"}, {3}));
  // Conv + BatchNorm + Relu (fold-conv-batchnorm).
  out.push_back(pattern("conv-bn-relu",
                        {in("x", kF32, {N, 3, 10, 10}), w("wc", {8, 3, 3, 3}), w("bc", {8}),
                         w("sc", {8}, 0.5, 1.5), w("bb", {8}), w("mu", {8}), w("var", {8}, 0.5, 2)},
                        {{"Conv", {"x", "wc", "bc"}, {"c"}, {{"pads", I({1, 1, 1, 1})}}},
                         {"BatchNormalization", {"c", "sc", "bb", "mu", "var"}, {"bn"}, {}},
                         {"Relu", {"bn"}, {"y"}, {}}},
                        {"y"}, {2}));
  // A transformer attention block as exported: projections, head split, scaled scores, mask,
  // softmax, context, head merge, output projection, residual (fuse-attention).
  {
    std::vector<TensorSpec> t = {in("x", kF32, {1, N, 16}),
                                 in("mask", kF32, {1, 1, 1, N}, V::uniform(-2, 0)),
                                 w("wq", {16, 16}),
                                 w("wk", {16, 16}),
                                 w("wv", {16, 16}),
                                 w("wo", {16, 16}),
                                 w("bq", {16}),
                                 ints("split_shape", {1, -1, 2, 8}),
                                 ints("merge_shape", {1, -1, 16}),
                                 scalar("rs", std::sqrt(8.0))};
    std::vector<NodeSpec> n = {{"MatMul", {"x", "wq"}, {"q0"}, {}},
                               {"Add", {"q0", "bq"}, {"q1"}, {}},
                               {"MatMul", {"x", "wk"}, {"k0"}, {}},
                               {"MatMul", {"x", "wv"}, {"v0"}, {}},
                               {"Reshape", {"q1", "split_shape"}, {"q2"}, {}},
                               {"Reshape", {"k0", "split_shape"}, {"k2"}, {}},
                               {"Reshape", {"v0", "split_shape"}, {"v2"}, {}},
                               {"Transpose", {"q2"}, {"q"}, {{"perm", I({0, 2, 1, 3})}}},
                               {"Transpose", {"k2"}, {"kt"}, {{"perm", I({0, 2, 3, 1})}}},
                               {"Transpose", {"v2"}, {"v"}, {{"perm", I({0, 2, 1, 3})}}},
                               {"MatMul", {"q", "kt"}, {"s0"}, {}},
                               {"Div", {"s0", "rs"}, {"s1"}, {}},
                               {"Add", {"s1", "mask"}, {"s2"}, {}},
                               {"Softmax", {"s2"}, {"p"}, {{"axis", i(-1)}}},
                               {"MatMul", {"p", "v"}, {"c0"}, {}},
                               {"Transpose", {"c0"}, {"c1"}, {{"perm", I({0, 2, 1, 3})}}},
                               {"Reshape", {"c1", "merge_shape"}, {"c2"}, {}},
                               {"MatMul", {"c2", "wo"}, {"o"}, {}},
                               {"Add", {"o", "x"}, {"y"}, {}}};
    out.push_back(pattern("attention-block", t, n, {"y"}, {5, 9}));
  }
}

// Reductions, several consumers, dynamic shapes, heads, mixed precision and index arithmetic.
void graph_fusion_cases(std::vector<Case>& out) {
  // Reductions with keepdims feeding pointwise consumers (a hand-written softmax and an L2 norm).
  out.push_back(pattern("reductions-keepdims",
                        {in("x", kF32, {3, 4, 12}), ints("ax", {-1}), ints("ax1", {1})},
                        {{"ReduceMax", {"x", "ax"}, {"mx"}, {{"keepdims", i(1)}}},
                         {"Sub", {"x", "mx"}, {"c"}, {}},
                         {"Exp", {"c"}, {"e"}, {}},
                         {"ReduceSum", {"e", "ax"}, {"s"}, {{"keepdims", i(1)}}},
                         {"Div", {"e", "s"}, {"p"}, {}},
                         {"ReduceL2", {"x", "ax1"}, {"l2"}, {{"keepdims", i(1)}}},
                         {"Div", {"x", "l2"}, {"xn"}, {}},
                         {"ReduceMean", {"xn", "ax1"}, {"y2"}, {{"keepdims", i(0)}}}},
                        {"p", "y2"}));
  // One value used by a reduction, a pointwise kernel and as a graph output.
  out.push_back(pattern("multi-consumer",
                        {in("x", kF32, {4, 10}), in("b", kF32, {10}), ints("ax", {1})},
                        {{"Add", {"x", "b"}, {"h"}, {}},
                         {"Tanh", {"h"}, {"t"}, {}},
                         {"ReduceSum", {"h", "ax"}, {"s"}, {{"keepdims", i(1)}}},
                         {"Mul", {"t", "s"}, {"y"}, {}}},
                        {"h", "y"}));
  // Dynamic batch through a Shape -> Gather -> Concat -> Reshape chain, run at two sizes.
  out.push_back(pattern(
      "dynamic-reshape",
      {in("x", kF32, {N, 4, 6}), cst("zero", kI64, {}, {0}), ints("tail", {-1}), w("wl", {24, 5})},
      {{"Shape", {"x"}, {"shp"}, {}},
       {"Gather", {"shp", "zero"}, {"bdim"}, {{"axis", i(0)}}},
       {"Unsqueeze", {"bdim", "zeroaxis"}, {"bdim1"}, {}},
       {"Concat", {"bdim1", "tail"}, {"newshape"}, {{"axis", i(0)}}},
       {"Reshape", {"x", "newshape"}, {"flat"}, {}},
       {"MatMul", {"flat", "wl"}, {"o"}, {}},
       {"Relu", {"o"}, {"y"}, {}}},
      {"y"}, {2, 7}));
  out.back().tensors.push_back(ints("zeroaxis", {0}));
  // Classifier head: global pooling, flatten, Gemm with transB, softmax.
  out.push_back(pattern("classifier-head",
                        {in("x", kF32, {N, 8, 5, 5}), w("wg", {10, 8}), w("bg", {10})},
                        {{"GlobalAveragePool", {"x"}, {"g"}, {}},
                         {"Flatten", {"g"}, {"f"}, {{"axis", i(1)}}},
                         {"Gemm", {"f", "wg", "bg"}, {"l"}, {{"transB", i(1)}}},
                         {"Softmax", {"l"}, {"y"}, {{"axis", i(1)}}}},
                        {"y"}, {3}));
  // Mixed precision: f16 storage with arithmetic between casts.
  out.push_back(pattern("cast-chain", {in("x", kF32, {4, 8}), in("h", kF16, {8})},
                        {{"Cast", {"x"}, {"xh"}, {{"to", i(dtype_to_onnx(kF16))}}},
                         {"Mul", {"xh", "h"}, {"m"}, {}},
                         {"Cast", {"m"}, {"mf"}, {{"to", i(dtype_to_onnx(kF32))}}},
                         {"Exp", {"mf"}, {"y"}, {}}},
                        {"y"}));
  // The NaN guard PyTorch exports around softmax of fully masked rows.
  out.push_back(
      pattern("masked-softmax-guard",
              {in("x", kF32, {3, 6}),
               in("m", kF32, {3, 6},
                  V::exactly({0, 0, -INFINITY, 0, -INFINITY, 0, -INFINITY, -INFINITY, -INFINITY,
                              -INFINITY, -INFINITY, -INFINITY, 0, 0, 0, 0, 0, 0})),
               scalar("z", 0)},
              {{"Add", {"x", "m"}, {"xm"}, {}},
               {"Softmax", {"xm"}, {"p"}, {{"axis", i(-1)}}},
               {"IsNaN", {"p"}, {"nan"}, {}},
               {"Where", {"nan", "z", "p"}, {"y"}, {}}},
              {"y"}));
  // Integer index arithmetic next to float math (position ids, embedding lookup).
  out.push_back(pattern("embedding-positions",
                        {in("ids", kI64, {2, N}, V::ints(0, 19)), w("emb", {20, 8}),
                         w("pos", {16, 8}), cst("zero", kI64, {}, {0}), cst("one", kI64, {}, {1})},
                        {{"Shape", {"ids"}, {"shp"}, {}},
                         {"Gather", {"shp", "one"}, {"len"}, {}},
                         {"Range", {"zero", "len", "one"}, {"positions"}, {}},
                         {"Gather", {"emb", "ids"}, {"e"}, {}},
                         {"Gather", {"pos", "positions"}, {"p"}, {}},
                         {"Add", {"e", "p"}, {"y"}, {}}},
                        {"y"}, {5, 11}));
}

}  // namespace

std::vector<Case> fusion_cases() {
  std::vector<Case> out;
  kernel_fusion_cases(out);
  graph_fusion_cases(out);
  for (Case& c : out) c.opset = 18;
  return out;
}

}  // namespace ferrite::cts
