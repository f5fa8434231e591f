// The cpu device's library table (backend_api/library.h) over its kernels (cpu_kernels.h): the
// oneDNN GEMM and convolution, attention and pooling on the model's thread pool, for f32 nodes
// and, widened to f32, for bf16 / f16 ones.
#pragma once

#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend_api/library.h"
#include "backends/cpu/cpu_kernels.h"

namespace ferrite {

// The per-model state the table's functions get: the thread pool and the f32 twins of low
// precision nodes.
class CpuLibraryState {
 public:
  explicit CpuLibraryState(int threads) : pool(threads) {}
  ThreadPool pool;
  Status run(KernelContext& ctx);
  bool accepts(const Node& n);

 private:
  struct WideNode;
  const WideNode* widened(const Node& n);
  std::mutex mutex_;
  std::unordered_map<const Node*, std::shared_ptr<WideNode>> wide_;
};

std::shared_ptr<const LibraryOps> cpu_library_ops();

}  // namespace ferrite
