// Memory planning: arena layouts (reuse, alignment, in-place chains, the no-overlap invariant on
// random lifetimes), plan caching per symbol binding, the in-place predicate of generated
// kernels, and the cpu device running models out of its arena.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "cli_util.h"
#include "codegen/cpp_source.h"
#include "frontend/onnx/importer.h"
#include "memory/in_place.h"
#include "memory/planner.h"
#include "runtime/session.h"
#include "test_util.h"

namespace ferrite {
namespace {

MemoryRequest req(int64_t bytes, int first, int last, int in_place_of = -1) {
  MemoryRequest r;
  r.bytes = bytes;
  r.first = first;
  r.last = last;
  r.in_place_of = in_place_of;
  return r;
}

MemoryPlan plan_ok(const std::vector<MemoryRequest>& reqs) {
  auto p = plan_memory(reqs);
  EXPECT_TRUE(p) << p.status().message();
  if (!p) return {};
  EXPECT_EQ(verify_plan(reqs, *p), "");
  return *p;
}

TEST(MemoryPlanner, DisjointLifetimesShareMemory) {
  MemoryPlan p = plan_ok({req(1000, 0, 1), req(1000, 2, 3)});
  EXPECT_EQ(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(p.arena_bytes, 1000);
  EXPECT_EQ(p.total_bytes, 2000);
  EXPECT_DOUBLE_EQ(p.reuse_ratio(), 2.0);
}

TEST(MemoryPlanner, OverlappingLifetimesGetDisjointMemory) {
  // Live at the same step (1 writes the second while it reads the first).
  MemoryPlan p = plan_ok({req(1000, 0, 1), req(1000, 1, 2)});
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(p.arena_bytes, 1024 + 1000);
  EXPECT_EQ(p.live_peak_bytes, 2000);
}

TEST(MemoryPlanner, ChainReusesTwoSlots) {
  // A linear chain: each buffer is read by the next step only; two slots suffice.
  std::vector<MemoryRequest> reqs;
  for (int i = 0; i < 10; ++i) reqs.push_back(req(4096, i, i + 1));
  MemoryPlan p = plan_ok(reqs);
  EXPECT_EQ(p.arena_bytes, 2 * 4096);
  EXPECT_EQ(p.total_bytes, 10 * 4096);
  EXPECT_EQ(p.live_peak_bytes, 2 * 4096);
}

TEST(MemoryPlanner, SmallBufferFitsIntoGapOfDeadLargeOne) {
  // 0 (large) dies at 1; 2 (small) lives beside 1 (large, live 1..3) in 0's old place.
  MemoryPlan p = plan_ok({req(8000, 0, 1), req(8000, 1, 3), req(100, 2, 3)});
  EXPECT_EQ(p.arena_bytes, 16000);  // two large slots; the small one reuses the first
  EXPECT_EQ(p.offsets[2], p.offsets[0]);
}

TEST(MemoryPlanner, Alignment) {
  std::vector<MemoryRequest> reqs = {req(10, 0, 5), req(3, 0, 5), req(100, 0, 5), req(1, 0, 5)};
  reqs[2].alignment = 256;
  MemoryPlan p = plan_ok(reqs);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(p.offsets[i] % 64, 0) << i;
  EXPECT_EQ(p.offsets[2] % 256, 0);
  std::vector<int64_t> sorted = p.offsets;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
}

TEST(MemoryPlanner, InPlaceHints) {
  // 1 overwrites 0 (which dies where 1 is written): one slot for both.
  MemoryPlan p = plan_ok({req(512, 0, 1), req(512, 1, 2, /*in_place_of=*/0)});
  EXPECT_EQ(p.in_place, 1);
  EXPECT_EQ(p.in_place_of[1], 0);
  EXPECT_EQ(p.offsets[0], p.offsets[1]);
  EXPECT_EQ(p.arena_bytes, 512);
  // A chain of three.
  p = plan_ok({req(512, 0, 1), req(512, 1, 2, 0), req(512, 2, 3, 1)});
  EXPECT_EQ(p.in_place, 2);
  EXPECT_EQ(p.arena_bytes, 512);
  // Not where the source is still live afterwards.
  p = plan_ok({req(512, 0, 2), req(512, 1, 3, 0)});
  EXPECT_EQ(p.in_place, 0);
  EXPECT_NE(p.offsets[0], p.offsets[1]);
  // Two buffers cannot both take the same storage.
  p = plan_ok({req(512, 0, 1), req(512, 1, 2, 0), req(512, 1, 2, 0)});
  EXPECT_EQ(p.in_place, 1);
  EXPECT_NE(p.offsets[1], p.offsets[2]);
  // Out-of-range and self hints are ignored, mutual hints form no cycle.
  p = plan_ok({req(64, 3, 3, 1), req(64, 3, 3, 0), req(64, 0, 1, 7), req(64, 0, 1, 2)});
  EXPECT_EQ(p.in_place, 1);
}

TEST(MemoryPlanner, ZeroSizedBuffersAndEmptyPlans) {
  MemoryPlan p = plan_ok({});
  EXPECT_EQ(p.arena_bytes, 0);
  p = plan_ok({req(0, 0, 3), req(0, 1, 2), req(64, 1, 1)});
  EXPECT_EQ(p.arena_bytes, 64);
  EXPECT_EQ(p.total_bytes, 64);
}

TEST(MemoryPlanner, RejectsInvalidRequests) {
  EXPECT_FALSE(plan_memory({req(-1, 0, 1)}));
  EXPECT_FALSE(plan_memory({req(8, 2, 1)}));
  MemoryRequest r = req(8, 0, 1);
  r.alignment = 48;
  EXPECT_FALSE(plan_memory({r}));
  EXPECT_FALSE(plan_memory({req(int64_t{1} << 62, 0, 1), req(int64_t{1} << 62, 0, 1)}));
}

// Checks the invariant independently of verify_plan: at every step, the buffers live at that step
// occupy pairwise disjoint bytes (in-place chains excepted: they share one slot on purpose).
void check_no_overlap(const std::vector<MemoryRequest>& reqs, const MemoryPlan& p, int steps) {
  std::vector<int> root(reqs.size());
  for (size_t i = 0; i < reqs.size(); ++i) {
    int c = static_cast<int>(i);
    while (p.in_place_of[c] >= 0) c = p.in_place_of[c];
    root[i] = c;
  }
  for (int t = 0; t < steps; ++t) {
    std::vector<std::pair<int64_t, size_t>> live;  // (offset, request)
    for (size_t i = 0; i < reqs.size(); ++i)
      if (reqs[i].first <= t && t <= reqs[i].last && reqs[i].bytes > 0)
        live.push_back({p.offsets[i], i});
    for (size_t a = 0; a < live.size(); ++a)
      for (size_t b = a + 1; b < live.size(); ++b) {
        size_t i = live[a].second, j = live[b].second;
        bool overlap = p.offsets[i] < p.offsets[j] + reqs[j].bytes &&
                       p.offsets[j] < p.offsets[i] + reqs[i].bytes;
        if (overlap && root[i] == root[j] && p.offsets[i] == p.offsets[j]) continue;
        ASSERT_FALSE(overlap) << "step " << t << ": buffers " << i << " and " << j;
      }
    for (const auto& [off, i] : live) ASSERT_LE(off + reqs[i].bytes, p.arena_bytes);
  }
}

TEST(MemoryPlanner, RandomLifetimesNeverOverlap) {
  std::mt19937_64 rng(12345);
  for (int trial = 0; trial < 400; ++trial) {
    int steps = 1 + static_cast<int>(rng() % 40);
    int n = static_cast<int>(rng() % 60);
    std::vector<MemoryRequest> reqs;
    for (int i = 0; i < n; ++i) {
      int first = static_cast<int>(rng() % steps);
      int len = static_cast<int>(rng() % 4 == 0 ? rng() % steps : rng() % 4);
      MemoryRequest r = req(0, first, std::min(steps - 1, first + len));
      // Mixed scales, odd sizes, a few zero-sized and over-aligned ones.
      switch (rng() % 4) {
        case 0:
          r.bytes = static_cast<int64_t>(rng() % 100);
          break;
        case 1:
          r.bytes = static_cast<int64_t>(rng() % 5000);
          break;
        case 2:
          r.bytes = static_cast<int64_t>(1 << (rng() % 20));
          break;
        default:
          r.bytes = static_cast<int64_t>(rng() % 1000000);
          break;
      }
      if (rng() % 8 == 0) r.alignment = int64_t{1} << (rng() % 12);
      if (rng() % 3 == 0 && i > 0) r.in_place_of = static_cast<int>(rng() % i);
      reqs.push_back(r);
    }
    // Hints that fit (a predecessor dying where this one is written) so that chains do occur.
    for (int i = 0; i < n; ++i)
      for (int j = 0; j < i; ++j)
        if (reqs[j].last == reqs[i].first && rng() % 2 == 0) reqs[i].in_place_of = j;
    auto p = plan_memory(reqs);
    ASSERT_TRUE(p) << p.status().message();
    ASSERT_EQ(verify_plan(reqs, *p), "") << "trial " << trial;
    check_no_overlap(reqs, *p, steps);
    for (size_t i = 0; i < reqs.size(); ++i)
      ASSERT_EQ(p->offsets[i] % std::max<int64_t>(64, reqs[i].alignment), 0);
    EXPECT_GE(p->arena_bytes, p->live_peak_bytes);
    int64_t padded_total = 0;
    for (const auto& r : reqs) padded_total += r.bytes + std::max<int64_t>(64, r.alignment);
    EXPECT_LE(p->arena_bytes, padded_total);
  }
}

TEST(MemoryPlanner, RandomPlansStayNearTheLowerBound) {
  // Not a guarantee, a quality check of the heuristic on typical shapes (a few long-lived
  // activations among many short-lived temporaries).
  std::mt19937_64 rng(7);
  double worst = 1;
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<MemoryRequest> reqs;
    for (int i = 0; i < 200; ++i) {
      int64_t bytes = 64 * static_cast<int64_t>(1 + rng() % 4096);
      int len = rng() % 10 == 0 ? static_cast<int>(rng() % 40) : static_cast<int>(rng() % 3);
      reqs.push_back(req(bytes, i, i + len));
    }
    MemoryPlan p = plan_ok(reqs);
    worst = std::max(worst, static_cast<double>(p.arena_bytes) / p.live_peak_bytes);
  }
  EXPECT_LT(worst, 1.5);
}

TEST(MemoryPlanner, LargeGraphsPlanQuickly) {
  // 20000 buffers of a long chain with skip connections: planning must stay cheap (it runs once
  // per input shape). With few buffers live at a time it is O(n log n); a full scan of the placed
  // blocks per block (O(n^2)) took 0.7 s here.
  std::vector<MemoryRequest> reqs;
  for (int i = 0; i < 20000; ++i)
    reqs.push_back(req(64 * (1 + i % 7), i, i + (i % 50 == 0 ? 40 : 1)));
  auto t0 = std::chrono::steady_clock::now();
  auto p = plan_memory(reqs);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(p);
  EXPECT_LT(p->arena_bytes, p->live_peak_bytes * 2);
  EXPECT_LT(s, 5.0);
  std::printf("planned %zu buffers in %.3f s\n", reqs.size(), s);
}

TEST(MemoryPlanner, SymbolicPlansAreCachedPerBinding) {
  SymExpr n = SymExpr::symbol("n"), m = SymExpr::symbol("m");
  std::vector<SymbolicRequest> reqs(3);
  reqs[0].bytes = n * m * 4;
  reqs[0].first = 0;
  reqs[0].last = 1;
  reqs[1].bytes = n * 64;
  reqs[1].first = 1;
  reqs[1].last = 2;
  reqs[2].bytes = SymExpr(100);
  reqs[2].first = 2;
  reqs[2].last = 3;
  SymbolicMemoryPlanner planner(reqs, {"n", "m"});
  bool fresh = false;
  auto a = planner.plan_for({2, 3}, &fresh);
  ASSERT_TRUE(a);
  EXPECT_TRUE(fresh);
  EXPECT_EQ((*a)->total_bytes, 24 + 128 + 100);
  auto b = planner.plan_for({2, 3}, &fresh);
  ASSERT_TRUE(b);
  EXPECT_FALSE(fresh);
  EXPECT_EQ(*a, *b);  // the same cached plan
  auto c = planner.plan_for({100, 3}, &fresh);
  ASSERT_TRUE(c);
  EXPECT_TRUE(fresh);
  EXPECT_EQ((*c)->total_bytes, 1200 + 6400 + 100);
  EXPECT_EQ(planner.cached_plans(), 2u);
  EXPECT_EQ(planner.plans_computed(), 2u);
  // Wrong arity and negative sizes are errors, not crashes.
  EXPECT_FALSE(planner.plan_for({1}));
  EXPECT_FALSE(planner.plan_for({-1, 3}));
  // Bounded: the least recently used plan goes first.
  for (int64_t v = 1000; v < 1000 + static_cast<int64_t>(SymbolicMemoryPlanner::kMaxCachedPlans);
       ++v)
    ASSERT_TRUE(planner.plan_for({v, 1}));
  EXPECT_EQ(planner.cached_plans(), SymbolicMemoryPlanner::kMaxCachedPlans);
  ASSERT_TRUE(planner.plan_for({1000 + 10, 1}, &fresh));
  EXPECT_FALSE(fresh);
  ASSERT_TRUE(planner.plan_for({2, 3}, &fresh));
  EXPECT_TRUE(fresh);  // evicted
}

PointwiseKernel kernel_2x3(SymExpr address, DType in = DType::kF32, DType out = DType::kF32) {
  PointwiseKernel k;
  k.name = "k";
  k.shape = {Dim(2), Dim(3)};
  k.out_dtype = out;
  k.input_buffers = {7};
  int l = k.body.load(0, in, std::move(address));
  k.root = k.body.unary("exp", l, in);
  k.output_buffer = 8;
  return k;
}

TEST(InPlace, LoadAtStoreIndexOnly) {
  SymExpr x0 = SymExpr::symbol(loop_var(0)), x1 = SymExpr::symbol(loop_var(1));
  EXPECT_TRUE(pointwise_in_place_ok(kernel_2x3(x0 * 3 + x1), 7));
  EXPECT_FALSE(pointwise_in_place_ok(kernel_2x3(x0 * 3 + x1), 9));      // not an input
  EXPECT_FALSE(pointwise_in_place_ok(kernel_2x3(x1 * 2 + x0), 7));      // transposed read
  EXPECT_FALSE(pointwise_in_place_ok(kernel_2x3(x1), 7));               // broadcast read
  EXPECT_FALSE(pointwise_in_place_ok(kernel_2x3(x0 * 3 + x1 + 1), 7));  // shifted read
  EXPECT_FALSE(pointwise_in_place_ok(kernel_2x3(x0 * 3 + x1, DType::kF64, DType::kF32), 7));
  EXPECT_TRUE(pointwise_in_place_ok(kernel_2x3(x0 * 3 + x1, DType::kI32, DType::kF32), 7));
  // A second load of the same input at another index disqualifies it.
  PointwiseKernel k = kernel_2x3(x0 * 3 + x1);
  int other = k.body.load(0, DType::kF32, x0 * 3);
  k.root = k.body.binary("add", k.root, other, DType::kF32);
  EXPECT_FALSE(pointwise_in_place_ok(k, 7));
}

TEST(InPlace, MarkedKernelsDropRestrict) {
  onnx::ModelProto model;
  ASSERT_TRUE(onnx::OnnxParser::Parse(model, R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[n,8] x, float[8,8] w) => (float[n,8] y) {
  a = MatMul(x, w)
  b = Exp(a)
  c = Transpose<perm = [1, 0]>(b)
  d = MatMul(c, a)
  y = MatMul(b, d)
}
)")
                  .IsOK());
  std::string bytes;
  model.SerializeToString(&bytes);
  auto g = import_onnx_bytes(bytes, "");
  ASSERT_TRUE(g) << g.status().message();
  auto lg = lower_graph(**g);
  ASSERT_TRUE(lg);
  // Exp(a) could overwrite a elementwise, but a is read again later: no candidate. The copy
  // that makes Transpose(b) contiguous reads b transposed: no candidate either.
  EXPECT_EQ(mark_in_place_candidates(*lg), 0);
  std::string plain = generate_cpp_source(*lg);
  EXPECT_EQ(plain.find("float* out ="), std::string::npos);

