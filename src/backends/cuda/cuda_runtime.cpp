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
  Status after(void* stream) override { return join(static_cast<CUstream>(stream), rt_.stream()); }
  Status before(void* stream) override { return join(rt_.stream(), static_cast<CUstream>(stream)); }

 private:
  // `waiter` waits for the work queued on `from` so far. An event per join: contexts on other
  // threads join their own streams at the same time. Destroying it after the wait is queued is
  // allowed (the driver keeps it until the wait is done).
  Status join(CUstream from, CUstream waiter) {
    if (from == waiter) return Status::ok();
    FERRITE_RETURN_IF_ERROR(rt_.make_current());
    CUevent e = nullptr;  // CU_EVENT_DISABLE_TIMING: the cheapest kind, only for ordering
    FERRITE_RETURN_IF_ERROR(check(rt_.api().cuEventCreate(&e, 0x2), "cuEventCreate"));
    Status s = check(rt_.api().cuEventRecord(e, from), "cuEventRecord");
    if (s) s = check(rt_.api().cuStreamWaitEvent(waiter, e, 0), "cuStreamWaitEvent");
    rt_.api().cuEventDestroy(e);
    return s;
  }
  CudaRuntime& rt_;
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
  FERRITE_ASSIGN_OR_RETURN(rt->own_, ContextStream::create(*rt));
  rt->capture_ = std::make_unique<CudaCapture>(*rt);
  rt->timer_ = std::make_unique<CudaTimer>(*rt);
  rt->order_ = std::make_unique<CudaStreamOrder>(*rt);
  return rt;
}

CudaRuntime::~CudaRuntime() {
  if (!d_) return;
  order_.reset();
  own_.reset();
  if (ctx_) d_->cuDevicePrimaryCtxRelease(dev_);
}

namespace {
// The calling thread's stream per runtime (a thread runs on one GPU at a time).
thread_local const CudaRuntime* tls_runtime = nullptr;
thread_local ContextStream* tls_stream = nullptr;
}  // namespace

Expected<std::shared_ptr<ContextStream>> ContextStream::create(const CudaRuntime& rt) {
  std::shared_ptr<ContextStream> cs(new ContextStream(rt));
  FERRITE_RETURN_IF_ERROR(rt.make_current());
  // Non-blocking: no implicit ordering with the legacy default stream (a framework's).
  FERRITE_RETURN_IF_ERROR(
      check(rt.api().cuStreamCreate(&cs->stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  return cs;
}

ContextStream::~ContextStream() {
  if (!stream_ || !rt_.make_current().is_ok()) return;
  rt_.api().cuStreamSynchronize(stream_);
  if (workspace_) rt_.api().cuMemFree(dptr(workspace_));
  rt_.api().cuStreamDestroy(stream_);
}

Expected<void*> ContextStream::workspace(size_t bytes) {
  if (workspace_bytes_ >= bytes) return workspace_;
  FERRITE_RETURN_IF_ERROR(rt_.make_current());
  if (workspace_) {  // grows: the old one may still be read by queued work
    FERRITE_RETURN_IF_ERROR(check(rt_.api().cuStreamSynchronize(stream_), "stream synchronize"));
    rt_.api().cuMemFree(dptr(workspace_));
    workspace_ = nullptr;
    workspace_bytes_ = 0;
  }
  CUdeviceptr p = 0;
  FERRITE_RETURN_IF_ERROR(check(rt_.api().cuMemAlloc(&p, bytes), "cuBLASLt workspace"));
  workspace_ = reinterpret_cast<void*>(p);
  workspace_bytes_ = bytes;
  return workspace_;
}

void CudaRuntime::use(ContextStream* cs) const {
  tls_runtime = cs ? this : nullptr;
  tls_stream = cs;
}

ContextStream& CudaRuntime::current() const {
  return tls_runtime == this && tls_stream ? *tls_stream : *own_;
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
  return check(d_->cuMemcpyHtoDAsync(dptr(dst), src, bytes, stream()), "host-to-device copy");
}

Status CudaRuntime::copy_to_host(void* dst, const void* src, size_t bytes) {
  if (!bytes) return Status::ok();
  FERRITE_RETURN_IF_ERROR(make_current());
  FERRITE_RETURN_IF_ERROR(
      check(d_->cuMemcpyDtoHAsync(dst, dptr(src), bytes, stream()), "device-to-host copy"));
  return check(d_->cuStreamSynchronize(stream()), "device-to-host copy (sync)");
}

Status CudaRuntime::copy_on_device(void* dst, const void* src, size_t bytes) {
  if (!bytes) return Status::ok();
  FERRITE_RETURN_IF_ERROR(make_current());
  return check(d_->cuMemcpyDtoDAsync(dptr(dst), dptr(src), bytes, stream()), "device copy");
}

Status CudaRuntime::fill(void* dst, uint8_t value, size_t bytes) {
  if (!bytes) return Status::ok();
  FERRITE_RETURN_IF_ERROR(make_current());
  return check(d_->cuMemsetD8Async(dptr(dst), value, bytes, stream()), "memset");
}

Status CudaRuntime::synchronize() {
  FERRITE_RETURN_IF_ERROR(make_current());
  return check(d_->cuStreamSynchronize(stream()), "stream synchronize");
}

std::unique_ptr<MemoryPool> CudaRuntime::make_pool() {
  return std::make_unique<DevicePool>(*this);
}

}  // namespace ferrite::cuda
