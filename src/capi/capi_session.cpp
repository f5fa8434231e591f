// The C API (include/ferrite/ferrite.h): statuses, versions, the environment, session options,
// sessions and their input/output metadata. Runs and values are capi_run.cpp. Every function is
// a thin layer over runtime/session.h; each body runs inside `guarded` so no exception escapes.
#include <filesystem>

#include "capi/capi_internal.h"
#include "frontend/onnx/importer.h"
#include "runtime/compile_cache.h"
#include "runtime/precision.h"

namespace fs = std::filesystem;
using ferrite::capi::from_status;
using ferrite::capi::guarded;
using ferrite::capi::make_status;

namespace ferrite::capi {

namespace {
// Returned when even a status cannot be allocated; never freed.
ferrite_status g_out_of_memory{FERRITE_OUT_OF_MEMORY, "out of memory"};
}  // namespace

ferrite_status* make_status(ferrite_code code, std::string message) {
  try {
    return new ferrite_status{code, std::move(message)};
  } catch (...) {
    return &g_out_of_memory;
  }
}

ferrite_status* from_status(const Status& s, ferrite_code code) {
  if (s) return nullptr;
  return make_status(s.is_unsupported() ? FERRITE_UNSUPPORTED : code, s.message());
}

bool is_static_status(const ferrite_status* s) {
  return s == &g_out_of_memory;
}

std::optional<DType> to_ir_dtype(ferrite_dtype d) {
  if (d == FERRITE_DTYPE_UNDEFINED) return std::nullopt;
  return dtype_from_onnx(static_cast<int>(d));
}

ferrite_dtype to_c_dtype(DType d) {
  switch (dtype_to_onnx(d)) {
    case 1:
    case 2:
    case 3:
    case 4:
    case 5:
    case 6:
    case 7:
    case 9:
    case 10:
    case 11:
    case 12:
    case 13:
    case 16:
      return static_cast<ferrite_dtype>(dtype_to_onnx(d));
    default:
      return FERRITE_DTYPE_UNDEFINED;
  }
}

}  // namespace ferrite::capi

namespace {

using ferrite::Dim;
using ferrite::Value;

std::vector<ferrite_session::Io> describe(const std::vector<Value*>& values) {
  std::vector<ferrite_session::Io> out;
  for (const Value* v : values) {
    ferrite_session::Io io;
    io.name = v->name;
    io.ir_dtype = v->type.dtype;
    io.dtype = ferrite::capi::to_c_dtype(v->type.dtype);
    const ferrite::Shape& shape = v->type.shape;
    if (shape.rank_known()) {
      io.rank = static_cast<int>(shape.rank());
      for (const Dim& d : shape.dims()) {
        auto fixed = d.value();
        io.dims.push_back(fixed ? *fixed : -1);
        io.symbols.push_back(fixed ? std::string() : d.to_string());
      }
    }
    out.push_back(std::move(io));
  }
  return out;
}

// The session's options applied to the process (the cache is process-wide) and to the run.
ferrite_status* finish_session(std::unique_ptr<ferrite::Graph> graph, const std::string& label,
                               const ferrite_session_options* options, ferrite_session** out) {
  ferrite_session_options defaults;
  const ferrite_session_options& o = options ? *options : defaults;
  if (!o.cache_dir.empty())
    if (auto s = from_status(ferrite::CompileCache::set_global_dir(o.cache_dir),
                             FERRITE_INVALID_ARGUMENT))
      return s;
  // "cuda:1" is unit 1 of "cuda" (a Triton KIND_GPU instance names its GPU so).
  std::string base = o.device;
  if (size_t colon = base.rfind(':');
      colon != std::string::npos && colon + 1 < base.size() &&
      base.find_first_not_of("0123456789", colon + 1) == std::string::npos)
    base.resize(colon);
  if (!o.device.empty() && ferrite::DeviceRegistry::global().origin(base).empty()) {
    std::string known;
    for (const auto& n : ferrite::DeviceRegistry::global().names())
      known += (known.empty() ? "" : ", ") + n;
    return make_status(FERRITE_INVALID_ARGUMENT,
                       "unknown device '" + o.device + "' (available: " + known + ")");
  }
  auto session = ferrite::Session::from_graph(std::move(graph), o.device, o.run);
  if (!session) return from_status(session.status(), FERRITE_RUNTIME_ERROR);
  auto h = std::make_unique<ferrite_session>();
  h->session = std::move(session).value();
  h->session->set_label(label);
  h->device = h->session->device().name();
  // Declared inputs (not the constants an initializer also lists) and outputs.
  h->inputs = describe(h->session->graph().inputs());
  h->outputs = describe(h->session->graph().outputs());
  *out = h.release();
  return nullptr;
}

const ferrite_session::Io* io_at(const ferrite_session* s, bool input, size_t index) {
  const auto& v = input ? s->inputs : s->outputs;
  return index < v.size() ? &v[index] : nullptr;
}

ferrite_status* io_info(const ferrite_session* session, bool input, size_t index, const char** name,
                        ferrite_dtype* dtype, int* rank) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(session, "session is NULL");
    const auto* io = io_at(session, input, index);
    if (!io)
      return make_status(FERRITE_NOT_FOUND, std::string(input ? "input" : "output") + " index " +
                                                std::to_string(index) + " out of range");
    if (name) *name = io->name.c_str();
    if (dtype) *dtype = io->dtype;
    if (rank) *rank = io->rank;
    return nullptr;
  });
}