  ASSERT_TRUE(onnx::OnnxParser::Parse(model, R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[n,8] x, float[8,8] w) => (float[n,8] y) {
  a = MatMul(x, w)
  b = Exp(a)
  y = MatMul(b, w)
}
)")
                  .IsOK());
  model.SerializeToString(&bytes);
  g = import_onnx_bytes(bytes, "");
  ASSERT_TRUE(g) << g.status().message();
  lg = lower_graph(**g);
  ASSERT_TRUE(lg);
  EXPECT_EQ(mark_in_place_candidates(*lg), 1);
  std::string src = generate_cpp_source(*lg);
  EXPECT_NE(
      src.find("  const float* in0 = (const float*)bufs[0];\n  float* out = (float*)bufs[1];"),
      std::string::npos)
      << src;
}

// --- the cpu device with its arena -----------------------------------------------------------

std::unique_ptr<Session> session_for(const char* text, const std::string& device,
                                     bool passes = true) {
  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, text);
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  std::string bytes;
  model.SerializeToString(&bytes);
  auto graph = import_onnx_bytes(bytes, "");
  EXPECT_TRUE(graph) << graph.status().message();
  if (!graph) return nullptr;
  RunOptions opts;
  if (!passes) opts.passes = std::vector<std::string>{};
  auto s = Session::from_graph(std::move(graph).value(), device, opts);
  EXPECT_TRUE(s) << s.status().message();
  return s ? std::move(s).value() : nullptr;
}

