#include "tune/autotuner.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>
#include <unistd.h>
#include <cstdlib>

#include "lower/kernel_ir.h"
#include "runtime/compile_cache.h"

namespace ferrite {

namespace {

int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v && p < (int64_t{1} << 62)) p <<= 1;
  return p;
}

bool same(const LaunchConfig& a, const LaunchConfig& b) {
  return a.grid == b.grid && a.block == b.block && a.rows_per_block == b.rows_per_block &&
         a.shared_bytes == b.shared_bytes;
}

}  // namespace

std::string format_launch(const LaunchConfig& c) {
  std::ostringstream os;
  os << "grid=" << c.grid << " block=" << c.block << " rows=" << c.rows_per_block
     << " shared=" << c.shared_bytes;
  return os.str();
}

std::optional<LaunchConfig> parse_launch(const std::string& text) {
  LaunchConfig c;
  long long g, b, r, s;
  if (std::sscanf(text.c_str(), "grid=%lld block=%lld rows=%lld shared=%lld", &g, &b, &r, &s) != 4)
    return std::nullopt;
  if (g < 1 || b < 1 || r < 1 || s < 0) return std::nullopt;
  c.grid = g;
  c.block = b;
  c.rows_per_block = r;
  c.shared_bytes = s;
  return c;
}

std::vector<LaunchConfig> tuning_candidates(const Kernel& k, int64_t rows, int64_t row_len,
                                            const DeviceProperties& props,
                                            const LaunchConfig& heuristic) {
  const LaunchLimits& lim = props.launch;
  std::vector<LaunchConfig> out;
  auto add = [&](LaunchConfig c) {
    if (!lim.grid_allowed(c.grid) || !lim.block_allowed(c.block)) return;
    for (const auto& o : out)
      if (same(o, c)) return;
    out.push_back(c);
  };
  add(heuristic);  // first, when it is legal
  rows = std::max<int64_t>(rows, 1);
  if (lim.max_block <= 1) {
    // Host: how many rows a pool task takes (fewer: better balance; more: less dispatch).
    for (int64_t elems : {int64_t{2048}, int64_t{8192}, int64_t{32768}, int64_t{131072}}) {
      LaunchConfig c;
      c.rows_per_block = std::max<int64_t>(1, elems / std::max<int64_t>(row_len, 1));
      c.grid = lim.clamp_grid((rows + c.rows_per_block - 1) / c.rows_per_block);
      add(c);
    }
    LaunchConfig even;  // one task per compute unit
    even.rows_per_block = std::max<int64_t>(1, (rows + props.compute_units - 1) / props.compute_units);
    even.grid = lim.clamp_grid((rows + even.rows_per_block - 1) / even.rows_per_block);
    add(even);
    return out;
  }
  // SIMT: legal block sizes (whole warps) times grids of 1..8 waves over the compute units and
  // one block per row group; every grid goes through the device's grid rules.
  std::vector<int64_t> blocks;
  int64_t warp = std::max<int64_t>(lim.warp_size, 1);
  for (int64_t pref : props.preferred_blocks)
    if (lim.block_allowed(pref)) blocks.push_back(pref);
  std::vector<int64_t> warps = lim.allowed_warps;  // exact counts, or powers of two
  if (warps.empty())
    for (int64_t w = 1; w <= 32; w *= 2) warps.push_back(w);
  for (int64_t w : warps)
    if (lim.block_allowed(w * warp) &&
        std::find(blocks.begin(), blocks.end(), w * warp) == blocks.end())
      blocks.push_back(w * warp);
  int64_t cu = std::max(1, props.compute_units);
  for (int64_t block : blocks) {
    int64_t per_block = k.is_row() ? 1 : block;
    int64_t work = k.is_row() ? rows : rows * row_len;
    int64_t full = std::max<int64_t>(1, (work + per_block - 1) / per_block);
    for (int64_t g : {cu, 2 * cu, 4 * cu, 8 * cu, full}) {
      LaunchConfig c;
      c.block = block;
      c.grid = lim.clamp_grid(std::min(g, full));
      c.rows_per_block = std::max<int64_t>(1, (rows + c.grid - 1) / c.grid);
      add(c);
    }
  }
  return out;
}

Autotuner::Autotuner(const DeviceProperties& props, bool show_progress)
    : props_(props), props_key_(props.cache_key()), show_progress_(show_progress) {}

