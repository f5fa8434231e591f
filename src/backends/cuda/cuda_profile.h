// FERRITE_LOG=profile for the cuda device: every step is bracketed by two CUDA events on the
// stream (no synchronisation between steps, so the run keeps its pace), and the elapsed device
// time is summed per step and per kind of step over all runs. The table, printed when the model
// is destroyed, lists the kinds and the most expensive steps with the ONNX nodes they came from.
// CUDA graphs are off while profiling (events per step need the step-by-step run).
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "backends/cuda/cuda_runtime.h"

namespace ferrite::cuda {

class StepProfile {
 public:
  ~StepProfile() {
    for (CUevent e : events_)
      if (e && d_) d_->cuEventDestroy(e);
  }
  // Step `i` of `n` starts now on the stream.
  void start(CudaRuntime& rt, size_t i, size_t n) {
    d_ = &rt.api();
    if (events_.size() < 2 * n) events_.resize(2 * n, nullptr);
    if (pending_.size() < n) pending_.resize(n);
    CUevent& e = events_[2 * i];
    if (!e && d_->cuEventCreate(&e, 0) != CUDA_SUCCESS) e = nullptr;
    if (e) d_->cuEventRecord(e, rt.stream());
  }
  void stop(CudaRuntime& rt, size_t i, std::string label, std::string kind) {
    CUevent& e = events_[2 * i + 1];
    if (!e && d_->cuEventCreate(&e, 0) != CUDA_SUCCESS) e = nullptr;
    if (e) d_->cuEventRecord(e, rt.stream());
    pending_[i] = {std::move(label), std::move(kind), true};
  }
  // After the last step of a run: waits for the stream and collects the step times.
  void end_run(CudaRuntime& rt) {
    rt.synchronize();
    for (size_t i = 0; i < pending_.size(); ++i) {
      Pending& p = pending_[i];
      if (!p.set) continue;
      p.set = false;
      float ms = 0;
      if (!events_[2 * i] || !events_[2 * i + 1] ||
          d_->cuEventElapsedTime(&ms, events_[2 * i], events_[2 * i + 1]) != CUDA_SUCCESS)
        continue;
      auto& row = steps_[p.label];
      row.kind = p.kind;
      row.count += 1;
      row.ms += ms;
      auto& k = kinds_[p.kind];
      k.first += 1;
      k.second += ms;
    }
    ++runs_;
  }
  void print() const {
    if (runs_ == 0) return;
    const double n = static_cast<double>(runs_);
    double total = 0;
    for (const auto& [kind, e] : kinds_) total += e.second;
    std::fprintf(stderr,
                 "[profile] cuda: %lld runs, %.3f ms of device time per run in %zu distinct "
                 "steps (CUDA events around each step, no CUDA graph)\n",
                 static_cast<long long>(runs_), total / n, steps_.size());
    std::vector<std::pair<double, std::string>> rows;
    for (const auto& [kind, e] : kinds_) rows.push_back({e.second, kind});
    std::sort(rows.rbegin(), rows.rend());
    std::fprintf(stderr, "[profile]   by kind:      ms/run   %%    steps/run\n");
    for (const auto& [ms, kind] : rows)
      std::fprintf(stderr, "[profile]   %8.3f  %5.1f%%  %5.0f  %s\n", ms / n,
                   total > 0 ? 100 * ms / total : 0, kinds_.at(kind).first / n, kind.c_str());
    rows.clear();
    for (const auto& [label, r] : steps_) rows.push_back({r.ms, label});
    std::sort(rows.rbegin(), rows.rend());
    const size_t top = std::min<size_t>(rows.size(), 25);
    std::fprintf(stderr, "[profile]   top %zu steps:  ms/run   %%   (kind) step: ONNX nodes\n",
                 top);
    for (size_t i = 0; i < top; ++i) {
      const auto& r = steps_.at(rows[i].second);
      std::fprintf(stderr, "[profile]   %8.3f  %5.1f%%  (%s) %s\n", r.ms / n,
                   total > 0 ? 100 * r.ms / total : 0, r.kind.c_str(), rows[i].second.c_str());
    }
  }

 private:
  struct Pending {
    std::string label, kind;
    bool set = false;
  };
  struct Row {
    std::string kind;
    double count = 0, ms = 0;
  };
  const Driver* d_ = nullptr;
  std::vector<CUevent> events_;  // two per step
  std::vector<Pending> pending_;
  std::map<std::string, Row> steps_;
  std::map<std::string, std::pair<double, double>> kinds_;  // kind -> (steps, ms)
  int64_t runs_ = 0;
};

}  // namespace ferrite::cuda
