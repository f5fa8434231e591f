// Runs on tensors that live in the device's memory (PreparedModel::run_device): a framework's
// GPU tensors go in and come out without a copy through the host. The run is joined with the
// caller's stream (StreamOrder) and returns once its work is queued; it synchronizes only where a
// step needs the host (a host step on device data, the index check of a library op).
//
// Step by step, graph outputs are computed in the memory the caller gives for them (asked for when
// their step places them), so a run holds no second copy of what it returns: the forward graph of
// a training step returns the activations its backward reads, often most of the step's memory.
// A recording keeps its own output buffers and copies them out on every replay, and its own
// input buffers, so runs whose inputs and outputs exceed kMaxRecordedIoBytes are not recorded,
// nor runs whose caller gives memory back per value (DeviceRun::memory_free).
//
// A run on device tensors does not wait for the device to check the data errors its library ops
// flag (Gather's indices out of range): it queues a copy of the flag into page-locked memory
// behind its work and returns, and the next call reports an error that copy shows, naming the
// step (PyTorch's device-side asserts are asynchronous in the same way, but end the process).
// Waiting instead cost each text model's run a full host round trip with the device idle
// (Gather embeds the tokens). The device flag stays set until the host has read it, so a later
// run's copy cannot hide an earlier run's error.
//
// Each path of run() has its device twin: step by step (inputs' slots point at the caller's
// memory), recording (inputs copied on the device into the recording's buffers) and replay.
#include "execute/model.h"

