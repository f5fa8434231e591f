#include "backends/cpu/host_compiler.h"

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

LoadedModule::~LoadedModule() {
  if (handle_) dlclose(handle_);
}

void* LoadedModule::symbol(const std::string& name) const { return dlsym(handle_, name.c_str()); }

Expected<std::unique_ptr<LoadedModule>> LoadedModule::open(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return err("cannot load generated module '", path, "': ", dlerror());
  auto m = std::unique_ptr<LoadedModule>(new LoadedModule());
  m->handle_ = h;
  return m;
}

Expected<HostCompileResult> compile_and_load(const std::string& source, const std::string& tag) {
  auto t0 = std::chrono::steady_clock::now();
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
  const char* cxx = std::getenv("FERRITE_CXX");
  // -O2 with vectorisation: the generated loops are simple, and -O3 costs compile time for little.
  // No -ffast-math: results must match the reference kernels.
  std::string cmd = std::string(cxx && *cxx ? cxx : "c++") +
                    " -std=c++17 -O2 -ftree-vectorize -march=native -fPIC -shared -fno-math-errno"
                    " -o '" + so.string() + "' '" + src.string() + "' > '" + log.string() +
                    "' 2>&1";
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
  FERRITE_ASSIGN_OR_RETURN(auto module, LoadedModule::open(so.string()));
  HostCompileResult r;
  r.module = std::move(module);
  r.so_path = so.string();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // The loaded module stays mapped after its file is removed; keep sources with FERRITE_KEEP_SOURCE.
  if (!std::getenv("FERRITE_KEEP_SOURCE")) fs::remove_all(dir, ec);
  return r;
}

}  // namespace ferrite
