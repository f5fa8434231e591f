// GEMM-family library kernels for the cpu device (MatMul, Gemm, ferrite.FusedMatMul).
#include "backends/cpu/cpu_kernels.h"

namespace ferrite {

void register_cpu_gemm_kernels(CpuKernelRegistry& r) {}

}  // namespace ferrite
