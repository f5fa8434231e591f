// Runs a lowered graph on a device whose memory is its own and whose kernels are launched by
// grid (plugins; the executor every launch-style device can share).
//
// Per run: inputs are copied to the device; generated kernels run on the device, writing into a
// device arena laid out by the memory planner (memory/planner.h) for this run's shape symbols;
// steps without a generated kernel (GEMM, convolution, ... until the device provides library
// kernels) run on the host's reference kernels with their inputs copied back and their outputs
// copied up again (counted as host fallbacks); outputs are copied back. Launch shapes come from
// the backend's LaunchHeuristics (or the tuning database) and are checked against the device's
// launch rules before every launch.
#pragma once

#include <functional>
#include <memory>

#include "backend_api/backend.h"
#include "lower/lowering.h"
#include "runtime/device.h"

namespace ferrite {

// Launches kernel `fn` (a LoadedModule symbol) with `bufs` (device addresses, inputs then
// output) and the shape-symbol values.
using LaunchFn = std::function<Status(void* fn, const LaunchConfig& launch,
                                      const std::vector<void*>& bufs,
                                      const std::vector<int64_t>& syms)>;

Expected<std::unique_ptr<PreparedModel>> prepare_launch_model(
    const Graph& graph, std::shared_ptr<BackendParts> parts, LaunchFn launch,
    const RunOptions& opts);

}  // namespace ferrite
