// The `cuda` device: lowers the graph, generates CUDA C++ for its kernels (codegen/cuda_source.h),
// compiles them with NVRTC for the GPU's architecture and runs the step list on the GPU through
// the shared executor (execute/executor.h), with the cuda library table (cuda_native_ops.h),
// CUDA graphs and events (cuda_runtime.h) and a caching pool (cuda_pool.h). The GPU is opened on
// first use; without a driver or a GPU, prepare() returns an error saying what is missing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <mutex>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_compile.h"
#include "backends/cuda/cuda_nccl.h"
#include "codegen/cuda_source.h"
#include "execute/executor.h"
#include "execute/step_plan.h"
#include "lower/lowering.h"
#include "passes/pass.h"
#include "runtime/device.h"

namespace ferrite {

namespace {

constexpr const char* kLayoutPass = "layout-channels-last{weights=last dtypes=bf16+f16}";

// The GPU of a device object: its unit (`cuda:N`), else FERRITE_CUDA_DEVICE, else 0.
int gpu_ordinal(int unit) {
  if (unit >= 0) return unit;
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

// The executor's hooks for a model on the opened GPU: its parts, library state (the backend),
// kernel launches on the runtime's stream, and the runs of all models taking turns.
Status use_backend(const std::shared_ptr<cuda::CudaBackend>& be,
                   std::shared_ptr<const BackendParts>& parts, ExecutorConfig& cfg) {
  parts = std::shared_ptr<const BackendParts>(be, &be->parts);
  cfg.library_state = be.get();
  cfg.state_owner = be;
  cfg.device_gate = &be->gate;
  cuda::CudaRuntime* rt = be->rt();
  // This context's own stream: its runs overlap with other contexts' on the GPU.
  FERRITE_ASSIGN_OR_RETURN(std::shared_ptr<cuda::ContextStream> cs,
                           cuda::ContextStream::create(*rt));
  cfg.enter = [rt, cs] {
    rt->use(cs.get());
    return rt->make_current();
  };
  cfg.leave = [rt] { rt->use(nullptr); };
  cfg.launch = [rt](void* fn, const LaunchConfig& lc, const std::vector<void*>& bufs,
                    const std::vector<int64_t>& syms, int64_t) -> Status {
    std::vector<void*> ptrs(bufs);
    std::vector<int64_t> values(syms);
    std::vector<void*> args;
    args.reserve(ptrs.size() + values.size());
    for (void*& p : ptrs) args.push_back(&p);
    for (int64_t& v : values) args.push_back(&v);
    return cuda::check(
        rt->api().cuLaunchKernel(reinterpret_cast<CUfunction>(fn), static_cast<unsigned>(lc.grid),
                                 1, 1, static_cast<unsigned>(lc.block), 1, 1, 0, rt->stream(),
                                 args.data(), nullptr),
        "cuLaunchKernel");
  };
  return Status::ok();
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
  Status available() const override { return backend().status(); }
  DeviceProperties properties() const override {
    auto b = backend();
    if (b) return (*b)->parts.properties;
    DeviceProperties p = cuda::offline_properties(9, 0);
    p.model = "unavailable: " + b.status().message();
    return p;
  }
  // The default pipeline, plus:
  //   - layout-channels-last for bf16 / f16 convolutions: cuDNN's tensor-core convolutions are
  //     NHWC kernels (an NCHW call is transposed around them), so chains of convolutions and the
  //     pointwise ops between them run channels-last, with cuDNN's [K, KH, KW, C] filters made at
  //     compile time. f32 stays NCHW (im2col + cuBLASLt or cuDNN by size: cudnn_for);
  //   - narrow-attention-precision: bf16 / f16 attention that PyTorch widened to f32 runs on the
  //     tensor-core kernel.
  PassPlan pass_plan() const override {
    return {true, {}, {kLayoutPass, "narrow-attention-precision", "fold-attention-layout"}};
  }
  // Up to 4 runs of one session at once, each context on a stream of its own over the weights
  // context 0 holds (PreparedModel::device_constants); each further context adds its arena and
  // a cuBLASLt workspace. Contexts are made only when runs overlap.
  int default_contexts() const override { return 4; }

  // bf16 GEMMs need compute capability 8.0 (Ampere); fp16 and TF32 likewise for tensor cores.
  // Without a GPU the answer waits for prepare(), which reports why there is none.
  Status check_precision(Precision p) const override {
    if (p == Precision::kF32) return Status::ok();
    auto b = backend();
    if (!b) return Status::ok();
    const auto& f = (*b)->parts.properties.features;
    if (std::find(f.begin(), f.end(), "bf16") == f.end())
      return unsupported("device 'cuda' (", (*b)->parts.properties.arch,
                         ") does not run precision ", precision_name(p),
                         ": it needs compute capability 8.0 or newer");
    return Status::ok();
  }

  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    // Lowering and NVRTC need the GPU's properties only; the GPU itself (context, stream,
    // library kernels, cuBLASLt) starts on another thread meanwhile.
    auto t0 = std::chrono::steady_clock::now();
    FERRITE_ASSIGN_OR_RETURN(DeviceProperties props, probe());
    auto probed = std::make_shared<BackendParts>();
    probed->properties = props;
    std::future<Expected<std::shared_ptr<cuda::CudaBackend>>> gpu =
        std::async(std::launch::async, [this] { return backend(); });
    ExecutorConfig cfg;
    cfg.lowering.low_precision_kernels = true;
    cfg.in_place = true;
    // Optimizer steps: multi-tensor kernels whose pointers, 8 bytes each, stay within the 4 KB
    // of kernel parameters every driver accepts (with room to spare).
    cfg.multi_tensor = true;
    cfg.multi_tensor_max_params = 480;
    cfg.tunable = false;  // launches come from CudaHeuristics, once per binding
    const bool want_source = opts.dump_dir || std::getenv("FERRITE_DUMP_LOWERED");
    cfg.build = [&](const LoweredGraph& lg, std::string& source,
                    std::shared_ptr<const BackendParts>& parts,
                    ExecutorConfig& self) -> Expected<CompiledModule> {
      const double t_lower = since(t0);
      auto t1 = std::chrono::steady_clock::now();
      cuda::CudaDialect dialect;
      if (want_source) {
        FERRITE_ASSIGN_OR_RETURN(source, dialect.generate(lg, props));
      }
      FERRITE_ASSIGN_OR_RETURN(cuda::KernelSources ks,
                               cuda::split_kernel_sources(lg, dialect, props));
      const int threads = cuda::compile_threads();
      FERRITE_ASSIGN_OR_RETURN(
          cuda::ChunkedCompile compiled,
          cuda::compile_chunks(cuda::make_chunks(ks, chunk_count(ks.texts.size(), threads)),
                               props.arch, props.cache_key(), threads));
      const double t_nvrtc = since(t1);
      auto t2 = std::chrono::steady_clock::now();
      FERRITE_ASSIGN_OR_RETURN(std::shared_ptr<cuda::CudaBackend> be, gpu.get());
      const double t_wait = since(t2);
      auto t3 = std::chrono::steady_clock::now();
      FERRITE_ASSIGN_OR_RETURN(auto modules, cuda::ModuleSet::load(*be->rt(), compiled, ks));
      if (log_enabled("compile"))
        std::fprintf(stderr,
                     "[compile] cuda %s: probe and lower %.3f s, codegen + NVRTC %.3f (%zu "
                     "kernels, %zu distinct, %zu programs on %d threads, %d cache hits, %.3f s "
                     "summed over programs), waiting for the GPU %.3f, module load %.3f\n",
                     props.arch.c_str(), t_lower, t_nvrtc, static_cast<size_t>(ks.kernels),
                     ks.texts.size(), compiled.chunks.size(), compiled.threads, compiled.cache_hits,
                     compiled.compile_seconds, t_wait, since(t3));
      FERRITE_RETURN_IF_ERROR(use_backend(be, parts, self));
      CompiledModule m;
      m.module = std::move(modules);
      m.seconds = compiled.wall_seconds;
      m.cache_hit = compiled.cache_hits > 0 &&
                    compiled.cache_hits == static_cast<int>(compiled.chunks.size());
      return m;
    };
    return prepare_model(graph, probed, opts, std::move(cfg));
  }

  // `cuda:N`: GPU N (before the GPU is probed or opened: the registry calls this first).
  Status select(int index) override {
    unit_ = index;
    return Status::ok();
  }
  // NCCL over GPUs 0..size-1 for tensor-parallel runs (rank r on `cuda:r`).
  Expected<std::vector<std::unique_ptr<Communicator>>> communicator_group(int size) override {
    return cuda::make_nccl_group(size);
  }
  // One rank of an NCCL group of processes, on this object's GPU.
  Expected<std::string> communicator_id() override { return cuda::make_nccl_id(); }
  Expected<std::unique_ptr<Communicator>> communicator_rank(const std::string& id, int rank,
                                                            int size) override {
    FERRITE_ASSIGN_OR_RETURN(std::shared_ptr<cuda::CudaBackend> be, backend());
    return cuda::make_nccl_rank(std::move(be), gpu_ordinal(unit_), id, rank, size);
  }

 private:
  int unit_ = -1;
  // The GPU's properties, read once without opening it.
  Expected<DeviceProperties> probe() const {
    std::call_once(probe_once_, [&] {
      auto p = cuda::probe_properties(gpu_ordinal(unit_));
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
      auto b = cuda::open_cuda_backend(gpu_ordinal(unit_));
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
