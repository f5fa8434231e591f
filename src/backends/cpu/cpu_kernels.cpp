#include "backends/cpu/cpu_kernels.h"

namespace ferrite {

void CpuKernelRegistry::add(const std::string& domain, const std::string& op, CpuKernel k) {
  entries_.push_back({domain, op, k});
}

const CpuKernel* CpuKernelRegistry::find(const Node& node) const {
  for (const auto& e : entries_)
    if (e.op == node.op_type && e.domain == node.domain && e.kernel.accepts(node)) return &e.kernel;
  return nullptr;
}

const CpuKernelRegistry& CpuKernelRegistry::global() {
  static const CpuKernelRegistry registry = [] {
    CpuKernelRegistry r;
    register_cpu_gemm_kernels(r);
    register_cpu_conv_kernels(r);
    register_cpu_attention_kernels(r);
    register_cpu_pool_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace ferrite
