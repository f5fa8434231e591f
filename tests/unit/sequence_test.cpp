// Sequences and optionals (ir/value_kind.h, ops/sequence.cpp): the value model, import of
// sequence and optional types, each op on `reference` and `cpu`, loop-carried sequences, and
// malformed models and inputs as errors naming the node. Also If branches that fail inference
// but never run (their error is deferred to the run).
#include "frontend/onnx/tensor_proto.h"
#include "runtime/compare.h"
#include "runtime/device.h"
#include "test_util.h"

namespace ferrite::testing {
namespace {

// onnx 1.12's C++ text parser (the one the tests link) knows neither seq(...) / optional(...)
// types nor type-valued attributes, so the tests patch those into the parsed model. Declared
// output types need no patch: ferrite infers every value's type and does not read them.
onnx::ModelProto parse(const std::string& text) {
  onnx::ModelProto model;
  auto status = onnx::OnnxParser::Parse(model, text.c_str());
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  return model;
}

std::string bytes_of(const onnx::ModelProto& m) {
  std::string bytes;
  m.SerializeToString(&bytes);
  return bytes;
}

// Graph input `name` becomes a sequence of its declared tensor type.
void make_sequence_input(onnx::ModelProto& m, const std::string& name) {
  for (auto& vi : *m.mutable_graph()->mutable_input()) {
    if (vi.name() != name) continue;
    onnx::TypeProto tensor = vi.type();
    *vi.mutable_type()->mutable_sequence_type()->mutable_elem_type() = tensor;
  }
}

// Every Optional without an input (here and in subgraphs) gets `type`: a float tensor, or a
// sequence of float tensors where `seq`.
void set_optional_types(onnx::GraphProto& g, bool seq) {
  for (auto& n : *g.mutable_node()) {
    for (auto& a : *n.mutable_attribute())
      if (a.has_g()) set_optional_types(*a.mutable_g(), seq);
    if (n.op_type() != "Optional" || n.input_size() > 0) continue;
    auto* a = n.add_attribute();
    a->set_name("type");
    a->set_type(onnx::AttributeProto::TYPE_PROTO);
    onnx::TypeProto tensor;
    tensor.mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
    if (seq)
      *a->mutable_tp()->mutable_sequence_type()->mutable_elem_type() = tensor;
    else
      *a->mutable_tp() = tensor;
  }
}

Expected<std::vector<Tensor>> run_on(const std::string& bytes, const std::string& device,
                                     const std::vector<Session::NamedInput>& inputs) {
  FERRITE_ASSIGN_OR_RETURN(auto g, import_onnx_bytes(bytes, ""));
  FERRITE_ASSIGN_OR_RETURN(auto s, Session::from_graph(std::move(g), device));
  return s->run(inputs);
}

const char* kDevices[] = {"reference", "cpu"};

TEST(Sequence, ValueModel) {
  Tensor a = Tensor::from_vector<float>({1, 2}, {2});
  Tensor s = Tensor::sequence(DType::kF32, {a, a});
  EXPECT_TRUE(s.defined());
  EXPECT_FALSE(s.is_tensor());
  EXPECT_EQ(s.kind(), ValueKind::kSequence);
  EXPECT_EQ(s.items().size(), 2u);
  EXPECT_EQ(s.type_string(), "seq(f32)[2 items]");
  Tensor empty = Tensor::sequence(DType::kI64, {});
  EXPECT_TRUE(empty.defined());
  EXPECT_TRUE(empty.items().empty());
  Tensor none = Tensor::optional(ValueKind::kOptionalSequence, DType::kF32, std::nullopt);
  EXPECT_TRUE(none.defined());
  EXPECT_EQ(none.type_string(), "optional(seq(f32))[none]");
  Tensor some = Tensor::optional(ValueKind::kOptionalTensor, DType::kF32, a);
  EXPECT_EQ(some.type_string(), "optional(f32[2])");
  // Copies share the items: values are immutable.
  Tensor copy = s;
  EXPECT_EQ(&copy.items(), &s.items());
  TensorType t{DType::kF32, Shape::of({2, 3}), ValueKind::kSequence};
  EXPECT_EQ(t.to_string(), "seq(f32[2,3])");
  t.kind = ValueKind::kOptionalSequence;
  EXPECT_EQ(t.to_string(), "optional(seq(f32[2,3]))");
  EXPECT_FALSE(t == (TensorType{DType::kF32, Shape::of({2, 3})}));
  // Comparison goes item by item.
  EXPECT_TRUE(compare_tensors(s, s, default_tolerance(DType::kF32)).ok);
  EXPECT_FALSE(compare_tensors(s, Tensor::sequence(DType::kF32, {a}), {}).ok);
  EXPECT_FALSE(compare_tensors(s, a, {}).ok);
}

// Sequences and optionals are written as SequenceProto / OptionalProto files (ONNX test data)
// and read back as the kind the model declares.
TEST(Sequence, ValueFilesRoundTrip) {
  Tensor a = Tensor::from_vector<float>({1, 2}, {2});
  const Tensor values[] = {
      Tensor::sequence(DType::kF32, {a, a}),
      Tensor::sequence(DType::kF32, {}),
      Tensor::optional(ValueKind::kOptionalTensor, DType::kF32, a),
      Tensor::optional(ValueKind::kOptionalSequence, DType::kF32,
                       Tensor::sequence(DType::kF32, {a})),
      Tensor::optional(ValueKind::kOptionalSequence, DType::kF32, std::nullopt),
  };
  fs::path path = fs::path(::testing::TempDir()) / "ferrite_sequence_value.pb";
  for (const Tensor& v : values) {
    auto bytes = encode_tensor_file("v", v);
    ASSERT_TRUE(bytes) << bytes.status().message();
    std::ofstream(path, std::ios::binary) << *bytes;
    auto back = read_value_file(path, v.kind(), DType::kF32);
    ASSERT_TRUE(back) << back.status().message();
    EXPECT_EQ(back->name, "v");
    EXPECT_TRUE(compare_tensors(back->tensor, v, {}).ok) << v.type_string();
  }
  // A file of another kind than declared is an error, not garbage.
  std::ofstream(path, std::ios::binary) << *encode_tensor_file("v", values[2]);
  EXPECT_FALSE(read_value_file(path, ValueKind::kOptionalSequence, DType::kF32));
  // A TensorProto file where a sequence is declared: protobuf would parse it as an empty
  // SequenceProto; its leftover fields give it away.
  std::ofstream(path, std::ios::binary) << *encode_tensor_file("v", a);
  EXPECT_FALSE(read_value_file(path, ValueKind::kSequence, DType::kF32));
  EXPECT_FALSE(read_value_file(path, ValueKind::kOptionalTensor, DType::kF32));
  fs::remove(path);
}

// x -> SplitToSequence -> insert, erase, at, length -> ConcatFromSequence.
const char* kOpsModel = R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[4,2] x, int64 pos) => (float[?,2] cat, float[2] at, int64 len, float[?,?,2] stack) {
  parts = SplitToSequence <axis = 0> (x)
  row = Constant <value = float[1,2] {7.0, 8.0}> ()
  ins = SequenceInsert (parts, row, pos)
  er = SequenceErase (ins)
  len = SequenceLength (er)
  first = SequenceAt (er, pos)
  at = Squeeze (first)
  cat = ConcatFromSequence <axis = 0> (er)
  stack = ConcatFromSequence <axis = 0, new_axis = 1> (er)
}
)";

