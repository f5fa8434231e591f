#include "runtime/device.h"

namespace ferrite {

std::unique_ptr<Device> make_reference_device();
std::unique_ptr<Device> make_cpu_device();

void register_builtin_devices(DeviceRegistry& r) {
  r.add("reference", make_reference_device);
  r.add("cpu", make_cpu_device);
}

}  // namespace ferrite
