// The cpu device's library kernels (oneDNN GEMM/convolution, own depthwise and attention) against
// the op table's reference kernels on random shapes and attribute combinations, on one and on
// several threads, with graph-constant weights (the packed-weights path) and without.
#include "backends/cpu/cpu_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "backends/cpu/kernels/kernel_stats.h"
#include "backends/cpu/thread_pool.h"
#include "test_util.h"

namespace ferrite {
namespace {

using testing::ModelBuilder;

struct Attr {
  std::string name;
  std::variant<int64_t, float, std::string, std::vector<int64_t>, std::vector<float>> value;
};

void add_attr(onnx::NodeProto* n, const Attr& a) {
  auto* p = n->add_attribute();
  p->set_name(a.name);
  if (auto* i = std::get_if<int64_t>(&a.value)) {
    p->set_type(onnx::AttributeProto::INT);
    p->set_i(*i);
  } else if (auto* f = std::get_if<float>(&a.value)) {
    p->set_type(onnx::AttributeProto::FLOAT);
    p->set_f(*f);
  } else if (auto* s = std::get_if<std::string>(&a.value)) {
    p->set_type(onnx::AttributeProto::STRING);
    p->set_s(*s);
  } else if (auto* fs = std::get_if<std::vector<float>>(&a.value)) {
    p->set_type(onnx::AttributeProto::FLOATS);
    for (float v : *fs) p->add_floats(v);
  } else {
    p->set_type(onnx::AttributeProto::INTS);
    for (int64_t v : std::get<std::vector<int64_t>>(a.value)) p->add_ints(v);
  }
}

Tensor random_tensor(const std::vector<int64_t>& dims, std::mt19937& rng) {
  Tensor t = Tensor::zeros(DType::kF32, dims);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

// One node of `op` over f32 inputs of the given dims (empty optional = omitted input).
struct OneNode {
  std::unique_ptr<Graph> graph;
  Node* node = nullptr;
};

OneNode build(const std::string& domain, const std::string& op,
              const std::vector<std::optional<std::vector<int64_t>>>& inputs,
              const std::vector<Attr>& attrs) {
  ModelBuilder b(17);
  if (!domain.empty()) {
    auto* imp = b.model().add_opset_import();
    imp->set_domain(domain);
    imp->set_version(1);
  }
  std::vector<std::string> names;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      names.push_back("");
      continue;
    }
    names.push_back("x" + std::to_string(i));
    std::vector<testing::DimSpec> dims(inputs[i]->begin(), inputs[i]->end());
    b.input(names.back(), testing::kOnnxFloat, dims);
  }
  auto* n = b.node(op, names, {"y"}, "n");
  n->set_domain(domain);
  for (const auto& a : attrs) add_attr(n, a);
  b.output("y");
  auto g = testing::import_bytes(b.bytes());
  EXPECT_TRUE(g) << g.status().message();
  OneNode out;
  if (!g) return out;
  out.graph = std::move(*g);
  out.node = out.graph->nodes().at(0).get();
  return out;
}

::testing::AssertionResult close(const Tensor& got, const Tensor& want) {
  if (got.dims() != want.dims())
    return ::testing::AssertionFailure()
           << "dims " << got.type_string() << " vs " << want.type_string();
  for (int64_t i = 0; i < got.numel(); ++i) {
    float a = got.data<float>()[i], b = want.data<float>()[i];
    if (std::isnan(b) && std::isnan(a)) continue;
    if (!(std::fabs(a - b) <= 1e-4f * (std::fabs(b) + 1.0f)))
      return ::testing::AssertionFailure() << "element " << i << ": " << a << " vs " << b;
  }
  return ::testing::AssertionSuccess();
}

// Runs the node's cpu library kernel (which must exist) and the reference kernel on random
// inputs; `constant` marks input indices that are graph constants.
void check(const std::string& domain, const std::string& op,
           const std::vector<std::optional<std::vector<int64_t>>>& inputs,
           const std::vector<Attr>& attrs, uint32_t seed, std::vector<size_t> constant = {},
           std::function<void(std::vector<Tensor>&)> tweak = nullptr) {
  SCOPED_TRACE(op + " seed " + std::to_string(seed));
  OneNode nn = build(domain, op, inputs, attrs);
  ASSERT_NE(nn.node, nullptr);
  const CpuKernel* k = CpuKernelRegistry::global().find(*nn.node);
  ASSERT_NE(k, nullptr) << "no cpu kernel accepts " << op;
  std::mt19937 rng(seed);
  std::vector<Tensor> ts(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i)
    if (inputs[i]) ts[i] = random_tensor(*inputs[i], rng);
  if (tweak) tweak(ts);
  for (size_t i : constant) nn.node->inputs[i]->constant = ts[i];
  std::vector<const Tensor*> ptrs;
  for (auto& t : ts) ptrs.push_back(t.defined() ? &t : nullptr);
  std::vector<Tensor> want(1);
  KernelContext ref_ctx(*nn.node, ptrs, want);
  Status rs = nn.node->schema->kernel(ref_ctx);
  ASSERT_TRUE(rs.is_ok()) << rs.message();
  const int64_t fallbacks = cpu_library_fallbacks();
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    // Twice: the second call reuses the cached primitive (and packed weights).
    for (int rep = 0; rep < 2; ++rep) {
      std::vector<Tensor> got(1);
      KernelContext ctx(*nn.node, ptrs, got);
      Status st = k->run(ctx, pool);
      ASSERT_TRUE(st.is_ok()) << st.message();
      EXPECT_TRUE(close(got[0], want[0])) << "threads " << threads << " rep " << rep;
    }
  }
  // Every case here is one the library kernels cover themselves.
  EXPECT_EQ(cpu_library_fallbacks(), fallbacks) << "the kernel fell back to the reference";
}

