// Memory planning: places the intermediate buffers of a step list into one arena so that buffers
// whose lifetimes do not overlap share memory.
//
// A buffer is live from the step that writes it to the last step that reads it (inclusive), so a
// step's inputs and its output are live at the same time and never share memory, except through
// an explicit in-place hint: a buffer may take over the storage of a buffer that dies at the step
// that writes it, when the caller knows that step reads each element only at the index it
// writes (see `pointwise_in_place_ok` in memory/in_place.h).
//
// Placement is "greedy by size": buffers (in-place chains merged into one block) are placed
// largest first, each at the lowest-waste gap between the already placed blocks that are live at
// the same time (best fit), or on top of them. A second order (by lifetime start) is tried as
// well and the smaller arena wins. The lower bound is the largest sum of sizes live at any one
// step; plans usually land within a few percent of it (on the model zoo: on it, or within 0.1%).
// Cost: O(n log n + sum of k log k) for n buffers, k = buffers whose lifetimes overlap the one
// being placed; an interval index over time finds those without scanning all placed blocks.
//
// Sizes may be symbolic (batch*seq*3072*4 bytes). One compile serves every input size, but the
// best layout depends on the actual sizes (which buffer is larger can flip between shapes), so the
// layout is computed at run time for the concrete sizes and cached per binding of the shape
// symbols: repeated runs with the same shapes reuse the plan and pay only a hash lookup.
#pragma once

#include <cstdint>
#include <list>
#include <map>
#include <string>
#include <vector>

#include "ir/sym_expr.h"
#include "support/status.h"

namespace ferrite {

inline constexpr int64_t kArenaAlignment = 64;

// One buffer with a concrete size, as the planner sees it.
struct MemoryRequest {
  int64_t bytes = 0;
  int64_t alignment = kArenaAlignment;  // a power of two; raised to kArenaAlignment
  int first = 0;                        // step that writes it
  int last = 0;                         // last step that reads it (>= first)
  // In-place hint: this buffer may reuse the storage of request `in_place_of`, which must die at
  // this buffer's first step (`requests[in_place_of].last == first`). Ignored when not legal
  // (another buffer already took that storage, or the lifetimes do not touch).
  int in_place_of = -1;
};

struct MemoryPlan {
  std::vector<int64_t> offsets;  // per request, multiple of its alignment
  std::vector<int> in_place_of;  // per request: the request whose storage it took, or -1
  std::vector<int64_t> bytes;    // per request: its size
  int64_t arena_bytes = 0;       // planned peak: end of the highest block
  int64_t total_bytes = 0;       // sum of all request sizes (what a fresh buffer each would take)
  int64_t live_peak_bytes = 0;   // largest sum of sizes live at one step (a lower bound)
  int in_place = 0;              // hints honoured
  int buffers = 0;
  // Sum of intermediates over the planned peak (>= 1 when planning saves anything).
  double reuse_ratio() const {
    return arena_bytes > 0 ? static_cast<double>(total_bytes) / static_cast<double>(arena_bytes)
                           : 1.0;
  }
};

// Plans concrete requests. Errors only on invalid requests (negative sizes, inverted lifetimes,
// non-power-of-two alignment) or when the arena size would overflow.
Expected<MemoryPlan> plan_memory(const std::vector<MemoryRequest>& requests);

// Checks a plan: every offset aligned and in the arena, and no two buffers that are live at the
// same step overlap in memory unless one is the in-place successor of the other. Returns an
// empty string when valid, else a description of the first violation. O(n^2); for tests.
std::string verify_plan(const std::vector<MemoryRequest>& requests, const MemoryPlan& plan);

// A buffer whose size is an expression over shape symbols.
struct SymbolicRequest {
  SymExpr bytes;
  int64_t alignment = kArenaAlignment;
  int first = 0;
  int last = 0;
  int in_place_of = -1;
};

// Plans symbolic requests per concrete binding and caches the plans.
class SymbolicMemoryPlanner {
 public:
  // `symbols` fixes the order of the values passed to plan_for().
  SymbolicMemoryPlanner(std::vector<SymbolicRequest> requests, std::vector<std::string> symbols);

  // The plan for these symbol values (same order as `symbols`); computed on first use.
  // `fresh` (optional) is set when this call computed the plan.
  Expected<const MemoryPlan*> plan_for(const std::vector<int64_t>& values, bool* fresh = nullptr);

  size_t cached_plans() const { return cache_.size(); }
  size_t plans_computed() const { return computed_; }
  const std::vector<SymbolicRequest>& requests() const { return requests_; }
  // Plans kept at most; the least recently used is dropped beyond this (a model served with
  // many distinct sequence lengths must not grow without bound).
  static constexpr size_t kMaxCachedPlans = 64;

 private:
  std::vector<SymbolicRequest> requests_;
  std::vector<std::string> symbols_;
  using Key = std::vector<int64_t>;
  std::list<Key> lru_;  // most recent first
  struct Entry {
    MemoryPlan plan;
    std::list<Key>::iterator pos;
  };
  std::map<Key, Entry> cache_;
  size_t computed_ = 0;
};

}  // namespace ferrite
