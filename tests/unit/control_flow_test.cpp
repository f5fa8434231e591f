// Control flow (If, Loop, Scan): subgraph attributes with outer-scope captures through import,
// printing, copying, inference, the passes and the kernels on `reference` and `cpu`; malformed
// bodies are errors naming the node.
#include "passes/pass.h"
#include "runtime/device.h"
#include "runtime/guards.h"
#include "test_util.h"

namespace ferrite::testing {
namespace {

Expected<std::vector<Tensor>> run_on(const std::string& bytes, const std::string& device,
                                     const std::vector<Session::NamedInput>& inputs) {
  FERRITE_ASSIGN_OR_RETURN(auto g, import_onnx_bytes(bytes, ""));
  FERRITE_ASSIGN_OR_RETURN(auto s, Session::from_graph(std::move(g), device));
  return s->run(inputs);
}

const Node* find_op(const Graph& g, const std::string& op) {
  for (const auto& n : g.nodes())
    if (n->op_type == op) return n.get();
  return nullptr;
}

// y = If(c) { x + w } else { x - w }: w is used only inside the branches.
const char* kIfModel = R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool c, float[2] x) => (float[2] y) {
  w = Constant <value = float[2] {10.0, 20.0}> ()
  y = If (c) <
    then_branch = then_g () => (float[2] t) { t = Add (x, w) },
    else_branch = else_g () => (float[2] e) { e = Sub (x, w) }
  >
}
)";

TEST(ControlFlow, IfImportsCapturesAndPrints) {
  auto g = import_bytes(text_bytes(kIfModel));
  ASSERT_TRUE(g) << g.status().message();
  const Node* n = find_op(**g, "If");
  ASSERT_TRUE(n);
  // cond, then the captured x and w (every branch captures the same list).
  ASSERT_EQ(n->inputs.size(), 3u);
  EXPECT_EQ(n->num_captured_inputs(), 2u);
  EXPECT_EQ(n->num_explicit_inputs(), 1u);
  for (const Graph* sg : n->subgraphs()) {
    ASSERT_EQ(sg->captures().size(), 2u);
    EXPECT_EQ(sg->captures()[0]->name, n->inputs[1]->name);
    EXPECT_EQ(sg->captures()[1]->name, n->inputs[2]->name);
  }
  EXPECT_EQ(n->outputs[0]->type.to_string(), "f32[2]");
  std::string text = print_graph(**g);
  EXPECT_NE(text.find("then_branch: graph then_g {"), std::string::npos) << text;
  EXPECT_NE(text.find("capture %x: f32[2]"), std::string::npos) << text;
  EXPECT_NE(text.find("%t = Add(%x, %w)"), std::string::npos) << text;
  EXPECT_TRUE(verify_graph(**g).is_ok());
  // A copy owns its subgraphs.
  auto copy = copy_graph(**g);
  const Node* c = find_op(*copy, "If");
  ASSERT_TRUE(c);
  EXPECT_NE(c->subgraphs()[0], n->subgraphs()[0]);
  EXPECT_EQ(print_graph(*copy), text);
}

TEST(ControlFlow, IfRunsOnReferenceAndCpu) {
  std::string bytes = text_bytes(kIfModel);
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  for (const char* dev : {"reference", "cpu"}) {
    for (bool c : {true, false}) {
      auto out = run_on(bytes, dev, {{"c", Tensor::scalar<bool>(c)}, {"x", x}});
      ASSERT_TRUE(out) << dev << ": " << out.status().message();
      EXPECT_EQ(values_of<float>((*out)[0]),
                c ? std::vector<float>({11, 22}) : std::vector<float>({-9, -18}))
          << dev;
    }
  }
}

TEST(ControlFlow, PassesKeepValuesUsedOnlyInSubgraphs) {
  auto g = import_bytes(text_bytes(kIfModel));
  ASSERT_TRUE(g) << g.status().message();
  ASSERT_TRUE(run_pipeline(**g, default_pipeline()).is_ok());
  ASSERT_TRUE(verify_graph(**g).is_ok());
  const Node* n = find_op(**g, "If");
  ASSERT_TRUE(n);
  ASSERT_EQ(n->inputs.size(), 3u);
  // w (a Constant, folded into an initializer) is still there for the branches.
  bool has_w = false;
  for (const Value* v : (*g)->initializers()) has_w = has_w || v == n->inputs[2];
  for (const auto& node : (*g)->nodes())
    for (const Value* o : node->outputs) has_w = has_w || o == n->inputs[2];
  EXPECT_TRUE(has_w) << print_graph(**g);
}