using Dims = std::vector<int64_t>;

TEST(CpuKernels, MatMulShapes) {
  const std::vector<std::pair<Dims, Dims>> cases = {{{3, 4}, {4, 5}},
                                                    {{2, 3, 4}, {4, 5}},
                                                    {{2, 1, 3, 4}, {5, 4, 6}},
                                                    {{4}, {4, 5}},
                                                    {{2, 3, 4}, {4}},
                                                    {{1, 3, 4}, {2, 4, 5}},
                                                    {{2, 3, 7, 9}, {3, 9, 2}},
                                                    {{5}, {5}},
                                                    {{1, 1, 17, 33}, {1, 33, 65}},
                                                    {{3, 1, 2}, {3, 2, 1}},
                                                    {{2, 2, 3, 4}, {1, 2, 4, 5}}};
  uint32_t seed = 1;
  for (const auto& [a, b] : cases) {
    check("", "MatMul", {a, b}, {}, seed++);
    check("", "MatMul", {a, b}, {}, seed++, {1});
  }
}

// Problems big enough to be cut into row or column blocks across the pool's threads.
TEST(CpuKernels, BlockedGemms) {
  uint32_t seed = 50;
  check("", "MatMul", {Dims{2, 130, 64}, Dims{64, 96}}, {}, seed++, {1});    // row blocks
  check("", "MatMul", {Dims{1, 5, 256}, Dims{256, 1000}}, {}, seed++, {1});  // column blocks
  check("", "MatMul", {Dims{1, 5, 256}, Dims{256, 1000}}, {}, seed++);       // unpacked B
  check("", "MatMul", {Dims{3, 70, 40}, Dims{3, 40, 50}}, {}, seed++);       // batched
  check("", "Gemm", {Dims{7, 300}, Dims{1001, 300}, Dims{1001}}, {{"transB", int64_t{1}}}, seed++,
        {1, 2});
  check("", "Gemm", {Dims{300, 7}, Dims{300, 520}, Dims{7, 520}},
        {{"transA", int64_t{1}}, {"alpha", 2.0f}}, seed++, {1});
  for (const char* act : {"relu", "gelu"}) {
    std::vector<Attr> attrs{{"activation", std::string(act)}, {"transB", int64_t{1}}};
    check("ferrite", "FusedMatMul", {Dims{1, 6, 128}, Dims{700, 128}, Dims{700}, Dims{1, 6, 700}},
          attrs, seed++, {1, 2});
    check("ferrite", "FusedMatMul", {Dims{1, 6, 128}, Dims{700, 128}, Dims{700}, Dims{700}}, attrs,
          seed++, {1, 2});
    check("ferrite", "FusedMatMul", {Dims{2, 100, 64}, Dims{96, 64}, Dims{96}, Dims{2, 100, 96}},
          attrs, seed++, {1, 2});
  }
  // Pointwise convolutions are GEMMs too: output-channel blocks, spatial blocks.
  check("", "Conv", {Dims{1, 32, 20, 20}, Dims{200, 32, 1, 1}, Dims{200}}, {}, seed++, {1});
  check("", "Conv", {Dims{1, 16, 20, 20}, Dims{8, 16, 1, 1}, Dims{8}}, {}, seed++, {1});
}

