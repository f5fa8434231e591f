#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>

#include "backends/cuda/cuda_native_ops.h"
#include "codegen/cuda_source.h"
#include "codegen/row_analysis.h"
#include "lower/kernel_ir.h"

namespace ferrite::cuda {

namespace {

void set_common(DeviceProperties& p) {
  p.name = "cuda";
  p.kind = "gpu";
  p.vector_bytes = 16;
  p.dtypes = {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool};
  p.host_addressable = false;
  p.launch.warp_size = 32;
}

}  // namespace

DeviceProperties offline_properties(int major, int minor) {
  DeviceProperties p;
  set_common(p);
  p.model = "offline sm_" + std::to_string(major) + std::to_string(minor);
  p.arch = "sm_" + std::to_string(major) + std::to_string(minor);
  p.compute_units = 132;
  p.shared_memory_per_block = 48 << 10;
  p.launch.max_block = 1024;
  p.launch.max_warps_per_block = 32;
  p.launch.max_grid = 2147483647;
  return p;
}

Expected<DeviceProperties> read_properties(const Driver& d, CUdevice dev) {
  DeviceProperties p;
  set_common(p);
  auto attr = [&](CUdevice_attribute a) {
    int v = 0;
    d.cuDeviceGetAttribute(&v, a, dev);
    return v;
  };
  char name[256] = {0};
  FERRITE_RETURN_IF_ERROR(check(d.cuDeviceGetName(name, sizeof name, dev), "cuDeviceGetName"));
  p.model = name;
  int major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  int minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  p.arch = "sm_" + std::to_string(major) + std::to_string(minor);
  p.compute_units = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  p.resident_threads_per_unit = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
  size_t mem = 0;
  d.cuDeviceTotalMem(&mem, dev);
  p.memory_bytes = static_cast<int64_t>(mem);
  p.shared_memory_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK);
  p.launch.max_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
  p.launch.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE);
  p.launch.max_warps_per_block = p.launch.max_block / std::max<int64_t>(1, p.launch.warp_size);
  p.launch.max_grid = attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X);
  if (major >= 8) p.features.push_back("bf16");
  if (major >= 7) p.features.push_back("tensor_cores");
  p.features.push_back("driver " + std::to_string(d.version));
  return p;
}

Expected<DeviceProperties> probe_properties(int ordinal) {
  FERRITE_ASSIGN_OR_RETURN(const Driver* d, driver());
  int count = 0;
  FERRITE_RETURN_IF_ERROR(check(d->cuDeviceGetCount(&count), "cuDeviceGetCount"));
  if (count == 0) return err("cuda: the driver sees no GPU");
  if (ordinal < 0 || ordinal >= count)
    return err("cuda: GPU ", ordinal, " does not exist (", count, " visible)");
  CUdevice dev = 0;
  FERRITE_RETURN_IF_ERROR(check(d->cuDeviceGet(&dev, ordinal), "cuDeviceGet"));
  return read_properties(*d, dev);
}

