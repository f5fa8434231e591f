// The C API's values and runs (include/ferrite/ferrite.h): tensors over the caller's memory or
// ferrite's, TensorProto files, and ferrite_session_run over Session::run (host memory) or
// Session::run_device (device memory). Inputs are checked here against the declared dtype, rank
// and fixed dims so that those mistakes come back as FERRITE_INVALID_ARGUMENT with the input's
// name; the Session's guards check the rest (symbols, assumptions).
#include <chrono>
#include <cstring>

#include "capi/capi_internal.h"
#include "frontend/onnx/tensor_proto.h"

using ferrite::capi::from_status;
using ferrite::capi::guarded;
using ferrite::capi::make_status;

namespace {

using ferrite::DType;
using ferrite::Tensor;

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// dtype, dims and the bytes they need, checked (overflow included).
ferrite_status* check_shape(ferrite_dtype dtype, const int64_t* dims, size_t rank,
                            std::vector<int64_t>* out, size_t* bytes) {
  auto d = ferrite::capi::to_ir_dtype(dtype);
  if (!d) return make_status(FERRITE_INVALID_ARGUMENT, "unknown dtype " + std::to_string(dtype));
  if (rank > 0 && !dims) return make_status(FERRITE_INVALID_ARGUMENT, "dims is NULL");
  if (rank > 64) return make_status(FERRITE_INVALID_ARGUMENT, "rank above 64");
  out->assign(dims, dims + rank);
  if (auto s = from_status(ferrite::check_dims("value", *out), FERRITE_INVALID_ARGUMENT)) return s;
  // check_dims bounds the element count by int64; the byte count may still not fit.
  uint64_t numel = 1;
  for (int64_t x : *out) numel *= static_cast<uint64_t>(x);
  const size_t size = ferrite::dtype_size(*d);
  if (numel > SIZE_MAX / size)
    return make_status(FERRITE_INVALID_ARGUMENT, "dims " + dims_text(*out) + " are too large");
  *bytes = static_cast<size_t>(numel) * size;
  return nullptr;
}

// The graph input slot each given input fills (by name, or by position without names).
ferrite_status* match_inputs(const ferrite_session* s, const char* const* names,
                             const ferrite_value* const* inputs, size_t count,
                             std::vector<size_t>* slots) {
  if (count > 0 && !inputs) return make_status(FERRITE_INVALID_ARGUMENT, "inputs is NULL");
  if (count > s->inputs.size())
    return make_status(FERRITE_INVALID_ARGUMENT,
                       "the model has " + std::to_string(s->inputs.size()) + " inputs, but " +
                           std::to_string(count) + " were given");
  std::vector<bool> seen(s->inputs.size(), false);
  for (size_t k = 0; k < count; ++k) {
    size_t slot = k;
    if (names) {
      if (!names[k]) return make_status(FERRITE_INVALID_ARGUMENT, "input name is NULL");
      slot = s->inputs.size();
      for (size_t i = 0; i < s->inputs.size(); ++i)
        if (s->inputs[i].name == names[k]) slot = i;
      if (slot == s->inputs.size()) {
        std::string known;
        for (const auto& io : s->inputs) known += (known.empty() ? "'" : ", '") + io.name + "'";
        return make_status(FERRITE_INVALID_ARGUMENT, std::string("unknown input '") + names[k] +
                                                         "' (the model's inputs: " + known + ")");
      }
    }
    if (seen[slot])
      return make_status(FERRITE_INVALID_ARGUMENT,
                         "input '" + s->inputs[slot].name + "' is given twice");
    seen[slot] = true;
    const ferrite_value* v = inputs[k];
    const auto& io = s->inputs[slot];
    const std::string what = "input '" + io.name + "'";
    if (!v) return make_status(FERRITE_INVALID_ARGUMENT, what + " is NULL");
    if (v->dtype != io.dtype)
      return make_status(FERRITE_INVALID_ARGUMENT, what + " has dtype " + std::to_string(v->dtype) +
                                                       ", the model expects " +
                                                       std::to_string(io.dtype));
    if (io.rank >= 0 && static_cast<int>(v->dims.size()) != io.rank)
      return make_status(FERRITE_INVALID_ARGUMENT,
                         what + " has rank " + std::to_string(v->dims.size()) +
                             ", the model expects " + std::to_string(io.rank));
    for (int d = 0; d < io.rank; ++d)
      if (io.dims[d] >= 0 && v->dims[d] != io.dims[d])
        return make_status(FERRITE_INVALID_ARGUMENT,
                           what + " dim " + std::to_string(d) + " is " +
                               std::to_string(v->dims[d]) + ", the model expects " +
                               std::to_string(io.dims[d]) + " (got " + dims_text(v->dims) + ")");
    slots->push_back(slot);
  }
  return nullptr;
}

// A run error: wrong inputs the guards found are the caller's; anything else failed running.
ferrite_status* run_error(const ferrite::Status& s) {
  const std::string& m = s.message();
  bool input = m.rfind("input '", 0) == 0 || m.rfind("missing input", 0) == 0;
  return from_status(s, input ? FERRITE_INVALID_ARGUMENT : FERRITE_RUNTIME_ERROR);
}

ferrite_status* check_output(const ferrite_value* v, size_t j, DType dtype,
                             const std::vector<int64_t>& dims) {
  if (v->dtype != ferrite::capi::to_c_dtype(dtype) || v->dims != dims)
    return make_status(FERRITE_INVALID_ARGUMENT,
                       "output " + std::to_string(j) + " is dtype " +
                           std::to_string(ferrite::capi::to_c_dtype(dtype)) + " " +
                           dims_text(dims) + " for these inputs, the value given is dtype " +
                           std::to_string(v->dtype) + " " + dims_text(v->dims));
  return nullptr;
}

ferrite_value* wrap_tensor(Tensor t) {
  auto v = new ferrite_value();
  v->dtype = ferrite::capi::to_c_dtype(t.dtype());
  v->dims = t.dims();
  v->bytes = t.nbytes();
  v->data = v->bytes ? t.raw() : nullptr;
  v->tensor = std::move(t);
  return v;
}

// Host run: outputs come back as tensors; caller-provided ones get a copy.
ferrite_status* run_host(ferrite_session* s, const std::vector<ferrite::Session::NamedInput>& in,
                         ferrite_value** outputs, ferrite::Session::RunInfo* info) {
  auto out = s->session->run(in, info);
  if (!out) return run_error(out.status());
  // Sequences and optionals have no ferrite_value form: refused rather than returned as tensors.
  for (const Tensor& t : *out)
    if (!t.is_tensor())
      return make_status(FERRITE_UNSUPPORTED, "the model returns " + t.type_string() +
                                                  "; the C API returns tensors only");
  std::vector<ferrite_value*> made;
  for (size_t j = 0; j < out->size(); ++j) {
    Tensor& t = (*out)[j];
    ferrite_status* st = nullptr;
    if (outputs[j]) {
      st = outputs[j]->memory != FERRITE_MEMORY_HOST
               ? make_status(FERRITE_INVALID_ARGUMENT, "output " + std::to_string(j) +
                                                           " is in device memory, inputs on "
                                                           "the host: give device inputs too")
               : check_output(outputs[j], j, t.dtype(), t.dims());
      if (!st && t.nbytes()) std::memcpy(outputs[j]->data, t.raw(), t.nbytes());
    } else {
      outputs[j] = wrap_tensor(std::move(t));
      made.push_back(outputs[j]);
    }
    if (st) {
      for (size_t k = 0; k < j; ++k)
        for (ferrite_value* m : made)
          if (outputs[k] == m) outputs[k] = nullptr;
      for (ferrite_value* m : made) delete m;
      return st;
    }
  }
  return nullptr;
}

ferrite_status* run_device(ferrite_session* s, std::vector<ferrite::Session::NamedInput>& in,
                           const std::vector<const void*>& dev, ferrite_value** outputs,
                           size_t output_count, void* stream, ferrite::Session::RunInfo* info) {
  for (size_t j = 0; j < output_count; ++j)
    if (!outputs[j])
      return make_status(FERRITE_INVALID_ARGUMENT,
                         "output " + std::to_string(j) +
                             " is NULL: a run on device memory needs every output given");
  ferrite::DeviceRun run;
  run.input_dev = dev;
  run.stream = stream;
  run.caller_stream = true;  // NULL: CUDA's legacy default stream, which the caller can wait on
  run.output = [&](size_t j, DType dtype,
                   const std::vector<int64_t>& dims) -> ferrite::Expected<void*> {
    if (j >= output_count) return ferrite::err("output ", j, " out of range");
    if (ferrite_status* st = check_output(outputs[j], j, dtype, dims)) {
      std::string m = st->message;
      ferrite_status_release(st);
      return ferrite::err(m);
    }
    if (outputs[j]->memory != FERRITE_MEMORY_DEVICE)
      return ferrite::err("output ", j, ": a run on device memory writes device outputs only");
    return outputs[j]->data;
  };
  return run_error(s->session->run_device(in, std::move(run), info));
}

void fill_stats(ferrite_run_stats* stats, const ferrite::Session& session,
                const ferrite::Session::RunInfo& info, double seconds) {
  ferrite_run_stats r;
  std::memset(&r, 0, sizeof r);
  r.struct_size = sizeof r;
  r.wall_seconds = seconds;
  r.compiled = info.compiled ? 1 : 0;
  r.compiles = session.compiles();
  r.context = info.context;
  if (info.stats.memory) {
    r.arena_bytes = info.stats.memory->planned_peak_bytes;
    r.arena_capacity_bytes = info.stats.memory->arena_capacity_bytes;
  }
  if (info.stats.device_memory) r.device_bytes_in_use = info.stats.device_memory->in_use_bytes;
  // Only the fields the caller's header knows.
  const size_t n = std::min(stats->struct_size, sizeof r);
  std::memcpy(reinterpret_cast<char*>(stats) + sizeof(size_t),
              reinterpret_cast<const char*>(&r) + sizeof(size_t), n - sizeof(size_t));
}

}  // namespace