// Matrix-vector products on the kernel's own dot-product loop (gemv.cpp): one output column
// (a 1x1 convolution of one pixel, NCHW) or one row (Gemm with transB, a classifier head), K
// with and without a 16- and 64-element tail, bias, residual and activations, alpha.
TEST(CpuKernels, MatrixVectorProducts) {
  uint32_t seed = 80;
  for (int64_t k : {16, 48, 100, 960}) {
    check("", "Gemm", {Dims{1, k}, Dims{257, k}, Dims{257}}, {{"transB", int64_t{1}}}, seed++,
          {1, 2});
    check("", "Gemm", {Dims{1, k}, Dims{40, k}, Dims{1}},
          {{"transB", int64_t{1}}, {"alpha", 0.5f}, {"beta", 2.0f}}, seed++);
    check("", "Conv", {Dims{1, k, 1, 1}, Dims{240, k, 1, 1}, Dims{240}}, {}, seed++, {1});
  }
  for (const char* act : {"relu", "hard_sigmoid", "gelu"})
    for (bool res : {false, true}) {
      std::vector<std::optional<Dims>> in{Dims{1, 120, 1, 1}, Dims{480, 120, 1, 1}, Dims{480}};
      if (res) in.push_back(Dims{1, 480, 1, 1});
      std::vector<Attr> attrs{{"activation", std::string(act)}};
      if (std::string(act) == "hard_sigmoid")
        attrs.push_back({"activation_params", std::vector<float>{0.2f, 0.5f}});
      check("ferrite", "FusedConv", in, attrs, seed++, {1});
      attrs.push_back({"transB", int64_t{1}});
      check("ferrite", "FusedMatMul", {Dims{1, 120}, Dims{480, 120}, Dims{480}, Dims{1, 480}},
            attrs, seed++, {1, 2});
    }
}

TEST(CpuKernels, GemmAttributes) {
  uint32_t seed = 100;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (const Dims& c : std::vector<Dims>{{}, {7}, {1, 7}, {5, 1}, {5, 7}, {1}}) {
        Dims a = ta ? Dims{6, 5} : Dims{5, 6}, b = tb ? Dims{7, 6} : Dims{6, 7};
        std::vector<Attr> attrs{{"transA", int64_t{ta}}, {"transB", int64_t{tb}}};
        check("", "Gemm", {a, b, c}, attrs, seed++, {1, 2});
        attrs.push_back({"alpha", 0.5f});
        attrs.push_back({"beta", -1.5f});
        check("", "Gemm", {a, b, c}, attrs, seed++);
      }
  check("", "Gemm", {Dims{4, 8}, Dims{8, 3}}, {}, seed++);  // no C
  check("", "Gemm", {Dims{4, 8}, Dims{8, 3}, Dims{4, 3}}, {{"beta", 0.0f}}, seed++);
}