namespace ferrite::execute {

namespace {

// Above this many bytes of inputs plus outputs a run is not worth recording: each replay would
// copy them (about 0.2 ms per 256 MiB at HBM speeds, as much as the launches it saves for a few
// hundred steps), and the recording would hold a copy of each for as long as it lives.
constexpr int64_t kMaxRecordedIoBytes = int64_t{256} << 20;

}  // namespace

Status Model::run_device(const std::vector<Tensor>& inputs, const DeviceRun& run) {
  if (host_)
    return unsupported(name_, ": its memory is host memory; run() reads host tensors in place");
  if (run.input_dev.size() != inputs.size())
    return err(name_, ": run_device got ", run.input_dev.size(), " device addresses for ",
               inputs.size(), " inputs");
  if (!run.output) return err(name_, ": run_device needs an output allocator");
  StreamOrder* order = rt_.stream_order();
  // A device without streams (synchronous) has nothing to order with the legacy default stream.
  const bool ordered = run.stream || (run.caller_stream && order);
  if (ordered && !order)
    return unsupported(name_, ": this device cannot order its work on a caller's stream");
  DeviceTurn turn(cfg_.device_gate, &cfg_.enter, &cfg_.leave);
  std::lock_guard<std::mutex> lock(mutex_);
  FERRITE_RETURN_IF_ERROR(turn.enter());
  CurrentTurn current(turn_, turn);
  // The arena is reserved below once the path is known (run.memory may lend it for this run).
  FERRITE_RETURN_IF_ERROR(bind(inputs, /*reserve_arena=*/false));
  if (ordered) FERRITE_RETURN_IF_ERROR(order->after(run.stream));
  Status s = run_device_locked(inputs, run);
  // Also after an error: the caller's later work must not overtake what was queued.
  if (ordered) {
    Status o = order->before(run.stream);
    if (s) s = o;
  }
  return s;
}

Status Model::run_device_locked(const std::vector<Tensor>& inputs, const DeviceRun& run) {
  std::vector<std::vector<int64_t>> in_dims;
  for (const Tensor& t : inputs) in_dims.push_back(t.dims());
  BindingState& st = *state_;
  FERRITE_RETURN_IF_ERROR(start_device_flag());
  if (st.exec && st.input_dims == in_dims) return replay_device(inputs, run);
  // A caller that takes memory back value by value (DeviceRun::memory_free: a training step)
  // wants the run's memory to follow its allocator; a recording would keep its own. Outputs
  // planned into their inputs (an optimizer step) are written in place step by step, where a
  // replay would copy every input in and every output back out.
  if (capture_on_ && !recorder_ && st.capturable && st.clean_runs > 0 && !st.exec &&
      st.device_io_bytes <= kMaxRecordedIoBytes && !run.memory_free && !writes_inputs()) {
    FERRITE_RETURN_IF_ERROR(memory_->reserve_plan());  // the recording keeps its addresses
    Status r = record(inputs, in_dims, &run.input_dev);
    if (r) {
      FERRITE_RETURN_IF_ERROR(rt_.capture()->replay(st.exec));
      Status w = write_outputs(run);
      if (w) w = end_device_flag(st.checks_flag);
      return end_run(w);
    }
    if (!capture_failed_) return r;
    capture_failed_ = false;  // not capturable: run step by step from now on
  }
  prepare_slots(inputs, nullptr);
  // The caller's memory is the inputs' only copy: a host step reading one copies it back.
  for (size_t i = 0; i < lg_.inputs.size(); ++i) {
    if (!run.input_dev[i]) continue;
    Slot& s = slots_[lg_.inputs[i]];
    s.host = Tensor();
    s.host_valid = false;
    s.dev = const_cast<void*>(run.input_dev[i]);
    s.dev_valid = true;
  }
  device_run_ = &run;
  device_inputs_.clear();
  for (size_t i = 0; i < inputs.size(); ++i)
    device_inputs_.push_back(
        {static_cast<const uint8_t*>(i < run.input_dev.size() ? run.input_dev[i] : nullptr),
         inputs[i].nbytes(), inputs[i].dtype()});
  caller_out_.assign(lg_.outputs.size(), {nullptr, false});
  Status s = Status::ok();
  per_value_ = run.memory && run.memory_free;
  if (per_value_) {
    memory_->no_arena();  // every value a block of its own (place())
  } else if (run.memory && memory_->planned_bytes() > 0) {
    auto block = caller_memory(static_cast<size_t>(memory_->planned_bytes()));
    if (block) memory_->lend(*block);
    s = block.status();
  } else {
    s = memory_->reserve_plan();
  }
  if (s) s = execute_steps();
  if (s) s = write_outputs(run);
  memory_->lend(nullptr);
  caller_out_.clear();
  if (s) {
    int64_t io = 0;
    for (const Tensor& t : inputs) io += static_cast<int64_t>(t.nbytes());
    for (int b : lg_.outputs)
      io += static_cast<int64_t>(byte_count(slots_[b].dtype, slots_[b].dims));
    st.device_io_bytes = io;
  }
  if (s) s = end_device_flag(run_stats_.flag_used);
  s = end_run(s);  // gives back the values still held (per_value_)
  device_run_ = nullptr;
  per_value_ = false;
  lent_blocks_.clear();
  if (s && run_stats_.nondet_host == 0) ++st.clean_runs;
  if (run_stats_.nondet_host > 0) st.capturable = false;
  if (s && log_enabled("fallback") && !logged_) log_run();
  return s;
}

// The caller's memory for graph output buffer b (asked for once per run), or null where the steps
// must not write it: memory that overlaps an input (a later step may still read that input). The
// caller's memory is then written at the end of the run (write_outputs). The exception is an
// output planned into its input (RunOptions::outputs_into_inputs, lg_.output_into_input: an
// optimizer step's new parameters), given exactly that input's memory: its kernel reads each
// element before it stores it and no later step reads the input, so it is written in place,
// unless another input overlaps that memory.
Expected<void*> Model::caller_output(int b, DType dtype, const std::vector<int64_t>& dims) {
  const int j = output_of_buffer_[b];
  auto& [dst, direct] = caller_out_[j];
  if (!dst) {
    FERRITE_ASSIGN_OR_RETURN(dst, device_run_->output(j, dtype, dims));
    if (!dst) return err(name_, ": the output allocator gave no memory for output ", j);
    const size_t n = byte_count(dtype, dims);
    const auto* lo = static_cast<const uint8_t*>(dst);
    const uint8_t* hi = lo + n;
    const int planned =
        static_cast<size_t>(j) < lg_.output_into_input.size() ? lg_.output_into_input[j] : -1;
    direct = true;
    for (size_t i = 0; i < device_inputs_.size() && direct; ++i) {
      const InputRange& in = device_inputs_[i];
      if (!in.lo || !(lo < in.lo + in.bytes && in.lo < hi)) continue;
      const bool own =
          static_cast<int>(i) == planned && in.lo == lo && in.bytes == n && in.dtype == dtype;
      if (!own) direct = false;
    }
  }
  return direct ? dst : nullptr;
}

// `bytes` of the caller's memory for this run (DeviceRun::memory), aligned for any arena slot.
Expected<void*> Model::caller_memory(size_t bytes) {
  const auto align = static_cast<size_t>(memory_->alignment());
  FERRITE_ASSIGN_OR_RETURN(void* p, device_run_->memory(bytes + align));
  if (!p) return err(name_, ": the caller's allocator gave no memory for ", bytes, " bytes");
  const auto a = reinterpret_cast<uintptr_t>(p);
  void* aligned = reinterpret_cast<void*>((a + align - 1) / align * align);
  if (per_value_) lent_blocks_[aligned] = p;
  return aligned;
}

// Gives a block of caller_memory back (per_value_ runs; otherwise the caller frees it after the
// run).
void Model::give_back(void* p) {
  auto it = lent_blocks_.find(p);
  if (it == lent_blocks_.end() || !device_run_ || !device_run_->memory_free) return;
  device_run_->memory_free(it->second);
  lent_blocks_.erase(it);
}

// Writes each graph output into the memory the caller gives for it (queued on the device), unless
// its step already computed it there.
Status Model::write_outputs(const DeviceRun& run) {
  outputs_in_caller_ = output_bytes_to_caller_ = 0;
  outputs_in_place_ = outputs_copied_ = output_bytes_copied_ = 0;
  for (size_t j = 0; j < lg_.outputs.size(); ++j) {
    const Slot& o = slots_[lg_.outputs[j]];
    void* dst = j < caller_out_.size() ? caller_out_[j].first : nullptr;
    if (!dst) {
      FERRITE_ASSIGN_OR_RETURN(dst, run.output(j, o.dtype, o.dims));
    }
    const size_t n = byte_count(o.dtype, o.dims);
    // An output the caller wants in an input (its allocator gave that input's memory).
    const int into = j < into_inputs_.size() ? into_inputs_[j] : -1;
    const bool into_input =
        into >= 0 && static_cast<size_t>(into) < run.input_dev.size() && run.input_dev[into] == dst;
    if (o.dev_valid && o.dev == dst) {
      ++outputs_in_caller_;
      if (into_input) ++outputs_in_place_;
      continue;
    }
    if (n == 0) continue;
    output_bytes_to_caller_ += static_cast<int64_t>(n);
    if (into_input) {
      ++outputs_copied_;
      output_bytes_copied_ += static_cast<int64_t>(n);
    }
    if (o.dev_valid) {
      FERRITE_RETURN_IF_ERROR(rt_.copy_on_device(dst, o.dev, n));
    } else if (o.host_valid) {
      FERRITE_RETURN_IF_ERROR(rt_.copy_to_device(dst, o.host.raw(), n));
    } else {
      return err(name_, ": output ", lg_.buffers[lg_.outputs[j]].name, " was never written");
    }
  }
  return Status::ok();
}

Status Model::replay_device(const std::vector<Tensor>& inputs, const DeviceRun& run) {
  BindingState& st = *state_;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const size_t n = inputs[i].nbytes();
    if (n == 0) continue;
    if (run.input_dev[i])
      FERRITE_RETURN_IF_ERROR(rt_.copy_on_device(st.input_dev[i], run.input_dev[i], n));
    else
      FERRITE_RETURN_IF_ERROR(rt_.copy_to_device(st.input_dev[i], inputs[i].raw(), n));
  }
  FERRITE_RETURN_IF_ERROR(rt_.capture()->replay(st.exec));
  outputs_in_caller_ = output_bytes_to_caller_ = 0;
  outputs_in_place_ = outputs_copied_ = output_bytes_copied_ = 0;
  for (size_t j = 0; j < st.outputs.size(); ++j) {
    const CapturedOutput& g = st.outputs[j];
    FERRITE_ASSIGN_OR_RETURN(void* dst, run.output(j, g.dtype, g.dims));
    const size_t n = byte_count(g.dtype, g.dims);
    if (n == 0) continue;
    output_bytes_to_caller_ += static_cast<int64_t>(n);
    const int into = j < into_inputs_.size() ? into_inputs_[j] : -1;
    if (into >= 0 && static_cast<size_t>(into) < run.input_dev.size() &&
        run.input_dev[into] == dst) {
      ++outputs_copied_;
      output_bytes_copied_ += static_cast<int64_t>(n);
    }
    if (g.dev)
      FERRITE_RETURN_IF_ERROR(rt_.copy_on_device(dst, g.dev, n));
    else
      FERRITE_RETURN_IF_ERROR(rt_.copy_to_device(dst, g.host.raw(), n));
  }
  FERRITE_RETURN_IF_ERROR(end_device_flag(st.checks_flag));
  ++runs_;
  return Status::ok();
}

