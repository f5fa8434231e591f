// A loaded model bound to a device: checks user inputs against guards (the declared inputs and
// whatever the compile assumed, see runtime/guards.h) and runs the prepared model.
//
// Dims the model leaves unknown (neither dim_param nor dim_value) are specialised: the first
// call compiles with the sizes it sees. When such a size later changes, that dim becomes a fresh
// symbol (`x_d1`, "automatic dynamic") and the model is compiled again, so further sizes reuse
// that compile. Compiled variants stay in a small cache keyed by their guards.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>

#include "frontend/onnx/importer.h"
#include "runtime/device.h"
#include "runtime/guards.h"

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
  // A run on tensors in the device's memory (PreparedModel::run_device): `run.input_dev[k]` is
  // the device address of inputs[k] (null: inputs[k] is a host tensor), whose tensor then only
  // gives dtype and dims. Outputs are written where `run.output` says, ordered on `run.stream`.
  Status run_device(const std::vector<NamedInput>& inputs, DeviceRun run);

  // `runs` runs timed by the device with inputs resident on it (PreparedModel::time_resident);
  // runs `inputs` once through run() first, so that the variant exists and is warm.
  Expected<DeviceTiming> time_resident(const std::vector<NamedInput>& inputs, int runs);

  // The graph as given (inputs and outputs as declared); after the passes when no dim needs
  // specialising (then it is also the compiled graph).
  const Graph& graph() const { return *graph_; }
  // The graph the last run used (after passes and specialisation); graph() before any compile.
  const Graph& compiled_graph() const;
  const Device& device() const { return *device_; }
  // Number of preparations (compiles) so far, recompiles included.
  int compiles() const { return compiles_; }
  // The guards of the variant the last run used (empty before the first compile).
  std::string guards() const;
  // The prepared model's statistics about the last run (empty before the first prepare).
  ModelStats stats() const;

  // Name used in log lines ("[recompile] NAME: ..."); defaults to the graph's name.
  void set_label(std::string label) { label_ = std::move(label); }
  // Receives recompile log lines. Default: stderr when FERRITE_LOG has "recompile" or "all".
  using LogFn = std::function<void(const std::string& line)>;
  void set_log(LogFn log) { log_ = std::move(log); }

  // Compiled variants kept; the least recently used is dropped beyond this.
  static constexpr size_t kMaxVariants = 8;

 private:
  struct Variant {
    GuardSet guards;
    std::unique_ptr<Graph> owned;  // the specialised copy (null: graph_ itself)
    const Graph* graph = nullptr;
    std::unique_ptr<PreparedModel> prepared;
  };
  // How a dim the model leaves unknown is compiled.
  enum class DimMode : uint8_t { kSpecialise, kDynamic };
  struct OpenDim {
    int input;
    int dim;
    DimMode mode = DimMode::kSpecialise;
    std::string symbol;  // for kDynamic
  };

  Status init();
  Expected<std::shared_ptr<Variant>> compile(const std::vector<Tensor>& inputs);
  // Inputs in graph order; `given_at[i]`: which of `inputs` graph input i is (-1: its default).
  Expected<std::vector<Tensor>> bind_inputs(const std::vector<NamedInput>& inputs,
                                            std::vector<int>* given_at = nullptr) const;
  Expected<std::shared_ptr<Variant>> select(const std::vector<Tensor>& bound);
  void log(const std::string& line) const;

  std::unique_ptr<Graph> graph_;
  std::unique_ptr<Device> device_;
  RunOptions opts_;
  std::string label_;
  LogFn log_;
  GuardSet declared_;  // the declared inputs alone: checked before a first compile
  std::vector<OpenDim> open_dims_;
  bool in_place_ = true;  // no open dims: the one variant compiles graph_ itself
  std::vector<std::shared_ptr<Variant>> variants_;  // most recently used first
  std::shared_ptr<Variant> last_;
  mutable std::mutex mutex_;  // variants_, last_, compiles_, open_dims_
  int compiles_ = 0;
};

}  // namespace ferrite
