// TRITONBACKEND_ModelInstanceExecute for ferrite: the server's dynamic batcher hands an instance
// several requests at once; requests whose inputs agree in every dim but the batch dim are
// concatenated along it into one ferrite run (the symbolic batch dim means no recompile), and the
// outputs are split back per request. A request that is malformed gets an error response of its
// own (naming the model and input) and the rest of the batch still runs; a failed run fails only
// the requests in it. Statistics go to the server per request and per run.
#include <cstring>
#include <exception>
#include <map>

#include "serving/triton/backend_state.h"

namespace ferrite::triton {
namespace {

struct InputData {
  std::vector<int64_t> shape;  // as the request gives it (batch dim included when batching)
  std::vector<std::pair<const void*, uint64_t>> buffers;  // host memory, in order
  uint64_t bytes = 0;
};

// One request that passed validation, waiting for its run.
struct Pending {
  TRITONBACKEND_Request* request = nullptr;
  std::vector<InputData> inputs;  // in the spec's input order
  std::vector<size_t> outputs;    // indices into spec.outputs to return
  int64_t batch = 1;              // its share of the batch dim (1 when not batching)
  bool responded = false;         // its response has been sent
  bool done = false;              // statistics reported and released
};

std::string shape_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// Sends `message` as the request's error response (unless it has had its response), reports the
// failure and releases the request.
void fail_request(InstanceState* s, Pending* p, TRITONSERVER_Error_Code code,
                  const std::string& message, uint64_t exec_start) {
  if (p->done) return;
  p->done = true;
  TRITONSERVER_Error* e = nullptr;
  if (!p->responded) {
    p->responded = true;
    TRITONSERVER_Error* err = make_error(code, message);
    TRITONBACKEND_Response* response = nullptr;
    e = TRITONBACKEND_ResponseNew(&response, p->request);
    if (!e) e = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, err);
    if (e) {
      log_message(TRITONSERVER_LOG_ERROR, "model '" + s->model->name +
                                              "': could not send an error response (" +
                                              TRITONSERVER_ErrorMessage(e) + ") for: " + message);
      TRITONSERVER_ErrorDelete(e);
    }
    TRITONSERVER_ErrorDelete(err);
  }
  uint64_t end = now_ns();
  e = TRITONBACKEND_ModelInstanceReportStatistics(s->instance, p->request, false, exec_start,
                                                  exec_start, end, end);
  if (e) TRITONSERVER_ErrorDelete(e);
  e = TRITONBACKEND_RequestRelease(p->request, TRITONSERVER_REQUEST_RELEASE_ALL);
  if (e) TRITONSERVER_ErrorDelete(e);
}

// Reads and checks one request against the configuration: every input present once with the
// configured dtype and a shape that fits the dims (variable dims: any size), the same batch size
// for all inputs, the byte size the shape needs, host memory; requested outputs known. The
// server checks most of this too; this is the backend's own line (config dims left at -1 reach
// it unchecked).
std::string read_request(const ModelState& m, TRITONBACKEND_Request* request, Pending* p) {
  const ModelSpec& spec = m.spec;
  std::string ctx = "model '" + m.name + "'";
  auto take = [](TRITONSERVER_Error* e) {
    std::string msg = e ? TRITONSERVER_ErrorMessage(e) : "";
    if (e) TRITONSERVER_ErrorDelete(e);
    return msg;
  };
  uint32_t count = 0;
  std::string err = take(TRITONBACKEND_RequestInputCount(request, &count));
  if (!err.empty()) return ctx + ": " + err;
  if (count != spec.inputs.size())
    return ctx + ": the request has " + std::to_string(count) + " inputs, the model takes " +
           std::to_string(spec.inputs.size());
  p->inputs.assign(spec.inputs.size(), InputData());
  std::vector<bool> seen(spec.inputs.size(), false);
  bool batching = spec.max_batch_size > 0;
  for (uint32_t i = 0; i < count; ++i) {
    TRITONBACKEND_Input* input = nullptr;
    const char* name = nullptr;
    TRITONSERVER_DataType dtype = TRITONSERVER_TYPE_INVALID;
    const int64_t* shape = nullptr;
    uint32_t rank = 0, buffers = 0;
    uint64_t bytes = 0;
    err = take(TRITONBACKEND_RequestInputByIndex(request, i, &input));
    if (err.empty())
      err = take(
          TRITONBACKEND_InputProperties(input, &name, &dtype, &shape, &rank, &bytes, &buffers));
    if (!err.empty()) return ctx + ": " + err;
    size_t k = 0;
    while (k < spec.inputs.size() && spec.inputs[k].name != name) ++k;
    std::string where = ctx + ", input '" + std::string(name ? name : "") + "'";
    if (k == spec.inputs.size()) return where + ": the model has no input of that name";
    if (seen[k]) return where + ": given twice";
    seen[k] = true;
    const TensorSpec& t = spec.inputs[k];
    if (dtype != t.triton_dtype)
      return where + ": data type " + std::to_string(dtype) + " given, the model takes " +
             config_dtype_name(t.dtype);
    InputData& in = p->inputs[k];
    in.shape.assign(shape, shape + rank);
    size_t offset = batching ? 1 : 0;
    bool fits = rank == t.dims.size() + offset;
    for (size_t d = 0; fits && d < t.dims.size(); ++d)
      fits = in.shape[d + offset] >= 0 && (t.dims[d] < 0 || in.shape[d + offset] == t.dims[d]);
    if (!fits) {
      std::vector<int64_t> want(t.dims);
      if (batching) want.insert(want.begin(), -1);
      return where + ": shape " + shape_text(in.shape) + " does not fit the model's " +
             shape_text(want) + " (-1: any size)";
    }
    if (batching) {
      if (in.shape[0] < 1 || in.shape[0] > spec.max_batch_size)
        return where + ": batch size " + std::to_string(in.shape[0]) + " is outside 1.." +
               std::to_string(spec.max_batch_size);
    }
    uint64_t need = ferrite_dtype_size(t.dtype);
    for (int64_t d : in.shape)
      if (__builtin_mul_overflow(need, static_cast<uint64_t>(d), &need))
        return where + ": shape " + shape_text(in.shape) + " is too large";
    if (bytes != need)
      return where + ": " + std::to_string(bytes) + " bytes given, shape " + shape_text(in.shape) +
             " needs " + std::to_string(need);
    for (uint32_t b = 0; b < buffers; ++b) {
      const void* data = nullptr;
      uint64_t size = 0;
      TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
      int64_t mem_id = 0;
      err = take(TRITONBACKEND_InputBuffer(input, b, &data, &size, &mem, &mem_id));
      if (!err.empty()) return where + ": " + err;
      if (mem == TRITONSERVER_MEMORY_GPU)
        return where + ": the input is in GPU memory; the ferrite backend reads host memory";
      in.buffers.emplace_back(data, size);
    }
    in.bytes = bytes;
  }
  if (batching) {
    p->batch = p->inputs[0].shape[0];
    for (size_t k = 1; k < p->inputs.size(); ++k)
      if (p->inputs[k].shape[0] != p->batch)
        return ctx + ": inputs '" + spec.inputs[0].name + "' and '" + spec.inputs[k].name +
               "' have different batch sizes (" + std::to_string(p->batch) + " and " +
               std::to_string(p->inputs[k].shape[0]) + ")";
  }
  uint32_t outputs = 0;
  err = take(TRITONBACKEND_RequestOutputCount(request, &outputs));
  if (!err.empty()) return ctx + ": " + err;
  for (uint32_t i = 0; i < outputs; ++i) {
    const char* name = nullptr;
    err = take(TRITONBACKEND_RequestOutputName(request, i, &name));
    if (!err.empty()) return ctx + ": " + err;
    size_t k = 0;
    while (k < spec.outputs.size() && spec.outputs[k].name != name) ++k;
    if (k == spec.outputs.size())
      return ctx + ", output '" + std::string(name ? name : "") + "': no output of that name";
    p->outputs.push_back(k);
  }
  if (outputs == 0)  // none named: all of them
    for (size_t k = 0; k < spec.outputs.size(); ++k) p->outputs.push_back(k);
  return "";
}

// Requests can share a run when every input agrees in all dims but the batch dim.
std::string batch_key(const Pending& p, bool batching) {
  std::string key;
  for (const auto& in : p.inputs) {
    key += shape_text(std::vector<int64_t>(in.shape.begin() + (batching ? 1 : 0), in.shape.end()));
    key += ';';
  }
  return key;
}

struct ValueList {
  std::vector<ferrite_value*> values;
  ~ValueList() {
    for (auto* v : values) ferrite_value_release(v);
  }
};

// Copies one output's slice for each request of the run into its response and sends it.
std::string respond(InstanceState* s, std::vector<Pending*>& group, const ValueList& outputs,
                    int64_t total) {
  const ModelSpec& spec = s->model->spec;
  bool batching = spec.max_batch_size > 0;
  std::string ctx = "model '" + s->model->name + "'";
  std::vector<const char*> data(outputs.values.size());
  std::vector<std::vector<int64_t>> dims(outputs.values.size());
  std::vector<size_t> row_bytes(outputs.values.size());
  for (size_t k = 0; k < outputs.values.size(); ++k) {
    size_t rank = 0, bytes = 0;
    const int64_t* d = nullptr;
    void* p = nullptr;
    ferrite_status* st = ferrite_value_info(outputs.values[k], nullptr, &rank, &d, nullptr);
    if (!st) st = ferrite_value_data(outputs.values[k], &p, &bytes);
    if (st) {
      std::string msg = ferrite_status_message(st);
      ferrite_status_release(st);
      return ctx + ", output '" + spec.outputs[k].name + "': " + msg;
    }
    dims[k].assign(d, d + rank);
    data[k] = static_cast<const char*>(p);
    if (batching && (rank == 0 || dims[k][0] != total))
      return ctx + ", output '" + spec.outputs[k].name + "': shape " + shape_text(dims[k]) +
             " does not start with the batch size " + std::to_string(total);
    row_bytes[k] = batching ? bytes / static_cast<size_t>(total) : bytes;
  }
  int64_t row = 0;
  for (Pending* p : group) {
    TRITONBACKEND_Response* response = nullptr;
    TRITONSERVER_Error* err = TRITONBACKEND_ResponseNew(&response, p->request);
    for (size_t i = 0; !err && i < p->outputs.size(); ++i) {
      size_t k = p->outputs[i];
      std::vector<int64_t> shape = dims[k];
      if (batching) shape[0] = p->batch;
      size_t bytes = row_bytes[k] * static_cast<size_t>(p->batch);
      TRITONBACKEND_Output* output = nullptr;
      err = TRITONBACKEND_ResponseOutput(response, &output, spec.outputs[k].name.c_str(),
                                         spec.outputs[k].triton_dtype, shape.data(),
                                         static_cast<uint32_t>(shape.size()));
      void* buffer = nullptr;
      TRITONSERVER_MemoryType mem = TRITONSERVER_MEMORY_CPU;
      int64_t mem_id = 0;
      if (!err) err = TRITONBACKEND_OutputBuffer(output, &buffer, bytes, &mem, &mem_id);
      if (!err && mem == TRITONSERVER_MEMORY_GPU)
        err = make_error(
            TRITONSERVER_ERROR_UNSUPPORTED,
            ctx + ": the server gave a GPU output buffer; the backend writes host memory");
      if (!err && bytes) std::memcpy(buffer, data[k] + row_bytes[k] * row, bytes);
    }
    if (err) {
      std::string msg = ctx + ": " + TRITONSERVER_ErrorMessage(err);
      TRITONSERVER_ErrorDelete(err);
      if (response) {
        TRITONSERVER_Error* del = TRITONBACKEND_ResponseDelete(response);
        if (del) TRITONSERVER_ErrorDelete(del);
      }
      fail_request(s, p, TRITONSERVER_ERROR_INTERNAL, msg, now_ns());
    } else {
      p->responded = true;  // even if sending fails: the server owns the response now
      err = TRITONBACKEND_ResponseSend(response, TRITONSERVER_RESPONSE_COMPLETE_FINAL, nullptr);
      if (err) {
        log_message(TRITONSERVER_LOG_ERROR,
                    ctx + ": sending a response failed: " + TRITONSERVER_ErrorMessage(err));
        TRITONSERVER_ErrorDelete(err);
      }
    }
    row += p->batch;
  }
  return "";
}

// One ferrite run over the requests of `group` (same non-batch shapes).
void run_group(InstanceState* s, std::vector<Pending*>& group, uint64_t exec_start) {
  const ModelSpec& spec = s->model->spec;
  bool batching = spec.max_batch_size > 0;
  std::string ctx = "model '" + s->model->name + "'";
  auto fail_all = [&](TRITONSERVER_Error_Code code, const std::string& msg) {
    for (Pending* p : group) fail_request(s, p, code, msg, exec_start);
  };
  int64_t total = 0;
  for (Pending* p : group) total += p->batch;
  // Inputs: the request's own buffer when it is one request in one piece (no copy); otherwise
  // the pieces are concatenated in request order, which is the batch order.
  std::vector<std::vector<char>> staging(spec.inputs.size());
  ValueList inputs;
  std::vector<const char*> names;
  for (size_t k = 0; k < spec.inputs.size(); ++k) {
    const InputData& first = group[0]->inputs[k];
    std::vector<int64_t> dims = first.shape;
    if (batching) dims[0] = total;
    void* base = nullptr;
    size_t bytes = 0;
    if (group.size() == 1 && first.buffers.size() == 1) {
      base = const_cast<void*>(first.buffers[0].first);  // ferrite only reads inputs
      bytes = first.bytes;
    } else {
      for (Pending* p : group) bytes += p->inputs[k].bytes;
      staging[k].resize(bytes);
      size_t at = 0;
      for (Pending* p : group)
        for (const auto& [ptr, size] : p->inputs[k].buffers) {
          if (size) std::memcpy(staging[k].data() + at, ptr, size);
          at += size;
        }
      base = staging[k].data();
    }
    ferrite_value* v = nullptr;
    ferrite_status* st = ferrite_value_create(spec.inputs[k].dtype, dims.data(), dims.size(), base,
                                              bytes, FERRITE_MEMORY_HOST, &v);
    if (st) {
      std::string msg = ferrite_status_message(st);
      ferrite_status_release(st);
      return fail_all(TRITONSERVER_ERROR_INVALID_ARG,
                      ctx + ", input '" + spec.inputs[k].name + "': " + msg);
    }
    inputs.values.push_back(v);
    names.push_back(spec.inputs[k].name.c_str());
  }
  ValueList outputs;
  outputs.values.assign(spec.outputs.size(), nullptr);
  uint64_t compute_start = now_ns();
  ferrite_status* st = ferrite_session_run(s->session.get(), names.data(), inputs.values.data(),
                                           inputs.values.size(), outputs.values.data(),
                                           outputs.values.size(), nullptr, nullptr);
  uint64_t compute_end = now_ns();
  if (st) {
    TRITONSERVER_Error_Code code = ferrite_status_code(st) == FERRITE_INVALID_ARGUMENT
                                       ? TRITONSERVER_ERROR_INVALID_ARG
                                       : TRITONSERVER_ERROR_INTERNAL;
    std::string msg = ctx + ": the run failed: " + ferrite_status_message(st);
    ferrite_status_release(st);
    return fail_all(code, msg);
  }
  std::string err = respond(s, group, outputs, total);
  if (!err.empty()) return fail_all(TRITONSERVER_ERROR_INTERNAL, err);
  uint64_t exec_end = now_ns();
  for (Pending* p : group) {
    if (p->done) continue;  // its response failed and was reported as such
    p->done = true;
    TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceReportStatistics(
        s->instance, p->request, true, exec_start, compute_start, compute_end, exec_end);
    if (e) TRITONSERVER_ErrorDelete(e);
    e = TRITONBACKEND_RequestRelease(p->request, TRITONSERVER_REQUEST_RELEASE_ALL);
    if (e) TRITONSERVER_ErrorDelete(e);
  }
  TRITONSERVER_Error* e = TRITONBACKEND_ModelInstanceReportBatchStatistics(
      s->instance, static_cast<uint64_t>(total), exec_start, compute_start, compute_end, exec_end);
  if (e) TRITONSERVER_ErrorDelete(e);
}

}  // namespace

