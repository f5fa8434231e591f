// libtriton_ferrite.so: the Triton Inference Server backend entry points. A model directory
// <model>/config.pbtxt (backend: "ferrite") + <model>/<version>/model.onnx is served by ferrite
// sessions through the C API (libferrite.so): the configuration is auto-completed from the ONNX
// model's inputs and outputs when the server allows it, each instance group maps to a device
// (KIND_CPU: cpu, KIND_GPU: cuda:<device id>), and execute.cpp runs the server's request batches.
// Every failure is returned as a TRITONSERVER_Error naming the model: a bad model or config fails
// that model's load, never the server.
#include <cstring>
#include <exception>
#include <filesystem>
#include <thread>

#include "serving/triton/backend_state.h"

namespace ferrite::triton {

TRITONSERVER_Error* from_ferrite(ferrite_status* status, const std::string& context) {
  if (!status) return nullptr;
  TRITONSERVER_Error_Code code = TRITONSERVER_ERROR_INTERNAL;
  switch (ferrite_status_code(status)) {
    case FERRITE_INVALID_ARGUMENT:
      code = TRITONSERVER_ERROR_INVALID_ARG;
      break;
    case FERRITE_NOT_FOUND:
      code = TRITONSERVER_ERROR_NOT_FOUND;
      break;
    case FERRITE_UNSUPPORTED:
    case FERRITE_INVALID_MODEL:
      code = TRITONSERVER_ERROR_UNSUPPORTED;
      break;
    case FERRITE_OUT_OF_MEMORY:
      code = TRITONSERVER_ERROR_UNAVAILABLE;
      break;
    default:
      break;
  }
  std::string msg = context + ": " + ferrite_status_message(status);
  ferrite_status_release(status);
  return make_error(code, msg);
}

void log_message(TRITONSERVER_LogLevel level, const std::string& msg, const char* file, int line) {
  const char* slash = std::strrchr(file, '/');
  TRITONSERVER_Error* err =
      TRITONSERVER_LogMessage(level, slash ? slash + 1 : file, line, msg.c_str());
  if (err) TRITONSERVER_ErrorDelete(err);  // a log line that cannot be written is not an error
}

namespace {

using nlohmann::json;

// Runs `body`, turning any exception into an error: nothing may unwind into the server.
template <class F>
TRITONSERVER_Error* guarded(const std::string& context, F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return make_error(TRITONSERVER_ERROR_UNAVAILABLE, context + ": out of memory");
  } catch (const std::exception& e) {
    return make_error(TRITONSERVER_ERROR_INTERNAL, context + ": " + e.what());
  } catch (...) {
    return make_error(TRITONSERVER_ERROR_INTERNAL, context + ": unknown exception");
  }
}

#define FERRITE_TRITON_RETURN_IF_ERROR(expr) \
  do {                                       \
    TRITONSERVER_Error* err__ = (expr);      \
    if (err__ != nullptr) return err__;      \
  } while (false)

TRITONSERVER_Error* read_config(TRITONBACKEND_Model* model, const std::string& name, json* out) {
  TRITONSERVER_Message* message = nullptr;
  FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelConfig(model, 1, &message));
  const char* base = nullptr;
  size_t size = 0;
  TRITONSERVER_Error* err = TRITONSERVER_MessageSerializeToJson(message, &base, &size);
  if (!err) {
    *out = json::parse(base, base + size, nullptr, /*allow_exceptions=*/false);
    if (out->is_discarded())
      err = make_error(TRITONSERVER_ERROR_INTERNAL,
                       "model '" + name + "': the server's configuration is not valid JSON");
  }
  TRITONSERVER_Error* del = TRITONSERVER_MessageDelete(message);
  if (del) TRITONSERVER_ErrorDelete(del);
  return err;
}

