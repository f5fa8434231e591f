// GXU device memory. Each allocation gets a fresh range of device addresses (never reused, so a
// stale pointer is caught rather than aliasing a newer buffer) backed by host memory that only
// the plugin can see.
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>

#include "gxu.h"

namespace gxu {

namespace {

// Canonical user-space addresses end below 2^47; device addresses start at 2^52, so the host
// never has anything mapped there.
constexpr uintptr_t kDeviceBase = uintptr_t{1} << 52;
constexpr int64_t kCapacity = int64_t{16} << 30;  // what the device claims to have
constexpr size_t kAlignment = 256;

struct Block {
  size_t bytes;
  void* host;
};

std::mutex mu;
std::map<uintptr_t, Block> blocks;  // device address -> block
uintptr_t next_address = kDeviceBase;
int64_t in_use = 0;

}  // namespace

int64_t memory_capacity() { return kCapacity; }

fe_status device_malloc(void** ptr, size_t bytes) {
  if (!ptr) return fail(kInvalidValue, "gxuMalloc: null result pointer");
  size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  if (rounded == 0) rounded = kAlignment;
  std::lock_guard<std::mutex> lock(mu);
  if (in_use + static_cast<int64_t>(rounded) > kCapacity)
    return fail(kOutOfMemory, "gxuMalloc: out of device memory allocating " +
                                  std::to_string(bytes) + " bytes");
  void* host = std::aligned_alloc(64, rounded);
  if (!host) return fail(kOutOfMemory, "gxuMalloc: host backing allocation failed");
  // Poison: device memory holds garbage until written, as on real hardware.
  std::memset(host, 0xA5, rounded);
  uintptr_t addr = next_address;
  next_address += rounded + kAlignment;  // a gap: off-by-one accesses hit no allocation
  blocks[addr] = Block{rounded, host};
  in_use += static_cast<int64_t>(rounded);
  *ptr = reinterpret_cast<void*>(addr);
  return kSuccess;
}

fe_status device_free(void* ptr) {
  if (!ptr) return kSuccess;
  std::lock_guard<std::mutex> lock(mu);
  auto it = blocks.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == blocks.end())
    return fail(kInvalidDevicePointer, "gxuFree: not an allocation start");
  std::free(it->second.host);
  in_use -= static_cast<int64_t>(it->second.bytes);
  blocks.erase(it);
  return kSuccess;
}

void* translate(const void* ptr, size_t bytes) {
  uintptr_t a = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard<std::mutex> lock(mu);
  auto it = blocks.upper_bound(a);
  if (it == blocks.begin()) {
    fail(kInvalidDevicePointer, "invalid device pointer");
    return nullptr;
  }
  --it;
  uintptr_t off = a - it->first;
  if (a < it->first || off > it->second.bytes || bytes > it->second.bytes - off) {
    fail(kInvalidDevicePointer, "device access out of bounds of its allocation");
    return nullptr;
  }
  return static_cast<char*>(it->second.host) + off;
}

fe_status memcpy_h2d(void* dst, const void* src, size_t bytes) {
  if (!bytes) return kSuccess;
  void* d = translate(dst, bytes);
  if (!d) return kInvalidDevicePointer;
  std::memcpy(d, src, bytes);
  return kSuccess;
}

fe_status memcpy_d2h(void* dst, const void* src, size_t bytes) {
  if (!bytes) return kSuccess;
  void* s = translate(src, bytes);
  if (!s) return kInvalidDevicePointer;
  std::memcpy(dst, s, bytes);
  return kSuccess;
}

fe_status memcpy_d2d(void* dst, const void* src, size_t bytes) {
  if (!bytes) return kSuccess;
  void* d = translate(dst, bytes);
  void* s = translate(src, bytes);
  if (!d || !s) return kInvalidDevicePointer;
  std::memmove(d, s, bytes);
  return kSuccess;
}

fe_status memset_d8(void* dst, uint8_t value, size_t bytes) {
  if (!bytes) return kSuccess;
  void* d = translate(dst, bytes);
  if (!d) return kInvalidDevicePointer;
  std::memset(d, value, bytes);
  return kSuccess;
}

}  // namespace gxu
