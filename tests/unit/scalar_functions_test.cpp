// The scalar-function table (ops/scalar_functions.h), row by row: each row is consistent with the
// op table (op, attributes and their defaults), its reference evaluation agrees with the op's
// reference kernel on sample values in f32 and f64, every dialect spells it, the code the cpu
// device generates from it agrees with the reference kernel, and its epilogue (if any) reaches
// every library mapping.
#include "ops/scalar_functions.h"

#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cmath>
#include <limits>
#include <set>
#include <sstream>

#include "codegen/cuda_source.h"
#include "codegen/scalar_emitter.h"
#include "frontend/onnx/importer.h"
#include "lower/lowering.h"
#include "ops/activation_epilogue.h"
#include "ops/op_schema.h"
#include "runtime/session.h"

#if FERRITE_HAVE_CUDA
#include "backends/cuda/nvrtc_compiler.h"
#endif

namespace ferrite {
namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
// Clip's bounds in every test (inputs of the reference model, constants of the compiled one:
// node_text spells them).
constexpr float kLo = -1.0f, kHi = 2.0f;

// Operand values: signed zeros, tiny values (where exp(x) - 1 is not expm1(x)), the
// parameters' kinks, NaN, infinities. Binary rows take every pair of the shorter list.
const std::vector<float> kUnary = {-7.5f, -3.0f, -1.0f, -0.5f, -1e-6f, -0.0f, 0.0f, 3e-5f, 0.25f,
                                   0.5f,  1.0f,  2.5f,  3.0f,  6.5f,   kNaN,  kInf, -kInf};
const std::vector<float> kPair = {-2.0f, -0.0f, 0.0f, 0.5f, 3.0f, kNaN, kInf};

bool is_bool_in(const ScalarFunction& f) {
  return f.types == FnTypes::kLogic;
}
bool is_bool_out(const ScalarFunction& f) {
  return f.types != FnTypes::kFloat;
}

// Operands of the sample: column 0 and (binary rows) column 1.
std::vector<std::vector<float>> samples(const ScalarFunction& f) {
  std::vector<std::vector<float>> cols(2);
  if (is_bool_in(f)) {
    for (float a : {0.f, 1.f})
      for (float b : {0.f, 1.f}) cols[0].push_back(a), cols[1].push_back(b);
  } else if (f.arity == 2) {
    for (float a : kPair)
      for (float b : kPair) cols[0].push_back(a), cols[1].push_back(b);
  } else {
    cols[0] = kUnary;
  }
  if (f.arity == 1) cols[1].clear();
  return cols;
}

std::string type_name(const ScalarFunction& f, bool f64) {
  return is_bool_in(f) ? "bool" : (f64 ? "double" : "float");
}

// The node computing row `f` of `out` from x (and z), with its variant attribute; Clip takes
// lo / hi (graph inputs, or Constant nodes when `constant_bounds`).
std::string node_text(const ScalarFunction& f, const std::string& out, const std::string& x,
                      const std::string& z, bool f64, bool constant_bounds) {
  std::ostringstream os;
  if (f.param_source == ParamSource::kConstantBounds && constant_bounds) {
    const char* t = f64 ? "double" : "float";
    os << "  " << out << "_lo = Constant<value = " << t << " {-1.0}>()\n"
       << "  " << out << "_hi = Constant<value = " << t << " {2.0}>()\n";
  }
  os << "  " << out << " = " << (*f.domain ? std::string(f.domain) + "." : "") << f.onnx_op;
  if (f.variant_attr) os << "<" << f.variant_attr << " = \"" << f.variant_value << "\">";
  os << "(" << x;
  if (f.arity == 2) os << ", " << z;
  if (f.param_source == ParamSource::kConstantBounds)
    os << (constant_bounds ? ", " + out + "_lo, " + out + "_hi" : ", lo, hi");
  os << ")\n";
  return os.str();
}

Expected<std::unique_ptr<Session>> session_for(const std::string& text, const std::string& dev) {
  onnx::ModelProto model;
  auto st = onnx::OnnxParser::Parse(model, text.c_str());
  if (!st.IsOK()) return err("parse: ", st.ErrorMessage(), "\n", text);
  std::string bytes;
  model.SerializeToString(&bytes);
  FERRITE_ASSIGN_OR_RETURN(auto g, import_onnx_bytes(bytes, ""));
  return Session::from_graph(std::move(g), dev);
}

Tensor make(const std::vector<float>& v, const std::string& type) {
  const int64_t n = static_cast<int64_t>(v.size());
  if (type == "bool") {
    Tensor t = Tensor::zeros(DType::kBool, {n});
    for (int64_t i = 0; i < n; ++i) t.data<bool>()[i] = v[i] != 0;
    return t;
  }
  if (type == "double") {
    Tensor t = Tensor::zeros(DType::kF64, {n});
    for (int64_t i = 0; i < n; ++i) t.data<double>()[i] = v[i];
    return t;
  }
  Tensor t = Tensor::zeros(DType::kF32, {n});
  for (int64_t i = 0; i < n; ++i) t.data<float>()[i] = v[i];
  return t;
}

double element(const Tensor& t, int64_t i) {
  switch (t.dtype()) {
    case DType::kBool:
      return t.data<bool>()[i] ? 1.0 : 0.0;
    case DType::kF64:
      return t.data<double>()[i];
    default:
      return t.data<float>()[i];
  }
}

// Equal bit for bit up to the sign and payload of a NaN.
bool same(double a, double b) {
  if (a != a || b != b) return a != a && b != b;
  return a == b && std::signbit(a) == std::signbit(b);
}

// The row's output of the reference device on its samples.
Expected<Tensor> reference_output(const ScalarFunction& f, bool f64) {
  const auto cols = samples(f);
  const std::string n = std::to_string(cols[0].size()), ty = type_name(f, f64);
  const std::string out_ty = is_bool_out(f) ? "bool" : ty;
  std::ostringstream os;
  os << "<ir_version: 9, opset_import: [\"\" : 20, \"ferrite\" : 1]>\ng (" << ty << "[" << n << "] x";
  if (f.arity == 2) os << ", " << ty << "[" << n << "] z";
  if (f.param_source == ParamSource::kConstantBounds) os << ", " << ty << " lo, " << ty << " hi";
  os << ") => (" << out_ty << "[" << n << "] y) {\n"
     << node_text(f, "y", "x", "z", f64, false) << "}\n";
  FERRITE_ASSIGN_OR_RETURN(auto s, session_for(os.str(), "reference"));
  std::vector<Session::NamedInput> in = {{"x", make(cols[0], ty)}};
  if (f.arity == 2) in.push_back({"z", make(cols[1], ty)});
  if (f.param_source == ParamSource::kConstantBounds) {
    in.push_back({"lo", make({kLo}, ty).reshaped({})});
    in.push_back({"hi", make({kHi}, ty).reshaped({})});
  }
  FERRITE_ASSIGN_OR_RETURN(auto outs, s->run(in));
  return outs.at(0);
}

template <class C>
C eval_row(const ScalarFunction& f, const std::vector<std::vector<float>>& cols, size_t i) {
  C a[2] = {C(cols[0][i]), f.arity == 2 ? C(cols[1][i]) : C(0)};
  C p[2] = {C(f.param_defaults[0]), C(f.param_defaults[1])};
  if (f.param_source == ParamSource::kConstantBounds) p[0] = C(kLo), p[1] = C(kHi);
  return f.eval<C>(a, p);
}

TEST(ScalarFunctions, RowsAreConsistentWithTheOpTable) {
  std::set<std::string> names, ops, epilogues;
  for (const ScalarFunction& f : scalar_functions()) {
    SCOPED_TRACE(f.name);
    EXPECT_TRUE(names.insert(f.name).second) << "duplicate name";
    EXPECT_EQ(find_scalar_function(f.name), &f);
    ASSERT_TRUE(f.spell && f.ref.f32 && f.ref.f64 && f.ref.f32_epilogue);
    EXPECT_TRUE(f.arity == 1 || f.arity == 2);
    ASSERT_TRUE(f.onnx_op) << "every row is an op's function (an ONNX op, or an internal one)";
    EXPECT_TRUE(ops.insert(std::string(f.domain) + "." + f.onnx_op + "/" +
                           (f.variant_value ? f.variant_value : ""))
                    .second)
        << "two rows for one op and variant";
    const OpSchema* schema = OpRegistry::global().find(f.domain, f.onnx_op, *f.domain ? 1 : 20);
    ASSERT_TRUE(schema) << f.onnx_op << " is not in the op table";
    if (f.param_source == ParamSource::kAttributes) {
      ASSERT_GT(f.n_params, 0);
      for (int i = 0; i < f.n_params; ++i) {
        const AttrSpec* spec = schema->find_attr(f.param_attrs[i]);
        ASSERT_TRUE(spec && spec->default_value) << f.param_attrs[i];
        EXPECT_EQ(spec->default_value->f(), f.param_defaults[i]) << f.param_attrs[i];
      }
    } else {
      EXPECT_EQ(f.n_params, f.param_source == ParamSource::kNone ? 0 : 2);
    }
    if (f.epilogue) {
      EXPECT_TRUE(epilogues.insert(f.epilogue).second) << "duplicate epilogue name";
      EXPECT_EQ(f.arity, 1);
      EXPECT_EQ(f.types, FnTypes::kFloat);
      EXPECT_EQ(epilogue_function(f.epilogue), &f);
      // The fused node's attributes round-trip to the row.
      auto a = parse_activation(f.epilogue, std::vector<float>(f.n_params, 0.5f));
      ASSERT_TRUE(a) << a.status().message();
      EXPECT_EQ(a->fn, &f);
    } else {
      EXPECT_EQ(f.onednn, OnednnEltwise::kNone) << "a library mapping without an epilogue name";
      EXPECT_EQ(f.cublaslt, CublasLtEpilogue::kNone);
      EXPECT_EQ(f.cudnn, CudnnActivation::kNone);
    }
  }
}

TEST(ScalarFunctions, ReferenceEvaluationMatchesTheOpKernel) {
  for (const ScalarFunction& f : scalar_functions()) {
    for (bool f64 : {false, true}) {
      if (f64 && is_bool_in(f)) continue;
      SCOPED_TRACE(std::string(f.name) + (f64 ? " f64" : " f32"));
      auto y = reference_output(f, f64);
      ASSERT_TRUE(y) << y.status().message();
      const auto cols = samples(f);
      for (size_t i = 0; i < cols[0].size(); ++i) {
        const double want = element(*y, static_cast<int64_t>(i));
        const double got = f64 ? eval_row<double>(f, cols, i) : eval_row<float>(f, cols, i);
        EXPECT_TRUE(same(got, want))
            << "x = " << cols[0][i] << (f.arity == 2 ? ", z = " + std::to_string(cols[1][i]) : "")
            << ": table " << got << ", op kernel " << want;
      }
    }
  }
}

TEST(ScalarFunctions, EpilogueLoopMatchesTheScalarEvaluation) {
  for (const ScalarFunction& f : scalar_functions()) {
    if (f.arity != 1 || f.types != FnTypes::kFloat) continue;
    SCOPED_TRACE(f.name);
    std::vector<float> y = kUnary;
    const float p[2] = {f.param_defaults[0], f.param_defaults[1]};
    f.ref.f32_epilogue(y.data(), nullptr, static_cast<int64_t>(y.size()), p);
    for (size_t i = 0; i < y.size(); ++i) EXPECT_TRUE(same(y[i], f.ref.f32(&kUnary[i], p))) << i;
    // With a residual: act(y + res), -0 + -0 staying -0.
    std::vector<float> z = kUnary, res(kUnary.rbegin(), kUnary.rend());
    f.ref.f32_epilogue(z.data(), res.data(), static_cast<int64_t>(z.size()), p);
    for (size_t i = 0; i < z.size(); ++i) {
      const float sum = kUnary[i] + res[i];
      EXPECT_TRUE(same(z[i], f.ref.f32(&sum, p))) << i;
    }
  }
}

TEST(ScalarFunctions, EveryDialectSpellsEveryRow) {
  const std::vector<std::pair<std::string, ScalarSpelling>> dialects = {
      {"c++ (host)", ScalarSpelling{}}, {"cuda", cuda::cuda_spelling()}};
  for (const auto& [dialect, spelling] : dialects) {
    ScalarEmitter em(spelling);
    for (const ScalarFunction& f : scalar_functions()) {
      SCOPED_TRACE(dialect + ": " + f.name);
      Kernel k;
      int a = k.body.load(0, DType::kF32, SymExpr(0));
      int b = k.body.load(1, DType::kF32, SymExpr(0));
      const DType out = f.types == FnTypes::kFloat ? DType::kF32 : DType::kBool;
      int r = f.arity == 2 ? k.body.binary(f.name, a, b, out)
                           : k.body.unary(f.name, a, out, std::vector<double>(f.n_params, 0.5));
      std::vector<std::string> t = {"t0", "t1", "t2"};
      const std::string text =
          em.expr(k.body.at(r), t, {"in0", "in1"}, [](const std::string& s) { return s; });
      EXPECT_FALSE(text.empty());
      EXPECT_EQ(text.find("unknown"), std::string::npos) << text;
      EXPECT_NE(text.find("t0"), std::string::npos) << text;
    }
  }
  // The cuda library's fe_act has one case per epilogue row, numbered as Activation::code().
  const std::string act = cuda::cuda_activation_source();
  for (const ScalarFunction& f : scalar_functions())
    if (f.epilogue) {
      Activation a;
      a.fn = &f;
      EXPECT_NE(act.find("case " + std::to_string(a.code()) + ": return"), std::string::npos)
          << f.name << "\n"
          << act;
    }
}

// Every row in one graph (Clip's bounds constant, so that it lowers), with its inputs.
struct AllRows {
  std::string text;
  std::vector<Session::NamedInput> inputs;
};
AllRows all_rows_model() {
  AllRows m;
  std::ostringstream body, outs;
  std::set<std::string> have;
  size_t n = 0;
  for (const ScalarFunction& f : scalar_functions()) {
    const auto cols = samples(f);
    const std::string ty = type_name(f, false), o = std::string("y_") + f.name;
    const std::string x = is_bool_in(f) ? "bx" : (f.arity == 2 ? "px" : "ux");
    const std::string z = is_bool_in(f) ? "bz" : "pz";
    if (have.insert(x).second) m.inputs.push_back({x, make(cols[0], ty)});
    if (f.arity == 2 && have.insert(z).second) m.inputs.push_back({z, make(cols[1], ty)});
    body << node_text(f, o, x, z, false, true);
    outs << (n++ ? ", " : "") << (is_bool_out(f) ? "bool" : "float") << "[" << cols[0].size()
         << "] " << o;
  }
  std::ostringstream text;
  text << "<ir_version: 9, opset_import: [\"\" : 20, \"ferrite\" : 1]>\ng (float[" << kUnary.size() << "] ux, float["
       << kPair.size() * kPair.size() << "] px, float[" << kPair.size() * kPair.size()
       << "] pz, bool[4] bx, bool[4] bz) => (" << outs.str() << ") {\n"
       << body.str() << "}\n";
  m.text = text.str();
  return m;
}

// The cpu device's generated code for every row against the reference device, bit for bit on
// these sample values. (Rows built on exp of a float use the host prelude's vectorisable exp,
// within 2 ulp of std::exp over the floats: host_math_test.cpp; on these samples it is exact.)
TEST(ScalarFunctions, CpuGeneratedCodeMatchesTheReference) {
  const AllRows m = all_rows_model();
  const std::string& text_str = m.text;
  const std::vector<Session::NamedInput>& in = m.inputs;
  auto ref = session_for(text_str, "reference");
  ASSERT_TRUE(ref) << ref.status().message();
  auto cpu = session_for(text_str, "cpu");
  ASSERT_TRUE(cpu) << cpu.status().message();
  auto want = (*ref)->run(in);
  ASSERT_TRUE(want) << want.status().message();
  auto got = (*cpu)->run(in);
  ASSERT_TRUE(got) << got.status().message();
  size_t o = 0;
  for (const ScalarFunction& f : scalar_functions()) {
    SCOPED_TRACE(f.name);
    const Tensor& w = (*want)[o];
    const Tensor& g = (*got)[o++];
    ASSERT_EQ(w.numel(), g.numel());
    for (int64_t i = 0; i < w.numel(); ++i)
      EXPECT_TRUE(same(element(g, i), element(w, i)))
          << i << ": cpu " << element(g, i) << ", reference " << element(w, i);
  }
}

#if FERRITE_HAVE_CUDA
// The CUDA dialect's kernels for every row compile (NVRTC, no GPU needed); the GPU runs them in
// the CTS (fusion cases) and the cuda unit tests.
TEST(ScalarFunctions, CudaGeneratedCodeCompiles) {
  auto nv = cuda::nvrtc();
  if (!nv) GTEST_SKIP() << nv.status().message();
  onnx::ModelProto model;
  ASSERT_TRUE(onnx::OnnxParser::Parse(model, all_rows_model().text.c_str()).IsOK());
  std::string bytes;
  model.SerializeToString(&bytes);
  auto g = import_onnx_bytes(bytes, "");
  ASSERT_TRUE(g) << g.status().message();
  auto lg = lower_graph(**g);
  ASSERT_TRUE(lg) << lg.status().message();
  size_t kernels = 0;
  for (const Step& s : lg->steps) kernels += s.kind == Step::Kind::kKernel;
  EXPECT_GT(kernels, 0u);
  for (const Step& s : lg->steps)
    if (!(s.node && s.node->op_type == "Constant"))  // Clip's bounds (no folding pass here)
      EXPECT_EQ(s.kind, Step::Kind::kKernel)
          << "a row did not lower: " << (s.node ? s.node->describe() : std::string("?"));
  auto src = cuda::CudaDialect().generate(*lg, DeviceProperties{});
  ASSERT_TRUE(src) << src.status().message();
  auto cubin = cuda::compile_to_cubin(*src, "sm_90", "scalar_functions");
  ASSERT_TRUE(cubin) << cubin.status().message();
}
#endif

}  // namespace
}  // namespace ferrite
