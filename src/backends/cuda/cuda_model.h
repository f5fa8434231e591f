// The cuda device's prepared model (cuda_executor.h): the step-by-step executor
// (cuda_executor.cpp) and its CUDA-graph capture, replay and device-timed runs
// (cuda_graph_runs.cpp). Internal to src/backends/cuda.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>

#include "backends/cuda/cuda_executor.h"
#include "backends/cuda/cuda_native_ops.h"
#include "backends/cuda/cuda_pool.h"
#include "backends/cuda/cuda_profile.h"
#include "memory/lowered_memory.h"
#include "memory/planner.h"
#include "ops/context.h"
#include "ops/op_schema.h"

namespace ferrite::cuda::detail {

inline bool log_enabled(const char* topic) {
  const char* v = std::getenv("FERRITE_LOG");
  return v && (std::string(v).find(topic) != std::string::npos || std::string(v) == "all");
}

inline bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::string(v) == "0" || std::string(v) == "off");
}

inline size_t nbytes(DType t, const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return static_cast<size_t>(n) * dtype_size(t);
}

inline bool nondeterministic(const Node& n) {
  const std::string& op = n.op_type;
  return op.rfind("Random", 0) == 0 || op == "Bernoulli" || op == "Multinomial";
}

// Embedding tables and other large constants stay on the GPU: a Gather from one runs there.
constexpr size_t kLargeConstantBytes = 64 << 10;

class CudaModel : public PreparedModel {
 public:
  CudaModel(const Graph& g, LoweredGraph lg, std::unique_ptr<LoadedModule> module,
            std::shared_ptr<CudaBackend> be)
      : graph_(g),
        lg_(std::move(lg)),
        be_(std::move(be)),
        module_(std::move(module)),
        rt_(*be_->rt),
        pool_(rt_) {}

  ~CudaModel() override {
    if (profile_) profile_table_.print();
    if (!rt_.make_current()) return;
    rt_.synchronize();
    states_.clear();
    if (log_enabled("memory")) std::fprintf(stderr, "%s\n", pool_.describe("at exit").c_str());
    // The pool gives the arena, the constants and its cached blocks back as it is destroyed.
  }

  Status init();

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override;

  // Device time of whole runs, CUDA events around them. With a CUDA graph for these shapes the
  // inputs are copied into the graph's buffers once and each sample is one graph launch (no
  // copies); otherwise each sample is a whole step-by-step run, copies included.
  Expected<DeviceTiming> time_resident(const std::vector<Tensor>& inputs, int runs) override;

