#include "backends/cpu/host_compiler.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "runtime/compile_cache.h"
#include "support/cleanup.h"
#include "support/subprocess.h"

namespace ferrite {

namespace fs = std::filesystem;

namespace {

// -O2 with vectorisation: the generated loops are simple, and -O3 costs compile time for little.
// No -ffast-math: results must match the reference kernels. -fopenmp-simd honours the
// `omp simd reduction` pragmas of row kernels (a float sum does not vectorise otherwise); it
// needs no OpenMP runtime.
const char* kFlags =
    "-std=c++17 -O2 -ftree-vectorize -march=native -fPIC -shared -fno-math-errno -fopenmp-simd";

std::string compiler() {
  const char* cxx = std::getenv("FERRITE_CXX");
  return cxx && *cxx ? cxx : "c++";
}

// $FERRITE_CXX may name a launcher and a compiler ("ccache g++"): split into words, never given
// to a shell.
std::vector<std::string> compiler_command() {
  std::vector<std::string> argv = split_command(compiler());
  if (argv.empty()) argv.push_back("c++");
  return argv;
}

// The first line of `$FERRITE_CXX --version` (empty when it cannot run).
std::string compiler_version_line() {
  std::vector<std::string> argv = compiler_command();
  argv.push_back("--version");
  ProcessOptions opts;
  opts.discard_stderr = true;
  auto r = run_process(argv, opts);
  if (!r) return "";
  std::string out = r->output.substr(0, r->output.find('\n'));
  while (!out.empty() && out.back() == '\r') out.pop_back();
  return out;
}

// What -march=native compiles for: the CPU model and its feature flags.
std::string host_cpu_identity() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, id;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0 || line.rfind("flags", 0) == 0) id += line + "\n";
    if (id.find("flags") != std::string::npos && id.find("model name") != std::string::npos) break;
  }
  return id;
}

}  // namespace

std::string HostCompiler::identity() const {
  return compiler() + " " + kFlags + " (" + compiler_version_line() + ")";
}

Expected<CompiledModule> HostCompiler::compile(const std::string& source, const std::string& tag) {
  return compile_and_load(source, tag, device_key_);
}

Expected<CompiledModule> compile_and_load(const std::string& source, const std::string& tag,
                                          const std::string& extra_key) {
  auto t0 = std::chrono::steady_clock::now();
  static const std::string compiler_version = compiler_version_line();
  static const std::string cpu = host_cpu_identity();
  CompileCache& cache = CompileCache::global();
  std::string device = cpu + extra_key;
  CacheKey key = make_compile_key({source, kFlags, device, compiler_version, "so"});
  std::string cache_note;
  if (cache.enabled()) {
    auto hit = cache.get_file(key);
    if (hit.hit()) {
      auto module = SharedObjectModule::open(hit.value->path.string());
      if (module) {
        CompiledModule r;
        r.module = std::move(module).value();
        r.artifact = hit.value->path.string();
        r.cache_hit = true;
        r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        return r;
      }
      cache_note = "cached module failed to load; rebuilding: " + module.status().message();
    } else if (!hit.reason.empty()) {
      cache_note = hit.reason;
    }
  }
  FERRITE_ASSIGN_OR_RETURN(TempDirectory dir, TempDirectory::create("ferrite-"));
  fs::path src = dir / (tag + ".cpp"), so = dir / (tag + ".so");
  {
    std::ofstream out(src);
    out << source;
    out.close();
    if (!out) return err("cannot write generated source to '", src.string(), "'");
  }
  std::vector<std::string> argv = compiler_command();
  for (std::string& flag : split_command(kFlags)) argv.push_back(std::move(flag));
  for (const char* a : {"-o", so.c_str(), src.c_str()}) argv.emplace_back(a);
  ProcessOptions opts;
  opts.max_output = 2000;
  auto run = run_process(argv, opts);
  if (!run) return run.status().with_context("cannot compile generated code");
  if (!run->exited) {
    // A compiler killed by a signal (Ctrl-C reaches the whole process group) did not find an
    // error in the code: say so instead of reporting a compile failure.
    return err("interrupted: the C++ compiler (", argv[0], ") was ", run->describe(),
               " while compiling ", src.string());
  }
  if (run->exit_code != 0) {
    std::string text = run->output;
    if (text.size() >= opts.max_output) text += "...";
    for (char& c : text)
      if (c == '\n') c = ' ';
    dir.keep();  // the message names the source: leave it for whoever debugs the generator
    return err("generated code failed to compile (", src.string(), "): ", text);
  }
  std::string load_path = so.string();
  if (cache.enabled()) {
    // A cache failure never fails the compile: load the freshly built file instead.
    auto stored = cache.put_file(key, so);
    if (stored) load_path = stored->string();
    else if (cache_note.empty()) cache_note = stored.status().message();
  }
  FERRITE_ASSIGN_OR_RETURN(auto module, SharedObjectModule::open(load_path));
  CompiledModule r;
  r.module = std::move(module);
  r.artifact = load_path;
  r.cache_note = cache_note;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The loaded module stays mapped after its file is removed; keep sources with FERRITE_KEEP_SOURCE.
  if (std::getenv("FERRITE_KEEP_SOURCE")) dir.keep();
  return r;
}

}  // namespace ferrite
