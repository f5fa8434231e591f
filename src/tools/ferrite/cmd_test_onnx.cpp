// `ferrite test-onnx`: runs ONNX test-case directories and reports pass / fail / unsupported.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <set>

#include "runtime/compare.h"
#include "support/json.h"
#include "support/result_dir.h"
#include "tools/ferrite/cli.h"
#include "tools/ferrite/command.h"

namespace ferrite::cli {

namespace fs = std::filesystem;

namespace {
struct CaseResult {
  std::string name, status, reason;
  std::set<std::string> ops;
  int opset = 0;
  double seconds = 0;
};

// ONNX's test generator stores bfloat16 tensors as UINT16 bit patterns; read those as bf16 where
// the model declares bf16. float8 data has no such quirk: its .pb files carry the float8
// data_type with one bit pattern per int32_data entry (some castlike cases are named after one
// float8 type but declare and hold another, consistently, so they need no fixing either).
Tensor bf16_from_bits(Tensor t, DType declared) {
  if (declared != DType::kBF16 || t.dtype() != DType::kU16 || !t.is_tensor()) return t;
  Tensor out = Tensor::zeros(DType::kBF16, t.dims());
  for (int64_t i = 0; i < t.numel(); ++i) out.data<BFloat16>()[i].bits = t.data<uint16_t>()[i];
  return out;
}

DType declared_dtype(const std::vector<Value*>& values, const std::string& name, size_t index) {
  for (const Value* v : values)
    if (v->name == name) return v->type.dtype;
  return index < values.size() ? values[index]->type.dtype : DType::kUndefined;
}

CaseResult run_case(const fs::path& dir, const std::string& device) {
  CaseResult r;
  r.name = dir.filename().string();
  if (r.name.empty()) r.name = dir.parent_path().filename().string();
  auto t0 = std::chrono::steady_clock::now();
  auto finish = [&](std::string status, std::string reason) {
    r.status = std::move(status);
    r.reason = std::move(reason);
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r;
  };
  // Collect the op list even for unsupported models, for the per-op table.
  ImportOptions probe;
  probe.allow_unknown_ops = true;
  if (auto g = import_onnx_file(dir / "model.onnx", probe)) {
    for (const auto& n : (*g)->nodes()) r.ops.insert(n->op_type);
    r.opset = (*g)->opsets().count("") ? (*g)->opsets().at("") : 0;
  }
  auto session = Session::load(dir / "model.onnx", device);
  if (!session) {
    return finish(session.status().is_unsupported() ? "unsupported" : "fail",
                  session.status().message());
  }
  std::vector<fs::path> sets;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) return finish("fail", "no test_data_set_* directories");
  for (const auto& set : sets) {
    const Graph& graph = (*session)->graph();
    auto inputs = read_input_dir(set, &graph.inputs());
    // Cases with no inputs at all are legal (constant graphs).
    std::vector<Session::NamedInput> in;
    if (inputs) in = std::move(inputs).value();
    for (size_t i = 0; i < in.size(); ++i)
      in[i].tensor = bf16_from_bits(in[i].tensor, declared_dtype(graph.inputs(), in[i].name, i));
    auto expected = read_output_dir(set, &graph.outputs());
    if (!expected) return finish("fail", expected.status().message());
    for (size_t i = 0; i < expected->size(); ++i)
      (*expected)[i].tensor = bf16_from_bits((*expected)[i].tensor,
                                             declared_dtype(graph.outputs(), (*expected)[i].name, i));
    auto outs = (*session)->run(in);
    std::string where = set.filename().string();
    if (!outs)
      return finish(outs.status().is_unsupported() ? "unsupported" : "fail",
                    where + ": " + outs.status().message());
    if (outs->size() != expected->size())
      return finish("fail", str_cat(where, ": produced ", outs->size(), " outputs, expected ",
                                    expected->size()));
    for (size_t i = 0; i < outs->size(); ++i) {
      const Tensor& want = (*expected)[i].tensor;
      auto cmp = compare_tensors((*outs)[i], want, default_tolerance(want.dtype()));
      if (!cmp.ok)
        return finish("fail", str_cat(where, ": output ", i, " ('",
                                      (*session)->graph().outputs()[i]->name, "'): ", cmp.message));
    }
  }
  return finish("pass", "");
}

// `test-onnx --json FILE`: every case with its status, opset, ops and reason.
Status write_results(const std::string& path, const std::string& device,
                     const std::vector<CaseResult>& results) {
  Json cases = Json::array();
  for (const auto& r : results)
    cases.push_back({{"name", r.name},
                     {"status", r.status},
                     {"opset", r.opset},
                     {"seconds", r.seconds},
                     {"ops", r.ops},
                     {"reason", r.reason}});
  return write_file_atomic(path, json_text(Json{{"device", device}, {"cases", cases}}));
}

int test_onnx_command(std::string device, const std::vector<std::string>& dirs, bool verbose,
                      const std::string& json_path) {
  if (device.empty()) device = "reference";
  if (auto d = DeviceRegistry::global().create(device); !d) {
    std::fprintf(stderr, "error: %s\n", d.status().message().c_str());
    return 2;
  }
  std::vector<CaseResult> results;
  std::map<std::string, int> counts;
  for (const auto& dir : dirs) {
    CaseResult r = run_case(dir, device);
    counts[r.status]++;
    if (verbose || r.status == "fail")
      std::printf("%-12s %s%s%s\n", r.status.c_str(), r.name.c_str(), r.reason.empty() ? "" : ": ",
                  r.reason.c_str());
    results.push_back(std::move(r));
  }
  std::printf("%d passed, %d failed, %d unsupported (device %s)\n", counts["pass"], counts["fail"],
              counts["unsupported"], device.c_str());
  if (!json_path.empty()) {
    if (Status st = write_results(json_path, device, results); !st) {
      std::fprintf(stderr, "error: %s\n", st.message().c_str());
      return 1;
    }
  }
  return counts["fail"] ? 1 : 0;
}

}  // namespace