ferrite_status* io_dim(const ferrite_session* session, bool input, size_t index, int dim,
                       int64_t* size, const char** symbol) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(session, "session is NULL");
    const auto* io = io_at(session, input, index);
    if (!io || dim < 0 || dim >= io->rank)
      return make_status(FERRITE_NOT_FOUND, std::string(input ? "input" : "output") + " index " +
                                                std::to_string(index) + " dim " +
                                                std::to_string(dim) + " out of range");
    if (size) *size = io->dims[dim];
    if (symbol) *symbol = io->symbols[dim].empty() ? nullptr : io->symbols[dim].c_str();
    return nullptr;
  });
}

}  // namespace

extern "C" {

ferrite_code ferrite_status_code(const ferrite_status* status) {
  return status ? status->code : FERRITE_OK;
}

const char* ferrite_status_message(const ferrite_status* status) {
  return status ? status->message.c_str() : "";
}

void ferrite_status_release(ferrite_status* status) {
  if (status && !ferrite::capi::is_static_status(status)) delete status;
}

void ferrite_api_version(int* major, int* minor) {
  if (major) *major = FERRITE_API_VERSION_MAJOR;
  if (minor) *minor = FERRITE_API_VERSION_MINOR;
}

const char* ferrite_version_string(void) {
  static const std::string v(ferrite::ferrite_version());
  return v.c_str();
}

size_t ferrite_dtype_size(ferrite_dtype dtype) {
  auto d = ferrite::capi::to_ir_dtype(dtype);
  return d ? ferrite::dtype_size(*d) : 0;
}

ferrite_status* ferrite_env_create(ferrite_env** out) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(out, "out is NULL");
    auto env = std::make_unique<ferrite_env>();
    auto& reg = ferrite::DeviceRegistry::global();
    for (const auto& name : reg.names()) {
      ferrite_env::Device d;
      d.name = name;
      auto dev = reg.create(name);
      ferrite::Status s = dev ? (*dev)->available() : dev.status();
      d.usable = s.is_ok();
      d.detail = d.usable ? (*dev)->description() : s.message();
      env->devices.push_back(std::move(d));
    }
    env->default_device = ferrite::default_device(&env->default_why);
    *out = env.release();
    return nullptr;
  });
}

void ferrite_env_release(ferrite_env* env) {
  delete env;
}

ferrite_status* ferrite_env_device_count(const ferrite_env* env, size_t* count) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(env && count, "env or count is NULL");
    *count = env->devices.size();
    return nullptr;
  });
}

ferrite_status* ferrite_env_device(const ferrite_env* env, size_t index, const char** name,
                                   int* usable, const char** detail) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(env, "env is NULL");
    if (index >= env->devices.size())
      return make_status(FERRITE_NOT_FOUND, "device index " + std::to_string(index) +
                                                " out of range (" +
                                                std::to_string(env->devices.size()) + " devices)");
    const auto& d = env->devices[index];
    if (name) *name = d.name.c_str();
    if (usable) *usable = d.usable ? 1 : 0;
    if (detail) *detail = d.detail.c_str();
    return nullptr;
  });
}

ferrite_status* ferrite_env_default_device(const ferrite_env* env, const char** name,
                                           const char** why) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(env, "env is NULL");
    if (name) *name = env->default_device.c_str();
    if (why) *why = env->default_why.c_str();
    return nullptr;
  });
}

ferrite_status* ferrite_session_options_create(ferrite_session_options** out) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(out, "out is NULL");
    *out = new ferrite_session_options();
    return nullptr;
  });
}

void ferrite_session_options_release(ferrite_session_options* options) {
  delete options;
}

ferrite_status* ferrite_session_options_set_device(ferrite_session_options* options,
                                                   const char* device) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(options, "options is NULL");
    options->device = device ? device : "";
    return nullptr;
  });
}

ferrite_status* ferrite_session_options_set_precision(ferrite_session_options* options,
                                                      const char* precision) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(options && precision, "options or precision is NULL");
    auto p = ferrite::precision_from_name(precision);
    if (!p)
      return make_status(FERRITE_INVALID_ARGUMENT, std::string("precision must be f32, tf32, "
                                                               "bf16 or fp16, got '") +
                                                       precision + "'");
    options->run.precision = *p;
    return nullptr;
  });
}

