// Auto-completion and validation of Triton model configurations for the ferrite backend (see
// model_config.h). The configuration arrives as the JSON form of Triton's ModelConfig protobuf;
// int64 fields (dims, counts) may be JSON numbers or strings (protobuf's JSON mapping writes int64
// as strings), so every integer is read through json_int.
#include "serving/triton/model_config.h"

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <set>

namespace ferrite::triton {
namespace {

using nlohmann::json;

struct DtypeRow {
  ferrite_dtype ferrite;
  TRITONSERVER_DataType triton;
  const char* config;
};
// The types both sides have. BYTES (strings) has no ferrite counterpart.
constexpr DtypeRow kDtypes[] = {
    {FERRITE_DTYPE_BOOL, TRITONSERVER_TYPE_BOOL, "TYPE_BOOL"},
    {FERRITE_DTYPE_UINT8, TRITONSERVER_TYPE_UINT8, "TYPE_UINT8"},
    {FERRITE_DTYPE_UINT16, TRITONSERVER_TYPE_UINT16, "TYPE_UINT16"},
    {FERRITE_DTYPE_UINT32, TRITONSERVER_TYPE_UINT32, "TYPE_UINT32"},
    {FERRITE_DTYPE_UINT64, TRITONSERVER_TYPE_UINT64, "TYPE_UINT64"},
    {FERRITE_DTYPE_INT8, TRITONSERVER_TYPE_INT8, "TYPE_INT8"},
    {FERRITE_DTYPE_INT16, TRITONSERVER_TYPE_INT16, "TYPE_INT16"},
    {FERRITE_DTYPE_INT32, TRITONSERVER_TYPE_INT32, "TYPE_INT32"},
    {FERRITE_DTYPE_INT64, TRITONSERVER_TYPE_INT64, "TYPE_INT64"},
    {FERRITE_DTYPE_FLOAT16, TRITONSERVER_TYPE_FP16, "TYPE_FP16"},
    {FERRITE_DTYPE_FLOAT32, TRITONSERVER_TYPE_FP32, "TYPE_FP32"},
    {FERRITE_DTYPE_FLOAT64, TRITONSERVER_TYPE_FP64, "TYPE_FP64"},
    {FERRITE_DTYPE_BFLOAT16, TRITONSERVER_TYPE_BF16, "TYPE_BF16"},
};

// An integer field: a JSON number, or a string of digits (protobuf's int64 spelling).
bool json_int(const json& v, int64_t* out) {
  if (v.is_number_integer()) {
    *out = v.get<int64_t>();
    return true;
  }
  if (v.is_string()) {
    const std::string& s = v.get_ref<const std::string&>();
    char* end = nullptr;
    long long x = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0') return false;
    *out = x;
    return true;
  }
  return false;
}

std::string dims_text(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

const ModelIo* find_io(const std::vector<ModelIo>& ios, const std::string& name) {
  for (const auto& io : ios)
    if (io.name == name) return &io;
  return nullptr;
}

// The configuration's view of a model tensor: the dims without the batch dim when batching.
json config_entry(const ModelIo& io, bool batching) {
  std::vector<int64_t> dims(io.dims.begin() + (batching ? 1 : 0), io.dims.end());
  return json{{"name", io.name}, {"data_type", config_dtype_name(io.dtype)}, {"dims", dims}};
}

// Adds the model's tensors that `list` (config "input"/"output") lacks, and fills data_type /
// dims of entries that name a model tensor without them.
void complete_list(json* list, const std::vector<ModelIo>& ios, bool batching, bool* changed) {
  if (!list->is_array()) *list = json::array();
  for (const auto& io : ios) {
    auto it = std::find_if(list->begin(), list->end(), [&](const json& e) {
      return e.is_object() && e.value("name", std::string()) == io.name;
    });
    json full = config_entry(io, batching);
    if (it == list->end()) {
      list->push_back(full);
      *changed = true;
      continue;
    }
    for (const char* key : {"data_type", "dims"}) {
      bool missing = !it->contains(key) || (*it)[key].is_null() ||
                     (std::string(key) == "data_type" && (*it)[key] == "TYPE_INVALID") ||
                     (std::string(key) == "dims" && (*it)[key].empty());
      if (missing) {
        (*it)[key] = full[key];
        *changed = true;
      }
    }
  }
}

// One config input/output checked against the model tensor of that name.
std::string check_tensor(const std::string& where, const json& e, const ModelIo& io, bool batching,
                         TensorSpec* spec) {
  spec->name = io.name;
  std::string type_name = e.value("data_type", std::string());
  spec->dtype = from_config_dtype_name(type_name);
  if (spec->dtype != io.dtype)
    return where + ": data_type " + type_name + " in the config, but the model's is " +
           (config_dtype_name(io.dtype).empty() ? "not supported by this backend"
                                                : config_dtype_name(io.dtype));
  spec->triton_dtype = to_triton_dtype(spec->dtype);
  if (e.contains("reshape") && !e["reshape"].is_null() && !e["reshape"].empty())
    return where + ": 'reshape' is not supported by the ferrite backend";
  if (!e.contains("dims") || !e["dims"].is_array()) return where + ": no dims in the config";
  for (const auto& d : e["dims"]) {
    int64_t x = 0;
    if (!json_int(d, &x) || x < -1) return where + ": dims must be integers >= -1";
    spec->dims.push_back(x);
  }
  size_t offset = batching ? 1 : 0;
  if (spec->dims.size() + offset != io.dims.size())
    return where + ": dims " + dims_text(spec->dims) + " in the config" +
           (batching ? " (plus the batch dim)" : "") + " but the model's shape is " +
           dims_text(io.dims) + " (-1: not fixed)";
  for (size_t i = 0; i < spec->dims.size(); ++i) {
    int64_t model_dim = io.dims[i + offset];
    if (model_dim >= 0 && spec->dims[i] >= 0 && spec->dims[i] != model_dim)
      return where + ": dim " + std::to_string(i + offset) + " is " +
             std::to_string(spec->dims[i]) + " in the config but " + std::to_string(model_dim) +
             " in the model";
    // A fixed model dim the config leaves variable is checked per request instead.
    if (spec->dims[i] < 0) spec->dims[i] = model_dim;
  }
  if (batching && io.dims[0] >= 0)
    return where + ": max_batch_size > 0 but the model's first dim is fixed (" +
           std::to_string(io.dims[0]) + "), so requests cannot be batched along it";
  return "";
}

std::string parse_parameters(const std::string& model, const json& config, ModelSpec* spec) {
  if (!config.contains("parameters") || !config["parameters"].is_object()) return "";
  for (const auto& [key, value] : config["parameters"].items()) {
    std::string v = value.is_object() ? value.value("string_value", std::string()) : std::string();
    if (key == "device") {
      spec->device = v;
    } else if (key == "precision") {
      spec->precision = v;
    } else if (key == "threads") {
      char* end = nullptr;
      long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 0 || n > 4096)
        return "model '" + model + "': parameter threads='" + v +
               "' is not a thread count (0..4096; 0: ferrite's default)";
      spec->threads = static_cast<int>(n);
    } else {
      return "model '" + model + "': unknown parameter '" + key +
             "' (the ferrite backend takes device, threads, precision)";
    }
  }
  return "";
}

int instance_count(const json& config) {
  int total = 0;
  if (!config.contains("instance_group") || !config["instance_group"].is_array()) return 1;
  for (const auto& g : config["instance_group"]) {
    int64_t n = 1;
    if (g.is_object() && g.contains("count")) json_int(g["count"], &n);
    total += static_cast<int>(std::max<int64_t>(n, 1));
  }
  return std::max(total, 1);
}

}  // namespace

TRITONSERVER_DataType to_triton_dtype(ferrite_dtype dtype) {
  for (const auto& r : kDtypes)
    if (r.ferrite == dtype) return r.triton;
  return TRITONSERVER_TYPE_INVALID;
}

ferrite_dtype from_triton_dtype(TRITONSERVER_DataType dtype) {
  for (const auto& r : kDtypes)
    if (r.triton == dtype) return r.ferrite;
  return FERRITE_DTYPE_UNDEFINED;
}

std::string config_dtype_name(ferrite_dtype dtype) {
  for (const auto& r : kDtypes)
    if (r.ferrite == dtype) return r.config;
  return "";
}

ferrite_dtype from_config_dtype_name(const std::string& name) {
  for (const auto& r : kDtypes)
    if (name == r.config) return r.ferrite;
  return FERRITE_DTYPE_UNDEFINED;
}

bool is_host_device(const std::string& device) {
  return device == "cpu" || device.rfind("cpu:", 0) == 0;
}

std::string instance_device(const std::string& model, const std::string& param,
                            TRITONSERVER_InstanceGroupKind kind, int32_t device_id,
                            std::string* out) {
  std::string ctx = "model '" + model + "'";
  if (kind == TRITONSERVER_INSTANCEGROUPKIND_GPU) {
    std::string base = param.empty() ? "cuda" : param;
    if (base != "cuda" && base.rfind("cuda:", 0) != 0)
      return ctx + ": a KIND_GPU instance group, but parameter device='" + param +
             "' is not a cuda device";
    *out = base == "cuda" ? base + ":" + std::to_string(device_id) : base;
    return "";
  }
  if (kind == TRITONSERVER_INSTANCEGROUPKIND_CPU) {
    if (!param.empty() && !is_host_device(param))
      return ctx + ": a KIND_CPU instance group, but parameter device='" + param + "' is not cpu";
    *out = param.empty() ? "cpu" : param;
    return "";
  }
  *out = param;
  return "";
}

std::string read_model_io(const ferrite_session* session, bool input, std::vector<ModelIo>* out) {
  auto take = [](ferrite_status* st) {
    std::string msg = st ? ferrite_status_message(st) : "";
    ferrite_status_release(st);
    return msg;
  };
  size_t count = 0;
  std::string err = take(input ? ferrite_session_input_count(session, &count)
                               : ferrite_session_output_count(session, &count));
  if (!err.empty()) return err;
  for (size_t i = 0; i < count; ++i) {
    ModelIo io;
    const char* name = nullptr;
    int rank = 0;
    err = take(input ? ferrite_session_input_info(session, i, &name, &io.dtype, &rank)
                     : ferrite_session_output_info(session, i, &name, &io.dtype, &rank));
    if (!err.empty()) return err;
    io.name = name ? name : "";
    if (rank < 0)
      return std::string(input ? "input '" : "output '") + io.name +
             "' has an unknown rank; the backend needs ranked tensors";
    for (int d = 0; d < rank; ++d) {
      int64_t size = -1;
      const char* symbol = nullptr;
      err = take(input ? ferrite_session_input_dim(session, i, d, &size, &symbol)
                       : ferrite_session_output_dim(session, i, d, &size, &symbol));
      if (!err.empty()) return err;
      io.dims.push_back(size);
      io.symbols.push_back(symbol ? symbol : "");
    }
    out->push_back(std::move(io));
  }
  return "";
}

bool model_can_batch(const std::vector<ModelIo>& inputs, const std::vector<ModelIo>& outputs) {
  std::set<std::string> symbols;
  for (const auto* list : {&inputs, &outputs}) {
    for (const auto& io : *list) {
      if (io.dims.empty() || io.dims[0] >= 0) return false;
      // An unnamed dim ("" or "?") cannot be shown to be the same dim as another's.
      if (io.symbols[0].empty() || io.symbols[0] == "?") return false;
      symbols.insert(io.symbols[0]);
    }
  }
  return symbols.size() == 1 && !inputs.empty();
}

std::string auto_complete(json* config, const std::vector<ModelIo>& inputs,
                          const std::vector<ModelIo>& outputs, int64_t default_max_batch,
                          bool* changed) {
  try {
    *changed = false;
    int64_t max_batch = 0;
    if (config->contains("max_batch_size")) json_int((*config)["max_batch_size"], &max_batch);
    bool listed = (config->contains("input") && !(*config)["input"].empty()) ||
                  (config->contains("output") && !(*config)["output"].empty());
    // Only a configuration that lists no tensors leaves the batching choice to the model: with
    // dims written out, max_batch_size 0 is the author's (the field's default is also 0).
    if (max_batch == 0 && !listed && model_can_batch(inputs, outputs)) {
      max_batch = default_max_batch;
      (*config)["max_batch_size"] = max_batch;
      *changed = true;
    }
    bool batching = max_batch > 0;
    complete_list(&(*config)["input"], inputs, batching, changed);
    complete_list(&(*config)["output"], outputs, batching, changed);
    bool scheduled = false;
    for (const char* key : {"dynamic_batching", "sequence_batching", "ensemble_scheduling"})
      scheduled = scheduled || (config->contains(key) && !(*config)[key].is_null());
    if (batching && !scheduled) {
      (*config)["dynamic_batching"] = json::object();
      *changed = true;
    }
    return "";
  } catch (const std::exception& e) {
    return std::string("auto-complete of the configuration failed: ") + e.what();
  }
}

std::string parse_deployment(const std::string& model, const json& config, ModelSpec* spec) {
  try {
    spec->instance_count = instance_count(config);
    return parse_parameters(model, config, spec);
  } catch (const std::exception& e) {
    return "model '" + model + "': the parameters could not be read: " + e.what();
  }
}

std::string parse_spec(const std::string& model, const json& config,
                       const std::vector<ModelIo>& inputs, const std::vector<ModelIo>& outputs,
                       ModelSpec* spec) {
  try {
    spec->max_batch_size = 0;
    if (config.contains("max_batch_size") &&
        !json_int(config["max_batch_size"], &spec->max_batch_size))
      return "model '" + model + "': max_batch_size is not an integer";
    bool batching = spec->max_batch_size > 0;
    if (batching && !model_can_batch(inputs, outputs))
      return "model '" + model +
             "': max_batch_size > 0 needs every input and output to start with the same "
             "symbolic batch dim (e.g. 'batch'); set max_batch_size: 0 for this model";
    for (const char* list : {"input", "output"}) {
      bool is_input = list[0] == 'i';
      const auto& ios = is_input ? inputs : outputs;
      std::vector<TensorSpec>& specs = is_input ? spec->inputs : spec->outputs;
      std::set<std::string> seen;
      if (config.contains(list) && config[list].is_array()) {
        for (const auto& e : config[list]) {
          std::string name = e.value("name", std::string());
          std::string where = "model '" + model + "', " + list + " '" + name + "'";
          const ModelIo* io = find_io(ios, name);
          if (!io) return where + ": the ONNX model has no " + list + " of that name";
          seen.insert(name);
        }
      }
      for (const auto& io : ios) {
        std::string where = "model '" + model + "', " + list + " '" + io.name + "'";
        if (!seen.count(io.name)) return where + ": missing from the configuration";
        const json* entry = nullptr;
        for (const auto& e : config[list])
          if (e.value("name", std::string()) == io.name) entry = &e;
        TensorSpec t;
        std::string err = check_tensor(where, *entry, io, batching, &t);
        if (!err.empty()) return err;
        specs.push_back(std::move(t));
      }
    }
    return "";
  } catch (const std::exception& e) {
    return "model '" + model + "': the configuration could not be read: " + e.what();
  }
}

}  // namespace ferrite::triton