Tensor iota_f32(std::vector<int64_t> dims, float scale) {
  Tensor t = Tensor::zeros(DType::kF32, std::move(dims));
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = scale * static_cast<float>((i * 37) % 23 - 11);
  return t;
}

void expect_close(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.dims(), b.dims());
  // f32 tolerance relative to magnitude: library GEMMs sum in a different order than reference.
  for (int64_t i = 0; i < a.numel(); ++i) {
    float want = b.data<float>()[i];
    ASSERT_NEAR(a.data<float>()[i], want, 1e-4f + 1e-5f * std::fabs(want)) << i;
  }
}

// Library outputs (MatMul) and generated kernels (Exp, Abs, Neg; activations such as Relu would
// fuse into the MatMul) alternate, so the arena holds both kinds and the kernels write over the
// MatMul outputs they consume. The last MatMul and the Add fuse into the output.
const char* kChain = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[n,8] x, float[8,8] w) => (float[n,8] y) {
  a = MatMul(x, w)
  b = Exp(a)
  c = MatMul(b, w)
  d = Abs(c)
  e = MatMul(d, w)
  f = Neg(e)
  g = MatMul(f, w)
  y = Add(g, x)
}
)";

TEST(CpuArena, ChainMatchesReferenceAndReusesMemory) {
  auto cpu = session_for(kChain, "cpu");
  auto ref = session_for(kChain, "reference");
  ASSERT_TRUE(cpu && ref);
  Tensor w = iota_f32({8, 8}, 0.05f);
  for (int64_t n : {3, 17, 3}) {
    Tensor x = iota_f32({n, 8}, 0.1f);
    auto got = cpu->run({{"x", x}, {"w", w}});
    auto want = ref->run({{"x", x}, {"w", w}});
    ASSERT_TRUE(got) << got.status().message();
    ASSERT_TRUE(want) << want.status().message();
    expect_close((*got)[0], (*want)[0]);
    auto m = cpu->stats().memory;
    ASSERT_TRUE(m);
    // a, b, c, d, e, f: 6 intermediates of n*8 floats; b, d, f overwrite a, c, e.
    EXPECT_EQ(m->planned_buffers, 6);
    EXPECT_EQ(m->in_place, 3);
    EXPECT_EQ(m->intermediate_bytes, 6 * n * 8 * 4);
    EXPECT_EQ(m->unplanned_buffers, 0);
    EXPECT_LE(m->planned_peak_bytes, 2 * ((n * 32 + 63) / 64 * 64));
    EXPECT_GE(m->arena_capacity_bytes, m->planned_peak_bytes);
  }
  EXPECT_FALSE(ref->stats().memory);  // the reference device plans nothing
}

