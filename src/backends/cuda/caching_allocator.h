// A caching allocator of device blocks: freed blocks go back to per-size-class free lists and are
// handed out again instead of calling the driver (cuMemAlloc/cuMemFree synchronise and cost
// microseconds to milliseconds). No CUDA here: blocks come from a BlockSource, the driver in the
// cuda device (cuda_pool.h) and a fake in the unit tests.
//
// Size classes: four per power of two (at most 25% rounding), at least 512 bytes apart and at
// most 2 MiB apart, so that large blocks (the arena, big activations) round up by < 2 MiB. A
// request is served from its class or, when that list is empty, from a cached block of a larger
// class up to twice the request. Persistent blocks (constants, the arena) are exact-sized, never
// cached, and go back to the source when returned.
//
// Not thread-safe: each model owns one and uses it under its run lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

#include "support/status.h"

namespace ferrite::cuda {

class BlockSource {
 public:
  virtual ~BlockSource() = default;
  virtual Expected<void*> allocate(size_t bytes) = 0;
  virtual Status release(void* p) = 0;
};

struct AllocatorStats {
  int64_t in_use_bytes = 0;  // handed out and not returned
  int64_t peak_in_use_bytes = 0;
  int64_t reserved_bytes = 0;  // held from the source: in use + cached
  int64_t peak_reserved_bytes = 0;
  int64_t cached_bytes = 0;     // idle in the free lists
  int64_t source_allocs = 0;    // blocks taken from the source
  int64_t source_releases = 0;  // blocks given back
  int64_t requests = 0;         // get() calls (persistent ones excluded)
  int64_t cache_hits = 0;       // get() calls served from the free lists
  int64_t release_errors = 0;   // releases the source refused (the block is forgotten)
};

class CachingAllocator {
 public:
  explicit CachingAllocator(BlockSource& source) : source_(source) {}
  // Gives every block back (in use too: their owner is being destroyed).
  ~CachingAllocator();
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // The size class of a request of `bytes` (>= bytes).
  static size_t size_class(size_t bytes);

  // A block of at least `bytes`, cached or new. When the source is out of memory, the cached
  // blocks are given back and the allocation is tried once more.
  Expected<void*> get(size_t bytes);
  // A new block of exactly `bytes` (rounded to 256) that never goes to the free lists.
  Expected<void*> get_persistent(size_t bytes);
  // A new block of the size class that put() will cache: for CUDA graphs, whose blocks must not be
  // shared with later runs while the graph lives.
  Expected<void*> get_fresh(size_t bytes);
  // Returns a block from get*(): cached (class blocks) or released (persistent ones). Pointers
  // this allocator did not hand out are an error.
  Status put(void* p);
  // Gives cached blocks back to the source, largest first, until at most `keep` bytes are cached.
  Status trim(size_t keep);
  Status release_cached() { return trim(0); }

  const AllocatorStats& stats() const { return stats_; }
  bool owns(void* p) const { return used_.count(p) != 0; }

 private:
  struct Block {
    size_t bytes;
    bool persistent;
  };
  Expected<void*> from_source(size_t bytes);
  Status give_back(void* p, size_t bytes);
  void hand_out(void* p, size_t bytes, bool persistent);

  BlockSource& source_;
  std::map<size_t, std::vector<void*>> free_;  // size class -> cached blocks (LIFO)
  std::unordered_map<void*, Block> used_;
  AllocatorStats stats_;
};

}  // namespace ferrite::cuda