TEST(Sequence, OpsRunOnReferenceAndCpu) {
  std::string bytes = text_bytes(kOpsModel);
  Tensor x = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5, 6, 7}, {4, 2});
  for (const char* dev : kDevices) {
    auto out = run_on(bytes, dev, {{"x", x}, {"pos", Tensor::scalar<int64_t>(1)}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    // [r0, row, r1, r2, r3] minus the last: [r0, row, r1, r2].
    EXPECT_EQ(values_of<float>((*out)[0]), std::vector<float>({0, 1, 7, 8, 2, 3, 4, 5})) << dev;
    EXPECT_EQ((*out)[0].dims(), std::vector<int64_t>({4, 2}));
    EXPECT_EQ(values_of<float>((*out)[1]), std::vector<float>({7, 8})) << dev;
    EXPECT_EQ(values_of<int64_t>((*out)[2]), std::vector<int64_t>({4})) << dev;
    EXPECT_EQ((*out)[3].dims(), std::vector<int64_t>({4, 1, 2})) << dev;
  }
}

TEST(Sequence, SplitToSequenceChunksAndKeepdims) {
  std::string bytes = text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[5] x) => (int64 n_chunks, int64 n_ones, float[?] last, float squeezed) {
  split = Constant <value = int64 {2}> ()
  chunks = SplitToSequence (x, split)
  n_chunks = SequenceLength (chunks)
  minus1 = Constant <value = int64 {-1}> ()
  last = SequenceAt (chunks, minus1)
  ones = SplitToSequence <keepdims = 0> (x)
  n_ones = SequenceLength (ones)
  squeezed = SequenceAt (ones, minus1)
}
)");
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5}, {5});
  for (const char* dev : kDevices) {
    auto out = run_on(bytes, dev, {{"x", x}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    EXPECT_EQ(values_of<int64_t>((*out)[0]), std::vector<int64_t>({3}));
    EXPECT_EQ(values_of<int64_t>((*out)[1]), std::vector<int64_t>({5}));
    EXPECT_EQ(values_of<float>((*out)[2]), std::vector<float>({5}));
    EXPECT_EQ((*out)[3].rank(), 0u);
    EXPECT_EQ(values_of<float>((*out)[3]), std::vector<float>({5}));
  }
}

TEST(Sequence, SequenceInputsAndOutputs) {
  onnx::ModelProto m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[?] s, float[3] t) => (float out, float mapped) {
  out = SequenceInsert (s, t)
  mapped = SequenceMap <body = g (float[?] e, float[3] w) => (float[?] r) { r = Add (e, w) }> (s, t)
}
)");
  make_sequence_input(m, "s");  // seq(float[?])
  std::string bytes = bytes_of(m);
  auto g = import_bytes(bytes);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ((*g)->inputs()[0]->type.to_string(), "seq(f32[?])");
  Tensor a = Tensor::from_vector<float>({1, 2, 3}, {3});
  Tensor s = Tensor::sequence(DType::kF32, {a, a});
  for (const char* dev : kDevices) {
    auto out = run_on(bytes, dev, {{"s", s}, {"t", a}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    ASSERT_EQ((*out)[0].kind(), ValueKind::kSequence);
    EXPECT_EQ((*out)[0].items().size(), 3u);
    ASSERT_EQ((*out)[1].items().size(), 2u);
    EXPECT_EQ(values_of<float>((*out)[1].items()[1]), std::vector<float>({2, 4, 6}));
    // A tensor where the model declares a sequence is refused, naming the input.
    auto bad = run_on(bytes, dev, {{"s", a}, {"t", a}});
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.status().message().find("input 's'"), std::string::npos)
        << bad.status().message();
  }
}

