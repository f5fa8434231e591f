// Autotuning of kernel launches with a persistent database.
//
// For a generated kernel at a concrete size, candidate launch configurations derived from the
// device's properties (its spec: legal grids, warps, preferred block sizes; on the host, the
// rows each task takes) are timed on the device and the fastest is kept. The choice is stored in
// the compile cache's disk level (runtime/compile_cache.h: atomic writes, corrupt entries
// rejected) under a key of the kernel's content, a shape bucket (rows and row length rounded up
// to powers of two) and the device-properties hash, so a later compile on the same device reuses
// it without timing anything. Tuning records survive rebuilds of ferrite (they describe the
// device, not ferrite's code).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <tuple>
#include <optional>
#include <string>
#include <vector>

#include "backend_api/heuristics.h"
#include "backend_api/properties.h"
#include "runtime/device.h"
#include "support/status.h"

namespace ferrite {

struct Kernel;

// Candidate launches for a kernel of `rows` x `row_len` on the device; the heuristics' own
// choice first, every candidate legal under props.launch, no duplicates.
std::vector<LaunchConfig> tuning_candidates(const Kernel& k, int64_t rows, int64_t row_len,
                                            const DeviceProperties& props,
                                            const LaunchConfig& heuristic);

class Autotuner {
 public:
  // Runs the kernel once with `config` and returns the elapsed seconds (the device's clock).
  using TimeFn = std::function<Expected<double>(const LaunchConfig& config)>;

  explicit Autotuner(const DeviceProperties& props, bool show_progress);
  // The tuned launch for a kernel at this size: from the database, or timed now.
  Expected<LaunchConfig> tune(const Kernel& k, int64_t rows, int64_t row_len,
                              const LaunchConfig& heuristic, const TimeFn& time);
  // Progress: total kernels expected this pass (for the bar), and done with the pass.
  void begin(int total_kernels);
  void end();
  const TuningStats& stats() const { return stats_; }

  // The database key (for tests and dumps).
  static std::string record_key(const Kernel& k, int64_t rows, int64_t row_len,
                                const DeviceProperties& props);

 private:
  void progress(const std::string& kernel);

  DeviceProperties props_;
  std::string props_key_;
  bool show_progress_;
  int total_ = 0, done_ = 0;
  TuningStats stats_;
};

// "grid=48 block=32 rows=1 shared=0" and back.
std::string format_launch(const LaunchConfig& c);
std::optional<LaunchConfig> parse_launch(const std::string& text);

}  // namespace ferrite

namespace ferrite {

// What an executor asks for each kernel launch: the heuristics' choice, or with autotuning the
// tuned one, remembered per (step, rows, row length) so that each size is tuned once per model.
class LaunchChooser {
 public:
  LaunchChooser(const DeviceProperties& props, const LaunchHeuristics& heuristics, bool autotune);
  // `tunable`: the kernel may be run repeatedly on its buffers (false for in-place kernels);
  // `time` runs it once with a configuration.
  Expected<LaunchConfig> choose(size_t step, const Kernel& k, int64_t rows, int64_t row_len,
                                bool tunable, const Autotuner::TimeFn& time);
  // Around each run: `kernel_steps` sizes the progress bar.
  void begin_run(int kernel_steps);
  void end_run();
  std::optional<TuningStats> stats() const;

 private:
  const DeviceProperties& props_;
  const LaunchHeuristics& heuristics_;
  bool autotune_;
  std::optional<Autotuner> tuner_;
  std::map<std::tuple<size_t, int64_t, int64_t>, LaunchConfig> chosen_;
};

}  // namespace ferrite
