// GXU internals: an emulated accelerator with its own memory space, a driver-style API, and a
// launch engine that runs program ids on host threads. Everything here stays inside the plugin.
#pragma once

#include <ferrite/device_sdk.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace gxu {

// Driver error codes (what a vendor runtime returns).
enum Error : fe_status {
  kSuccess = FE_OK,
  kNotImplemented = FE_ERROR_UNIMPLEMENTED,
  kInvalidValue = 100,
  kInvalidDevice = 101,
  kOutOfMemory = 102,
  kInvalidDevicePointer = 103,
  kInvalidGridSize = 104,
  kInvalidBlockSize = 105,
  kCompileFailed = 106,
  kModuleNotFound = 107,
  kFunctionNotFound = 108,
  kLaunchFailed = 109,
};

constexpr int32_t kWarpSize = 32;
constexpr int64_t kGridAnyUpto = 48;
constexpr int64_t kGridMultiple = 48;

// Sets the thread's last error and returns `code`.
fe_status fail(fe_status code, const std::string& message);
const char* error_string(fe_status code);
const char* last_error_message();

// Memory: device addresses live in a range of the address space that the host never maps, so
// a device pointer dereferenced on the host faults instead of silently working.
fe_status device_malloc(void** ptr, size_t bytes);
fe_status device_free(void* ptr);
// Host address of [ptr, ptr + bytes) inside one allocation, or nullptr (and the error set).
void* translate(const void* ptr, size_t bytes);
fe_status memcpy_h2d(void* dst, const void* src, size_t bytes);
fe_status memcpy_d2h(void* dst, const void* src, size_t bytes);
fe_status memcpy_d2d(void* dst, const void* src, size_t bytes);
fe_status memset_d8(void* dst, uint8_t value, size_t bytes);
int64_t memory_capacity();

// Compiler: a translation unit of ferrite's grid dialect -> a loaded module.
fe_status module_compile(const char* source, size_t len, fe_module* module, const char** log);
fe_status module_unload(fe_module module);
fe_status module_get_function(fe_module module, const char* name, fe_function* fn);
fe_status module_binary(fe_module module, const void** data, size_t* size);
fe_status module_load(const void* data, size_t size, fe_module* module);
const char* compiler_identity();

// Launch engine.
fe_status launch_kernel(fe_function fn, int64_t gx, int64_t gy, int64_t gz, int32_t block,
                        int64_t shared, fe_stream stream, const fe_kernel_args* args);
fe_status synchronize();
int32_t compute_units();
// Runs body(0) .. body(n - 1) on the compute units (library kernels use it like a launch).
void run_on_units(int64_t n, const std::function<void(int64_t)>& body);

// Library ops (SDK 1.1): the vendor's own GEMM, convolution, pooling and data-movement kernels.
extern const char* const kLibraryOps[];
extern const int32_t kLibraryOpCount;
fe_status library_accepts(const fe_op_desc* op, int32_t* accepted);
fe_status library_run(const fe_op_desc* op, fe_stream stream);

}  // namespace gxu
