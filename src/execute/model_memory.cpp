// Where each buffer of a run is (host, device, both) and the device memory behind it: the
// planned arena (memory/lowered_memory.h), the runtime's pool or plain allocations.
#include <cstring>
#include <unordered_set>

#include "execute/model.h"

namespace ferrite::execute {

namespace {

// A runtime without a caching pool: one allocation per block, nothing cached.
class DirectPool : public MemoryPool {
 public:
  DirectPool(DeviceRuntime& rt, size_t alignment) : rt_(rt), align_(alignment) {}
  ~DirectPool() override {
    for (void* p : live_) rt_.free(p);
  }
  Expected<void*> get(size_t bytes) override {
    FERRITE_ASSIGN_OR_RETURN(void* p, rt_.allocate(bytes, align_));
    live_.insert(p);
    if (owning_) owned_.push_back(p);
    ++stats_.requests;
    ++stats_.driver_allocs;
    return p;
  }
  Expected<void*> get_persistent(size_t bytes) override { return get(bytes); }
  Status put(void* p) override {
    if (p && live_.erase(p)) {
      rt_.free(p);
      ++stats_.driver_frees;
    }
    return Status::ok();
  }
  Expected<void*> get_owned(size_t bytes) override { return get(bytes); }
  Status release_owned(const std::vector<void*>& blocks) override {
    for (void* p : blocks) put(p);
    return Status::ok();
  }
  void begin_owned() override { owning_ = true; }
  std::vector<void*> end_owned() override {
    owning_ = false;
    std::vector<void*> out;
    out.swap(owned_);
    return out;
  }
  Status trim(size_t) override { return Status::ok(); }
  DeviceMemoryStats stats() const override { return stats_; }
  std::string describe(const char* when) const override {
    return std::string("[memory] ") + when + ": " + std::to_string(live_.size()) + " blocks";
  }

