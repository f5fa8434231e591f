// The per-op table's cases for the internal ferrite.* ops (fused ops the passes create): each
// epilogue, layout (channels-last activations, [M, KH, KW, C] filters) and storage type a device
// library has a separate path for.
#include "cts/case_util.h"
#include "cts/model_builder.h"

namespace ferrite::cts {

namespace {

using V = ValueGen;
const std::string N = "N";
Attribute i(int64_t v) {
  return Attribute(v);
}

void fused_matmul_cases(const OpSchema& s, std::vector<Case>& out) {
  auto fm = [&](const std::string& v, std::vector<TensorSpec> ins, Attrs at) {
    out.push_back(single(s.name, v, std::move(ins), std::move(at), 1, "ferrite"));
  };
  auto bias = [](int64_t n) { return cst("bias", kF32, {n}, V::uniform(-1, 1)); };
  for (const char* act : {"none", "relu", "tanh", "sigmoid", "gelu", "gelu_tanh", "silu"})
    fm(act, {in("a", kF32, {3, 8}), cst("b", kF32, {8, 5}, V::uniform(-1, 1)), bias(5)},
       {{"activation", act}});
  fm("transB-residual",
     {in("a", kF32, {2, 3, 8}), cst("b", kF32, {6, 8}, V::uniform(-1, 1)), bias(6),
      in("res", kF32, {2, 3, 6})},
     {{"transB", i(1)}, {"activation", "relu"}});
  // f32 with columns % 4 == 0: the GPU's vector epilogue (4 columns per thread).
  fm("gelu-residual-f32x4",
     {in("a", kF32, {2, 6, 16}), cst("b", kF32, {16, 24}, V::uniform(-1, 1)), bias(24),
      in("res", kF32, {2, 6, 24})},
     {{"activation", "gelu"}});
  // 16-bit storage with columns % 8 == 0: the GPU's vector epilogue (8 columns per thread).
  fm("gelu-residual-bf16",
     {in("a", kBF16, {2, 6, 16}), cst("b", kBF16, {16, 24}, V::uniform(-1, 1)),
      cst("bias", kBF16, {24}, V::uniform(-1, 1)), in("res", kBF16, {2, 6, 24})},
     {{"activation", "gelu"}});
  // The tanh GELU in 16-bit storage: inside cuBLASLt's epilogue on the GPU (with a residual
  // added after it by the library's epilogue kernel).
  for (bool res : {false, true}) {
    std::vector<TensorSpec> ins = {in("a", kBF16, {2, 6, 16}),
                                   cst("b", kBF16, {16, 24}, V::uniform(-1, 1)),
                                   cst("bias", kBF16, {24}, V::uniform(-1, 1))};
    if (res) ins.push_back(in("res", kBF16, {2, 6, 24}));
    fm(res ? "gelu_tanh-residual-bf16" : "gelu_tanh-bf16", std::move(ins),
       {{"activation", "gelu_tanh"}});
  }
  fm("no-bias-residual",
     {in("a", kF32, {4, 4}), in("b", kF32, {4, 4}), omitted(), in("res", kF32, {4})}, {});
  out.push_back(with_runs(
      single(s.name, "symbolic",
             {in("a", kF32, {N, 16}), cst("b", kF32, {16, 8}, V::uniform(-1, 1)), bias(8)},
             {{"activation", "gelu"}}, 1, "ferrite"),
      {3}));
}

void fused_conv_cases(const OpSchema& s, std::vector<Case>& out) {
  auto fc = [&](const std::string& v, std::vector<TensorSpec> ins, Attrs at) {
    out.push_back(single(s.name, v, std::move(ins), std::move(at), 1, "ferrite"));
  };
  auto w = [](std::vector<int64_t> d) { return cst("w", kF32, d, V::uniform(-1, 1)); };
  auto b = [](int64_t n) { return cst("b", kF32, {n}, V::uniform(-1, 1)); };
  auto pads = Attribute(std::vector<int64_t>{1, 1, 1, 1});
  for (const char* act : {"relu", "sigmoid", "tanh", "hard_swish", "silu"})
    fc(std::string("3x3-") + act, {in("x", kF32, {1, 3, 7, 7}), w({4, 3, 3, 3}), b(4)},
       {{"pads", pads}, {"activation", act}});
  fc("clip-residual",
     {in("x", kF32, {2, 4, 6, 6}), w({4, 4, 3, 3}), b(4), in("res", kF32, {2, 4, 6, 6})},
     {{"pads", pads},
      {"activation", "clip"},
      {"activation_params", Attribute(std::vector<float>{0.f, 6.f})}});
  fc("depthwise-leakyrelu", {in("x", kF32, {1, 6, 5, 5}), w({6, 1, 3, 3}), b(6)},
     {{"group", int64_t{6}},
      {"pads", pads},
      {"activation", "leaky_relu"},
      {"activation_params", Attribute(std::vector<float>{0.1f})}});
  // [N, C, H, W] depthwise layers of the shapes cuda's shared-memory kernel tiles differently:
  // a width off its 4-column tiles with residual + activation, 5x5 stride 2 with asymmetric
  // pads, 7x7 planes many to a block, a wide strided row, and more blocks than its grid (the
  // kernel walks them in steps of the grid).
  fc("depthwise-3x3-tail-residual-silu",
     {in("x", kF32, {2, 8, 9, 11}), w({8, 1, 3, 3}), b(8), in("res", kF32, {2, 8, 9, 11})},
     {{"group", int64_t{8}}, {"pads", pads}, {"activation", "silu"}});
  fc("depthwise-5x5-s2-asymmetric", {in("x", kF32, {2, 6, 13, 10}), w({6, 1, 5, 5}), b(6)},
     {{"group", int64_t{6}},
      {"pads", Attribute(std::vector<int64_t>{2, 1, 1, 2})},
      {"strides", Attribute(std::vector<int64_t>{2, 2})},
      {"activation", "hard_swish"}});
  fc("depthwise-7x7-small-planes-gelu",
     {in("x", kF32, {4, 40, 7, 7}), w({40, 1, 7, 7}), b(40), in("res", kF32, {4, 40, 7, 7})},
     {{"group", int64_t{40}},
      {"pads", Attribute(std::vector<int64_t>{3, 3, 3, 3})},
      {"activation", "gelu"}});
  fc("depthwise-7x7-s2-wide-nobias", {in("x", kF32, {1, 3, 6, 301}), w({3, 1, 7, 7}), omitted()},
     {{"group", int64_t{3}},
      {"pads", Attribute(std::vector<int64_t>{3, 3, 3, 3})},
      {"strides", Attribute(std::vector<int64_t>{2, 2})}});
  fc("depthwise-3x3-many-blocks", {in("x", kF32, {8, 96, 56, 56}), w({96, 1, 3, 3}), b(96)},
     {{"group", int64_t{96}}, {"pads", pads}, {"activation", "relu"}});
  fc("1x1-residual-only",
     {in("x", kF32, {2, 8, 4, 4}), w({8, 8, 1, 1}), omitted(), in("res", kF32, {2, 8, 4, 4})}, {});
  out.push_back(with_runs(
      single(s.name, "symbolic-batch", {in("x", kF32, {N, 3, 6, 6}), w({4, 3, 3, 3}), b(4)},
             {{"pads", pads}, {"activation", "relu"}}, 1, "ferrite"),
      {2}));
  // channels_last: x, res and y are [N, H, W, C] (the layout-channels-last pass's form). One
  // case per path of a device library: direct, depthwise, strided, pointwise GEMM, residual,
  // dilated, more images than threads.
  const Attribute last = i(1);
  fc("nhwc-3x3-relu", {in("x", kF32, {1, 7, 7, 3}), w({4, 3, 3, 3}), b(4)},
     {{"pads", pads}, {"activation", "relu"}, {"channels_last", last}});
  fc("nhwc-depthwise-s2-hardswish", {in("x", kF32, {2, 9, 9, 16}), w({16, 1, 3, 3}), b(16)},
     {{"group", int64_t{16}},
      {"pads", pads},
      {"strides", Attribute(std::vector<int64_t>{2, 2})},
      {"activation", "hard_swish"},
      {"channels_last", last}});
  fc("nhwc-depthwise-5x5", {in("x", kF32, {1, 8, 8, 24}), w({24, 1, 5, 5}), omitted()},
     {{"group", int64_t{24}},
      {"pads", Attribute(std::vector<int64_t>{2, 2, 2, 2})},
      {"channels_last", last}});
  // 7x7 with a channel count off the vector widths (kernel tails), residual + GELU.
  fc("nhwc-depthwise-7x7-tail-residual",
     {in("x", kF32, {2, 9, 11, 20}), w({20, 1, 7, 7}), b(20), in("res", kF32, {2, 9, 11, 20})},
     {{"group", int64_t{20}},
      {"pads", Attribute(std::vector<int64_t>{3, 3, 3, 3})},
      {"activation", "gelu"},
      {"channels_last", last}});
  // Unequal kernel sides, dilation, asymmetric pads.
  fc("nhwc-depthwise-3x2-dilated", {in("x", kF32, {1, 10, 9, 32}), w({32, 1, 3, 2}), b(32)},
     {{"group", int64_t{32}},
      {"pads", Attribute(std::vector<int64_t>{2, 0, 1, 1})},
      {"dilations", Attribute(std::vector<int64_t>{2, 2})},
      {"channels_last", last}});
  fc("nhwc-1x1-bias-residual",
     {in("x", kF32, {3, 5, 5, 8}), w({12, 8, 1, 1}), b(12), in("res", kF32, {3, 5, 5, 12})},
     {{"activation", "relu"}, {"channels_last", last}});
  fc("nhwc-grouped-dilated-residual",
     {in("x", kF32, {3, 10, 10, 8}), w({8, 4, 3, 3}), b(8), in("res", kF32, {3, 10, 10, 8})},
     {{"group", int64_t{2}},
      {"pads", Attribute(std::vector<int64_t>{2, 2, 2, 2})},
      {"dilations", Attribute(std::vector<int64_t>{2, 2})},
      {"activation", "clip"},
      {"activation_params", Attribute(std::vector<float>{0.f, 6.f})},
      {"channels_last", last}});
  fc("nhwc-7x7-s2-asymmetric", {in("x", kF32, {1, 15, 13, 3}), w({8, 3, 7, 7}), b(8)},
     {{"pads", Attribute(std::vector<int64_t>{3, 2, 3, 4})},
      {"strides", Attribute(std::vector<int64_t>{2, 2})},
      {"channels_last", last}});
  // weights_last: W is [M, KH, KW, C/group] (cuda's cuDNN NHWC filters), also in bf16, the
  // dtype the cuda pipeline makes these for.
  auto wt = [](DType t, std::vector<int64_t> d) { return cst("w", t, d, V::uniform(-1, 1)); };
  auto bt = [](DType t, int64_t n) { return cst("b", t, {n}, V::uniform(-1, 1)); };
  fc("nhwc-ohwi-3x3-relu-residual",
     {in("x", kF32, {2, 7, 7, 8}), wt(kF32, {16, 3, 3, 8}), bt(kF32, 16),
      in("res", kF32, {2, 7, 7, 16})},
     {{"pads", pads}, {"activation", "relu"}, {"channels_last", last}, {"weights_last", last}});
  fc("nhwc-ohwi-depthwise-s2-bf16",
     {in("x", kBF16, {2, 9, 9, 16}), wt(kBF16, {16, 3, 3, 1}), bt(kBF16, 16)},
     {{"group", int64_t{16}},
      {"pads", pads},
      {"strides", Attribute(std::vector<int64_t>{2, 2})},
      {"activation", "hard_swish"},
      {"channels_last", last},
      {"weights_last", last}});
  fc("nhwc-ohwi-depthwise-7x7-residual-bf16",
     {in("x", kBF16, {2, 10, 10, 24}), wt(kBF16, {24, 7, 7, 1}), bt(kBF16, 24),
      in("res", kBF16, {2, 10, 10, 24})},
     {{"group", int64_t{24}},
      {"pads", Attribute(std::vector<int64_t>{3, 3, 3, 3})},
      {"activation", "relu"},
      {"channels_last", last},
      {"weights_last", last}});
  // Stride-1 depthwise (cuda: 4 output columns per thread): 3x3 without bias over a width
  // that is not a multiple of 4, 5x5 with padding wider than the image's edge columns.
  fc("nhwc-ohwi-depthwise-3x3-s1-nobias-bf16",
     {in("x", kBF16, {1, 6, 11, 16}), wt(kBF16, {16, 3, 3, 1}), omitted()},
     {{"group", int64_t{16}},
      {"pads", pads},
      {"activation", "hard_swish"},
      {"channels_last", last},
      {"weights_last", last}});
  fc("nhwc-ohwi-depthwise-5x5-s1-bf16",
     {in("x", kBF16, {2, 9, 3, 8}), wt(kBF16, {8, 5, 5, 1}), bt(kBF16, 8)},
     {{"group", int64_t{8}},
      {"pads", Attribute(std::vector<int64_t>{2, 2, 2, 2})},
      {"activation", "relu"},
      {"channels_last", last},
      {"weights_last", last}});
  // A serving-batch depthwise layer: 7 channel groups over 36 columns (a partial last block of
  // the row's (column, group) pairs), SiLU after the residual.
  fc("nhwc-ohwi-depthwise-3x3-batch-silu-residual-bf16",
     {in("x", kBF16, {16, 38, 36, 56}), wt(kBF16, {56, 3, 3, 1}), bt(kBF16, 56),
      in("res", kBF16, {16, 38, 36, 56})},
     {{"group", int64_t{56}},
      {"pads", pads},
      {"activation", "silu"},
      {"channels_last", last},
      {"weights_last", last}});
  // More output rows (N * OH = 67584) than a grid's y dimension holds (cuda: the kernel walks
  // the rows in steps of the grid).
  fc("nhwc-ohwi-depthwise-many-rows-bf16",
     {in("x", kBF16, {2048, 33, 1, 8}), wt(kBF16, {8, 3, 3, 1}), bt(kBF16, 8)},
     {{"group", int64_t{8}}, {"pads", pads}, {"channels_last", last}, {"weights_last", last}});
  fc("nhwc-ohwi-1x1-residual-bf16",
     {in("x", kBF16, {2, 5, 5, 32}), wt(kBF16, {64, 1, 1, 32}), omitted(),
      in("res", kBF16, {2, 5, 5, 64})},
     {{"activation", "relu"}, {"channels_last", last}, {"weights_last", last}});
  fc("nhwc-ohwi-7x7-s2-bf16", {in("x", kBF16, {2, 16, 16, 3}), wt(kBF16, {32, 7, 7, 3})},
     {{"pads", Attribute(std::vector<int64_t>{3, 3, 3, 3})},
      {"strides", Attribute(std::vector<int64_t>{2, 2})},
      {"channels_last", last},
      {"weights_last", last}});
}

void pool_cases(const OpSchema& s, std::vector<Case>& out) {
  auto pl = [&](const std::string& v, std::vector<DimSpec> x, Attrs at) {
    out.push_back(single(s.name, v, {in("x", kF32, std::move(x))}, std::move(at), 1, "ferrite"));
  };
  auto ints = [](std::vector<int64_t> v) { return Attribute(std::move(v)); };
  pl("max-3x3-s2-pad-nhwc", {2, 9, 9, 16},
     {{"mode", "max"},
      {"kernel_shape", ints({3, 3})},
      {"strides", ints({2, 2})},
      {"pads", ints({1, 1, 1, 1})}});
  pl("max-2x2-ceil-nhwc", {1, 7, 5, 3},
     {{"mode", "max"},
      {"kernel_shape", ints({2, 2})},
      {"strides", ints({2, 2})},
      {"ceil_mode", i(1)}});
  pl("average-2x2-s2-nhwc", {2, 8, 6, 24},
     {{"mode", "average"}, {"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}});
  pl("average-3x3-include-pad-nhwc", {1, 6, 6, 8},
     {{"mode", "average"},
      {"kernel_shape", ints({3, 3})},
      {"pads", ints({1, 1, 1, 1})},
      {"count_include_pad", i(1)}});
  pl("average-3x3-exclude-pad-ceil-nhwc", {1, 7, 7, 5},
     {{"mode", "average"},
      {"kernel_shape", ints({3, 3})},
      {"strides", ints({2, 2})},
      {"pads", ints({1, 0, 1, 0})},
      {"ceil_mode", i(1)}});
  pl("max-nchw", {1, 4, 6, 6},
     {{"mode", "max"}, {"channels_last", i(0)}, {"kernel_shape", ints({2, 2})}});
  out.push_back(single(s.name, "max-3x3-s2-bf16-nhwc", {in("x", kBF16, {2, 9, 9, 16})},
                       {{"mode", "max"},
                        {"kernel_shape", ints({3, 3})},
                        {"strides", ints({2, 2})},
                        {"pads", ints({1, 1, 1, 1})}},
                       1, "ferrite"));
  out.push_back(
      single(s.name, "average-2x2-bf16-nhwc", {in("x", kBF16, {2, 8, 6, 24})},
             {{"mode", "average"}, {"kernel_shape", ints({2, 2})}, {"strides", ints({2, 2})}}, 1,
             "ferrite"));
}

void attention_cases(const OpSchema& s, std::vector<Case>& out) {
  auto at = [&](const std::string& v, std::vector<TensorSpec> ins, Attrs a) {
    out.push_back(single(s.name, v, std::move(ins), std::move(a), 1, "ferrite"));
  };
  at("3d", {in("q", kF32, {2, 4, 8}), in("k", kF32, {2, 6, 8}), in("v", kF32, {2, 6, 8})}, {});
  at("mask",
     {in("q", kF32, {1, 2, 4, 8}), in("k", kF32, {1, 2, 5, 8}), in("v", kF32, {1, 2, 5, 4}),
      in("mask", kF32, {4, 5}, V::uniform(-3, 0))},
     {{"scale", 0.3f}});
  at("causal", {in("q", kF32, {2, 5, 8}), in("k", kF32, {2, 5, 8}), in("v", kF32, {2, 5, 8})},
     {{"causal", i(1)}});
  at("long",
     {in("q", kF32, {1, 4, 97, 64}), in("k", kF32, {1, 4, 131, 64}), in("v", kF32, {1, 4, 131, 64}),
      in("mask", kF32, {1, 1, 1, 131}, V::uniform(-2, 0))},
     {});
  // The f32 kernel's tiles: ViT's 197 rows and keys (a last query tile of 5 rows, a last key
  // tile of 5 keys), several K / V tiles in flight, causal tiles, 128-wide heads (32-key
  // tiles), and head dims off the 4-element width (loaded without cp.async).
  at("vit-f32",
     {in("q", kF32, {2, 3, 197, 64}), in("k", kF32, {2, 3, 197, 64}),
      in("v", kF32, {2, 3, 197, 64})},
     {});
  at("long-causal-f32",
     {in("q", kF32, {1, 2, 150, 32}), in("k", kF32, {1, 2, 150, 32}),
      in("v", kF32, {1, 2, 150, 32})},
     {{"causal", i(1)}});
  at("head-128-f32",
     {in("q", kF32, {1, 2, 50, 128}), in("k", kF32, {1, 2, 77, 128}), in("v", kF32, {1, 2, 77, 96}),
      in("mask", kF32, {50, 77}, V::uniform(-2, 0))},
     {});
  at("head-6-f32",
     {in("q", kF32, {1, 2, 70, 6}), in("k", kF32, {1, 2, 90, 6}), in("v", kF32, {1, 2, 90, 10})},
     {{"scale", 0.5f}});
  // Shifted windows (fuse-attention's split batch dim): batch dims [images, windows, heads], a
  // per-window and per-head mask broadcast over the images.
  at("windows-f32",
     {in("q", kF32, {2, 4, 3, 49, 32}), in("k", kF32, {2, 4, 3, 49, 32}),
      in("v", kF32, {2, 4, 3, 49, 32}), in("mask", kF32, {1, 4, 3, 49, 49}, V::uniform(-3, 0))},
     {{"scale", 0.18f}});
  at("windows-bf16",
     {in("q", kBF16, {2, 4, 3, 49, 32}), in("k", kBF16, {2, 4, 3, 49, 32}),
      in("v", kBF16, {2, 4, 3, 49, 32}), in("mask", kBF16, {1, 4, 3, 49, 49}, V::uniform(-3, 0))},
     {{"scale", 0.18f}});
  // PyTorch's _safe_softmax: row 1 is fully masked (0 out), row 3 holds a NaN (NaN out).
  const double ninf = -std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  at("masked-rows-zero",
     {in("q", kF32, {2, 2, 4, 8}), in("k", kF32, {2, 2, 5, 8}), in("v", kF32, {2, 2, 5, 8}),
      in("mask", kF32, {4, 5},
         V::exactly({0,    -1, 0,    -2,   0,    ninf, ninf, ninf, ninf, ninf,
                     ninf, 0,  ninf, ninf, ninf, nan,  0,    0,    ninf, 0}))},
     {{"masked_rows_zero", i(1)}});
  // 2-byte storage: the cuda device's tensor-core kernel (P rounded to the storage type).
  at("long-bf16",
     {in("q", kBF16, {1, 4, 97, 64}), in("k", kBF16, {1, 4, 131, 64}),
      in("v", kBF16, {1, 4, 131, 64}), in("mask", kBF16, {1, 1, 1, 131}, V::uniform(-2, 0))},
     {});
  at("causal-f16",
     {in("q", kF16, {2, 2, 70, 32}), in("k", kF16, {2, 2, 70, 32}), in("v", kF16, {2, 2, 70, 32})},
     {{"causal", i(1)}});
  at("masked-rows-zero-bf16",
     {in("q", kBF16, {2, 2, 4, 8}), in("k", kBF16, {2, 2, 5, 8}), in("v", kBF16, {2, 2, 5, 8}),
      in("mask", kBF16, {4, 5},
         V::exactly({0,    -1, 0,    -2,   0,    ninf, ninf, ninf, ninf, ninf,
                     ninf, 0,  ninf, ninf, ninf, nan,  0,    0,    ninf, 0}))},
     {{"masked_rows_zero", i(1)}});
  // Heads after the sequence ([B, S, H, D], fold-attention-layout): strided rows on cuda.
  auto tr = [](std::vector<int64_t> t) { return Attribute(std::move(t)); };
  at("transposed-bf16",
     {in("q", kBF16, {2, 70, 3, 64}), in("k", kBF16, {2, 90, 3, 64}),
      in("v", kBF16, {2, 90, 3, 64}), in("mask", kBF16, {2, 1, 1, 90}, V::uniform(-2, 0))},
     {{"transposed", tr({1, 1, 1, 1})}});
  at("transposed-f32-causal",
     {in("q", kF32, {2, 33, 2, 16}), in("k", kF32, {2, 33, 2, 16}), in("v", kF32, {2, 33, 2, 16})},
     {{"causal", i(1)}, {"transposed", tr({1, 1, 1, 1})}});
  // Sequence first ([S, B, H, D], nn.MultiheadAttention's layout): other strides on cuda.
  at("sequence-first-bf16",
     {in("q", kBF16, {70, 2, 3, 64}), in("k", kBF16, {90, 2, 3, 64}),
      in("v", kBF16, {90, 2, 3, 64}), in("mask", kBF16, {2, 1, 1, 90}, V::uniform(-2, 0))},
     {{"transposed", tr({2, 2, 2, 2})}});
  at("sequence-first-result-f32",
     {in("q", kF32, {2, 3, 33, 16}), in("k", kF32, {2, 33, 3, 16}), in("v", kF32, {33, 2, 3, 16})},
     {{"causal", i(1)}, {"transposed", tr({0, 1, 2, 2})}});
  at("transposed-some-f16",
     {in("q", kF16, {1, 2, 40, 32}), in("k", kF16, {1, 40, 2, 32}), in("v", kF16, {1, 40, 2, 32})},
     {{"transposed", tr({0, 1, 1, 0})}});
  out.push_back(with_runs(single(s.name, "symbolic-seq",
                                 {in("q", kF32, {1, 2, N, 8}), in("k", kF32, {1, 2, N, 8}),
                                  in("v", kF32, {1, 2, N, 8})},
                                 {{"causal", i(1)}, {"nan_to_zero", i(1)}}, 1, "ferrite"),
                          {6}));
}

// ferrite.ConvGradWeight(X, dY): dY has the convolution's output shape for X and the window.
void conv_grad_weight_cases(const OpSchema& s, std::vector<Case>& out) {
  auto gw = [&](const std::string& v, DType t, std::vector<DimSpec> x, std::vector<DimSpec> dy,
                Attrs at) {
    out.push_back(single(s.name, v, {in("x", t, std::move(x)), in("dy", t, std::move(dy))},
                         std::move(at), 1, "ferrite"));
  };
  auto ints = [](std::vector<int64_t> v) { return Attribute(std::move(v)); };
  gw("3x3-s2-p1", kF32, {2, 3, 9, 9}, {2, 4, 5, 5},
     {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}});
  // The forward's floor division leaves the last input column unread.
  gw("3x3-s2-unread-edge", kF32, {2, 3, 8, 8}, {2, 4, 4, 4},
     {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}});
  gw("1x1-s2", kF32, {2, 8, 7, 7}, {2, 6, 4, 4},
     {{"kernel_shape", ints({1, 1})}, {"strides", ints({2, 2})}});
  gw("group-dilation", kF32, {2, 4, 7, 7}, {2, 6, 7, 7},
     {{"kernel_shape", ints({3, 3})},
      {"group", int64_t{2}},
      {"dilations", ints({2, 2})},
      {"pads", ints({2, 2, 2, 2})}});
  gw("depthwise", kF32, {2, 6, 6, 6}, {2, 6, 6, 6},
     {{"kernel_shape", ints({3, 3})}, {"group", int64_t{6}}, {"pads", ints({1, 1, 1, 1})}});
  gw("7x7-s2-stem", kF32, {2, 3, 16, 16}, {2, 8, 8, 8},
     {{"kernel_shape", ints({7, 7})}, {"strides", ints({2, 2})}, {"pads", ints({3, 3, 3, 3})}});
  gw("1d", kF32, {2, 3, 17}, {2, 5, 5}, {{"kernel_shape", ints({4})}, {"strides", ints({3})}});
  gw("bf16", kBF16, {2, 8, 8, 8}, {2, 8, 8, 8},
     {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}});
  gw("f16", kF16, {2, 8, 6, 6}, {2, 4, 3, 3},
     {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}});
  out.push_back(with_runs(
      single(s.name, "symbolic-batch", {in("x", kF32, {N, 3, 6, 6}), in("dy", kF32, {N, 4, 6, 6})},
             {{"kernel_shape", ints({3, 3})}, {"pads", ints({1, 1, 1, 1})}}, 1, "ferrite"),
      {3}));
}

}  // namespace

void fused_op_overrides(std::map<std::string, CaseFn>& m) {
  m["ferrite.FusedMatMul"] = fused_matmul_cases;
  m["ferrite.FusedConv"] = fused_conv_cases;
  m["ferrite.Pool"] = pool_cases;
  m["ferrite.Attention"] = attention_cases;
  m["ferrite.ConvGradWeight"] = conv_grad_weight_cases;
}

}  // namespace ferrite::cts
