// The cuda device's step-by-step executor: binding shape symbols, kernel and library steps,
// where each buffer lives (host, device, both), fallbacks to the host. See cuda_executor.h.
#include "backends/cuda/cuda_executor.h"

#include "backends/cuda/cuda_model.h"

namespace ferrite::cuda {
namespace detail {

Status CudaModel::init() {
  for (const Step& s : lg_.steps) {
    CUfunction f = nullptr;
    if (s.kind == Step::Kind::kKernel) {
      f = reinterpret_cast<CUfunction>(module_->symbol(s.kernel.name));
      if (!f) return err("cuda: kernel ", s.kernel.name, " is missing from the compiled module");
    }
    fns_.push_back(f);
  }
  const size_t nb = lg_.buffers.size();
  last_use_.assign(nb, -1);
  for (size_t i = 0; i < lg_.steps.size(); ++i) {
    const Step& s = lg_.steps[i];
    for (int b : s.kind == Step::Kind::kKernel ? s.kernel.input_buffers : s.inputs)
      if (b >= 0) last_use_[b] = static_cast<int>(i);
  }
  for (int b : lg_.outputs) last_use_[b] = INT32_MAX;
  dying_.assign(lg_.steps.size(), {});
  for (size_t b = 0; b < nb; ++b)
    if (last_use_[b] >= 0 && last_use_[b] < static_cast<int>(lg_.steps.size()) &&
        lg_.buffers[b].kind != Buffer::Kind::kOutput)
      dying_[last_use_[b]].push_back(static_cast<int>(b));
  int unplanned = 0;
  std::vector<int> buffer_of_request;
  auto reqs = arena_requests(lg_, last_use_, request_of_buffer_, buffer_of_request, unplanned);
  planner_ = std::make_unique<SymbolicMemoryPlanner>(std::move(reqs), lg_.symbols);
  const_dev_.assign(nb, nullptr);
  // Values fixed by the binding of the shape symbols (shape arithmetic): constants, Shape of a
  // buffer whose dims the lowering knows, and deterministic steps over such values. Host steps
  // producing them run once per binding; their results are reused (and kept on the GPU).
  det_.assign(nb, false);
  det_step_.assign(lg_.steps.size(), false);
  for (size_t b = 0; b < nb; ++b) det_[b] = lg_.buffers[b].kind == Buffer::Kind::kConstant;
  for (size_t i = 0; i < lg_.steps.size(); ++i) {
    const Step& s = lg_.steps[i];
    if (s.kind == Step::Kind::kKernel) {
      bool d = true;
      for (int b : s.kernel.input_buffers) d = d && det_[b];
      det_[s.kernel.output_buffer] = d;
      continue;
    }
    bool d = !nondeterministic(*s.node);
    const std::string& op = s.node->op_type;
    if (s.node->domain.empty() && (op == "Shape" || op == "Size") && !s.inputs.empty() &&
        s.inputs[0] >= 0) {
      const Shape& sh = lg_.buffers[s.inputs[0]].shape;
      d = sh.rank_known();
      for (size_t k = 0; d && k < sh.rank(); ++k) d = sh[k].is_known();
    } else {
      for (int b : s.inputs) d = d && (b < 0 || det_[b]);
    }
    for (int b : s.outputs)
      if (b >= 0) det_[b] = d && lg_.buffers[b].kind == Buffer::Kind::kIntermediate;
    det_step_[i] = d;
  }
  FERRITE_ASSIGN_OR_RETURN(flag_, pool_.get_persistent(sizeof(int)));
  return Status::ok();
}

Expected<std::vector<Tensor>> CudaModel::run(const std::vector<Tensor>& inputs) {
  std::lock_guard<std::mutex> device_lock(be_->run_mutex);
  std::lock_guard<std::mutex> lock(mutex_);
  FERRITE_RETURN_IF_ERROR(rt_.make_current());
  FERRITE_RETURN_IF_ERROR(bind(inputs));
  std::vector<std::vector<int64_t>> in_dims;
  for (const Tensor& t : inputs) in_dims.push_back(t.dims());
  BindingState& st = *state_;
  if (st.exec && st.input_dims == in_dims) return replay(inputs);
  if (graphs_ && !profile_ && st.graphable && st.clean_runs > 0 && !st.exec) {
    auto r = capture(inputs, in_dims);
    if (r || !capture_failed_) return r;
    capture_failed_ = false;  // not capturable: run step by step from now on
  }
  prepare_slots(inputs, nullptr);
  FERRITE_RETURN_IF_ERROR(rt_.fill(flag_, 0, sizeof(int)));
  Status s = execute_steps();
  auto out = finish(s);
  if (out && run_stats_.nondet_host == 0) ++st.clean_runs;
  if (run_stats_.nondet_host > 0) st.graphable = false;
  return out;
}

Status CudaModel::bind(const std::vector<Tensor>& inputs) {
  bind_.clear();
  for (size_t i = 0; i < graph_.inputs().size() && i < inputs.size(); ++i) {
    const Shape& s = graph_.inputs()[i]->type.shape;
    if (!s.rank_known()) continue;
    for (size_t d = 0; d < s.rank() && d < inputs[i].rank(); ++d)
      if (s[d].is_known() && s[d].expr().is_symbol()) {
        std::vector<std::string> names;
        s[d].expr().collect_symbols(names);
        bind_[names[0]] = inputs[i].dim(d);
      }
  }
  syms_.clear();
  for (const auto& name : lg_.symbols) {
    auto it = bind_.find(name);
    if (it == bind_.end()) return err("cuda: shape symbol '", name, "' is not bound by any input");
    syms_.push_back(it->second);
  }
  auto& slot = states_[syms_];
  if (!slot) {
    if (states_.size() > 64) {  // bounded, like the memory plans
      FERRITE_RETURN_IF_ERROR(rt_.synchronize());
      auto keep = std::move(slot);
      states_.clear();
      states_[syms_] = std::move(keep);
    }
    auto& fresh = states_[syms_];
    fresh = std::make_unique<BindingState>();
    fresh->rt = &rt_;
    fresh->pool = &pool_;
    fresh->launches.resize(lg_.steps.size());
  }
  state_ = states_[syms_].get();
  plan_ = nullptr;
  mem_stats_ = {};
  auto plan = planner_->plan_for(syms_);
  if (!plan) return Status::ok();  // everything from the pool
  int64_t need = std::max<int64_t>((*plan)->arena_bytes, 256);
  if (need > arena_bytes_) {
    FERRITE_RETURN_IF_ERROR(rt_.synchronize());
    // Captured graphs hold addresses in the old arena.
    for (auto& [k, s] : states_) s->drop_graph();
    if (arena_) FERRITE_RETURN_IF_ERROR(pool_.put(arena_));
    arena_ = nullptr;
    arena_bytes_ = 0;
    FERRITE_ASSIGN_OR_RETURN(arena_, pool_.get_persistent(static_cast<size_t>(need)));
    arena_bytes_ = need;
  }
  plan_ = *plan;
  mem_stats_.planned_peak_bytes = plan_->arena_bytes;
  mem_stats_.intermediate_bytes = plan_->total_bytes;
  mem_stats_.live_peak_bytes = plan_->live_peak_bytes;
  mem_stats_.planned_buffers = plan_->buffers;
  mem_stats_.in_place = plan_->in_place;
  mem_stats_.arena_capacity_bytes = arena_bytes_;
  return Status::ok();
}

void CudaModel::prepare_slots(const std::vector<Tensor>& inputs,
                              const std::vector<void*>* input_dev) {
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

Status CudaModel::execute_steps() {
  Status st = Status::ok();
  for (size_t si = 0; si < lg_.steps.size() && st; ++si) {
    const Step& s = lg_.steps[si];
    // The first run uploads the constants: profiles start with the second.
    const bool prof = profile_ && runs_ > 0;
    if (prof) profile_table_.start(rt_, si, lg_.steps.size());
    path_ = "";
    st = s.kind == Step::Kind::kKernel ? run_kernel(si) : run_library(si);
    if (prof && st) profile_table_.stop(rt_, si, step_label(s), step_kind(s));
    if (st) release(si);
  }
  if (profile_ && runs_ > 0) profile_table_.end_run(rt_);
  ++runs_;
  return st;
}

Expected<std::vector<Tensor>> CudaModel::finish(Status st) {
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
  if (st && run_stats_.gathers) st = check_flag();
  for (Slot& s : slots_)
    if (s.pooled) pool_.put(s.dev);
  for (void* p : scratch_) pool_.put(p);
  scratch_.clear();
  slots_.clear();
  if (Status t = pool_.trim(size_t{1} << 30); !t && st) st = t;
  if (log_enabled("memory") && runs_ == 1)
    std::fprintf(stderr, "%s\n", pool_.describe("after the first run").c_str());
  if (!st) {
    rt_.synchronize();
    return st;
  }
  if (log_enabled("fallback") && !logged_) {
    logged_ = true;
    std::fprintf(stderr,
                 "[fallback] cuda: %d kernel launches, %d native library steps, %d host steps "
                 "on host-resident values (%d reused from an earlier run of these shapes), %d "
                 "host fallbacks copying %lld bytes back%s\n",
                 run_stats_.kernels, run_stats_.native, run_stats_.host_resident, run_stats_.cached,
                 run_stats_.fallbacks, static_cast<long long>(run_stats_.d2h_bytes),
                 run_stats_.fallback_ops.empty() ? "" : (": " + run_stats_.fallback_ops).c_str());
  }
  return out;
}

Status CudaModel::check_flag() {
  int v = 0;
  FERRITE_RETURN_IF_ERROR(rt_.copy_to_host(&v, flag_, sizeof v));
  if (v <= 0 || v > static_cast<int>(lg_.steps.size())) return Status::ok();
  const Node* n = lg_.steps[v - 1].node;
  return err(n ? n->describe() : std::string("Gather"), ": an index is out of range");
}

Expected<void*> CudaModel::place(int b, size_t bytes) {
  Slot& s = slots_[b];
  if (s.pooled) {
    pool_.put(s.dev);
    s.pooled = false;
  }
  int r = request_of_buffer_[b];
  if (plan_ && r >= 0 && static_cast<int64_t>(bytes) <= plan_->bytes[r]) {
    s.dev = static_cast<uint8_t*>(arena_) + plan_->offsets[r];
    return s.dev;
  }
  FERRITE_ASSIGN_OR_RETURN(s.dev, pool_.get(bytes));
  s.pooled = true;
  return s.dev;
}

Expected<void*> CudaModel::device_ptr(int b) {
  Slot& s = slots_[b];
  if (s.dev_valid) return s.dev;
  if (!s.host_valid)
    return err("cuda: buffer ", lg_.buffers[b].name, " is read before it is written");
  if (capturing_) return err("cuda: a host value would be uploaded during graph capture");
  size_t bytes = s.host.nbytes();
  if (lg_.buffers[b].kind == Buffer::Kind::kConstant) {
    FERRITE_ASSIGN_OR_RETURN(const_dev_[b], pool_.get_persistent(bytes));
    s.dev = const_dev_[b];
  } else if (det_[b]) {
    FERRITE_ASSIGN_OR_RETURN(void* p, pool_.get_persistent(bytes));
    state_->det_dev[b] = p;
    s.dev = p;
  } else {
    FERRITE_RETURN_IF_ERROR(place(b, bytes).status());
  }
  FERRITE_RETURN_IF_ERROR(rt_.copy_to_device(s.dev, s.host.raw(), bytes));
  s.dev_valid = true;
  return s.dev;
}

Expected<Tensor> CudaModel::host_tensor(int b) {
  Slot& s = slots_[b];
  if (s.host_valid) return s.host;
  if (!s.dev_valid)
    return err("cuda: buffer ", lg_.buffers[b].name, " is read before it is written");
  if (capturing_) return err("cuda: a device value would be read back during graph capture");
  FERRITE_ASSIGN_OR_RETURN(Tensor t, Tensor::create(s.dtype, s.dims));
  FERRITE_RETURN_IF_ERROR(rt_.copy_to_host(t.raw(), s.dev, t.nbytes()));
  run_stats_.d2h_bytes += static_cast<int64_t>(t.nbytes());
  s.host = std::move(t);
  s.host_valid = true;
  return s.host;
}

Status CudaModel::run_kernel(size_t si) {
  const Kernel& k = lg_.steps[si].kernel;
  // Dims and launch shape depend only on the symbol values: computed once per binding.
  auto& cache = state_->launches[si];
  if (!cache) {
    FERRITE_ASSIGN_OR_RETURN(auto dims, eval_dims(k.shape));
    FERRITE_ASSIGN_OR_RETURN(auto od, eval_dims(lg_.buffers[k.output_buffer].shape.dims()));
    KernelLaunch kl;
    kl.out_dims = std::move(od);
    int64_t rows = 1, row_len = 1;
    for (size_t d = 0; d < dims.size(); ++d) (d < k.outer_rank() ? rows : row_len) *= dims[d];
    kl.empty = rows == 0 || row_len == 0;
    if (!kl.empty) kl.lc = be_->parts.heuristics->choose(k, rows, row_len, be_->parts.properties);
    cache = std::move(kl);
  }
  const KernelLaunch& kl = *cache;
  const std::vector<int64_t>& out_dims = kl.out_dims;
  std::vector<void*> ptrs;
  for (int b : k.input_buffers) {
    FERRITE_ASSIGN_OR_RETURN(void* p, device_ptr(b));
    ptrs.push_back(p);
  }
  FERRITE_ASSIGN_OR_RETURN(void* out, place(k.output_buffer, nbytes(k.out_dtype, out_dims)));
  ptrs.push_back(out);
  Slot& o = slots_[k.output_buffer];
  o.dtype = k.out_dtype;
  o.dims = out_dims;
  o.dev_valid = true;
  o.host_valid = false;
  o.host = Tensor();
  if (kl.empty) return Status::ok();
  const LaunchConfig& lc = kl.lc;
  std::vector<void*> args;
  for (void*& p : ptrs) args.push_back(&p);
  for (int64_t& v : syms_) args.push_back(&v);
  ++run_stats_.kernels;
  return check(rt_.api().cuLaunchKernel(fns_[si], static_cast<unsigned>(lc.grid), 1, 1,
                                        static_cast<unsigned>(lc.block), 1, 1, 0, rt_.stream(),
                                        args.data(), nullptr),
               k.name.c_str());
}

Status CudaModel::run_library(size_t si) {
  const Step& s = lg_.steps[si];
  const Node& node = *s.node;
  if (det_step_[si]) {
    // Fixed by the binding: computed on the host once, reused (with its device copies).
    auto it = state_->det_outputs.find(si);
    if (it != state_->det_outputs.end()) {
      for (size_t i = 0; i < s.outputs.size(); ++i) {
        int b = s.outputs[i];
        if (b < 0) continue;
        set_host(b, it->second[i]);
        auto d = state_->det_dev.find(b);
        if (d != state_->det_dev.end()) {
          slots_[b].dev = d->second;
          slots_[b].dev_valid = true;
        }
      }
      path_ = "host, reused";
      ++run_stats_.cached;
      ++run_stats_.host_resident;
      return Status::ok();
    }
  }
  // Shape and Size need only the dims, wherever the data is.
  if (node.domain.empty() && (node.op_type == "Shape" || node.op_type == "Size") &&
      !s.inputs.empty() && s.inputs[0] >= 0 && !s.outputs.empty() && s.outputs[0] >= 0) {
    FERRITE_ASSIGN_OR_RETURN(auto dims, input_dims(s, 0));
    // A stand-in with the right dims over a dummy byte: these kernels never read the data.
    Tensor stand_in;
    FERRITE_ASSIGN_OR_RETURN(stand_in,
                             Tensor::over_storage(slots_[s.inputs[0]].dtype, dims,
                                                  std::shared_ptr<uint8_t[]>(new uint8_t[1])));
    return run_on_host(si, {stand_in}, true);
  }
  bool all_host = true;
  for (int b : s.inputs)
    if (b >= 0 && !slots_[b].host_valid) all_host = false;
  NativeOp native = det_step_[si] ? nullptr : find_native_op(node);
  bool heavy = is_compute_heavy(node);
  if (native && node.op_type == "Gather" && !s.inputs.empty() && s.inputs[0] >= 0 &&
      lg_.buffers[s.inputs[0]].kind == Buffer::Kind::kConstant &&
      slots_[s.inputs[0]].host.nbytes() >= kLargeConstantBytes)
    heavy = true;
  if (native && (!all_host || heavy)) {
    NativeIO io;
    for (size_t i = 0; i < s.inputs.size(); ++i) {
      if (s.inputs[i] < 0) {
        io.in.push_back(std::nullopt);
        continue;
      }
      FERRITE_ASSIGN_OR_RETURN(void* p, device_ptr(s.inputs[i]));
      FERRITE_ASSIGN_OR_RETURN(auto dims, input_dims(s, i));
      const Slot& in = slots_[s.inputs[i]];
      io.in.push_back(DevView{p, in.dtype, std::move(dims), in.host_valid ? &in.host : nullptr});
    }
    io.output = [&](size_t i, DType dtype, const std::vector<int64_t>& dims) -> Expected<void*> {
      if (i >= s.outputs.size() || s.outputs[i] < 0) return io.scratch(nbytes(dtype, dims));
      int b = s.outputs[i];
      FERRITE_ASSIGN_OR_RETURN(void* p, place(b, nbytes(dtype, dims)));
      Slot& o = slots_[b];
      o.dtype = dtype;
      o.dims = dims;
      o.dev_valid = true;
      o.host_valid = false;
      o.host = Tensor();
      return p;
    };
    io.scratch = [&](size_t bytes) -> Expected<void*> {
      FERRITE_ASSIGN_OR_RETURN(void* p, pool_.get(bytes));
      scratch_.push_back(p);
      return p;
    };
    io.error_flag = static_cast<int*>(flag_);
    io.tf32 = tf32_;
    io.error_tag = static_cast<int>(si) + 1;
    FERRITE_ASSIGN_OR_RETURN(bool done, native(node, io, *be_));
    if (done) {
      path_ = "gpu";
      ++run_stats_.native;
      if (node.op_type == "Gather") run_stats_.gathers = true;
      return Status::ok();
    }
  }
  if (capturing_ && !det_step_[si]) return err("cuda: a host step would run during graph capture");
  std::vector<Tensor> ins;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    if (s.inputs[i] < 0) {
      ins.emplace_back();
      continue;
    }
    FERRITE_ASSIGN_OR_RETURN(Tensor t, host_tensor(s.inputs[i]));
    FERRITE_ASSIGN_OR_RETURN(auto dims, input_dims(s, i));
    if (dims == t.dims()) {
      ins.push_back(std::move(t));
      continue;
    }
    auto v = t.view(dims);
    if (!v) return v.status().with_context(str_cat(s.node->describe(), ": input ", i));
    ins.push_back(std::move(v).value());
  }
  return run_on_host(si, std::move(ins), all_host);
}

Status CudaModel::run_on_host(size_t si, std::vector<Tensor> ins, bool resident) {
  const Step& s = lg_.steps[si];
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < ins.size(); ++i) ptrs.push_back(s.inputs[i] < 0 ? nullptr : &ins[i]);
  std::vector<Tensor> outs(s.node->outputs.size());
  KernelContext ctx(*s.node, std::move(ptrs), outs);
  FERRITE_RETURN_IF_ERROR(s.node->schema->kernel(ctx));
  for (size_t i = 0; i < s.outputs.size(); ++i)
    if (s.outputs[i] >= 0) {
      Slot& o = slots_[s.outputs[i]];
      if (o.pooled) pool_.put(o.dev);
      o = Slot{};
      set_host(s.outputs[i], outs[i]);
    }
  if (det_step_[si])
    state_->det_outputs[si] = outs;
  else
    ++run_stats_.nondet_host;
  path_ = resident ? "host" : "host fallback";
  if (resident) {
    ++run_stats_.host_resident;
  } else {
    ++run_stats_.fallbacks;
    if (run_stats_.fallback_ops.find(s.node->op_type) == std::string::npos)
      run_stats_.fallback_ops += (run_stats_.fallback_ops.empty() ? "" : " ") + s.node->op_type;
  }
  return Status::ok();
}

void CudaModel::release(size_t step) {
  for (int b : dying_[step]) {
    Slot& s = slots_[b];
    if (s.pooled) pool_.put(s.dev);
    s = Slot{};
  }
}

}  // namespace detail

Expected<std::unique_ptr<PreparedModel>> make_cuda_model(const Graph& graph, LoweredGraph lg,
                                                         std::unique_ptr<LoadedModule> module,
                                                         std::shared_ptr<CudaBackend> backend,
                                                         bool tf32) {
  auto m = std::make_unique<detail::CudaModel>(graph, std::move(lg), std::move(module),
                                               std::move(backend));
  m->tf32_ = tf32;
  FERRITE_RETURN_IF_ERROR(m->init());
  return std::unique_ptr<PreparedModel>(std::move(m));
}

}  // namespace ferrite::cuda
