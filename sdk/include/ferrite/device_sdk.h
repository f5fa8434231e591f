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
 * Versions: minor versions only append members to fe_device_plugin and fe_device_spec, never
 * reorder or remove them, and each struct says how large it was built (struct_size). ferrite loads
 * any plugin of its major version and a minor version up to its own, and treats every member
 * beyond the plugin's struct_size as absent (NULL / 0). SDK 1.1 added, all optional: the
 * library-ops group (library_accepts, library_run), module_binary and module_load (compile
 * caching of plugin modules), and in the spec the element types (dtypes) and the library op names
 * (library_ops).
 *
 * What ferrite does for the device: graph passes, fusion, memory planning, code generation in
 * the grid dialect below, compile caching, launch heuristics derived from the spec, autotuning.
 * What the plugin does: memory and copies, compiling the generated source into a module,
 * launching kernels, declaring its constraints (fe_device_spec) and, optionally, running whole
 * ops with its own libraries (GEMM, convolution, attention, ...: the library-ops group).
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
#define FE_SDK_VERSION_MINOR 1
#define FE_KERNEL_ABI_GRID "grid-v2:bufs,syms,block,grid"

typedef int32_t fe_status;
#define FE_OK 0
#define FE_ERROR_UNIMPLEMENTED 1  /* ferrite reports the member as unsupported */

typedef struct fe_module_t* fe_module;      /* a loaded module */
typedef struct fe_function_t* fe_function;  /* a kernel in a module */
typedef uintptr_t fe_stream;                 /* 0: the default stream */

/* Element types (SDK 1.1), numbered as ONNX's TensorProto.DataType. */
typedef int32_t fe_dtype;
#define FE_DTYPE_F32 1
#define FE_DTYPE_U8 2
#define FE_DTYPE_I8 3
#define FE_DTYPE_U16 4
#define FE_DTYPE_I16 5
#define FE_DTYPE_I32 6
#define FE_DTYPE_I64 7
#define FE_DTYPE_BOOL 9
#define FE_DTYPE_F16 10
#define FE_DTYPE_F64 11
#define FE_DTYPE_U32 12
#define FE_DTYPE_U64 13
#define FE_DTYPE_BF16 16

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
  /* Legal warps per block, exactly: ferrite launches only these counts (heuristics and tuning
   * alike); {1, 4} allows 1 and 4 warps, not 2. Count 0: any count up to max_threads_per_block. */
  int32_t allowed_num_warps[8];
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

  /* --- SDK 1.1 (absent in 1.0 plugins: the 1.0 defaults apply) --- */
  /* Element types generated kernels may use (FE_DTYPE_*). NULL or count 0: f32, f64, i32, i64
   * and bool (SDK 1.0's fixed list). Values of other types go to library steps (the host's
   * kernels unless a library op of the plugin takes them). */
  const fe_dtype* dtypes;
  int32_t dtypes_count;
  /* Ops the library-ops group runs, as "op_type" (ONNX domain) or "domain::op_type" (e.g.
   * "ferrite::FusedConv"), library_accepts deciding per node. ferrite plans steps for them instead
   * of generated kernels, and applies its rewrites into ferrite.FusedMatMul / FusedConv /
   * Attention only when the op they produce is listed here. */
  const char* const* library_ops;
  int32_t library_ops_count;
} fe_device_spec;

/* --- library ops (SDK 1.1) ------------------------------------------------------------------ */

/* A tensor of an op: its type and dims, and (in library_run) its device address. */
typedef struct fe_tensor_desc {
  fe_dtype dtype;
  int32_t rank;
  const int64_t* dims; /* rank values; in library_accepts -1 for a dim that varies per run */
  void* data;          /* library_run: device address (NULL when the tensor is empty);
                        * library_accepts: NULL */
  /* library_accepts: the value's contents on the host when it is a constant (weights, shape
   * tensors), else NULL; library_run: the same, for reading small parameters without a copy. */
  const void* host_data;
} fe_tensor_desc;

