#include "runtime/device.h"

#include "passes/pass.h"

namespace ferrite {

Expected<std::vector<std::string>> default_passes(const Device& device) {
  PassPlan plan = device.pass_plan();
  if (!plan.compiles) return std::vector<std::string>{};
  auto runs = plan.runs_library_op ? plan.runs_library_op : [](const std::string&) { return true; };
  auto passes = device_pipeline(runs, plan.opt_in);
  if (!passes) return passes.status().with_context("device '" + device.name() + "' pass plan");
  return passes;
}

DeviceRegistry& DeviceRegistry::global() {
  static DeviceRegistry* r = [] {
    auto* reg = new DeviceRegistry();
    register_builtin_devices(*reg);
    register_plugin_devices(*reg);
    return reg;
  }();
  return *r;
}

Expected<std::unique_ptr<Device>> DeviceRegistry::create(const std::string& name) const {
  // "cuda:1": unit 1 of `cuda`.
  if (size_t colon = name.rfind(':'); colon != std::string::npos && !factories_.count(name)) {
    std::string unit = name.substr(colon + 1);
    if (!unit.empty() && unit.size() <= 4 &&
        unit.find_first_not_of("0123456789") == std::string::npos) {
      FERRITE_ASSIGN_OR_RETURN(auto d, create(name.substr(0, colon)));
      FERRITE_RETURN_IF_ERROR(d->select(std::stoi(unit)));
      return d;
    }
  }
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    std::string known;
    for (const auto& [k, f] : factories_) known += (known.empty() ? "" : ", ") + k;
    return err("unknown device '", name, "' (available: ", known, ")");
  }
  return it->second.factory();
}

void DeviceRegistry::add(const std::string& name, Factory f, std::string origin) {
  factories_[name] = Entry{std::move(f), std::move(origin)};
}

void DeviceRegistry::add_builtin(const std::string& name, std::unique_ptr<Device> (*make)()) {
  add(name, [make]() -> Expected<std::unique_ptr<Device>> { return make(); });
}

std::string DeviceRegistry::origin(const std::string& name) const {
  auto it = factories_.find(name);
  return it == factories_.end() ? std::string() : it->second.origin;
}

Status Device::check_precision(Precision p) const {
  if (p == Precision::kF32) return Status::ok();
  return unsupported("device '", name(), "' does not run precision ", precision_name(p),
                     " (it runs f32 only)");
}

Status check_storage_precision(const Device& device, Precision p) {
  if (p == Precision::kTF32)
    return unsupported("device '", device.name(),
                       "' does not run precision tf32 (a GPU tensor-core GEMM mode); use f32, "
                       "bf16 or fp16");
  return Status::ok();
}

std::string default_device(std::string* why) {
  const DeviceRegistry& reg = DeviceRegistry::global();
  std::string reason = "no cuda device in this build";
  if (!reg.origin("cuda").empty()) {
    auto d = reg.create("cuda");
    Status s = d ? (*d)->available() : d.status();
    if (s) {
      if (why) *why = "a GPU answers";
      return "cuda";
    }
    reason = "cuda unavailable: " + s.message();
  }
  if (why) *why = reason;
  return "cpu";
}

std::vector<std::string> DeviceRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, f] : factories_) out.push_back(k);
  return out;
}

}  // namespace ferrite