TEST(CpuKernels, FusedMatMulEpilogues) {
  uint32_t seed = 200;
  for (const char* act : {"none", "relu", "tanh", "sigmoid", "gelu", "gelu_tanh"})
    for (int tb = 0; tb < 2; ++tb) {
      Dims a{2, 5, 16}, b = tb ? Dims{24, 16} : Dims{16, 24};
      std::vector<Attr> attrs{{"activation", std::string(act)}, {"transB", int64_t{tb}}};
      check("ferrite", "FusedMatMul", {a, b}, attrs, seed++, {1});
      check("ferrite", "FusedMatMul", {a, b, Dims{24}}, attrs, seed++, {1, 2});
      check("ferrite", "FusedMatMul", {a, b, Dims{24}, Dims{2, 5, 24}}, attrs, seed++, {1});
      check("ferrite", "FusedMatMul", {a, b, std::nullopt, Dims{24}}, attrs, seed++);
      // Residual broadcasts oneDNN is not given: added by the kernel's own loop.
      check("ferrite", "FusedMatMul", {a, b, Dims{24}, Dims{5, 1}}, attrs, seed++);
      check("ferrite", "FusedMatMul", {a, b, Dims{24}, Dims{2, 1, 24}}, attrs, seed++);
    }
  // Batched B (no folding into one GEMM), with broadcasting on both sides.
  std::vector<Attr> gelu{{"activation", std::string("gelu")}, {"transB", int64_t{1}}};
  check("ferrite", "FusedMatMul", {Dims{3, 1, 4, 8}, Dims{1, 2, 6, 8}, Dims{6}, Dims{3, 2, 4, 6}},
        gelu, seed++);
  check("ferrite", "FusedMatMul", {Dims{1, 4, 8}, Dims{3, 8, 6}, Dims{6}, Dims{1, 6}},
        {{"activation", std::string("relu")}}, seed++);
}

struct ConvCase {
  Dims x, w;
  bool bias;
  std::vector<Attr> attrs;
};

