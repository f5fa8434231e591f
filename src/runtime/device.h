// The device contract at the session boundary: a device prepares a graph once and then runs it
// any number of times with concrete inputs. How a device is built from smaller parts (runtime,
// compiler, codegen dialect, launch heuristics, properties) is backend_api/backend.h; devices
// register from their own folder (src/backends/<device>/CMakeLists.txt, ferrite_add_device).
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "backend_api/capabilities.h"
#include "backend_api/properties.h"
#include "ir/graph.h"
#include "ops/communicator.h"
#include "runtime/precision.h"
#include "support/status.h"

namespace ferrite {

struct RunOptions {
  int threads = 0;  // 0 = device default
  // Session only: execution contexts per compiled variant, i.e. how many runs of one Session
  // proceed at once (runtime/session.h). 0 = the device's Device::default_contexts().
  int contexts = 0;
  // Time candidate launch configurations of every generated kernel on the first run at each
  // size and keep the fastest (persisted in the tuning database); see tune/autotuner.h.
  bool autotune = false;
  // Graph passes to run before preparing; unset = the device's default_passes().
  std::optional<std::vector<std::string>> passes;
  // Devices that compile write what they made here (generated source, fusion and memory plans,
  // the IR after passes); others ignore it.
  std::optional<std::filesystem::path> dump_dir;
  // A Chrome / Perfetto trace of every step of every run (with its ONNX nodes), written here
  // when the prepared model is destroyed (`--trace`; execute/step_recorder.h).
  std::optional<std::filesystem::path> trace;
  // Storage precision of float tensors. The Session converts the graph for kBF16 / kF16 (pass
  // convert-precision-*, after the device's passes); devices see the converted graph and, for
  // kTF32, pick TF32 GEMMs. A device refuses what it cannot run (Device::check_precision).
  Precision precision = Precision::kF32;
  // Graph constants whose bytes already live in the device's memory (a framework's parameters
  // on the GPU), keyed by the host address of the constant's data. A device that keeps
  // constants in its own memory uses the given address for a constant that still holds exactly
  // that host data, instead of a copy (a constant a pass rewrote has new data and is copied as
  // usual). `host` keeps that data alive, so that its address cannot be reused by a rewritten
  // constant. The caller keeps the device memory alive and unchanged while the model lives.
  struct DeviceMirror {
    Tensor host;
    const void* address = nullptr;
  };
  std::map<const void*, DeviceMirror> constant_mirrors;
  // Per graph output: the graph input (index) that receives the output's value at the end of
  // every run, or -1 (an optimizer step's new parameters and states, which the caller would
  // otherwise copy back into the inputs). Devices that run on host memory write the output's
  // kernel straight into the input's memory where that is safe (memory/in_place.h) and copy it
  // there otherwise; others ignore it. Empty: no output is written into an input.
  std::vector<int> outputs_into_inputs;
};

// Memory of the intermediate buffers of the last run, for devices that plan it.
struct MemoryStats {
  int64_t planned_peak_bytes = 0;  // arena bytes the plan needs
  int64_t intermediate_bytes = 0;  // sum of the planned buffers (a fresh allocation each)
  int64_t live_peak_bytes = 0;     // most bytes live at one step (lower bound for the plan)
  int64_t planned_buffers = 0;
  int64_t in_place = 0;              // buffers written over an input that died there
  int64_t unplanned_buffers = 0;     // intermediates allocated on the heap (unknown size, ...)
  int64_t arena_capacity_bytes = 0;  // arena kept across runs
  // RunOptions::outputs_into_inputs in the last run: outputs stored by their kernels straight
  // into the inputs' memory, and those copied there after the run (with their bytes).
  int64_t outputs_in_place = 0;
  int64_t outputs_copied_into_inputs = 0;
  int64_t output_bytes_copied_into_inputs = 0;
  // The last run on device memory (PreparedModel::run_device): outputs its steps computed in the
  // caller's memory, and the bytes copied into the caller's memory at its end (outputs of a
  // recorded run, views of other values, memory that overlaps an input).
  int64_t outputs_in_caller_memory = 0;
  int64_t output_bytes_copied_to_caller = 0;
};

// Launch autotuning of the last run (RunOptions::autotune; tune/autotuner.h).
struct TuningStats {
  int kernels_tuned = 0;   // timed this run
  int kernels_reused = 0;  // taken from the tuning database
  int configs_timed = 0;
  double seconds = 0;  // spent timing
};

// Runs timed by the device itself, with the inputs resident in device memory and the outputs
// left there (PreparedModel::time_resident): what a kernel-level benchmark measures.
struct DeviceTiming {
  std::vector<double> seconds;  // one sample per run
  std::string method;           // how it was timed, for reports
};

struct ModelStats {
  std::optional<MemoryStats> memory;
  std::optional<TuningStats> tuning;
  std::optional<DeviceMemoryStats> device_memory;
};

// A run whose inputs and outputs live in the device's memory (a framework's GPU tensors): nothing
// is copied through the host, and the run is ordered on the caller's stream.
struct DeviceRun {
  // Per graph input: its device address, or null where the host tensor given holds the value
  // (for device-resident inputs that tensor only carries dtype and dims; its bytes are not read).
  std::vector<const void*> input_dev;
  // Device memory of the caller for output i (it keeps the memory); called once per output, in
  // the order the run needs them (not necessarily 0, 1, ...). A run may compute the output in
  // that memory while it runs: memory that overlaps an input is written only at the end.
  std::function<Expected<void*>(size_t i, DType dtype, const std::vector<int64_t>& dims)> output;
  // Optional: device memory of the caller's that the run may use until it returns, for its
  // intermediate values and library scratch (at least `bytes`; the caller may reuse it for work it
  // queues on `stream` afterwards). Without it those come from memory the model keeps between
  // runs. A framework's caching allocator (PyTorch's) then shares that memory with everything
  // else the framework runs, as its own compiled graphs do. Runs replaying a recording use the
  // recording's memory instead.
  std::function<Expected<void*>(size_t bytes)> memory;
  // Optional, with `memory`: gives a block of `memory` back before the run returns. With it, each
  // intermediate value gets a block of its own when it is written and gives it back after its
  // last reader (no arena): with input_done, the run then holds at each step only what that step
  // needs, as the framework's own ops do, at the cost of a call per value.
  std::function<void(void* block)> memory_free;
  // Optional: called (step by step, from the running thread) once the last step reading input i
  // is queued, so that the caller can drop its memory early (a training step's backward reads
  // the saved activations). That memory may come back to this run through `output` or `memory`:
  // the run's later work is queued after the reads. Work the caller queues on another thread while
  // the run is in flight must not reuse it. Not called for inputs that are also outputs.
  std::function<void(size_t input)> input_done;
  // The caller's stream (a CUstream on cuda). The run starts after the work queued on it so far
  // and work queued on it later starts after the run. Null with caller_stream false: the
  // device's default order; null with caller_stream true: CUDA's legacy default stream (handle
  // 0, PyTorch's default current stream), which a non-blocking device stream does not otherwise
  // wait for.
  void* stream = nullptr;
  bool caller_stream = false;
};

// A graph prepared for one device. Inputs are in graph-input order, already validated.
class PreparedModel {
 public:
  virtual ~PreparedModel() = default;
  virtual Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) = 0;
  // Statistics about the last run, where the device keeps any.
  virtual ModelStats stats() const { return {}; }
  // Optional: `runs` runs of `inputs` timed on the device (e.g. with CUDA events) with the
  // inputs already resident there and no output copies. Devices without their own clock (the
  // host devices: their Session::run time is already the compute time) answer unsupported.
  virtual Expected<DeviceTiming> time_resident(const std::vector<Tensor>& inputs, int runs) {
    (void)inputs;
    (void)runs;
    return unsupported("this device does not time runs itself");
  }
  // Optional: a run with device-resident inputs and outputs (DeviceRun). Returns once the work
  // is queued, ordered on `run.stream`; outputs are written to the memory `run.output` gave.
  virtual Status run_device(const std::vector<Tensor>& inputs, const DeviceRun& run) {
    (void)inputs;
    (void)run;
    return unsupported("this device does not run on tensors in device memory");
  }
  // Optional: the graph constants this model holds in the device's memory, keyed like
  // RunOptions::constant_mirrors, so that further execution contexts of the same graph use them
  // instead of copies of their own. The entries stay valid while this model lives. Default (and
  // host-memory devices): none.
  virtual std::map<const void*, RunOptions::DeviceMirror> device_constants() { return {}; }
};

