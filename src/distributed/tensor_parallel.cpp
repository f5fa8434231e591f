#include "distributed/tensor_parallel.h"

#include <algorithm>
#include <optional>
#include <thread>

#include "distributed/loopback.h"
#include "passes/pass.h"
#include "runtime/guards.h"

namespace ferrite {

namespace {

// What runs before the split: the simplify stage of the default pipeline, in its order (the pass
// needs folded weights and shape targets), then fold-batched-matmul-reshapes. PyTorch lowers a
// rank-4 matmul to views that merge batch and heads around a bmm (torch.compile's graphs, and
// ONNX exports of them); a split of the head dim cannot travel through such a merge and would be
// gathered there, while the folded rank-4 MatMul is attention per head, which the pass splits.
std::vector<std::string> pre_shard_passes() {
  std::vector<std::pair<int, std::string>> slots;
  for (const PassInfo& p : PassRegistry::global().all())
    for (const PipelineSlot& s : p.pipeline)
      if (s.stage == Stage::kSimplify) slots.emplace_back(s.order, p.name);
  std::sort(slots.begin(), slots.end());
  std::vector<std::string> names;
  for (auto& [order, name] : slots) names.push_back(name);
  names.push_back("fold-batched-matmul-reshapes");
  return names;
}

bool is_abort(const Status& s) {
  return s.message().find("collective aborted") != std::string::npos;
}

}  // namespace

TensorParallelSession::~TensorParallelSession() {
  // The ranks' sessions first: their CUDA graphs hold the NCCL operations they captured, and
  // NCCL waits for those to be released before a communicator can go (destroying the group
  // first, as member order would, hung every cuda run with captured graphs at its end).
  ranks_.clear();
  // Then each rank's communicator on a thread of its own: tearing a group down may need its
  // ranks at once, which one thread destroying them in turn cannot give.
  if (comms_.size() > 1) {
    std::vector<std::thread> threads;
    for (auto& c : comms_) threads.emplace_back([&c] { c.reset(); });
    for (auto& t : threads) t.join();
  }
  comms_.clear();
}

Expected<std::unique_ptr<Session>> TensorParallelSession::compile_rank(std::unique_ptr<Graph> g,
                                                                       int rank,
                                                                       const std::string& device,
                                                                       const RunOptions& opts) {
  FERRITE_ASSIGN_OR_RETURN(auto s, Session::from_graph(std::move(g), device, opts));
  s->set_label(str_cat("rank ", rank, "/", size_));
  return s;
}

Expected<std::unique_ptr<TensorParallelSession>> TensorParallelSession::from_graph(
    std::unique_ptr<Graph> graph, const std::string& named, const RunOptions& opts, int size) {
  if (!graph) return err("no graph to run");
  const std::string device = named.empty() ? default_device() : named;
  if (size < 1 || size > 64)
    return err("--tensor-parallel expects a group size from 1 to 64, got ", size);
  if (device.find(':') != std::string::npos)
    return err("--tensor-parallel: give the device without a unit ('", device,
               "'): rank r runs on unit r");
  auto tp = std::unique_ptr<TensorParallelSession>(new TensorParallelSession());
  tp->size_ = size;
  // The device's own collectives library where it has one (NCCL: rank r on `device:r`), else
  // host memory between ranks on the one device.
  std::vector<std::string> rank_device(static_cast<size_t>(size), device);
  if (size > 1) {
    FERRITE_ASSIGN_OR_RETURN(auto probe, DeviceRegistry::global().create(device));
    auto group = probe->communicator_group(size);
    if (group) {
      tp->comms_ = std::move(group).value();
      for (int r = 0; r < size; ++r) rank_device[static_cast<size_t>(r)] = str_cat(device, ":", r);
    } else if (!group.status().is_unsupported()) {
      return group.status();
    }
  }
  if (tp->comms_.empty()) tp->comms_ = make_loopback_group(size);
  tp->collectives_ = tp->comms_[0]->describe();
  FERRITE_RETURN_IF_ERROR(run_pipeline(*graph, pre_shard_passes()));
  // Copies share the constants' storage; each rank's shard replaces the weights it splits. The
  // ranks are split at once, on a thread each: the copies of column-parallel weights are most of
  // the time to make a session of a large model.
  std::vector<std::unique_ptr<Graph>> graphs;
  for (int r = 0; r < size; ++r)
    graphs.push_back(r + 1 < size ? copy_graph(*graph) : std::move(graph));
  std::vector<std::optional<Expected<ShardReport>>> reports(static_cast<size_t>(size));
  {
    std::vector<std::thread> threads;
    for (int r = 0; r < size; ++r)
      threads.emplace_back([&, r] {
        reports[static_cast<size_t>(r)] =
            shard_tensor_parallel(*graphs[static_cast<size_t>(r)], r, size);
      });
    for (auto& t : threads) t.join();
  }
  for (int r = 0; r < size; ++r) {
    Expected<ShardReport>& rep = *reports[static_cast<size_t>(r)];
    if (!rep) return rep.status();
    if (r == 0) tp->report_ = std::move(rep).value();
    FERRITE_ASSIGN_OR_RETURN(auto s, tp->compile_rank(std::move(graphs[static_cast<size_t>(r)]), r,
                                                      rank_device[static_cast<size_t>(r)], opts));
    tp->ranks_.push_back(std::move(s));
  }
  return tp;
}

Expected<std::unique_ptr<TensorParallelSession>> TensorParallelSession::for_rank(
    std::unique_ptr<Graph> graph, const std::string& named, const RunOptions& opts,
    std::shared_ptr<Communicator> comm) {
  if (!graph) return err("no graph to run");
  if (!comm) return err("a tensor-parallel rank needs a communicator");
  const int size = comm->size(), rank = comm->rank();
  if (size < 1 || size > 64 || rank < 0 || rank >= size)
    return err(comm->describe(), ": rank ", rank, " of ", size,
               " is not a rank of a tensor-parallel group (1 to 64 ranks)");
  auto tp = std::unique_ptr<TensorParallelSession>(new TensorParallelSession());
  tp->size_ = size;
  tp->first_rank_ = rank;
  tp->collectives_ = comm->describe();
  tp->external_ = std::move(comm);
  FERRITE_RETURN_IF_ERROR(run_pipeline(*graph, pre_shard_passes()));
  FERRITE_ASSIGN_OR_RETURN(tp->report_, shard_tensor_parallel(*graph, rank, size));
  FERRITE_ASSIGN_OR_RETURN(
      auto s,
      tp->compile_rank(std::move(graph), rank, named.empty() ? default_device() : named, opts));
  tp->ranks_.push_back(std::move(s));
  return tp;
}

template <class T>
Expected<std::vector<T>> TensorParallelSession::on_every_rank(
    const std::function<Expected<T>(Session&)>& work) {
  const int n = local_ranks();
  std::vector<std::optional<Expected<T>>> results(static_cast<size_t>(n));
  auto rank_main = [&](int i) {
    Communicator& c = comm(static_cast<size_t>(i));
    BindCommunicator bind(&c);
    Expected<T> r = work(*ranks_[static_cast<size_t>(i)]);
    if (!r) c.abort(str_cat("rank ", c.rank(), ": ", r.status().message()));
    results[static_cast<size_t>(i)] = std::move(r);
  };
  std::vector<std::thread> threads;
  for (int i = 1; i < n; ++i) threads.emplace_back(rank_main, i);
  rank_main(0);  // the first local rank on the caller's thread
  for (auto& t : threads) t.join();
  const Status* first = nullptr;
  for (auto& res : results)
    if (!*res && (!first || (is_abort(*first) && !is_abort(res->status())))) first = &res->status();
  if (first) {
    // Every rank has stopped: a fresh loopback group, so that the abort does not outlive this
    // run (an NCCL group has nothing to reset: its ranks fail before their first collective; an
    // external group is its owner's to reset).
    Status s = *first;
    if (!external_ && comms_[0]->native("nccl") == nullptr) comms_ = make_loopback_group(n);
    return s;
  }
  std::vector<T> out;
  for (auto& res : results) out.push_back(std::move(**res));
  return out;
}

Expected<std::vector<Tensor>> TensorParallelSession::run(
    const std::vector<Session::NamedInput>& inputs) {
  FERRITE_ASSIGN_OR_RETURN(
      auto all, on_every_rank<std::vector<Tensor>>([&](Session& s) { return s.run(inputs); }));
  return std::move(all[0]);  // every rank has the whole outputs: the first local rank's
}

Expected<DeviceTiming> TensorParallelSession::time_resident(
    const std::vector<Session::NamedInput>& inputs, int runs) {
  FERRITE_ASSIGN_OR_RETURN(auto all, on_every_rank<DeviceTiming>([&](Session& s) {
                             return s.time_resident(inputs, runs);
                           }));
  DeviceTiming out = std::move(all[0]);
  for (size_t i = 1; i < all.size(); ++i)
    for (size_t k = 0; k < std::min(all[i].seconds.size(), out.seconds.size()); ++k)
      out.seconds[k] = std::max(out.seconds[k], all[i].seconds[k]);
  if (all.size() > 1) out.method += str_cat("; the slowest of ", all.size(), " ranks per run");
  return out;
}

Status TensorParallelSession::run_device(const std::vector<Session::NamedInput>& inputs,
                                         DeviceRun run) {
  // The ranks of a thread group would each need their own device buffers and streams: only a
  // rank of an external group (one per process) runs on device-resident tensors.
  if (local_ranks() != 1 || !external_)
    return unsupported(
        "a device-resident run takes one tensor-parallel rank per process "
        "(this session runs ",
        local_ranks(), " ranks as threads)");
  BindCommunicator bind(external_.get());
  return ranks_[0]->run_device(inputs, std::move(run));
}

}  // namespace ferrite
