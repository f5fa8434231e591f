// The `null` device: the smallest runnable device, and the example to copy for a new in-tree
// device (docs/adding-a-device.md). It is an accelerator emulated in host memory:
//
//   part        here                                          a real device
//   properties  a made-up 16-unit accelerator, grid <= 64     what its driver reports
//   runtime     host memory (host_memory(): tensors alias it) its driver's malloc / memcpy / sync
//   compiler    the host C++ compiler (cpu's, compile-cached) its toolchain
//   dialect     the grid dialect (codegen/cpp_source.h)      its kernel language
//   heuristics  DefaultHeuristics from the launch limits     its own, once tuned
//   library     none: library steps run the op table's kernels on the host
//
// Everything else (lowering, memory planning, step execution, host fallback, profiles, traces,
// dumps) is the shared executor's (execute/executor.h).
#include <cstdlib>
#include <cstring>

#include "backend_api/backend.h"
#include "backends/cpu/host_compiler.h"
#include "codegen/cpp_source.h"
#include "execute/executor.h"
#include "runtime/device.h"

namespace ferrite {

namespace {

DeviceProperties null_properties() {
  DeviceProperties p;
  p.name = "null";
  p.kind = "accelerator";
  p.model = "null device (host-memory example accelerator)";
  p.arch = "host (grid launch)";
  p.compute_units = 16;
  p.alignment = 64;
  p.launch.max_grid = 64;  // launches run their programs one after another
  p.dtypes = {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool};
  p.host_addressable = true;
  return p;
}

// Required: memory and ordering. A device calls its driver here; `null` uses host memory and
// runs everything synchronously.
class NullRuntime : public DeviceRuntime {
 public:
  Expected<void*> allocate(size_t bytes, size_t alignment) override {
    alignment = std::max<size_t>(alignment, 64);
    if ((alignment & (alignment - 1)) != 0) return err("null: alignment is not a power of 2");
    void* p = std::aligned_alloc(
        alignment, (std::max<size_t>(bytes, 1) + alignment - 1) / alignment * alignment);
    if (!p) return err("null: out of memory allocating ", bytes, " bytes");
    return p;
  }
  void free(void* ptr) override { std::free(ptr); }
  Status copy_to_device(void* dst, const void* src, size_t n) override { return copy(dst, src, n); }
  Status copy_to_host(void* dst, const void* src, size_t n) override { return copy(dst, src, n); }
  Status copy_on_device(void* dst, const void* src, size_t n) override { return copy(dst, src, n); }
  Status synchronize() override { return Status::ok(); }
  // Device memory is host memory: the executor aliases it with tensors instead of copying.
  bool host_memory() const override { return true; }

 private:
  static Status copy(void* dst, const void* src, size_t n) {
    if (n) std::memmove(dst, src, n);
    return Status::ok();
  }
};

// Optional: generated source -> loaded module. `null` builds host code with the cpu device's
// compile-cached host compiler.
class NullCompiler : public KernelCompiler {
 public:
  explicit NullCompiler(std::string key) : key_(std::move(key)) {}
  std::string identity() const override { return "host c++ via null"; }
  Expected<CompiledModule> compile(const std::string& source, const std::string& tag) override {
    return compile_and_load(source, tag, key_);
  }

 private:
  std::string key_;
};

// Required with a compiler: lowered kernels -> source. Each kernel is a program of a grid:
// program `block` of `grid` takes its share of the rows.
class NullDialect : public CodegenDialect {
 public:
  std::string name() const override { return "c++ (grid launch)"; }
  std::string kernel_abi() const override { return grid_kernel_abi(); }
  Expected<std::string> generate(const LoweredGraph& lg, const DeviceProperties&) const override {
    HostLoopStyle style;
    style.grid_launch = true;
    return generate_row_loop_source(lg, style);
  }
};

using GridKernel = void (*)(void* const*, const int64_t*, int64_t, int64_t);

class NullDevice : public Device {
 public:
  NullDevice() : parts_(std::make_shared<BackendParts>()) {
    parts_->properties = null_properties();
    parts_->runtime = std::make_unique<NullRuntime>();
    parts_->compiler = std::make_unique<NullCompiler>(parts_->properties.cache_key());
    parts_->dialect = std::make_unique<NullDialect>();
    // heuristics and library: left out (DefaultHeuristics; the op table's kernels).
    Status s = parts_->finalize();
    FERRITE_CHECK(s.is_ok());
  }
  std::string name() const override { return "null"; }
  std::string description() const override {
    return "example accelerator emulated in host memory (the template for new devices)";
  }
  DeviceProperties properties() const override { return parts_->properties; }
  PassPlan pass_plan() const override { return {true}; }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    ExecutorConfig cfg;
    cfg.lowering.horizontal_fusion = true;  // the grid dialect stores extra outputs
    // A launch runs the grid's programs one after another (a device would queue them).
    cfg.launch = [](void* fn, const LaunchConfig& c, const std::vector<void*>& bufs,
                    const std::vector<int64_t>& syms, int64_t) -> Status {
      auto k = reinterpret_cast<GridKernel>(fn);
      for (int64_t b = 0; b < c.grid; ++b) k(bufs.data(), syms.data(), b, c.grid);
      return Status::ok();
    };
    return prepare_model(graph, parts_, opts, std::move(cfg));
  }

 private:
  std::shared_ptr<BackendParts> parts_;
};

}  // namespace

std::unique_ptr<Device> make_null_device() {
  return std::make_unique<NullDevice>();
}

}  // namespace ferrite