#define FE_ATTR_INT 1    /* i */
#define FE_ATTR_FLOAT 2  /* f */
#define FE_ATTR_STRING 3 /* s */
#define FE_ATTR_INTS 4   /* ints[count] */
#define FE_ATTR_FLOATS 5 /* floats[count] */

typedef struct fe_attr {
  const char* name;
  int32_t kind; /* FE_ATTR_* */
  int32_t count;
  int64_t i;
  double f;
  const char* s;
  const int64_t* ints;
  const double* floats;
} fe_attr;

/* One node of the graph, in plain C: ONNX semantics for domain "" (the op's opset-17+ meaning;
 * attribute defaults are filled in), ferrite's fused ops for domain "ferrite":
 *   FusedMatMul(A, B, bias?, residual?) {activation, activation_params, transB}:
 *       act(A @ B(^T) + bias) + residual
 *   FusedConv(X, W, B?, residual?) {Conv's attributes, activation, activation_params}:
 *       act(Conv(X, W, B) + residual)
 *   Attention(Q, K, V, mask?) {scale, causal, nan_to_zero, masked_rows_zero}:
 *       softmax(Q @ K^T * scale + mask [+ causal mask: -inf where t > s]) @ V over the last
 *       axis, in double; scale defaults to 1/sqrt(D); nan_to_zero: NaN probabilities count as
 *       0; masked_rows_zero: a row whose scores are all -inf gives 0; transposed [q, k, v, y]
 *       (ints, absent: all 0): an operand marked 1 is rank 4 and stored [B, S, H, D] for its
 *       [B, H, S, D] transpose. Only the opt-in pass fold-attention-layout sets it, so a device
 *       sees it only when its pass plan lists that pass; a library that does not read that
 *       layout declines such a node
 * activation is none, relu, tanh, sigmoid, gelu, gelu_tanh, hard_swish, leaky_relu [alpha],
 * clip [min, max] or hard_sigmoid [alpha, beta]. Absent optional inputs have rank -1. */
typedef struct fe_op_desc {
  uint32_t struct_size; /* sizeof(fe_op_desc) as ferrite was built */
  const char* domain;   /* "" or "ferrite" */
  const char* op_type;
  const char* name; /* the node's name, for messages */
  int32_t num_inputs;
  const fe_tensor_desc* inputs;
  int32_t num_outputs;
  const fe_tensor_desc* outputs; /* dims inferred by ferrite; data allocated by ferrite */
  int32_t num_attrs;
  const fe_attr* attrs;
} fe_op_desc;

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

  /* --- compiler and launch: optional as a group. Without them the device is listed (`ferrite
   * devices`) but cannot run models: preparing one reports the device unsupported. --- */
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

  /* --- SDK 1.1: everything below is optional and absent in 1.0 plugins --- */

  /* Library ops, optional as a group: the vendor's own kernels (GEMM, convolution, attention,
   * ...) for the ops fe_device_spec.library_ops lists. ferrite asks
   * library_accepts once per node when it plans a model (*accepted = 1: the plugin runs it; 0:
   * ferrite generates or runs it elsewhere) and library_run every time the step runs, with
   * inputs and outputs in device memory. library_run may still answer FE_ERROR_UNIMPLEMENTED
   * before writing anything (for a run-time size it does not handle); the step then runs on the
   * host, staged through the copies. */
  fe_status (*library_accepts)(const fe_op_desc* op, int32_t* accepted);
  fe_status (*library_run)(const fe_op_desc* op, fe_stream stream);

  /* Compile caching, optional as a pair: module_binary gives the bytes of a compiled module
   * (owned by the module, valid until it is unloaded) and module_load loads such bytes in a later
   * process. ferrite stores them in its compile cache under a key of the generated source, the
   * spec and compiler_identity, so an unchanged model does not call module_compile again. */
  fe_status (*module_binary)(fe_module module, const void** data, size_t* size);
  fe_status (*module_load)(const void* data, size_t size, fe_module* module);
} fe_device_plugin;

typedef const fe_device_plugin* (*fe_device_plugin_entry)(void);
#define FE_DEVICE_PLUGIN_ENTRY "ferrite_device_plugin_v1"

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* FERRITE_DEVICE_SDK_H_ */
