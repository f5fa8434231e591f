// The device contract as the foundation needs it: a device prepares a graph once and then runs
// it any number of times with concrete inputs. The compiler stages (issue: compiler core) add the
// finer-grained backend interfaces; this is the boundary every device, including `reference`,
// keeps.
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace ferrite {

struct RunOptions {
  int threads = 0;  // 0 = device default
  // Graph passes to run before preparing; unset = the device's default_passes().
  std::optional<std::vector<std::string>> passes;
  // Devices that compile write what they made here (generated source, fusion and memory plans,
  // the IR after passes); others ignore it.
  std::optional<std::filesystem::path> dump_dir;
};

// Memory of the intermediate buffers of the last run, for devices that plan it.
struct MemoryStats {
  int64_t planned_peak_bytes = 0;    // arena bytes the plan needs
  int64_t intermediate_bytes = 0;    // sum of the planned buffers (a fresh allocation each)
  int64_t live_peak_bytes = 0;       // most bytes live at one step (lower bound for the plan)
  int64_t planned_buffers = 0;
  int64_t in_place = 0;              // buffers written over an input that died there
  int64_t unplanned_buffers = 0;     // intermediates allocated on the heap (unknown size, ...)
  int64_t arena_capacity_bytes = 0;  // arena kept across runs
};

struct ModelStats {
  std::optional<MemoryStats> memory;
};

// A graph prepared for one device. Inputs are in graph-input order, already validated.
class PreparedModel {
 public:
  virtual ~PreparedModel() = default;
  virtual Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) = 0;
  // Statistics about the last run, where the device keeps any.
  virtual ModelStats stats() const { return {}; }
};

class Device {
 public:
  virtual ~Device() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  // Passes a Session runs before prepare() unless the user chose: none for the `reference`
  // oracle, {"default"} (the default pipeline) for compiling devices.
  virtual std::vector<std::string> default_passes() const { return {}; }
  // Prepares (compiles) `graph`; the graph outlives the prepared model.
  virtual Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                           const RunOptions& opts) = 0;
};

class DeviceRegistry {
 public:
  using Factory = std::function<std::unique_ptr<Device>()>;
  static DeviceRegistry& global();
  void add(const std::string& name, Factory f) { factories_[name] = std::move(f); }
  Expected<std::unique_ptr<Device>> create(const std::string& name) const;
  std::vector<std::string> names() const;

 private:
  std::map<std::string, Factory> factories_;
};

// Registers the devices built into this binary (called once by the registry).
void register_builtin_devices(DeviceRegistry& r);

}  // namespace ferrite
