// A Device made from a loaded plugin: the plugin's spec becomes DeviceProperties, its driver
// functions the DeviceRuntime, its module functions the KernelCompiler (behind the compile cache
// where the plugin has module_binary / module_load), its library ops (SDK 1.1) the LibraryOps
// (plugin_library.h); the grid dialect (codegen/cpp_source.h, grid_launch) generates the kernels;
// the shared executor (execute/executor.h) runs them, launching through the plugin's
// launch_kernel. A plugin without module_compile is listed but cannot prepare models.
#pragma once

#include <memory>

#include "plugin_host/plugin_loader.h"
#include "runtime/device.h"

namespace ferrite {

// Fails (as a value) when the plugin reports no device.
Expected<std::unique_ptr<Device>> make_plugin_device(std::shared_ptr<LoadedPlugin> plugin);

// The spec as ferrite's DeviceProperties (launch rules from the grid/warp fields).
DeviceProperties properties_from_spec(const fe_device_spec& spec);

}  // namespace ferrite
