// The `cpu` device: lowers the graph (fusing pointwise chains and views into generated C++
// kernels), compiles them once with the host C++ compiler, and runs the steps through the shared
// executor (execute/executor.h) with a thread pool: generated kernels split their rows across
// it, library steps run the oneDNN / native kernels (cpu_library.h) or the op table's. Shapes stay
// symbolic in the generated code, so one compile serves every input size.
#include <algorithm>
#include <thread>

#include "backends/cpu/cpu_backend.h"
#include "backends/cpu/cpu_library.h"
#include "execute/executor.h"
#include "passes/pass.h"
#include "runtime/device.h"

namespace ferrite {

namespace {

using KernelFnPtr = void (*)(void* const*, const int64_t*, int64_t, int64_t);

class CpuDevice : public Device {
 public:
  CpuDevice() {
    auto parts = std::make_shared<BackendParts>(make_cpu_backend_parts());
    parts->library = cpu_library_ops();
    Status s = parts->finalize();
    FERRITE_CHECK(s.is_ok());  // the cpu parts are all built in
    parts_ = std::move(parts);
  }
  std::string name() const override { return "cpu"; }
  DeviceProperties properties() const override { return parts_->properties; }
  std::string description() const override {
    return "host CPU: fused kernels generated as C++, compiled with the system compiler";
  }
  // The default pipeline, with convolution chains moved to channels-last activations: oneDNN's
  // NHWC convolutions (depthwise included) read and write them without reorders, and the
  // generated pointwise kernels between them do not care about the layout.
  PassPlan pass_plan() const override { return {true, {}, {"layout-channels-last"}}; }
  // bf16 / fp16: generated kernels convert on load and store; library steps without a low
  // precision implementation (oneDNN GEMM / conv take f32) run widened to f32.
  Status check_precision(Precision p) const override { return check_storage_precision(*this, p); }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    const int threads = opts.threads > 0
                            ? opts.threads
                            : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    auto state = std::make_shared<CpuLibraryState>(threads);
    ExecutorConfig cfg;
    cfg.lowering.horizontal_fusion = true;
    cfg.lowering.low_precision_kernels = true;
    cfg.in_place = true;
    cfg.multi_tensor = true;
    cfg.compiler_label = "C++ compile";
    ThreadPool* pool = &state->pool;
    cfg.launch = [pool](void* fn, const LaunchConfig& c, const std::vector<void*>& bufs,
                        const std::vector<int64_t>& syms, int64_t rows) -> Status {
      auto k = reinterpret_cast<KernelFnPtr>(fn);
      pool->parallel_for(rows, c.rows_per_block,
                         [&](int64_t b, int64_t e) { k(bufs.data(), syms.data(), b, e); });
      return Status::ok();
    };
    cfg.library_state = state.get();
    cfg.state_owner = state;
    return prepare_model(graph, parts_, opts, std::move(cfg));
  }

 private:
  std::shared_ptr<const BackendParts> parts_;
};

}  // namespace

std::unique_ptr<Device> make_cpu_device() {
  return std::make_unique<CpuDevice>();
}

}  // namespace ferrite
