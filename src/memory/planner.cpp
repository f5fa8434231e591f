#include "memory/planner.h"

#include <algorithm>
#include <numeric>

#include "support/checked_math.h"

namespace ferrite {

namespace {

bool is_pow2(int64_t v) {
  return v > 0 && (v & (v - 1)) == 0;
}

int64_t align_up(int64_t v, int64_t a) {
  return (v + a - 1) & ~(a - 1);
}

// In-place chains merged into one block: one offset, live from the first member's first step to
// the last member's last step, as large as the largest member.
struct Block {
  int64_t bytes = 0;
  int64_t alignment = kArenaAlignment;
  int first = 0;
  int last = 0;
};

bool overlaps_in_time(int a_first, int a_last, int b_first, int b_last) {
  return a_first <= b_last && b_first <= a_last;
}

// The blocks whose lifetimes overlap [first, last], where `first` is some block's first step, in
// O(log n + k): those live at `first` (a segment tree over the distinct first steps; each block
// sits at the O(log n) nodes that tile its lifetime) and those that start inside (first, last]
// (blocks sorted by first step). Keeps planning near O(n log n) when few buffers are live at once,
// instead of scanning every placed block for every block.
class TimeIndex {
 public:
  explicit TimeIndex(const std::vector<Block>& blocks) : blocks_(blocks) {
    by_first_.resize(blocks.size());
    std::iota(by_first_.begin(), by_first_.end(), 0);
    std::stable_sort(by_first_.begin(), by_first_.end(),
                     [&](int a, int b) { return blocks[a].first < blocks[b].first; });
    for (int i : by_first_)
      if (times_.empty() || times_.back() != blocks[i].first) times_.push_back(blocks[i].first);
    m_ = times_.size();
    nodes_.resize(2 * m_);
    for (size_t i = 0; i < blocks.size(); ++i) {
      size_t lo = std::lower_bound(times_.begin(), times_.end(), blocks[i].first) - times_.begin();
      size_t hi = std::upper_bound(times_.begin(), times_.end(), blocks[i].last) - times_.begin();
      for (lo += m_, hi += m_; lo < hi; lo >>= 1, hi >>= 1) {
        if (lo & 1) nodes_[lo++].push_back(static_cast<int>(i));
        if (hi & 1) nodes_[--hi].push_back(static_cast<int>(i));
      }
    }
  }

  template <class F>
  void for_each_overlapping(int first, int last, F&& f) const {
    size_t leaf = std::lower_bound(times_.begin(), times_.end(), first) - times_.begin();
    if (leaf < m_ && times_[leaf] == first)
      for (size_t n = leaf + m_; n >= 1; n >>= 1)
        for (int b : nodes_[n]) f(b);
    auto lo = std::upper_bound(by_first_.begin(), by_first_.end(), first,
                               [&](int t, int b) { return t < blocks_[b].first; });
    for (; lo != by_first_.end() && blocks_[*lo].first <= last; ++lo) f(*lo);
  }

