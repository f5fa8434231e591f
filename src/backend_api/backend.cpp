#include "backend_api/backend.h"

namespace ferrite {

Status BackendParts::finalize() {
  const std::string& n = properties.name;
  if (n.empty()) return err("backend: properties.name is required");
  if (!runtime) return err("backend '", n, "': a runtime is required");
  if (compiler && !dialect)
    return err("backend '", n, "': a compiler needs a codegen dialect to compile from");
  if (!heuristics) heuristics = std::make_unique<DefaultHeuristics>();
  if (properties.launch.max_grid < 1 || properties.launch.max_block < 1 ||
      properties.launch.grid_multiple < 1)
    return err("backend '", n, "': launch limits must be positive");
  return Status::ok();
}

}  // namespace ferrite
