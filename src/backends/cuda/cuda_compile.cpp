#include "backends/cuda/cuda_compile.h"

#include <algorithm>
#include <atomic>
#include <cctype>
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
                                        const std::string& device_key, int threads,
                                        const std::string& tag) {
  auto t0 = std::chrono::steady_clock::now();
  ChunkedCompile r;
  r.chunks = std::move(chunks);
  r.cubins.resize(r.chunks.size());
  r.threads = std::max(1, std::min<int>(threads, static_cast<int>(r.chunks.size())));
  FERRITE_RETURN_IF_ERROR(
      parallel_for(static_cast<int>(r.chunks.size()), r.threads, [&](int i) -> Status {
        FERRITE_ASSIGN_OR_RETURN(
            r.cubins[i],
            compile_to_cubin(r.chunks[i].source, arch, tag + "_" + std::to_string(i), device_key));
        return Status::ok();
      }));
  for (const CubinResult& c : r.cubins) {
    r.cache_hits += c.cache_hit ? 1 : 0;
    r.compile_seconds += c.seconds;
  }
  r.wall_seconds = since(t0);
  return r;
}

namespace {

// Skips a comment or a string / character literal starting at s[i]; returns the index after it,
// or i when s[i] starts none.
size_t skip_token(const std::string& s, size_t i) {
  if (s.compare(i, 2, "//") == 0) {
    size_t e = s.find('\n', i);
    return e == std::string::npos ? s.size() : e + 1;
  }
  if (s.compare(i, 2, "/*") == 0) {
    size_t e = s.find("*/", i + 2);
    return e == std::string::npos ? s.size() : e + 2;
  }
  if (s[i] == '"' || s[i] == '\'') {
    const char q = s[i];
    size_t j = i + 1;
    while (j < s.size() && s[j] != q) j += s[j] == '\\' ? 2 : 1;
    return std::min(j + 1, s.size());
  }
  return i;
}

bool ident_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
}

struct KernelRange {
  size_t begin, end;  // [begin, end): from `extern "C"` to the closing brace
  std::string name;
};

// The top-level `extern "C" __global__` definitions of `s`.
Expected<std::vector<KernelRange>> kernel_ranges(const std::string& s) {
  static const std::string kHead = "extern \"C\" __global__";
  std::vector<KernelRange> out;
  int depth = 0;
  for (size_t i = 0; i < s.size();) {
    if (size_t j = skip_token(s, i); j != i) {
      i = j;
      continue;
    }
    if (s[i] == '{') ++depth;
    if (s[i] == '}') --depth;
    if (depth != 0 || s.compare(i, kHead.size(), kHead) != 0) {
      ++i;
      continue;
    }
    KernelRange k{i, 0, ""};
    // The name: the identifier before the first '(' that is not __launch_bounds__'s.
    size_t j = i + kHead.size();
    while (j < s.size() && k.name.empty()) {
      if (!ident_char(s[j])) {
        ++j;
        continue;
      }
      size_t e = j;
      while (e < s.size() && ident_char(s[e])) ++e;
      std::string word = s.substr(j, e - j);
      size_t n = e;
      while (n < s.size() && std::isspace(static_cast<unsigned char>(s[n]))) ++n;
      if (n < s.size() && s[n] == '(') {
        if (word != "__launch_bounds__") {
          k.name = word;
        } else {
          n = s.find(')', n);
          if (n == std::string::npos) break;
        }
      }
      j = n;
    }
    if (k.name.empty()) return err("cuda: cannot find the name of the kernel at offset ", i);
    // The body: the first '{' after the name, to its matching '}'.
    int d = 0;
    for (; j < s.size(); ++j) {
      if (size_t t = skip_token(s, j); t != j) {
        j = t - 1;
        continue;
      }
      if (s[j] == ';' && d == 0) break;  // a declaration without a body
      if (s[j] == '{') ++d;
      if (s[j] == '}' && --d == 0) break;
    }
    if (j >= s.size()) return err("cuda: unbalanced braces in kernel ", k.name);
    k.end = j + 1;
    if (s[j] == '}') out.push_back(k);
    i = k.end;
  }
  return out;
}

}  // namespace

Expected<std::vector<CompileChunk>> split_program(const std::string& source, int programs) {
  FERRITE_ASSIGN_OR_RETURN(std::vector<KernelRange> ks, kernel_ranges(source));
  const size_t n = ks.size();
  const size_t c =
      std::clamp<size_t>(static_cast<size_t>(std::max(programs, 1)), 1, std::max<size_t>(n, 1));
  std::vector<CompileChunk> out(c);
  for (size_t g = 0; g < c; ++g) {
    size_t at = 0;
    for (size_t k = 0; k < n; ++k) {
      const bool mine = k * c / std::max<size_t>(n, 1) == g;
      out[g].source += source.substr(at, (mine ? ks[k].end : ks[k].begin) - at);
      at = ks[k].end;
      if (mine) out[g].kernels.push_back(ks[k].name);
    }
    out[g].source += source.substr(at);
  }
  return out;
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

namespace ferrite::cuda {

Expected<std::unique_ptr<ModuleSet>> ModuleSet::load(const CudaRuntime& rt,
                                                     const ChunkedCompile& c) {
  KernelSources ks;
  for (const CompileChunk& ch : c.chunks)
    for (const std::string& k : ch.kernels) ks.alias[k] = k;
  return load(rt, c, ks);
}

}  // namespace ferrite::cuda
