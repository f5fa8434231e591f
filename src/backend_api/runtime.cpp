#include "backend_api/runtime.h"

#include <cstdlib>
#include <cstring>
#include <vector>

namespace ferrite {

Status DeviceRuntime::fill(void* dst, uint8_t value, size_t bytes) {
  std::vector<uint8_t> host(bytes, value);
  return copy_to_device(dst, host.data(), bytes);
}

Expected<void*> HostRuntime::allocate(size_t bytes, size_t alignment) {
  if (alignment < alignof(std::max_align_t)) alignment = alignof(std::max_align_t);
  if ((alignment & (alignment - 1)) != 0) return err("alignment ", alignment, " is not a power of 2");
  size_t rounded = (std::max<size_t>(bytes, 1) + alignment - 1) / alignment * alignment;
  if (rounded < bytes) return err("allocation of ", bytes, " bytes overflows");
  void* p = std::aligned_alloc(alignment, rounded);
  if (!p) return err("out of host memory allocating ", bytes, " bytes");
  return p;
}

void HostRuntime::free(void* ptr) { std::free(ptr); }

Status HostRuntime::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
  return Status::ok();
}
Status HostRuntime::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memcpy(dst, src, bytes);
  return Status::ok();
}
Status HostRuntime::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (bytes) std::memmove(dst, src, bytes);
  return Status::ok();
}
Status HostRuntime::fill(void* dst, uint8_t value, size_t bytes) {
  if (bytes) std::memset(dst, value, bytes);
  return Status::ok();
}

}  // namespace ferrite