extern "C" {

ferrite_status* ferrite_value_create(ferrite_dtype dtype, const int64_t* dims, size_t rank,
                                     void* data, size_t bytes, ferrite_memory memory,
                                     ferrite_value** out) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(out, "out is NULL");
    *out = nullptr;
    FERRITE_CAPI_REQUIRE(memory == FERRITE_MEMORY_HOST || memory == FERRITE_MEMORY_DEVICE,
                         "unknown memory kind");
    auto v = std::make_unique<ferrite_value>();
    size_t need = 0;
    if (auto s = check_shape(dtype, dims, rank, &v->dims, &need)) return s;
    if (need > 0 && !data) return make_status(FERRITE_INVALID_ARGUMENT, "data is NULL");
    if (bytes < need)
      return make_status(FERRITE_INVALID_ARGUMENT,
                         "the buffer has " + std::to_string(bytes) + " bytes, dtype and dims " +
                             dims_text(v->dims) + " need " + std::to_string(need));
    v->dtype = dtype;
    v->data = data;
    v->bytes = need;
    v->memory = memory;
    DType d = *ferrite::capi::to_ir_dtype(dtype);
    if (memory == FERRITE_MEMORY_HOST) {
      // The caller's memory, not owned: released with the value, by the caller.
      std::shared_ptr<uint8_t[]> storage(static_cast<uint8_t*>(data), [](uint8_t*) {});
      auto t = need ? Tensor::borrow(d, v->dims, std::move(storage)) : Tensor::create(d, v->dims);
      if (!t) return from_status(t.status(), FERRITE_INVALID_ARGUMENT);
      v->tensor = std::move(t).value();
    } else {
      // dtype and dims only: the bytes stay on the device (the stand-in byte is never read).
      auto t = Tensor::over_storage(d, v->dims, std::shared_ptr<uint8_t[]>(new uint8_t[1]));
      if (!t) return from_status(t.status(), FERRITE_INVALID_ARGUMENT);
      v->tensor = std::move(t).value();
    }
    *out = v.release();
    return nullptr;
  });
}

