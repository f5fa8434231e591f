// The numeric side of the golden pass tests: for every tests/golden/passes/*.txt model, the graph
// after its passes must compute what the graph before them computes, on the reference device,
// for random inputs (symbolic dims bound to small sizes, the same size per symbol). The golden
// IR shows WHAT a rewrite produced; this shows that it is RIGHT, e.g. that a folded Conv weight
// or a fused attention's scale and key transpose are correct. A tensor-parallel split
// (`shard-tensor-parallel{rank=R size=N}`) is checked by running every rank of the group at once
// over the loopback communicator: each rank's outputs must be the whole graph's.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <thread>

#include "distributed/loopback.h"
#include "frontend/onnx/importer.h"
#include "passes/pass.h"
#include "runtime/compare.h"
#include "runtime/precision.h"
#include "runtime/session.h"

namespace ferrite {
namespace {

namespace fs = std::filesystem;

fs::path golden_dir() {
  return fs::path(FERRITE_TEST_DATA_DIR).parent_path() / "golden" / "passes";
}

struct GoldenCase {
  std::vector<std::string> passes;
  std::string model_bytes;
};

GoldenCase load_case(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  GoldenCase c;
  std::string head = text.substr(0, text.find("--- expected\n"));
  auto nl = head.find('\n');
  std::stringstream passes(head.substr(8, nl - 8));
  for (std::string p; std::getline(passes, p, ',');)
    if (!p.empty()) c.passes.push_back(p);
  onnx::ModelProto model;
  auto st = onnx::OnnxParser::Parse(model, head.substr(nl + 1).c_str());
  EXPECT_TRUE(st.IsOK()) << st.ErrorMessage();
  model.SerializeToString(&c.model_bytes);
  return c;
}

// Random inputs for the graph's declared inputs; symbols get sizes 2, 3, 4, ... in order of
// appearance, unknown dims get 2.
std::vector<Session::NamedInput> random_inputs(const Graph& g) {
  std::map<std::string, int64_t> sizes;
  std::mt19937_64 rng(7);
  std::vector<Session::NamedInput> out;
  for (const Value* v : g.inputs()) {
    std::vector<int64_t> dims;
    for (const Dim& d : v->type.shape.dims()) {
      if (auto x = d.value()) {
        dims.push_back(*x);
      } else if (d.is_known()) {
        auto [it, fresh] = sizes.emplace(d.to_string(), static_cast<int64_t>(sizes.size()) + 2);
        dims.push_back(it->second);
      } else {
        dims.push_back(2);
      }
    }
    Tensor t = Tensor::zeros(v->type.dtype, dims);
    visit_dtype(t.dtype(), [&]<class T>() {
      for (int64_t i = 0; i < t.numel(); ++i) {
        if constexpr (is_float_v<T>)
          t.data<T>()[i] = convert<T>(std::uniform_real_distribution<float>(-2.f, 2.f)(rng));
        else
          t.data<T>()[i] = static_cast<T>(rng() % 2);
      }
    });
    out.push_back({v->name, std::move(t)});
  }
  return out;
}

class PassNumeric : public ::testing::TestWithParam<std::string> {};

// The group size of a `shard-tensor-parallel{rank=R size=N}` pass in `passes` (1: none), and the
// passes with every such pass made rank `rank`'s.
int group_size(const std::vector<std::string>& passes) {
  for (const std::string& p : passes)
    if (p.rfind("shard-tensor-parallel{", 0) == 0) {
      auto at = p.find("size=");
      return at == std::string::npos ? 1 : std::atoi(p.c_str() + at + 5);
    }
  return 1;
}
std::vector<std::string> for_rank(std::vector<std::string> passes, int rank, int size) {
  for (std::string& p : passes)
    if (p.rfind("shard-tensor-parallel{", 0) == 0)
      p = "shard-tensor-parallel{rank=" + std::to_string(rank) + " size=" + std::to_string(size) + "}";
  return passes;
}

// The graph after `passes` on `inputs`: one session, or every rank of a tensor-parallel group at
// once (each rank's outputs must agree; rank 0's are returned).
Expected<std::vector<Tensor>> run_after(const GoldenCase& c,
                                        const std::vector<Session::NamedInput>& inputs) {
  const int size = group_size(c.passes);
  std::vector<std::unique_ptr<Session>> ranks;
  for (int r = 0; r < size; ++r) {
    FERRITE_ASSIGN_OR_RETURN(auto g, import_onnx_bytes(c.model_bytes, ""));
    FERRITE_RETURN_IF_ERROR(run_pipeline(*g, for_rank(c.passes, r, size)));
    FERRITE_ASSIGN_OR_RETURN(auto s, Session::from_graph(std::move(g), "reference"));
    ranks.push_back(std::move(s));
  }
  auto comms = make_loopback_group(size);
  std::vector<std::optional<Expected<std::vector<Tensor>>>> outs(static_cast<size_t>(size));
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      BindCommunicator bind(comms[static_cast<size_t>(r)].get());
      outs[static_cast<size_t>(r)] = ranks[static_cast<size_t>(r)]->run(inputs);
      if (!*outs[static_cast<size_t>(r)]) comms[static_cast<size_t>(r)]->abort("rank failed");
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < size; ++r) {
    auto& o = *outs[static_cast<size_t>(r)];
    if (!o) return o.status();
    for (size_t i = 0; r > 0 && i < o->size(); ++i)
      if (!compare_tensors((*o)[i], (**outs[0])[i], Tolerance{0, 0}).ok)
        return err("rank ", r, " output ", i, " differs from rank 0's");
  }
  return std::move(*outs[0]);
}

TEST_P(PassNumeric, OptimizedGraphComputesTheSame) {
  GoldenCase c = load_case(golden_dir() / GetParam());
  auto plain = import_onnx_bytes(c.model_bytes, "");
  ASSERT_TRUE(plain) << plain.status().message();
  auto inputs = random_inputs(**plain);
  auto s0 = Session::from_graph(std::move(plain).value(), "reference");
  ASSERT_TRUE(s0) << s0.status().message();
  auto want = (*s0)->run(inputs);
  auto got = run_after(c, inputs);
  ASSERT_TRUE(want) << want.status().message();
  ASSERT_TRUE(got) << got.status().message();
  ASSERT_EQ(got->size(), want->size());
  for (size_t i = 0; i < got->size(); ++i) {
    // Fused ops round once where the decomposed graph rounds after every op. A precision
    // conversion is checked with that precision's documented tolerance.
    Precision prec = Precision::kF32;
    for (const std::string& p : c.passes) {
      if (p == precision_pass_name(DType::kBF16)) prec = Precision::kBF16;
      if (p == precision_pass_name(DType::kF16)) prec = Precision::kF16;
    }
    Tolerance tol = precision_tolerance(prec, (*want)[i].dtype());
    CompareResult r = compare_tensors((*got)[i], (*want)[i], tol);
    EXPECT_TRUE(r.ok) << "output " << i << ": " << r.message;
  }
}

std::vector<std::string> golden_files() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(golden_dir()))
    if (e.path().extension() == ".txt") out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

INSTANTIATE_TEST_SUITE_P(Passes, PassNumeric, ::testing::ValuesIn(golden_files()),
                         [](const auto& info) {
                           std::string n = info.param.substr(0, info.param.size() - 4);
                           for (char& c : n)
                             if (!isalnum(static_cast<unsigned char>(c))) c = '_';
                           return n;
                         });

}  // namespace
}  // namespace ferrite
