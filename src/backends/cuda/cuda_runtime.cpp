#include "backends/cuda/cuda_runtime.h"

#include "backends/cuda/cuda_pool.h"

namespace ferrite::cuda {

namespace {

// CUDA graphs: the stream's work is recorded (relaxed capture mode) and instantiated.
class CudaCapture : public RunCapture {
 public:
  explicit CudaCapture(CudaRuntime& rt) : rt_(rt) {}
  Status begin() override {
    FERRITE_RETURN_IF_ERROR(rt_.make_current());
    return check(rt_.api().cuStreamBeginCapture(rt_.stream(), CU_STREAM_CAPTURE_MODE_RELAXED),
                 "cuStreamBeginCapture");
  }
  Expected<CaptureHandle> end(bool ok) override {
    CUgraph graph = nullptr;
    CUresult end = rt_.api().cuStreamEndCapture(rt_.stream(), &graph);
    CUgraphExec exec = nullptr;
    Status s = Status::ok();
    if (!ok)
      s = err("cuda: capture discarded");
    else if (end == CUDA_SUCCESS && graph)
      s = check(rt_.api().cuGraphInstantiate(&exec, graph, 0), "cuGraphInstantiate");
    else
      s = check(end, "cuStreamEndCapture");
    if (graph) rt_.api().cuGraphDestroy(graph);
    if (!s) {
      if (exec) rt_.api().cuGraphExecDestroy(exec);
      return s;
    }
    return reinterpret_cast<CaptureHandle>(exec);
  }
  Status replay(CaptureHandle h) override {
    return check(rt_.api().cuGraphLaunch(reinterpret_cast<CUgraphExec>(h), rt_.stream()),
                 "cuGraphLaunch");
  }
  void destroy(CaptureHandle h) override {
    if (h) rt_.api().cuGraphExecDestroy(reinterpret_cast<CUgraphExec>(h));
  }
  Expected<void*> allocate_staging(size_t bytes) override {
    void* p = nullptr;
    FERRITE_RETURN_IF_ERROR(check(rt_.api().cuMemAllocHost(&p, bytes), "cuMemAllocHost"));
    return p;
  }
  void free_staging(void* p) override {
    if (p) rt_.api().cuMemFreeHost(p);
  }
  Status copy_to_device_async(void* dst, const void* src, size_t n) override {
    return check(rt_.api().cuMemcpyHtoDAsync(dptr(dst), src, n, rt_.stream()),
                 "host-to-device copy");
  }
  Status copy_to_host_async(void* dst, const void* src, size_t n) override {
    return check(rt_.api().cuMemcpyDtoHAsync(dst, dptr(src), n, rt_.stream()),
                 "device-to-host copy");
  }

 private:
  CudaRuntime& rt_;
};

// CUDA events on the runtime's stream.
class CudaTimer : public EventTimer {
 public:
  explicit CudaTimer(CudaRuntime& rt) : rt_(rt) {}
  Expected<EventHandle> create() override {
    CUevent e = nullptr;
    FERRITE_RETURN_IF_ERROR(check(rt_.api().cuEventCreate(&e, 0), "cuEventCreate"));
    return reinterpret_cast<EventHandle>(e);
  }
  void destroy(EventHandle e) override {
    if (e) rt_.api().cuEventDestroy(reinterpret_cast<CUevent>(e));
  }
  Status record(EventHandle e) override {
    return check(rt_.api().cuEventRecord(reinterpret_cast<CUevent>(e), rt_.stream()),
                 "cuEventRecord");
  }
  Status wait(EventHandle e) override {
    return check(rt_.api().cuEventSynchronize(reinterpret_cast<CUevent>(e)), "cuEventSynchronize");
  }
  Expected<double> elapsed_ms(EventHandle a, EventHandle b) override {
    float ms = 0;
    FERRITE_RETURN_IF_ERROR(check(rt_.api().cuEventElapsedTime(&ms, reinterpret_cast<CUevent>(a),
                                                               reinterpret_cast<CUevent>(b)),
                                  "cuEventElapsedTime"));
    return static_cast<double>(ms);
  }

 private:
  CudaRuntime& rt_;
};

// The runtime's stream joined with a caller's (torch's current stream) through two events, so
// neither waits on the host and CUDA graphs still record on the runtime's own stream.
class CudaStreamOrder : public StreamOrder {
 public:
  explicit CudaStreamOrder(CudaRuntime& rt) : rt_(rt) {}
  ~CudaStreamOrder() override {
    for (CUevent e : {in_, out_})
      if (e) rt_.api().cuEventDestroy(e);
  }
  Status after(void* stream) override {
    return join(in_, static_cast<CUstream>(stream), rt_.stream());
  }
  Status before(void* stream) override {
    return join(out_, rt_.stream(), static_cast<CUstream>(stream));
  }

