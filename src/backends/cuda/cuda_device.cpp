// The `cuda` device: lowers the graph, generates CUDA C++ for its kernels (cuda_dialect.h),
// compiles them with NVRTC for the GPU's architecture and runs the step list on the GPU
// (cuda_executor.h). The GPU is opened on first use; without a driver or a GPU, prepare()
// returns an error saying what is missing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_compile.h"
#include "backends/cuda/cuda_dialect.h"
#include "backends/cuda/cuda_executor.h"
#include "lower/lowering.h"
#include "memory/in_place.h"
#include "passes/pass.h"
#include "runtime/device.h"

namespace ferrite {

namespace {

bool log_enabled(const char* topic) {
  const char* v = std::getenv("FERRITE_LOG");
  return v && (std::string(v).find(topic) != std::string::npos || std::string(v) == "all");
}

int gpu_ordinal() {
  const char* v = std::getenv("FERRITE_CUDA_DEVICE");
  return v && *v ? std::atoi(v) : 0;
}

double since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// NVRTC programs for `kernels` distinct kernels on `threads` threads: one per thread (each
// program pays a fixed start-up, so more would cost more than the better balance gains), and
// FERRITE_CUDA_COMPILE_CHUNKS to override.
int chunk_count(size_t kernels, int threads) {
  if (const char* v = std::getenv("FERRITE_CUDA_COMPILE_CHUNKS"); v && std::atoi(v) > 0)
    return std::atoi(v);
  return static_cast<int>(std::min<size_t>(kernels, static_cast<size_t>(threads)));
}

class CudaDevice : public Device {
 public:
  std::string name() const override { return "cuda"; }
  std::string description() const override {
    auto d = cuda::driver();
    std::string base = "NVIDIA GPU: CUDA kernels generated and compiled with NVRTC, cuBLASLt GEMM";
    if (!d) return base + " (unavailable: " + d.status().message() + ")";
    return base;
  }
  DeviceProperties properties() const override {
    auto b = backend();
    if (b) return (*b)->parts.properties;
    DeviceProperties p = cuda::offline_properties(9, 0);
    p.model = "unavailable: " + b.status().message();
    return p;
  }
  // The default pipeline without fuse-conv-activation: the cuda convolution (im2col + cuBLASLt)
  // takes bias only, so a ferrite.FusedConv would run on the host; its Relu/Add stay separate
  // generated kernels until the conv path takes FusedConv's epilogue.
  std::vector<std::string> default_passes() const override {
    std::vector<std::string> passes;
    for (auto& p : default_pipeline())
      if (p != "fuse-conv-activation") passes.push_back(p);
    return passes;
  }

