// Cold compile of a graph's generated kernels: NVRTC spends most of its time per kernel (front
// end, NVVM, ptxas), so the kernels are split into several NVRTC programs ("chunks") compiled
// on a thread pool, each cached under its own compile-cache key (editing one kernel recompiles
// one chunk) and loaded as its own CUmodule. Kernels whose definitions are identical up to their
// name are compiled once and looked up under every name.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend_api/compiler.h"
#include "backend_api/dialect.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "lower/lowering.h"

namespace ferrite::cuda {

// The kernels of a lowered graph as separate definitions after a common prelude.
struct KernelSources {
  std::string prelude;             // what every program starts with (types, fe_* helpers)
  std::vector<std::string> texts;  // one definition per distinct kernel
  std::vector<std::string> names;  // the name texts[i] defines
  // Every kernel of the graph -> the name of the definition that implements it.
  std::unordered_map<std::string, std::string> alias;
  int kernels = 0;  // kernel steps of the graph (texts.size() after deduplication)
};

// Generates each kernel on its own with `dialect` (a graph holding only that kernel step) and
// drops the definitions that repeat an earlier one up to the kernel's name and leading comment.
Expected<KernelSources> split_kernel_sources(const LoweredGraph& lg, const CodegenDialect& dialect,
                                             const DeviceProperties& props);

struct CompileChunk {
  std::string source;                // prelude + the chunk's definitions
  std::vector<std::string> kernels;  // names defined
};

// Consecutive definitions in `chunks` groups of near-equal size (fewer when there are fewer
// kernels). Consecutive, so that a change to one kernel changes one chunk's source only.
std::vector<CompileChunk> make_chunks(const KernelSources& ks, int chunks);

// Threads for compiling: FERRITE_CUDA_COMPILE_THREADS, else the hardware threads (at least 1).
int compile_threads();

// Runs fn(0..n-1) on up to `threads` threads (the caller's included); the first error wins and
// stops handing out further indices.
Status parallel_for(int n, int threads, const std::function<Status(int)>& fn);

struct ChunkedCompile {
  std::vector<CompileChunk> chunks;
  std::vector<CubinResult> cubins;  // per chunk
  int cache_hits = 0;
  int threads = 1;
  double wall_seconds = 0;     // all chunks
  double compile_seconds = 0;  // sum over the chunks (what one thread would have taken)
};

// Compiles the chunks to cubins (NVRTC only: no driver or GPU needed). `tag` names the programs
// in errors ("<tag>_<i>").
Expected<ChunkedCompile> compile_chunks(std::vector<CompileChunk> chunks, const std::string& arch,
                                        const std::string& device_key, int threads,
                                        const std::string& tag = "kernels");

// A hand-written source as up to `programs` programs: each keeps every declaration and helper
// but only its share (consecutive) of the definitions of the `extern "C" __global__` kernels.
Expected<std::vector<CompileChunk>> split_program(const std::string& source, int programs);

// The chunks' modules, as one LoadedModule that finds a kernel under any of its aliases.
class ModuleSet : public LoadedModule {
 public:
  void* symbol(const std::string& name) const override;
  static Expected<std::unique_ptr<ModuleSet>> load(const CudaRuntime& rt, const ChunkedCompile& c,
                                                   const KernelSources& ks);
  // Every kernel of the chunks under its own name.
  static Expected<std::unique_ptr<ModuleSet>> load(const CudaRuntime& rt, const ChunkedCompile& c);
  size_t modules() const { return modules_.size(); }

 private:
  std::vector<std::unique_ptr<CubinModule>> modules_;
  struct Where {
    size_t module;
    std::string name;
  };
  std::unordered_map<std::string, Where> where_;
};

}  // namespace ferrite::cuda