std::string Autotuner::record_key(const Kernel& k, int64_t rows, int64_t row_len,
                                  const DeviceProperties& props) {
  CacheKey key;
  key.add("kernel", print_kernel(k));
  key.add_int("rows_bucket", pow2_ceil(rows));
  key.add_int("row_len_bucket", pow2_ceil(row_len));
  key.add("device", props.cache_key());
  key.add("kind", "tuning-v1");
  return key.hex();
}

void Autotuner::begin(int total) {
  total_ = total;
  done_ = 0;
}

void Autotuner::end() {
  if (show_progress_ && done_ > 0) std::fprintf(stderr, "\n");
  total_ = 0;
}

void Autotuner::progress(const std::string& kernel) {
  ++done_;
  if (!show_progress_ || total_ <= 0) return;
  const int width = 30;
  int filled = static_cast<int>(static_cast<int64_t>(width) * done_ / total_);
  std::fprintf(stderr, "\rtuning %s [%.*s%*s] %d/%d kernels (%d timed, %d from database) %-12s",
               props_.name.c_str(), filled, "##############################", width - filled, "",
               done_, total_, stats_.kernels_tuned, stats_.kernels_reused, kernel.c_str());
  std::fflush(stderr);
}

Expected<LaunchConfig> Autotuner::tune(const Kernel& k, int64_t rows, int64_t row_len,
                                       const LaunchConfig& heuristic, const TimeFn& time) {
  CacheKey key;
  key.add("record", record_key(k, rows, row_len, props_));
  CompileCache& db = CompileCache::global();
  auto hit = db.get(key);
  if (hit.hit()) {
    auto c = parse_launch(hit.value->payload);
    if (c && props_.launch.grid_allowed(c->grid) && props_.launch.block_allowed(c->block)) {
      // The record was tuned for the bucket; re-derive what depends on the exact row count.
      if (props_.launch.max_block > 1)
        c->rows_per_block = std::max<int64_t>(1, (rows + c->grid - 1) / c->grid);
      ++stats_.kernels_reused;
      progress(k.name);
      return *c;
    }
  }
  auto t0 = std::chrono::steady_clock::now();
  std::vector<LaunchConfig> cands = tuning_candidates(k, rows, row_len, props_, heuristic);
  LaunchConfig best = heuristic;
  double best_s = 1e30;
  for (const LaunchConfig& c : cands) {
    // Best of three after a warm-up launch: the minimum is the least noisy statistic.
    FERRITE_RETURN_IF_ERROR(time(c).status());
    double t = 1e30;
    for (int rep = 0; rep < 3; ++rep) {
      FERRITE_ASSIGN_OR_RETURN(double s, time(c));
      t = std::min(t, s);
    }
    ++stats_.configs_timed;
    if (t < best_s) {
      best_s = t;
      best = c;
    }
  }
  ++stats_.kernels_tuned;
  stats_.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  (void)db.put(key, format_launch(best), "tuning record");  // a failed write only costs a retune
  progress(k.name);
  return best;
}

}  // namespace ferrite

namespace ferrite {

namespace {
bool progress_wanted() {
  const char* v = std::getenv("FERRITE_PROGRESS");
  if (v) return std::string(v) != "0";
  return isatty(2) != 0;
}
}  // namespace

LaunchChooser::LaunchChooser(const DeviceProperties& props, const LaunchHeuristics& heuristics,
                             bool autotune)
    : props_(props), heuristics_(heuristics), autotune_(autotune) {
  if (autotune_) tuner_.emplace(props_, progress_wanted());
}

Expected<LaunchConfig> LaunchChooser::choose(size_t step, const Kernel& k, int64_t rows,
                                             int64_t row_len, bool tunable,
                                             const Autotuner::TimeFn& time) {
  auto key = std::make_tuple(step, rows, row_len);
  auto it = chosen_.find(key);
  if (it != chosen_.end()) return it->second;
  LaunchConfig c = heuristics_.choose(k, rows, row_len, props_);
  if (autotune_ && tunable) {
    FERRITE_ASSIGN_OR_RETURN(c, tuner_->tune(k, rows, row_len, c, time));
  }
  chosen_[key] = c;
  return c;
}

void LaunchChooser::begin_run(int kernel_steps) {
  if (tuner_) tuner_->begin(kernel_steps);
}

void LaunchChooser::end_run() {
  if (tuner_) tuner_->end();
}

std::optional<TuningStats> LaunchChooser::stats() const {
  if (!tuner_) return std::nullopt;
  return tuner_->stats();
}

}  // namespace ferrite
