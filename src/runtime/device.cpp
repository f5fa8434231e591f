#include "runtime/device.h"

namespace ferrite {

DeviceRegistry& DeviceRegistry::global() {
  static DeviceRegistry* r = [] {
    auto* reg = new DeviceRegistry();
    register_builtin_devices(*reg);
    return reg;
  }();
  return *r;
}

Expected<std::unique_ptr<Device>> DeviceRegistry::create(const std::string& name) const {
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    std::string known;
    for (const auto& [k, f] : factories_) known += (known.empty() ? "" : ", ") + k;
    return err("unknown device '", name, "' (available: ", known, ")");
  }
  return it->second();
}

std::vector<std::string> DeviceRegistry::names() const {
  std::vector<std::string> out;
  for (const auto& [k, f] : factories_) out.push_back(k);
  return out;
}

}  // namespace ferrite
