// The shared executor's step-by-step run (model.h, executor.h).
#include "execute/model.h"

#include <chrono>
#include <cstdio>

namespace ferrite::execute {

std::unique_ptr<MemoryPool> make_direct_pool(DeviceRuntime& rt, int64_t alignment);

namespace {

bool env_off(const char* name) {
  const char* v = std::getenv(name);
  return v && (std::string(v) == "0" || std::string(v) == "off");
}

}  // namespace

Model::Model(const Graph& g, LoweredGraph lg, std::unique_ptr<LoadedModule> module,
             std::shared_ptr<const BackendParts> parts, ExecutorConfig cfg, const RunOptions& opts)
    : graph_(g),
      parts_(std::move(parts)),
      cfg_(std::move(cfg)),
      lg_(std::move(lg)),
      module_(std::move(module)),
      rt_(*parts_->runtime),
      name_(parts_->properties.name),
      host_(rt_.host_memory()),
      launches_(parts_->properties, *parts_->heuristics, opts.autotune && cfg_.tunable),
      capture_on_(rt_.capture() && !env_off("FERRITE_CUDA_GRAPHS") && !env_off("FERRITE_CAPTURE")),
      tf32_(opts.precision == Precision::kTF32) {
  mirrors_ = opts.constant_mirrors;
  into_inputs_ = opts.outputs_into_inputs;
  into_inputs_.resize(lg_.outputs.size(), -1);
  output_of_buffer_.assign(lg_.buffers.size(), -1);
  for (size_t j = lg_.outputs.size(); j-- > 0;)
    output_of_buffer_[lg_.outputs[j]] = static_cast<int>(j);
  input_of_buffer_.assign(lg_.buffers.size(), -1);
  for (size_t i = 0; i < lg_.inputs.size(); ++i)
    input_of_buffer_[lg_.inputs[i]] = static_cast<int>(i);
  const bool profile = log_enabled("profile");
  if (profile || opts.trace)
    recorder_ = std::make_unique<StepRecorder>(rt_, name_, profile, opts.trace);
}

Model::~Model() {
  DeviceTurn turn(cfg_.device_gate, &cfg_.enter, &cfg_.leave);
  if (!turn.enter()) return;  // the device is gone: nothing can be freed
  (void)rt_.synchronize();
  if (flag_deferred_ && flag_seen_) {
    Status late = flag_status(__atomic_load_n(flag_seen_, __ATOMIC_ACQUIRE),
                              " (in a run on device tensors; the session closed before it was "
                              "reported)");
    if (!late) std::fprintf(stderr, "ferrite: %s\n", late.message().c_str());
  }
  if (flag_seen_) rt_.capture()->free_staging(flag_seen_);
  recorder_.reset();
  for (auto& [k, s] : states_) drop_binding(*s);
  states_.clear();
  if (pool_) {
    for (size_t b = 0; b < const_dev_.size(); ++b)
      if (!const_mirrored_[b]) put(const_dev_[b]);
    put(flag_);
    memory_.reset();  // gives the arena back to the pool
    if (log_enabled("memory") && !host_)
      std::fprintf(stderr, "%s\n", pool_->describe("at exit").c_str());
  }
}

Status Model::init(const std::string& source, const RunOptions& opts) {
  FERRITE_ASSIGN_OR_RETURN(
      plan_, plan_steps(lg_, module_.get(), parts_->library.get(), cfg_.library_state, name_));
  std::optional<DeviceArenaSource> device;
  if (!host_) {
    pool_ = rt_.make_pool();
    pool_stats_ = pool_ != nullptr;
    if (!pool_) pool_ = make_direct_pool(rt_, parts_->properties.alignment);
    DeviceArenaSource src;
    src.allocate = [this](size_t n) { return pool_get_persistent(n); };
    src.release = [this](void* p) -> Status {
      FERRITE_RETURN_IF_ERROR(rt_.synchronize());
      // Recorded runs hold addresses in the old arena.
      for (auto& [k, s] : states_) drop_capture(*s);
      return pool_->put(p);
    };
    const int64_t a = parts_->properties.alignment;
    src.alignment = a > 0 && (a & (a - 1)) == 0 ? std::max<int64_t>(a, kArenaAlignment) : 256;
    device = std::move(src);
  }
  memory_ = std::make_unique<LoweredMemory>(lg_, plan_.last_use, std::move(device));
  const_dev_.assign(lg_.buffers.size(), nullptr);
  const_mirrored_.assign(lg_.buffers.size(), 0);
  if (pool_ && parts_->library) {
    FERRITE_ASSIGN_OR_RETURN(flag_, pool_get_persistent(sizeof(int)));
    // Device runs leave the flag set until the host has seen it (model_device_run.cpp).
    FERRITE_RETURN_IF_ERROR(rt_.fill(flag_, 0, sizeof(int)));
    if (RunCapture* cap = rt_.capture()) {
      FERRITE_ASSIGN_OR_RETURN(void* seen, cap->allocate_staging(sizeof(int)));
      flag_seen_ = static_cast<int*>(seen);
      *flag_seen_ = 0;
    }
  }
  if (opts.dump_dir) {
    FERRITE_ASSIGN_OR_RETURN(dump_,
                             CompileDump::write(*opts.dump_dir, graph_, lg_, source, *memory_));
  }
  return Status::ok();
}

Expected<std::vector<Tensor>> Model::run(const std::vector<Tensor>& inputs) {
  DeviceTurn turn(cfg_.device_gate, &cfg_.enter, &cfg_.leave);
  std::lock_guard<std::mutex> lock(mutex_);
  FERRITE_RETURN_IF_ERROR(turn.enter());
  CurrentTurn current(turn_, turn);
  FERRITE_RETURN_IF_ERROR(report_deferred_flag(/*wait=*/true));
  prepare_into_inputs(inputs);
  auto out = run_locked(inputs);
  store_into_.clear();
  if (out) FERRITE_RETURN_IF_ERROR(write_into_inputs(inputs, *out));
  return out;
}

Expected<std::vector<Tensor>> Model::run_locked(const std::vector<Tensor>& inputs) {
  FERRITE_RETURN_IF_ERROR(bind(inputs));
  std::vector<std::vector<int64_t>> in_dims;
  for (const Tensor& t : inputs) in_dims.push_back(t.dims());
  BindingState& st = *state_;
  if (st.exec && st.input_dims == in_dims) return replay(inputs);
  if (capture_on_ && !recorder_ && st.capturable && st.clean_runs > 0 && !st.exec) {
    Status r = record(inputs, in_dims, nullptr);
    if (r) {
      FERRITE_RETURN_IF_ERROR(rt_.capture()->replay(st.exec));
      return finish(Status::ok());
    }
    if (!capture_failed_) return r;
    capture_failed_ = false;  // not capturable: run step by step from now on
  }
  prepare_slots(inputs, nullptr);
  if (flag_) FERRITE_RETURN_IF_ERROR(rt_.fill(flag_, 0, sizeof(int)));
  Status s = execute_steps();
  auto out = finish(s);
  if (out && run_stats_.nondet_host == 0) ++st.clean_runs;
  if (run_stats_.nondet_host > 0) st.capturable = false;
  return out;
}

Status Model::bind(const std::vector<Tensor>& inputs, bool reserve_arena) {
  FERRITE_ASSIGN_OR_RETURN(bind_, bind_symbols(graph_, lg_, inputs, name_));
  auto& slot = states_[bind_.values];
  if (!slot) {
    if (states_.size() > SymbolicMemoryPlanner::kMaxCachedPlans) {  // bounded, like the plans
      FERRITE_RETURN_IF_ERROR(rt_.synchronize());
      auto keep = std::move(slot);
      for (auto& [k, s] : states_)
        if (s) drop_binding(*s);
      states_.clear();
      states_[bind_.values] = std::move(keep);
    }
    auto& fresh = states_[bind_.values];
    fresh = std::make_unique<BindingState>();
    fresh->launches.resize(lg_.steps.size());
  }
  state_ = states_[bind_.values].get();
  memory_->begin_run(bind_.values, reserve_arena);
  if (memory_->device_block() != arena_block_) arena_block_ = memory_->device_block();
  if (dump_) dump_->on_run(*memory_, bind_.values);
  return Status::ok();
}

void Model::prepare_slots(const std::vector<Tensor>& inputs, const std::vector<void*>* input_dev) {
  run_stats_ = {};
  slots_.assign(lg_.buffers.size(), Slot{});
  for (size_t i = 0; i < lg_.inputs.size(); ++i) {
    set_host(lg_.inputs[i], inputs[i]);
    if (input_dev) {
      slots_[lg_.inputs[i]].dev = (*input_dev)[i];
      slots_[lg_.inputs[i]].dev_valid = true;
    }
  }
  for (size_t b = 0; b < lg_.buffers.size(); ++b)
    if (lg_.buffers[b].kind == Buffer::Kind::kConstant) {
      set_host(static_cast<int>(b), *lg_.buffers[b].value->constant);
      if (const_dev_[b]) {
        slots_[b].dev = const_dev_[b];
        slots_[b].dev_valid = true;
      }
    }
}

std::string Model::step_kind(size_t si) const {
  const Step& s = lg_.steps[si];
  if (s.kind == Step::Kind::kKernel)
    return s.kernel.is_row() ? "generated row kernel" : "generated pointwise kernel";
  return s.node->op_type + " (" + path_ + ")";
}

Status Model::execute_steps() {
  launches_.begin_run(lg_.kernels);
  struct EndRun {
    LaunchChooser& l;
    ~EndRun() { l.end_run(); }
  } end_run{launches_};
  // The first run uploads the constants: profiles start with the second on devices that do.
  const bool rec = recorder_ && (host_ || runs_ > 0);
  if (rec) recorder_->begin_run(lg_.steps.size());
  Status st = Status::ok();
  // DeviceRun::input_done: inputs no step reads are done before the first.
  auto* done = device_run_ && device_run_->input_done ? &device_run_->input_done : nullptr;
  if (done)
    for (size_t i = 0; i < lg_.inputs.size(); ++i)
      if (plan_.last_use[lg_.inputs[i]] < 0) (*done)(i);
  for (size_t si = 0; si < lg_.steps.size() && st; ++si) {
    if (rec) recorder_->start(si);
    path_.clear();
    st = lg_.steps[si].kind == Step::Kind::kKernel ? run_kernel(si) : run_library(si);
    if (rec && st) recorder_->stop(si, plan_.labels[si], step_kind(si), &plan_.nodes[si]);
    if (st) release(si);
    if (st && done)
      for (int b : plan_.dying[si])
        if (input_of_buffer_[b] >= 0) (*done)(static_cast<size_t>(input_of_buffer_[b]));
  }
  if (rec) recorder_->end_run();
  ++runs_;
  return st;
}

Status Model::run_kernel(size_t si) {
  const Kernel& k = lg_.steps[si].kernel;
  // Dims and launch shape depend only on the symbol values: computed once per binding.
  auto& cache = state_->launches[si];
  if (!cache) {
    FERRITE_ASSIGN_OR_RETURN(auto dims, eval_dims(k.shape, bind_.names, name_));
    KernelLaunch kl;
    FERRITE_ASSIGN_OR_RETURN(
        kl.out_dims, eval_dims(lg_.buffers[k.output_buffer].shape.dims(), bind_.names, name_));
    kl.rows = kl.row_len = 1;
    for (size_t d = 0; d < dims.size(); ++d) (d < k.outer_rank() ? kl.rows : kl.row_len) *= dims[d];
    kl.empty = kl.rows == 0 || byte_count(k.out_dtype, kl.out_dims) == 0;
    cache = std::move(kl);
  }
  std::vector<void*> ptrs;
  ptrs.reserve(k.input_buffers.size() + 1 + k.extra_outputs.size());
  for (int b : k.input_buffers) {
    FERRITE_ASSIGN_OR_RETURN(void* p, device_ptr(b));
    ptrs.push_back(p);
  }
  FERRITE_ASSIGN_OR_RETURN(void* out, place(k.output_buffer, k.out_dtype, cache->out_dims));
  ptrs.push_back(out);
  // Horizontally fused outputs: same iteration space, their own buffers.
  for (const auto& x : k.extra_outputs) {
    FERRITE_ASSIGN_OR_RETURN(auto xdims,
                             eval_dims(lg_.buffers[x.buffer].shape.dims(), bind_.names, name_));
    FERRITE_ASSIGN_OR_RETURN(void* p, place(x.buffer, x.dtype, xdims));
    ptrs.push_back(p);
  }
  if (cache->empty) return Status::ok();
  return launch_kernel(si, *cache, ptrs);
}

Status Model::launch_kernel(size_t si, KernelLaunch& kl, std::vector<void*>& ptrs) {
  const Kernel& k = lg_.steps[si].kernel;
  void* fn = plan_.kernel_fns[si];
  if (!kl.lc) {
    // A kernel running in place over its input cannot be repeated for timing.
    const bool in_place =
        k.in_place_slot >= 0 && ptrs[k.in_place_slot] == ptrs[k.input_buffers.size()];
    auto timed = [&](const LaunchConfig& c) -> Expected<double> {
      auto t0 = std::chrono::steady_clock::now();
      FERRITE_RETURN_IF_ERROR(cfg_.launch(fn, c, ptrs, bind_.values, kl.rows));
      FERRITE_RETURN_IF_ERROR(rt_.synchronize());
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    FERRITE_ASSIGN_OR_RETURN(LaunchConfig lc,
                             launches_.choose(si, k, kl.rows, kl.row_len, !in_place, timed));
    // The heuristics promise legal launches; a plugin's own might not, and the generated kernels
    // cover all rows for any grid, so a grid is adjusted, never trusted.
    const LaunchLimits& lim = parts_->properties.launch;
    if (!lim.grid_allowed(lc.grid)) lc.grid = lim.clamp_grid(lc.grid);
    if (!lim.block_allowed(lc.block))
      return err(name_, ": no legal block size for kernel ", k.name);
    kl.lc = lc;
  }
  if (log_enabled("launch"))
    std::fprintf(stderr, "[launch] %s %s rows=%lld grid=%lld block=%lld\n", name_.c_str(),
                 k.name.c_str(), static_cast<long long>(kl.rows),
                 static_cast<long long>(kl.lc->grid), static_cast<long long>(kl.lc->block));
  ++run_stats_.kernels;
  Status s = cfg_.launch(fn, *kl.lc, ptrs, bind_.values, kl.rows);
  if (!s) return err("kernel ", k.name, " (", plan_.labels[si], "): ", s.message());
  return Status::ok();
}

Expected<std::vector<Tensor>> Model::finish(Status st) {
  std::vector<Tensor> out;
  if (st)
    for (int b : lg_.outputs) {
      auto t = host_tensor(b);
      if (!t) {
        st = t.status();
        break;
      }
      out.push_back(*t);
    }
  if (st && run_stats_.flag_used) st = check_flag();
  st = end_run(st);
  if (!st) return st;
  if (!host_) FERRITE_RETURN_IF_ERROR(rt_.synchronize());
  if (log_enabled("fallback") && !logged_) log_run();
  return out;
}

// Gives back what the run held (pooled buffers, scratch); on an error, waits for the device.
Status Model::end_run(Status st) {
  for (Slot& s : slots_) {
    if (s.pooled) put(s.dev);
    if (s.lent) give_back(s.dev);
  }
  for (void* p : scratch_) put(p);
  scratch_.clear();
  scratch_idle_.clear();
  step_scratch_.clear();
  slots_.clear();
  if (pool_) {
    if (Status t = pool_->trim(size_t{1} << 30); !t && st) st = t;
    if (log_enabled("memory") && runs_ == 1)
      std::fprintf(stderr, "%s\n", pool_->describe("after the first run").c_str());
  }
  if (!st) (void)rt_.synchronize();
  return st;
}

// The last figure separates shape arithmetic (host steps whose values the shape symbols alone
// fix: computed once per binding) from host steps over the run's data, which a device that runs
// the whole model keeps at 0 (tests/models/run_model.sh checks it on gxu).
void Model::log_run() const {
  const_cast<Model*>(this)->logged_ = true;
  std::fprintf(
      stderr,
      "[fallback] %s: %d kernel launches, %d device library steps, %d host steps on "
      "host-resident values (%d reused from an earlier run of these shapes), %d host "
      "fallbacks copying %lld bytes back; %d host steps on data (not shape "
      "arithmetic)%s%s\n",
      name_.c_str(), run_stats_.kernels, run_stats_.library, run_stats_.host_resident,
      run_stats_.cached, run_stats_.fallbacks, static_cast<long long>(run_stats_.d2h_bytes),
      run_stats_.nondet_host,
      run_stats_.data_ops.empty() ? "" : (": " + run_stats_.data_ops).c_str(),
      run_stats_.fallback_ops.empty() ? "" : ("; fallbacks: " + run_stats_.fallback_ops).c_str());
}

Status Model::check_flag() {
  int v = 0;
  FERRITE_RETURN_IF_ERROR(rt_.copy_to_host(&v, flag_, sizeof v));
  // Reported now: cleared, since runs on device tensors leave the flag as they find it.
  if (v != 0) FERRITE_RETURN_IF_ERROR(rt_.fill(flag_, 0, sizeof(int)));
  return flag_status(v, "");
}

// The error a flag value `v` stands for (the step that set it): ok for 0.
Status Model::flag_status(int v, const char* when) const {
  if (v <= 0 || v > static_cast<int>(lg_.steps.size())) return Status::ok();
  const Node* n = lg_.steps[v - 1].node;
  const LibraryOp* op = plan_.library[static_cast<size_t>(v - 1)];
  return err(n ? n->describe() : std::string("Gather"), ": ",
             op ? op->flag_error : "an index is out of range", when);
}

ModelStats Model::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  ModelStats st;
  st.memory = memory_->stats();
  st.memory->outputs_in_place = outputs_in_place_;
  st.memory->outputs_copied_into_inputs = outputs_copied_;
  st.memory->output_bytes_copied_into_inputs = output_bytes_copied_;
  st.memory->outputs_in_caller_memory = outputs_in_caller_;
  st.memory->output_bytes_copied_to_caller = output_bytes_to_caller_;
  st.tuning = launches_.stats();
  if (pool_stats_) st.device_memory = pool_->stats();
  return st;
}

}  // namespace ferrite::execute