LaunchConfig CudaHeuristics::choose(const Kernel& kernel, int64_t rows, int64_t row_len,
                                    const DeviceProperties& props) const {
  const LaunchLimits& lim = props.launch;
  const int64_t warp = std::max<int64_t>(lim.warp_size, 1);
  const int64_t sms = std::max(1, props.compute_units);
  LaunchConfig c;
  if (kernel.is_row() && column_reduce(kernel, RowPhases(kernel)) >= 0) {
    // A column reduction (codegen/cuda_source.cpp): column_rows() rows per block, or fewer
    // where that leaves under two blocks per SM (EfficientNet's first squeeze-excite mean: 1024
    // rows of 12544 pixels), threads along them for about 8 elements each, and as many blocks as
    // are resident at once (the kernel strides over the rest and finds the same rows per block
    // from the grid).
    int64_t cols = column_rows();
    while (cols > 1 && (rows + cols - 1) / cols < 2 * sms) cols /= 2;
    const int64_t along =
        std::min<int64_t>(std::max<int64_t>(1, (row_len + 7) / 8), column_block_max() / cols);
    c.block = std::max(warp, std::min<int64_t>(lim.max_block, along * cols) / warp * warp);
    const int64_t resident =
        props.resident_threads_per_unit > 0
            ? sms * std::max<int64_t>(1, props.resident_threads_per_unit / c.block)
            : sms * 8;
    c.grid = lim.clamp_grid(std::max<int64_t>(1, std::min((rows + cols - 1) / cols, resident)));
  } else if (kernel.is_row()) {
    // row_cache() elements per thread (the row stays in registers), whole warps, at most the
    // device's block and the kernels' launch bound; longer rows take the largest block.
    int64_t want = (row_len + row_cache() - 1) / row_cache();
    int64_t block = std::min<int64_t>(std::min<int64_t>(lim.max_block, row_block_max()),
                                      std::max(warp, (want + warp - 1) / warp * warp));
    c.block = std::max(warp, block / warp * warp);
    int64_t per_block = 1;  // rows a block runs at once
    if (want <= warp && warp == 32 && lim.max_block >= 128) {
      // Short rows (Swin's 49-key softmax, LayerNorm over 96 channels): a power of two of
      // threads per row (fe_row_threads in the generated code) and four warps of such groups.
      int64_t t = 1;
      while (t < want) t <<= 1;
      c.block = 128;
      per_block = 128 / t;
    }
    c.grid = lim.clamp_grid(
        std::max<int64_t>(1, std::min<int64_t>((rows + per_block - 1) / per_block, sms * 32)));
  } else {
    c.block = std::min<int64_t>(256, lim.max_block) / warp * warp;
    // A thread takes 16 bytes per iteration when the kernel vectorises (codegen/cuda_source.h).
    int64_t total = rows * row_len;
    int64_t per_thread = row_len % 4 == 0 ? 4 : 1;
    int64_t want = (total / per_thread + c.block - 1) / c.block;
    // One wave of resident blocks; the grid-stride loop takes the rest (no tail wave).
    int64_t per_unit = props.resident_threads_per_unit > 0
                           ? std::max<int64_t>(1, props.resident_threads_per_unit / c.block)
                           : 8;
    c.grid = lim.clamp_grid(std::max<int64_t>(1, std::min<int64_t>(want, sms * per_unit)));
  }
  c.rows_per_block = std::max<int64_t>(1, (rows + c.grid - 1) / c.grid);
  return c;
}

Expected<double> time_stream_calls(CudaBackend& be, const std::function<Status()>& f, int reps) {
  const Driver& d = be.rt()->api();
  const CUstream s = be.rt()->stream();
  FERRITE_RETURN_IF_ERROR(f());
  CUevent e0 = nullptr, e1 = nullptr;
  if (d.cuEventCreate(&e0, CU_EVENT_DEFAULT) != CUDA_SUCCESS ||
      d.cuEventCreate(&e1, CU_EVENT_DEFAULT) != CUDA_SUCCESS) {
    if (e0) d.cuEventDestroy(e0);
    return err("cuda: cuEventCreate failed while timing a library call");
  }
  d.cuEventRecord(e0, s);
  Status st = Status::ok();
  for (int r = 0; r < reps && st.is_ok(); ++r) st = f();
  d.cuEventRecord(e1, s);
  d.cuEventSynchronize(e1);
  float ms = 0;
  d.cuEventElapsedTime(&ms, e0, e1);
  d.cuEventDestroy(e0);
  d.cuEventDestroy(e1);
  FERRITE_RETURN_IF_ERROR(st);
  return ms * 1e-3 / reps;
}

std::optional<bool> CudaBackend::recorded_choice(const std::string& key) {
  std::lock_guard<std::mutex> lock(choice_mutex);
  auto it = cudnn_faster.find(key);
  if (it == cudnn_faster.end()) return std::nullopt;
  return it->second;
}

void CudaBackend::record_choice(const std::string& key, bool faster) {
  std::lock_guard<std::mutex> lock(choice_mutex);
  cudnn_faster[key] = faster;
}