void execute_requests(InstanceState* s, TRITONBACKEND_Request** requests, uint32_t count) {
  uint64_t exec_start = now_ns();
  std::vector<Pending> pending(count);
  std::string ctx = "model '" + s->model->name + "'";
  try {
    bool batching = s->model->spec.max_batch_size > 0;
    std::map<std::string, std::vector<Pending*>> groups;
    std::vector<std::vector<Pending*>*> order;  // groups in the order of their first request
    for (uint32_t i = 0; i < count; ++i) pending[i].request = requests[i];
    for (uint32_t i = 0; i < count; ++i) {
      std::string err = read_request(*s->model, requests[i], &pending[i]);
      if (!err.empty()) {
        fail_request(s, &pending[i], TRITONSERVER_ERROR_INVALID_ARG, err, exec_start);
        continue;
      }
      // Without batching every request is a run of its own.
      std::string key = batching ? batch_key(pending[i], true) : std::to_string(i);
      auto [it, fresh] = groups.try_emplace(key);
      if (fresh) order.push_back(&it->second);
      it->second.push_back(&pending[i]);
    }
    for (auto* group : order) {
      try {
        run_group(s, *group, exec_start);
      } catch (const std::exception& e) {
        for (Pending* p : *group)
          fail_request(s, p, TRITONSERVER_ERROR_INTERNAL, ctx + ": " + e.what(), exec_start);
      }
    }
  } catch (const std::exception& e) {
    // Whatever has not been answered yet gets the error; answered requests are left alone.
    for (auto& p : pending)
      if (p.request)
        fail_request(s, &p, TRITONSERVER_ERROR_INTERNAL, ctx + ": " + e.what(), exec_start);
  }
}

}  // namespace ferrite::triton