Command add_test_onnx_command(CLI::App& ferrite) {
  struct Args {
    std::string device, json;
    std::vector<std::string> dirs;
    bool verbose = false;
  };
  auto a = std::make_shared<Args>();
  CLI::App* app = add_command(
      ferrite, "test-onnx",
      "Run ONNX test-case directories (model.onnx + test_data_set_*/) and report\n"
      "pass / fail / unsupported per case.",
      R"(Each CASE_DIR holds model.onnx and test_data_set_*/ with input_*.pb and output_*.pb (the layout
of ONNX's backend node tests). A case is:
  pass         every data set's outputs match within the dtype's tolerance
  fail         it loads but an output differs, or running it reports an error
  unsupported  it uses an op, opset or dtype ferrite does not support yet
Tolerances (|got - want| <= atol + rtol*|want|): f64 1e-7/1e-5, f32 1e-4/1e-3,
f16 1e-3/1e-2, bf16 1e-2/2e-2; integers and bool exact; float8 (f8e4m3fn, f8e4m3fnuz,
f8e5m2, f8e5m2fnuz) bit-exact, except that any NaN matches any NaN.
Exit status: 0 when no case fails, 1 otherwise.)");
  app->add_option("CASE_DIR", a->dirs, "ONNX test-case directories")->type_name("");
  add_value(*app, "--device", a->device, "NAME", "device to run on (default: reference)");
  add_value(*app, "--json", a->json, "FILE", "write every case result as JSON");
  app->add_flag("--verbose", a->verbose, "print every case, not only failures");
  return {app,
          [app, a] {
            if (a->dirs.empty()) {
              std::fputs(app->help("ferrite").c_str(), stderr);
              return 2;
            }
            return test_onnx_command(a->device, a->dirs, a->verbose, a->json);
          },
          2};
}

}  // namespace ferrite::cli
