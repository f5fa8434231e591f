// The cuda device's runtime (backend_api/runtime.h): device memory, copies and one stream, on the
// primary context of one GPU, through the driver API.
#pragma once

#include <memory>

#include "backend_api/runtime.h"
#include "backends/cuda/cuda_api.h"

namespace ferrite::cuda {

class CudaRuntime : public DeviceRuntime {
 public:
  // Retains the primary context of GPU `ordinal` and creates the stream all work runs on.
  static Expected<std::unique_ptr<CudaRuntime>> open(int ordinal);
  ~CudaRuntime() override;

  Expected<void*> allocate(size_t bytes, size_t alignment) override;
  void free(void* ptr) override;
  // free() with the driver's return code checked.
  Status release(void* ptr);
  // Copies are ordered on the runtime's stream. Host-to-device copies return once the source
  // may be reused (the driver stages pageable memory); device-to-host copies wait for the data.
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
  CUstream stream() const { return stream_; }
  CUdevice device() const { return dev_; }
  const Driver& api() const { return *d_; }

 private:
  CudaRuntime() = default;
  const Driver* d_ = nullptr;
  CUdevice dev_ = 0;
  CUcontext ctx_ = nullptr;
  CUstream stream_ = nullptr;
  std::unique_ptr<RunCapture> capture_;
  std::unique_ptr<EventTimer> timer_;
  std::unique_ptr<StreamOrder> order_;
};

inline CUdeviceptr dptr(const void* p) {
  return reinterpret_cast<CUdeviceptr>(p);
}

}  // namespace ferrite::cuda
