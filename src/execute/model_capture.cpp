// Recorded runs (RunCapture: CUDA graphs) and device-timed runs (EventTimer) of the shared
// executor. A binding whose steps all run on the device (or were computed from the shapes alone)
// is recorded once, on its second run, and replayed afterwards: inputs are copied into the
// recording's own buffers, the recording is launched, outputs are copied back.
#include <cstring>

#include "execute/model.h"

namespace ferrite::execute {

namespace {

// Small inputs and outputs go through one page-locked block per binding (truly asynchronous
// copies); large ones are copied directly (the driver pipelines its own staging). The replay
// waits for the device once, not once per output.
constexpr size_t kStageLimit = 64 << 10;
size_t staged(size_t n) {
  return n <= kStageLimit ? (n + 255) / 256 * 256 : 0;
}

}  // namespace

// Records the run of `inputs` (copied into the recording's own input buffers: from the host, or
// on the device where `src_dev` has an address) without replaying it; slots_ then describe the
// recorded run's buffers. On a step that cannot be recorded, capture_failed_ is set.
Status Model::record(const std::vector<Tensor>& inputs,
                     const std::vector<std::vector<int64_t>>& in_dims,
                     const std::vector<const void*>* src_dev) {
  BindingState& st = *state_;
  RunCapture& cap = *rt_.capture();
  std::vector<void*> in_dev;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    FERRITE_ASSIGN_OR_RETURN(void* p, pool_->get_owned(t.nbytes()));
    in_dev.push_back(p);
    if (src_dev && (*src_dev)[i])
      FERRITE_RETURN_IF_ERROR(rt_.copy_on_device(p, (*src_dev)[i], t.nbytes()));
    else
      FERRITE_RETURN_IF_ERROR(rt_.copy_to_device(p, t.raw(), t.nbytes()));
  }
  // A run on device tensors leaves the flag to start_device_flag (its checks may be deferred).
  if (flag_ && !src_dev) FERRITE_RETURN_IF_ERROR(rt_.fill(flag_, 0, sizeof(int)));
  prepare_slots(inputs, &in_dev);
  if (src_dev)  // device-resident inputs: the host tensors only carry dtype and dims
    for (size_t i = 0; i < lg_.inputs.size(); ++i)
      if ((*src_dev)[i]) {
        slots_[lg_.inputs[i]].host = Tensor();
        slots_[lg_.inputs[i]].host_valid = false;
      }
  // Other contexts' host calls (allocations, frees, synchronisations) must not meet the capture.
  if (turn_) turn_->alone();
  pool_->begin_owned();
  capturing_ = true;
  Status s = cap.begin();
  if (s) s = execute_steps();
  auto exec = cap.end(s.is_ok());
  capturing_ = false;
  std::vector<void*> owned = pool_->end_owned();
  if (s && !exec) s = exec.status();
  if (!s) {
    abandon_capture(owned, in_dev);
    if (log_enabled("graph"))
      std::fprintf(stderr, "[graph] %s: not capturable: %s\n", name_.c_str(), s.message().c_str());
    return s;
  }
  st.exec = *exec;
  st.input_dims = in_dims;
  st.input_dev = in_dev;
  st.owned = std::move(owned);
  st.owned.insert(st.owned.end(), in_dev.begin(), in_dev.end());
  st.checks_flag = run_stats_.flag_used;
  st.outputs.clear();
  for (int b : lg_.outputs) {
    const Slot& o = slots_[b];
    CapturedOutput g;
    g.dtype = o.dtype;
    g.dims = o.dims;
    if (o.dev_valid)
      g.dev = o.dev;
    else
      g.host = o.host;
    st.outputs.push_back(std::move(g));
  }
  if (log_enabled("graph"))
    std::fprintf(stderr, "[graph] %s: captured %zu steps for one binding\n", name_.c_str(),
                 lg_.steps.size());
  return Status::ok();
}

// Not capturable (a step needed the host): run step by step from now on.
void Model::abandon_capture(const std::vector<void*>& owned, const std::vector<void*>& in_dev) {
  for (Slot& sl : slots_)
    if (sl.pooled) put(sl.dev);
  slots_.clear();
  for (void* p : scratch_) put(p);
  scratch_.clear();
  scratch_idle_.clear();
  step_scratch_.clear();
  (void)rt_.synchronize();
  (void)pool_->release_owned(owned);
  (void)pool_->release_owned(in_dev);
  state_->capturable = false;
  capture_failed_ = true;
}