 private:
  // `waiter` waits for the work queued on `from` so far.
  Status join(CUevent& e, CUstream from, CUstream waiter) {
    if (from == waiter) return Status::ok();
    FERRITE_RETURN_IF_ERROR(rt_.make_current());
    if (!e)  // CU_EVENT_DISABLE_TIMING: the cheapest kind, only for ordering
      FERRITE_RETURN_IF_ERROR(check(rt_.api().cuEventCreate(&e, 0x2), "cuEventCreate"));
    FERRITE_RETURN_IF_ERROR(check(rt_.api().cuEventRecord(e, from), "cuEventRecord"));
    return check(rt_.api().cuStreamWaitEvent(waiter, e, 0), "cuStreamWaitEvent");
  }
  CudaRuntime& rt_;
  CUevent in_ = nullptr, out_ = nullptr;
};

}  // namespace

Expected<std::unique_ptr<CudaRuntime>> CudaRuntime::open(int ordinal) {
  FERRITE_ASSIGN_OR_RETURN(const Driver* d, driver());
  int count = 0;
  FERRITE_RETURN_IF_ERROR(check(d->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) return err("cuda: the driver sees no GPU");
  if (ordinal < 0 || ordinal >= count)
    return err("cuda: GPU ", ordinal, " does not exist (", count, " visible)");
  auto rt = std::unique_ptr<CudaRuntime>(new CudaRuntime());
  rt->d_ = d;
  FERRITE_RETURN_IF_ERROR(check(d->cuDeviceGet(&rt->dev_, ordinal), "cuDeviceGet"));
  FERRITE_RETURN_IF_ERROR(
      check(d->cuDevicePrimaryCtxRetain(&rt->ctx_, rt->dev_), "cuDevicePrimaryCtxRetain"));
  FERRITE_RETURN_IF_ERROR(rt->make_current());
  FERRITE_RETURN_IF_ERROR(
      check(d->cuStreamCreate(&rt->stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  rt->capture_ = std::make_unique<CudaCapture>(*rt);
  rt->timer_ = std::make_unique<CudaTimer>(*rt);
  rt->order_ = std::make_unique<CudaStreamOrder>(*rt);
  return rt;
}

CudaRuntime::~CudaRuntime() {
  if (!d_) return;
  order_.reset();
  if (make_current().is_ok() && stream_) d_->cuStreamDestroy(stream_);
  if (ctx_) d_->cuDevicePrimaryCtxRelease(dev_);
}

Status CudaRuntime::make_current() const {
  return check(d_->cuCtxSetCurrent(ctx_), "cuCtxSetCurrent");
}

Expected<void*> CudaRuntime::allocate(size_t bytes, size_t alignment) {
  // cuMemAlloc aligns to at least 256 bytes.
  if (alignment > 256) return err("cuda: alignment ", alignment, " exceeds the driver's 256");
  FERRITE_RETURN_IF_ERROR(make_current());
  CUdeviceptr p = 0;
  CUresult r = d_->cuMemAlloc(&p, bytes == 0 ? 1 : bytes);
  if (r != CUDA_SUCCESS)
    return err("cuda: allocating ", bytes, " bytes of device memory: ", driver_error(r));
  return reinterpret_cast<void*>(p);
}

void CudaRuntime::free(void* ptr) {
  (void)release(ptr);
}

Status CudaRuntime::release(void* ptr) {
  if (!ptr) return Status::ok();
  FERRITE_RETURN_IF_ERROR(make_current());
  return check(d_->cuMemFree(dptr(ptr)), "cuMemFree");
}

Status CudaRuntime::copy_to_device(void* dst, const void* src, size_t bytes) {
  if (!bytes) return Status::ok();
  FERRITE_RETURN_IF_ERROR(make_current());
  return check(d_->cuMemcpyHtoDAsync(dptr(dst), src, bytes, stream_), "host-to-device copy");
}

Status CudaRuntime::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (!bytes) return Status::ok();
  FERRITE_RETURN_IF_ERROR(make_current());
  FERRITE_RETURN_IF_ERROR(
      check(d_->cuMemcpyDtoHAsync(dst, dptr(src), bytes, stream_), "device-to-host copy"));
  return check(d_->cuStreamSynchronize(stream_), "device-to-host copy (sync)");
}

Status CudaRuntime::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (!bytes) return Status::ok();
  FERRITE_RETURN_IF_ERROR(make_current());
  return check(d_->cuMemcpyDtoDAsync(dptr(dst), dptr(src), bytes, stream_), "device copy");
}

Status CudaRuntime::fill(void* dst, uint8_t value, size_t bytes) {
  if (!bytes) return Status::ok();
  FERRITE_RETURN_IF_ERROR(make_current());
  return check(d_->cuMemsetD8Async(dptr(dst), value, bytes, stream_), "memset");
}

Status CudaRuntime::synchronize() {
  FERRITE_RETURN_IF_ERROR(make_current());
  return check(d_->cuStreamSynchronize(stream_), "stream synchronize");
}

std::unique_ptr<MemoryPool> CudaRuntime::make_pool() {
  return std::make_unique<DevicePool>(*this);
}

}  // namespace ferrite::cuda
