// The shared executor's prepared model (executor.h). Internal to src/execute: model.cpp runs the
// steps, model_memory.cpp keeps track of where each buffer is, model_device_run.cpp runs on a
// caller's device tensors, model_capture.cpp records and
// replays runs and times them on the device.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <utility>
#include <vector>

#include "execute/executor.h"
#include "execute/step_plan.h"
#include "execute/step_recorder.h"
#include "memory/lowered_memory.h"
#include "ops/context.h"
#include "runtime/dump.h"
#include "tune/autotuner.h"

namespace ferrite::execute {

class Model : public PreparedModel {
 public:
  Model(const Graph& g, LoweredGraph lg, std::unique_ptr<LoadedModule> module,
        std::shared_ptr<const BackendParts> parts, ExecutorConfig cfg, const RunOptions& opts);
  ~Model() override;

  Status init(const std::string& source, const RunOptions& opts);
  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) override;
  Expected<DeviceTiming> time_resident(const std::vector<Tensor>& inputs, int runs) override;
  Status run_device(const std::vector<Tensor>& inputs, const DeviceRun& run) override;
  ModelStats stats() const override;
  std::map<const void*, RunOptions::DeviceMirror> device_constants() override;

 private:
  // A buffer's value this run: on the host, on the device, or both (one place on host-memory
  // runtimes, where the device pointer is the tensor's).
  struct Slot {
    DType dtype = DType::kUndefined;
    std::vector<int64_t> dims;
    Tensor host;
    bool host_valid = false;
    void* dev = nullptr;
    bool dev_valid = false;
    bool pooled = false;  // dev came from the pool (returned at release)
    bool lent = false;    // dev is the caller's, to give back at release (DeviceRun::memory_free)
  };
  struct KernelLaunch {
    std::vector<int64_t> out_dims;
    int64_t rows = 0, row_len = 0;
    bool empty = false;
    std::optional<LaunchConfig> lc;  // chosen on first launch (tuning needs the buffers)
  };
  struct CapturedOutput {
    const void* dev = nullptr;
    DType dtype = DType::kUndefined;
    std::vector<int64_t> dims;
    Tensor host;  // an output the recording does not compute (a host value)
  };
  // What the model keeps per binding of the shape symbols.
  struct BindingState {
    std::vector<std::optional<KernelLaunch>> launches;    // per kernel step
    std::map<size_t, std::vector<Tensor>> fixed_outputs;  // per fixed host step
    std::map<int, void*> fixed_dev;                       // device copies of those values
    bool capturable = true;  // no step needs the host for input-dependent data
    int clean_runs = 0;
    CaptureHandle exec = 0;  // the recorded run, its stable inputs and outputs
    std::vector<std::vector<int64_t>> input_dims;
    std::vector<void*> input_dev;
    std::vector<CapturedOutput> outputs;
    std::vector<void*> owned;
    void* staging = nullptr;
    bool checks_flag = false;
    // Bytes of the inputs and outputs of the last run_device (-1 before one): a recording would
    // copy them on every replay and hold a second copy of each (kMaxRecordedIoBytes).
    int64_t device_io_bytes = -1;
  };
  struct RunStats {
    int kernels = 0, library = 0, host_resident = 0, fallbacks = 0, cached = 0, nondet_host = 0;
    int64_t d2h_bytes = 0;
    std::string fallback_ops;
    std::string data_ops;  // op types of the host steps on data (nondet_host)
    bool flag_used = false;
  };

  // model.cpp
  Status bind(const std::vector<Tensor>& inputs, bool reserve_arena = true);
  Expected<std::vector<Tensor>> run_locked(const std::vector<Tensor>& inputs);
  void prepare_slots(const std::vector<Tensor>& inputs, const std::vector<void*>* input_dev);
  Status execute_steps();
  Status run_kernel(size_t si);
  Status launch_kernel(size_t si, KernelLaunch& kl, std::vector<void*>& ptrs);
  Status run_library(size_t si);
  Status run_library_step(size_t si);
  Status run_host_library(size_t si);
  Expected<bool> run_device_library(size_t si, const LibraryOp& op);
  Expected<void*> step_scratch(size_t bytes);
  Status run_on_host(size_t si, std::vector<Tensor> ins, bool resident);
  Expected<std::vector<Tensor>> finish(Status st);
  Status end_run(Status st);
  Status check_flag();
  Status flag_status(int v, const char* when) const;
  std::string step_kind(size_t si) const;
  void log_run() const;

  // model_memory.cpp
  void prepare_into_inputs(const std::vector<Tensor>& inputs);
  Status write_into_inputs(const std::vector<Tensor>& inputs, std::vector<Tensor>& out);
  void set_host(int b, Tensor t);
  Expected<void*> place(int b, DType dtype, const std::vector<int64_t>& dims);
  Expected<void*> device_ptr(int b);
  Expected<Tensor> host_tensor(int b);
  Expected<std::vector<int64_t>> input_dims(const Step& s, size_t i);
  void release(size_t step);
  void put(void* p);
  Expected<void*> pool_get(size_t bytes);
  Expected<void*> pool_get_persistent(size_t bytes);
  void drop_capture(BindingState& st);
  void drop_binding(BindingState& st);

