// A loaded model bound to a device: checks user inputs against guards (the declared inputs and
// whatever the compile assumed, see runtime/guards.h) and runs the prepared model.
//
// Dims the model leaves unknown (neither dim_param nor dim_value) are specialised: the first
// call compiles with the sizes it sees. When such a size later changes, that dim becomes a fresh
// symbol (`x_d1`, "automatic dynamic") and the model is compiled again, so further sizes reuse
// that compile. Compiled variants stay in a small cache keyed by their guards.
//
// Concurrency: run(), run_device() and time_resident() may be called from many threads at once.
// Selecting (and compiling) a variant happens under the session's lock; the run itself happens
// on an execution context checked out of the variant's pool: a PreparedModel of its own (arena,
// per-binding launch state, step buffers and, on cpu, its worker threads) over the variant's
// graph, so its constants (weights) are the graph's and its generated code is the same loaded
// module (the compile cache hands the second prepare the first one's artifact). A caller that
// finds every context busy and the pool at its size (RunOptions::contexts) waits for one.
#pragma once

#include <condition_variable>
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
  // `device` empty: the best usable device (default_device()); device_chosen() then says so.
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
  // What one run did, for callers that report it (the C API's per-run statistics).
  struct RunInfo {
    bool compiled = false;  // this call compiled a variant (a first specialisation or recompile)
    int context = 0;        // the execution context it ran on (0: the variant's first)
    ModelStats stats;       // that context's statistics after the run
  };
  Expected<std::vector<Tensor>> run(const std::vector<NamedInput>& inputs, RunInfo* info = nullptr);
  // A run on tensors in the device's memory (PreparedModel::run_device): `run.input_dev[k]` is
  // the device address of inputs[k] (null: inputs[k] is a host tensor), whose tensor then only
  // gives dtype and dims. Outputs are written where `run.output` says, ordered on `run.stream`.
  Status run_device(const std::vector<NamedInput>& inputs, DeviceRun run, RunInfo* info = nullptr);

  // `runs` runs timed by the device with inputs resident on it (PreparedModel::time_resident);
  // runs `inputs` once through run() first, so that the variant exists and is warm.
  Expected<DeviceTiming> time_resident(const std::vector<NamedInput>& inputs, int runs);

  // The graph as given (inputs and outputs as declared); after the passes when no dim needs
  // specialising (then it is also the compiled graph).
  const Graph& graph() const { return *graph_; }
  // The graph the last run used (after passes and specialisation); graph() before any compile.
  const Graph& compiled_graph() const;
  const Device& device() const { return *device_; }
  // Whether load() picked the device because none was named.
  bool device_chosen() const { return device_chosen_; }
  // Execution contexts each compiled variant may hold (concurrent runs beyond wait).
  int max_contexts() const { return max_contexts_; }
  // Number of preparations (compiles) so far, recompiles included.
  int compiles() const {
    std::lock_guard<std::mutex> lock(mutex_);  // other threads' runs may be compiling
    return compiles_;
  }
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
    // Context 0: the one compile() prepared; it writes dumps and traces, stats() reads it.
    std::unique_ptr<PreparedModel> prepared;
    // The execution contexts: prepared lazily when concurrent runs find all busy.
    std::mutex pool_mutex;
    std::condition_variable pool_cv;
    std::vector<std::unique_ptr<PreparedModel>> extra;  // contexts 1..
    std::vector<int> idle{0};                           // indices of contexts not in a run
    int created = 1;                                    // contexts made or being made
  };
  // A context checked out of a variant for one run; returned when destroyed.
  class Lease {
   public:
    Lease(std::shared_ptr<Variant> v, int index, PreparedModel* model);
    Lease(Lease&& o) noexcept : v_(std::move(o.v_)), index_(o.index_), model_(o.model_) {}
    Lease(const Lease&) = delete;
    ~Lease();
    PreparedModel& model() const { return *model_; }
    int index() const { return index_; }

   private:
    std::shared_ptr<Variant> v_;
    int index_;
    PreparedModel* model_;
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
  Expected<std::shared_ptr<Variant>> select(const std::vector<Tensor>& bound,
                                            bool* compiled = nullptr);
  Expected<Lease> checkout(const std::shared_ptr<Variant>& v);
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
  bool device_chosen_ = false;
  int max_contexts_ = 1;
};

}  // namespace ferrite
