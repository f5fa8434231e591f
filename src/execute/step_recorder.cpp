#include "execute/step_recorder.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>

#include "support/json.h"

namespace ferrite {

namespace {

// Traces of long benchmarks stay loadable.
constexpr int64_t kMaxTraceEvents = 200000;

}  // namespace

StepRecorder::StepRecorder(DeviceRuntime& rt, std::string device, bool profile,
                           std::optional<std::filesystem::path> trace)
    : rt_(rt),
      timer_(rt.timer()),
      device_(std::move(device)),
      profile_(profile),
      trace_(std::move(trace)) {}

StepRecorder::~StepRecorder() {
  if (profile_) print_profile();
  if (trace_) write_trace();
  if (timer_)
    for (EventHandle e : events_)
      if (e) timer_->destroy(e);
}

double StepRecorder::now_us() const {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0_).count();
}

EventHandle StepRecorder::event(size_t i) {
  if (!timer_) return 0;
  if (events_.size() <= i) events_.resize(i + 1, 0);
  if (!events_[i]) {
    auto e = timer_->create();
    events_[i] = e ? *e : 0;
  }
  return events_[i];
}

void StepRecorder::begin_run(size_t steps) {
  if (pending_.size() < steps) pending_.resize(steps);
  if (timer_) {
    if (EventHandle e = event(0)) (void)timer_->record(e);
  } else {
    (void)rt_.synchronize();
  }
  run_start_us_ = now_us();
}

void StepRecorder::start(size_t step) {
  if (timer_) {
    if (EventHandle e = event(1 + 2 * step)) (void)timer_->record(e);
  }
  pending_[step].host_start_us = now_us();
}

void StepRecorder::stop(size_t step, const std::string& label, const std::string& kind,
                        const std::vector<std::string>* nodes) {
  Pending& p = pending_[step];
  if (timer_) {
    if (EventHandle e = event(2 + 2 * step)) (void)timer_->record(e);
  } else if (!rt_.host_memory()) {
    (void)rt_.synchronize();
  }
  p.host_end_us = now_us();
  p.label = label;
  p.kind = kind;
  if (trace_ && nodes) p.nodes = *nodes;
  p.set = true;
}

void StepRecorder::end_run() {
  (void)rt_.synchronize();
  for (size_t i = 0; i < pending_.size(); ++i) {
    Pending& p = pending_[i];
    if (!p.set) continue;
    p.set = false;
    double ms = (p.host_end_us - p.host_start_us) / 1000, start = p.host_start_us;
    if (timer_) {
      EventHandle a = i * 2 + 1 < events_.size() ? events_[i * 2 + 1] : 0;
      EventHandle b = i * 2 + 2 < events_.size() ? events_[i * 2 + 2] : 0;
      if (!a || !b || !events_[0]) continue;
      auto d = timer_->elapsed_ms(a, b);
      auto off = timer_->elapsed_ms(events_[0], a);
      if (!d || !off) continue;
      ms = *d;
      start = run_start_us_ + *off * 1000;
    }
    record(i, ms, start, p);
  }
  ++runs_;
}

void StepRecorder::record(size_t step, double ms, double start_us, const Pending& p) {
  if (profile_) {
    auto& row = steps_[p.label];
    row.kind = p.kind;
    row.count += 1;
    row.ms += ms;
    auto& k = kinds_[p.kind];
    k.first += 1;
    k.second += ms;
  }
  if (!trace_ || traced_events_ >= kMaxTraceEvents) return;
  ++traced_events_;
  // One event a line (the file can be long); times in whole nanoseconds.
  Json ev = {{"ph", "X"},
             {"pid", 1},
             {"tid", 1},
             {"ts", std::round(start_us * 1000) / 1000},
             {"dur", std::round(ms * 1e6) / 1000},
             {"name", p.label},
             {"cat", p.kind},
             {"args", {{"run", runs_}, {"step", step}, {"nodes", p.nodes}}}};
  trace_events_ += (trace_events_.empty() ? "" : ",\n") + json_line(ev);
}

void StepRecorder::print_profile() const {
  if (runs_ == 0) return;
  const double n = static_cast<double>(runs_);
  double total = 0;
  for (const auto& [kind, e] : kinds_) total += e.second;
  std::fprintf(stderr,
               "[profile] %s: %lld runs, %.3f ms of device time per run in %zu distinct steps "
               "(%s around each step, no captured runs)\n",
               device_.c_str(), static_cast<long long>(runs_), total / n, steps_.size(),
               timer_ ? "device events" : "the host clock");
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
  std::fprintf(stderr, "[profile]   top %zu steps:  ms/run   %%   (kind) step: ONNX nodes\n", top);
  for (size_t i = 0; i < top; ++i) {
    const auto& r = steps_.at(rows[i].second);
    std::fprintf(stderr, "[profile]   %8.3f  %5.1f%%  (%s) %s\n", r.ms / n,
                 total > 0 ? 100 * r.ms / total : 0, r.kind.c_str(), rows[i].second.c_str());
  }
}

void StepRecorder::write_trace() const {
  std::ofstream f(*trace_, std::ios::trunc);
  if (!f) {
    std::fprintf(stderr, "warning: cannot write the trace %s\n", trace_->string().c_str());
    return;
  }
  Json other = {{"device", device_}, {"runs", runs_}};
  Json process = {{"ph", "M"},
                  {"pid", 1},
                  {"name", "process_name"},
                  {"args", {{"name", "ferrite " + device_}}}};
  f << "{\"displayTimeUnit\":\"ms\",\"otherData\":" << json_line(other) << ",\n\"traceEvents\":[\n"
    << json_line(process) << (trace_events_.empty() ? "" : ",\n") << trace_events_ << "\n]}\n";
}

}  // namespace ferrite