  // bf16 GEMMs need compute capability 8.0 (Ampere); fp16 and TF32 likewise for tensor cores.
  // Without a GPU the answer waits for prepare(), which reports why there is none.
  Status check_precision(Precision p) const override {
    if (p == Precision::kF32) return Status::ok();
    auto b = backend();
    if (!b) return Status::ok();
    const auto& f = (*b)->parts.properties.features;
    if (std::find(f.begin(), f.end(), "bf16") == f.end())
      return unsupported("device 'cuda' (", (*b)->parts.properties.arch, ") does not run precision ",
                         precision_name(p), ": it needs compute capability 8.0 or newer");
    return Status::ok();
  }

  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    auto t0 = std::chrono::steady_clock::now();
    // Lowering and NVRTC need the GPU's properties only; the GPU itself (context, stream,
    // library kernels, cuBLASLt) starts on another thread meanwhile.
    FERRITE_ASSIGN_OR_RETURN(DeviceProperties props, probe());
    const double t_probe = since(t0);
    std::future<Expected<std::shared_ptr<cuda::CudaBackend>>> gpu =
        std::async(std::launch::async, [this] { return backend(); });
    auto t1 = std::chrono::steady_clock::now();
    LoweringOptions lower_opts;
    lower_opts.low_precision_kernels = true;
    FERRITE_ASSIGN_OR_RETURN(LoweredGraph lg, lower_graph(graph, lower_opts));
    mark_in_place_candidates(lg);
    const double t_lower = since(t1);
    auto t2 = std::chrono::steady_clock::now();
    cuda::CudaDialect dialect;
    if (const char* dump = std::getenv("FERRITE_DUMP_LOWERED")) {
      FERRITE_ASSIGN_OR_RETURN(std::string source, dialect.generate(lg, props));
      if (std::FILE* f = std::fopen(dump, "w")) {
        std::fputs(print_lowered(lg).c_str(), f);
        std::fputs("\n", f);
        std::fputs(source.c_str(), f);
        std::fclose(f);
      }
    }
    FERRITE_ASSIGN_OR_RETURN(cuda::KernelSources ks,
                             cuda::split_kernel_sources(lg, dialect, props));
    const double t_codegen = since(t2);
    const int threads = cuda::compile_threads();
    FERRITE_ASSIGN_OR_RETURN(
        cuda::ChunkedCompile compiled,
        cuda::compile_chunks(cuda::make_chunks(ks, chunk_count(ks.texts.size(), threads)),
                             props.arch, props.cache_key(), threads));
    auto t3 = std::chrono::steady_clock::now();
    FERRITE_ASSIGN_OR_RETURN(std::shared_ptr<cuda::CudaBackend> be, gpu.get());
    const double t_wait = since(t3);
    auto t4 = std::chrono::steady_clock::now();
    FERRITE_ASSIGN_OR_RETURN(auto modules, cuda::ModuleSet::load(*be->rt, compiled, ks));
    const double t_load = since(t4);
    if (log_enabled("compile"))
      std::fprintf(stderr,
                   "[compile] cuda %s: %.3f s: probe %.3f, lower %.3f, codegen %.3f, NVRTC %.3f "
                   "(%zu kernels, %zu distinct, %zu programs on %d threads, %d cache hits, "
                   "%.3f s summed over programs), waiting for the GPU %.3f, module load %.3f\n",
                   props.arch.c_str(), since(t0), t_probe, t_lower, t_codegen,
                   compiled.wall_seconds, static_cast<size_t>(ks.kernels), ks.texts.size(),
                   compiled.chunks.size(), compiled.threads, compiled.cache_hits,
                   compiled.compile_seconds, t_wait, t_load);
    if (log_enabled("fusion"))
      std::fprintf(stderr,
                   "[fusion] %zu nodes -> %d generated kernels (%d with reductions; %d nodes "
                   "fused) + %d library calls\n",
                   graph.nodes().size(), lg.kernels, lg.row_kernels, lg.fused_nodes,
                   lg.library_steps);
    return cuda::make_cuda_model(graph, std::move(lg), std::move(modules), be,
                                 opts.precision == Precision::kTF32);
  }

 private:
  // The GPU's properties, read once without opening it.
  Expected<DeviceProperties> probe() const {
    std::call_once(probe_once_, [&] {
      auto p = cuda::probe_properties(gpu_ordinal());
      if (p)
        props_ = *p;
      else
        probe_error_ = p.status();
    });
    if (probe_error_.is_ok()) return props_;
    return probe_error_;
  }
  mutable std::once_flag probe_once_;
  mutable DeviceProperties props_;
  mutable Status probe_error_ = Status::ok();

  // The GPU, opened once per device object (and its error, when it cannot be).
  Expected<std::shared_ptr<cuda::CudaBackend>> backend() const {
    std::call_once(once_, [&] {
      auto b = cuda::open_cuda_backend(gpu_ordinal());
      if (b)
        backend_ = *b;
      else
        error_ = b.status();
    });
    if (backend_) return backend_;
    return error_;
  }
  mutable std::once_flag once_;
  mutable std::shared_ptr<cuda::CudaBackend> backend_;
  mutable Status error_ = Status::ok();
};

}  // namespace

std::unique_ptr<Device> make_cuda_device() {
  return std::make_unique<CudaDevice>();
}

}  // namespace ferrite
