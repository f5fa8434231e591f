/*
 * ferrite C API: load an ONNX model, compile it for a device and run it from any language that
 * calls C. Installed with libferrite.so (CMake: find_package(ferrite) -> ferrite::ferrite;
 * pkg-config: ferrite). docs/embedding.md has an overview and a worked example.
 *
 * Conventions
 *  - The header is C89: it compiles with `-std=c89 -pedantic` and in C++ (extern "C").
 *  - Every handle is opaque and released by its own ferrite_*_release function (NULL is fine).
 *  - Every call that can fail returns a ferrite_status*: NULL means success; otherwise the caller
 *    reads its code and message and releases it with ferrite_status_release. No C++ exception
 *    ever crosses this interface, and invalid input (a missing file, a corrupt model, a wrong
 *    input name, shape or dtype, a NULL argument) is reported as a status, never an abort.
 *  - Strings returned through `const char**` belong to the handle they came from and stay valid
 *    until that handle is released.
 *  - Versioning: FERRITE_API_VERSION_MAJOR changes only when a declaration here changes
 *    incompatibly; a minor version only adds functions (and appends fields to ferrite_run_stats,
 *    whose struct_size says which ones the caller knows). ferrite_api_version() reports the
 *    version of the library actually loaded; a program built against major M should refuse a
 *    library with another major.
 *
 * Threads (the concurrency contract)
 *  - ferrite_session_run may be called on one session from any number of threads at once.
 *    What the calls share: the model graph and its weights (constants: read-only during runs),
 *    the compiled code (one loaded module per compiled variant), the guard set and the cache of
 *    compiled variants (up to 8, keyed by the facts the inputs must keep). Selecting a variant,
 *    and compiling one when the input shapes need a specialisation or recompile, is done under
 *    the session's lock: a call that compiles makes the others wait for that lock only.
 *  - What each call has to itself: an execution context, checked out of a per-variant pool for
 *    the duration of the call, which holds the memory arena for intermediates, the per-shape
 *    launch state, the step buffers and, on cpu, its own worker threads (the `threads` option
 *    per context) and, on cuda, a stream of its own, so that the runs of several contexts overlap
 *    on the GPU. Contexts are made lazily when calls overlap, up to the session option
 *    max_concurrency (default 8 on cpu, 4 on cuda, 1 on accelerator plugins, whose runs take
 *    turns); beyond that a call waits for a free context. Extra contexts share the weights: on
 *    cpu in host memory, on cuda the device copies of the first context.
 *  - Inputs are read in place during the call only and never written; outputs belong to the
 *    caller. Option and value handles are not themselves locked: do not modify one handle from
 *    two threads at once. Environments and sessions may be created and released on any thread;
 *    releasing a session while a call on it is running is an error of the caller.
 */
#ifndef FERRITE_FERRITE_H_
#define FERRITE_FERRITE_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define FERRITE_API
#elif defined(FERRITE_BUILDING_LIBRARY)
#define FERRITE_API __attribute__((visibility("default")))
#else
#define FERRITE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define FERRITE_API_VERSION_MAJOR 1
#define FERRITE_API_VERSION_MINOR 0
/* One number for #if: major * 1000 + minor. */
#define FERRITE_API_VERSION (FERRITE_API_VERSION_MAJOR * 1000 + FERRITE_API_VERSION_MINOR)

/* ---- status ------------------------------------------------------------------------------ */

typedef enum ferrite_code {
  FERRITE_OK = 0,
  FERRITE_INVALID_ARGUMENT = 1, /* a NULL handle, an unknown input name, a wrong shape/dtype */
  FERRITE_NOT_FOUND = 2,        /* a file, an input or output index, a device */
  FERRITE_INVALID_MODEL = 3,    /* the model file or buffer cannot be imported */
  FERRITE_UNSUPPORTED = 4,      /* valid, but this device or build cannot do it */
  FERRITE_RUNTIME_ERROR = 5,    /* compiling or running failed (a kernel, the device) */
  FERRITE_OUT_OF_MEMORY = 6,
  FERRITE_INTERNAL = 7 /* a bug in ferrite: please report the message */
} ferrite_code;

