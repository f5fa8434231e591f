// Runs a lowered graph on one GPU: generated kernels and native library steps on the device, every
// other step on the host through the op table's reference kernel.
//
// Each buffer may have a valid copy on the host, on the device, or both, and is moved only when a
// step needs it where it is not: host steps over host-resident values (shape arithmetic,
// embedding lookups of graph inputs) cost no transfers; a host step that needs a device value
// copies it back (a "fallback", counted and logged with FERRITE_LOG=fallback). Intermediates live
// in one device arena at the memory planner's offsets (memory/planner.h), planned per binding of
// the shape symbols; the rest comes from a caching allocator (cuda_pool.h) whose blocks are
// reused across runs. Constants are uploaded once, on first use.
#pragma once

#include <memory>

#include "backends/cuda/cuda_backend.h"
#include "lower/lowering.h"
#include "runtime/device.h"

namespace ferrite::cuda {

Expected<std::unique_ptr<PreparedModel>> make_cuda_model(const Graph& graph, LoweredGraph lg,
                                                         std::unique_ptr<LoadedModule> module,
                                                         std::shared_ptr<CudaBackend> backend,
                                                         bool tf32 = false);

}  // namespace ferrite::cuda
