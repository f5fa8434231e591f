// The `cuda` device: lowers the graph, generates CUDA C++ for its kernels (cuda_dialect.h),
// compiles them with NVRTC for the GPU's architecture and runs the step list on the GPU
// (cuda_executor.h). The GPU is opened on first use; without a driver or a GPU, prepare()
// returns an error saying what is missing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "backends/cuda/cuda_backend.h"
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
    FERRITE_ASSIGN_OR_RETURN(std::shared_ptr<cuda::CudaBackend> be, backend());
    LoweringOptions lower_opts;
    lower_opts.low_precision_kernels = true;
    FERRITE_ASSIGN_OR_RETURN(LoweredGraph lg, lower_graph(graph, lower_opts));
    mark_in_place_candidates(lg);
    FERRITE_ASSIGN_OR_RETURN(std::string source,
                             be->parts.dialect->generate(lg, be->parts.properties));
    if (const char* dump = std::getenv("FERRITE_DUMP_LOWERED")) {
      if (std::FILE* f = std::fopen(dump, "w")) {
        std::fputs(print_lowered(lg).c_str(), f);
        std::fputs("\n", f);
        std::fputs(source.c_str(), f);
        std::fclose(f);
      }
    }
    FERRITE_ASSIGN_OR_RETURN(CompiledModule compiled,
                             be->parts.compiler->compile(source, "kernels"));
    if (log_enabled("compile"))
      std::fprintf(
          stderr, "[compile] cuda %s: %.3f s (%s %.3f s)%s%s\n", be->parts.properties.arch.c_str(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
          compiled.cache_hit ? "compile cache hit, load" : "NVRTC compile", compiled.seconds,
          compiled.cache_note.empty() ? "" : "; cache: ", compiled.cache_note.c_str());
    if (log_enabled("fusion"))
      std::fprintf(stderr,
                   "[fusion] %zu nodes -> %d generated kernels (%d with reductions; %d nodes "
                   "fused) + %d library calls\n",
                   graph.nodes().size(), lg.kernels, lg.row_kernels, lg.fused_nodes,
                   lg.library_steps);
    return cuda::make_cuda_model(graph, std::move(lg), std::move(compiled.module), be,
                                 opts.precision == Precision::kTF32);
  }

 private:
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