bool CudaBackend::capturing() const {
  CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
  return rt()->api().cuStreamIsCapturing(rt()->stream(), &cs) != CUDA_SUCCESS ||
         cs != CU_STREAM_CAPTURE_STATUS_NONE;
}

CudnnConv* CudaBackend::conv_library() {
  if (!cudnn_enabled()) return nullptr;
  std::lock_guard<std::mutex> lock(cudnn_mutex);
  if (!cudnn_tried) {
    // cudnnCreate allocates and synchronises: never inside a CUDA graph capture (a binding's
    // first run, which always precedes its capture, creates it).
    if (capturing()) return nullptr;
    cudnn_tried = true;
    Status cur = rt()->make_current();
    auto c = cur.is_ok() ? CudnnConv::create(*rt()) : Expected<std::unique_ptr<CudnnConv>>(cur);
    if (c) {
      cudnn = std::move(*c);
    } else {
      // A library that loads but cannot start: the im2col path still works, say why once.
      const char* log = std::getenv("FERRITE_LOG");
      if (log && (std::string(log).find("fallback") != std::string::npos ||
                  std::string(log).find("conv") != std::string::npos || std::string(log) == "all"))
        std::fprintf(stderr, "[fallback] cuda: cuDNN did not start: %s\n",
                     c.status().message().c_str());
    }
  }
  return cudnn.get();
}

Expected<std::shared_ptr<CudaBackend>> open_cuda_backend(int ordinal) {
  using Clock = std::chrono::steady_clock;
  auto since = [](Clock::time_point t) {
    return std::chrono::duration<double>(Clock::now() - t).count();
  };
  auto t0 = Clock::now();
  auto b = std::make_shared<CudaBackend>();
  FERRITE_ASSIGN_OR_RETURN(b->parts.properties, probe_properties(ordinal));
  const std::string arch = b->parts.properties.arch;
  const std::string key = b->parts.properties.cache_key();
  FERRITE_RETURN_IF_ERROR(nvrtc().status());
  // NVRTC needs no context: the library compiles while the context and cuBLASLt start.
  auto lib_cubin =
      std::async(std::launch::async, [arch, key] { return LibraryKernels::compile(arch, key); });
  auto t1 = Clock::now();
  FERRITE_ASSIGN_OR_RETURN(auto rt, CudaRuntime::open(ordinal));
  const double t_context = since(t1);
  b->parts.runtime = std::move(rt);
  b->parts.compiler = std::make_unique<NvrtcCompiler>(b->rt(), arch, key);
  b->parts.dialect = std::make_unique<CudaDialect>();
  b->parts.heuristics = std::make_unique<CudaHeuristics>();
  b->parts.library = cuda_library_ops();
  FERRITE_RETURN_IF_ERROR(b->parts.finalize());
  auto t2 = Clock::now();
  FERRITE_ASSIGN_OR_RETURN(b->gemm, CublasGemm::create(*b->rt()));
  const double t_cublas = since(t2);
  auto t3 = Clock::now();
  FERRITE_ASSIGN_OR_RETURN(ChunkedCompile cubins, lib_cubin.get());
  const double t_wait = since(t3);
  auto t4 = Clock::now();
  FERRITE_ASSIGN_OR_RETURN(b->lib, LibraryKernels::load(*b->rt(), arch, key, &cubins));
  const char* log = std::getenv("FERRITE_LOG");
  if (log && (std::string(log).find("compile") != std::string::npos || std::string(log) == "all"))
    std::fprintf(stderr,
                 "[compile] cuda GPU start-up: %.3f s: context and stream %.3f, cuBLASLt %.3f; "
                 "library NVRTC %.3f (%zu programs on %d threads, %d cache hits; waited %.3f), "
                 "library module load %.3f\n",
                 since(t0), t_context, t_cublas, cubins.wall_seconds, cubins.chunks.size(),
                 cubins.threads, cubins.cache_hits, t_wait, since(t4));
  b->flash = FlashAttention::create(*b->rt(), b->parts.properties, key);
  return b;
}

}  // namespace ferrite::cuda