// Nested: the inner If reads `x` of the outermost graph, through the outer branch's captures.
TEST(ControlFlow, NestedSubgraphsCaptureThroughEachLevel) {
  std::string bytes = text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool a, bool b, float[2] x) => (float[2] y) {
  y = If (a) <
    then_branch = outer_then () => (float[2] t) {
      t = If (b) <
        then_branch = inner_then () => (float[2] u) { u = Neg (x) },
        else_branch = inner_else () => (float[2] v) { v = Abs (x) }
      >
    },
    else_branch = outer_else () => (float[2] e) { e = Identity (x) }
  >
}
)");
  auto g = import_bytes(bytes);
  ASSERT_TRUE(g) << g.status().message();
  const Node* outer = find_op(**g, "If");
  ASSERT_EQ(outer->inputs.size(), 3u);  // a, b, x
  Tensor x = Tensor::from_vector<float>({-1, 2}, {2});
  for (const char* dev : {"reference", "cpu"}) {
    auto out =
        run_on(bytes, dev,
               {{"a", Tensor::scalar<bool>(true)}, {"b", Tensor::scalar<bool>(false)}, {"x", x}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    EXPECT_EQ(values_of<float>((*out)[0]), std::vector<float>({1, 2})) << dev;
  }
}

TEST(ControlFlow, IfMergesBranchShapes) {
  auto g = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool c, float[2,3] x, float[2,5] z) => (float[2,?] y) {
  y = If (c) <
    then_branch = t () => (float[2,3] a) { a = Identity (x) },
    else_branch = e () => (float[2,5] b) { b = Identity (z) }
  >
}
)"));
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(find_op(**g, "If")->outputs[0]->type.to_string(), "f32[2,?]");
  // A cond known at import picks the branch's type.
  auto known = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2,3] x, float[2,5] z) => (float[2,5] y) {
  c = Constant <value = bool {0}> ()
  y = If (c) <
    then_branch = t () => (float[2,3] a) { a = Identity (x) },
    else_branch = e () => (float[2,5] b) { b = Identity (z) }
  >
}
)"));
  ASSERT_TRUE(known) << known.status().message();
  EXPECT_EQ(find_op(**known, "If")->outputs[0]->type.to_string(), "f32[2,5]");
}

// The If's branches differ in length, so its output (and the Concat after it) has an unknown dim:
// known only once the If ran, which devices with library ops must not read as 0.
TEST(ControlFlow, UnknownDimsAfterAnIfRunOnEveryDevice) {
  std::string bytes = text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool c, float[2] x, float[3] z, float[1] w) => (float[?] y) {
  v = If (c) <
    then_branch = t () => (float[2] a) { a = Identity (x) },
    else_branch = e () => (float[3] b) { b = Identity (z) }
  >
  y = Concat <axis = 0> (v, w)
}
)");
  std::vector<std::string> devices{"reference", "cpu", "null"};
  std::string gxu = DeviceRegistry::global().origin("gxu");
  if (!gxu.empty() && gxu != "built-in") devices.push_back("gxu");
  for (const std::string& dev : devices) {
    auto out = run_on(bytes, dev,
                      {{"c", Tensor::scalar<bool>(false)},
                       {"x", Tensor::from_vector<float>({1, 2}, {2})},
                       {"z", Tensor::from_vector<float>({3, 4, 5}, {3})},
                       {"w", Tensor::from_vector<float>({6}, {1})}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    EXPECT_EQ(values_of<float>((*out)[0]), std::vector<float>({3, 4, 5, 6})) << dev;
  }
}

// Counts up to M = 10 but stops once i reaches 3 (the body's cond is i < 3): 4 iterations.
const char* kLoopModel = R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (int64 m, bool c, float[2] s0, float[2] step) => (float[2] s, float[?,2] trace) {
  s, trace = Loop (m, c, s0) <
    body = body_g (int64 i, bool cin, float[2] sin) => (bool cout, float[2] sout, float[2] tr) {
      three = Constant <value = int64 {3}> ()
      cout = Less (i, three)
      sout = Add (sin, step)
      tr = Identity (sin)
    }
  >
}
)";

