// Device runtime: memory and ordering. The required member of the backend contract that every
// device implements, including devices without a compiler.
//
// Pointers returned by allocate() are device addresses; only a runtime whose properties say
// host_addressable may have them dereferenced on the host. Work submitted to a device may run
// asynchronously; synchronize() waits for all of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "backend_api/capabilities.h"
#include "support/status.h"

namespace ferrite {

class DeviceRuntime {
 public:
  virtual ~DeviceRuntime() = default;

  // --- required ---
  // `bytes` may be 0 (returns a unique non-null pointer or nullptr, both accepted by free()).
  virtual Expected<void*> allocate(size_t bytes, size_t alignment) = 0;
  virtual void free(void* ptr) = 0;
  virtual Status copy_to_device(void* dst, const void* host_src, size_t bytes) = 0;
  virtual Status copy_to_host(void* host_dst, const void* src, size_t bytes) = 0;
  virtual Status copy_on_device(void* dst, const void* src, size_t bytes) = 0;
  virtual Status synchronize() = 0;

  // --- optional ---
  // Fills bytes with `value`; the default stages through a host buffer.
  virtual Status fill(void* dst, uint8_t value, size_t bytes);
  // allocate() returns host memory that host code reads and writes directly (cpu, host-memory
  // emulators): the executor then aliases it with tensors instead of copying.
  virtual bool host_memory() const { return false; }
  // Capabilities (backend_api/capabilities.h); null when the runtime does not offer one.
  // Record a run once and replay it (CUDA graphs): the executor captures steady bindings.
  virtual RunCapture* capture() { return nullptr; }
  // Events timed on the device: per-step profiles, traces and time_resident.
  virtual EventTimer* timer() { return nullptr; }
  // A caching allocator for one prepared model; null: allocate()/free() per buffer.
  virtual std::unique_ptr<MemoryPool> make_pool() { return nullptr; }
  // Orders the device's work with a caller's stream (run_device on a framework's tensors).
  virtual StreamOrder* stream_order() { return nullptr; }
};

// Host memory: the runtime of `cpu`, and of emulated devices that run on the host.
class HostRuntime : public DeviceRuntime {
 public:
  Expected<void*> allocate(size_t bytes, size_t alignment) override;
  void free(void* ptr) override;
  Status copy_to_device(void* dst, const void* src, size_t bytes) override;
  Status copy_to_host(void* dst, const void* src, size_t bytes) override;
  Status copy_on_device(void* dst, const void* src, size_t bytes) override;
  Status synchronize() override { return Status::ok(); }
  Status fill(void* dst, uint8_t value, size_t bytes) override;
  bool host_memory() const override { return true; }
};

}  // namespace ferrite
