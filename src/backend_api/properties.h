// What a device is: the facts that code generation, launch heuristics and compile-cache keys
// depend on. Every device fills one in (required member of the backend contract).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "ir/dtype.h"

namespace ferrite {

// Rules a launch must satisfy. A CPU launches "rows" on a thread pool (one thread per block,
// no grid limit); a GPU launches grid x block threads; a vendor accelerator may restrict the
// grid, e.g. "at most 48 blocks, or a multiple of 48" and "one warp per block":
//   LaunchLimits{.max_block = 32, .warp_size = 32, .grid_any_upto = 48, .grid_multiple = 48}.
struct LaunchLimits {
  int64_t max_block = 1;  // threads per block (1: the block is one host thread)
  int64_t warp_size = 1;  // SIMT width; blocks are made of whole warps
  int64_t max_warps_per_block = std::numeric_limits<int64_t>::max();
  // The exact warp counts a block may have, ascending (a plugin's allowed_num_warps); empty:
  // any count up to max_warps_per_block.
  std::vector<int64_t> allowed_warps;
  int64_t max_grid = std::numeric_limits<int64_t>::max();
  // A grid g is allowed when g <= grid_any_upto or g % grid_multiple == 0 (and g <= max_grid).
  int64_t grid_any_upto = std::numeric_limits<int64_t>::max();
  int64_t grid_multiple = 1;

  bool grid_allowed(int64_t g) const;
  bool block_allowed(int64_t b) const;
  // The largest allowed block <= b, else the smallest allowed block; 0 when none is allowed.
  int64_t legal_block_near(int64_t b) const;
  // The largest allowed grid <= g (at least 1).
  int64_t clamp_grid(int64_t g) const;
};

struct DeviceProperties {
  std::string name;       // registry name: "cpu", "cuda", "gxu"
  std::string kind;       // "host", "gpu", "accelerator"
  std::string model;      // "Intel Xeon ...", "NVIDIA H200"
  std::string arch;       // what code is generated for: "x86-64 native", "sm_90"
  int compute_units = 1;  // cores, SMs, tiles
  // Threads one compute unit keeps resident at once (GPUs: max threads per SM); 0 = unknown.
  // Heuristics size grids to fill the device in one wave.
  int64_t resident_threads_per_unit = 0;
  int64_t memory_bytes = 0;
  int64_t shared_memory_per_block = 0;    // on-chip scratch a block may use (0: none / n.a.)
  int64_t vector_bytes = 16;              // natural vector width of one thread
  int64_t alignment = 64;                 // of device allocations, bytes
  std::vector<int64_t> preferred_blocks;  // block sizes (threads) heuristics and tuning try first
  LaunchLimits launch;
  std::vector<DType> dtypes;          // element types kernels may be generated for
  std::vector<std::string> features;  // "avx512f", "bf16", "tensor_cores", ...
  bool host_addressable = false;      // device pointers are host pointers (cpu, emulators)

  // Canonical text of every field: part of compile-cache keys, so that code compiled for one
  // device is never loaded for another.
  std::string cache_key() const;
  // Multi-line human-readable form (`ferrite devices --verbose`).
  std::string describe() const;
};

}  // namespace ferrite
