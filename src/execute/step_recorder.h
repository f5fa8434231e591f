// Per-step timings of the shared executor: FERRITE_LOG=profile (a table per model, printed when
// the model is destroyed: time per kind of step and the most expensive steps with their ONNX
// nodes) and `--trace FILE` (a Chrome / Perfetto trace: one complete event per step and run, with
// its ONNX node names, written when the model is destroyed; open it in ui.perfetto.dev or
// chrome://tracing).
//
// Steps are timed with the runtime's EventTimer where it has one (two device events per step, no
// synchronisation between steps), else with the host clock (synchronizing after each step on a
// device with memory of its own). Captured runs (CUDA graphs) are not recorded per step: the
// executor runs step by step while recording.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backend_api/runtime.h"

namespace ferrite {

class StepRecorder {
 public:
  StepRecorder(DeviceRuntime& rt, std::string device, bool profile,
               std::optional<std::filesystem::path> trace);
  ~StepRecorder();
  StepRecorder(const StepRecorder&) = delete;
  StepRecorder& operator=(const StepRecorder&) = delete;

  bool active() const { return profile_ || trace_.has_value(); }
  // Around the steps of one run of `steps` steps.
  void begin_run(size_t steps);
  void start(size_t step);
  // `label`: the step and its nodes; `kind`: what ran it; `nodes`: ONNX node names.
  void stop(size_t step, const std::string& label, const std::string& kind,
            const std::vector<std::string>* nodes);
  void end_run();

 private:
  struct Pending {
    std::string label, kind;
    std::vector<std::string> nodes;
    double host_start_us = 0, host_end_us = 0;
    bool set = false;
  };
  struct Row {
    std::string kind;
    double count = 0, ms = 0;
  };
  double now_us() const;
  EventHandle event(size_t i);
  void record(size_t step, double ms, double start_us, const Pending& p);
  void print_profile() const;
  void write_trace() const;

  DeviceRuntime& rt_;
  EventTimer* timer_;
  std::string device_;
  bool profile_;
  std::optional<std::filesystem::path> trace_;
  std::chrono::steady_clock::time_point t0_ = std::chrono::steady_clock::now();
  std::vector<EventHandle> events_;  // run start, then two per step
  std::vector<Pending> pending_;
  double run_start_us_ = 0;
  std::map<std::string, Row> steps_;
  std::map<std::string, std::pair<double, double>> kinds_;  // kind -> (steps, ms)
  std::string trace_events_;
  int64_t runs_ = 0;
  int64_t traced_events_ = 0;
};

}  // namespace ferrite
