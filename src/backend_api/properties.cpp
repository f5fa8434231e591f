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
  const int64_t warps = b / std::max<int64_t>(warp_size, 1);
  if (warps > max_warps_per_block) return false;
  return allowed_warps.empty() ||
         std::find(allowed_warps.begin(), allowed_warps.end(), warps) != allowed_warps.end();
}

int64_t LaunchLimits::legal_block_near(int64_t b) const {
  const int64_t warp = std::max<int64_t>(warp_size, 1);
  int64_t below = 0, above = 0;
  auto consider = [&](int64_t c) {
    if (!block_allowed(c)) return;
    if (c <= b)
      below = std::max(below, c);
    else if (above == 0 || c < above)
      above = c;
  };
  if (!allowed_warps.empty()) {
    for (int64_t w : allowed_warps) consider(w * warp);
  } else {
    // Whole warps up to the limits: the largest such block <= b, or one warp.
    int64_t top = std::min(
        max_block, max_warps_per_block > max_block / warp ? max_block : max_warps_per_block * warp);
    consider(std::max(warp, std::min(b, top) / warp * warp));
    consider(warp);
  }
  return below ? below : above;
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
     << ";warps=" << launch.max_warps_per_block <<
      [&] {
        std::string w = ";allowed_warps=";
        for (int64_t x : launch.allowed_warps) w += std::to_string(x) + ",";
        return w;
      }()
     << ";grid=" << launch.max_grid << "," << launch.grid_any_upto << "," << launch.grid_multiple
     << ";host=" << host_addressable << ";dtypes=";
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
  if (!launch.allowed_warps.empty()) {
    os << "  warps/block:   ";
    for (size_t i = 0; i < launch.allowed_warps.size(); ++i)
      os << (i ? " " : "") << launch.allowed_warps[i];
    os << "\n";
  }
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
