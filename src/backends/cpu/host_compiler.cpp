#include "backends/cpu/host_compiler.h"

#include "runtime/compile_cache.h"

#include <dlfcn.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

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

std::string first_line_of_command(const std::string& cmd) {
  std::string out;
  if (FILE* p = popen(cmd.c_str(), "r")) {
    char buf[512];
    if (fgets(buf, sizeof buf, p)) out = buf;
    pclose(p);
  }
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
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
  return compiler() + " " + kFlags + " (" +
         first_line_of_command(compiler() + " --version 2>/dev/null") + ")";
}

Expected<CompiledModule> HostCompiler::compile(const std::string& source, const std::string& tag) {
  return compile_and_load(source, tag, device_key_);
}

Expected<CompiledModule> compile_and_load(const std::string& source, const std::string& tag,
                                          const std::string& extra_key) {
  auto t0 = std::chrono::steady_clock::now();
  static const std::string compiler_version =
      first_line_of_command(compiler() + " --version 2>/dev/null");
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
  std::error_code ec;
  std::string tmpl = (fs::temp_directory_path(ec) / "ferrite-XXXXXX").string();
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) return err("cannot create a temporary directory for compilation");
  fs::path dir(buf.data());
  fs::path src = dir / (tag + ".cpp"), so = dir / (tag + ".so"), log = dir / "compile.log";
  {
    std::ofstream out(src);
    out << source;
    if (!out) return err("cannot write generated source to '", src.string(), "'");
  }
  std::string cmd = compiler() + " " + kFlags + " -o '" + so.string() + "' '" + src.string() +
                    "' > '" + log.string() + "' 2>&1";
  int rc = std::system(cmd.c_str());
  if (rc != 0) {
    std::ifstream in(log);
    std::stringstream ss;
    ss << in.rdbuf();
    std::string text = ss.str();
    if (text.size() > 2000) text = text.substr(0, 2000) + "...";
    for (char& c : text)
      if (c == '\n') c = ' ';
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
  if (!std::getenv("FERRITE_KEEP_SOURCE")) fs::remove_all(dir, ec);
  return r;
}

}  // namespace ferrite