Expected<std::vector<Tensor>> Model::replay(const std::vector<Tensor>& inputs) {
  BindingState& st = *state_;
  RunCapture& cap = *rt_.capture();
  if (!st.staging) {
    size_t bytes = 0;
    for (const Tensor& t : inputs) bytes += staged(t.nbytes());
    for (const CapturedOutput& g : st.outputs)
      if (g.dev) bytes += staged(byte_count(g.dtype, g.dims));
    FERRITE_ASSIGN_OR_RETURN(st.staging, cap.allocate_staging(std::max<size_t>(bytes, 256)));
  }
  uint8_t* stage = static_cast<uint8_t*>(st.staging);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const size_t n = inputs[i].nbytes();
    if (n == 0) continue;
    const void* src = inputs[i].raw();
    if (staged(n)) {
      std::memcpy(stage, src, n);
      src = stage;
      stage += staged(n);
    }
    FERRITE_RETURN_IF_ERROR(cap.copy_to_device_async(st.input_dev[i], src, n));
  }
  if (st.checks_flag) FERRITE_RETURN_IF_ERROR(rt_.fill(flag_, 0, sizeof(int)));
  FERRITE_RETURN_IF_ERROR(cap.replay(st.exec));
  std::vector<Tensor> out;
  std::vector<uint8_t*> where;
  for (const CapturedOutput& g : st.outputs) {
    if (!g.dev) {
      out.push_back(g.host);
      where.push_back(nullptr);
      continue;
    }
    FERRITE_ASSIGN_OR_RETURN(Tensor t, Tensor::create_uninitialized(g.dtype, g.dims));
    const size_t n = t.nbytes();
    void* dst = t.raw();
    where.push_back(staged(n) ? stage : nullptr);
    if (staged(n)) {
      dst = stage;
      stage += staged(n);
    }
    if (n) FERRITE_RETURN_IF_ERROR(cap.copy_to_host_async(dst, g.dev, n));
    out.push_back(std::move(t));
  }
  FERRITE_RETURN_IF_ERROR(rt_.synchronize());
  for (size_t j = 0; j < out.size(); ++j)
    if (where[j] && out[j].nbytes()) std::memcpy(out[j].raw(), where[j], out[j].nbytes());
  if (st.checks_flag) FERRITE_RETURN_IF_ERROR(check_flag());
  ++runs_;
  return out;
}

// Device time of whole runs, device events around them. With a recording for these shapes the
// inputs are copied into its buffers once and each sample is one replay (no copies); otherwise
// each sample is a whole step-by-step run, copies included.
Expected<DeviceTiming> Model::time_resident(const std::vector<Tensor>& inputs, int runs) {
  EventTimer* timer = rt_.timer();
  if (!timer || host_) return unsupported("this device does not time runs itself");
  // Steady state for this binding: run 1 is step by step, run 2 records, run 3 replays.
  for (int i = 0; i < 2; ++i) FERRITE_RETURN_IF_ERROR(run(inputs).status());
  DeviceTurn turn(cfg_.device_gate, &cfg_.enter, &cfg_.leave);
  std::lock_guard<std::mutex> lock(mutex_);
  FERRITE_RETURN_IF_ERROR(turn.enter());
  CurrentTurn current(turn_, turn);
  FERRITE_RETURN_IF_ERROR(bind(inputs));
  BindingState& st = *state_;
  std::vector<std::vector<int64_t>> in_dims;
  for (const Tensor& t : inputs) in_dims.push_back(t.dims());
  const bool captured = st.exec && st.input_dims == in_dims;
  DeviceTiming out;
  out.method = captured ? "device events around one replay of the recorded run (CUDA graph); "
                          "inputs resident on the device, outputs left there"
                        : "device events around a step-by-step run (no recorded run for these "
                          "shapes), input and output copies included";
  if (captured)
    for (size_t i = 0; i < inputs.size(); ++i)
      FERRITE_RETURN_IF_ERROR(
          rt_.copy_to_device(st.input_dev[i], inputs[i].raw(), inputs[i].nbytes()));
  auto e0 = timer->create();
  auto e1 = timer->create();
  Status s = !e0 ? e0.status() : !e1 ? e1.status() : Status::ok();
  for (int r = 0; r < runs && s; ++r) {
    auto t = time_one(captured, inputs, *e0, *e1);
    if (t)
      out.seconds.push_back(*t);
    else
      s = t.status();
  }
  if (e0) timer->destroy(*e0);
  if (e1) timer->destroy(*e1);
  FERRITE_RETURN_IF_ERROR(s);
  return out;
}

Expected<double> Model::time_one(bool captured, const std::vector<Tensor>& inputs, EventHandle e0,
                                 EventHandle e1) {
  EventTimer& timer = *rt_.timer();
  BindingState& st = *state_;
  if (captured && st.checks_flag) FERRITE_RETURN_IF_ERROR(rt_.fill(flag_, 0, sizeof(int)));
  FERRITE_RETURN_IF_ERROR(timer.record(e0));
  Status s = Status::ok();
  if (captured) {
    s = rt_.capture()->replay(st.exec);
  } else {
    prepare_slots(inputs, nullptr);
    if (flag_) s = rt_.fill(flag_, 0, sizeof(int));
    if (s) s = execute_steps();
    s = finish(s).status();
  }
  FERRITE_RETURN_IF_ERROR(s);
  FERRITE_RETURN_IF_ERROR(timer.record(e1));
  FERRITE_RETURN_IF_ERROR(timer.wait(e1));
  FERRITE_ASSIGN_OR_RETURN(double ms, timer.elapsed_ms(e0, e1));
  if (captured && st.checks_flag) FERRITE_RETURN_IF_ERROR(check_flag());
  return ms * 1e-3;
}

}  // namespace ferrite::execute
