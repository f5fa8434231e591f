// The collective ops (ops/collective.cpp) over the loopback communicator (distributed/
// loopback.h): every rank runs a one-node graph on its own input, at once, and each result is
// checked against the collective computed here directly. Also: the errors a user can meet (no
// communicator, a group_size that is not the group's, a rank that fails) come back as errors on
// every rank, without hanging.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <optional>
#include <thread>

#include "distributed/loopback.h"
#include "distributed/tensor_parallel.h"
#include "frontend/onnx/importer.h"
#include "passes/pass.h"
#include "runtime/session.h"

namespace ferrite {
namespace {

std::unique_ptr<Graph> parse(const std::string& text) {
  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, text.c_str());
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  std::string bytes;
  model.SerializeToString(&bytes);
  auto g = import_onnx_bytes(bytes, "");
  EXPECT_TRUE(g) << g.status().message();
  return g ? std::move(g).value() : nullptr;
}

// A model of one collective node `y = com.microsoft.OP<attrs>(x)`.
std::string one_node(const std::string& op, const std::string& attrs, const std::string& x_type,
                     const std::string& y_type) {
  return R"(<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g ()" + x_type +
         R"( x) => ()" + y_type + R"( y) {
  y = com.microsoft.)" +
         op + attrs + R"((x)
})";
}

// Runs the model on every rank of a loopback group, rank r on inputs[r].
std::vector<Expected<std::vector<Tensor>>> run_group(const std::string& model,
                                                     const std::vector<Tensor>& inputs) {
  const int n = static_cast<int>(inputs.size());
  auto comms = make_loopback_group(n);
  std::vector<std::unique_ptr<Session>> sessions;
  for (int r = 0; r < n; ++r) {
    auto s = Session::from_graph(parse(model), "reference");
    EXPECT_TRUE(s) << s.status().message();
    sessions.push_back(std::move(s).value());
  }
  std::vector<std::optional<Expected<std::vector<Tensor>>>> out(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      BindCommunicator bind(comms[static_cast<size_t>(r)].get());
      auto o = sessions[static_cast<size_t>(r)]->run({{"x", inputs[static_cast<size_t>(r)]}});
      if (!o) comms[static_cast<size_t>(r)]->abort(o.status().message());
      out[static_cast<size_t>(r)] = std::move(o);
    });
  for (auto& t : threads) t.join();
  std::vector<Expected<std::vector<Tensor>>> res;
  for (auto& o : out) res.push_back(std::move(*o));
  return res;
}

// Rank r's input: [rows, cols] with element (i, j) = 100 r + 10 i + j.
Tensor rank_input(int r, int64_t rows, int64_t cols) {
  std::vector<float> v;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) v.push_back(static_cast<float>(100 * r + 10 * i + j));
  return Tensor::from_vector<float>(v, {rows, cols});
}

TEST(Collective, AllReduceSumsEveryRanksInput) {
  std::vector<Tensor> in;
  for (int r = 0; r < 3; ++r) in.push_back(rank_input(r, 2, 5));
  auto res = run_group(one_node("AllReduce", "", "float[2,5]", "float[2,5]"), in);
  for (auto& o : res) {
    ASSERT_TRUE(o) << o.status().message();
    const Tensor& y = (*o)[0];
    for (int64_t k = 0; k < 10; ++k) {
      float want = 0;
      for (int r = 0; r < 3; ++r) want += in[static_cast<size_t>(r)].data<float>()[k];
      EXPECT_EQ(y.data<float>()[k], want) << k;
    }
  }
}

TEST(Collective, AllReduceInBfloat16RoundsOnce) {
  std::vector<Tensor> in;
  for (int r = 0; r < 4; ++r)
    in.push_back(Tensor::from_vector<BFloat16>({BFloat16(1.0f), BFloat16(0.00390625f * r)}, {2}));
  auto res = run_group(one_node("AllReduce", "", "bfloat16[2]", "bfloat16[2]"), in);
  for (auto& o : res) {
    ASSERT_TRUE(o) << o.status().message();
    EXPECT_EQ(static_cast<float>((*o)[0].data<BFloat16>()[0]), 4.0f);
    // 0 + 1/256 + 2/256 + 3/256 = 6/256, exact in bf16 (summed in f32, rounded once).
    EXPECT_EQ(static_cast<float>((*o)[0].data<BFloat16>()[1]), 6.0f / 256.0f);
  }
}