ferrite_status* ferrite_value_allocate(ferrite_dtype dtype, const int64_t* dims, size_t rank,
                                       ferrite_value** out) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(out, "out is NULL");
    *out = nullptr;
    std::vector<int64_t> d;
    size_t need = 0;
    if (auto s = check_shape(dtype, dims, rank, &d, &need)) return s;
    auto t = Tensor::create(*ferrite::capi::to_ir_dtype(dtype), d);
    if (!t) return from_status(t.status(), FERRITE_OUT_OF_MEMORY);
    *out = wrap_tensor(std::move(t).value());
    return nullptr;
  });
}

ferrite_status* ferrite_value_load_pb(const char* path, ferrite_value** out, const char** name) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(path && out, "path or out is NULL");
    *out = nullptr;
    std::error_code ec;
    if (!std::filesystem::is_regular_file(path, ec))
      return make_status(FERRITE_NOT_FOUND, std::string("tensor file '") + path + "' not found");
    auto t = ferrite::read_tensor_file(path);
    if (!t) return from_status(t.status(), FERRITE_INVALID_ARGUMENT);
    if (ferrite::capi::to_c_dtype(t->tensor.dtype()) == FERRITE_DTYPE_UNDEFINED)
      return make_status(FERRITE_UNSUPPORTED,
                         std::string("tensor file '") + path + "': its dtype has no ferrite_dtype");
    ferrite_value* v = wrap_tensor(std::move(t->tensor));
    v->name = t->name;
    if (name) *name = v->name.c_str();
    *out = v;
    return nullptr;
  });
}

