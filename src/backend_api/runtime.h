// Device runtime: memory and ordering. The required member of the backend contract that every
// device implements, including devices without a compiler.
//
// Pointers returned by allocate() are device addresses; only a runtime whose properties say
// host_addressable may have them dereferenced on the host. Work submitted to a device may run
// asynchronously; synchronize() waits for all of it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "support/status.h"

namespace ferrite {

// An opaque queue of device work (a CUDA stream, ...). 0 is the default stream.
using StreamHandle = uintptr_t;

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
  // Streams: a runtime without them runs everything in submission order on stream 0.
  virtual bool has_streams() const { return false; }
  virtual Expected<StreamHandle> create_stream() { return StreamHandle{0}; }
  virtual void destroy_stream(StreamHandle) {}
  virtual Status synchronize(StreamHandle) { return synchronize(); }
  // Fills bytes with `value`; the default stages through a host buffer.
  virtual Status fill(void* dst, uint8_t value, size_t bytes);
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
};

}  // namespace ferrite