// A device's declaration of the graph passes it wants before prepare().
struct PassPlan {
  bool compiles = false;  // runs the default pipeline (passes/pass.h)
  // Whether the device runs a library op that a rewrite pass produces ("ferrite.FusedMatMul");
  // unset: every one. A pass producing an op the device does not run is left out.
  std::function<bool(const std::string& op)> runs_library_op = {};
  // Opt-in passes, each a spec with its options ("layout-channels-last{dtypes=bf16}"), run at
  // their registered slots.
  std::vector<std::string> opt_in = {};
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  virtual DeviceProperties properties() const = 0;
  // Optional: what the default pipeline does for this device (default_passes below). The
  // default runs no passes: the graph as given, as the `reference` oracle wants.
  virtual PassPlan pass_plan() const { return {}; }
  // How many execution contexts of one compiled variant a Session makes at most when runs
  // overlap (RunOptions::contexts = 0). Default: 8 where memory is the host's (contexts share the
  // weights; each has an arena and a worker pool), 1 elsewhere (runs take turns). A device whose
  // contexts run concurrently and share the weights in its memory (device_constants) says more.
  virtual int default_contexts() const { return properties().kind == "host" ? 8 : 1; }
  // Whether the device can run now (a GPU answers); an error saying why not otherwise. Devices
  // that are always there keep the default.
  virtual Status available() const { return Status::ok(); }
  // Whether the device runs graphs at precision `p` (an error saying why not otherwise). The
  // default accepts only kF32: a device opts in to what it has tested.
  virtual Status check_precision(Precision p) const;
  // Prepares (compiles) `graph`; the graph outlives the prepared model.
  virtual Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                           const RunOptions& opts) = 0;

  // Optional: which unit of a device with several ("cuda:1" is GPU 1). Called by the registry
  // right after creation, before anything else. Default: the device has no units to choose.
  virtual Status select(int index) {
    return unsupported("device '", name(), "' has no units to choose from (", name(), ":", index,
                       ")");
  }
  // Optional: a communicator group of `size` ranks for tensor-parallel runs, rank r on unit r
  // (`name:r`), over the device's own collectives library (NCCL on cuda). Default: none, and a
  // tensor-parallel run exchanges data through host memory (distributed/loopback.h).
  virtual Expected<std::vector<std::unique_ptr<Communicator>>> communicator_group(int size) {
    return unsupported("device '", name(), "' has no collectives library (", size, " ranks)");
  }
  // Optional: the same library across processes (one rank each, torchrun). Rank 0 makes an id
  // (bytes, opaque), the launcher hands it to every rank (over torch.distributed), and each rank
  // joins with it on this device object's unit. Default: no collectives library.
  virtual Expected<std::string> communicator_id() {
    return unsupported("device '", name(), "' has no collectives library");
  }
  virtual Expected<std::unique_ptr<Communicator>> communicator_rank(const std::string& id, int rank,
                                                                    int size) {
    (void)id;
    return unsupported("device '", name(), "' has no collectives library (rank ", rank, " of ",
                       size, ")");
  }
};

