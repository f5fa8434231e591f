// cuDNN graph-API execution plans: the convolutions of cuda_cudnn.h (see cuda_cudnn_graph.cpp for
// why) and fused attention (cuDNN's SDPA operation). Built once per problem (and direction),
// executed with one variant pack per call.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include "backends/cuda/cuda_api.h"
#include "backends/cuda/cuda_cudnn.h"

namespace ferrite::cuda {

// Every operand pointer must be aligned to this many bytes (the plans are built for it).
inline constexpr size_t kCudnnGraphAlignment = 16;
// Engines needing more workspace are skipped.
inline constexpr size_t kCudnnGraphMaxWorkspace = size_t{256} << 20;

#if FERRITE_HAVE_CUDNN

struct CudnnGraphPlan {
  const Cudnn* api = nullptr;
  std::vector<cudnnBackendDescriptor_t> owned;  // every descriptor the plan was built from
  cudnnBackendDescriptor_t plan = nullptr;      // the finalized execution plan
  size_t workspace = 0;
  int config = 0;  // index of the engine configuration among the heuristics' results
  CudnnGraphPlan() = default;
  CudnnGraphPlan(const CudnnGraphPlan&) = delete;
  CudnnGraphPlan& operator=(const CudnnGraphPlan&) = delete;
  ~CudnnGraphPlan();
};

// The plan of q's convolution in `direction` (0 forward: x, w -> y; 1 backward data: w, dy -> dx;
// 2 backward filter: x, dy -> dw). An error says why cuDNN offers none (the caller then uses the
// legacy call).
Expected<std::unique_ptr<CudnnGraphPlan>> build_cudnn_graph_plan(const Cudnn& d,
                                                                 cudnnHandle_t handle,
                                                                 const CudnnConvProblem& q,
                                                                 int direction);

// Runs the plan on the handle's stream: x, w, y are the operands by role (x or dx, w or dw, y or
// dy), `workspace` at least plan.workspace bytes (null when 0).
Status execute_cudnn_graph_plan(const Cudnn& d, cudnnHandle_t handle, const CudnnGraphPlan& plan,
                                void* x, void* w, void* y, void* workspace);

// The plan of one attention (uids 1 q, 2 k, 3 v, 4 o, 5 the scale by value). An error says why
// cuDNN offers none (older than 9.13, or no engine for the dims, strides or dtype).
Expected<std::unique_ptr<CudnnGraphPlan>> build_cudnn_sdpa_plan(const Cudnn& d,
                                                                cudnnHandle_t handle,
                                                                const CudnnSdpaProblem& q);
// Runs an attention plan on the handle's stream.
Status execute_cudnn_sdpa_plan(const Cudnn& d, cudnnHandle_t handle, const CudnnGraphPlan& plan,
                               const CudnnSdpaProblem& q, const void* qp, const void* k,
                               const void* v, void* o, void* workspace);

#endif  // FERRITE_HAVE_CUDNN

}  // namespace ferrite::cuda
