#include "backends/cuda/cuda_compile.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "backends/cuda/cuda_runtime.h"

namespace ferrite::cuda {

namespace {

double since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// The definition without its leading comment (node names) and with its name replaced: equal
// keys compile to the same machine code.
std::string dedup_key(const std::string& text, const std::string& name) {
  size_t start = text.find("extern \"C\"");
  std::string key = start == std::string::npos ? text : text.substr(start);
  size_t at = key.find(" " + name + "(");
  if (at != std::string::npos) key.replace(at + 1, name.size(), "fe_kernel");
  return key;
}

}  // namespace

Expected<KernelSources> split_kernel_sources(const LoweredGraph& lg, const CodegenDialect& dialect,
                                             const DeviceProperties& props) {
  // A graph with the same buffers and symbols and one kernel step at a time: the dialect's
  // output for it is the prelude followed by that kernel's definition.
  LoweredGraph one;
  one.buffers = lg.buffers;
  one.symbols = lg.symbols;
  one.inputs = lg.inputs;
  one.outputs = lg.outputs;
  KernelSources ks;
  FERRITE_ASSIGN_OR_RETURN(ks.prelude, dialect.generate(one, props));
  std::unordered_map<std::string, size_t> seen;
  for (const Step& s : lg.steps) {
    if (s.kind != Step::Kind::kKernel) continue;
    ++ks.kernels;
    one.steps.assign(1, s);
    FERRITE_ASSIGN_OR_RETURN(std::string src, dialect.generate(one, props));
    if (src.compare(0, ks.prelude.size(), ks.prelude) != 0)
      return err("cuda: the generated source of kernel ", s.kernel.name,
                 " does not start with the prelude");
    std::string text = src.substr(ks.prelude.size());
    auto [it, fresh] = seen.emplace(dedup_key(text, s.kernel.name), ks.texts.size());
    if (fresh) {
      ks.texts.push_back(std::move(text));
      ks.names.push_back(s.kernel.name);
    }
    ks.alias[s.kernel.name] = ks.names[it->second];
  }
  return ks;
}

std::vector<CompileChunk> make_chunks(const KernelSources& ks, int chunks) {
  const size_t n = ks.texts.size();
  const size_t c =
      std::clamp<size_t>(static_cast<size_t>(std::max(chunks, 1)), 1, std::max<size_t>(n, 1));
  std::vector<CompileChunk> out;
  if (n == 0) return out;
  for (size_t i = 0; i < c; ++i) {
    size_t lo = n * i / c, hi = n * (i + 1) / c;
    CompileChunk ch;
    ch.source = ks.prelude;
    for (size_t k = lo; k < hi; ++k) {
      ch.source += ks.texts[k];
      ch.kernels.push_back(ks.names[k]);
    }
    out.push_back(std::move(ch));
  }
  return out;
}

int compile_threads() {
  if (const char* v = std::getenv("FERRITE_CUDA_COMPILE_THREADS"); v && *v) {
    int t = std::atoi(v);
    if (t >= 1) return t;
  }
  return std::max(1u, std::thread::hardware_concurrency());
}

Status parallel_for(int n, int threads, const std::function<Status(int)>& fn) {
  std::atomic<int> next{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  Status first = Status::ok();
  auto work = [&] {
    for (int i = next++; i < n && !failed; i = next++) {
      Status s = fn(i);
      if (!s) {
        std::lock_guard<std::mutex> lock(mu);
        if (!failed.exchange(true)) first = std::move(s);
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::min(threads, n); ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  return first;
}

Expected<ChunkedCompile> compile_chunks(std::vector<CompileChunk> chunks, const std::string& arch,
                                        const std::string& device_key, int threads) {
  auto t0 = std::chrono::steady_clock::now();
  ChunkedCompile r;
  r.chunks = std::move(chunks);
  r.cubins.resize(r.chunks.size());
  r.threads = std::max(1, std::min<int>(threads, static_cast<int>(r.chunks.size())));
  FERRITE_RETURN_IF_ERROR(
      parallel_for(static_cast<int>(r.chunks.size()), r.threads, [&](int i) -> Status {
        FERRITE_ASSIGN_OR_RETURN(
            r.cubins[i],
            compile_to_cubin(r.chunks[i].source, arch, "kernels_" + std::to_string(i), device_key));
        return Status::ok();
      }));
  for (const CubinResult& c : r.cubins) {
    r.cache_hits += c.cache_hit ? 1 : 0;
    r.compile_seconds += c.seconds;
  }
  r.wall_seconds = since(t0);
  return r;
}

void* ModuleSet::symbol(const std::string& name) const {
  auto it = where_.find(name);
  if (it == where_.end()) return nullptr;
  return modules_[it->second.module]->symbol(it->second.name);
}

Expected<std::unique_ptr<ModuleSet>> ModuleSet::load(const CudaRuntime& rt, const ChunkedCompile& c,
                                                     const KernelSources& ks) {
  auto set = std::unique_ptr<ModuleSet>(new ModuleSet());
  std::unordered_map<std::string, size_t> module_of;
  for (size_t i = 0; i < c.chunks.size(); ++i) {
    FERRITE_ASSIGN_OR_RETURN(auto m, CubinModule::load(rt, c.cubins[i].cubin));
    set->modules_.push_back(std::move(m));
    for (const std::string& k : c.chunks[i].kernels) module_of[k] = i;
  }
  for (const auto& [name, impl] : ks.alias) {
    auto it = module_of.find(impl);
    if (it == module_of.end()) return err("cuda: kernel ", name, " is in no compiled chunk");
    set->where_[name] = Where{it->second, impl};
  }
  return set;
}

}  // namespace ferrite::cuda