// check_precision of a host device that stores bf16 / f16 and computes in float: every precision
// but tf32 (a GPU tensor-core GEMM mode).
Status check_storage_precision(const Device& device, Precision p);

// The passes a Session runs before prepare() unless the user chose, from the device's pass_plan()
// (device_pipeline in passes/pass.h); an error names a bad declaration.
Expected<std::vector<std::string>> default_passes(const Device& device);

class DeviceRegistry {
 public:
  using Factory = std::function<Expected<std::unique_ptr<Device>>()>;
  static DeviceRegistry& global();
  // `origin`: where the device comes from ("built-in", or a plugin's path).
  void add(const std::string& name, Factory f, std::string origin = "built-in");
  void add_builtin(const std::string& name, std::unique_ptr<Device> (*make)());
  // `name`, or `name:N` for unit N of a device with several (Device::select).
  Expected<std::unique_ptr<Device>> create(const std::string& name) const;
  std::vector<std::string> names() const;
  std::string origin(const std::string& name) const;
  // Plugins found on the search path but not loaded, with the reason (shown by `devices`).
  struct Refused {
    std::string path, reason;
  };
  void refuse(std::string path, std::string reason) {
    refused_.push_back({std::move(path), std::move(reason)});
  }
  const std::vector<Refused>& refused() const { return refused_; }

 private:
  struct Entry {
    Factory factory;
    std::string origin;
  };
  std::map<std::string, Entry> factories_;
  std::vector<Refused> refused_;
};

// The device used when none is named: cuda where a GPU answers, else cpu (never `reference`, the
// oracle, which is asked for by name). `why` (optional) receives a short reason for the log line.
std::string default_device(std::string* why = nullptr);

// Loads device plugins (plugin_host/plugin_loader.h) into the registry.
void register_plugin_devices(DeviceRegistry& r);

// Registers the devices built into this binary (called once by the registry; generated from the
// device folders by src/backends/CMakeLists.txt).
void register_builtin_devices(DeviceRegistry& r);

}  // namespace ferrite
