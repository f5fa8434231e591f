#include "plugin_host/plugin_device.h"

#include <algorithm>
#include <chrono>
#include <sstream>

#include "backend_api/backend.h"
#include "codegen/cpp_source.h"
#include "execute/executor.h"
#include "passes/pass.h"
#include "plugin_host/plugin_library.h"
#include "runtime/compile_cache.h"

namespace ferrite {

namespace {

Status check(const fe_device_plugin& api, fe_status code, const char* what) {
  if (code == FE_OK) return Status::ok();
  if (code == FE_ERROR_UNIMPLEMENTED)
    return unsupported(api.spec->name, ": ", what, " is not implemented by the device");
  return err(api.spec->name, ": ", what, " failed: ", describe_plugin_error(api, code));
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

// The plugin's module_compile behind ferrite's compile cache: where the plugin can give a
// module's bytes and load them again (SDK 1.1 module_binary / module_load), a compile is stored
// under a key of the source, the device properties (the whole spec) and the compiler identity,
// and a later process loads it instead of compiling. Without the pair every prepare compiles.
class PluginCompiler : public KernelCompiler {
 public:
  PluginCompiler(std::shared_ptr<LoadedPlugin> p, std::string device_key)
      : p_(std::move(p)), device_key_(std::move(device_key)) {}
  std::string identity() const override {
    const char* id = p_->api->spec->compiler_identity;
    return id ? id : "unnamed";
  }
  Expected<CompiledModule> compile(const std::string& source, const std::string& tag) override {
    auto t0 = std::chrono::steady_clock::now();
    const fe_device_plugin& api = *p_->api;
    const bool cacheable = api.module_binary && api.module_load;
    CompileCache& cache = CompileCache::global();
    const std::string id = identity();
    CacheKey key = make_compile_key({source, FE_KERNEL_ABI_GRID, device_key_, id, "plugin-module"});
    std::string note =
        cacheable ? "" : "the plugin cannot serialize modules (SDK 1.1 module_binary)";
    if (cacheable && cache.enabled()) {
      auto hit = cache.get(key);
      if (hit.hit()) {
        fe_module m = nullptr;
        const std::string& bytes = hit.value->payload;
        fe_status st = api.module_load(bytes.data(), bytes.size(), &m);
        if (st == FE_OK && m) return finish(m, t0, true, "");
        note = "cached module failed to load; recompiling: " + describe_plugin_error(api, st);
      } else if (!hit.reason.empty()) {
        note = hit.reason;
      }
    }
    fe_module m = nullptr;
    const char* log = nullptr;
    fe_status st = api.module_compile(source.data(), source.size(), &m, &log);
    if (st != FE_OK) return check(api, st, "module_compile");
    if (cacheable && cache.enabled()) {
      const void* data = nullptr;
      size_t size = 0;
      // A module that cannot be stored still runs: the cache only saves the next compile.
      fe_status bst = api.module_binary(m, &data, &size);
      if (bst == FE_OK && data && size > 0) {
        Status put = cache.put(key, std::string_view(static_cast<const char*>(data), size), tag);
        if (!put && note.empty()) note = put.message();
      } else if (note.empty()) {
        note = "module_binary gave no bytes: " + describe_plugin_error(api, bst);
      }
    }
    return finish(m, t0, false, std::move(note));
  }

 private:
  CompiledModule finish(fe_module m, std::chrono::steady_clock::time_point t0, bool hit,
                        std::string note) {
    CompiledModule out;
    out.module = std::make_unique<PluginModule>(p_, m);
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    out.artifact = p_->path;
    out.cache_hit = hit;
    out.cache_note = std::move(note);
    return out;
  }

  std::shared_ptr<LoadedPlugin> p_;
  std::string device_key_;
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
  // The default pipeline, with each rewrite into a ferrite.* library op (FusedMatMul, FusedConv,
  // Attention) only where the plugin's library runs that op: otherwise plain MatMul/Gemm lower to
  // generated kernels with their bias and activation fused into the store, which a fused node
  // would lose.
  PassPlan pass_plan() const override {
    const fe_device_spec* spec = p_->api->spec;
    return {true, [spec](const std::string& op) {
              const size_t dot = op.find('.');  // "domain.Op"; "Op" in the default domain
              if (dot == std::string::npos) return plugin_lists_op(*spec, "", op);
              return plugin_lists_op(*spec, op.substr(0, dot), op.substr(dot + 1));
            }};
  }
  Expected<std::unique_ptr<PreparedModel>> prepare(const Graph& graph,
                                                   const RunOptions& opts) override {
    if (!parts_->compiler)
      return unsupported(name(),
                         ": the device has no compiler (its plugin provides no "
                         "module_compile), so it cannot run generated kernels");
    ExecutorConfig cfg;
    cfg.lowering.horizontal_fusion = true;  // the grid dialect stores extra outputs
    // Kernels only over the element types the plugin declares (bf16 / f16 storage kernels are
    // not generated for plugins: such values run in library steps).
    cfg.lowering.kernel_dtypes = parts_->properties.dtypes;
    // MatMul and Gemm are generated unless the plugin's library runs both (then a node it
    // declines runs on the host: a vendor GEMM that takes only some shapes should list neither).
    const fe_device_spec& spec = *p_->api->spec;
    cfg.lowering.generate_matmul =
        !(plugin_lists_op(spec, "", "MatMul") && plugin_lists_op(spec, "", "Gemm"));
    if (parts_->library) {
      cfg.library_state = const_cast<fe_device_plugin*>(p_->api);
      cfg.state_owner = p_;  // the table the state points at
    }
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
  // The exact list: a spec allowing 1 and 4 warps forbids 2 (SDK 1.0 hosts kept only the maximum).
  int max_warps = 0;
  for (int i = 0; i < s.allowed_num_warps_count && i < 8; ++i) {
    const int w = s.allowed_num_warps[i];
    if (w <= 0 || std::count(p.launch.allowed_warps.begin(), p.launch.allowed_warps.end(), w))
      continue;
    p.launch.allowed_warps.push_back(w);
    max_warps = std::max(max_warps, w);
  }
  std::sort(p.launch.allowed_warps.begin(), p.launch.allowed_warps.end());
  if (max_warps > 0) p.launch.max_warps_per_block = max_warps;
  if (s.grid[0].max > 0) p.launch.max_grid = s.grid[0].max;
  if (s.grid[0].any_upto > 0) p.launch.grid_any_upto = s.grid[0].any_upto;
  if (s.grid[0].multiple > 0) p.launch.grid_multiple = s.grid[0].multiple;
  // The plugin's element types (SDK 1.1); SDK 1.0's fixed list when it declares none.
  for (int i = 0; i < s.dtypes_count && s.dtypes; ++i) {
    auto t = dtype_from_onnx(s.dtypes[i]);
    if (t && std::find(p.dtypes.begin(), p.dtypes.end(), *t) == p.dtypes.end())
      p.dtypes.push_back(*t);
  }
  if (p.dtypes.empty())
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
  parts->library = make_plugin_library(*plugin);
  if (api.module_compile) {
    parts->compiler = std::make_unique<PluginCompiler>(plugin, parts->properties.cache_key());
    parts->dialect =
        std::make_unique<GridDialect>(api.spec->codegen_prelude ? api.spec->codegen_prelude : "");
  }
  FERRITE_RETURN_IF_ERROR(parts->finalize());
  return std::unique_ptr<Device>(std::make_unique<PluginDevice>(plugin, parts));
}

}  // namespace ferrite