// Start of a run on device tensors: reports an earlier run's error that a finished copy shows,
// before this run is queued. Where checks are deferred the flag is left as earlier runs set it.
Status Model::start_device_flag() {
  if (!flag_) return Status::ok();
  if (!flag_seen_) return rt_.fill(flag_, 0, sizeof(int));  // checked at the end of the run
  return report_deferred_flag(/*wait=*/false);
}

// End of a run on device tensors whose steps may have set the flag (`used`).
Status Model::end_device_flag(bool used) {
  if (!used || !flag_) return Status::ok();
  if (!flag_seen_) return check_flag();
  FERRITE_RETURN_IF_ERROR(rt_.capture()->copy_to_host_async(flag_seen_, flag_, sizeof(int)));
  flag_deferred_ = true;
  return Status::ok();
}

// An error of an earlier run on device tensors, as far as the copies queued behind those runs
// have arrived (`wait`: all of them, waiting for the device). Reporting clears the flag.
Status Model::report_deferred_flag(bool wait) {
  if (!flag_deferred_) return Status::ok();
  if (wait) FERRITE_RETURN_IF_ERROR(rt_.synchronize());
  const int v = __atomic_load_n(flag_seen_, __ATOMIC_ACQUIRE);
  if (v == 0) {
    if (wait) flag_deferred_ = false;
    return Status::ok();
  }
  // Copies still queued would bring the set flag back: let them land, then clear both words.
  FERRITE_RETURN_IF_ERROR(rt_.synchronize());
  FERRITE_RETURN_IF_ERROR(rt_.fill(flag_, 0, sizeof(int)));
  __atomic_store_n(flag_seen_, 0, __ATOMIC_RELEASE);
  flag_deferred_ = false;
  return flag_status(v,
                     " in an earlier run on device tensors, whose outputs are not valid (runs "
                     "on device tensors report data errors at the next call)");
}

}  // namespace ferrite::execute
