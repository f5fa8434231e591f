// The SDK 1.1 library-ops group of a plugin (library_accepts, library_run) as the executor's
// LibraryOps: each op the spec lists (fe_device_spec.library_ops) becomes a LibraryOp whose
// accepts and run_device describe the node in plain C (fe_op_desc) and call the plugin.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "backend_api/library.h"
#include "plugin_host/plugin_loader.h"

namespace ferrite {

// Null when the plugin has no library ops (an SDK 1.0 plugin, or none listed).
std::shared_ptr<const LibraryOps> make_plugin_library(const LoadedPlugin& plugin);

// The plugin's error as text: its code's name and, where it keeps one, the detail.
std::string describe_plugin_error(const fe_device_plugin& api, fe_status code);

// Whether the spec lists (domain, op_type) as a library op ("" and "ai.onnx" are one domain).
bool plugin_lists_op(const fe_device_spec& spec, std::string_view domain, std::string_view op_type);

}  // namespace ferrite