TRITONSERVER_Error* write_config(TRITONBACKEND_Model* model, const json& config) {
  std::string text = config.dump();
  TRITONSERVER_Message* message = nullptr;
  FERRITE_TRITON_RETURN_IF_ERROR(
      TRITONSERVER_MessageNewFromSerializedJson(&message, text.data(), text.size()));
  TRITONSERVER_Error* err = TRITONBACKEND_ModelSetConfig(model, 1, message);
  TRITONSERVER_Error* del = TRITONSERVER_MessageDelete(message);
  if (del) TRITONSERVER_ErrorDelete(del);
  return err;
}

// A session on `device` ("" = ferrite's best) with the model's options. On cpu the instances of
// the model share the cores: each context gets cores / instances threads unless `threads` says.
// A metadata-only session (reading the model's tensors) takes no options: a precision meant for
// the instances' device need not be one cpu accepts.
TRITONSERVER_Error* create_session(const ModelState& m, const std::string& device, SessionPtr* out,
                                   bool metadata_only = false) {
  std::string ctx = "model '" + m.name + "'" + (device.empty() ? "" : " on " + device);
  ferrite_session_options* raw = nullptr;
  FERRITE_TRITON_RETURN_IF_ERROR(from_ferrite(ferrite_session_options_create(&raw), ctx));
  std::unique_ptr<ferrite_session_options, void (*)(ferrite_session_options*)> opts(
      raw, ferrite_session_options_release);
  if (!device.empty())
    FERRITE_TRITON_RETURN_IF_ERROR(
        from_ferrite(ferrite_session_options_set_device(opts.get(), device.c_str()), ctx));
  if (!m.spec.precision.empty() && !metadata_only)
    FERRITE_TRITON_RETURN_IF_ERROR(from_ferrite(
        ferrite_session_options_set_precision(opts.get(), m.spec.precision.c_str()), ctx));
  const int instances = std::max(m.spec.instance_count, 1);
  if (is_host_device(device) && !metadata_only) {  // not for "": the default may be cuda
    int threads = m.spec.threads;
    if (threads == 0)
      threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / instances);
    FERRITE_TRITON_RETURN_IF_ERROR(
        from_ferrite(ferrite_session_options_set_threads(opts.get(), threads), ctx));
  }
  // One execution context per instance (on cuda each with a stream of its own), so that the
  // instances' executions overlap; made only when they do.
  if (!metadata_only && !device.empty())
    FERRITE_TRITON_RETURN_IF_ERROR(
        from_ferrite(ferrite_session_options_set_max_concurrency(opts.get(), instances), ctx));
  ferrite_session* session = nullptr;
  FERRITE_TRITON_RETURN_IF_ERROR(
      from_ferrite(ferrite_session_create(m.onnx_path.c_str(), opts.get(), &session), ctx));
  *out = SessionPtr(session, SessionDeleter());
  return nullptr;
}

// Reads the model's inputs and outputs, completes the configuration from them when the server
// allows it (strict model config off), then validates the final configuration.
TRITONSERVER_Error* load_spec(TRITONBACKEND_Model* model, ModelState* m, json config) {
  std::string ctx = "model '" + m->name + "'";
  SessionPtr probe;  // metadata only: the instances create the sessions they run on
  FERRITE_TRITON_RETURN_IF_ERROR(create_session(*m, "cpu", &probe, /*metadata_only=*/true));
  std::string err = read_model_io(probe.get(), true, &m->inputs);
  if (err.empty()) err = read_model_io(probe.get(), false, &m->outputs);
  if (!err.empty()) return make_error(TRITONSERVER_ERROR_UNSUPPORTED, ctx + ": " + err);
  bool auto_complete_allowed = false;
  FERRITE_TRITON_RETURN_IF_ERROR(
      TRITONBACKEND_ModelAutoCompleteConfig(model, &auto_complete_allowed));
  if (auto_complete_allowed) {
    bool changed = false;
    err = auto_complete(&config, m->inputs, m->outputs, kDefaultMaxBatchSize, &changed);
    if (!err.empty()) return make_error(TRITONSERVER_ERROR_INVALID_ARG, ctx + ": " + err);
    if (changed) {
      FERRITE_TRITON_RETURN_IF_ERROR(write_config(model, config));
      // The server may add fields of its own: continue from its version.
      FERRITE_TRITON_RETURN_IF_ERROR(read_config(model, m->name, &config));
      log_message(TRITONSERVER_LOG_INFO,
                  ctx + ": configuration auto-completed from the model: " + config.dump());
    }
  }
  err = parse_spec(m->name, config, m->inputs, m->outputs, &m->spec);
  if (err.empty()) err = parse_deployment(m->name, config, &m->spec);
  if (!err.empty()) return make_error(TRITONSERVER_ERROR_INVALID_ARG, err);
  return nullptr;
}

