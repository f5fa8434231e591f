#include "backends/cuda/caching_allocator.h"

#include <algorithm>
#include <bit>

namespace ferrite::cuda {

namespace {

constexpr size_t kMinStep = 512;
constexpr size_t kMaxStep = size_t{2} << 20;

bool out_of_memory(const Status& s) {
  return s.message().find("OUT_OF_MEMORY") != std::string::npos ||
         s.message().find("out of memory") != std::string::npos;
}

}  // namespace

CachingAllocator::~CachingAllocator() {
  for (auto& [size, list] : free_)
    for (void* p : list) (void)source_.release(p);
  for (auto& [p, b] : used_) (void)source_.release(p);
}

size_t CachingAllocator::size_class(size_t bytes) {
  if (bytes <= kMinStep) return kMinStep;
  const size_t pow2 = std::bit_floor(bytes);
  const size_t step = std::clamp(pow2 / 4, kMinStep, kMaxStep);
  return (bytes + step - 1) / step * step;
}

void CachingAllocator::hand_out(void* p, size_t bytes, bool persistent) {
  used_[p] = Block{bytes, persistent};
  stats_.in_use_bytes += static_cast<int64_t>(bytes);
  stats_.peak_in_use_bytes = std::max(stats_.peak_in_use_bytes, stats_.in_use_bytes);
}

Expected<void*> CachingAllocator::from_source(size_t bytes) {
  auto p = source_.allocate(bytes);
  if (!p && out_of_memory(p.status()) && stats_.cached_bytes > 0) {
    FERRITE_RETURN_IF_ERROR(release_cached());
    p = source_.allocate(bytes);
  }
  if (!p) return p.status();
  ++stats_.source_allocs;
  stats_.reserved_bytes += static_cast<int64_t>(bytes);
  stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  return *p;
}

Status CachingAllocator::give_back(void* p, size_t bytes) {
  // The block is forgotten either way: a failed cuMemFree leaves nothing to retry with.
  stats_.reserved_bytes -= static_cast<int64_t>(bytes);
  Status s = source_.release(p);
  if (!s) {
    ++stats_.release_errors;
    return s;
  }
  ++stats_.source_releases;
  return Status::ok();
}

Expected<void*> CachingAllocator::get(size_t bytes) {
  const size_t c = size_class(bytes);
  ++stats_.requests;
  auto it = free_.lower_bound(c);
  if (it != free_.end() && it->first <= 2 * c) {
    void* p = it->second.back();
    const size_t have = it->first;
    it->second.pop_back();
    if (it->second.empty()) free_.erase(it);
    stats_.cached_bytes -= static_cast<int64_t>(have);
    ++stats_.cache_hits;
    hand_out(p, have, false);
    return p;
  }
  FERRITE_ASSIGN_OR_RETURN(void* p, from_source(c));
  hand_out(p, c, false);
  return p;
}

Expected<void*> CachingAllocator::get_fresh(size_t bytes) {
  const size_t c = size_class(bytes);
  ++stats_.requests;
  FERRITE_ASSIGN_OR_RETURN(void* p, from_source(c));
  hand_out(p, c, false);
  return p;
}

Expected<void*> CachingAllocator::get_persistent(size_t bytes) {
  const size_t n = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
  FERRITE_ASSIGN_OR_RETURN(void* p, from_source(n));
  hand_out(p, n, true);
  return p;
}

Status CachingAllocator::put(void* p) {
  auto it = used_.find(p);
  if (it == used_.end()) return err("cuda allocator: a block it did not hand out was returned");
  const Block b = it->second;
  used_.erase(it);
  stats_.in_use_bytes -= static_cast<int64_t>(b.bytes);
  if (b.persistent) return give_back(p, b.bytes);
  free_[b.bytes].push_back(p);
  stats_.cached_bytes += static_cast<int64_t>(b.bytes);
  return Status::ok();
}

Status CachingAllocator::trim(size_t keep) {
  Status first = Status::ok();
  while (stats_.cached_bytes > static_cast<int64_t>(keep) && !free_.empty()) {
    auto it = std::prev(free_.end());
    void* p = it->second.back();
    const size_t bytes = it->first;
    it->second.pop_back();
    if (it->second.empty()) free_.erase(it);
    stats_.cached_bytes -= static_cast<int64_t>(bytes);
    Status s = give_back(p, bytes);
    if (!s && first) first = s;
  }
  return first;
}

}  // namespace ferrite::cuda
