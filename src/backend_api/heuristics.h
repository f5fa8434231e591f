// Launch heuristics: how a generated kernel is spread over the device. Optional member of the
// backend contract: DefaultHeuristics derives a valid launch from DeviceProperties::launch.
#pragma once

#include <cstdint>

#include "backend_api/properties.h"

namespace ferrite {

struct Kernel;

struct LaunchConfig {
  int64_t grid = 1;           // blocks (cpu: parallel tasks)
  int64_t block = 1;          // threads per block (cpu: 1)
  int64_t rows_per_block = 1; // cpu: rows a task takes at a time (the pool's grain)
  int64_t shared_bytes = 0;   // on-chip scratch per block
};

class LaunchHeuristics {
 public:
  virtual ~LaunchHeuristics() = default;
  // `rows` independent rows of `row_len` elements each (Kernel::outer_rank() splits them).
  virtual LaunchConfig choose(const Kernel& kernel, int64_t rows, int64_t row_len,
                              const DeviceProperties& props) const = 0;
};

// One warp-sized block per row group and as many blocks as the rows need, clamped to the
// device's grid rules; a good start for any SIMT device and what vendors override first.
class DefaultHeuristics : public LaunchHeuristics {
 public:
  LaunchConfig choose(const Kernel& kernel, int64_t rows, int64_t row_len,
                      const DeviceProperties& props) const override;
};

}  // namespace ferrite
