// The CUDA libraries, opened at run time: the driver (libcuda.so.1), NVRTC, cuBLASLt and (optional)
// cuDNN. Nothing
// links against them, so a binary built with the CUDA headers starts on machines without a
// driver or a GPU; each loader returns an error naming the library (or symbol) it could not find.
#pragma once

#include <cublasLt.h>
#include <cuda.h>
#include <nvrtc.h>

// cuDNN is optional at build time too: without its headers there is simply no cuDNN path.
#if __has_include(<cudnn.h>)
#include <cudnn.h>
#define FERRITE_HAVE_CUDNN 1
#else
#define FERRITE_HAVE_CUDNN 0
#endif

#include <string>

#include "support/status.h"

namespace ferrite::cuda {

// X(member, "exported symbol"): the exported names are the versioned ones cuda.h maps to.
#define FERRITE_CUDA_DRIVER_FNS(X)                             \
  X(cuInit, "cuInit")                                          \
  X(cuDriverGetVersion, "cuDriverGetVersion")                  \
  X(cuGetErrorString, "cuGetErrorString")                      \
  X(cuDeviceGetCount, "cuDeviceGetCount")                      \
  X(cuDeviceGet, "cuDeviceGet")                                \
  X(cuDeviceGetName, "cuDeviceGetName")                        \
  X(cuDeviceGetAttribute, "cuDeviceGetAttribute")              \
  X(cuDeviceTotalMem, "cuDeviceTotalMem_v2")                   \
  X(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain")      \
  X(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2") \
  X(cuCtxSetCurrent, "cuCtxSetCurrent")                        \
  X(cuMemAlloc, "cuMemAlloc_v2")                               \
  X(cuMemFree, "cuMemFree_v2")                                 \
  X(cuMemAllocHost, "cuMemAllocHost_v2")                       \
  X(cuMemFreeHost, "cuMemFreeHost")                            \
  X(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")                 \
  X(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")                 \
  X(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")                 \
  X(cuMemcpy2DAsync, "cuMemcpy2DAsync_v2")                     \
  X(cuMemsetD8Async, "cuMemsetD8Async")                        \
  X(cuStreamCreate, "cuStreamCreate")                          \
  X(cuStreamDestroy, "cuStreamDestroy_v2")                     \
  X(cuStreamSynchronize, "cuStreamSynchronize")                \
  X(cuCtxSynchronize, "cuCtxSynchronize")                      \
  X(cuModuleLoadData, "cuModuleLoadData")                      \
  X(cuModuleUnload, "cuModuleUnload")                          \
  X(cuModuleGetFunction, "cuModuleGetFunction")                \
  X(cuFuncSetAttribute, "cuFuncSetAttribute")                  \
  X(cuLaunchKernel, "cuLaunchKernel")                          \
  X(cuStreamBeginCapture, "cuStreamBeginCapture_v2")           \
  X(cuStreamEndCapture, "cuStreamEndCapture")                  \
  X(cuGraphInstantiate, "cuGraphInstantiateWithFlags")         \
  X(cuGraphLaunch, "cuGraphLaunch")                            \
  X(cuGraphExecDestroy, "cuGraphExecDestroy")                  \
  X(cuGraphDestroy, "cuGraphDestroy")                          \
  X(cuStreamIsCapturing, "cuStreamIsCapturing")                \
  X(cuEventCreate, "cuEventCreate")                            \
  X(cuEventDestroy, "cuEventDestroy_v2")                       \
  X(cuEventRecord, "cuEventRecord")                            \
  X(cuEventSynchronize, "cuEventSynchronize")                  \
  X(cuEventElapsedTime, "cuEventElapsedTime")                  \
  X(cuStreamWaitEvent, "cuStreamWaitEvent")

#define FERRITE_NVRTC_FNS(X)                          \
  X(nvrtcVersion, "nvrtcVersion")                     \
  X(nvrtcGetErrorString, "nvrtcGetErrorString")       \
  X(nvrtcCreateProgram, "nvrtcCreateProgram")         \
  X(nvrtcDestroyProgram, "nvrtcDestroyProgram")       \
  X(nvrtcCompileProgram, "nvrtcCompileProgram")       \
  X(nvrtcGetProgramLogSize, "nvrtcGetProgramLogSize") \
  X(nvrtcGetProgramLog, "nvrtcGetProgramLog")         \
  X(nvrtcGetCUBINSize, "nvrtcGetCUBINSize")           \
  X(nvrtcGetCUBIN, "nvrtcGetCUBIN")

#define FERRITE_CUBLASLT_FNS(X)                                                   \
  X(cublasLtCreate, "cublasLtCreate")                                             \
  X(cublasLtDestroy, "cublasLtDestroy")                                           \
  X(cublasLtGetVersion, "cublasLtGetVersion")                                     \
  X(cublasLtMatmul, "cublasLtMatmul")                                             \
  X(cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate")                         \
  X(cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy")                       \
  X(cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute")             \
  X(cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate")                     \
  X(cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy")                   \
  X(cublasLtMatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute")         \
  X(cublasLtMatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate")             \
  X(cublasLtMatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy")           \
  X(cublasLtMatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute") \
  X(cublasLtMatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic")

#if FERRITE_HAVE_CUDNN
// The legacy convolution API that cuDNN 9 still ships (libcudnn.so.9 forwards it to its engines).
#define FERRITE_CUDNN_FNS(X)                                                                    \
  X(cudnnGetVersion, "cudnnGetVersion")                                                         \
  X(cudnnGetErrorString, "cudnnGetErrorString")                                                 \
  X(cudnnCreate, "cudnnCreate")                                                                 \
  X(cudnnDestroy, "cudnnDestroy")                                                               \
  X(cudnnSetStream, "cudnnSetStream")                                                           \
  X(cudnnCreateTensorDescriptor, "cudnnCreateTensorDescriptor")                                 \
  X(cudnnDestroyTensorDescriptor, "cudnnDestroyTensorDescriptor")                               \
  X(cudnnSetTensor4dDescriptor, "cudnnSetTensor4dDescriptor")                                   \
  X(cudnnCreateFilterDescriptor, "cudnnCreateFilterDescriptor")                                 \
  X(cudnnDestroyFilterDescriptor, "cudnnDestroyFilterDescriptor")                               \
  X(cudnnSetFilter4dDescriptor, "cudnnSetFilter4dDescriptor")                                   \
  X(cudnnCreateConvolutionDescriptor, "cudnnCreateConvolutionDescriptor")                       \
  X(cudnnDestroyConvolutionDescriptor, "cudnnDestroyConvolutionDescriptor")                     \
  X(cudnnSetConvolution2dDescriptor, "cudnnSetConvolution2dDescriptor")                         \
  X(cudnnSetConvolutionGroupCount, "cudnnSetConvolutionGroupCount")                             \
  X(cudnnSetConvolutionMathType, "cudnnSetConvolutionMathType")                                 \
  X(cudnnGetConvolution2dForwardOutputDim, "cudnnGetConvolution2dForwardOutputDim")             \
  X(cudnnGetConvolutionForwardAlgorithm_v7, "cudnnGetConvolutionForwardAlgorithm_v7")           \
  X(cudnnConvolutionForward, "cudnnConvolutionForward")                                         \
  X(cudnnCreateActivationDescriptor, "cudnnCreateActivationDescriptor")                         \
  X(cudnnDestroyActivationDescriptor, "cudnnDestroyActivationDescriptor")                       \
  X(cudnnSetActivationDescriptor, "cudnnSetActivationDescriptor")                               \
  X(cudnnConvolutionBiasActivationForward, "cudnnConvolutionBiasActivationForward")             \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7, "cudnnGetConvolutionBackwardDataAlgorithm_v7") \
  X(cudnnConvolutionBackwardData, "cudnnConvolutionBackwardData")                               \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7,                                              \
    "cudnnGetConvolutionBackwardFilterAlgorithm_v7")                                            \
  X(cudnnConvolutionBackwardFilter, "cudnnConvolutionBackwardFilter")                           \
  X(cudnnBackendCreateDescriptor, "cudnnBackendCreateDescriptor")                               \
  X(cudnnBackendDestroyDescriptor, "cudnnBackendDestroyDescriptor")                             \
  X(cudnnBackendSetAttribute, "cudnnBackendSetAttribute")                                       \
  X(cudnnBackendGetAttribute, "cudnnBackendGetAttribute")                                       \
  X(cudnnBackendFinalize, "cudnnBackendFinalize")                                               \
  X(cudnnBackendExecute, "cudnnBackendExecute")