TEST(CpuKernels, ConvGeometry) {
  using V = std::vector<int64_t>;
  const std::vector<ConvCase> cases = {
      {{1, 3, 9, 9}, {4, 3, 3, 3}, true, {}},
      {{2, 8, 10, 7}, {6, 8, 1, 1}, true, {}},  // pointwise: NCHW path
      {{2, 8, 10, 7}, {6, 8, 1, 1}, false, {{"strides", V{2, 2}}}},
      {{2, 4, 11, 12}, {6, 2, 3, 3}, true, {{"group", int64_t{2}}, {"pads", V{1, 0, 2, 1}}}},
      {{1, 8, 9, 9}, {8, 2, 3, 2}, false, {{"group", int64_t{4}}, {"strides", V{2, 1}}}},
      {{2, 6, 13, 11}, {6, 1, 3, 3}, true, {{"group", int64_t{6}}, {"pads", V{1, 1, 1, 1}}}},
      {{1, 5, 14, 15},
       {5, 1, 3, 3},
       true,
       {{"group", int64_t{5}}, {"pads", V{1, 1, 1, 1}}, {"strides", V{2, 2}}}},
      {{1, 4, 12, 12},
       {4, 1, 5, 5},
       false,
       {{"group", int64_t{4}}, {"pads", V{2, 2, 2, 2}}, {"strides", V{2, 2}}}},
      {{1, 3, 12, 10},
       {3, 1, 3, 3},
       true,
       {{"group", int64_t{3}}, {"dilations", V{2, 3}}, {"pads", V{2, 0, 1, 3}}}},
      {{1, 3, 12, 10}, {3, 1, 2, 4}, true, {{"group", int64_t{3}}, {"strides", V{3, 1}}}},
      {{1, 4, 9, 9}, {8, 1, 3, 3}, true, {{"group", int64_t{4}}}},  // channel multiplier 2
      {{2, 3, 15, 16}, {5, 3, 3, 3}, true, {{"dilations", V{2, 2}}, {"pads", V{2, 2, 2, 2}}}},
      {{1, 3, 10, 9},
       {4, 3, 3, 2},
       true,
       {{"auto_pad", std::string("SAME_UPPER")}, {"strides", V{2, 2}}}},
      {{1, 3, 10, 9}, {4, 3, 4, 3}, false, {{"auto_pad", std::string("SAME_LOWER")}}},
      {{1, 3, 10, 9},
       {3, 1, 4, 3},
       true,
       {{"auto_pad", std::string("SAME_LOWER")}, {"group", int64_t{3}}, {"strides", V{2, 3}}}},
      {{1, 3, 10, 9},
       {4, 3, 3, 3},
       true,
       {{"auto_pad", std::string("VALID")}, {"strides", V{2, 2}}}},
      {{1, 3, 8, 8}, {4, 3, 7, 7}, true, {{"pads", V{3, 3, 3, 3}}, {"strides", V{2, 2}}}},
      {{2, 16, 10, 10}, {32, 16, 3, 3}, true, {{"pads", V{1, 1, 1, 1}}}},
      {{2, 3, 17}, {4, 3, 3}, true, {{"pads", V{1, 2}}}},                   // 1-D
      {{1, 2, 5, 6, 7}, {3, 2, 2, 3, 2}, true, {{"strides", V{1, 2, 1}}}},  // 3-D
  };
  uint32_t seed = 300;
  for (const auto& c : cases) {
    std::vector<std::optional<Dims>> in{c.x, c.w};
    if (c.bias) in.push_back(Dims{c.w[0]});
    check("", "Conv", in, c.attrs, seed++, {1});
    check("", "Conv", in, c.attrs, seed++);
  }
}

// FusedConv's residual and activation on each convolution path (oneDNN direct and blocked,
// pointwise GEMM, depthwise, 1-D), against conv + residual + activation in the op table.
TEST(CpuKernels, FusedConvEpilogues) {
  using V = std::vector<int64_t>;
  using F = std::vector<float>;
  const std::vector<ConvCase> cases = {
      {{1, 3, 9, 9}, {4, 3, 3, 3}, true, {{"pads", V{1, 1, 1, 1}}}},
      {{2, 16, 10, 10}, {32, 16, 3, 3}, true, {{"pads", V{1, 1, 1, 1}}}},
      {{3, 16, 10, 10}, {16, 16, 3, 3}, false, {{"pads", V{1, 1, 1, 1}}}},  // bands of rows
      {{2, 8, 10, 7}, {6, 8, 1, 1}, true, {}},                              // pointwise
      {{2, 8, 10, 7}, {6, 8, 1, 1}, false, {}},
      {{2, 6, 13, 11}, {6, 1, 3, 3}, true, {{"group", int64_t{6}}, {"pads", V{1, 1, 1, 1}}}},
      {{2, 3, 17}, {4, 3, 3}, true, {{"pads", V{1, 1}}}},  // 1-D
  };
  const std::vector<std::pair<std::string, F>> acts = {
      {"none", {}},           {"relu", {}},
      {"clip", {0.0f, 6.0f}}, {"clip", {0.5f, -0.5f}},  // min > max: every output is max
      {"leaky_relu", {0.1f}}, {"sigmoid", {}},
      {"tanh", {}},           {"hard_sigmoid", {0.2f, 0.5f}},
      {"hard_swish", {}},     {"gelu", {}}};
  uint32_t seed = 900;
  for (const auto& c : cases) {
    Dims y{c.x[0], c.w[0]};
    for (size_t d = 2; d < c.x.size(); ++d) y.push_back(c.x[d]);  // every case keeps the size
    for (const auto& [name, params] : acts)
      for (bool res : {false, true}) {
        if (!res && name == "none") continue;
        std::vector<std::optional<Dims>> in{c.x, c.w};
        in.push_back(c.bias ? std::optional<Dims>(Dims{c.w[0]}) : std::nullopt);
        if (res) in.push_back(y);
        std::vector<Attr> attrs = c.attrs;
        attrs.push_back({"activation", name});
        if (!params.empty()) attrs.push_back({"activation_params", params});
        // Scaled so that the bounded activations see both of their saturated ends.
        auto spread = [](std::vector<Tensor>& ts) {
          for (int64_t i = 0; i < ts[0].numel(); ++i) ts[0].data<float>()[i] *= 8.0f;
        };
        check("ferrite", "FusedConv", in, attrs, seed++, {1}, spread);
      }
  }
}

