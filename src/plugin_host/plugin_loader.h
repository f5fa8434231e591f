// Finds, checks and loads device plugins (sdk/include/ferrite/device_sdk.h).
//
// Search path: every entry of $FERRITE_BACKEND_PATH (':'-separated; a folder contributes its
// *.so files, a file itself), then <folder of the running binary>/../lib/ferrite/backends (the
// install layout). A plugin is refused, with the reason recorded for `ferrite devices`, when it
// cannot be opened, lacks the entry point, was built for another SDK major version or a newer
// minor version, has a table smaller than SDK 1.0's, misses a required runtime member, or names
// a device that is already registered. A plugin of an older minor version (a smaller table) is
// loaded: ferrite works on its own full-size copies of the plugin's tables, with every member
// beyond the plugin's struct_size zero (absent).
#pragma once

#include <ferrite/device_sdk.h>

#include <memory>
#include <string>
#include <vector>

#include "support/status.h"

namespace ferrite {

struct LoadedPlugin {
  std::string path;
  void* handle = nullptr;  // never closed: devices may outlive any registry user
  // ferrite's copy of the plugin's table (api->spec points at the copy of its spec): members the
  // plugin's SDK version does not have are null / 0.
  const fe_device_plugin* api = nullptr;
  uint32_t sdk_minor = 0;  // the minor SDK version the plugin was built with
  std::shared_ptr<const fe_device_plugin> table;
  std::shared_ptr<const fe_device_spec> spec;
};

// Sizes of the SDK 1.0 tables: the smallest a plugin of this major version may declare.
size_t sdk_1_0_plugin_size();
size_t sdk_1_0_spec_size();

// Opens and checks one plugin file.
Expected<LoadedPlugin> load_plugin(const std::string& path);
// Candidate plugin files on the search path, in search order.
std::vector<std::string> plugin_search_files();

}  // namespace ferrite
