// Finds, checks and loads device plugins (sdk/include/ferrite/device_sdk.h).
//
// Search path: every entry of $FERRITE_BACKEND_PATH (':'-separated; a folder contributes its
// *.so files, a file itself), then <folder of the running binary>/../lib/ferrite/backends (the
// install layout). A plugin is refused, with the reason recorded for `ferrite devices`, when it
// cannot be opened, lacks the entry point, was built for another SDK major version or a newer
// minor version, has a table smaller than this SDK's, misses a required runtime member, or names
// a device that is already registered.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <ferrite/device_sdk.h>

#include "support/status.h"

namespace ferrite {

struct LoadedPlugin {
  std::string path;
  void* handle = nullptr;  // never closed: devices may outlive any registry user
  const fe_device_plugin* api = nullptr;
};

// Opens and checks one plugin file.
Expected<LoadedPlugin> load_plugin(const std::string& path);
// Candidate plugin files on the search path, in search order.
std::vector<std::string> plugin_search_files();

}  // namespace ferrite
