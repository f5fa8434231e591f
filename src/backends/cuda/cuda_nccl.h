// NCCL for tensor-parallel runs on cuda: a communicator group over GPUs 0..N-1 (one rank per GPU,
// each rank a thread of this process driving its own GPU), or one rank of a group of processes,
// and the library ops that run the
// com.microsoft collectives on the rank's stream with it (captured into CUDA graphs like any
// other step). NCCL is opened at run time like the other CUDA libraries (libnccl.so.2 of the
// system or of PyTorch's nvidia-nccl wheel; FERRITE_CUDA_LIB_NCCL names another).
#pragma once

#include <memory>
#include <vector>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_native_ops.h"
#include "ops/communicator.h"

namespace ferrite::cuda {

// One NCCL communicator per GPU 0..size-1 (rank r on GPU r). Errors say why not (no NCCL, too
// few GPUs).
Expected<std::vector<std::unique_ptr<Communicator>>> make_nccl_group(int size);

// Across processes (one rank each, torchrun): rank 0 makes the group's id (ncclGetUniqueId, 128
// bytes), every rank joins with it (ncclCommInitRank) on its GPU `gpu` (ordinal `ordinal`), which
// the communicator keeps open.
Expected<std::string> make_nccl_id();
Expected<std::unique_ptr<Communicator>> make_nccl_rank(std::shared_ptr<CudaBackend> gpu,
                                                       int ordinal, const std::string& id, int rank,
                                                       int size);

// The library ops (cuda_native_ops.cpp registers them): the collective over the NCCL communicator
// bound to the running thread; without one, an error saying how to run the graph.
Expected<bool> run_all_reduce(const Node& node, NativeIO& io, CudaBackend& be);
Expected<bool> run_all_gather(const Node& node, NativeIO& io, CudaBackend& be);
Expected<bool> run_reduce_scatter(const Node& node, NativeIO& io, CudaBackend& be);

}  // namespace ferrite::cuda
