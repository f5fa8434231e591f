// Kernel codegen dialect: how a device spells the kernels of a lowered graph. Required when the
// device has a KernelCompiler (the dialect's output is the compiler's input), absent otherwise.
//
// The expression-level spelling (types, math functions, literals) is shared by every dialect
// through codegen/scalar_emitter.h, configured by ScalarSpelling, and so is the kernel analysis
// (codegen/row_analysis.h: dependencies, row phases, costs); the loop structure (a thread pool's
// row ranges, a GPU grid, a vendor's blocks) is what a dialect decides. Host-style dialects
// reuse codegen/cpp_source.h and only change the signature and prologue; codegen/cuda_source.h
// is the CUDA one.
#pragma once

#include <optional>
#include <string>

#include "backend_api/properties.h"
#include "support/status.h"

namespace ferrite {

struct LoweredGraph;

// Expression spelling for the shared scalar emitter (see codegen/scalar_emitter.h).
struct ScalarSpelling {
  std::string math_prefix = "std::";   // "std::exp" on hosts; "" for CUDA's overloaded exp()
  std::string restrict_keyword = "__restrict";
  // C type per dtype; unsupported dtypes are rejected before codegen (the lowering keeps
  // them out of generated kernels).
  std::optional<std::string> (*scalar_type)(DType) = nullptr;  // nullptr: the host C types
};

class CodegenDialect {
 public:
  virtual ~CodegenDialect() = default;
  // --- required ---
  virtual std::string name() const = 0;  // "c++ (host)", "cuda", ...
  // One translation unit with every kernel step of `lg`. Each kernel is preceded by a comment
  // naming the ONNX nodes it computes (dumps map code back to the model).
  virtual Expected<std::string> generate(const LoweredGraph& lg,
                                         const DeviceProperties& props) const = 0;
  // Names the calling convention of the generated kernels; part of compile-cache keys, and what
  // the device's launcher is written against.
  virtual std::string kernel_abi() const = 0;
  // --- optional ---
  virtual ScalarSpelling spelling() const { return {}; }
  // Element types this dialect can generate code for (the lowering realizes the rest through
  // library steps).
  virtual bool supports(DType dtype) const;
};

}  // namespace ferrite
