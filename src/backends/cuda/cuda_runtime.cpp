#include "backends/cuda/cuda_runtime.h"

namespace ferrite::cuda {

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
  return rt;
}

CudaRuntime::~CudaRuntime() {
  if (!d_) return;
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

Expected<StreamHandle> CudaRuntime::create_stream() {
  FERRITE_RETURN_IF_ERROR(make_current());
  CUstream s = nullptr;
  FERRITE_RETURN_IF_ERROR(check(d_->cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate"));
  return reinterpret_cast<StreamHandle>(s);
}

void CudaRuntime::destroy_stream(StreamHandle s) {
  if (s && make_current().is_ok()) d_->cuStreamDestroy(reinterpret_cast<CUstream>(s));
}

Status CudaRuntime::synchronize(StreamHandle s) {
  FERRITE_RETURN_IF_ERROR(make_current());
  CUstream st = s ? reinterpret_cast<CUstream>(s) : stream_;
  return check(d_->cuStreamSynchronize(st), "stream synchronize");
}

}  // namespace ferrite::cuda
