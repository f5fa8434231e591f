#include "plugin_host/plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include "plugin_host/plugin_device.h"
#include "runtime/device.h"

namespace ferrite {

namespace fs = std::filesystem;

namespace {

std::string exe_dir() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : p.parent_path().string();
}

bool valid_name(const char* n) {
  if (!n || !*n) return false;
  for (const char* c = n; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  return true;
}

}  // namespace

std::vector<std::string> plugin_search_files() {
  std::vector<std::string> dirs_and_files;
  if (const char* env = std::getenv("FERRITE_BACKEND_PATH")) {
    std::string s = env;
    size_t start = 0;
    while (start <= s.size()) {
      size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) dirs_and_files.push_back(s.substr(start, end - start));
      start = end + 1;
    }
  }
  std::string exe = exe_dir();
  if (!exe.empty()) dirs_and_files.push_back(exe + "/../lib/ferrite/backends");
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const auto& entry : dirs_and_files) {
    std::error_code ec;
    std::vector<std::string> found;
    if (fs::is_directory(entry, ec)) {
      for (const auto& f : fs::directory_iterator(entry, ec))
        if (f.path().extension() == ".so") found.push_back(f.path().string());
      std::sort(found.begin(), found.end());
    } else if (fs::exists(entry, ec)) {
      found.push_back(entry);
    }
    for (auto& f : found) {
      std::string canon = fs::weakly_canonical(f, ec).string();
      if (seen.insert(canon.empty() ? f : canon).second) files.push_back(f);
    }
  }
  return files;
}

Expected<LoadedPlugin> load_plugin(const std::string& path) {
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) return err("cannot open plugin: ", dlerror());
  auto entry = reinterpret_cast<fe_device_plugin_entry>(dlsym(h, FE_DEVICE_PLUGIN_ENTRY));
  if (!entry) {
    dlclose(h);
    return err("not a ferrite device plugin (no ", FE_DEVICE_PLUGIN_ENTRY, " entry point)");
  }
  const fe_device_plugin* api = entry();
  // The message first: its arguments may point into the plugin's memory.
  auto refuse = [&](auto&&... why) -> Expected<LoadedPlugin> {
    Status s = err(why...);
    dlclose(h);
    return s;
  };
  if (!api) return refuse("the entry point returned no plugin table");
  if (api->sdk_major != FE_SDK_VERSION_MAJOR || api->sdk_minor > FE_SDK_VERSION_MINOR)
    return refuse("built for device SDK ", api->sdk_major, ".", api->sdk_minor, ", this ferrite ",
                  "provides SDK ", FE_SDK_VERSION_MAJOR, ".", FE_SDK_VERSION_MINOR,
                  " (rebuild the plugin against this ferrite's headers)");
  if (api->struct_size < sizeof(fe_device_plugin))
    return refuse("plugin table is ", api->struct_size, " bytes, SDK ", FE_SDK_VERSION_MAJOR, ".",
                  FE_SDK_VERSION_MINOR, " needs ", sizeof(fe_device_plugin));
  const fe_device_spec* spec = api->spec;
  if (!spec || spec->struct_size < sizeof(fe_device_spec))
    return refuse("missing or truncated device spec");
  if (!valid_name(spec->name))
    return refuse("device name must be [a-z0-9_]+ (got '", spec->name ? spec->name : "", "')");
  const char* missing = !api->get_device_count ? "get_device_count"
                        : !api->set_device     ? "set_device"
                        : !api->malloc         ? "malloc"
                        : !api->free           ? "free"
                        : !api->memcpy_h2d     ? "memcpy_h2d"
                        : !api->memcpy_d2h     ? "memcpy_d2h"
                        : !api->memcpy_d2d     ? "memcpy_d2d"
                        : !api->synchronize    ? "synchronize"
                        : !api->error_string   ? "error_string"
                                               : nullptr;
  if (missing) return refuse("required runtime function '", missing, "' is missing");
  bool any_compile = api->module_compile || api->module_get_function || api->launch_kernel ||
                     api->module_unload;
  bool all_compile = api->module_compile && api->module_get_function && api->launch_kernel &&
                     api->module_unload;
  if (any_compile && !all_compile)
    return refuse("module_compile, module_unload, module_get_function and launch_kernel come "
                  "as a group: provide all or none");
  return LoadedPlugin{path, h, api};
}

void register_plugin_devices(DeviceRegistry& r) {
  for (const std::string& path : plugin_search_files()) {
    auto plugin = load_plugin(path);
    if (!plugin) {
      r.refuse(path, plugin.status().message());
      continue;
    }
    std::string name = plugin->api->spec->name;
    if (!r.origin(name).empty()) {
      r.refuse(path, "device '" + name + "' is already registered (" + r.origin(name) + ")");
      continue;
    }
    auto shared = std::make_shared<LoadedPlugin>(std::move(plugin).value());
    r.add(name, [shared] { return make_plugin_device(shared); }, shared->path);
  }
}

}  // namespace ferrite
