#include "backends/cuda/cuda_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <vector>

namespace ferrite::cuda {

namespace {

// Opens the first library of `names` that loads; FERRITE_CUDA_LIB_<what> overrides the list.
Expected<void*> open_first(const char* what, const std::vector<std::string>& names,
                           std::string* opened) {
  std::string tried;
  std::string env_name = std::string("FERRITE_CUDA_LIB_") + what;
  std::vector<std::string> list = names;
  if (const char* e = std::getenv(env_name.c_str()); e && *e) list.insert(list.begin(), e);
  for (const auto& n : list) {
    if (void* h = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      *opened = n;
      return h;
    }
    const char* e = dlerror();
    tried += (tried.empty() ? "" : "; ") + n + (e ? std::string(" (") + e + ")" : "");
  }
  return err("cannot load the ", what, " library: tried ", tried);
}

template <class T>
Status resolve(void* h, const char* sym, T& fn, const std::string& lib) {
  fn = reinterpret_cast<T>(dlsym(h, sym));
  if (!fn) return err(lib, " lacks the symbol ", sym, " (too old?)");
  return Status::ok();
}

#define FERRITE_RESOLVE(name, sym) FERRITE_RETURN_IF_ERROR(resolve(h, sym, d.name, d.library));

Expected<Driver> load_driver() {
  Driver d;
  FERRITE_ASSIGN_OR_RETURN(void* h,
                           open_first("driver", {"libcuda.so.1", "libcuda.so"}, &d.library));
  FERRITE_CUDA_DRIVER_FNS(FERRITE_RESOLVE)
  CUresult r = d.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* s = nullptr;
    d.cuGetErrorString(r, &s);
    return err("the CUDA driver (", d.library, ") failed to initialise: ", s ? s : "unknown error",
               " (no GPU, or no permission to use it?)");
  }
  d.cuDriverGetVersion(&d.version);
  return d;
}

Expected<Nvrtc> load_nvrtc() {
  Nvrtc d;
  FERRITE_ASSIGN_OR_RETURN(
      void* h,
      open_first("NVRTC", {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"}, &d.library));
  FERRITE_NVRTC_FNS(FERRITE_RESOLVE)
  d.nvrtcVersion(&d.major, &d.minor);
  return d;
}

Expected<CublasLt> load_cublaslt() {
  CublasLt d;
  FERRITE_ASSIGN_OR_RETURN(
      void* h, open_first("cuBLASLt", {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so"},
                          &d.library));
  FERRITE_CUBLASLT_FNS(FERRITE_RESOLVE)
  d.version = d.cublasLtGetVersion();
  return d;
}

#if FERRITE_HAVE_CUDNN
Expected<Cudnn> load_cudnn() {
  Cudnn d;
  FERRITE_ASSIGN_OR_RETURN(void* h,
                           open_first("cuDNN", {"libcudnn.so.9", "libcudnn.so"}, &d.library));
  FERRITE_CUDNN_FNS(FERRITE_RESOLVE)
  d.version = d.cudnnGetVersion();
  // The legacy API used here is cuDNN 9's; an 8.x library has other entry points' semantics.
  if (d.version < 90000)
    return err(d.library, " is cuDNN ", d.version, ": version 9 or later is needed");
  return d;
}
#endif

#undef FERRITE_RESOLVE

template <class T>
Expected<const T*> once(Expected<T> (*load)()) {
  static std::once_flag flag;
  static Expected<T>* result = nullptr;  // never freed: the libraries stay loaded
  std::call_once(flag, [&] { result = new Expected<T>(load()); });
  if (!*result) return result->status();
  return &result->value();
}

}  // namespace

Expected<const Driver*> driver() {
  return once<Driver>(load_driver);
}
Expected<const Nvrtc*> nvrtc() {
  return once<Nvrtc>(load_nvrtc);
}
Expected<const CublasLt*> cublaslt() {
  return once<CublasLt>(load_cublaslt);
}
#if FERRITE_HAVE_CUDNN
Expected<const Cudnn*> cudnn() {
  return once<Cudnn>(load_cudnn);
}
#endif

std::string driver_error(CUresult r) {
  auto d = driver();
  const char* s = nullptr;
  if (d) (*d)->cuGetErrorString(r, &s);
  return std::string("CUDA error ") + std::to_string(static_cast<int>(r)) +
         (s ? std::string(": ") + s : "");
}

Status check(CUresult r, const char* what) {
  if (r == CUDA_SUCCESS) return Status::ok();
  return err("cuda: ", what, ": ", driver_error(r));
}

}  // namespace ferrite::cuda
