// GXU "compiler": the device's kernels are host code, built with the system C++ compiler
// ($GXU_CXX, default c++) into a shared object and loaded with dlopen. A real vendor would call
// its own compiler here (a Triton backend, an LLVM target, ...).
#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gxu.h"

extern char** environ;

struct fe_module_t {
  void* handle;
  std::string binary;  // the shared object's bytes: what module_binary hands out for caching
};

namespace gxu {

namespace {

const char* kFlags = "-std=c++17 -O2 -march=native -fPIC -shared -fno-math-errno -fopenmp-simd";

// $GXU_CXX may be a launcher plus a compiler ("ccache g++"): words split at spaces, no shell.
std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string w;
  for (char c : s) {
    if (c == ' ' || c == '\t') {
      if (!w.empty()) out.push_back(w);
      w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) out.push_back(w);
  return out;
}

std::vector<std::string> cxx() {
  const char* c = std::getenv("GXU_CXX");
  std::vector<std::string> argv = words(c && *c ? c : "c++");
  if (argv.empty()) argv.push_back("c++");
  return argv;
}

// What a run of the compiler came to: the wait status (or the spawn error) and its output.
struct RunResult {
  int spawn_error = 0;
  int status = 0;
  std::string output;
};

// Runs argv with posix_spawnp (no shell: paths containing quotes or `;` stay one argument),
// stdin from /dev/null, stdout (and stderr unless `quiet_stderr`) captured. The host may block
// SIGINT/SIGTERM in its threads; the child gets an empty mask and default actions.
RunResult run(const std::vector<std::string>& argv, bool quiet_stderr) {
  RunResult r;
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    r.spawn_error = errno;
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  posix_spawn_file_actions_init(&actions);
  posix_spawnattr_init(&attr);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  if (quiet_stderr)
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  else
    posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  r.spawn_error = posix_spawnp(&pid, args[0], &actions, &attr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  close(fds[1]);
  if (r.spawn_error == 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fds[0], buf, sizeof buf)) != 0) {
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;
      if (r.output.size() < 65536) r.output.append(buf, static_cast<size_t>(n));
    }
    while (waitpid(pid, &r.status, 0) < 0 && errno == EINTR) {
    }
  }
  close(fds[0]);
  return r;
}

thread_local std::string compile_log;

// A fresh temp dir, removed with everything in it when the guard goes.
struct TempDir {
  std::filesystem::path path;
  ~TempDir() {
    std::error_code e;
    if (!path.empty()) std::filesystem::remove_all(path, e);
  }
};

fe_status make_temp_dir(TempDir& dir, const char* who) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path base = fs::temp_directory_path(ec);
  if (ec || base.empty()) base = "/tmp";
  std::string buf = (base / "gxu-XXXXXX").string();
  if (!mkdtemp(buf.data()))
    return fail(kCompileFailed, std::string(who) + ": cannot create a temp dir in " +
                                    base.string() + ": " + std::strerror(errno));
  dir.path = buf;
  return kSuccess;
}

bool read_file(const std::string& path, std::string& out) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return false;
  out.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  return !in.bad();
}

}  // namespace

const char* compiler_identity() {
  static const std::string id = [] {
    std::vector<std::string> argv = cxx();
    argv.push_back("--version");
    std::string version = run(argv, true).output;
    version = version.substr(0, version.find('\n'));
    while (!version.empty() && version.back() == '\r') version.pop_back();
    std::string command;
    for (const auto& w : cxx()) command += w + " ";
    return "gxucc 1.0 (" + command + kFlags + "; " + version + ")";
  }();
  return id.c_str();
}

fe_status module_compile(const char* source, size_t len, fe_module* module, const char** log) {
  if (!source || !module) return fail(kInvalidValue, "gxuModuleCompile: null argument");
  // Removed on every return; the loaded module stays mapped after its file is gone.
  TempDir tmp;
  if (fe_status st = make_temp_dir(tmp, "gxuModuleCompile"); st != kSuccess) return st;
  const std::filesystem::path& dir = tmp.path;
  const std::string src = (dir / "module.cpp").string(), so = (dir / "module.so").string();
  {
    std::ofstream out(src, std::ios::binary);
    out.write(source, static_cast<std::streamsize>(len));
    out.close();
    if (!out) return fail(kCompileFailed, "gxuModuleCompile: cannot write " + src);
  }
  std::vector<std::string> argv = cxx();
  for (const auto& flag : words(kFlags)) argv.push_back(flag);
  for (const std::string& a : {std::string("-o"), so, src}) argv.push_back(a);
  RunResult r = run(argv, false);
  compile_log = r.output;
  if (log) *log = compile_log.c_str();
  if (r.spawn_error != 0)
    return fail(kCompileFailed,
                "gxuModuleCompile: cannot run " + argv[0] + ": " + std::strerror(r.spawn_error));
  if (WIFSIGNALED(r.status))
    return fail(kCompileFailed,
                "gxuModuleCompile: interrupted: the compiler was killed by signal " +
                    std::to_string(WTERMSIG(r.status)));
  if (!WIFEXITED(r.status) || WEXITSTATUS(r.status) != 0)
    return fail(kCompileFailed,
                "gxuModuleCompile: compilation failed: " + compile_log.substr(0, 1500));
  std::string binary;
  if (!read_file(so, binary)) return fail(kCompileFailed, "gxuModuleCompile: cannot read " + so);
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return fail(kCompileFailed, std::string("gxuModuleCompile: load failed: ") + dlerror());
  *module = new fe_module_t{h, std::move(binary)};
  return kSuccess;
}

fe_status module_binary(fe_module module, const void** data, size_t* size) {
  if (!module || !data || !size) return fail(kInvalidValue, "gxuModuleBinary: null argument");
  *data = module->binary.data();
  *size = module->binary.size();
  return kSuccess;
}

// A module from the bytes module_binary gave (ferrite's compile cache, a later process): the
// shared object is written to a temp file only long enough to load it.
fe_status module_load(const void* data, size_t size, fe_module* module) {
  if (!data || !size || !module) return fail(kInvalidValue, "gxuModuleLoad: null argument");
  TempDir tmp;
  if (fe_status st = make_temp_dir(tmp, "gxuModuleLoad"); st != kSuccess) return st;
  const std::string so = (tmp.path / "module.so").string();
  {
    std::ofstream out(so, std::ios::binary);
    out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) return fail(kCompileFailed, "gxuModuleLoad: cannot write " + so);
  }
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return fail(kCompileFailed, std::string("gxuModuleLoad: load failed: ") + dlerror());
  *module = new fe_module_t{h, std::string(static_cast<const char*>(data), size)};
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