typedef struct ferrite_status ferrite_status;

FERRITE_API ferrite_code ferrite_status_code(const ferrite_status* status);
/* Never NULL (an empty string for a NULL status). */
FERRITE_API const char* ferrite_status_message(const ferrite_status* status);
FERRITE_API void ferrite_status_release(ferrite_status* status);

/* ---- versions ---------------------------------------------------------------------------- */

/* The API version of the loaded library (compare with FERRITE_API_VERSION_MAJOR). */
FERRITE_API void ferrite_api_version(int* major, int* minor);
/* The ferrite release, e.g. "0.1.0". */
FERRITE_API const char* ferrite_version_string(void);

/* ---- element types (the ONNX TensorProto numbering) ---------------------------------------- */

typedef enum ferrite_dtype {
  FERRITE_DTYPE_UNDEFINED = 0,
  FERRITE_DTYPE_FLOAT32 = 1,
  FERRITE_DTYPE_UINT8 = 2,
  FERRITE_DTYPE_INT8 = 3,
  FERRITE_DTYPE_UINT16 = 4,
  FERRITE_DTYPE_INT16 = 5,
  FERRITE_DTYPE_INT32 = 6,
  FERRITE_DTYPE_INT64 = 7,
  FERRITE_DTYPE_BOOL = 9,
  FERRITE_DTYPE_FLOAT16 = 10,
  FERRITE_DTYPE_FLOAT64 = 11,
  FERRITE_DTYPE_UINT32 = 12,
  FERRITE_DTYPE_UINT64 = 13,
  FERRITE_DTYPE_BFLOAT16 = 16
} ferrite_dtype;

/* Bytes per element (0 for an unknown dtype). */
FERRITE_API size_t ferrite_dtype_size(ferrite_dtype dtype);

/* ---- environment: the devices ------------------------------------------------------------ */

typedef struct ferrite_env ferrite_env;

/* Enumerates the registered devices (built in, and plugins found next to libferrite or on
 * FERRITE_BACKEND_PATH) and checks whether each can run now (e.g. whether a GPU answers). */
FERRITE_API ferrite_status* ferrite_env_create(ferrite_env** out);
FERRITE_API void ferrite_env_release(ferrite_env* env);
FERRITE_API ferrite_status* ferrite_env_device_count(const ferrite_env* env, size_t* count);
/* Device `index`: its name, whether it is usable (1/0) and a description, or why it is not
 * usable. Any of the out-pointers may be NULL. */
FERRITE_API ferrite_status* ferrite_env_device(const ferrite_env* env, size_t index,
                                               const char** name, int* usable, const char** detail);
/* The device a session gets when none is named: cuda where a GPU answers, else cpu. `why` (may
 * be NULL) says why. The `reference` device (the correctness oracle) is only used by name. */
FERRITE_API ferrite_status* ferrite_env_default_device(const ferrite_env* env, const char** name,
                                                       const char** why);

/* ---- session options --------------------------------------------------------------------- */

typedef struct ferrite_session_options ferrite_session_options;

FERRITE_API ferrite_status* ferrite_session_options_create(ferrite_session_options** out);
FERRITE_API void ferrite_session_options_release(ferrite_session_options* options);
/* NULL or "" (the default): the best usable device (ferrite_env_default_device). */
FERRITE_API ferrite_status* ferrite_session_options_set_device(ferrite_session_options* options,
                                                               const char* device);
/* "f32" (default), "tf32", "bf16" or "fp16"; checked against the device at session creation. */
FERRITE_API ferrite_status* ferrite_session_options_set_precision(ferrite_session_options* options,
                                                                  const char* precision);
