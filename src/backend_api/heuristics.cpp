#include "backend_api/heuristics.h"

#include <algorithm>

#include "lower/kernel_ir.h"

namespace ferrite {

LaunchConfig DefaultHeuristics::choose(const Kernel& kernel, int64_t rows, int64_t row_len,
                                       const DeviceProperties& props) const {
  const LaunchLimits& lim = props.launch;
  LaunchConfig c;
  if (lim.max_block <= 1) {
    // Host-style: one thread per task; tasks of ~16K elements amortise the pool's dispatch.
    c.block = 1;
    c.rows_per_block = std::max<int64_t>(1, 16384 / std::max<int64_t>(row_len, 1));
    c.grid = std::max<int64_t>(1, (rows + c.rows_per_block - 1) / c.rows_per_block);
    c.grid = lim.clamp_grid(c.grid);
    return c;
  }
  // SIMT: a row kernel gives each block a row (its threads share the reduction); a pointwise
  // kernel spreads elements over blocks of up to 256 threads.
  int64_t warp = std::max<int64_t>(lim.warp_size, 1);
  int64_t block = kernel.is_row() ? std::min<int64_t>(256, std::max(warp, row_len)) : 256;
  block = std::min(block, std::min(lim.max_block, lim.max_warps_per_block * warp));
  block = std::max(warp, block / warp * warp);
  // Only the warp counts the device allows (a spec may allow 1 and 4 warps, not 2).
  if (!lim.block_allowed(block)) block = lim.legal_block_near(block);
  // A device's preferred block size wins when it is legal (its spec knows its chip).
  for (int64_t pref : props.preferred_blocks)
    if (lim.block_allowed(pref)) {
      block = pref;
      break;
    }
  c.block = block;
  int64_t work = kernel.is_row() ? rows : rows * row_len;
  int64_t per_block = kernel.is_row() ? 1 : block;
  int64_t want = std::max<int64_t>(1, (work + per_block - 1) / per_block);
  // Enough blocks to fill the machine a few times over; kernels loop over the rest.
  want = std::min<int64_t>(want, std::max(1, props.compute_units) * int64_t{32});
  c.grid = lim.clamp_grid(want);
  c.rows_per_block = std::max<int64_t>(1, (rows + c.grid - 1) / c.grid);
  return c;
}

}  // namespace ferrite
