// FERRITE_LOG=profile for the cuda device: every step is timed to completion (the stream is
// synchronised around it, so the total exceeds an unprofiled run) and summed per kind of step
// over all runs; the table is printed when the model is destroyed.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backends/cuda/cuda_runtime.h"

namespace ferrite::cuda {

class StepProfile {
 public:
  using Clock = std::chrono::steady_clock;
  Clock::time_point start(CudaRuntime& rt) {
    rt.synchronize();
    return Clock::now();
  }
  void stop(CudaRuntime& rt, const std::string& label, Clock::time_point t0) {
    rt.synchronize();
    auto& e = table_[label];
    e.first += 1;
    e.second += std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  }
  void end_run() { ++runs_; }
  void print() const {
    if (runs_ == 0) return;
    std::vector<std::pair<double, std::string>> rows;
    double total = 0;
    for (const auto& [label, e] : table_) {
      rows.push_back({e.second, label});
      total += e.second;
    }
    std::sort(rows.rbegin(), rows.rend());
    const double n = static_cast<double>(runs_);
    std::fprintf(stderr, "[profile] cuda: %lld runs, %.3f ms of steps per run (synchronised):\n",
                 static_cast<long long>(runs_), total / n);
    for (const auto& [ms, label] : rows)
      std::fprintf(stderr, "[profile]   %8.3f ms  %5.0f steps  %s\n", ms / n,
                   table_.at(label).first / n, label.c_str());
  }

 private:
  std::map<std::string, std::pair<double, double>> table_;  // label -> (steps, ms)
  int64_t runs_ = 0;
};

}  // namespace ferrite::cuda