/* Worker threads per execution context (0: the device's default: all cores on cpu). */
FERRITE_API ferrite_status* ferrite_session_options_set_threads(ferrite_session_options* options,
                                                                int threads);
/* Runs of this session that proceed at once (execution contexts per compiled variant; see
 * "Threads" above). 0: the device's default. */
FERRITE_API ferrite_status* ferrite_session_options_set_max_concurrency(
    ferrite_session_options* options, int contexts);
/* The compile cache's directory. The cache is process-wide: this takes effect only when no
 * session of the process has compiled yet or it names the directory already in use; otherwise
 * session creation fails with FERRITE_INVALID_ARGUMENT. NULL: FERRITE_CACHE_DIR, else
 * $XDG_CACHE_HOME/ferrite, else ~/.cache/ferrite. */
FERRITE_API ferrite_status* ferrite_session_options_set_cache_dir(ferrite_session_options* options,
                                                                  const char* dir);
/* 1: time candidate kernel launches on the first run at each size (persisted in the cache). */
FERRITE_API ferrite_status* ferrite_session_options_set_autotune(ferrite_session_options* options,
                                                                 int enable);
/* Graph passes, comma-separated ("" = none, "default" = the default pipeline); NULL restores
 * the device's own choice (the default). */
FERRITE_API ferrite_status* ferrite_session_options_set_passes(ferrite_session_options* options,
                                                               const char* passes);

/* ---- sessions ---------------------------------------------------------------------------- */

typedef struct ferrite_session ferrite_session;

/* A session over an ONNX file (external data is read from its directory). `options` may be
 * NULL. A model without unknown dims compiles here; one with unknown dims on its first run. */
FERRITE_API ferrite_status* ferrite_session_create(const char* model_path,
                                                   const ferrite_session_options* options,
                                                   ferrite_session** out);
/* The same from a serialized ModelProto in memory (copied; no external data). */
FERRITE_API ferrite_status* ferrite_session_create_from_memory(
    const void* data, size_t size, const ferrite_session_options* options, ferrite_session** out);
FERRITE_API void ferrite_session_release(ferrite_session* session);

/* The device the session runs on; `chosen` (may be NULL) is 1 when no device was named and
 * ferrite picked it. */
FERRITE_API ferrite_status* ferrite_session_device(const ferrite_session* session,
                                                   const char** name, int* chosen);
/* Compiles so far (the first, and recompiles for new shapes). */
FERRITE_API ferrite_status* ferrite_session_compiles(const ferrite_session* session, int* count);

/* Inputs and outputs as the model declares them. A dim that is not a fixed number is reported
 * as -1 with its symbol ("batch", or an expression such as "batch*12"); a fixed dim has a NULL
 * symbol; a dim nobody named (neither number nor symbol) is -1 with symbol "?". */
FERRITE_API ferrite_status* ferrite_session_input_count(const ferrite_session* session,
                                                        size_t* count);
FERRITE_API ferrite_status* ferrite_session_output_count(const ferrite_session* session,
                                                         size_t* count);
/* Name, dtype and rank of input/output `index` (out-pointers may be NULL). rank is -1 when the
 * model does not declare one. */
FERRITE_API ferrite_status* ferrite_session_input_info(const ferrite_session* session, size_t index,
                                                       const char** name, ferrite_dtype* dtype,
                                                       int* rank);
FERRITE_API ferrite_status* ferrite_session_output_info(const ferrite_session* session,
                                                        size_t index, const char** name,
                                                        ferrite_dtype* dtype, int* rank);
FERRITE_API ferrite_status* ferrite_session_input_dim(const ferrite_session* session, size_t index,
                                                      int dim, int64_t* size, const char** symbol);
FERRITE_API ferrite_status* ferrite_session_output_dim(const ferrite_session* session, size_t index,
                                                       int dim, int64_t* size, const char** symbol);

/* ---- values ------------------------------------------------------------------------------ */

typedef struct ferrite_value ferrite_value;

