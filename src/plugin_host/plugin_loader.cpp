#include "plugin_host/plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
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

// The folder of the object holding this code: libferrite.so when embedded (the C API), else the
// executable itself. An installed library finds <libdir>/ferrite/backends next to it, wherever
// the application that loads it lives.
std::string code_dir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&plugin_search_files), &info) == 0 || !info.dli_fname)
    return std::string();
  std::error_code ec;
  fs::path p = fs::weakly_canonical(info.dli_fname, ec);
  return ec ? std::string() : p.parent_path().string();
}

bool valid_name(const char* n) {
  if (!n || !*n) return false;
  for (const char* c = n; *c; ++c)
    if (!((*c >= 'a' && *c <= 'z') || (*c >= '0' && *c <= '9') || *c == '_')) return false;
  return true;
}

}  // namespace

// The 1.0 tables end where the first 1.1 member begins (minor versions only append).
size_t sdk_1_0_plugin_size() {
  return offsetof(fe_device_plugin, library_accepts);
}
size_t sdk_1_0_spec_size() {
  return offsetof(fe_device_spec, dtypes);
}

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
  // Embedded: dladdr names libferrite.so (lib/), whose backends are lib/ferrite/backends. For
  // the CLI it names the executable, whose folder is bin/: nothing new (duplicates are dropped).
  std::string lib = code_dir();
  if (!lib.empty() && lib != exe) dirs_and_files.push_back(lib + "/ferrite/backends");
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
  if (api->struct_size < sdk_1_0_plugin_size())
    return refuse("plugin table is ", api->struct_size, " bytes, SDK ", FE_SDK_VERSION_MAJOR,
                  ".0 needs at least ", sdk_1_0_plugin_size());
  if (!api->spec || api->spec->struct_size < sdk_1_0_spec_size())
    return refuse("missing or truncated device spec");
  // Copies of what the plugin has, the rest zero: an older plugin's table ends before the
  // members added since, and a newer struct_size (same minor, larger by padding) is cut.
  auto spec = std::make_shared<fe_device_spec>();
  std::memset(spec.get(), 0, sizeof(fe_device_spec));
  std::memcpy(spec.get(), api->spec,
              std::min<size_t>(api->spec->struct_size, sizeof(fe_device_spec)));
  auto table = std::make_shared<fe_device_plugin>();
  std::memset(table.get(), 0, sizeof(fe_device_plugin));
  std::memcpy(table.get(), api, std::min<size_t>(api->struct_size, sizeof(fe_device_plugin)));
  table->spec = spec.get();
  const uint32_t minor = api->sdk_minor;
  api = table.get();
  const fe_device_spec* spec_ptr = spec.get();
  if (!valid_name(spec_ptr->name))
    return refuse("device name must be [a-z0-9_]+ (got '", spec_ptr->name ? spec_ptr->name : "",
                  "')");
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
  bool any_compile =
      api->module_compile || api->module_get_function || api->launch_kernel || api->module_unload;
  bool all_compile =
      api->module_compile && api->module_get_function && api->launch_kernel && api->module_unload;
  if (any_compile && !all_compile)
    return refuse(
        "module_compile, module_unload, module_get_function and launch_kernel come "
        "as a group: provide all or none");
  if (!api->library_accepts != !api->library_run)
    return refuse("library_accepts and library_run come as a group: provide both or neither");
  if (!api->module_binary != !api->module_load)
    return refuse("module_binary and module_load come as a pair: provide both or neither");
  if (spec_ptr->dtypes_count < 0 || spec_ptr->dtypes_count > 64 ||
      (spec_ptr->dtypes_count > 0 && !spec_ptr->dtypes))
    return refuse("device spec: dtypes_count ", spec_ptr->dtypes_count, " without a list");
  if (spec_ptr->library_ops_count < 0 || spec_ptr->library_ops_count > 256 ||
      (spec_ptr->library_ops_count > 0 && !spec_ptr->library_ops))
    return refuse("device spec: library_ops_count ", spec_ptr->library_ops_count,
                  " without a list");
  if (spec_ptr->library_ops_count > 0 && !api->library_run)
    return refuse("device spec lists library ops but the plugin has no library_run");
  LoadedPlugin loaded;
  loaded.path = path;
  loaded.handle = h;
  loaded.api = api;
  loaded.sdk_minor = minor;
  loaded.table = std::move(table);
  loaded.spec = std::move(spec);
  return loaded;
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
    r.add(
        name, [shared] { return make_plugin_device(shared); }, shared->path);
  }
}

}  // namespace ferrite