void ferrite_value_release(ferrite_value* value) {
  delete value;
}

ferrite_status* ferrite_value_info(const ferrite_value* value, ferrite_dtype* dtype, size_t* rank,
                                   const int64_t** dims, ferrite_memory* memory) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(value, "value is NULL");
    if (dtype) *dtype = value->dtype;
    if (rank) *rank = value->dims.size();
    if (dims) *dims = value->dims.data();
    if (memory) *memory = value->memory;
    return nullptr;
  });
}

ferrite_status* ferrite_value_data(ferrite_value* value, void** data, size_t* bytes) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(value, "value is NULL");
    if (data) *data = value->data;
    if (bytes) *bytes = value->bytes;
    return nullptr;
  });
}

ferrite_status* ferrite_session_run(ferrite_session* session, const char* const* input_names,
                                    const ferrite_value* const* inputs, size_t input_count,
                                    ferrite_value** outputs, size_t output_count, void* stream,
                                    ferrite_run_stats* stats) {
  return guarded([&]() -> ferrite_status* {
    auto t0 = std::chrono::steady_clock::now();
    FERRITE_CAPI_REQUIRE(session, "session is NULL");
    if (output_count != session->outputs.size())
      return make_status(FERRITE_INVALID_ARGUMENT,
                         "the model has " + std::to_string(session->outputs.size()) +
                             " outputs, output_count is " + std::to_string(output_count));
    FERRITE_CAPI_REQUIRE(output_count == 0 || outputs, "outputs is NULL");
    FERRITE_CAPI_REQUIRE(!stats || stats->struct_size >= sizeof(size_t) + sizeof(double),
                         "stats->struct_size is not set (sizeof(ferrite_run_stats))");
    std::vector<size_t> slots;
    if (auto s = match_inputs(session, input_names, inputs, input_count, &slots)) return s;
    std::vector<ferrite::Session::NamedInput> in;
    std::vector<const void*> dev;
    bool on_device = false;
    for (size_t k = 0; k < input_count; ++k) {
      in.push_back({session->inputs[slots[k]].name, inputs[k]->tensor});
      const bool d = inputs[k]->memory == FERRITE_MEMORY_DEVICE;
      dev.push_back(d ? inputs[k]->data : nullptr);
      on_device = on_device || d;
    }
    for (size_t j = 0; j < output_count; ++j)
      on_device = on_device || (outputs[j] && outputs[j]->memory == FERRITE_MEMORY_DEVICE);
    if (stream && !on_device)
      return make_status(FERRITE_INVALID_ARGUMENT, "a stream is for runs on device memory");
    ferrite::Session::RunInfo info;
    ferrite_status* st = on_device
                             ? run_device(session, in, dev, outputs, output_count, stream, &info)
                             : run_host(session, in, outputs, &info);
    if (st) return st;
    if (stats) {
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      fill_stats(stats, *session->session, info, secs);
    }
    return nullptr;
  });
}

}  // extern "C"
