// GXU "compiler": the device's kernels are host code, built with the system C++ compiler
// ($GXU_CXX, default c++) into a shared object and loaded with dlopen. A real vendor would call
// its own compiler here (a Triton backend, an LLVM target, ...).
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "gxu.h"

struct fe_module_t {
  void* handle;
};

namespace gxu {

namespace {

const char* kFlags = "-std=c++17 -O2 -march=native -fPIC -shared -fno-math-errno -fopenmp-simd";

std::string cxx() {
  const char* c = std::getenv("GXU_CXX");
  return c && *c ? c : "c++";
}

thread_local std::string compile_log;

}  // namespace

const char* compiler_identity() {
  static const std::string id = [] {
    std::string version;
    if (FILE* p = popen((cxx() + " --version 2>/dev/null").c_str(), "r")) {
      char buf[256];
      if (fgets(buf, sizeof buf, p)) version = buf;
      pclose(p);
    }
    while (!version.empty() && (version.back() == '\n' || version.back() == '\r'))
      version.pop_back();
    return "gxucc 1.0 (" + cxx() + " " + kFlags + "; " + version + ")";
  }();
  return id.c_str();
}

fe_status module_compile(const char* source, size_t len, fe_module* module, const char** log) {
  if (!source || !module) return fail(kInvalidValue, "gxuModuleCompile: null argument");
  char dir_template[] = "/tmp/gxu-XXXXXX";
  const char* tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/gxu-XXXXXX";
  std::string dir_buf = tmpl;
  char* dir = mkdtemp(dir_buf.data());
  if (!dir) dir = mkdtemp(dir_template);
  if (!dir) return fail(kCompileFailed, "gxuModuleCompile: cannot create a temp dir");
  std::string d = dir, src = d + "/module.cpp", so = d + "/module.so", lg = d + "/log.txt";
  {
    std::ofstream out(src);
    out.write(source, static_cast<std::streamsize>(len));
  }
  std::string cmd = cxx() + " " + kFlags + " -o '" + so + "' '" + src + "' >'" + lg + "' 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(lg);
  std::stringstream ss;
  ss << in.rdbuf();
  compile_log = ss.str();
  if (log) *log = compile_log.c_str();
  if (rc != 0) {
    std::system(("rm -rf '" + d + "'").c_str());
    return fail(kCompileFailed, "gxuModuleCompile: compilation failed: " +
                                    compile_log.substr(0, 1500));
  }
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  std::system(("rm -rf '" + d + "'").c_str());  // stays mapped after removal
  if (!h) return fail(kCompileFailed, std::string("gxuModuleCompile: load failed: ") + dlerror());
  *module = new fe_module_t{h};
  return kSuccess;
}

fe_status module_unload(fe_module module) {
  if (!module) return fail(kModuleNotFound, "gxuModuleUnload: null module");
  dlclose(module->handle);
  delete module;
  return kSuccess;
}

fe_status module_get_function(fe_module module, const char* name, fe_function* fn) {
  if (!module || !name || !fn) return fail(kInvalidValue, "gxuModuleGetFunction: null argument");
  void* sym = dlsym(module->handle, name);
  if (!sym) return fail(kFunctionNotFound, std::string("gxuModuleGetFunction: no kernel '") + name + "'");
  *fn = reinterpret_cast<fe_function>(sym);
  return kSuccess;
}

}  // namespace gxu