// A one-input Sum runs as a library step that returns its input (a view of `a`'s arena slot);
// `a` dies there and `x2` takes its slot while `r` is still needed, so the view must be copied
// out. The Reshape with a shape from an input does the same with an output of unknown size.
const char* kLibraryView = R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[n,8] x, float[8,8] w, float[8,8] w2, int64[2] s) => (float[n,8] y, float[n,8] z) {
  a = MatMul(x, w)
  r = Sum(a)
  x2 = Neg(r)
  b = MatMul(x2, w2)
  y = Add(r, b)
  a2 = MatMul(x, w2)
  r2 = Reshape(a2, s)
  c = MatMul(x, w)
  c2 = Exp(c)
  z = Add(r2, c2)
}
)";

TEST(CpuArena, LibraryViewsOfArenaBuffersAreCopiedOut) {
  // Without graph passes, which would drop the one-input Sum.
  auto cpu = session_for(kLibraryView, "cpu", /*passes=*/false);
  auto ref = session_for(kLibraryView, "reference");
  ASSERT_TRUE(cpu && ref);
  Tensor w = iota_f32({8, 8}, 0.03f), w2 = iota_f32({8, 8}, -0.02f);
  std::vector<Tensor> first;
  for (int64_t n : {4, 9}) {
    Tensor x = iota_f32({n, 8}, 0.1f + static_cast<float>(n));
    Tensor s = Tensor::from_vector<int64_t>({-1, 8}, {2});
    auto got = cpu->run({{"x", x}, {"w", w}, {"w2", w2}, {"s", s}});
    auto want = ref->run({{"x", x}, {"w", w}, {"w2", w2}, {"s", s}});
    ASSERT_TRUE(got) << got.status().message();
    ASSERT_TRUE(want) << want.status().message();
    for (size_t i = 0; i < 2; ++i) expect_close((*got)[i], (*want)[i]);
    if (first.empty()) {
      first = {(*got)[0].clone(), (*got)[1].clone(), (*got)[0], (*got)[1]};
    }
  }
  // Outputs own their memory: the second run did not touch the first run's outputs.
  expect_close(first[0], first[2]);
  expect_close(first[1], first[3]);
}

