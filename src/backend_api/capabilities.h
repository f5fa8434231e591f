// Optional capabilities of a DeviceRuntime (backend_api/runtime.h), used by the shared executor
// (src/execute) when a runtime offers them:
//
//   capability    what the executor does with it                      cuda
//   RunCapture    records a steady binding's run once, then replays   CUDA graphs
//   EventTimer    per-step device times (profile, trace), time_resident  CUDA events
//   MemoryPool    per-model caching allocator with statistics         caching_allocator.h
//   StreamOrder   runs on a caller's tensors ordered on its stream    CUDA events
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "support/status.h"

namespace ferrite {

// Device memory a model holds through a caching allocator (devices that keep one), cumulative
// over the model's life except the current values.
struct DeviceMemoryStats {
  int64_t in_use_bytes = 0;  // handed out now (arena, constants, pooled buffers)
  int64_t peak_in_use_bytes = 0;
  int64_t reserved_bytes = 0;  // held from the driver: in use + cached
  int64_t peak_reserved_bytes = 0;
  int64_t driver_allocs = 0;  // blocks allocated from / freed to the driver
  int64_t driver_frees = 0;
  int64_t requests = 0;    // pooled allocations asked for
  int64_t cache_hits = 0;  // of those, served from cached blocks
};

// Opaque handles of a capability's objects (a CUgraphExec, a CUevent, ...).
using CaptureHandle = uintptr_t;
using EventHandle = uintptr_t;

// Recording of the device work of one run, replayed later with the same addresses. While
// recording, nothing runs; the executor then never copies between host and device.
class RunCapture {
 public:
  virtual ~RunCapture() = default;
  virtual Status begin() = 0;
  // Ends the recording (also after a failed body: `ok` false discards it).
  virtual Expected<CaptureHandle> end(bool ok) = 0;
  virtual Status replay(CaptureHandle h) = 0;
  virtual void destroy(CaptureHandle h) = 0;
  // Page-locked staging for a replay's copies, and copies that do not wait (the executor
  // synchronizes once after all of them).
  virtual Expected<void*> allocate_staging(size_t bytes) = 0;
  virtual void free_staging(void* p) = 0;
  virtual Status copy_to_device_async(void* dst, const void* host_src, size_t bytes) = 0;
  virtual Status copy_to_host_async(void* host_dst, const void* src, size_t bytes) = 0;
};

// Events recorded in the device's order of work.
class EventTimer {
 public:
  virtual ~EventTimer() = default;
  virtual Expected<EventHandle> create() = 0;
  virtual void destroy(EventHandle e) = 0;
  virtual Status record(EventHandle e) = 0;
  virtual Status wait(EventHandle e) = 0;
  // Milliseconds between two recorded (and completed) events.
  virtual Expected<double> elapsed_ms(EventHandle from, EventHandle to) = 0;
};

// A model's device memory. Blocks are handed out in the device's order of work, so reuse within
// a run is safe. While a run is captured, blocks are "owned": fresh, and not handed out again
// until release_owned(), since the recording keeps their addresses.
class MemoryPool {
 public:
  virtual ~MemoryPool() = default;
  virtual Expected<void*> get(size_t bytes) = 0;
  // Constants, the arena, values cached per binding: exact-sized, never cached.
  virtual Expected<void*> get_persistent(size_t bytes) = 0;
  virtual Status put(void* p) = 0;
  virtual Expected<void*> get_owned(size_t bytes) = 0;
  virtual Status release_owned(const std::vector<void*>& blocks) = 0;
  virtual void begin_owned() = 0;
  virtual std::vector<void*> end_owned() = 0;
  // Gives idle blocks back beyond `keep` bytes.
  virtual Status trim(size_t keep) = 0;
  virtual DeviceMemoryStats stats() const = 0;
  // One FERRITE_LOG=memory line.
  virtual std::string describe(const char* when) const = 0;
};

// Joins the device's own order of work with a caller's stream (a framework's current stream),
// without waiting on the host: what PreparedModel::run_device needs.
class StreamOrder {
 public:
  virtual ~StreamOrder() = default;
  // Work queued on the device from now on starts after what is queued on `stream` so far.
  virtual Status after(void* stream) = 0;
  // Work queued on `stream` from now on starts after what is queued on the device so far.
  virtual Status before(void* stream) = 0;
};

}  // namespace ferrite