TEST(Sequence, OptionalOps) {
  std::string bytes = text_bytes(R"(
<ir_version: 8, opset_import: ["" : 18]>
agraph (float[2] x) => (bool has, bool none_has, float[2] got, bool tensor_has) {
  opt = Optional (x)
  has = OptionalHasElement (opt)
  got = OptionalGetElement (opt)
  tensor_has = OptionalHasElement (x)
  none_has = OptionalHasElement ()
}
)");
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  for (const char* dev : kDevices) {
    auto out = run_on(bytes, dev, {{"x", x}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    EXPECT_EQ(values_of<bool>((*out)[0]), std::vector<bool>({true}));
    EXPECT_EQ(values_of<bool>((*out)[1]), std::vector<bool>({false}));
    EXPECT_EQ(values_of<float>((*out)[2]), std::vector<float>({1, 2}));
    EXPECT_EQ(values_of<bool>((*out)[3]), std::vector<bool>({true}));
  }
}

TEST(Sequence, LoopCarriesASequence) {
  std::string bytes = text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (int64 n, float[2] x) => (float[?,2] y, int64 len) {
  empty = SequenceEmpty ()
  c = Constant <value = bool {1}> ()
  s = Loop (n, c, empty) <body = b (int64 i, bool ci, float si) => (bool co, float so) {
    co = Identity (ci)
    so = SequenceInsert (si, x)
  }>
  len = SequenceLength (s)
  y = ConcatFromSequence <axis = 0, new_axis = 1> (s)
}
)");
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  for (const char* dev : kDevices) {
    auto out = run_on(bytes, dev, {{"n", Tensor::scalar<int64_t>(3)}, {"x", x}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    EXPECT_EQ((*out)[0].dims(), std::vector<int64_t>({3, 2})) << dev;
    EXPECT_EQ(values_of<int64_t>((*out)[1]), std::vector<int64_t>({3})) << dev;
  }
}

// ---- malformed models and inputs: errors naming the node, never an abort ----------------------

void expect_run_error(const std::string& bytes, const std::vector<Session::NamedInput>& inputs,
                      const std::string& node, const std::string& what) {
  for (const char* dev : kDevices) {
    auto out = run_on(bytes, dev, inputs);
    ASSERT_FALSE(out) << dev;
    const std::string& m = out.status().message();
    EXPECT_NE(m.find(node), std::string::npos) << dev << ": " << m;
    EXPECT_NE(m.find(what), std::string::npos) << dev << ": " << m;
  }
}

TEST(Sequence, SequenceAtOutOfRangeIsAnError) {
  std::string bytes = text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x, int64 pos) => (float[2] y) {
  s = SequenceConstruct (x, x)
  y = SequenceAt (s, pos)
}
)");
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  expect_run_error(bytes, {{"x", x}, {"pos", Tensor::scalar<int64_t>(2)}}, "(SequenceAt)",
                   "position 2 is out of range [-2, 1]");
  expect_run_error(bytes, {{"x", x}, {"pos", Tensor::scalar<int64_t>(-3)}}, "(SequenceAt)",
                   "out of range");
}

TEST(Sequence, ConcatOfMismatchedShapesIsAnError) {
  std::string bytes = text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2,3] a, float[2,4] b) => (float[?,?] y, float[?,?] z) {
  s = SequenceConstruct (a, b)
  y = ConcatFromSequence <axis = 1> (s)
  z = ConcatFromSequence <axis = 0> (s)
}
)");
  Tensor a = Tensor::zeros(DType::kF32, {2, 3}), b = Tensor::zeros(DType::kF32, {2, 4});
  expect_run_error(bytes, {{"a", a}, {"b", b}}, "(ConcatFromSequence)",
                   "element 1 is f32[2,4], which does not concatenate");
}