  // model_device_run.cpp
  Status run_device_locked(const std::vector<Tensor>& inputs, const DeviceRun& run);
  Status replay_device(const std::vector<Tensor>& inputs, const DeviceRun& run);
  Status write_outputs(const DeviceRun& run);
  Status start_device_flag();
  Status end_device_flag(bool used);
  Status report_deferred_flag(bool wait);
  Expected<void*> caller_output(int b, DType dtype, const std::vector<int64_t>& dims);
  Expected<void*> caller_memory(size_t bytes);
  void give_back(void* p);

  // model_capture.cpp
  Status record(const std::vector<Tensor>& inputs, const std::vector<std::vector<int64_t>>& in_dims,
                const std::vector<const void*>* src_dev);
  void abandon_capture(const std::vector<void*>& owned, const std::vector<void*>& in_dev);
  Expected<std::vector<Tensor>> replay(const std::vector<Tensor>& inputs);
  Expected<double> time_one(bool captured, const std::vector<Tensor>& inputs, EventHandle e0,
                            EventHandle e1);

  const Graph& graph_;
  // The parts and the device state outlive the module (a GPU context unloads it).
  std::shared_ptr<const BackendParts> parts_;
  ExecutorConfig cfg_;
  LoweredGraph lg_;
  std::unique_ptr<LoadedModule> module_;
  DeviceRuntime& rt_;
  const std::string name_;
  const bool host_;  // host-memory runtime
  std::unique_ptr<MemoryPool> pool_;
  bool pool_stats_ = false;  // the runtime's caching pool: its statistics are reported
  StepPlan plan_;
  std::unique_ptr<LoweredMemory> memory_;
  const void* arena_block_ = nullptr;
  LaunchChooser launches_;
  std::unique_ptr<CompileDump> dump_;
  std::map<std::vector<int64_t>, std::unique_ptr<BindingState>> states_;
  BindingState* state_ = nullptr;
  SymbolBinding bind_;
  std::vector<Slot> slots_;
  std::vector<void*> const_dev_;
  std::vector<char> const_mirrored_;  // const_dev_[b] is the caller's memory (RunOptions)
  std::map<const void*, RunOptions::DeviceMirror> mirrors_;
  // Library scratch: every block this run took from the pool (given back at its end), and
  // those of finished steps, which later steps of the run reuse (stream order makes that safe,
  // in a captured graph too): a run holds the largest steps' scratch, not every step's.
  std::vector<void*> scratch_;
  std::vector<std::pair<void*, size_t>> scratch_idle_, step_scratch_;
  void* flag_ = nullptr;  // device int: data errors of library ops (Gather indices)
  // Device runs check flag_ without waiting for the device: a page-locked copy of it is queued
  // behind each such run (flag_seen_; null where the runtime has no page-locked staging), and
  // flag_deferred_ says copies were queued since the host last found the flag clear.
  int* flag_seen_ = nullptr;
  bool flag_deferred_ = false;
  RunStats run_stats_;
  // RunOptions::outputs_into_inputs: per graph output, the input receiving it (or -1); per
  // buffer, this run's input tensor its kernel stores into (empty Tensor: none, it is placed as
  // usual and copied into the input after the run). Counts of the last run, for stats().
  std::vector<int> into_inputs_;
  std::vector<Tensor> store_into_;
  // run_device step by step: graph outputs are computed straight into the caller's memory.
  // output_of_buffer_[b]: the first graph output that is buffer b (-1: none); caller_out_[j]: the
  // memory run.output gave for output j this run (asked once), with whether the steps write it.
  const DeviceRun* device_run_ = nullptr;
  // This run's device inputs as address ranges (computed once per run: caller_output checks
  // every output against all of them).
  struct InputRange {
    const uint8_t* lo = nullptr;
    size_t bytes = 0;
    DType dtype = DType::kUndefined;
  };
  std::vector<InputRange> device_inputs_;
  std::vector<int> output_of_buffer_, input_of_buffer_;
  std::vector<std::pair<void*, bool>> caller_out_;
  // DeviceRun::memory_free: a block per value; the caller's address of each aligned block given.
  bool per_value_ = false;
  std::unordered_map<void*, void*> lent_blocks_;
  int64_t outputs_in_place_ = 0, outputs_copied_ = 0, output_bytes_copied_ = 0;
  // Some output is planned into an input (lg_.output_into_input).
  bool writes_inputs() const {
    for (int i : lg_.output_into_input)
      if (i >= 0) return true;
    return false;
  }
  int64_t outputs_in_caller_ = 0, output_bytes_to_caller_ = 0;  // the last run_device's
  bool logged_ = false, capturing_ = false, capture_failed_ = false;
  const bool capture_on_;
  std::unique_ptr<StepRecorder> recorder_;
  std::string path_;  // how the current library step ran
  const bool tf32_;
  int64_t runs_ = 0;
  mutable std::mutex mutex_;
  DeviceTurn* turn_ = nullptr;  // the run in progress (a recording asks it for the device alone)
};

}  // namespace ferrite::execute
