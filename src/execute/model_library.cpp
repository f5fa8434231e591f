// Library steps of the shared executor: the device's library op (backend_api/library.h) where it
// has one for the node, else the op table's kernel on the host.
#include <exception>
#include <new>

#include "execute/model.h"

namespace ferrite::execute {

namespace {

bool is_shape_query(const Node& n) {
  return n.domain.empty() && (n.op_type == "Shape" || n.op_type == "Size");
}

// Input i of step s seen with the dims the lowering recorded for it (a view of the same bytes); a
// view the bytes cannot hold is an error of the node, never a read past the buffer.
Expected<Tensor> view_as(const Step& s, size_t i, Tensor t, std::vector<int64_t> dims) {
  if (dims == t.dims()) return t;
  auto v = t.view(std::move(dims));
  if (!v) return v.status().with_context(str_cat(s.node->describe(), ": input ", i));
  return std::move(v).value();
}

}  // namespace

// Library kernels allocate (std::vector, oneDNN scratch) and call libraries that report failures
// by throwing (the cpu thread pool carries a worker's exception back here): errors of the node,
// never a terminated process.
Status Model::run_library(size_t si) {
  try {
    return run_library_step(si);
  } catch (const std::bad_alloc&) {
    return err(lg_.steps[si].node->describe(), ": out of memory");
  } catch (const std::exception& e) {
    return err(lg_.steps[si].node->describe(), ": library kernel failed: ", e.what());
  }
}

Status Model::run_library_step(size_t si) {
  if (host_) return run_host_library(si);
  const Step& s = lg_.steps[si];
  const Node& node = *s.node;
  if (plan_.fixed_step[si]) {
    // Fixed by the binding: computed on the host once, reused (with its device copies).
    auto it = state_->fixed_outputs.find(si);
    if (it != state_->fixed_outputs.end()) {
      for (size_t i = 0; i < s.outputs.size(); ++i) {
        int b = s.outputs[i];
        if (b < 0) continue;
        set_host(b, it->second[i]);
        auto d = state_->fixed_dev.find(b);
        if (d != state_->fixed_dev.end()) {
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
  if (is_shape_query(node) && !s.inputs.empty() && s.inputs[0] >= 0 && !s.outputs.empty() &&
      s.outputs[0] >= 0) {
    FERRITE_ASSIGN_OR_RETURN(auto dims, input_dims(s, 0));
    // A stand-in with the right dims over a dummy byte: these kernels never read the data.
    FERRITE_ASSIGN_OR_RETURN(Tensor stand_in,
                             Tensor::over_storage(slots_[s.inputs[0]].dtype, dims,
                                                  std::shared_ptr<uint8_t[]>(new uint8_t[1])));
    return run_on_host(si, {stand_in}, true);
  }
  bool all_host = true;
  for (int b : s.inputs)
    if (b >= 0 && !slots_[b].host_valid) all_host = false;
  const LibraryOp* op = plan_.fixed_step[si] ? nullptr : plan_.library[si];
  if (op && op->run_device) {
    bool prefer = !all_host;
    if (!prefer && op->prefer_device) {
      std::vector<int64_t> constant_bytes;
      for (int b : s.inputs)
        constant_bytes.push_back(b >= 0 && lg_.buffers[b].kind == Buffer::Kind::kConstant
                                     ? static_cast<int64_t>(slots_[b].host.nbytes())
                                     : -1);
      prefer = op->prefer_device(node, constant_bytes);
    }
    if (prefer) {
      FERRITE_ASSIGN_OR_RETURN(bool done, run_device_library(si, *op));
      if (done) return Status::ok();
    }
  }
  if (capturing_ && !plan_.fixed_step[si])
    return err(name_, ": a host step would run during capture");
  std::vector<Tensor> ins;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    if (s.inputs[i] < 0) {
      ins.emplace_back();
      continue;
    }
    FERRITE_ASSIGN_OR_RETURN(Tensor t, host_tensor(s.inputs[i]));
    FERRITE_ASSIGN_OR_RETURN(auto dims, input_dims(s, i));
    FERRITE_ASSIGN_OR_RETURN(Tensor v, view_as(s, i, std::move(t), std::move(dims)));
    ins.push_back(std::move(v));
  }
  return run_on_host(si, std::move(ins), all_host);
}

// Host-memory runtimes: the library op or the op table's kernel over tensors, outputs in their
// planned arena slots.
Status Model::run_host_library(size_t si) {
  const Step& s = lg_.steps[si];
  std::vector<Tensor> views(s.inputs.size());
  std::vector<const Tensor*> ins;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    if (s.inputs[i] < 0) {
      ins.push_back(nullptr);
      continue;
    }
    const Tensor& t = slots_[s.inputs[i]].host;
    if (s.input_dims[i]) {
      FERRITE_ASSIGN_OR_RETURN(auto dims, eval_dims(*s.input_dims[i], bind_.names, name_));
      FERRITE_ASSIGN_OR_RETURN(views[i], view_as(s, i, t, std::move(dims)));
    } else {
      views[i] = t;
    }
    ins.push_back(&views[i]);
  }
  std::vector<Tensor> outs(s.node->outputs.size());
  KernelContext ctx(*s.node, std::move(ins), outs);
  ctx.set_output_allocator(memory_->output_allocator(s.outputs));
  const LibraryOp* op = plan_.library[si];
  if (op && op->run_host) {
    path_ = name_ + " library";
    ++run_stats_.library;
    FERRITE_RETURN_IF_ERROR(op->run_host(ctx, cfg_.library_state));
  } else {
    path_ = "op table";
    ++run_stats_.host_resident;
    FERRITE_RETURN_IF_ERROR(s.node->schema->kernel(ctx));
  }
  for (size_t i = 0; i < s.outputs.size(); ++i) {
    if (s.outputs[i] < 0) continue;
    FERRITE_ASSIGN_OR_RETURN(Tensor o, memory_->adopt_output(s.outputs[i], std::move(outs[i])));
    set_host(s.outputs[i], std::move(o));
  }
  return Status::ok();
}

Expected<bool> Model::run_device_library(size_t si, const LibraryOp& op) {
  const Step& s = lg_.steps[si];
  const Node& node = *s.node;
  // A device op is handed its output dims up front (call.output_dims); an output whose dims are
  // known only once computed (after a Loop or an If of unequal branches) runs on the host.
  for (const Value* v : node.outputs) {
    if (!v) continue;
    if (!v->type.shape.rank_known()) return false;
    for (const Dim& d : v->type.shape.dims())
      if (!d.is_known()) return false;
  }
  DeviceCall call;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    if (s.inputs[i] < 0) {
      call.in.push_back(std::nullopt);
      continue;
    }
    FERRITE_ASSIGN_OR_RETURN(void* p, device_ptr(s.inputs[i]));
    FERRITE_ASSIGN_OR_RETURN(auto dims, input_dims(s, i));
    const Slot& in = slots_[s.inputs[i]];
    call.in.push_back(DeviceView{p, in.dtype, std::move(dims), in.host_valid ? &in.host : nullptr});
  }
  call.scratch = [&](size_t bytes) -> Expected<void*> { return step_scratch(bytes); };
  call.output = [&](size_t i, DType dtype, const std::vector<int64_t>& dims) -> Expected<void*> {
    if (i >= s.outputs.size() || s.outputs[i] < 0) return call.scratch(byte_count(dtype, dims));
    return place(s.outputs[i], dtype, dims);
  };
  call.output_dims = [&](size_t i) -> Expected<std::vector<int64_t>> {
    const Value* v = i < node.outputs.size() ? node.outputs[i] : nullptr;
    if (!v || !v->type.shape.rank_known())
      return err(node.describe(), ": output ", i, " has no inferred shape");
    return eval_dims(v->type.shape.dims(), bind_.names, name_);
  };
  call.error_flag = static_cast<int*>(flag_);
  call.tf32 = tf32_;
  call.error_tag = static_cast<int>(si) + 1;
  Expected<bool> ran = op.run_device(*s.node, call, cfg_.library_state);
  if (per_value_) {
    for (auto& [p, bytes] : step_scratch_) give_back(p);  // queued work keeps the stream order
  } else {
    scratch_idle_.insert(scratch_idle_.end(), step_scratch_.begin(), step_scratch_.end());
  }
  step_scratch_.clear();
  FERRITE_ASSIGN_OR_RETURN(bool done, std::move(ran));
  if (done) {
    path_ = "device";
    ++run_stats_.library;
    if (op.sets_error_flag) run_stats_.flag_used = true;
  }
  return done;
}

// The smallest idle block of an earlier step that holds `bytes`, else a new one from the pool.
Expected<void*> Model::step_scratch(size_t bytes) {
  auto best = scratch_idle_.end();
  for (auto it = scratch_idle_.begin(); it != scratch_idle_.end(); ++it)
    if (it->second >= bytes && (best == scratch_idle_.end() || it->second < best->second))
      best = it;
  if (best != scratch_idle_.end()) {
    step_scratch_.push_back(*best);
    scratch_idle_.erase(best);
    return step_scratch_.back().first;
  }
  void* p = nullptr;
  if (device_run_ && device_run_->memory) {
    FERRITE_ASSIGN_OR_RETURN(p, caller_memory(bytes));  // the caller's until the run returns
  } else {
    FERRITE_ASSIGN_OR_RETURN(p, pool_get(bytes));
    scratch_.push_back(p);
  }
  step_scratch_.emplace_back(p, bytes);
  return p;
}

Status Model::run_on_host(size_t si, std::vector<Tensor> ins, bool resident) {
  const Step& s = lg_.steps[si];
  std::vector<const Tensor*> ptrs;
  for (size_t i = 0; i < ins.size(); ++i) ptrs.push_back(s.inputs[i] < 0 ? nullptr : &ins[i]);
  std::vector<Tensor> outs(s.node->outputs.size());
  KernelContext ctx(*s.node, std::move(ptrs), outs);
  FERRITE_RETURN_IF_ERROR(s.node->schema->kernel(ctx));
  for (size_t i = 0; i < s.outputs.size(); ++i)
    if (s.outputs[i] >= 0) {
      Slot& o = slots_[s.outputs[i]];
      if (o.pooled) put(o.dev);
      o = Slot{};
      set_host(s.outputs[i], outs[i]);
    }
  if (plan_.fixed_step[si]) {
    state_->fixed_outputs[si] = outs;
  } else {
    ++run_stats_.nondet_host;
    if (run_stats_.data_ops.find(s.node->op_type) == std::string::npos)
      run_stats_.data_ops += (run_stats_.data_ops.empty() ? "" : " ") + s.node->op_type;
  }
  path_ = resident ? "host" : "host fallback";
  if (resident) {
    ++run_stats_.host_resident;
    return Status::ok();
  }
  ++run_stats_.fallbacks;
  if (run_stats_.fallback_ops.find(s.node->op_type) == std::string::npos)
    run_stats_.fallback_ops += (run_stats_.fallback_ops.empty() ? "" : " ") + s.node->op_type;
  if (log_enabled("fallback") && !logged_)
    std::fprintf(stderr, "[fallback] %s: %s (%s) ran on the host\n", name_.c_str(),
                 s.node->name.c_str(), s.node->op_type.c_str());
  return Status::ok();
}

}  // namespace ferrite::execute
