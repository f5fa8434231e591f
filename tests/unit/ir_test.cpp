// IR building blocks: symbolic broadcasting, the verifier on hand-built graphs, the printer's
// exact text form, and 16-bit float conversions.
#include <cmath>
#include <cstring>
#include <limits>

#include "ops/op_schema.h"
#include "test_util.h"

namespace ferrite::testing {
namespace {

Shape shape(std::vector<Dim> dims) {
  return Shape(std::move(dims));
}
Dim sym(const char* s) {
  return Dim::symbol(s);
}

std::string bcast(const Shape& a, const Shape& b) {
  std::string e;
  auto r = broadcast_shapes(a, b, &e);
  return r ? r->to_string() : "error: " + e;
}

TEST(ShapeBroadcast, StaticAndSymbolic) {
  EXPECT_EQ(bcast(Shape::of({2, 1, 4}), Shape::of({3, 1})), "[2,3,4]");
  EXPECT_EQ(bcast(Shape::of({}), Shape::of({5})), "[5]");
  EXPECT_EQ(bcast(Shape::of({0, 1}), Shape::of({1, 7})), "[0,7]");
  EXPECT_EQ(bcast(shape({sym("batch"), 4}), Shape::of({4})), "[batch,4]");
  EXPECT_EQ(bcast(shape({sym("batch"), 1}), shape({1, sym("seq")})), "[batch,seq]");
  EXPECT_EQ(bcast(shape({sym("n")}), shape({sym("n")})), "[n]");
  // A symbol against a static non-1 dim must equal it (or be 1, which broadcasting allows).
  EXPECT_EQ(bcast(shape({sym("n")}), Shape::of({3})), "[3]");
  EXPECT_EQ(bcast(Shape::of({3}), shape({sym("n")})), "[3]");
  // Two unrelated symbols: unknown, never a guess.
  EXPECT_EQ(bcast(shape({sym("n")}), shape({sym("m")})), "[?]");
  EXPECT_EQ(bcast(shape({Dim::unknown()}), Shape::of({1})), "[?]");
  EXPECT_EQ(bcast(shape({sym("n") * Dim(2)}), shape({sym("n") + sym("n")})), "[n*2]");
  EXPECT_EQ(bcast(Shape::unknown_rank(), Shape::of({2})), "[*]");
}

TEST(ShapeBroadcast, DefiniteMismatchNamesBothShapes) {
  EXPECT_EQ(bcast(Shape::of({2, 3}), Shape::of({4})),
            "error: cannot broadcast [2,3] with [4] (dim 1: 3 vs 4)");
  EXPECT_EQ(bcast(shape({sym("b"), 3}), shape({sym("b"), 5})),
            "error: cannot broadcast [b,3] with [b,5] (dim 1: 3 vs 5)");
}

// A decoding step's positions: Range(0, past + 1) over a cache of `past` entries is past + 1
// long, not max(0, past + 1), which no other dim equals (the attention scores then had an
// unknown dim, and on cuda such steps ran on the host).
TEST(ShapeInference, RangeToASizePlusAConstantHasThatLength) {
  auto g = testing::parse_onnx_text(R"(
<ir_version: 8, opset_import: ["" : 17]>
g (float[B,2,P,4] past) => (int64[N] pos, int64[M] down) {
  len = Shape <start = 2, end = 3> (past)
  one = Constant <value = int64[1] {1}> ()
  zero = Constant <value = int64 {0}> ()
  step = Constant <value = int64 {1}> ()
  plus = Add(len, one)
  limit = Squeeze(plus)
  pos = Range(zero, limit, step)
  minus = Sub(len, one)
  low = Squeeze(minus)
  down = Range(zero, low, step)
}
)");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->outputs()[0]->type.shape.to_string(), "[P+1]");
  EXPECT_EQ(g->outputs()[1]->type.shape.to_string(), "[max(0,P-1)]");  // P may be 0
}

TEST(ShapeBasics, NumelAndStatic) {
  Shape s = shape({sym("batch"), 12, 64});
  EXPECT_FALSE(s.is_static());
  EXPECT_EQ(s.numel().to_string(), "batch*768");
  EXPECT_EQ(Shape::of({2, 3}).static_dims(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(Shape::unknown_rank().numel().to_string(), "?");
  EXPECT_EQ(shape({Dim::unknown(), 2}).numel().to_string(), "?");
  EXPECT_EQ((TensorType{DType::kBF16, Shape::scalar()}).to_string(), "bf16[]");
}

// --- verifier ---------------------------------------------------------------------------------

const OpSchema* schema(const char* op) {
  return OpRegistry::global().find("", op, 17);
}

// x -> Relu -> y, hand-built and fully typed.
struct HandGraph {
  Graph g;
  Value* x;
  Value* y;
  Node* relu;
  HandGraph() {
    g.opsets()[""] = 17;
    x = g.add_value("x", {DType::kF32, Shape::of({2})});
    x->is_graph_input = true;
    g.inputs().push_back(x);
    relu = g.add_node("Relu", "relu");
    relu->schema = schema("Relu");
    relu->opset = 17;
    relu->inputs = {x};
    y = add_output(relu, "y");
    g.outputs().push_back(y);
  }
  Value* add_output(Node* n, const char* name) {
    Value* v = g.add_value(name, {DType::kF32, Shape::of({2})});
    v->producer = n;
    v->producer_output = static_cast<int>(n->outputs.size());
    n->outputs.push_back(v);
    return v;
  }
};

TEST(Verifier, AcceptsWellFormedGraph) {
  HandGraph h;
  EXPECT_TRUE(verify_graph(h.g));
  EXPECT_TRUE(failed_with(Session::from_graph(nullptr, "reference"), {"no graph"}));
}

TEST(Verifier, ValueDefinedTwice) {
  HandGraph h;
  h.g.inputs().push_back(h.x);
  EXPECT_TRUE(
      failed_with(verify_graph(h.g), {"value 'x' is defined more than once (graph input)"}));
  HandGraph h2;
  Value* c = h2.g.add_value("c", {DType::kF32, Shape::of({2})});
  c->constant = Tensor::zeros(DType::kF32, {2});
  h2.g.initializers().push_back(c);
  EXPECT_TRUE(verify_graph(h2.g));
  // An initializer that a node claims to produce.
  h2.relu->outputs.push_back(c);
  c->producer = h2.relu;
  c->producer_output = 1;
  EXPECT_TRUE(failed_with(verify_graph(h2.g), {"initializer 'c' has a producer"}));
}

TEST(Verifier, DuplicateDefinition) {
  HandGraph h;
  Node* n2 = h.g.add_node("Relu", "relu2");
  n2->schema = schema("Relu");
  n2->inputs = {h.x};
  n2->outputs = {h.y};  // y is already produced by relu
  EXPECT_TRUE(failed_with(verify_graph(h.g),
                          {"node 'relu2' (Relu)", "output 'y'", "inconsistent producer"}));
  h.y->producer = n2;
  h.y->producer_output = 0;
  // Now relu's claim is the inconsistent one.
  EXPECT_TRUE(failed_with(verify_graph(h.g), {"node 'relu' (Relu)", "inconsistent producer"}));
}

TEST(Verifier, DuplicateName) {
  HandGraph h;
  Node* n2 = h.g.add_node("Relu", "relu2");
  n2->schema = schema("Relu");
  n2->inputs = {h.y};
  h.add_output(n2, "y");  // a second value named "y"
  EXPECT_TRUE(failed_with(verify_graph(h.g), {"two values share the name 'y'"}));
}

TEST(Verifier, UseBeforeDefinition) {
  HandGraph h;
  Node* first = h.g.add_node("Relu", "early");
  first->schema = schema("Relu");
  Value* z = h.add_output(first, "z");
  (void)z;
  // Make `early` consume `y` but sit before `relu` in node order.
  first->inputs = {h.y};
  std::swap(h.g.nodes()[0], h.g.nodes()[1]);
  EXPECT_TRUE(failed_with(verify_graph(h.g),
                          {"node 'early' (Relu)", "input 'y' is not defined before use"}));
}

TEST(Verifier, UndefinedValueAndOutput) {
  HandGraph h;
  Value* stray = h.g.add_value("stray", {DType::kF32, Shape::of({2})});
  h.relu->inputs = {stray};
  EXPECT_TRUE(failed_with(verify_graph(h.g), {"node 'relu' (Relu)", "input 'stray'"}));
  HandGraph h2;
  h2.g.outputs().push_back(h2.g.add_value("orphan", {DType::kF32, Shape::of({2})}));
  EXPECT_TRUE(failed_with(verify_graph(h2.g), {"graph output 'orphan' is never defined"}));
}

TEST(Verifier, MissingTypesAndNulls) {
  HandGraph h;
  h.y->type.dtype = DType::kUndefined;
  EXPECT_TRUE(failed_with(verify_graph(h.g), {"graph output 'y' has no inferred dtype"}));
  HandGraph h2;
  h2.g.inputs().push_back(nullptr);
  EXPECT_TRUE(failed_with(verify_graph(h2.g), {"a graph input is null"}));
  HandGraph h3;
  h3.g.outputs().push_back(nullptr);
  EXPECT_TRUE(failed_with(verify_graph(h3.g), {"a graph output is null"}));
  HandGraph h4;
  h4.g.outputs().clear();
  EXPECT_TRUE(failed_with(verify_graph(h4.g), {"no outputs"}));
  // The printer copes with what the verifier refuses.
  EXPECT_NE(print_graph(h2.g).find("input _: _"), std::string::npos);
}

TEST(Verifier, GraphInputWithProducerAndBadConstant) {
  HandGraph h;
  h.x->producer = h.relu;
  EXPECT_TRUE(failed_with(verify_graph(h.g), {"graph input 'x' has a producer"}));
  HandGraph h2;
  Value* c = h2.g.add_value("c", {DType::kF32, Shape::of({2})});
  h2.g.initializers().push_back(c);
  EXPECT_TRUE(failed_with(verify_graph(h2.g), {"initializer 'c' has no data"}));
  c->constant = Tensor::zeros(DType::kF32, {3});
  EXPECT_TRUE(failed_with(verify_graph(h2.g), {"'c' holds f32[3] data but is typed f32[2]"}));
  c->constant = Tensor::zeros(DType::kI32, {2});
  EXPECT_TRUE(failed_with(verify_graph(h2.g), {"'c' holds i32[2] data"}));
  c->constant = Tensor::zeros(DType::kF32, {2});
  EXPECT_TRUE(verify_graph(h2.g));
}

TEST(Verifier, SessionRefusesMalformedGraph) {
  auto h = std::make_unique<Graph>();
  h->opsets()[""] = 17;
  Value* x = h->add_value("x", {DType::kF32, Shape::of({2})});
  h->inputs().push_back(x);
  Node* n = h->add_node("Relu", "r");
  n->schema = schema("Relu");
  Value* y = h->add_value("y", {DType::kF32, Shape::of({2})});
  n->inputs = {y};  // uses its own output
  n->outputs = {y};
  y->producer = n;
  y->producer_output = 0;
  h->outputs().push_back(y);
  EXPECT_TRUE(failed_with(Session::from_graph(std::move(h), "reference"),
                          {"node 'r' (Relu)", "not defined before use"}));
}

// --- printer ----------------------------------------------------------------------------------

TEST(Printer, GoldenText) {
  ModelBuilder b(17);
  b.graph()->set_name("tiny");
  b.input("x", kOnnxFloat, {"batch", 4});
  b.init_f32("w", {4, 3}, std::vector<float>(12, 0.25f));
  b.init_f32("bias", {3}, {1, 2, 3});
  auto* fc = b.node("Gemm", {"x", "w", "bias"}, {"h"}, "fc");
  add_int_attr(fc, "transB", 0);
  b.node("Relu", {"h"}, {"r"});
  b.node("Less", {"r", "bias"}, {"mask"}, "cmp");
  b.output("r");
  b.output("mask", kOnnxBool);
  auto g = import_bytes(b.bytes());
  ASSERT_TRUE(g) << g.status().message();
  const char* expected =
      "graph tiny { opset ai.onnx:17\n"
      "  input %x: f32[batch,4]\n"
      "  const %w: f32[4,3]\n"
      "  const %bias: f32[3]\n"
      "  %h = Gemm(%x, %w, %bias) {alpha=1, beta=1, transA=0, transB=0} : f32[batch,3]  # fc\n"
      "  %r = Relu(%h) : f32[batch,3]  # Relu_1\n"
      "  %mask = Less(%r, %bias) : bool[batch,3]  # cmp\n"
      "  return %r, %mask\n"
      "}\n";
  EXPECT_EQ(print_graph(**g), expected);

  PrintOptions opts;
  opts.show_node_names = false;
  opts.elide_constants = false;
  const char* expected_full =
      "graph tiny { opset ai.onnx:17\n"
      "  input %x: f32[batch,4]\n"
      "  const %w: f32[4,3] = [0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25,0.25]\n"
      "  const %bias: f32[3] = [1,2,3]\n"
      "  %h = Gemm(%x, %w, %bias) {alpha=1, beta=1, transA=0, transB=0} : f32[batch,3]\n"
      "  %r = Relu(%h) : f32[batch,3]\n"
      "  %mask = Less(%r, %bias) : bool[batch,3]\n"
      "  return %r, %mask\n"
      "}\n";
  EXPECT_EQ(print_graph(**g, opts), expected_full);
}

// --- 16-bit floats ----------------------------------------------------------------------------

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint16_t half_bits(float f) {
  return Half(f).bits;
}
float half_value(uint16_t b) {
  Half h;
  h.bits = b;
  return static_cast<float>(h);
}
uint16_t bf16_bits(float f) {
  return BFloat16(f).bits;
}
float bf16_value(uint16_t b) {
  BFloat16 h;
  h.bits = b;
  return static_cast<float>(h);
}

TEST(Half, ExactRoundTripOfEveryBitPattern) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = half_value(static_cast<uint16_t>(b));
    uint16_t back = half_bits(f);
    bool nan = ((b >> 10) & 0x1f) == 0x1f && (b & 0x3ff);
    if (nan) {
      EXPECT_TRUE(std::isnan(f)) << b;
      EXPECT_EQ(back & 0x7c00, 0x7c00) << b;
      EXPECT_NE(back & 0x3ff, 0) << b;
      EXPECT_EQ(back & 0x8000, b & 0x8000) << b;
    } else {
      ASSERT_EQ(back, b) << "half 0x" << std::hex << b << " -> " << f;
    }
  }
}

TEST(Half, SpecialValues) {
  EXPECT_EQ(half_bits(0.f), 0x0000);
  EXPECT_EQ(half_bits(-0.f), 0x8000);
  EXPECT_EQ(half_bits(1.f), 0x3c00);
  EXPECT_EQ(half_bits(-2.f), 0xc000);
  EXPECT_EQ(half_bits(65504.f), 0x7bff);  // max finite
  EXPECT_EQ(half_bits(std::numeric_limits<float>::infinity()), 0x7c00);
  EXPECT_EQ(half_bits(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(half_bits(1e6f), 0x7c00);  // overflow to inf
  EXPECT_EQ(half_bits(-1e6f), 0xfc00);
  EXPECT_TRUE(std::isnan(half_value(half_bits(std::nanf("")))));
  // A NaN whose payload lives only in the low float bits must stay NaN, not become inf.
  EXPECT_TRUE(std::isnan(half_value(half_bits(from_bits(0x7f800001)))));
  EXPECT_EQ(half_value(0x0001), std::ldexp(1.f, -24));     // smallest subnormal
  EXPECT_EQ(half_value(0x03ff), std::ldexp(1023.f, -24));  // largest subnormal
  EXPECT_EQ(half_value(0x0400), std::ldexp(1.f, -14));     // smallest normal
  EXPECT_EQ(half_bits(from_bits(1)), 0x0000);              // float subnormal underflows
}

TEST(Half, RoundToNearestEven) {
  // Between 1 and the next half (1 + 2^-10): the midpoint ties to even (1), above rounds up.
  EXPECT_EQ(half_bits(1.f + std::ldexp(1.f, -11)), 0x3c00);
  EXPECT_EQ(half_bits(1.f + std::ldexp(1.f, -11) + std::ldexp(1.f, -20)), 0x3c01);
  // From an odd mantissa the tie rounds up to even.
  EXPECT_EQ(half_bits(1.f + std::ldexp(3.f, -11)), 0x3c02);
  EXPECT_EQ(half_bits(1.f + std::ldexp(1.f, -12)), 0x3c00);
  // 65520 is the midpoint between 65504 and 2^16: ties to even, which is infinity.
  EXPECT_EQ(half_bits(65519.f), 0x7bff);
  EXPECT_EQ(half_bits(65520.f), 0x7c00);
  // Subnormals: 2^-25 is halfway between 0 and the smallest subnormal (ties to 0);
  // 3 * 2^-25 is halfway between 1 and 2 subnormal units (ties to 2).
  EXPECT_EQ(half_bits(std::ldexp(1.f, -25)), 0x0000);
  EXPECT_EQ(half_bits(std::ldexp(1.f, -25) * 1.0001f), 0x0001);
  EXPECT_EQ(half_bits(std::ldexp(3.f, -25)), 0x0002);
  EXPECT_EQ(half_bits(std::ldexp(5.f, -25)), 0x0002);
  EXPECT_EQ(half_bits(-std::ldexp(5.f, -25)), 0x8002);
  // Rounding the largest subnormal up carries into the smallest normal.
  EXPECT_EQ(half_bits(std::ldexp(1023.5f, -24) * 1.00001f), 0x0400);
}

TEST(Half, MatchesCompilerFloat16WhereAvailable) {
#if defined(__FLT16_MAX__)
  // Compare against the compiler's own conversion for a sweep of float bit patterns.
  for (uint64_t u = 0; u <= 0xffffffffull; u += 0x1357) {
    float f = from_bits(static_cast<uint32_t>(u));
    _Float16 ref = static_cast<_Float16>(f);
    uint16_t ref_bits;
    std::memcpy(&ref_bits, &ref, 2);
    if (std::isnan(f)) continue;
    ASSERT_EQ(half_bits(f), ref_bits) << std::hex << u;
  }
#else
  GTEST_SKIP() << "no _Float16";
#endif
}

TEST(BFloat16, RoundTripAndSpecials) {
  for (uint32_t b = 0; b <= 0xffff; ++b) {
    float f = bf16_value(static_cast<uint16_t>(b));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(bf16_value(bf16_bits(f)))) << b;
    } else {
      ASSERT_EQ(bf16_bits(f), b) << std::hex << b;
    }
  }
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(bf16_bits(-std::numeric_limits<float>::infinity()), 0xff80);
  // NaN with payload only in the dropped bits stays NaN.
  EXPECT_TRUE(std::isnan(bf16_value(bf16_bits(from_bits(0x7f800001)))));
  EXPECT_TRUE(std::isnan(bf16_value(bf16_bits(from_bits(0xff800001)))));
  EXPECT_EQ(bf16_bits(std::numeric_limits<float>::max()), 0x7f80);  // rounds up to inf
  EXPECT_EQ(bf16_bits(from_bits(0x00000001)), 0x0000);              // tiny subnormal rounds to 0
  EXPECT_EQ(bf16_bits(from_bits(0x00008000)), 0x0000);              // tie to even (0)
  EXPECT_EQ(bf16_bits(from_bits(0x00018000)), 0x0002);              // tie to even (2)
  EXPECT_EQ(bf16_value(0x0001), from_bits(0x00010000));             // bf16 subnormal
}

TEST(BFloat16, RoundToNearestEven) {
  EXPECT_EQ(bf16_bits(from_bits(0x3f808000)), 0x3f80);  // tie, even stays
  EXPECT_EQ(bf16_bits(from_bits(0x3f818000)), 0x3f82);  // tie, odd rounds up
  EXPECT_EQ(bf16_bits(from_bits(0x3f808001)), 0x3f81);  // above the tie
  EXPECT_EQ(bf16_bits(from_bits(0x3f807fff)), 0x3f80);  // below the tie
  EXPECT_EQ(bf16_bits(from_bits(0xbf818000)), 0xbf82);  // negative
}

TEST(DType, ConvertAndNames) {
  EXPECT_EQ(static_cast<float>(convert<Half>(2.5)), 2.5f);
  EXPECT_EQ(convert<int32_t>(convert<BFloat16>(int64_t{384})), 384);
  EXPECT_EQ(static_cast<float>(convert<BFloat16>(convert<Half>(0.5f))), 0.5f);
  EXPECT_EQ(dtype_name(DType::kBF16), "bf16");
  EXPECT_EQ(dtype_from_name("u16"), DType::kU16);
  EXPECT_EQ(dtype_from_name("undefined"), std::nullopt);
  for (int t = -3; t < 40; ++t) {
    auto d = dtype_from_onnx(t);
    if (d) {
      EXPECT_EQ(dtype_to_onnx(*d), t);
    }
  }
  EXPECT_EQ(dtype_from_onnx(8), std::nullopt);  // string
  EXPECT_EQ(dtype_from_onnx(16), DType::kBF16);
}

}  // namespace
}  // namespace ferrite::testing