TEST(Sequence, EmptyOptionalAndEraseAreErrors) {
  onnx::ModelProto m = parse(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x) => (float[2] y, int64 n) {
  none = Optional ()
  y = OptionalGetElement (none)
  e = SequenceEmpty ()
  e2 = SequenceErase (e)
  n = SequenceLength (e2)
}
)");
  set_optional_types(*m.mutable_graph(), false);
  std::string bytes = bytes_of(m);
  expect_run_error(bytes, {{"x", Tensor::zeros(DType::kF32, {2})}}, "(OptionalGetElement)",
                   "empty");
}

TEST(Sequence, WrongKindsAreImportErrors) {
  struct Case {
    const char* model;
    const char* want;
  };
  const Case cases[] = {
      // A tensor op given a sequence.
      {R"(<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x) => (float[2] y) { s = SequenceConstruct (x) y = Add (s, x) })",
       "(Add): input 0 ('s') is seq(f32[2]), but Add takes tensors only"},
      // A sequence op given a tensor.
      {R"(<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x) => (int64 n) { n = SequenceLength (x) })",
       "(SequenceLength): input_sequence (input 0) must be a sequence"},
      // Inserting an int64 tensor into a float sequence.
      {R"(<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x, int64[2] k) => (float s) { e = SequenceConstruct (x) s = SequenceInsert (e, k) })",
       "(SequenceInsert): inputs of type T must share one dtype, got f32 and i64"},
      // Constructing from mixed dtypes.
      {R"(<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x, int64[2] k) => (float s) { s = SequenceConstruct (x, k) })",
       "(SequenceConstruct): inputs must share one dtype"},
      // A position that is not an integer scalar.
      {R"(<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x, float p) => (float[2] y) { s = SequenceConstruct (x) y = SequenceAt (s, p) })",
       "(SequenceAt): position (input 1) must be an int32 or int64 scalar"},
      // An axis outside the elements' rank.
      {R"(<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] x) => (float[?] y) { s = SequenceConstruct (x) y = ConcatFromSequence <axis = 3> (s) })",
       "(ConcatFromSequence): axis 3 is outside"},
  };
  for (const Case& c : cases) {
    auto g = import_bytes(text_bytes(c.model));
    ASSERT_FALSE(g) << c.want;
    EXPECT_NE(g.status().message().find(c.want), std::string::npos) << g.status().message();
  }
}

