#include "backends/cpu/cpu_backend.h"

#include <fstream>
#include <sstream>
#include <thread>

#include "backends/cpu/host_compiler.h"
#include "codegen/cpp_source.h"
#include "codegen/row_analysis.h"

namespace ferrite {

namespace {

// "model name" and the SIMD flags of the first processor in /proc/cpuinfo.
void read_cpuinfo(DeviceProperties& p) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool model = false, flags = false;
  while (std::getline(in, line) && !(model && flags)) {
    auto value = [&] {
      size_t c = line.find(':');
      return c == std::string::npos ? std::string() : line.substr(c + 2);
    };
    if (!model && line.rfind("model name", 0) == 0) {
      p.model = value();
      model = true;
    } else if (!flags && line.rfind("flags", 0) == 0) {
      std::istringstream fs(value());
      std::string f;
      while (fs >> f)
        if (f == "avx2" || f == "fma" || f == "avx512f" || f == "avx512bw" || f == "avx512_bf16" ||
            f == "amx_bf16" || f == "f16c" || f == "sse4_2")
          p.features.push_back(f);
      flags = true;
    }
  }
}

}  // namespace

LaunchConfig CpuHeuristics::choose(const Kernel& kernel, int64_t rows, int64_t row_len,
                                   const DeviceProperties& props) const {
  LaunchConfig c = DefaultHeuristics().choose(kernel, rows, row_len, props);
  // A column reduction (a channels-last mean) reads its rows side by side, and is split only
  // between images: a task takes whole images' channels. Split by channels, each thread read
  // every pixel's cache lines at a stride, and such a mean took longer on 2 threads than on 1.
  if (kernel.is_row() && column_reduce(kernel, RowPhases(kernel)) >= 0) {
    const int64_t per_image = kernel.shape[kernel.outer_rank() - 1].value().value_or(16);
    c.rows_per_block = (c.rows_per_block + per_image - 1) / per_image * per_image;
    c.grid = props.launch.clamp_grid((rows + c.rows_per_block - 1) / c.rows_per_block);
  }
  return c;
}

DeviceProperties cpu_properties() {
  DeviceProperties p;
  p.name = "cpu";
  p.kind = "host";
  p.arch = "host -march=native";
  p.compute_units = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  read_cpuinfo(p);
  bool avx512 = false;
  for (const auto& f : p.features) avx512 = avx512 || f == "avx512f";
  p.vector_bytes = avx512 ? 64 : 32;
  p.dtypes = {DType::kF32, DType::kF64, DType::kI32, DType::kI64, DType::kBool};
  p.host_addressable = true;
  return p;  // launch: defaults (one host thread per block, no grid rules)
}

Expected<std::string> CppDialect::generate(const LoweredGraph& lg,
                                           const DeviceProperties& props) const {
  return generate_cpp_source(lg);
}

std::string CppDialect::kernel_abi() const { return cpp_kernel_abi(); }

BackendParts make_cpu_backend_parts() {
  BackendParts parts;
  parts.properties = cpu_properties();
  parts.runtime = std::make_unique<HostRuntime>();
  parts.compiler = std::make_unique<HostCompiler>(parts.properties.cache_key());
  parts.dialect = std::make_unique<CppDialect>();
  parts.heuristics = std::make_unique<CpuHeuristics>();
  return parts;
}

}  // namespace ferrite