TEST(CpuArena, RunJsonAndLogReportMemory) {
  ferrite::testing::TempDir dir;
  onnx::ModelProto model;
  ASSERT_TRUE(onnx::OnnxParser::Parse(model, kChain).IsOK());
  std::string bytes;
  model.SerializeToString(&bytes);
  std::filesystem::path path = dir.write("chain.onnx", bytes);
  auto r = ferrite::testing::run_ferrite(
      dir,
      {"run", path.string(), "--device", "cpu", "--input", "x=random:7x8", "--input",
       "w=random:8x8", "--quiet", "--output-dir", (dir / "out").string()},
      {{"FERRITE_LOG", "memory"}});
  ASSERT_TRUE(r.exited && r.code == 0) << r.err;
  std::ifstream js(dir / "out" / "run.json");
  std::stringstream j, l;
  j << js.rdbuf();
  l << r.err;
  auto run = nlohmann::json::parse(j.str(), nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(run.is_object()) << j.str();
  // 6 buffers of 7*8 floats (224 bytes) in two slots, the second at 256; per run and overall.
  ASSERT_EQ(run["runs"].size(), 1u) << j.str();
  EXPECT_TRUE(run["runs"][0]["seconds"].is_number()) << j.str();
  for (const auto& mem : {run["runs"][0]["memory"], run["memory"]}) {
    EXPECT_EQ(mem.at("planned_peak_bytes"), 480) << j.str();
    EXPECT_EQ(mem.at("intermediate_bytes"), 1344) << j.str();
  }
  EXPECT_NE(l.str().find("[memory] n=7: 6 planned buffers (3 in place), peak 480 bytes, "
                         "intermediates 1344 bytes, reuse 2.80x"),
            std::string::npos)
      << l.str();
}

}  // namespace
}  // namespace ferrite
