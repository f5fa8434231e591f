#include "backends/cpu/cpu_kernels.h"

namespace ferrite {

void CpuKernelRegistry::add(std::string_view domain, std::string_view op, CpuKernel k) {
  const OpId id = OpId::of(domain, op);
  auto& ks = kernels_[id.value()];
  if (ks.empty()) ops_.push_back(id);
  ks.push_back(k);
}

const CpuKernel* CpuKernelRegistry::find(const Node& node) const {
  auto it = kernels_.find(OpId::of(node).value());
  if (it == kernels_.end()) return nullptr;
  for (const CpuKernel& k : it->second)
    if (k.accepts(node)) return &k;
  return nullptr;
}

const CpuKernelRegistry& CpuKernelRegistry::global() {
  static const CpuKernelRegistry registry = [] {
    CpuKernelRegistry r;
    register_cpu_gemm_kernels(r);
    register_cpu_conv_kernels(r);
    register_cpu_conv_grad_kernels(r);
    register_cpu_attention_kernels(r);
    register_cpu_pool_kernels(r);
    register_cpu_concat_split_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace ferrite