TEST(ControlFlow, LoopStopsWhenTheBodysCondTurnsFalse) {
  std::string bytes = text_bytes(kLoopModel);
  auto g = import_bytes(bytes);
  ASSERT_TRUE(g) << g.status().message();
  const Node* n = find_op(**g, "Loop");
  EXPECT_EQ(n->outputs[0]->type.to_string(), "f32[2]");
  EXPECT_EQ(n->outputs[1]->type.to_string(), "f32[?,2]");
  for (const char* dev : {"reference", "cpu"}) {
    auto out = run_on(bytes, dev,
                      {{"m", Tensor::scalar<int64_t>(10)},
                       {"c", Tensor::scalar<bool>(true)},
                       {"s0", Tensor::from_vector<float>({0, 1}, {2})},
                       {"step", Tensor::from_vector<float>({1, 2}, {2})}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    EXPECT_EQ(values_of<float>((*out)[0]), std::vector<float>({4, 9})) << dev;
    EXPECT_EQ((*out)[1].dims(), std::vector<int64_t>({4, 2})) << dev;
    EXPECT_EQ(values_of<float>((*out)[1]), std::vector<float>({0, 1, 1, 3, 2, 5, 3, 7})) << dev;
    // M bounds it; cond false at entry runs no iteration.
    out = run_on(bytes, dev,
                 {{"m", Tensor::scalar<int64_t>(2)},
                  {"c", Tensor::scalar<bool>(true)},
                  {"s0", Tensor::from_vector<float>({0, 1}, {2})},
                  {"step", Tensor::from_vector<float>({1, 2}, {2})}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    EXPECT_EQ(values_of<float>((*out)[0]), std::vector<float>({2, 5})) << dev;
    out = run_on(bytes, dev,
                 {{"m", Tensor::scalar<int64_t>(5)},
                  {"c", Tensor::scalar<bool>(false)},
                  {"s0", Tensor::from_vector<float>({0, 1}, {2})},
                  {"step", Tensor::from_vector<float>({1, 2}, {2})}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    EXPECT_EQ(values_of<float>((*out)[0]), std::vector<float>({0, 1})) << dev;
    EXPECT_EQ((*out)[1].dims(), std::vector<int64_t>({0, 2})) << dev;
  }
}

TEST(ControlFlow, LoopNegativeTripCountIsAnError) {
  auto out = run_on(text_bytes(kLoopModel), "reference",
                    {{"m", Tensor::scalar<int64_t>(-1)},
                     {"c", Tensor::scalar<bool>(true)},
                     {"s0", Tensor::from_vector<float>({0, 1}, {2})},
                     {"step", Tensor::from_vector<float>({1, 2}, {2})}});
  EXPECT_TRUE(failed_with(out, {"(Loop)", "trip count M is negative (-1)"}));
}

// A carried value that grows each iteration: inference widens its dim to unknown.
TEST(ControlFlow, LoopWidensCarriedShapes) {
  std::string bytes = text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (int64 m, float[1] s0) => (float[?] s) {
  s = Loop (m, , s0) <
    body = body_g (int64 i, bool cin, float[1] sin) => (bool cout, float[?] sout) {
      cout = Identity (cin)
      sout = Concat <axis = 0> (sin, sin)
    }
  >
}
)");
  auto g = import_bytes(bytes);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(find_op(**g, "Loop")->outputs[0]->type.to_string(), "f32[?]");
  auto out =
      run_on(bytes, "reference",
             {{"m", Tensor::scalar<int64_t>(3)}, {"s0", Tensor::from_vector<float>({5}, {1})}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), std::vector<int64_t>({8}));
}

// Running sums over the rows of x, forward and in reverse; the reverse scan output is also
// written in reverse, so that both scans read the rows of x from the last to the first.
const char* kScanModel = R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[2] init, float[3,2] x) => (float[2] fin, float[3,2] sums, float[2] rfin, float[3,2] rsums) {
  fin, sums = Scan (init, x) <
    num_scan_inputs = 1,
    body = f (float[2] acc, float[2] row) => (float[2] acc_out, float[2] acc_copy) {
      acc_out = Add (acc, row)
      acc_copy = Identity (acc_out)
    }
  >
  rfin, rsums = Scan (init, x) <
    num_scan_inputs = 1, scan_input_directions = [1], scan_output_directions = [1],
    body = r (float[2] racc, float[2] rrow) => (float[2] racc_out, float[2] racc_copy) {
      racc_out = Add (racc, rrow)
      racc_copy = Identity (racc_out)
    }
  >
}
)";

TEST(ControlFlow, ScanForwardAndReverse) {
  std::string bytes = text_bytes(kScanModel);
  auto g = import_bytes(bytes);
  ASSERT_TRUE(g) << g.status().message();
  EXPECT_EQ(find_op(**g, "Scan")->outputs[1]->type.to_string(), "f32[3,2]");
  for (const char* dev : {"reference", "cpu"}) {
    auto out = run_on(bytes, dev,
                      {{"init", Tensor::from_vector<float>({0, 0}, {2})},
                       {"x", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2})}});
    ASSERT_TRUE(out) << dev << ": " << out.status().message();
    EXPECT_EQ(values_of<float>((*out)[0]), std::vector<float>({9, 12})) << dev;
    EXPECT_EQ(values_of<float>((*out)[1]), std::vector<float>({1, 2, 4, 6, 9, 12})) << dev;
    EXPECT_EQ(values_of<float>((*out)[2]), std::vector<float>({9, 12})) << dev;
    // Reverse: rows 5,6 then 3,4 then 1,2; sums 5,6 / 8,10 / 9,12 written from the end.
    EXPECT_EQ(values_of<float>((*out)[3]), std::vector<float>({9, 12, 8, 10, 5, 6})) << dev;
  }
}

TEST(ControlFlow, ScanAlongAnotherAxis) {
  std::string bytes = text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[3,2] x) => (float[2,3] y) {
  y = Scan (x) <
    num_scan_inputs = 1, scan_input_axes = [-1], scan_output_axes = [0],
    body = b (float[3] col) => (float[3] twice) { twice = Add (col, col) }
  >
}
)");
  auto out =
      run_on(bytes, "reference", {{"x", Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2})}});
  ASSERT_TRUE(out) << out.status().message();
  EXPECT_EQ((*out)[0].dims(), std::vector<int64_t>({2, 3}));
  EXPECT_EQ(values_of<float>((*out)[0]), std::vector<float>({2, 6, 10, 4, 8, 12}));
}

