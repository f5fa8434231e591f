/* FROZEN: the device SDK header as released in version 1.0 (ferrite d314ebf), kept unchanged so
 * that tests/unit/sdk_compat_test.cpp can build a plugin against it and check that this ferrite
 * still loads and runs 1.0 plugins. Never edit; sdk/include/ferrite/device_sdk.h is the current
 * SDK. */
/* ferrite device SDK: the C interface an out-of-tree device plugin implements.
 *
 * A plugin is a shared library that exports one function,
 *
 *     const fe_device_plugin* ferrite_device_plugin_v1(void);
 *
 * returning a static table. ferrite finds plugins on FERRITE_BACKEND_PATH (':'-separated folders
 * or files) and in <install prefix>/lib/ferrite/backends, refuses a plugin whose sdk_major differs
 * from FE_SDK_VERSION_MAJOR (or whose sdk_minor is newer than ferrite's), and registers the device
 * under fe_device_spec.name. Only this header is needed to build a plugin; it is plain C so that
 * any toolchain can implement it.
 *
 * What ferrite does for the device: graph passes, fusion, memory planning, code generation in
 * the grid dialect below, compile caching, launch heuristics derived from the spec, autotuning.
 * What the plugin does: memory and copies, compiling the generated source into a module,
 * launching kernels, and declaring its constraints (fe_device_spec).
 *
 * Generated kernels (the "grid" dialect, ABI string FE_KERNEL_ABI_GRID) have the signature
 *
 *     extern "C" void <name>(void* const* bufs, const int64_t* syms, int64_t block, int64_t grid)
 *
 * where bufs holds the device addresses of the kernel's inputs then its output, syms the values
 * of the shape symbols, and every program id `block` in [0, grid) takes an equal share of the
 * rows: any legal grid covers all the work, whatever the grid size. Each block is one warp-sized
 * program; its lanes are the vectorised inner loop. The source starts with a prelude that
 * includes <cmath>, <cstdint> and <limits>; fe_device_spec.codegen_prelude may add to it.
 *
 * Errors: functions return FE_OK (0) or a device error code; error_string() turns a code into
 * text, and last_error_message() (optional) gives the detail of the last failure on this thread
 * (e.g. "Invalid grid size 57 (must be <= 48 or multiple of 48)").
 */
#ifndef FERRITE_DEVICE_SDK_H_
#define FERRITE_DEVICE_SDK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FE_SDK_VERSION_MAJOR 1
#define FE_SDK_VERSION_MINOR 0
#define FE_KERNEL_ABI_GRID "grid-v2:bufs,syms,block,grid"

typedef int32_t fe_status;
#define FE_OK 0
#define FE_ERROR_UNIMPLEMENTED 1  /* ferrite reports the member as unsupported */

typedef struct fe_module_t* fe_module;      /* a loaded module */
typedef struct fe_function_t* fe_function;  /* a kernel in a module */
typedef uintptr_t fe_stream;                 /* 0: the default stream */

/* Legal values of one launch dimension: v is legal when 1 <= v <= max and (v <= any_upto or
 * v % multiple == 0). "<= 48 or a multiple of 48": {max = 1<<31, any_upto = 48, multiple = 48}. */
typedef struct fe_dim_rule {
  int64_t max;
  int64_t any_upto;
  int64_t multiple;
} fe_dim_rule;

/* The device spec: data, not code. Launch heuristics and autotuning search spaces are derived
 * from it, and a hash of all of it joins every compile- and tuning-cache key. */
typedef struct fe_device_spec {
  uint32_t struct_size;      /* sizeof(fe_device_spec) as the plugin was built */
  const char* name;          /* registry name, [a-z0-9_]+ */
  const char* model;         /* human-readable */
  const char* arch;          /* what code is generated for */
  int32_t compute_units;
  int64_t memory_bytes;
  int32_t warp_size;          /* lanes per warp */
  int32_t allowed_num_warps[8];  /* legal warps per block; count below */
  int32_t allowed_num_warps_count;
  int32_t max_threads_per_block;
  fe_dim_rule grid[3];        /* x, y, z; ferrite launches 1-D grids (y = z = 1) today */
  int64_t shared_memory_per_block;
  int32_t preferred_vector_bytes;
  int32_t alignment;          /* of device allocations, bytes */
  int32_t preferred_block_sizes[8];  /* threads; tried first by heuristics and tuning */
  int32_t preferred_block_sizes_count;
  int32_t host_addressable;   /* 1 when device pointers may be dereferenced on the host */
  const char* codegen_prelude; /* extra source after ferrite's prelude, or NULL */
  const char* compiler_identity; /* toolchain + flags: part of cache keys */
} fe_device_spec;

/* Arguments of a launch of a generated kernel. */
typedef struct fe_kernel_args {
  void* const* bufs;     /* device addresses */
  int32_t num_bufs;
  const int64_t* syms;   /* shape-symbol values */
  int32_t num_syms;
} fe_kernel_args;

typedef struct fe_device_plugin {
  uint32_t sdk_major;    /* FE_SDK_VERSION_MAJOR the plugin was built with */
  uint32_t sdk_minor;
  uint32_t struct_size;  /* sizeof(fe_device_plugin) as the plugin was built */
  const fe_device_spec* spec;

  /* --- runtime: required --- */
  fe_status (*get_device_count)(int32_t* count);
  fe_status (*set_device)(int32_t ordinal);
  fe_status (*malloc)(void** ptr, size_t bytes);
  fe_status (*free)(void* ptr);
  fe_status (*memcpy_h2d)(void* dst, const void* host_src, size_t bytes);
  fe_status (*memcpy_d2h)(void* host_dst, const void* src, size_t bytes);
  fe_status (*memcpy_d2d)(void* dst, const void* src, size_t bytes);
  fe_status (*synchronize)(void);
  const char* (*error_string)(fe_status status);

  /* --- compiler and launch: optional as a group (NULL: ferrite runs every step on the host's
   * reference kernels, staging data through the copies above) --- */
  /* Compiles a translation unit of the grid dialect. On failure *log may point at diagnostics
   * owned by the plugin until the next call. */
  fe_status (*module_compile)(const char* source, size_t source_len, fe_module* module,
                              const char** log);
  fe_status (*module_unload)(fe_module module);
  fe_status (*module_get_function)(fe_module module, const char* name, fe_function* fn);
  fe_status (*launch_kernel)(fe_function fn, int64_t grid_x, int64_t grid_y, int64_t grid_z,
                             int32_t block_threads, int64_t shared_bytes, fe_stream stream,
                             const fe_kernel_args* args);

  /* --- optional --- */
  fe_status (*stream_create)(fe_stream* stream);
  fe_status (*stream_destroy)(fe_stream stream);
  fe_status (*stream_synchronize)(fe_stream stream);
  fe_status (*memset_d8)(void* dst, uint8_t value, size_t bytes);
  const char* (*last_error_message)(void);
  /* Monotonic device clock in nanoseconds, for autotuning (NULL: ferrite times on the host
   * around synchronize()). */
  fe_status (*elapsed_ns)(uint64_t* now);
} fe_device_plugin;

typedef const fe_device_plugin* (*fe_device_plugin_entry)(void);
#define FE_DEVICE_PLUGIN_ENTRY "ferrite_device_plugin_v1"

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FERRITE_DEVICE_SDK_H_ */
