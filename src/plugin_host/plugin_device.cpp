#include "plugin_host/plugin_device.h"

#include <chrono>
#include <sstream>

#include "backend_api/backend.h"
#include "codegen/cpp_source.h"
#include "execute/executor.h"
#include "passes/pass.h"

namespace ferrite {

namespace {

// The plugin's error as text: its code's name and, where it keeps one, the detail.
std::string describe(const fe_device_plugin& api, fe_status code) {
  std::string s = api.error_string ? api.error_string(code) : "error";
  s += " (" + std::to_string(code) + ")";
  if (api.last_error_message) {
    const char* m = api.last_error_message();
    if (m && *m) s += ": " + std::string(m);
  }
  return s;
}

Status check(const fe_device_plugin& api, fe_status code, const char* what) {
  if (code == FE_OK) return Status::ok();
  if (code == FE_ERROR_UNIMPLEMENTED)
    return unsupported(api.spec->name, ": ", what, " is not implemented by the device");
  return err(api.spec->name, ": ", what, " failed: ", describe(api, code));
}

class PluginRuntime : public DeviceRuntime {
 public:
  explicit PluginRuntime(std::shared_ptr<LoadedPlugin> p) : p_(std::move(p)), api_(*p_->api) {}
  Expected<void*> allocate(size_t bytes, size_t) override {
    void* ptr = nullptr;
    FERRITE_RETURN_IF_ERROR(check(api_, api_.malloc(&ptr, bytes), "malloc"));
    return ptr;
  }
  void free(void* ptr) override {
    if (ptr) api_.free(ptr);
  }
  Status copy_to_device(void* dst, const void* src, size_t n) override {
    return check(api_, api_.memcpy_h2d(dst, src, n), "memcpy_h2d");
  }
  Status copy_to_host(void* dst, const void* src, size_t n) override {
    return check(api_, api_.memcpy_d2h(dst, src, n), "memcpy_d2h");
  }
  Status copy_on_device(void* dst, const void* src, size_t n) override {
    return check(api_, api_.memcpy_d2d(dst, src, n), "memcpy_d2d");
  }
  Status synchronize() override { return check(api_, api_.synchronize(), "synchronize"); }
  Status fill(void* dst, uint8_t value, size_t n) override {
    if (!api_.memset_d8) return DeviceRuntime::fill(dst, value, n);
    return check(api_, api_.memset_d8(dst, value, n), "memset_d8");
  }

 private:
  std::shared_ptr<LoadedPlugin> p_;
  const fe_device_plugin& api_;
};

class PluginModule : public LoadedModule {
 public:
  PluginModule(std::shared_ptr<LoadedPlugin> p, fe_module m) : p_(std::move(p)), m_(m) {}
  ~PluginModule() override { p_->api->module_unload(m_); }
  void* symbol(const std::string& name) const override {
    fe_function fn = nullptr;
    if (p_->api->module_get_function(m_, name.c_str(), &fn) != FE_OK) return nullptr;
    return fn;
  }

 private:
  std::shared_ptr<LoadedPlugin> p_;
  fe_module m_;
};

class PluginCompiler : public KernelCompiler {
 public:
  explicit PluginCompiler(std::shared_ptr<LoadedPlugin> p) : p_(std::move(p)) {}
  std::string identity() const override {
    const char* id = p_->api->spec->compiler_identity;
    return id ? id : "unnamed";
  }
  Expected<CompiledModule> compile(const std::string& source, const std::string& tag) override {
    auto t0 = std::chrono::steady_clock::now();
    fe_module m = nullptr;
    const char* log = nullptr;
    fe_status st = p_->api->module_compile(source.data(), source.size(), &m, &log);
    if (st != FE_OK) return check(*p_->api, st, "module_compile");
    CompiledModule out;
    out.module = std::make_unique<PluginModule>(p_, m);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.artifact = p_->path;
    return out;
  }

 private:
  std::shared_ptr<LoadedPlugin> p_;
};

class GridDialect : public CodegenDialect {
 public:
  explicit GridDialect(std::string extra_prelude) : extra_(std::move(extra_prelude)) {}
  std::string name() const override { return "c++ (grid launch)"; }
  std::string kernel_abi() const override { return grid_kernel_abi(); }
  Expected<std::string> generate(const LoweredGraph& lg,
                                 const DeviceProperties& props) const override {
    HostLoopStyle style;
    style.grid_launch = true;
    style.prelude = std::string(host_prelude_source()) + extra_;
    return generate_row_loop_source(lg, style);
  }