 private:
  const std::vector<Block>& blocks_;
  std::vector<int> by_first_;
  std::vector<int> times_;
  size_t m_ = 0;
  std::vector<std::vector<int>> nodes_;
};

// Places blocks in `order`; returns the offsets per block and the arena size (nullopt on
// overflow). Each block goes into the smallest gap, between the blocks already placed that are
// live at the same time, that holds it; failing that, on top of them.
std::optional<int64_t> place(const std::vector<Block>& blocks, const TimeIndex& index,
                             const std::vector<int>& order, std::vector<int64_t>& offsets) {
  offsets.assign(blocks.size(), 0);
  std::vector<char> placed(blocks.size(), 0);
  std::vector<std::pair<int64_t, int64_t>> live;  // (offset, end) of placed overlapping blocks
  int64_t arena = 0;
  for (int bi : order) {
    const Block& b = blocks[bi];
    if (b.bytes == 0) continue;  // takes no memory; offset 0 is as good as any
    live.clear();
    index.for_each_overlapping(b.first, b.last, [&](int o) {
      if (placed[o]) live.push_back({offsets[o], offsets[o] + blocks[o].bytes});
    });
    std::sort(live.begin(), live.end());
    int64_t cursor = 0;
    int64_t best = -1, best_waste = 0;
    for (const auto& [offset, end] : live) {
      int64_t at = align_up(cursor, b.alignment);
      if (at < offset && offset - at >= b.bytes) {
        int64_t waste = offset - cursor - b.bytes;
        if (best < 0 || waste < best_waste) {
          best = at;
          best_waste = waste;
        }
      }
      cursor = std::max(cursor, end);
    }
    if (best < 0) {
      if (cursor > (int64_t{1} << 60)) return std::nullopt;
      best = align_up(cursor, b.alignment);
    }
    auto end = checked_add(best, b.bytes);
    if (!end || *end > (int64_t{1} << 60)) return std::nullopt;
    offsets[bi] = best;
    placed[bi] = 1;
    arena = std::max(arena, *end);
  }
  return arena;
}

}  // namespace

Expected<MemoryPlan> plan_memory(const std::vector<MemoryRequest>& requests) {
  const int n = static_cast<int>(requests.size());
  for (int i = 0; i < n; ++i) {
    const MemoryRequest& r = requests[i];
    if (r.bytes < 0) return err("memory plan: buffer ", i, " has negative size ", r.bytes);
    if (r.first > r.last)
      return err("memory plan: buffer ", i, " dies (step ", r.last, ") before it is written (step ",
                 r.first, ")");
    if (!is_pow2(r.alignment))
      return err("memory plan: buffer ", i, " alignment ", r.alignment, " is not a power of two");
    if (r.alignment > (int64_t{1} << 30))
      return err("memory plan: buffer ", i, " alignment ", r.alignment, " is too large");
  }

  // Honour in-place hints where legal, merging chains with union-find.
  std::vector<int> parent(n), taken_by(n, -1), honoured(n, -1);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  MemoryPlan plan;
  for (int i = 0; i < n; ++i) {
    int p = requests[i].in_place_of;
    if (p < 0 || p >= n || p == i || taken_by[p] >= 0) continue;
    const MemoryRequest &src = requests[p], &dst = requests[i];
    if (src.last != dst.first || src.first > dst.first || find(p) == find(i)) continue;
    taken_by[p] = i;
    honoured[i] = p;
    parent[find(i)] = find(p);
    plan.in_place++;
  }
  std::vector<int> block_of(n, -1);
  std::vector<Block> blocks;
  for (int i = 0; i < n; ++i) {
    int root = find(i);
    if (block_of[root] < 0) {
      block_of[root] = static_cast<int>(blocks.size());
      blocks.push_back(Block{0, kArenaAlignment, requests[i].first, requests[i].last});
    }
    Block& b = blocks[block_of[root]];
    block_of[i] = block_of[root];
    b.bytes = std::max(b.bytes, requests[i].bytes);
    b.alignment = std::max(b.alignment, requests[i].alignment);
    b.first = std::min(b.first, requests[i].first);
    b.last = std::max(b.last, requests[i].last);
  }

  for (const MemoryRequest& r : requests) {
    auto t = checked_add(plan.total_bytes, r.bytes);
    if (!t) return err("memory plan: total size overflows");
    plan.total_bytes = *t;
  }
  plan.buffers = n;

  // Lower bound: the most bytes live at one step (frees at a step happen after that step).
  std::vector<std::pair<int64_t, int64_t>> events;  // (time*2 [+1 for a free], +-bytes)
  for (const Block& b : blocks) {
    events.push_back({int64_t{b.first} * 2, b.bytes});
    events.push_back({int64_t{b.last} * 2 + 1, -b.bytes});
  }
  std::sort(events.begin(), events.end());
  int64_t live = 0;
  for (const auto& e : events) {
    live += e.second;
    plan.live_peak_bytes = std::max(plan.live_peak_bytes, live);
  }

  // Greedy by size (largest first; ties: earlier, then longer lived), and greedy by lifetime
  // start as a second opinion; keep the smaller arena.
  std::vector<int> by_size(blocks.size());
  std::iota(by_size.begin(), by_size.end(), 0);
  std::sort(by_size.begin(), by_size.end(), [&](int a, int b) {
    const Block &x = blocks[a], &y = blocks[b];
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    if (x.first != y.first) return x.first < y.first;
    if (x.last != y.last) return x.last > y.last;
    return a < b;
  });
  std::vector<int> by_start = by_size;
  std::stable_sort(by_start.begin(), by_start.end(),
                   [&](int a, int b) { return blocks[a].first < blocks[b].first; });
  TimeIndex index(blocks);
  std::vector<int64_t> off_size, off_start;
  auto arena_size = place(blocks, index, by_size, off_size);
  auto arena_start = place(blocks, index, by_start, off_start);
  if (!arena_size || !arena_start) return err("memory plan: arena size overflows");
  bool use_start = *arena_start < *arena_size;
  const std::vector<int64_t>& block_offsets = use_start ? off_start : off_size;
  plan.arena_bytes = use_start ? *arena_start : *arena_size;
  plan.offsets.resize(n);
  for (int i = 0; i < n; ++i) plan.offsets[i] = block_offsets[block_of[i]];
  plan.in_place_of = std::move(honoured);
  plan.bytes.reserve(n);
  for (const MemoryRequest& r : requests) plan.bytes.push_back(r.bytes);
  return plan;
}

std::string verify_plan(const std::vector<MemoryRequest>& requests, const MemoryPlan& plan) {
  const size_t n = requests.size();
  if (plan.offsets.size() != n || plan.in_place_of.size() != n) return "plan has the wrong size";
  for (size_t i = 0; i < n; ++i) {
    const MemoryRequest& r = requests[i];
    int64_t a = std::max(r.alignment, kArenaAlignment);
    if (plan.offsets[i] < 0 || plan.offsets[i] % a != 0)
      return str_cat("buffer ", i, " offset ", plan.offsets[i], " is not aligned to ", a);
    if (plan.offsets[i] + r.bytes > plan.arena_bytes)
      return str_cat("buffer ", i, " ends past the arena");
    int p = plan.in_place_of[i];
    if (p >= 0 && (requests[p].last != r.first || plan.offsets[p] != plan.offsets[i]))
      return str_cat("buffer ", i, " is in place of ", p, " without touching lifetimes");
  }
  // Chain membership: buffers that share storage through in-place hints.
  std::vector<size_t> chain(n);
  for (size_t i = 0; i < n; ++i) {
    size_t c = i;
    while (plan.in_place_of[c] >= 0) c = static_cast<size_t>(plan.in_place_of[c]);
    chain[i] = c;
  }
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const MemoryRequest &x = requests[i], &y = requests[j];
      if (x.bytes == 0 || y.bytes == 0) continue;
      if (!overlaps_in_time(x.first, x.last, y.first, y.last)) continue;
      bool mem = plan.offsets[i] < plan.offsets[j] + y.bytes &&
                 plan.offsets[j] < plan.offsets[i] + x.bytes;
      if (!mem) continue;
      if (chain[i] == chain[j] && plan.offsets[i] == plan.offsets[j]) continue;
      return str_cat("buffers ", i, " [", x.first, ",", x.last, "] @", plan.offsets[i], "+",
                     x.bytes, " and ", j, " [", y.first, ",", y.last, "] @", plan.offsets[j], "+",
                     y.bytes, " are live together and overlap");
    }
  return "";
}

