// The Triton model configuration as the ferrite backend reads it: auto-completion from the ONNX
// model's inputs and outputs, and validation of a (completed) configuration against the model.
// Independent of the server: functions take the configuration as JSON (the form
// TRITONBACKEND_ModelConfig hands out) and the model's inputs and outputs as read from a ferrite
// session, and return an error message rather than throwing (an empty string is success), so a
// bad config.pbtxt fails that model's load with a message, never the server.
#pragma once

#include <ferrite/ferrite.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "serving/triton/triton_api.h"

namespace ferrite::triton {

// An input or output as the ONNX model declares it: -1 marks a dim that is not a fixed number
// (its symbol, e.g. "batch", in `symbols`; "" for an unnamed one).
struct ModelIo {
  std::string name;
  ferrite_dtype dtype = FERRITE_DTYPE_UNDEFINED;
  std::vector<int64_t> dims;
  std::vector<std::string> symbols;
};

// Reads the session's inputs (input=true) or outputs; "" on success, else why not.
std::string read_model_io(const ferrite_session* session, bool input, std::vector<ModelIo>* out);

// An input or output of the configuration. `dims` excludes the batch dim when the model batches
// (max_batch_size > 0), as in config.pbtxt; -1 is a variable dim.
struct TensorSpec {
  std::string name;
  ferrite_dtype dtype = FERRITE_DTYPE_UNDEFINED;
  TRITONSERVER_DataType triton_dtype = TRITONSERVER_TYPE_INVALID;
  std::vector<int64_t> dims;
};

// What the backend takes from a validated configuration.
struct ModelSpec {
  int64_t max_batch_size = 0;
  std::vector<TensorSpec> inputs;
  std::vector<TensorSpec> outputs;  // every output of the model, in the model's order
  // parameters { key: "device" | "threads" | "precision" }; empty / 0: ferrite's default.
  std::string device;
  std::string precision;
  int threads = 0;
  int instance_count = 1;  // instances over all instance groups (for the thread split)
};

// ferrite dtype <-> Triton's, and the config spelling ("TYPE_FP32"). Unknown: INVALID / "".
TRITONSERVER_DataType to_triton_dtype(ferrite_dtype dtype);
ferrite_dtype from_triton_dtype(TRITONSERVER_DataType dtype);
std::string config_dtype_name(ferrite_dtype dtype);
ferrite_dtype from_config_dtype_name(const std::string& name);

// Whether every input and output of the model has a first dim that is not fixed, all with the
// same symbol: the requests of a batch can then be concatenated along it without a recompile.
bool model_can_batch(const std::vector<ModelIo>& inputs, const std::vector<ModelIo>& outputs);

// Fills what the configuration leaves out from the model: max_batch_size (when neither inputs
// nor outputs are listed and the model can batch: `default_max_batch`), the inputs and outputs
// (names, data types, dims; missing entries only) and dynamic batching for a batching model with
// no scheduler chosen. `changed` says whether anything was added.
std::string auto_complete(nlohmann::json* config, const std::vector<ModelIo>& inputs,
                          const std::vector<ModelIo>& outputs, int64_t default_max_batch,
                          bool* changed);

// The deployment part of the spec, which the session needs before the model's tensors are known:
// parameters (device, threads, precision; an unknown key is an error, so a typo is not ignored)
// and the instance count over all instance groups.
std::string parse_deployment(const std::string& model, const nlohmann::json& config,
                             ModelSpec* spec);

// Checks the configuration's tensors and max_batch_size against the model and fills the rest of
// the spec. `model` names the model in every message.
std::string parse_spec(const std::string& model, const nlohmann::json& config,
                       const std::vector<ModelIo>& inputs, const std::vector<ModelIo>& outputs,
                       ModelSpec* spec);

// Whether `device` names a host-memory cpu device ("cpu", "cpu:N"); "" (ferrite's default) is not.
bool is_host_device(const std::string& device);

// The device an instance runs on, from its group's kind and device id and the `device`
// parameter (`param`, "" if none): KIND_GPU selects cuda:<device id> ("cuda" as the parameter
// gets the id appended, "cuda:N" is kept, anything else is an error); KIND_CPU cpu (or a cpu
// parameter); other kinds the parameter, "" meaning ferrite's default.
std::string instance_device(const std::string& model, const std::string& param,
                            TRITONSERVER_InstanceGroupKind kind, int32_t device_id,
                            std::string* out);

}  // namespace ferrite::triton
