// A minimal device plugin built against the FROZEN SDK 1.0 header (sdk_v1_0/ferrite/device_sdk.h)
// by the test build: host memory, kernels compiled with the system C++ compiler, launches run
// block by block. tests/unit/sdk_compat_test.cpp loads it into this ferrite (SDK 1.1) and runs a
// model on it, which must keep working for every 1.x ferrite.
#include <dlfcn.h>
#include <ferrite/device_sdk.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#if FE_SDK_VERSION_MAJOR != 1 || FE_SDK_VERSION_MINOR != 0
#error "this plugin must be built against the SDK 1.0 header"
#endif

struct fe_module_t {
  void* handle;
};

namespace {

using Kernel = void (*)(void* const*, const int64_t*, int64_t, int64_t);

fe_status count(int32_t* n) {
  return *n = 1, FE_OK;
}
fe_status set_device(int32_t i) {
  return i == 0 ? FE_OK : 2;
}
fe_status dev_malloc(void** p, size_t n) {
  return (*p = std::malloc(n ? n : 1)) ? FE_OK : 3;
}
fe_status dev_free(void* p) {
  return std::free(p), FE_OK;
}
fe_status copy(void* d, const void* s, size_t n) {
  return std::memcpy(d, s, n), FE_OK;
}
fe_status sync() {
  return FE_OK;
}
const char* error_string(fe_status s) {
  return s == FE_OK ? "ok" : "v10 error";
}

fe_status compile(const char* src, size_t len, fe_module* m, const char** log) {
  char dir[] = "/tmp/fe-v10-XXXXXX";
  if (!mkdtemp(dir)) return 4;
  std::string cpp = std::string(dir) + "/k.cpp", so = std::string(dir) + "/k.so";
  std::ofstream(cpp).write(src, static_cast<std::streamsize>(len));
  std::string cmd = "c++ -std=c++17 -O1 -shared -fPIC -o " + so + " " + cpp;
  int rc = std::system(cmd.c_str());
  void* h = rc == 0 ? dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL) : nullptr;
  std::remove(cpp.c_str());
  std::remove(so.c_str());
  rmdir(dir);
  if (log) *log = "";
  if (!h) return 5;
  *m = new fe_module_t{h};
  return FE_OK;
}

fe_status unload(fe_module m) {
  dlclose(m->handle);
  delete m;
  return FE_OK;
}

fe_status get_function(fe_module m, const char* name, fe_function* fn) {
  void* s = dlsym(m->handle, name);
  *fn = reinterpret_cast<fe_function>(s);
  return s ? FE_OK : 6;
}

fe_status launch(fe_function fn, int64_t gx, int64_t, int64_t, int32_t, int64_t, fe_stream,
                 const fe_kernel_args* args) {
  auto k = reinterpret_cast<Kernel>(fn);
  for (int64_t b = 0; b < gx; ++b) k(args->bufs, args->syms, b, gx);
  return FE_OK;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const fe_device_plugin* ferrite_device_plugin_v1(
    void) {
  static const fe_device_spec spec = [] {
    fe_device_spec s{};
    s.struct_size = sizeof(fe_device_spec);
    s.name = "v10dev";
    s.model = "SDK 1.0 test device";
    s.arch = "host";
    s.compute_units = 1;
    s.memory_bytes = int64_t{1} << 30;
    s.warp_size = 1;
    s.allowed_num_warps[0] = 1;
    s.allowed_num_warps_count = 1;
    s.max_threads_per_block = 1;
    s.grid[0] = fe_dim_rule{int64_t{1} << 31, int64_t{1} << 31, 1};
    s.grid[1] = s.grid[2] = fe_dim_rule{1, 1, 1};
    s.alignment = 64;
    s.host_addressable = 1;
    s.compiler_identity = "c++ -O1 (sdk 1.0 test plugin)";
    return s;
  }();
  static const fe_device_plugin plugin = [] {
    fe_device_plugin p{};
    p.sdk_major = FE_SDK_VERSION_MAJOR;
    p.sdk_minor = FE_SDK_VERSION_MINOR;
    p.struct_size = sizeof(fe_device_plugin);
    p.spec = &spec;
    p.get_device_count = count;
    p.set_device = set_device;
    p.malloc = dev_malloc;
    p.free = dev_free;
    p.memcpy_h2d = copy;
    p.memcpy_d2h = copy;
    p.memcpy_d2d = copy;
    p.synchronize = sync;
    p.error_string = error_string;
    p.module_compile = compile;
    p.module_unload = unload;
    p.module_get_function = get_function;
    p.launch_kernel = launch;
    return p;
  }();
  return &plugin;
}
