// ONNX model import: parses an untrusted .onnx file into a verified, type-inferred Graph.
#pragma once

#include <filesystem>
#include <memory>

#include "ir/graph.h"
#include "support/status.h"

namespace ferrite {

inline constexpr int kMinOnnxOpset = 13;
inline constexpr int kMaxOnnxOpset = 21;

struct ImportOptions {
  // Skip the "every node has a known op" requirement (used by `ferrite info` to list all
  // unsupported ops instead of stopping at the first).
  bool allow_unknown_ops = false;
};

struct ImportReport {
  std::vector<std::string> unsupported_ops;  // "Op (node 'n')", when allow_unknown_ops
  int64_t ir_version = 0;
  std::string producer;
};

Expected<std::unique_ptr<Graph>> import_onnx_file(const std::filesystem::path& path,
                                                  const ImportOptions& opts = {},
                                                  ImportReport* report = nullptr);
// Same, from bytes in memory; external data is resolved against `model_dir` (empty: refused).
Expected<std::unique_ptr<Graph>> import_onnx_bytes(const std::string& bytes,
                                                   const std::filesystem::path& model_dir,
                                                   const ImportOptions& opts = {},
                                                   ImportReport* report = nullptr);

// Runs schema validation and shape/type inference over all nodes, in order.
Status infer_graph(Graph& g);

}  // namespace ferrite