// One run with zero inputs at batch 1, so that the compile happens at load time (a model ferrite
// cannot run fails its load here) instead of in the first request. Skipped when a non-batch dim
// is not fixed: there is no shape to compile for yet.
TRITONSERVER_Error* warm_up(const InstanceState& s) {
  const ModelSpec& spec = s.model->spec;
  for (const auto& in : spec.inputs)
    for (int64_t d : in.dims)
      if (d < 0) return nullptr;
  struct Values {
    std::vector<ferrite_value*> v;
    ~Values() {
      for (auto* x : v) ferrite_value_release(x);
    }
  } inputs, outputs;
  std::vector<const char*> names;
  for (const auto& in : spec.inputs) {
    std::vector<int64_t> dims(in.dims);
    if (spec.max_batch_size > 0) dims.insert(dims.begin(), 1);
    ferrite_value* v = nullptr;
    FERRITE_TRITON_RETURN_IF_ERROR(
        from_ferrite(ferrite_value_allocate(in.dtype, dims.data(), dims.size(), &v),
                     "model '" + s.model->name + "', warm-up input '" + in.name + "'"));
    inputs.v.push_back(v);
    names.push_back(in.name.c_str());
  }
  outputs.v.assign(spec.outputs.size(), nullptr);
  return from_ferrite(
      ferrite_session_run(s.session.get(), names.data(), inputs.v.data(), inputs.v.size(),
                          outputs.v.data(), outputs.v.size(), nullptr, nullptr),
      "model '" + s.model->name + "': warm-up run on " + s.device);
}

}  // namespace
}  // namespace ferrite::triton

using namespace ferrite::triton;

