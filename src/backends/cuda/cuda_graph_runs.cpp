// CUDA graphs for the cuda device's prepared model (cuda_model.h): capture of a binding's run,
// replay, and device-timed runs with resident inputs (PreparedModel::time_resident).
#include "backends/cuda/cuda_model.h"

namespace ferrite::cuda::detail {

// Device time of whole runs, CUDA events around them. With a CUDA graph for these shapes the
// inputs are copied into the graph's buffers once and each sample is one graph launch (no
// copies); otherwise each sample is a whole step-by-step run, copies included.
Expected<DeviceTiming> CudaModel::time_resident(const std::vector<Tensor>& inputs, int runs) {
  // Steady state for this binding: run 1 is step by step, run 2 captures, run 3 replays.
  for (int i = 0; i < 2; ++i) FERRITE_RETURN_IF_ERROR(run(inputs).status());
  std::lock_guard<std::mutex> device_lock(be_->run_mutex);
  std::lock_guard<std::mutex> lock(mutex_);
  FERRITE_RETURN_IF_ERROR(rt_.make_current());
  FERRITE_RETURN_IF_ERROR(bind(inputs));
  const Driver& d = rt_.api();
  BindingState& st = *state_;
  std::vector<std::vector<int64_t>> in_dims;
  for (const Tensor& t : inputs) in_dims.push_back(t.dims());
  const bool graph = st.exec && st.input_dims == in_dims;
  DeviceTiming out;
  out.method = graph ? "CUDA events around one CUDA-graph launch; inputs resident on the GPU, "
                       "outputs left there"
                     : "CUDA events around a step-by-step run (no CUDA graph for these shapes), "
                       "input and output copies included";
  if (graph)
    for (size_t i = 0; i < inputs.size(); ++i)
      FERRITE_RETURN_IF_ERROR(
          rt_.copy_to_device(st.input_dev[i], inputs[i].raw(), inputs[i].nbytes()));
  CUevent e0 = nullptr, e1 = nullptr;
  Status s = check(d.cuEventCreate(&e0, 0), "cuEventCreate");
  if (s) s = check(d.cuEventCreate(&e1, 0), "cuEventCreate");
  for (int r = 0; r < runs && s; ++r) {
    if (graph && st.checks_flag) s = rt_.fill(flag_, 0, sizeof(int));
    if (s) s = check(d.cuEventRecord(e0, rt_.stream()), "cuEventRecord");
    if (!s) break;
    if (graph) {
      s = check(d.cuGraphLaunch(st.exec, rt_.stream()), "cuGraphLaunch");
    } else {
      prepare_slots(inputs, nullptr);
      s = rt_.fill(flag_, 0, sizeof(int));
      if (s) s = execute_steps();
      s = finish(s).status();
    }
    if (s) s = check(d.cuEventRecord(e1, rt_.stream()), "cuEventRecord");
    if (s) s = check(d.cuEventSynchronize(e1), "cuEventSynchronize");
    float ms = 0;
    if (s) s = check(d.cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    if (s) out.seconds.push_back(ms * 1e-3);
    if (s && graph && st.checks_flag) s = check_flag();
  }
  if (e0) d.cuEventDestroy(e0);
  if (e1) d.cuEventDestroy(e1);
  FERRITE_RETURN_IF_ERROR(s);
  return out;
}

// CUDA graphs: a binding whose steps all run on the GPU (or were computed from the shapes
// alone) is captured once, on its second run, and replayed afterwards: inputs are copied into
// the graph's own buffers, the graph is launched, outputs are copied back.
Expected<std::vector<Tensor>> CudaModel::capture(const std::vector<Tensor>& inputs,
                                                 const std::vector<std::vector<int64_t>>& in_dims) {
  BindingState& st = *state_;
  std::vector<void*> in_dev;
  for (const Tensor& t : inputs) {
    FERRITE_ASSIGN_OR_RETURN(void* p, pool_.get_owned(t.nbytes()));
    in_dev.push_back(p);
    FERRITE_RETURN_IF_ERROR(rt_.copy_to_device(p, t.raw(), t.nbytes()));
  }
  FERRITE_RETURN_IF_ERROR(rt_.fill(flag_, 0, sizeof(int)));
  prepare_slots(inputs, &in_dev);
  pool_.begin_owned();
  capturing_ = true;
  Status s = check(rt_.api().cuStreamBeginCapture(rt_.stream(), CU_STREAM_CAPTURE_MODE_RELAXED),
                   "cuStreamBeginCapture");
  if (s) s = execute_steps();
  CUgraph graph = nullptr;
  CUresult end = rt_.api().cuStreamEndCapture(rt_.stream(), &graph);
  capturing_ = false;
  std::vector<void*> owned = pool_.end_owned();
  CUgraphExec exec = nullptr;
  if (s && end == CUDA_SUCCESS && graph)
    s = check(rt_.api().cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
  else if (s)
    s = check(end, "cuStreamEndCapture");
  if (graph) rt_.api().cuGraphDestroy(graph);
  if (!s) {
    // Not capturable (a step needed the host): run step by step from now on.
    if (exec) rt_.api().cuGraphExecDestroy(exec);
    for (Slot& sl : slots_)
      if (sl.pooled) pool_.put(sl.dev);
    slots_.clear();
    for (void* p : scratch_) pool_.put(p);
    scratch_.clear();
    rt_.synchronize();
    pool_.release_owned(owned);
    pool_.release_owned(in_dev);
    st.graphable = false;
    capture_failed_ = true;
    if (log_enabled("graph"))
      std::fprintf(stderr, "[graph] cuda: not capturable: %s\n", s.message().c_str());
    return s;
  }
  st.exec = exec;
  st.input_dims = in_dims;
  st.input_dev = in_dev;
  st.owned = std::move(owned);
  st.owned.insert(st.owned.end(), in_dev.begin(), in_dev.end());
  st.checks_flag = run_stats_.gathers;
  st.outputs.clear();
  for (int b : lg_.outputs) {
    const Slot& o = slots_[b];
    GraphOutput g;
    g.dtype = o.dtype;
    g.dims = o.dims;
    if (o.dev_valid)
      g.dev = o.dev;
    else
      g.host = o.host;
    st.outputs.push_back(std::move(g));
  }
  if (log_enabled("graph"))
    std::fprintf(stderr, "[graph] cuda: captured %zu steps for one binding\n", lg_.steps.size());
  FERRITE_RETURN_IF_ERROR(check(rt_.api().cuGraphLaunch(exec, rt_.stream()), "cuGraphLaunch"));
  return finish(Status::ok());
}

Expected<std::vector<Tensor>> CudaModel::replay(const std::vector<Tensor>& inputs) {
  BindingState& st = *state_;
  const Driver& d = rt_.api();
  if (!st.pinned) {
    size_t bytes = 0;
    for (const Tensor& t : inputs) bytes += staged(t.nbytes());
    for (const GraphOutput& g : st.outputs)
      if (g.dev) bytes += staged(nbytes(g.dtype, g.dims));
    FERRITE_RETURN_IF_ERROR(
        check(d.cuMemAllocHost(&st.pinned, std::max<size_t>(bytes, 256)), "cuMemAllocHost"));
  }
  uint8_t* stage = static_cast<uint8_t*>(st.pinned);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const size_t n = inputs[i].nbytes();
    if (n == 0) continue;
    const void* src = inputs[i].raw();
    if (staged(n)) {
      std::memcpy(stage, src, n);
      src = stage;
      stage += staged(n);
    }
    FERRITE_RETURN_IF_ERROR(check(d.cuMemcpyHtoDAsync(dptr(st.input_dev[i]), src, n, rt_.stream()),
                                  "host-to-device copy"));
  }
  if (st.checks_flag) FERRITE_RETURN_IF_ERROR(rt_.fill(flag_, 0, sizeof(int)));
  FERRITE_RETURN_IF_ERROR(check(d.cuGraphLaunch(st.exec, rt_.stream()), "cuGraphLaunch"));
  std::vector<Tensor> out;
  std::vector<uint8_t*> where;
  for (const GraphOutput& g : st.outputs) {
    if (!g.dev) {
      out.push_back(g.host);
      where.push_back(nullptr);
      continue;
    }
    FERRITE_ASSIGN_OR_RETURN(Tensor t, Tensor::create(g.dtype, g.dims));
    const size_t n = t.nbytes();
    void* dst = t.raw();
    where.push_back(staged(n) ? stage : nullptr);
    if (staged(n)) {
      dst = stage;
      stage += staged(n);
    }
    if (n)
      FERRITE_RETURN_IF_ERROR(
          check(d.cuMemcpyDtoHAsync(dst, dptr(g.dev), n, rt_.stream()), "device-to-host copy"));
    out.push_back(std::move(t));
  }
  FERRITE_RETURN_IF_ERROR(rt_.synchronize());
  for (size_t j = 0; j < out.size(); ++j)
    if (where[j] && out[j].nbytes()) std::memcpy(out[j].raw(), where[j], out[j].nbytes());
  if (st.checks_flag) FERRITE_RETURN_IF_ERROR(check_flag());
  ++runs_;
  return out;
}

}  // namespace ferrite::cuda::detail