TEST(Collective, AllGatherConcatenatesInRankOrderAlongAnyAxis) {
  for (int axis : {0, 1}) {
    std::vector<Tensor> in;
    for (int r = 0; r < 3; ++r) in.push_back(rank_input(r, 2, 4));
    std::string out_type = axis == 0 ? "float[6,4]" : "float[2,12]";
    auto res =
        run_group(one_node("AllGather", "<group_size = 3, axis = " + std::to_string(axis) + ">",
                           "float[2,4]", out_type),
                  in);
    for (auto& o : res) {
      ASSERT_TRUE(o) << o.status().message();
      const Tensor& y = (*o)[0];
      ASSERT_EQ(y.dims(), (axis == 0 ? std::vector<int64_t>{6, 4} : std::vector<int64_t>{2, 12}));
      for (int64_t i = 0; i < y.dim(0); ++i)
        for (int64_t j = 0; j < y.dim(1); ++j) {
          int r = static_cast<int>(axis == 0 ? i / 2 : j / 4);
          int64_t si = axis == 0 ? i % 2 : i, sj = axis == 0 ? j : j % 4;
          EXPECT_EQ(y.data<float>()[i * y.dim(1) + j], 100.0f * r + 10.0f * si + sj);
        }
    }
  }
}

TEST(Collective, ReduceScatterGivesEachRankItsPartOfTheSum) {
  for (int axis : {0, 1}) {
    std::vector<Tensor> in;
    for (int r = 0; r < 2; ++r) in.push_back(rank_input(r, 4, 6));
    std::string out_type = axis == 0 ? "float[2,6]" : "float[4,3]";
    auto res =
        run_group(one_node("ReduceScatter", "<group_size = 2, axis = " + std::to_string(axis) + ">",
                           "float[4,6]", out_type),
                  in);
    for (int r = 0; r < 2; ++r) {
      auto& o = res[static_cast<size_t>(r)];
      ASSERT_TRUE(o) << o.status().message();
      const Tensor& y = (*o)[0];
      for (int64_t i = 0; i < y.dim(0); ++i)
        for (int64_t j = 0; j < y.dim(1); ++j) {
          int64_t si = axis == 0 ? r * 2 + i : i, sj = axis == 0 ? j : r * 3 + j;
          float want = (0 + 100.0f) + 2 * (10.0f * si + sj);  // rank 0's plus rank 1's
          EXPECT_EQ(y.data<float>()[i * y.dim(1) + j], want) << "rank " << r;
        }
    }
  }
}

TEST(Collective, WithoutACommunicatorSaysHowToRunIt) {
  auto s =
      Session::from_graph(parse(one_node("AllReduce", "", "float[2]", "float[2]")), "reference");
  ASSERT_TRUE(s) << s.status().message();
  auto out = (*s)->run({{"x", Tensor::from_vector<float>({1, 2}, {2})}});
  ASSERT_FALSE(out);
  EXPECT_NE(out.status().message().find("--tensor-parallel"), std::string::npos)
      << out.status().message();
}

TEST(Collective, GroupSizeMustBeTheGroups) {
  std::vector<Tensor> in = {rank_input(0, 1, 2), rank_input(1, 1, 2)};
  auto res = run_group(one_node("AllGather", "<group_size = 4>", "float[1,2]", "float[4,2]"), in);
  for (auto& o : res) {
    ASSERT_FALSE(o);
    EXPECT_NE(o.status().message().find("group_size 4 but the run has 2 ranks"), std::string::npos)
        << o.status().message();
  }
}

