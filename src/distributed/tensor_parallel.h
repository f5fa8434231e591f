// Tensor-parallel runs: one model split over N ranks (passes/shard_tensor_parallel.h), each rank
// a Session of its own over its shard of the weights, run at once with a communicator group
// between them. Ranks are threads of this process. A device with its own collectives library
// (Device::communicator_group: NCCL on cuda) puts rank r on its unit r (`cuda:r`) and runs the
// collectives there, captured into its CUDA graphs; any other device runs every rank on itself
// and exchanges data through host memory (the loopback group). Every rank gets the whole outputs
// (the pass gathers them); run() returns rank 0's.
#pragma once

#include <memory>
#include <vector>

#include "ops/communicator.h"
#include "passes/shard_tensor_parallel.h"
#include "runtime/session.h"

namespace ferrite {

class TensorParallelSession {
 public:
  // Simplifies `graph` (the default pipeline's simplify stage: the pass needs folded weights and
  // shape targets), shards it `size` ways and prepares one Session per rank on `device`.
  static Expected<std::unique_ptr<TensorParallelSession>> from_graph(std::unique_ptr<Graph> graph,
                                                                     const std::string& device,
                                                                     const RunOptions& opts,
                                                                     int size);
  ~TensorParallelSession();
  TensorParallelSession(const TensorParallelSession&) = delete;
  TensorParallelSession& operator=(const TensorParallelSession&) = delete;

  // Runs every rank on `inputs` (each rank reads the same tensors) and returns rank 0's outputs.
  // A rank that fails aborts the others' collectives; the first error that is not such an abort
  // is returned.
  Expected<std::vector<Tensor>> run(const std::vector<Session::NamedInput>& inputs);

  int size() const { return static_cast<int>(ranks_.size()); }
  Session& rank(int r) { return *ranks_[static_cast<size_t>(r)]; }
  // What the pass split on rank 0 (every rank splits the same way).
  const ShardReport& report() const { return report_; }
  // The collectives library, as rank 0's communicator describes itself.
  const std::string& collectives() const { return collectives_; }

 private:
  TensorParallelSession() = default;
  std::vector<std::unique_ptr<Session>> ranks_;
  std::vector<std::unique_ptr<Communicator>> comms_;
  ShardReport report_;
  std::string collectives_;
};

}  // namespace ferrite
