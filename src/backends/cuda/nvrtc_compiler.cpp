#include "backends/cuda/nvrtc_compiler.h"

#include <chrono>
#include <cstdlib>
#include <vector>

#include "backends/cuda/cuda_runtime.h"
#include "runtime/compile_cache.h"

namespace ferrite::cuda {

namespace {

// No fast-math: results must match the reference kernels within f32 rounding. FMA contraction
// stays on (one rounding instead of two; within the tolerance, and what every GPU compiler does).
std::vector<std::string> nvrtc_options(const std::string& arch) {
  return {"--gpu-architecture=" + arch, "--std=c++17", "-default-device"};
}

std::string options_text(const std::string& arch) {
  std::string s;
  for (const auto& o : nvrtc_options(arch)) s += o + " ";
  return s;
}

}  // namespace

CubinModule::~CubinModule() {
  if (module_ && rt_ && rt_->make_current().is_ok()) rt_->api().cuModuleUnload(module_);
}

void* CubinModule::symbol(const std::string& name) const {
  CUfunction f = nullptr;
  if (rt_->api().cuModuleGetFunction(&f, module_, name.c_str()) != CUDA_SUCCESS) return nullptr;
  return reinterpret_cast<void*>(f);
}

Expected<std::unique_ptr<CubinModule>> CubinModule::load(const CudaRuntime& rt,
                                                         const std::string& cubin) {
  FERRITE_RETURN_IF_ERROR(rt.make_current());
  auto m = std::unique_ptr<CubinModule>(new CubinModule());
  m->rt_ = &rt;
  FERRITE_RETURN_IF_ERROR(
      check(rt.api().cuModuleLoadData(&m->module_, cubin.data()), "cuModuleLoadData"));
  return m;
}

Expected<CubinResult> compile_to_cubin(const std::string& source, const std::string& arch,
                                       const std::string& tag, const std::string& device_key) {
  auto t0 = std::chrono::steady_clock::now();
  FERRITE_ASSIGN_OR_RETURN(const Nvrtc* nv, nvrtc());
  const std::string version =
      "nvrtc " + std::to_string(nv->major) + "." + std::to_string(nv->minor);
  CompileCache& cache = CompileCache::global();
  CacheKey key =
      make_compile_key({source, options_text(arch), arch + ";" + device_key, version, "cubin"});
  CubinResult r;
  if (cache.enabled()) {
    auto hit = cache.get(key);
    if (hit.hit()) {
      r.cubin = std::move(hit.value->payload);
      r.cache_hit = true;
      r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return r;
    }
    r.cache_note = hit.reason;
  }
  nvrtcProgram prog = nullptr;
  std::string name = tag + ".cu";
  nvrtcResult rc = nv->nvrtcCreateProgram(&prog, source.c_str(), name.c_str(), 0, nullptr, nullptr);
  if (rc != NVRTC_SUCCESS)
    return err("nvrtc: cannot create a program: ", nv->nvrtcGetErrorString(rc));
  std::vector<std::string> opts = nvrtc_options(arch);
  std::vector<const char*> copts;
  for (const auto& o : opts) copts.push_back(o.c_str());
  rc = nv->nvrtcCompileProgram(prog, static_cast<int>(copts.size()), copts.data());
  size_t log_size = 0;
  nv->nvrtcGetProgramLogSize(prog, &log_size);
  std::string log(log_size, '\0');
  if (log_size) nv->nvrtcGetProgramLog(prog, log.data());
  if (rc != NVRTC_SUCCESS) {
    nv->nvrtcDestroyProgram(&prog);
    if (log.size() > 4000) log = log.substr(0, 4000) + "...";
    if (const char* keep = std::getenv("FERRITE_KEEP_SOURCE"); keep && *keep)
      log += "\n--- source ---\n" + source;
    return err("generated CUDA code failed to compile (", tag, ", ", arch,
               "): ", nv->nvrtcGetErrorString(rc), ": ", log);
  }
  size_t size = 0;
  nv->nvrtcGetCUBINSize(prog, &size);
  r.cubin.assign(size, '\0');
  rc = nv->nvrtcGetCUBIN(prog, r.cubin.data());
  nv->nvrtcDestroyProgram(&prog);
  if (rc != NVRTC_SUCCESS || size == 0)
    return err("nvrtc: no cubin for ", arch, " (", nv->nvrtcGetErrorString(rc), ")");
  if (cache.enabled()) {
    Status s = cache.put(key, r.cubin, tag);
    if (!s && r.cache_note.empty()) r.cache_note = s.message();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::string NvrtcCompiler::identity() const {
  auto nv = nvrtc();
  std::string v = nv ? "nvrtc " + std::to_string((*nv)->major) + "." + std::to_string((*nv)->minor)
                     : "nvrtc (unavailable)";
  return v + " " + options_text(arch_);
}

Expected<CompiledModule> NvrtcCompiler::compile(const std::string& source, const std::string& tag) {
  if (!rt_) return err("cuda: no GPU to load compiled kernels on");
  FERRITE_ASSIGN_OR_RETURN(CubinResult c, compile_to_cubin(source, arch_, tag, device_key_));
  auto t0 = std::chrono::steady_clock::now();
  FERRITE_ASSIGN_OR_RETURN(auto module, CubinModule::load(*rt_, c.cubin));
  CompiledModule r;
  r.module = std::move(module);
  r.cache_hit = c.cache_hit;
  r.cache_note = c.cache_note;
  r.seconds =
      c.seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.artifact = "cubin " + arch_ + " (" + std::to_string(c.cubin.size()) + " bytes)";
  return r;
}

}  // namespace ferrite::cuda
