// A loaded model bound to a device: validates user inputs against the graph's declared inputs
// (names, dtypes, ranks, static dims, consistent symbolic dims) and runs the prepared model.
#pragma once

#include <filesystem>
#include <memory>

#include "frontend/onnx/importer.h"
#include "runtime/device.h"

namespace ferrite {

class Session {
 public:
  static Expected<std::unique_ptr<Session>> load(const std::filesystem::path& model,
                                                 const std::string& device,
                                                 const RunOptions& opts = {});
  static Expected<std::unique_ptr<Session>> from_graph(std::unique_ptr<Graph> graph,
                                                       const std::string& device,
                                                       const RunOptions& opts = {});

  // Inputs matched by name when every name is known, else by position.
  struct NamedInput {
    std::string name;
    Tensor tensor;
  };
  Expected<std::vector<Tensor>> run(const std::vector<NamedInput>& inputs);

  const Graph& graph() const { return *graph_; }
  const Device& device() const { return *device_; }
  int compiles() const { return compiles_; }
  // The prepared model's statistics about the last run (empty before the first prepare).
  ModelStats stats() const { return prepared_ ? prepared_->stats() : ModelStats{}; }

 private:
  Status prepare();
  Expected<std::vector<Tensor>> bind_inputs(const std::vector<NamedInput>& inputs) const;

  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Device> device_;
  std::unique_ptr<PreparedModel> prepared_;
  RunOptions opts_;
  int compiles_ = 0;
};

}  // namespace ferrite