// ---- malformed ----------------------------------------------------------------------------------

TEST(ControlFlowErrors, CondMustBeBool) {
  auto g = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float c, float[2] x) => (float[2] y) {
  y = If (c) <
    then_branch = t () => (float[2] a) { a = Identity (x) },
    else_branch = e () => (float[2] b) { b = Identity (x) }
  >
}
)"));
  EXPECT_TRUE(failed_with(g, {"(If)", "cond must be a bool tensor of one element"}));
}

TEST(ControlFlowErrors, BranchesDisagree) {
  auto arity = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool c, float[2] x) => (float[2] y) {
  y = If (c) <
    then_branch = t () => (float[2] a, float[2] a2) { a = Identity (x)  a2 = Identity (x) },
    else_branch = e () => (float[2] b) { b = Identity (x) }
  >
}
)"));
  EXPECT_TRUE(failed_with(arity, {"(If)", "then_branch has 2 outputs but else_branch has 1"}));
  auto dtype = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool c, float[2] x) => (float[2] y) {
  y = If (c) <
    then_branch = t () => (float[2] a) { a = Identity (x) },
    else_branch = e () => (int64[2] b) { b = Cast <to = 7> (x) }
  >
}
)"));
  EXPECT_TRUE(
      failed_with(dtype, {"(If)", "output 0 is f32 in then_branch but i64 in else_branch"}));
}