TEST(CpuKernels, AttentionMasksAndCausal) {
  uint32_t seed = 400;
  const Dims q{2, 3, 5, 8}, k{2, 3, 7, 8}, v{2, 3, 7, 4};
  check("ferrite", "Attention", {q, k, v}, {}, seed++);
  check("ferrite", "Attention", {q, k, v}, {{"causal", int64_t{1}}}, seed++);
  check("ferrite", "Attention", {q, k, v}, {{"scale", 0.3f}, {"causal", int64_t{1}}}, seed++);
  for (const Dims& m :
       std::vector<Dims>{{2, 1, 1, 7}, {2, 1, 5, 7}, {5, 7}, {7}, {1}, {2, 3, 5, 1}})
    check("ferrite", "Attention", {q, k, v, m}, {}, seed++);
  // Broadcast batch dims and longer sequences (several row blocks per head).
  check("ferrite", "Attention", {Dims{1, 4, 70, 16}, Dims{1, 1, 70, 16}, Dims{1, 1, 70, 16}},
        {{"causal", int64_t{1}}}, seed++);
  check("ferrite", "Attention", {Dims{3, 64}, Dims{40, 64}, Dims{40, 24}}, {}, seed++);
  // Fully masked rows: NaN without nan_to_zero, zeros with it, exactly as the reference.
  auto mask_rows = [](std::vector<Tensor>& ts) {
    float* m = ts[3].data<float>();
    const float inf = std::numeric_limits<float>::infinity();
    for (int64_t t = 0; t < 7; ++t) m[0 * 7 + t] = -inf;  // batch 0: every key masked
    m[7 + 2] = -inf;                                      // batch 1: one key masked
  };
  for (int64_t ntz : {0, 1})
    check("ferrite", "Attention", {q, k, v, Dims{2, 1, 1, 7}}, {{"nan_to_zero", ntz}}, seed++, {},
          mask_rows);
  // A NaN in the mask poisons its row the same way.
  auto nan_mask = [](std::vector<Tensor>& ts) {
    ts[3].data<float>()[3] = std::numeric_limits<float>::quiet_NaN();
  };
  for (int64_t ntz : {0, 1})
    check("ferrite", "Attention", {q, k, v, Dims{5, 7}}, {{"nan_to_zero", ntz}}, seed++, {},
          nan_mask);
}

