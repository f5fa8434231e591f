// State the ferrite Triton backend keeps per model and per model instance, and the helpers every
// part of it uses to turn failures into TRITONSERVER_Error values and log lines.
#pragma once

#include <ferrite/ferrite.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "serving/triton/model_config.h"
#include "serving/triton/triton_api.h"

namespace ferrite::triton {

// Configurations that list no tensors and come from a model with a symbolic batch dim get this
// max_batch_size: requests are concatenated along that dim, so a batch costs no recompile.
constexpr int64_t kDefaultMaxBatchSize = 64;

struct SessionDeleter {
  void operator()(ferrite_session* s) const { ferrite_session_release(s); }
};
using SessionPtr = std::shared_ptr<ferrite_session>;

struct ModelState {
  std::string name;
  uint64_t version = 0;
  std::string onnx_path;
  ModelSpec spec;
  std::vector<ModelIo> inputs;
  std::vector<ModelIo> outputs;
  // One session per device, shared by the instances on it: a session serves concurrent runs
  // (one execution context each), so the weights are held once per device, not per instance.
  std::mutex mu;
  std::map<std::string, SessionPtr> sessions;
};

struct InstanceState {
  ModelState* model = nullptr;
  TRITONBACKEND_ModelInstance* instance = nullptr;
  std::string name;
  std::string device;
  SessionPtr session;
};

inline TRITONSERVER_Error* make_error(TRITONSERVER_Error_Code code, const std::string& msg) {
  return TRITONSERVER_ErrorNew(code, msg.c_str());
}

// A ferrite status as a server error (NULL for success); releases the status.
TRITONSERVER_Error* from_ferrite(ferrite_status* status, const std::string& context);

// Logged with the caller's file and line (GCC/Clang builtins as default arguments).
void log_message(TRITONSERVER_LogLevel level, const std::string& msg,
                 const char* file = __builtin_FILE(), int line = __builtin_LINE());

inline uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Runs a batch of requests on an instance (execute.cpp). Every request gets a response (an error
// response for a request that cannot run) and is released; nothing escapes as an exception.
void execute_requests(InstanceState* state, TRITONBACKEND_Request** requests, uint32_t count);

}  // namespace ferrite::triton