  ModelStats stats() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return ModelStats{mem_stats_, std::nullopt, pool_.stats()};
  }

 private:
  struct Slot {
    DType dtype = DType::kUndefined;
    std::vector<int64_t> dims;
    Tensor host;
    bool host_valid = false;
    void* dev = nullptr;
    bool dev_valid = false;
    bool pooled = false;  // dev came from the pool (returned at release)
  };
  struct KernelLaunch {
    std::vector<int64_t> out_dims;
    bool empty = false;
    LaunchConfig lc;
  };
  struct GraphOutput {
    const void* dev = nullptr;
    DType dtype = DType::kUndefined;
    std::vector<int64_t> dims;
    Tensor host;  // an output the graph does not compute (a host value)
  };
  // What the model keeps per binding of the shape symbols.
  struct BindingState {
    CudaRuntime* rt = nullptr;
    DevicePool* pool = nullptr;
    std::vector<std::optional<KernelLaunch>> launches;  // per kernel step
    std::map<size_t, std::vector<Tensor>> det_outputs;  // per deterministic host step
    std::map<int, void*> det_dev;                       // device copies of those values
    bool graphable = true;  // no step needs the host for input-dependent data
    int clean_runs = 0;
    // The captured run: stable input buffers, outputs, and the blocks its addresses point to.
    CUgraphExec exec = nullptr;
    std::vector<std::vector<int64_t>> input_dims;
    std::vector<void*> input_dev;
    std::vector<GraphOutput> outputs;
    std::vector<void*> owned;
    void* pinned = nullptr;  // staging for the replay's copies
    bool checks_flag = false;
    void drop_graph() {
      if (exec) rt->api().cuGraphExecDestroy(exec);
      exec = nullptr;
      if (pinned) rt->api().cuMemFreeHost(pinned);
      pinned = nullptr;
      pool->release_owned(owned);
      owned.clear();
      input_dev.clear();
      outputs.clear();
    }
    ~BindingState() {
      drop_graph();
      for (auto& [b, p] : det_dev) pool->put(p);
    }
  };
  struct RunStats {
    int kernels = 0, native = 0, host_resident = 0, fallbacks = 0, cached = 0, nondet_host = 0;
    int64_t d2h_bytes = 0;
    std::string fallback_ops;
    bool gathers = false;
  };

  Status bind(const std::vector<Tensor>& inputs);

  void prepare_slots(const std::vector<Tensor>& inputs, const std::vector<void*>* input_dev);

  Status execute_steps();

  std::string step_kind(const Step& s) const {
    if (s.kind == Step::Kind::kKernel)
      return s.kernel.is_row() ? "generated row kernel" : "generated pointwise kernel";
    return s.node->op_type + " (" + path_ + ")";
  }
  // "kernel_name: node, node, ..." or "node name (op)", short enough for one table line.
  static std::string step_label(const Step& s) {
    std::string out;
    if (s.kind == Step::Kind::kKernel) {
      out = s.kernel.name + ":";
      for (const std::string& n : s.kernel.source_nodes) out += " " + n;
    } else {
      out = s.node->name.empty() ? s.node->op_type : s.node->name;
    }
    if (out.size() > 110) out = out.substr(0, 107) + "...";
    return out;
  }

  // Outputs to the host, the Gather index check, and the slots back to the pool.
  Expected<std::vector<Tensor>> finish(Status st);

  Status check_flag();

  // CUDA graphs: a binding whose steps all run on the GPU (or were computed from the shapes
  // alone) is captured once, on its second run, and replayed afterwards: inputs are copied into
  // the graph's own buffers, the graph is launched, outputs are copied back.
  Expected<std::vector<Tensor>> capture(const std::vector<Tensor>& inputs,
                                        const std::vector<std::vector<int64_t>>& in_dims);

  // Small inputs and outputs go through one pinned host block per binding (truly asynchronous
  // copies); large ones are copied directly (the driver pipelines its own staging, which beats a
  // full copy followed by a full memcpy). The replay waits for the stream once, not once per
  // output (gpt2 has 25).
  static constexpr size_t kStageLimit = 64 << 10;
  static size_t staged(size_t n) { return n <= kStageLimit ? (n + 255) / 256 * 256 : 0; }
  Expected<std::vector<Tensor>> replay(const std::vector<Tensor>& inputs);

  Expected<std::vector<int64_t>> eval_dims(const std::vector<Dim>& dims) const {
    std::vector<int64_t> out;
    for (const Dim& d : dims) {
      auto v = d.expr().evaluate(bind_);
      if (!v || *v < 0) return err("cuda: cannot evaluate dim ", d.to_string());
      out.push_back(*v);
    }
    return out;
  }

  void set_host(int b, Tensor t) {
    Slot& s = slots_[b];
    s.dtype = t.dtype();
    s.dims = t.dims();
    s.host = std::move(t);
    s.host_valid = true;
  }

  // Device memory for buffer b: its arena slot when planned and large enough, else the pool.
  Expected<void*> place(int b, size_t bytes);

  // Makes buffer b valid on the device: constants are uploaded once for all runs, values fixed
  // by the binding once per binding, other host values on every run.
  Expected<void*> device_ptr(int b);

  // Makes buffer b valid on the host (copying a device value back).
  Expected<Tensor> host_tensor(int b);

  Status run_kernel(size_t si);

  Expected<std::vector<int64_t>> input_dims(const Step& s, size_t i) {
    if (s.input_dims[i]) return eval_dims(*s.input_dims[i]);
    return slots_[s.inputs[i]].dims;
  }

  Status run_library(size_t si);

  Status run_on_host(size_t si, std::vector<Tensor> ins, bool resident);

  void release(size_t step);

  const Graph& graph_;
  LoweredGraph lg_;
  std::shared_ptr<CudaBackend> be_;  // outlives the module (its context)
  std::unique_ptr<LoadedModule> module_;
  CudaRuntime& rt_;
  DevicePool pool_;
  std::vector<CUfunction> fns_;
  std::vector<int> last_use_;
  std::vector<std::vector<int>> dying_;  // per step: buffers last read there
  std::vector<bool> det_, det_step_;     // fixed by the binding (see init)
  std::map<std::vector<int64_t>, std::unique_ptr<BindingState>> states_;
  BindingState* state_ = nullptr;  // this run's binding
  std::vector<int> request_of_buffer_;
  std::unique_ptr<SymbolicMemoryPlanner> planner_;
  const MemoryPlan* plan_ = nullptr;
  void* arena_ = nullptr;
  int64_t arena_bytes_ = 0;
  void* flag_ = nullptr;  // device int: Gather index errors
  std::vector<void*> const_dev_;
  SymBindings bind_;
  std::vector<int64_t> syms_;
  std::vector<Slot> slots_;
  std::vector<void*> scratch_;
  RunStats run_stats_;
  MemoryStats mem_stats_;
  bool logged_ = false;
  const bool graphs_ = !env_off("FERRITE_CUDA_GRAPHS");
  bool capturing_ = false, capture_failed_ = false;
  const bool profile_ = log_enabled("profile");

 public:
  bool tf32_ = false;  // --precision tf32: f32 GEMMs on TF32 tensor cores

 private:
  std::string path_;  // how the current library step ran (native / host / fallback)
  StepProfile profile_table_;
  int64_t runs_ = 0;
  mutable std::mutex mutex_;
};

}  // namespace ferrite::cuda::detail
