// Reference kernels of the internal ferrite ops against direct loops, for what the golden
// before/after tests cannot reach: ferrite.Attention's `causal` (no pass emits it) and default
// scale, and FusedMatMul's batch broadcasting and bad-input errors.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cmath>
#include <limits>
#include <random>

#include "frontend/onnx/importer.h"
#include "runtime/session.h"

namespace ferrite {
namespace {

Expected<std::unique_ptr<Session>> session_for(const std::string& text) {
  onnx::ModelProto model;
  auto st = onnx::OnnxParser::Parse(model, text.c_str());
  if (!st.IsOK()) return err("parse: ", st.ErrorMessage());
  std::string bytes;
  model.SerializeToString(&bytes);
  FERRITE_ASSIGN_OR_RETURN(auto g, import_onnx_bytes(bytes, ""));
  return Session::from_graph(std::move(g), "reference");
}

Tensor random_tensor(std::vector<int64_t> dims, std::mt19937& rng) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = std::uniform_real_distribution<float>(-1.f, 1.f)(rng);
  return t;
}

// softmax(q k^T * scale [+ causal]) v for q [B, S, D], k [B, T, D], v [B, T, Dv].
std::vector<double> naive_attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale,
                                    bool causal) {
  int64_t B = q.dim(0), S = q.dim(1), D = q.dim(2), T = k.dim(1), Dv = v.dim(2);
  std::vector<double> out(B * S * Dv, 0.0);
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t s = 0; s < S; ++s) {
      std::vector<double> w(T);
      double mx = -std::numeric_limits<double>::infinity(), sum = 0;
      for (int64_t t = 0; t < T; ++t) {
        double dot = 0;
        for (int64_t d = 0; d < D; ++d)
          dot += q.data<float>()[(b * S + s) * D + d] * k.data<float>()[(b * T + t) * D + d];
        w[t] = causal && t > s ? -std::numeric_limits<double>::infinity() : dot * scale;
        mx = std::max(mx, w[t]);
      }
      for (double& x : w) sum += (x = std::exp(x - mx));
      for (int64_t t = 0; t < T; ++t)
        for (int64_t d = 0; d < Dv; ++d)
          out[(b * S + s) * Dv + d] += w[t] / sum * v.data<float>()[(b * T + t) * Dv + d];
    }
  }
  return out;
}

TEST(FusedOps, AttentionCausalAndDefaultScale) {
  auto s = session_for(R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[2,3,4] q, float[2,5,4] k, float[2,5,2] v) => (float[2,3,2] y1, float[2,3,2] y2) {
  y1 = ferrite.Attention<causal = 1, scale = 0.7>(q, k, v)
  y2 = ferrite.Attention(q, k, v)
})");
  ASSERT_TRUE(s) << s.status().message();
  std::mt19937 rng(1);
  Tensor q = random_tensor({2, 3, 4}, rng), k = random_tensor({2, 5, 4}, rng),
         v = random_tensor({2, 5, 2}, rng);
  auto out = (*s)->run({{"q", q}, {"k", k}, {"v", v}});
  ASSERT_TRUE(out) << out.status().message();
  auto want1 = naive_attention(q, k, v, 0.7, true);
  auto want2 = naive_attention(q, k, v, 0.5, false);  // 1/sqrt(D), D = 4
  for (size_t i = 0; i < want1.size(); ++i) {
    EXPECT_NEAR((*out)[0].data<float>()[i], want1[i], 1e-5) << i;
    EXPECT_NEAR((*out)[1].data<float>()[i], want2[i], 1e-5) << i;
  }
  // The first query row sees only the first key under `causal`: its output is v[b, 0].
  EXPECT_NEAR((*out)[0].data<float>()[0], v.data<float>()[0], 1e-6);
}

TEST(FusedOps, FusedMatMulBroadcastsBatchDims) {
  auto s = session_for(R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[2,1,3,4] a, float[5,6,4] b, float[6] bias) => (float[2,5,3,6] y) {
  y = ferrite.FusedMatMul<transB = 1, activation = "relu">(a, b, bias)
})");
  ASSERT_TRUE(s) << s.status().message();
  std::mt19937 rng(2);
  Tensor a = random_tensor({2, 1, 3, 4}, rng), b = random_tensor({5, 6, 4}, rng),
         bias = random_tensor({6}, rng);
  auto out = (*s)->run({{"a", a}, {"b", b}, {"bias", bias}});
  ASSERT_TRUE(out) << out.status().message();
  const float* y = (*out)[0].data<float>();
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j)
      for (int64_t m = 0; m < 3; ++m)
        for (int64_t n = 0; n < 6; ++n) {
          double acc = bias.data<float>()[n];
          for (int64_t kk = 0; kk < 4; ++kk)
            acc += a.data<float>()[(i * 3 + m) * 4 + kk] * b.data<float>()[(j * 6 + n) * 4 + kk];
          EXPECT_NEAR(y[((i * 5 + j) * 3 + m) * 6 + n], std::max(acc, 0.0), 1e-5);
        }
}

TEST(FusedOps, BadInputsAreErrors) {
  auto bad_act = session_for(R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[3,4] a, float[4,2] b) => (float[3,2] y) {
  y = ferrite.FusedMatMul<activation = "swish">(a, b)
})");
  ASSERT_FALSE(bad_act);
  EXPECT_NE(bad_act.status().message().find("unknown activation"), std::string::npos);
  auto bad_mask = session_for(R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[1,3,4] q, float[1,3,4] k, float[1,3,4] v, float[2,1,3,3] m) => (float[1,3,4] y) {
  y = ferrite.Attention(q, k, v, m)
})");
  ASSERT_FALSE(bad_mask);
  EXPECT_NE(bad_mask.status().message().find("mask"), std::string::npos);
  // Dynamic dims: shapes are only checked when the kernel runs.
  auto s = session_for(R"(<ir_version: 8, opset_import: ["" : 17, "ferrite" : 1]>
g (float[N,4] a, float[K,2] b, float[M] bias) => (float[N,2] y) {
  y = ferrite.FusedMatMul(a, b, bias)
})");
  ASSERT_TRUE(s) << s.status().message();
  std::mt19937 rng(3);
  auto out = (*s)->run({{"a", random_tensor({3, 4}, rng)},
                        {"b", random_tensor({5, 2}, rng)},
                        {"bias", random_tensor({2}, rng)}});
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find("inner dimensions differ"), std::string::npos);
  out = (*s)->run({{"a", random_tensor({3, 4}, rng)},
                   {"b", random_tensor({4, 2}, rng)},
                   {"bias", random_tensor({3}, rng)}});
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find("bias"), std::string::npos);
}

}  // namespace
}  // namespace ferrite