typedef enum ferrite_memory {
  FERRITE_MEMORY_HOST = 0,
  /* Memory of the session's device (a CUdeviceptr on cuda). Only devices with their own memory
   * take it; a cpu session refuses it. */
  FERRITE_MEMORY_DEVICE = 1
} ferrite_memory;

/* A tensor over memory the caller owns and keeps alive and unchanged until the value is
 * released (no copy). `bytes` must be at least the product of dims times the element size. */
FERRITE_API ferrite_status* ferrite_value_create(ferrite_dtype dtype, const int64_t* dims,
                                                 size_t rank, void* data, size_t bytes,
                                                 ferrite_memory memory, ferrite_value** out);
/* A host tensor that ferrite allocates (zero-filled); fill it through ferrite_value_data. */
FERRITE_API ferrite_status* ferrite_value_allocate(ferrite_dtype dtype, const int64_t* dims,
                                                   size_t rank, ferrite_value** out);
/* Reads an ONNX TensorProto file (the test_data_set_N/input_0.pb format); `name` (may be NULL)
 * receives the tensor's name, valid while the value lives. */
FERRITE_API ferrite_status* ferrite_value_load_pb(const char* path, ferrite_value** out,
                                                  const char** name);
FERRITE_API void ferrite_value_release(ferrite_value* value);
FERRITE_API ferrite_status* ferrite_value_info(const ferrite_value* value, ferrite_dtype* dtype,
                                               size_t* rank, const int64_t** dims,
                                               ferrite_memory* memory);
/* The value's bytes and their count. */
FERRITE_API ferrite_status* ferrite_value_data(ferrite_value* value, void** data, size_t* bytes);

/* ---- runs -------------------------------------------------------------------------------- */

/* Statistics of one run. Set struct_size = sizeof(ferrite_run_stats) before the call: fields
 * beyond it (from a newer header) are not written. */
typedef struct ferrite_run_stats {
  size_t struct_size;
  double wall_seconds;          /* the whole call: input checks, any compile, the run */
  int compiled;                 /* 1: this call compiled (first specialisation or recompile) */
  int compiles;                 /* compiles of the session so far */
  int context;                  /* the execution context it ran on (0-based) */
  int64_t arena_bytes;          /* intermediates' arena planned for these shapes (0: none) */
  int64_t arena_capacity_bytes; /* arena the context keeps between runs */
  int64_t device_bytes_in_use;  /* device memory the device's pool holds (0: not reported) */
} ferrite_run_stats;

/* Runs the model.
 *  inputs: `input_count` values, matched to the model's inputs by `input_names` (NULL: by
 *    position). Host inputs are read in place (no copy) and must match the model's declared
 *    dtype, rank, fixed dims and consistent symbols.
 *  outputs: an array of the model's output count. An entry that is NULL on entry receives a
 *    host value ferrite allocates, which the caller releases. An entry that is a value on entry
 *    is written into: its dtype and dims must be the output's for these inputs (host memory:
 *    one copy from the result; device memory: written on the device, see below).
 *  Device memory (cuda): when any input or output is FERRITE_MEMORY_DEVICE, every output must
 *    be caller-provided (ferrite does not allocate device outputs) and may be written while the
 *    run is in progress (one that overlaps a device input is written at its end); the run is
 *    ordered on `stream` (a CUstream; NULL: CUDA's legacy default stream, handle 0): the run
 *    starts after the work queued there so far and work queued there later starts after the
 *    run. The call returns once the work is queued, so the caller synchronizes that stream
 *    before reading the outputs.
 *  stats: may be NULL. */
FERRITE_API ferrite_status* ferrite_session_run(ferrite_session* session,
                                                const char* const* input_names,
                                                const ferrite_value* const* inputs,
                                                size_t input_count, ferrite_value** outputs,
                                                size_t output_count, void* stream,
                                                ferrite_run_stats* stats);

#ifdef __cplusplus
}
#endif

#endif /* FERRITE_FERRITE_H_ */