#endif

#define FERRITE_DECLARE_FN(name, sym) decltype(&::name) name = nullptr;

struct Driver {
  FERRITE_CUDA_DRIVER_FNS(FERRITE_DECLARE_FN)
  int version = 0;
  std::string library;
};
struct Nvrtc {
  FERRITE_NVRTC_FNS(FERRITE_DECLARE_FN)
  int major = 0, minor = 0;
  std::string library;
};
struct CublasLt {
  FERRITE_CUBLASLT_FNS(FERRITE_DECLARE_FN)
  size_t version = 0;
  std::string library;
};
#if FERRITE_HAVE_CUDNN
struct Cudnn {
  FERRITE_CUDNN_FNS(FERRITE_DECLARE_FN)
  size_t version = 0;
  std::string library;
};
#endif
#undef FERRITE_DECLARE_FN

// Each loads once per process (thread-safe) and returns the same result afterwards. The driver
// loader also calls cuInit(0).
Expected<const Driver*> driver();
Expected<const Nvrtc*> nvrtc();
Expected<const CublasLt*> cublaslt();
#if FERRITE_HAVE_CUDNN
// libcudnn.so.9, then libcudnn.so (FERRITE_CUDA_LIB_cuDNN overrides); optional: callers fall back
// to their own kernels when it is missing.
Expected<const Cudnn*> cudnn();
#endif

// "CUDA_ERROR_OUT_OF_MEMORY: out of memory" etc.
std::string driver_error(CUresult r);
// err("<what>: <driver error>") when r != CUDA_SUCCESS.
Status check(CUresult r, const char* what);

}  // namespace ferrite::cuda
