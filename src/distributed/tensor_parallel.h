// Tensor-parallel runs: one model split over N ranks (passes/shard_tensor_parallel.h), each rank
// a Session of its own over its shard of the weights, run at once with a communicator group
// between them. Ranks are threads of this process. A device with its own collectives library
// (Device::communicator_group: NCCL on cuda) puts rank r on its unit r (`cuda:r`) and runs the
// collectives there, captured into its CUDA graphs; any other device runs every rank on itself
// and exchanges data through host memory (the loopback group). Every rank gets the whole outputs
// (the pass gathers them); run() returns rank 0's.
//
// for_rank() is the other shape of the same thing: this process holds one rank of a group whose
// other ranks are other processes (torchrun), with a communicator made outside (over
// torch.distributed from Python, or NCCL bootstrapped over it: Device::communicator_rank).
#pragma once

#include <functional>
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
  // Rank comm->rank() of comm->size(), the other ranks elsewhere: shards `graph` the same way for
  // that rank alone and runs it on `device` (a unit may be named: `cuda:1`) with `comm` bound to
  // the running thread. The other ranks must run the same graph, split the same way.
  static Expected<std::unique_ptr<TensorParallelSession>> for_rank(
      std::unique_ptr<Graph> graph, const std::string& device, const RunOptions& opts,
      std::shared_ptr<Communicator> comm);
  ~TensorParallelSession();
  TensorParallelSession(const TensorParallelSession&) = delete;
  TensorParallelSession& operator=(const TensorParallelSession&) = delete;

  // Runs every local rank on `inputs` (each rank reads the same tensors) and returns the first
  // local rank's outputs. A rank that fails aborts the others' collectives; the first error that
  // is not such an abort is returned. (An external group's other ranks are not ours to stop:
  // they see the failure as their communicator reports it, a timeout of gloo or NCCL.)
  Expected<std::vector<Tensor>> run(const std::vector<Session::NamedInput>& inputs);
  // Session::time_resident on every local rank at once (the collectives pace them together):
  // sample k is the slowest rank's k-th run, so a rank that waits on its peers counts that wait.
  Expected<DeviceTiming> time_resident(const std::vector<Session::NamedInput>& inputs, int runs);
  // Session::run_device for a one-rank session (for_rank): tensors stay in the device's memory.
  Status run_device(const std::vector<Session::NamedInput>& inputs, DeviceRun run);

  // Ranks in the group, and the ranks of it this object runs (all of them, or for_rank's one).
  int size() const { return size_; }
  int local_ranks() const { return static_cast<int>(ranks_.size()); }
  // The group rank of local rank 0 (0, or for_rank's rank).
  int first_rank() const { return first_rank_; }
  Session& local(int i) { return *ranks_[static_cast<size_t>(i)]; }
  // What the pass split on the first local rank (every rank splits the same way).
  const ShardReport& report() const { return report_; }
  // The collectives library, as rank 0's communicator describes itself.
  const std::string& collectives() const { return collectives_; }

 private:
  TensorParallelSession() = default;
  // The Session of `rank`'s shard `g`, labelled with the rank.
  Expected<std::unique_ptr<Session>> compile_rank(std::unique_ptr<Graph> g, int rank,
                                                  const std::string& device,
                                                  const RunOptions& opts);
  Communicator& comm(size_t i) const { return external_ ? *external_ : *comms_[i]; }
  // `work` on every local rank's Session at once, each on a thread of its own (the first local
  // rank on the caller's) with its communicator bound. A rank that fails aborts the others'
  // collectives; the first error that is not such an abort is returned, else every result.
  template <class T>
  Expected<std::vector<T>> on_every_rank(const std::function<Expected<T>(Session&)>& work);

  int size_ = 1, first_rank_ = 0;
  std::vector<std::unique_ptr<Session>> ranks_;
  std::vector<std::unique_ptr<Communicator>> comms_;  // a group of this process's threads
  std::shared_ptr<Communicator> external_;            // for_rank's
  ShardReport report_;
  std::string collectives_;
};

}  // namespace ferrite