 private:
  std::string extra_;
};

class PluginDevice : public Device {
 public:
  PluginDevice(std::shared_ptr<LoadedPlugin> p, std::shared_ptr<BackendParts> parts)
      : p_(std::move(p)), parts_(std::move(parts)) {}
  std::string name() const override { return parts_->properties.name; }
  std::string description() const override {
    return parts_->properties.model + ", device SDK plugin";
  }
  DeviceProperties properties() const override { return parts_->properties; }
  // The default pipeline without the rewrites into ferrite.* library ops (FusedMatMul,
  // FusedConv, Attention): a plugin has no library kernels for them, while plain MatMul/Gemm
  // lower to generated kernels with their bias and activation fused into the store.
  std::vector<std::string> default_passes() const override {
    std::vector<std::string> passes;
    for (auto& p : default_pipeline())
      if (p != "fuse-matmul-epilogue" && p != "fuse-conv-activation" && p != "fuse-attention")
        passes.push_back(p);
    return passes;
  }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    if (!parts_->compiler)
      return unsupported(name(),
                         ": the device has no compiler (its plugin provides no "
                         "module_compile), so it cannot run generated kernels");
    ExecutorConfig cfg;
    cfg.lowering.horizontal_fusion = true;  // the grid dialect stores extra outputs
    cfg.lowering.generate_matmul = true;    // the SDK has no library GEMM: generate it
    auto p = p_;
    cfg.launch = [p](void* fn, const LaunchConfig& c, const std::vector<void*>& bufs,
                     const std::vector<int64_t>& syms, int64_t) -> Status {
      fe_kernel_args args{bufs.data(), static_cast<int32_t>(bufs.size()), syms.data(),
                          static_cast<int32_t>(syms.size())};
      fe_status st = p->api->launch_kernel(static_cast<fe_function>(fn), c.grid, 1, 1,
                                           static_cast<int32_t>(c.block), c.shared_bytes, 0, &args);
      return check(*p->api, st, "launch_kernel");
    };
    return prepare_model(graph, parts_, opts, std::move(cfg));
  }

 private:
  std::shared_ptr<LoadedPlugin> p_;
  std::shared_ptr<BackendParts> parts_;
};

}  // namespace

DeviceProperties properties_from_spec(const fe_device_spec& s) {
  DeviceProperties p;
  p.name = s.name;
  p.kind = "accelerator";
  p.model = s.model ? s.model : "";
  p.arch = s.arch ? s.arch : "";
  p.compute_units = std::max(1, s.compute_units);
  p.memory_bytes = s.memory_bytes;
  p.shared_memory_per_block = s.shared_memory_per_block;
  p.vector_bytes = s.preferred_vector_bytes > 0 ? s.preferred_vector_bytes : 16;
  p.alignment = s.alignment > 0 ? s.alignment : 64;
  for (int i = 0; i < s.preferred_block_sizes_count && i < 8; ++i)
    if (s.preferred_block_sizes[i] > 0) p.preferred_blocks.push_back(s.preferred_block_sizes[i]);
  p.launch.warp_size = std::max(1, s.warp_size);
  p.launch.max_block = std::max(1, s.max_threads_per_block);
  int max_warps = 0;
  for (int i = 0; i < s.allowed_num_warps_count && i < 8; ++i)
    max_warps = std::max(max_warps, s.allowed_num_warps[i]);
  if (max_warps > 0) p.launch.max_warps_per_block = max_warps;
  if (s.grid[0].max > 0) p.launch.max_grid = s.grid[0].max;
  if (s.grid[0].any_upto > 0) p.launch.grid_any_upto = s.grid[0].any_upto;
  if (s.grid[0].multiple > 0) p.launch.grid_multiple = s.grid[0].multiple;
  p.dtypes = {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool};
  p.host_addressable = s.host_addressable != 0;
  if (s.compiler_identity) p.features.push_back(std::string("cc:") + s.compiler_identity);
  return p;
}

Expected<std::unique_ptr<Device>> make_plugin_device(std::shared_ptr<LoadedPlugin> plugin) {
  const fe_device_plugin& api = *plugin->api;
  int32_t count = 0;
  FERRITE_RETURN_IF_ERROR(check(api, api.get_device_count(&count), "get_device_count"));
  if (count < 1) return err(api.spec->name, ": the plugin reports no device present");
  FERRITE_RETURN_IF_ERROR(check(api, api.set_device(0), "set_device"));
  auto parts = std::make_shared<BackendParts>();
  parts->properties = properties_from_spec(*api.spec);
  parts->runtime = std::make_unique<PluginRuntime>(plugin);
  if (api.module_compile) {
    parts->compiler = std::make_unique<PluginCompiler>(plugin);
    parts->dialect = std::make_unique<GridDialect>(
        api.spec->codegen_prelude ? api.spec->codegen_prelude : "");
  }
  FERRITE_RETURN_IF_ERROR(parts->finalize());
  return std::unique_ptr<Device>(std::make_unique<PluginDevice>(plugin, parts));
}

}  // namespace ferrite