ferrite_status* ferrite_session_options_set_threads(ferrite_session_options* options, int threads) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(options, "options is NULL");
    FERRITE_CAPI_REQUIRE(threads >= 0 && threads <= 4096, "threads must be in 0..4096");
    options->run.threads = threads;
    return nullptr;
  });
}

ferrite_status* ferrite_session_options_set_max_concurrency(ferrite_session_options* options,
                                                            int contexts) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(options, "options is NULL");
    FERRITE_CAPI_REQUIRE(contexts >= 0 && contexts <= 1024, "max_concurrency must be in 0..1024");
    options->run.contexts = contexts;
    return nullptr;
  });
}

ferrite_status* ferrite_session_options_set_cache_dir(ferrite_session_options* options,
                                                      const char* dir) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(options, "options is NULL");
    options->cache_dir = dir ? dir : "";
    return nullptr;
  });
}

ferrite_status* ferrite_session_options_set_autotune(ferrite_session_options* options, int enable) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(options, "options is NULL");
    options->run.autotune = enable != 0;
    return nullptr;
  });
}

ferrite_status* ferrite_session_options_set_passes(ferrite_session_options* options,
                                                   const char* passes) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(options, "options is NULL");
    if (!passes) {
      options->run.passes.reset();
      return nullptr;
    }
    // Names are checked when the session compiles (an unknown pass fails session creation).
    std::vector<std::string> list;
    std::string s = passes;
    for (size_t pos = 0; pos <= s.size();) {
      size_t end = s.find(',', pos);
      if (end == std::string::npos) end = s.size();
      if (end > pos) list.push_back(s.substr(pos, end - pos));
      pos = end + 1;
    }
    options->run.passes = std::move(list);
    return nullptr;
  });
}

ferrite_status* ferrite_session_create(const char* model_path,
                                       const ferrite_session_options* options,
                                       ferrite_session** out) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(model_path && out, "model_path or out is NULL");
    *out = nullptr;
    std::error_code ec;
    if (!fs::is_regular_file(model_path, ec))
      return make_status(FERRITE_NOT_FOUND,
                         std::string("model file '") + model_path + "' not found");
    auto graph = ferrite::import_onnx_file(model_path);
    if (!graph) return from_status(graph.status(), FERRITE_INVALID_MODEL);
    return finish_session(std::move(graph).value(), fs::path(model_path).filename().string(),
                          options, out);
  });
}

ferrite_status* ferrite_session_create_from_memory(const void* data, size_t size,
                                                   const ferrite_session_options* options,
                                                   ferrite_session** out) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(data && out, "data or out is NULL");
    *out = nullptr;
    FERRITE_CAPI_REQUIRE(size > 0, "the model buffer is empty");
    std::string bytes(static_cast<const char*>(data), size);
    auto graph = ferrite::import_onnx_bytes(bytes, fs::path());
    if (!graph) return from_status(graph.status(), FERRITE_INVALID_MODEL);
    return finish_session(std::move(graph).value(), "model", options, out);
  });
}

void ferrite_session_release(ferrite_session* session) {
  delete session;
}

ferrite_status* ferrite_session_device(const ferrite_session* session, const char** name,
                                       int* chosen) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(session, "session is NULL");
    if (name) *name = session->device.c_str();
    if (chosen) *chosen = session->session->device_chosen() ? 1 : 0;
    return nullptr;
  });
}

ferrite_status* ferrite_session_compiles(const ferrite_session* session, int* count) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(session && count, "session or count is NULL");
    *count = session->session->compiles();
    return nullptr;
  });
}

ferrite_status* ferrite_session_input_count(const ferrite_session* session, size_t* count) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(session && count, "session or count is NULL");
    *count = session->inputs.size();
    return nullptr;
  });
}

ferrite_status* ferrite_session_output_count(const ferrite_session* session, size_t* count) {
  return guarded([&]() -> ferrite_status* {
    FERRITE_CAPI_REQUIRE(session && count, "session or count is NULL");
    *count = session->outputs.size();
    return nullptr;
  });
}

ferrite_status* ferrite_session_input_info(const ferrite_session* session, size_t index,
                                           const char** name, ferrite_dtype* dtype, int* rank) {
  return io_info(session, true, index, name, dtype, rank);
}

ferrite_status* ferrite_session_output_info(const ferrite_session* session, size_t index,
                                            const char** name, ferrite_dtype* dtype, int* rank) {
  return io_info(session, false, index, name, dtype, rank);
}

ferrite_status* ferrite_session_input_dim(const ferrite_session* session, size_t index, int dim,
                                          int64_t* size, const char** symbol) {
  return io_dim(session, true, index, dim, size, symbol);
}

ferrite_status* ferrite_session_output_dim(const ferrite_session* session, size_t index, int dim,
                                           int64_t* size, const char** symbol) {
  return io_dim(session, false, index, dim, size, symbol);
}

}  // extern "C"
