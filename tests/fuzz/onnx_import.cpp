// Fuzz target onnx_import: bytes as a serialized ONNX ModelProto -> import_onnx_bytes (parse,
// topological sort, schema validation, shape/type inference with constant folding) -> verifier,
// printer, and inference run again over the imported graph. Every outcome must be a verified
// graph or an error value with a one-line message.
#include <cstddef>
#include <cstdint>
#include <string>

#include "frontend/onnx/importer.h"
#include "fuzz_util.h"
#include "ir/graph.h"

using namespace ferrite;

namespace {

// External data is resolved against a directory holding one small file, so that the
// location/offset/length checks see both present and missing files (never anything outside).
const std::filesystem::path& model_dir() {
  static const std::filesystem::path dir = [] {
    std::filesystem::path d = fuzz::scratch_dir() / "model";
    std::filesystem::create_directories(d);
    std::string bytes(256, '\0');
    for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<char>(i);
    fuzz::write_file(d / "weights.bin", bytes);
    return d;
  }();
  return dir;
}

void check_graph(Graph& g, const char* how) {
  if (Status v = verify_graph(g); !v.is_ok())
    fuzz::finding(str_cat(how, ": imported graph fails verification: ", v.message()));
  (void)print_graph(g);
  // Inference over a graph it already typed must succeed again (the passes and the session
  // re-infer after every rewrite).
  if (Status s = infer_graph(g); !s.is_ok())
    fuzz::finding(
        str_cat(how, ": re-running inference on the imported graph failed: ", s.message()));
  if (Status v = verify_graph(g); !v.is_ok())
    fuzz::finding(str_cat(how, ": graph fails verification after re-inference: ", v.message()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  ImportReport report;
  auto g = import_onnx_bytes(bytes, model_dir(), {}, &report);
  if (g) {
    check_graph(**g, "import");
    return 0;
  }
  fuzz::check_error(g.status(), "import");
  if (!g.status().is_unsupported()) return 0;
  // `ferrite info` imports again listing every unknown op instead of stopping at the first.
  // With unknown ops the graph is returned as parsed, not inferred, so only printing it (what
  // `ferrite info` does) is checked.
  ImportOptions lenient;
  lenient.allow_unknown_ops = true;
  ImportReport lenient_report;
  auto all = import_onnx_bytes(bytes, model_dir(), lenient, &lenient_report);
  if (all) {
    if (lenient_report.unsupported_ops.empty())
      check_graph(**all, "lenient import");
    else
      (void)print_graph(**all);
  } else {
    fuzz::check_error(all.status(), "lenient import");
  }
  return 0;
}