TEST(CpuKernels, MaxPoolGeometry) {
  using V = std::vector<int64_t>;
  const std::vector<std::pair<Dims, std::vector<Attr>>> cases = {
      {{2, 3, 8, 8}, {{"kernel_shape", V{2, 2}}, {"strides", V{2, 2}}}},
      {{1, 4, 11, 13}, {{"kernel_shape", V{3, 3}}, {"strides", V{2, 2}}, {"pads", V{1, 1, 1, 1}}}},
      {{1, 2, 10, 9}, {{"kernel_shape", V{3, 2}}, {"strides", V{2, 3}}, {"ceil_mode", int64_t{1}}}},
      {{1, 2, 10, 9}, {{"kernel_shape", V{2, 2}}, {"dilations", V{2, 2}}, {"pads", V{0, 1, 2, 1}}}},
      {{1, 2, 7, 7}, {{"kernel_shape", V{3, 3}}, {"auto_pad", std::string("SAME_UPPER")}}},
      {{1, 2, 7, 6},
       {{"kernel_shape", V{4, 3}}, {"auto_pad", std::string("SAME_LOWER")}, {"strides", V{2, 1}}}},
      {{1, 1, 3, 3}, {{"kernel_shape", V{3, 3}}, {"pads", V{2, 2, 2, 2}}}},
  };
  uint32_t seed = 500;
  for (const auto& [x, attrs] : cases) check("", "MaxPool", {x}, attrs, seed++);
  // NaNs: kept when a window's first in-bounds tap, skipped later, as the reference does.
  auto nans = [](std::vector<Tensor>& ts) {
    float* p = ts[0].data<float>();
    for (int64_t i = 0; i < ts[0].numel(); i += 7) p[i] = std::numeric_limits<float>::quiet_NaN();
  };
  for (const auto& [x, attrs] : cases) check("", "MaxPool", {x}, attrs, seed++, {}, nans);
}

// ferrite.Pool on [N, H, W, C] (the layout pass's form): channel counts of whole 16-channel
// blocks, blocks plus a tail, and a tail alone; max with NaNs anywhere in a window, and average
// with and without the padding counted.
TEST(CpuKernels, ChannelsLastPoolBlocksTailsAndNaNs) {
  using V = std::vector<int64_t>;
  const std::string max = "max", avg = "average";
  uint32_t seed = 700;
  auto nans = [](std::vector<Tensor>& ts) {
    float* p = ts[0].data<float>();
    for (int64_t i = 0; i < ts[0].numel(); i += 5) p[i] = std::numeric_limits<float>::quiet_NaN();
  };
  for (int64_t c : {int64_t{16}, int64_t{37}, int64_t{5}}) {
    const Dims x{2, 9, 8, c};
    const std::vector<Attr> s2 = {{"kernel_shape", V{3, 3}},
                                  {"strides", V{2, 2}},
                                  {"pads", V{1, 1, 1, 1}},
                                  {"ceil_mode", int64_t{1}}};
    std::vector<Attr> a = s2;
    a.push_back({"mode", max});
    check("ferrite", "Pool", {x}, a, seed++);
    check("ferrite", "Pool", {x}, a, seed++, {}, nans);
    std::vector<Attr> b = {{"kernel_shape", V{2, 3}},
                           {"pads", V{1, 1, 0, 1}},
                           {"mode", avg},
                           {"count_include_pad", int64_t{1}}};
    check("ferrite", "Pool", {x}, b, seed++);
    std::vector<Attr> e = s2;
    e.push_back({"mode", avg});
    check("ferrite", "Pool", {x}, e, seed++);
  }
}

TEST(CpuKernels, ConcatAxesAndSizes) {
  using V = std::vector<std::optional<Dims>>;
  // Channels-last channel concats (the layout pass's), large enough to spread over the threads.
  check("", "Concat", V{Dims{1, 28, 28, 58}, Dims{1, 28, 28, 58}}, {{"axis", int64_t{3}}}, 600);
  check("", "Concat", V{Dims{2, 13, 13, 64}, Dims{2, 13, 13, 128}, Dims{2, 13, 13, 8}},
        {{"axis", int64_t{-1}}}, 601);
  check("", "Concat", V{Dims{2, 3, 5}, Dims{2, 4, 5}}, {{"axis", int64_t{1}}}, 602);
  check("", "Concat", V{Dims{3, 7}, Dims{1, 7}, Dims{2, 7}}, {{"axis", int64_t{0}}}, 603);
  check("", "Concat", V{Dims{4, 0, 3}, Dims{4, 2, 3}}, {{"axis", int64_t{1}}}, 604);
  check("", "Concat", V{Dims{5}}, {{"axis", int64_t{0}}}, 605);
}