TEST(Collective, AHostileGroupSizeIsAnImportError) {
  onnx::ModelProto model;
  std::string text =
      one_node("AllGather", "<group_size = 4611686018427387904>", "float[3,2]", "float[3,2]");
  ASSERT_TRUE(onnx::OnnxParser::Parse(model, text.c_str()).IsOK());
  std::string bytes;
  model.SerializeToString(&bytes);
  auto g = import_onnx_bytes(bytes, "");
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().message().find("group_size must be in 1..1024"), std::string::npos)
      << g.status().message();
}

TEST(Collective, ARankThatFailsStopsTheOthersInsteadOfHangingThem) {
  // Rank 1's input has the wrong shape: it fails before the collective; rank 0, already
  // waiting in it, must come back with an error.
  std::vector<Tensor> in = {rank_input(0, 2, 2), rank_input(1, 3, 2)};
  auto res = run_group(one_node("AllReduce", "", "float[2,2]", "float[2,2]"), in);
  EXPECT_FALSE(res[0]);
  EXPECT_FALSE(res[1]);
  EXPECT_NE(res[0].status().message().find("aborted"), std::string::npos)
      << res[0].status().message();
}

TEST(Collective, ConstantFoldingLeavesCollectivesToRun) {
  auto g = parse(R"(<ir_version: 8, opset_import: ["" : 17, "com.microsoft" : 1]>
g (float[2] x) => (float[2] y) {
  c = Constant<value = float[2] {1, 2}>()
  r = com.microsoft.AllReduce(c)
  y = Add(x, r)
})");
  ASSERT_TRUE(g);
  Status st = run_pipeline(*g, default_pipeline());
  ASSERT_TRUE(st) << st.message();
  bool kept = false;
  for (const auto& n : g->nodes()) kept = kept || n->op_type == "AllReduce";
  EXPECT_TRUE(kept);
}

// A two-layer MLP, split column- then row-parallel.
const char* const kMlp = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[B,4] x) => (float[B,4] y) {
  w1 = Constant<value = float[4,8] {1,2,3,4,5,6,7,8, -1,-2,-3,-4,-5,-6,-7,-8, 0.5,0.5,0.5,0.5,0.5,0.5,0.5,0.5, 1,0,1,0,1,0,1,0}>()
  b1 = Constant<value = float[8] {0,1,0,1,0,1,0,1}>()
  w2 = Constant<value = float[8,4] {1,0,0,0, 0,1,0,0, 0,0,1,0, 0,0,0,1, 1,1,0,0, 0,1,1,0, 0,0,1,1, 1,0,0,1}>()
  h0 = MatMul(x, w1)
  h1 = Add(h0, b1)
  h = Relu(h1)
  y = MatMul(h, w2)
})";

// The group's outputs equal the whole model's, and a failed run (a bad input) leaves the group
// usable for the next one.
TEST(TensorParallelSession, SplitMlpMatchesTheWholeAndRecoversFromAFailedRun) {
  const char* mlp = kMlp;
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, -1, 0, 1, 0.5f}, {2, 4});
  auto whole = Session::from_graph(parse(mlp), "reference");
  ASSERT_TRUE(whole);
  auto want = (*whole)->run({{"x", x}});
  ASSERT_TRUE(want);
  auto tp = TensorParallelSession::from_graph(parse(mlp), "reference", {}, 2);
  ASSERT_TRUE(tp) << tp.status().message();
  EXPECT_EQ((*tp)->report().column_parallel, 1);
  EXPECT_EQ((*tp)->report().row_parallel, 1);
  auto bad = (*tp)->run({{"x", Tensor::from_vector<float>({1, 2, 3}, {1, 3})}});
  EXPECT_FALSE(bad);
  EXPECT_EQ(bad.status().message().find("collective aborted"), std::string::npos)
      << "the cause, not the abort, is reported: " << bad.status().message();
  auto got = (*tp)->run({{"x", x}});
  ASSERT_TRUE(got) << got.status().message();
  for (int64_t k = 0; k < 8; ++k)
    EXPECT_FLOAT_EQ((*got)[0].data<float>()[k], (*want)[0].data<float>()[k]) << k;
}

