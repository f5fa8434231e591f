// The plugin's one entry point: GXU's spec and driver functions in the SDK's table.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "gxu.h"

namespace gxu {

namespace {

thread_local std::string last_error;

fe_status get_device_count(int32_t* count) {
  if (!count) return fail(kInvalidValue, "gxuGetDeviceCount: null argument");
  *count = 1;
  return kSuccess;
}

fe_status set_device(int32_t ordinal) {
  return ordinal == 0 ? kSuccess
                      : fail(kInvalidDevice, "gxuSetDevice: no device " + std::to_string(ordinal));
}

fe_status elapsed_ns(uint64_t* now) {
  if (!now) return fail(kInvalidValue, "gxuElapsed: null argument");
  *now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
  return kSuccess;
}

fe_device_spec make_spec() {
  fe_device_spec s{};
  s.struct_size = sizeof(fe_device_spec);
  s.name = "gxu";
  s.model = "GXU-1 (emulated reference accelerator)";
  s.arch = "gxu1";
  s.compute_units = static_cast<int32_t>(std::max(1u, std::thread::hardware_concurrency()));
  s.memory_bytes = memory_capacity();
  s.warp_size = kWarpSize;
  s.allowed_num_warps[0] = 1;
  s.allowed_num_warps_count = 1;
  s.max_threads_per_block = kWarpSize;
  s.grid[0] = fe_dim_rule{int64_t{1} << 31, kGridAnyUpto, kGridMultiple};
  s.grid[1] = fe_dim_rule{1, 1, 1};
  s.grid[2] = fe_dim_rule{1, 1, 1};
  s.shared_memory_per_block = 48 * 1024;
  s.preferred_vector_bytes = 32;
  s.alignment = 256;
  s.preferred_block_sizes[0] = kWarpSize;
  s.preferred_block_sizes_count = 1;
  s.host_addressable = 0;
  s.codegen_prelude = nullptr;
  s.compiler_identity = compiler_identity();
  // SDK 1.1: the element types GXU's kernels handle and the ops its library runs.
  static const fe_dtype dtypes[] = {FE_DTYPE_F32, FE_DTYPE_F64, FE_DTYPE_I32, FE_DTYPE_I64,
                                    FE_DTYPE_BOOL};
  s.dtypes = dtypes;
  s.dtypes_count = static_cast<int32_t>(sizeof dtypes / sizeof dtypes[0]);
  s.library_ops = kLibraryOps;
  s.library_ops_count = kLibraryOpCount;
  return s;
}

}  // namespace

fe_status fail(fe_status code, const std::string& message) {
  last_error = message;
  return code;
}

const char* last_error_message() { return last_error.c_str(); }

const char* error_string(fe_status code) {
  switch (code) {
    case kSuccess: return "gxuSuccess";
    case kNotImplemented: return "gxuErrorNotImplemented";
    case kInvalidValue: return "gxuErrorInvalidValue";
    case kInvalidDevice: return "gxuErrorInvalidDevice";
    case kOutOfMemory: return "gxuErrorOutOfMemory";
    case kInvalidDevicePointer: return "gxuErrorInvalidDevicePointer";
    case kInvalidGridSize: return "gxuErrorInvalidGridSize";
    case kInvalidBlockSize: return "gxuErrorInvalidBlockSize";
    case kCompileFailed: return "gxuErrorCompileFailed";
    case kModuleNotFound: return "gxuErrorModuleNotFound";
    case kFunctionNotFound: return "gxuErrorFunctionNotFound";
    case kLaunchFailed: return "gxuErrorLaunchFailed";
    default: return "gxuErrorUnknown";
  }
}

}  // namespace gxu

extern "C" __attribute__((visibility("default"))) const fe_device_plugin*
ferrite_device_plugin_v1(void) {
  static const fe_device_spec spec = gxu::make_spec();
  static const fe_device_plugin plugin = [] {
    fe_device_plugin p{};
    p.sdk_major = FE_SDK_VERSION_MAJOR;
    p.sdk_minor = FE_SDK_VERSION_MINOR;
    p.struct_size = sizeof(fe_device_plugin);
    p.spec = &spec;
    p.get_device_count = gxu::get_device_count;
    p.set_device = gxu::set_device;
    p.malloc = gxu::device_malloc;
    p.free = gxu::device_free;
    p.memcpy_h2d = gxu::memcpy_h2d;
    p.memcpy_d2h = gxu::memcpy_d2h;
    p.memcpy_d2d = gxu::memcpy_d2d;
    p.synchronize = gxu::synchronize;
    p.error_string = gxu::error_string;
    p.module_compile = gxu::module_compile;
    p.module_unload = gxu::module_unload;
    p.module_get_function = gxu::module_get_function;
    p.launch_kernel = gxu::launch_kernel;
    p.memset_d8 = gxu::memset_d8;
    p.last_error_message = gxu::last_error_message;
    p.elapsed_ns = gxu::elapsed_ns;
    p.library_accepts = gxu::library_accepts;
    p.library_run = gxu::library_run;
    p.module_binary = gxu::module_binary;
    p.module_load = gxu::module_load;
    return p;
  }();
  return &plugin;
}