 private:
  DeviceRuntime& rt_;
  size_t align_;
  std::unordered_set<void*> live_;
  std::vector<void*> owned_;
  bool owning_ = false;
  DeviceMemoryStats stats_;
};

}  // namespace

std::unique_ptr<MemoryPool> make_direct_pool(DeviceRuntime& rt, int64_t alignment) {
  const bool pow2 = alignment > 0 && (alignment & (alignment - 1)) == 0;
  return std::make_unique<DirectPool>(rt, pow2 ? static_cast<size_t>(alignment) : 256);
}

Expected<void*> Model::pool_get(size_t bytes) {
  return pool_->get(bytes);
}
Expected<void*> Model::pool_get_persistent(size_t bytes) {
  return pool_->get_persistent(bytes);
}

void Model::put(void* p) {
  if (p && pool_) (void)pool_->put(p);
}

// RunOptions::outputs_into_inputs: the input tensors this run's planned outputs are stored
// into. An input whose memory overlaps another input's (two views of one storage) is not written
// during the run: a later step may read the other input, so that output is copied at the end.
void Model::prepare_into_inputs(const std::vector<Tensor>& inputs) {
  store_into_.clear();
  if (!host_ || lg_.output_into_input.empty()) return;
  auto range = [](const Tensor& t) {
    auto* p = static_cast<const uint8_t*>(t.raw());
    return std::make_pair(p, p + t.nbytes());
  };
  for (size_t j = 0; j < lg_.output_into_input.size(); ++j) {
    const int i = lg_.output_into_input[j];
    if (i < 0 || static_cast<size_t>(i) >= inputs.size() || inputs[i].nbytes() == 0) continue;
    auto [lo, hi] = range(inputs[i]);
    bool overlaps = false;
    for (size_t k = 0; k < inputs.size() && !overlaps; ++k) {
      if (k == static_cast<size_t>(i) || inputs[k].nbytes() == 0) continue;
      auto [klo, khi] = range(inputs[k]);
      overlaps = klo < hi && lo < khi;
    }
    if (overlaps) continue;
    if (store_into_.empty()) store_into_.resize(lg_.buffers.size());
    store_into_[lg_.outputs[j]] = inputs[i];
  }
}

// After a run: each output the caller wants in an input that its kernel did not store there is
// copied there (host memory: the outputs are host tensors by now).
Status Model::write_into_inputs(const std::vector<Tensor>& inputs, std::vector<Tensor>& out) {
  outputs_in_place_ = outputs_copied_ = output_bytes_copied_ = 0;
  for (size_t j = 0; j < into_inputs_.size() && j < out.size(); ++j) {
    const int i = into_inputs_[j];
    if (i < 0) continue;
    if (static_cast<size_t>(i) >= inputs.size())
      return err(name_, ": output ", j, " is to be written into input ", i, " of ", inputs.size());
    const Tensor& dst = inputs[i];
    if (out[j].raw() == dst.raw()) {
      ++outputs_in_place_;
      continue;
    }
    if (out[j].dtype() != dst.dtype() || out[j].nbytes() != dst.nbytes())
      return err(name_, ": output ", j, " (", dims_to_string(out[j].dims()),
                 ") cannot be written into input ", i, " (", dims_to_string(dst.dims()), ")");
    if (dst.nbytes()) std::memcpy(const_cast<void*>(dst.raw()), out[j].raw(), dst.nbytes());
    out[j] = dst;
    ++outputs_copied_;
    output_bytes_copied_ += static_cast<int64_t>(dst.nbytes());
  }
  return Status::ok();
}

void Model::set_host(int b, Tensor t) {
  Slot& s = slots_[b];
  s.dtype = t.dtype();
  s.dims = t.dims();
  s.host = std::move(t);
  s.host_valid = true;
  if (host_) {
    s.dev = const_cast<void*>(s.host.raw());
    s.dev_valid = true;
  }
}

// Device memory for buffer b of (dtype, dims): its arena slot when planned and large enough,
// else the pool (a heap tensor on host-memory runtimes). The slot then holds that value only.
Expected<void*> Model::place(int b, DType dtype, const std::vector<int64_t>& dims) {
  Slot& s = slots_[b];
  if (s.pooled) put(s.dev);
  if (s.lent) give_back(s.dev);
  s = Slot{};
  s.dtype = dtype;
  s.dims = dims;
  // Sizes come from the model and its inputs: an impossible allocation is an error of the value.
  if (too_large(dtype, dims))
    return err(name_, ": value '", lg_.buffers[b].name, "' of dims ", dims_to_string(dims),
               " is too large to allocate");
  if (host_ && !store_into_.empty() && store_into_[b].raw() && store_into_[b].dtype() == dtype &&
      store_into_[b].dims() == dims) {
    set_host(b, store_into_[b]);  // a planned output into an input (prepare_into_inputs)
    return s.dev;
  }
  if (device_run_ && output_of_buffer_[b] >= 0) {
    FERRITE_ASSIGN_OR_RETURN(void* p, caller_output(b, dtype, dims));
    if (p) {
      s.dev = p;
      s.dev_valid = true;
      return p;
    }
  }
  if (host_) {
    auto t = memory_->allocate(b, dtype, dims, /*zero=*/false);
    if (!t) return t.status().with_context(str_cat("value '", lg_.buffers[b].name, "'"));
    set_host(b, std::move(t).value());
    return s.dev;
  }
  const size_t bytes = byte_count(dtype, dims);
  if (void* p = memory_->device_address(b, static_cast<int64_t>(bytes))) {
    s.dev = p;
  } else if (device_run_ && device_run_->memory) {
    FERRITE_ASSIGN_OR_RETURN(s.dev, caller_memory(bytes));
    s.lent = per_value_;
  } else {
    FERRITE_ASSIGN_OR_RETURN(s.dev, pool_get(bytes));
    s.pooled = true;
  }
  s.dev_valid = true;
  return s.dev;
}

// Makes buffer b valid on the device: constants are uploaded once for all runs (or bound to the
// caller's copy of them, RunOptions::constant_mirrors), values fixed by the binding once per
// binding, other host values on every run.
Expected<void*> Model::device_ptr(int b) {
  Slot& s = slots_[b];
  if (s.dev_valid) return s.dev;
  if (!s.host_valid)
    return err(name_, ": buffer ", lg_.buffers[b].name, " is read before it is written");
  if (capturing_) return err(name_, ": a host value would be uploaded during capture");
  const size_t bytes = s.host.nbytes();
  void* p = nullptr;
  if (lg_.buffers[b].kind == Buffer::Kind::kConstant) {
    auto m = mirrors_.find(s.host.raw());
    if (m != mirrors_.end() &&
        m->second.host.nbytes() == bytes) {  // the caller's copy: nothing to do
      const_dev_[b] = const_cast<void*>(m->second.address);
      const_mirrored_[b] = 1;
      s.dev = const_dev_[b];
      s.dev_valid = true;
      return s.dev;
    }
    FERRITE_ASSIGN_OR_RETURN(const_dev_[b], pool_get_persistent(bytes));
    p = const_dev_[b];
  } else if (plan_.fixed[b]) {
    FERRITE_ASSIGN_OR_RETURN(p, pool_get_persistent(bytes));
    state_->fixed_dev[b] = p;
  } else {
    Tensor keep = s.host;
    FERRITE_ASSIGN_OR_RETURN(p, place(b, keep.dtype(), keep.dims()));
    s.host = std::move(keep);
    s.host_valid = true;
  }
  FERRITE_RETURN_IF_ERROR(rt_.copy_to_device(p, s.host.raw(), bytes));
  s.dev = p;
  s.dev_valid = true;
  return p;
}

// The constants uploaded so far (after the first run: all that the steps read on the device),
// once their copies are complete, for another context to use in place of its own.
std::map<const void*, RunOptions::DeviceMirror> Model::device_constants() {
  std::map<const void*, RunOptions::DeviceMirror> out;
  if (host_) return out;
  // Not through the device gate: a run of this model holds the gate and waits for mutex_, and a
  // recording waiting for the gate would close it to us (a cycle). Waiting for this model's
  // stream is allowed while another context records.
  std::lock_guard<std::mutex> lock(mutex_);
  DeviceTurn turn(nullptr, &cfg_.enter, &cfg_.leave);
  if (!turn.enter() || !rt_.synchronize()) return out;  // the other context copies its own
  for (size_t b = 0; b < lg_.buffers.size(); ++b) {
    if (!const_dev_[b] || lg_.buffers[b].kind != Buffer::Kind::kConstant) continue;
    const Tensor& host = *lg_.buffers[b].value->constant;
    out.emplace(host.raw(), RunOptions::DeviceMirror{host, const_dev_[b]});
  }
  return out;
}

// Makes buffer b valid on the host (copying a device value back).
Expected<Tensor> Model::host_tensor(int b) {
  Slot& s = slots_[b];
  if (s.host_valid) return s.host;
  if (!s.dev_valid)
    return err(name_, ": buffer ", lg_.buffers[b].name, " is read before it is written");
  if (capturing_) return err(name_, ": a device value would be read back during capture");
  FERRITE_ASSIGN_OR_RETURN(Tensor t, Tensor::create_uninitialized(s.dtype, s.dims));
  FERRITE_RETURN_IF_ERROR(rt_.copy_to_host(t.raw(), s.dev, t.nbytes()));
  run_stats_.d2h_bytes += static_cast<int64_t>(t.nbytes());
  s.host = std::move(t);
  s.host_valid = true;
  return s.host;
}

Expected<std::vector<int64_t>> Model::input_dims(const Step& s, size_t i) {
  if (s.input_dims[i]) return eval_dims(*s.input_dims[i], bind_.names, name_);
  return slots_[s.inputs[i]].dims;
}

void Model::release(size_t step) {
  for (int b : plan_.dying[step]) {
    Slot& s = slots_[b];
    if (s.pooled) put(s.dev);
    if (s.lent) give_back(s.dev);
    s = Slot{};
  }
}

void Model::drop_capture(BindingState& st) {
  if (!pool_) return;  // host memory: nothing recorded, nothing on a device
  if (st.exec && rt_.capture()) rt_.capture()->destroy(st.exec);
  st.exec = 0;
  if (st.staging && rt_.capture()) rt_.capture()->free_staging(st.staging);
  st.staging = nullptr;
  (void)pool_->release_owned(st.owned);
  st.owned.clear();
  st.input_dev.clear();
  st.outputs.clear();
}

void Model::drop_binding(BindingState& st) {
  drop_capture(st);
  for (auto& [b, p] : st.fixed_dev) put(p);
  st.fixed_dev.clear();
}

}  // namespace ferrite::execute