// One rank per session, each with a communicator made outside (what a process of a torchrun job
// holds): the two sessions, run at once, each return the whole model's outputs.
TEST(TensorParallelSession, OneRankPerSessionWithAnExternalCommunicator) {
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, -1, 0, 1, 0.5f}, {2, 4});
  auto whole = Session::from_graph(parse(kMlp), "cpu");
  ASSERT_TRUE(whole);
  auto want = (*whole)->run({{"x", x}});
  ASSERT_TRUE(want);
  std::vector<std::unique_ptr<Communicator>> group = make_loopback_group(2);
  std::vector<std::unique_ptr<TensorParallelSession>> ranks;
  for (int r = 0; r < 2; ++r) {
    std::shared_ptr<Communicator> c(std::move(group[static_cast<size_t>(r)]));
    auto s = TensorParallelSession::for_rank(parse(kMlp), "cpu", {}, c);
    ASSERT_TRUE(s) << s.status().message();
    EXPECT_EQ((*s)->first_rank(), r);
    EXPECT_EQ((*s)->size(), 2);
    EXPECT_EQ((*s)->local_ranks(), 1);
    EXPECT_EQ((*s)->report().row_parallel, 1);
    ranks.push_back(std::move(s).value());
  }
  std::vector<std::optional<Expected<std::vector<Tensor>>>> got(2);
  std::thread other([&] { got[1] = ranks[1]->run({{"x", x}}); });
  got[0] = ranks[0]->run({{"x", x}});
  other.join();
  for (int r = 0; r < 2; ++r) {
    ASSERT_TRUE(*got[static_cast<size_t>(r)]) << got[static_cast<size_t>(r)]->status().message();
    for (int64_t k = 0; k < 8; ++k)
      EXPECT_FLOAT_EQ((**got[static_cast<size_t>(r)])[0].data<float>()[k],
                      (*want)[0].data<float>()[k])
          << "rank " << r << " element " << k;
  }
}

// A communicator whose collectives fail (a torn-down process group): the run's error names the
// collective's failure; the session is not left in a state that aborts.
class FailingCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 2; }
  std::string describe() const override { return "failing rank 0 of 2"; }
  Status all_reduce_sum(const void*, void*, int64_t, DType) override {
    return err(describe(), ": AllReduce failed: the group is gone");
  }
  Status all_gather(const void*, void*, int64_t, DType) override { return err("gone"); }
  Status reduce_scatter_sum(const void*, void*, int64_t, DType) override { return err("gone"); }
  void abort(const std::string&) override { ++aborts; }
  int aborts = 0;
};

TEST(TensorParallelSession, AFailingExternalCommunicatorIsAnErrorOfTheRun) {
  auto comm = std::make_shared<FailingCommunicator>();
  auto s = TensorParallelSession::for_rank(parse(kMlp), "cpu", {}, comm);
  ASSERT_TRUE(s) << s.status().message();
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, -1, 0, 1, 0.5f}, {2, 4});
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto out = (*s)->run({{"x", x}});
    ASSERT_FALSE(out);
    EXPECT_NE(out.status().message().find("AllReduce failed: the group is gone"), std::string::npos)
        << out.status().message();
  }
  EXPECT_EQ(comm->aborts, 2);
  // A rank outside the group, and a device-resident run of a thread group, are refused.
  struct OutOfGroup : FailingCommunicator {
    int rank() const override { return 2; }
  };
  auto bad =
      TensorParallelSession::for_rank(parse(kMlp), "cpu", {}, std::make_shared<OutOfGroup>());
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.status().message().find("rank 2 of 2"), std::string::npos)
      << bad.status().message();
  auto threads = TensorParallelSession::from_graph(parse(kMlp), "cpu", {}, 2);
  ASSERT_TRUE(threads) << threads.status().message();
  EXPECT_TRUE((*threads)->run_device({{"x", x}}, {}).is_unsupported());
}

}  // namespace
}  // namespace ferrite