SymbolicMemoryPlanner::SymbolicMemoryPlanner(std::vector<SymbolicRequest> requests,
                                             std::vector<std::string> symbols)
    : requests_(std::move(requests)), symbols_(std::move(symbols)) {}

Expected<const MemoryPlan*> SymbolicMemoryPlanner::plan_for(const std::vector<int64_t>& values,
                                                            bool* fresh) {
  if (fresh) *fresh = false;
  if (values.size() != symbols_.size())
    return err("memory plan: ", values.size(), " symbol values for ", symbols_.size(), " symbols");
  auto it = cache_.find(values);
  if (it != cache_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second.pos);
    return &it->second.plan;
  }
  SymBindings bind;
  for (size_t i = 0; i < symbols_.size(); ++i) bind[symbols_[i]] = values[i];
  std::vector<MemoryRequest> concrete;
  concrete.reserve(requests_.size());
  for (size_t i = 0; i < requests_.size(); ++i) {
    const SymbolicRequest& r = requests_[i];
    auto bytes = r.bytes.evaluate(bind);
    if (!bytes) return err("memory plan: cannot evaluate the size ", r.bytes.to_string());
    if (*bytes < 0)
      return err("memory plan: size ", r.bytes.to_string(), " is negative (", *bytes, ")");
    concrete.push_back(MemoryRequest{*bytes, r.alignment, r.first, r.last, r.in_place_of});
  }
  FERRITE_ASSIGN_OR_RETURN(MemoryPlan plan, plan_memory(concrete));
  if (cache_.size() >= kMaxCachedPlans) {
    cache_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(values);
  auto [pos, _] = cache_.emplace(values, Entry{std::move(plan), lru_.begin()});
  computed_++;
  if (fresh) *fresh = true;
  return &pos->second.plan;
}

}  // namespace ferrite
