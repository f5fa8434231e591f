#include "runtime/device.h"

namespace ferrite {

std::unique_ptr<Device> make_reference_device();

void register_builtin_devices(DeviceRegistry& r) {
  r.add("reference", make_reference_device);
}

}  // namespace ferrite