// ---- If branches validated only when they run -------------------------------------------------

// then_branch splits 5 elements into 4 equal chunks, which Split refuses.
const char* kDeferredIf = R"(
<ir_version: 8, opset_import: ["" : 18]>
agraph (bool c, float[5] x) => (float[5] y) {
  y = If (c) <
    then_branch = t () => (float[?] a) { a, b, d, e = Split <num_outputs = 4> (x) },
    else_branch = f () => (float[5] z) { z = Neg (x) }
  >
}
)";

TEST(Sequence, UntakenInvalidIfBranchIsDeferred) {
  std::string bytes = text_bytes(kDeferredIf);
  auto g = import_bytes(bytes);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_TRUE(verify_graph(**g).is_ok());
  Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5}, {5});
  for (const char* dev : kDevices) {
    auto out = run_on(bytes, dev, {{"c", Tensor::scalar<bool>(false)}, {"x", x}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    EXPECT_EQ(values_of<float>((*out)[0]), std::vector<float>({-1, -2, -3, -4, -5}));
    // Taking the invalid branch reports its error, naming the If and the Split.
    auto bad = run_on(bytes, dev, {{"c", Tensor::scalar<bool>(true)}, {"x", x}});
    ASSERT_FALSE(bad) << dev;
    const std::string& m = bad.status().message();
    EXPECT_NE(m.find("(If): then_branch runs, but it was invalid"), std::string::npos) << m;
    EXPECT_NE(m.find("(Split)"), std::string::npos) << m;
  }
}

TEST(Sequence, IfWithBothBranchesInvalidIsAnImportError) {
  auto g = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 18]>
agraph (bool c, float[5] x) => (float[?] y) {
  y = If (c) <
    then_branch = t () => (float[?] a) { a, b, d, e = Split <num_outputs = 4> (x) },
    else_branch = f () => (float[?] a2) { a2, b2, d2, e2 = Split <num_outputs = 4> (x) }
  >
}
)"));
  ASSERT_FALSE(g);
  EXPECT_NE(g.status().message().find("(Split)"), std::string::npos) << g.status().message();
}

TEST(Sequence, IfBranchesProduceOptionals) {
  onnx::ModelProto m = parse(R"(
<ir_version: 8, opset_import: ["" : 18]>
agraph (bool c, float[2] x) => (bool has) {
  o = If (c) <
    then_branch = t () => (float a) { a = Optional () },
    else_branch = f () => (float b) { s = SequenceConstruct (x) b = Optional (s) }
  >
  has = OptionalHasElement (o)
}
)");
  set_optional_types(*m.mutable_graph(), true);  // then_branch: an empty optional(seq(float))
  std::string bytes = bytes_of(m);
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  for (const char* dev : kDevices)
    for (bool c : {true, false}) {
      auto out = run_on(bytes, dev, {{"c", Tensor::scalar<bool>(c)}, {"x", x}});
      ASSERT_TRUE(out) << dev << ": " << out.status().message();
      EXPECT_EQ(values_of<bool>((*out)[0]), std::vector<bool>({!c})) << dev;
    }
}

}  // namespace
}  // namespace ferrite::testing