extern "C" {

TRITONSERVER_Error* TRITONBACKEND_Initialize(TRITONBACKEND_Backend* backend) {
  return guarded("ferrite backend", [&]() -> TRITONSERVER_Error* {
    uint32_t major = 0, minor = 0;
    FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ApiVersion(&major, &minor));
    if (major != kTritonBackendApiMajor)
      return make_error(TRITONSERVER_ERROR_UNSUPPORTED,
                        "ferrite backend: the server's backend API is " + std::to_string(major) +
                            "." + std::to_string(minor) + ", this backend is built for " +
                            std::to_string(kTritonBackendApiMajor) + ".x");
    int fmajor = 0, fminor = 0;
    ferrite_api_version(&fmajor, &fminor);
    if (fmajor != FERRITE_API_VERSION_MAJOR)
      return make_error(TRITONSERVER_ERROR_UNSUPPORTED,
                        "ferrite backend: libferrite API " + std::to_string(fmajor) +
                            " loaded, built against " + std::to_string(FERRITE_API_VERSION_MAJOR));
    log_message(TRITONSERVER_LOG_INFO,
                "ferrite backend: ferrite " + std::string(ferrite_version_string()) +
                    ", server backend API " + std::to_string(major) + "." + std::to_string(minor));
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInitialize(TRITONBACKEND_Model* model) {
  const char* name = nullptr;
  FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelName(model, &name));
  std::string ctx = std::string("model '") + name + "'";
  return guarded(ctx, [&]() -> TRITONSERVER_Error* {
    auto m = std::make_unique<ModelState>();
    m->name = name;
    FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelVersion(model, &m->version));
    TRITONBACKEND_ArtifactType artifact = TRITONBACKEND_ARTIFACT_FILESYSTEM;
    const char* repo = nullptr;
    FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelRepository(model, &artifact, &repo));
    if (artifact != TRITONBACKEND_ARTIFACT_FILESYSTEM)
      return make_error(TRITONSERVER_ERROR_UNSUPPORTED, ctx + ": only file-system repositories");
    json config;
    FERRITE_TRITON_RETURN_IF_ERROR(read_config(model, m->name, &config));
    std::string file = config.value("default_model_filename", std::string());
    if (file.empty()) file = "model.onnx";
    m->onnx_path = (std::filesystem::path(repo) / std::to_string(m->version) / file).string();
    std::error_code ec;
    if (!std::filesystem::is_regular_file(m->onnx_path, ec))
      return make_error(TRITONSERVER_ERROR_NOT_FOUND, ctx + ": " + m->onnx_path + " not found");
    std::string err = parse_deployment(m->name, config, &m->spec);
    if (!err.empty()) return make_error(TRITONSERVER_ERROR_INVALID_ARG, err);
    FERRITE_TRITON_RETURN_IF_ERROR(load_spec(model, m.get(), std::move(config)));
    FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelSetState(model, m.get()));
    m.release();  // owned by the server's model until TRITONBACKEND_ModelFinalize
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelFinalize(TRITONBACKEND_Model* model) {
  void* state = nullptr;
  FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &state));
  delete static_cast<ModelState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceInitialize(TRITONBACKEND_ModelInstance* instance) {
  TRITONBACKEND_Model* model = nullptr;
  FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceModel(instance, &model));
  void* mstate = nullptr;
  FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelState(model, &mstate));
  auto* m = static_cast<ModelState*>(mstate);
  return guarded("model '" + m->name + "'", [&]() -> TRITONSERVER_Error* {
    auto s = std::make_unique<InstanceState>();
    s->model = m;
    s->instance = instance;
    const char* name = nullptr;
    FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceName(instance, &name));
    s->name = name ? name : "";
    TRITONSERVER_InstanceGroupKind kind = TRITONSERVER_INSTANCEGROUPKIND_AUTO;
    int32_t device_id = 0;
    FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceKind(instance, &kind));
    FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceDeviceId(instance, &device_id));
    std::string err = instance_device(m->name, m->spec.device, kind, device_id, &s->device);
    if (!err.empty()) return make_error(TRITONSERVER_ERROR_INVALID_ARG, err);
    {
      std::lock_guard<std::mutex> lock(m->mu);
      auto it = m->sessions.find(s->device);
      if (it == m->sessions.end()) {
        SessionPtr session;
        FERRITE_TRITON_RETURN_IF_ERROR(create_session(*m, s->device, &session));
        it = m->sessions.emplace(s->device, std::move(session)).first;
      }
      s->session = it->second;
    }
    FERRITE_TRITON_RETURN_IF_ERROR(warm_up(*s));
    const char* device = nullptr;
    ferrite_status_release(ferrite_session_device(s->session.get(), &device, nullptr));
    log_message(TRITONSERVER_LOG_INFO, "model '" + m->name + "' instance " + s->name +
                                           ": ferrite session on " + (device ? device : s->device));
    FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceSetState(instance, s.get()));
    s.release();  // owned by the server's instance until TRITONBACKEND_ModelInstanceFinalize
    return nullptr;
  });
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceFinalize(TRITONBACKEND_ModelInstance* instance) {
  void* state = nullptr;
  FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
  delete static_cast<InstanceState*>(state);
  return nullptr;
}

TRITONSERVER_Error* TRITONBACKEND_ModelInstanceExecute(TRITONBACKEND_ModelInstance* instance,
                                                       TRITONBACKEND_Request** requests,
                                                       const uint32_t request_count) {
  void* state = nullptr;
  // Before the requests are taken over: an error here leaves them with the server.
  FERRITE_TRITON_RETURN_IF_ERROR(TRITONBACKEND_ModelInstanceState(instance, &state));
  execute_requests(static_cast<InstanceState*>(state), requests, request_count);
  return nullptr;  // each request has had its response, errors included
}

}  // extern "C"
