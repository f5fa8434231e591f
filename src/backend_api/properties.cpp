#include "backend_api/properties.h"

#include <algorithm>
#include <sstream>

namespace ferrite {

bool LaunchLimits::grid_allowed(int64_t g) const {
  if (g < 1 || g > max_grid) return false;
  return g <= grid_any_upto || (grid_multiple > 0 && g % grid_multiple == 0);
}

bool LaunchLimits::block_allowed(int64_t b) const {
  if (b < 1 || b > max_block) return false;
  if (warp_size > 1 && b % warp_size != 0) return false;
  return b / std::max<int64_t>(warp_size, 1) <= max_warps_per_block;
}

int64_t LaunchLimits::clamp_grid(int64_t g) const {
  g = std::max<int64_t>(1, std::min(g, max_grid));
  if (grid_allowed(g)) return g;
  // Largest allowed value below g: the largest multiple of grid_multiple, else grid_any_upto.
  int64_t best = std::min(g, grid_any_upto);
  if (grid_multiple > 1) {
    int64_t m = g / grid_multiple * grid_multiple;
    if (m >= 1 && m <= max_grid) best = std::max(best, m);
  }
  return std::max<int64_t>(1, best);
}

std::string DeviceProperties::cache_key() const {
  std::ostringstream os;
  os << "name=" << name << ";kind=" << kind << ";model=" << model << ";arch=" << arch
     << ";cu=" << compute_units << ";res=" << resident_threads_per_unit
     << ";smem=" << shared_memory_per_block << ";vec=" << vector_bytes
     << ";block=" << launch.max_block << ";warp=" << launch.warp_size << ";align=" << alignment
     << ";pref=" <<
      [&] {
        std::string b;
        for (int64_t x : preferred_blocks) b += std::to_string(x) + ",";
        return b;
      }()
     << ";warps=" << launch.max_warps_per_block << ";grid=" << launch.max_grid << ","
     << launch.grid_any_upto << "," << launch.grid_multiple << ";host=" << host_addressable
     << ";dtypes=";
  for (DType d : dtypes) os << dtype_name(d) << ",";
  os << ";features=";
  for (const auto& f : features) os << f << ",";
  return os.str();
}

std::string DeviceProperties::describe() const {
  std::ostringstream os;
  os << "  kind:          " << kind << "\n";
  if (!model.empty()) os << "  model:         " << model << "\n";
  os << "  arch:          " << arch << "\n";
  os << "  compute units: " << compute_units << "\n";
  if (resident_threads_per_unit)
    os << "  resident threads per unit: " << resident_threads_per_unit << "\n";
  if (memory_bytes > 0) os << "  memory:        " << (memory_bytes >> 20) << " MiB\n";
  if (launch.max_block > 1)
    os << "  block:         up to " << launch.max_block << " threads, warp " << launch.warp_size
       << "\n";
  if (launch.grid_multiple > 1)
    os << "  grid:          <= " << launch.grid_any_upto << " or a multiple of "
       << launch.grid_multiple << "\n";
  os << "  dtypes:        ";
  for (size_t i = 0; i < dtypes.size(); ++i) os << (i ? " " : "") << dtype_name(dtypes[i]);
  os << "\n";
  if (!features.empty()) {
    os << "  features:      ";
    for (size_t i = 0; i < features.size(); ++i) os << (i ? " " : "") << features[i];
    os << "\n";
  }
  return os.str();
}

}  // namespace ferrite
