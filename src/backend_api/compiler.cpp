#include "backend_api/compiler.h"

#include <dlfcn.h>

namespace ferrite {

SharedObjectModule::~SharedObjectModule() {
  if (handle_) dlclose(handle_);
}

void* SharedObjectModule::symbol(const std::string& name) const {
  return dlsym(handle_, name.c_str());
}

Expected<std::unique_ptr<SharedObjectModule>> SharedObjectModule::open(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return err("cannot load module '", path, "': ", dlerror());
  auto m = std::unique_ptr<SharedObjectModule>(new SharedObjectModule());
  m->handle_ = h;
  return m;
}

}  // namespace ferrite
