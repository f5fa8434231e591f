// The cuda device's runtime (backend_api/runtime.h): device memory, copies and streams, on the
// primary context of one GPU, through the driver API. Each execution context (a prepared model)
// queues its work on a stream of its own (ContextStream), made current on the running thread, so
// that the runs of several contexts overlap on the GPU; work outside runs uses the runtime's own.
#pragma once

#include <memory>

#include "backend_api/runtime.h"
#include "backends/cuda/cuda_api.h"

namespace ferrite::cuda {

class CudaRuntime;

// A stream and what must not be shared between streams that run at once: cuBLASLt's workspace.
class ContextStream {
 public:
  static Expected<std::shared_ptr<ContextStream>> create(const CudaRuntime& rt);
  ~ContextStream();  // waits for the stream's work, then frees its workspace and the stream
  ContextStream(const ContextStream&) = delete;
  ContextStream& operator=(const ContextStream&) = delete;
  CUstream stream() const { return stream_; }
  // cuBLASLt's workspace for GEMMs queued on this stream (allocated on first use).
  Expected<void*> workspace(size_t bytes);

 private:
  explicit ContextStream(const CudaRuntime& rt) : rt_(rt) {}
  const CudaRuntime& rt_;
  CUstream stream_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

class CudaRuntime : public DeviceRuntime {
 public:
  // Retains the primary context of GPU `ordinal` and creates the runtime's own stream.
  static Expected<std::unique_ptr<CudaRuntime>> open(int ordinal);
  ~CudaRuntime() override;

  Expected<void*> allocate(size_t bytes, size_t alignment) override;
  void free(void* ptr) override;
  // free() with the driver's return code checked.
  Status release(void* ptr);
  // Copies are ordered on the current stream (stream()). Host-to-device copies return once the
  // source may be reused (the driver stages pageable memory); device-to-host copies wait for the
  // data.
  Status copy_to_device(void* dst, const void* host_src, size_t bytes) override;
  Status copy_to_host(void* host_dst, const void* src, size_t bytes) override;
  Status copy_on_device(void* dst, const void* src, size_t bytes) override;
  Status synchronize() override;
  Status fill(void* dst, uint8_t value, size_t bytes) override;
  // CUDA graphs (stream capture), CUDA events, and a caching pool per model (cuda_pool.h).
  RunCapture* capture() override { return capture_.get(); }
  EventTimer* timer() override { return timer_.get(); }
  std::unique_ptr<MemoryPool> make_pool() override;
  StreamOrder* stream_order() override { return order_.get(); }

  // Makes the context current on the calling thread (every entry point does this itself).
  Status make_current() const;
  // `cs` (null: the runtime's own) becomes the calling thread's stream for this runtime: what
  // stream() and current() answer on it until the next call.
  void use(ContextStream* cs) const;
  // The calling thread's stream for this runtime: a context's during its runs, else the own.
  ContextStream& current() const;
  CUstream stream() const { return current().stream(); }
  CUdevice device() const { return dev_; }
  const Driver& api() const { return *d_; }

 private:
  CudaRuntime() = default;
  const Driver* d_ = nullptr;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  std::shared_ptr<ContextStream> own_;
  std::unique_ptr<RunCapture> capture_;
  std::unique_ptr<EventTimer> timer_;
  std::unique_ptr<StreamOrder> order_;
};

inline CUdeviceptr dptr(const void* p) {
  return reinterpret_cast<CUdeviceptr>(p);
}

}  // namespace ferrite::cuda