TEST(ControlFlowErrors, BodyArityAndUndefinedNames) {
  // The body takes (i, cond) only although one value is carried.
  auto inputs = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (int64 m, float[2] s0) => (float[2] s) {
  s = Loop (m, , s0) <
    body = b (int64 i, bool cin) => (bool cout, float[2] sout) {
      cout = Identity (cin)
      sout = Identity (s0)
    }
  >
}
)"));
  EXPECT_TRUE(failed_with(inputs, {"(Loop)", "subgraph 'body' has 2 inputs, expected 3"}));
  // The body yields no cond.
  auto outputs = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (int64 m, float[2] s0) => (float[2] s) {
  s = Loop (m, , s0) <
    body = b (int64 i, bool cin, float[2] sin) => (float[2] sout) { sout = Identity (sin) }
  >
}
)"));
  EXPECT_TRUE(
      failed_with(outputs, {"(Loop)", "subgraph 'body' has 1 outputs, expected at least 2"}));
  // A name no enclosing graph defines.
  auto undefined = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool c, float[2] x) => (float[2] y) {
  y = If (c) <
    then_branch = t () => (float[2] a) { a = Identity (nowhere) },
    else_branch = e () => (float[2] b) { b = Identity (x) }
  >
}
)"));
  EXPECT_TRUE(failed_with(undefined, {"(If)", "subgraph 't'", "'nowhere' is not defined"}));
}

TEST(ControlFlowErrors, BranchRedefinesACapturedName) {
  // then_branch reads the outer x; else_branch defines a value of its own named x.
  auto g = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool c, float[2] x, float[2] z) => (float[2] y) {
  y = If (c) <
    then_branch = t () => (float[2] a) { a = Identity (x) },
    else_branch = e () => (float[2] x) { x = Neg (z) }
  >
}
)"));
  EXPECT_TRUE(
      failed_with(g, {"(If)", "subgraph 'e' redefines 'x', a value of an enclosing graph"}));
}

TEST(ControlFlowErrors, LoopCondAndScanAttributes) {
  auto cond = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (int64 m, float[2] s0) => (float[2] s) {
  s = Loop (m, , s0) <
    body = b (int64 i, bool cin, float[2] sin) => (float[2] cout, float[2] sout) {
      cout = Identity (sin)
      sout = Identity (sin)
    }
  >
}
)"));
  EXPECT_TRUE(failed_with(cond, {"(Loop)", "output 0 (cond) must be a bool tensor"}));
  auto scan = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[3,2] x) => (float[3,2] y) {
  y = Scan (x) <
    num_scan_inputs = 2,
    body = b (float[2] row) => (float[2] o) { o = Identity (row) }
  >
}
)"));
  EXPECT_TRUE(failed_with(scan, {"(Scan)", "num_scan_inputs is 2 but the node has 1 inputs"}));
  auto axis = import_bytes(text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (float[3,2] x) => (float[3,2] y) {
  y = Scan (x) <
    num_scan_inputs = 1, scan_input_axes = [2],
    body = b (float[2] row) => (float[2] o) { o = Identity (row) }
  >
}
)"));
  EXPECT_TRUE(failed_with(axis, {"(Scan)", "scan input 0 has axis 2, outside [-2, 1]"}));
}

TEST(ControlFlowErrors, RunTimeCondOfSeveralElements) {
  // cond's shape is unknown at import; at run time it holds two elements.
  std::string bytes = text_bytes(R"(
<ir_version: 8, opset_import: ["" : 17]>
agraph (bool[?] c, float[2] x) => (float[2] y) {
  y = If (c) <
    then_branch = t () => (float[2] a) { a = Identity (x) },
    else_branch = e () => (float[2] b) { b = Neg (x) }
  >
}
)");
  Tensor x = Tensor::from_vector<float>({1, 2}, {2});
  for (const char* dev : {"reference", "cpu"}) {
    auto out = run_on(bytes, dev, {{"c", Tensor::from_vector<bool>({true, false}, {2})}, {"x", x}});
    EXPECT_TRUE(
        failed_with(out, {"(If)", "cond must be a bool tensor of one element, got bool[2]"}))
        << dev;
  }
}

}  // namespace
}  // namespace ferrite::testing
