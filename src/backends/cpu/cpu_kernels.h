// Device-specific library kernels for the `cpu` device: ops that the lowering does not turn into
// generated code (GEMM, convolution, attention, ...) run one of these when registered, else the
// op table's reference kernel. This is the CPU's counterpart of TorchInductor's extern kernels.
#pragma once

#include <string>
#include <unordered_map>

#include "backend_api/library.h"
#include "backends/cpu/thread_pool.h"
#include "ops/context.h"
#include "support/target_clones.h"

namespace ferrite {

// A kernel may decline a node it cannot handle (dtype, attribute combination) by returning
// false from `accepts`; the reference kernel then runs.
struct CpuKernel {
  bool (*accepts)(const Node& node);
  Status (*run)(KernelContext& ctx, ThreadPool& pool);
};

class CpuKernelRegistry {
 public:
  static const CpuKernelRegistry& global();
  void add(std::string_view domain, std::string_view op, CpuKernel k);
  // The kernel for `node`, or null.
  const CpuKernel* find(const Node& node) const;
  // The ops with kernels (the cpu's library table, backend_api/library.h).
  const std::vector<OpId>& ops() const { return ops_; }

 private:
  std::unordered_map<int, std::vector<CpuKernel>> kernels_;  // by OpId
  std::vector<OpId> ops_;
};

// One registration function per kernel file under src/backends/cpu/kernels/.
void register_cpu_gemm_kernels(CpuKernelRegistry& r);
void register_cpu_conv_kernels(CpuKernelRegistry& r);
void register_cpu_conv_grad_kernels(CpuKernelRegistry& r);
void register_cpu_attention_kernels(CpuKernelRegistry& r);
void register_cpu_pool_kernels(CpuKernelRegistry& r);
void register_cpu_concat_split_kernels(CpuKernelRegistry& r);

}  // namespace ferrite