// Split has several outputs (and an i64 input), so it is checked here rather than by check():
// every output of the cpu kernel against the reference's, on 1 and 3 threads. `sizes`: the
// `split` input, or empty for an even split (with num_outputs when `num_outputs` is set).
void check_split(const Dims& x, int64_t axis, const std::vector<int64_t>& sizes, size_t outputs,
                 bool num_outputs, bool covered, uint32_t seed) {
  SCOPED_TRACE("Split seed " + std::to_string(seed));
  ModelBuilder b(18);
  b.input("x", testing::kOnnxFloat, std::vector<testing::DimSpec>(x.begin(), x.end()));
  std::vector<std::string> ins = {"x"};
  if (!sizes.empty()) {
    b.input("split", testing::kOnnxInt64, {static_cast<int64_t>(sizes.size())});
    ins.push_back("split");
  }
  std::vector<std::string> outs;
  for (size_t i = 0; i < outputs; ++i) outs.push_back("y" + std::to_string(i));
  auto* n = b.node("Split", ins, outs, "n");
  add_attr(n, {"axis", axis});
  if (num_outputs) add_attr(n, {"num_outputs", static_cast<int64_t>(outputs)});
  for (const auto& o : outs) b.output(o);
  auto g = testing::import_bytes(b.bytes());
  ASSERT_TRUE(g) << g.status().message();
  const Node& node = *(*g)->nodes().at(0);
  const CpuKernel* k = CpuKernelRegistry::global().find(node);
  ASSERT_NE(k, nullptr);
  std::mt19937 rng(seed);
  Tensor tx = random_tensor(x, rng);
  Tensor ts = Tensor::from_vector(sizes, {static_cast<int64_t>(sizes.size())});
  std::vector<const Tensor*> ptrs = {&tx};
  if (!sizes.empty()) ptrs.push_back(&ts);
  std::vector<Tensor> want(outputs);
  KernelContext ref_ctx(node, ptrs, want);
  Status rs = node.schema->kernel(ref_ctx);
  ASSERT_TRUE(rs.is_ok()) << rs.message();
  const int64_t fallbacks = cpu_library_fallbacks();
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<Tensor> got(outputs);
    KernelContext ctx(node, ptrs, got);
    Status st = k->run(ctx, pool);
    ASSERT_TRUE(st.is_ok()) << st.message();
    for (size_t i = 0; i < outputs; ++i)
      EXPECT_TRUE(close(got[i], want[i])) << "output " << i << " threads " << threads;
  }
  // An uneven num_outputs split is the op table's rule: the kernel hands it to the reference.
  EXPECT_EQ(cpu_library_fallbacks() == fallbacks, covered);
}

TEST(CpuKernels, SplitEvenGivenAndUneven) {
  check_split({1, 28, 28, 116}, 3, {}, 2, true, true, 610);  // ShuffleNet's channel split
  check_split({2, 13, 13, 96}, -1, {}, 3, false, true, 611);
  check_split({2, 13, 13, 96}, 3, {16, 64, 16}, 3, false, true, 612);
  check_split({6, 5}, 0, {1, 0, 5}, 3, false, true, 613);
  check_split({4, 9, 3}, 1, {}, 3, true, true, 614);
  check_split({4, 10, 3}, 1, {}, 3, true, false, 615);  // 4 + 4 + 2
}

TEST(CpuKernels, OtherDtypesDecline) {
  ModelBuilder b(17);
  b.input("a", testing::kOnnxDouble, {3, 4});
  b.input("b", testing::kOnnxDouble, {4, 5});
  b.node("MatMul", {"a", "b"}, {"y"});
  b.output("y", testing::kOnnxDouble);
  auto g = testing::import_bytes(b.bytes());
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(CpuKernelRegistry::global().find(*(*g)->nodes()[0]), nullptr);
}

}  // namespace
}  // namespace ferrite
