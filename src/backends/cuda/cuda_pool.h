// A model's device memory: a caching allocator (caching_allocator.h) over cuMemAlloc/cuMemFree.
// Blocks are handed out in stream order, so reuse within a run is safe: every GPU access of a
// model is on its one stream. While a CUDA graph is captured, blocks are "owned": allocated
// fresh and not handed out again while the graph lives, because it keeps their addresses; the
// graph returns them (put) when it is dropped, after which the stream orders their reuse.
#pragma once

#include <cstdio>
#include <string>
#include <unordered_set>
#include <vector>

#include "backend_api/capabilities.h"
#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/cuda_runtime.h"
#include "runtime/device.h"

namespace ferrite::cuda {

class DriverBlocks : public BlockSource {
 public:
  explicit DriverBlocks(CudaRuntime& rt) : rt_(rt) {}
  Expected<void*> allocate(size_t bytes) override { return rt_.allocate(bytes, 256); }
  Status release(void* p) override { return rt_.release(p); }

 private:
  CudaRuntime& rt_;
};

class DevicePool : public MemoryPool {
 public:
  explicit DevicePool(CudaRuntime& rt) : source_(rt), alloc_(source_) {}

  Expected<void*> get(size_t bytes) override {
    if (!owning_) return alloc_.get(bytes);
    FERRITE_ASSIGN_OR_RETURN(void* p, get_owned(bytes));
    owned_.push_back(p);
    return p;
  }
  // A fresh block for a CUDA graph (inputs it reads, blocks of its capture); put() ignores it
  // until release_owned().
  Expected<void*> get_owned(size_t bytes) override {
    FERRITE_ASSIGN_OR_RETURN(void* p, alloc_.get_fresh(bytes));
    live_owned_.insert(p);
    return p;
  }
  // Returns the blocks of a graph that is gone (or was never instantiated).
  Status release_owned(const std::vector<void*>& blocks) override {
    Status first = Status::ok();
    for (void* p : blocks) {
      live_owned_.erase(p);
      Status s = alloc_.put(p);
      if (!s && first) first = s;
    }
    return first;
  }
  // Constants, the arena, values cached per binding: exact-sized, never cached.
  Expected<void*> get_persistent(size_t bytes) override { return alloc_.get_persistent(bytes); }
  Status put(void* p) override { return live_owned_.count(p) ? Status::ok() : alloc_.put(p); }
  // Gives idle blocks back when they exceed `keep` bytes, so that a model served with many
  // different shapes does not hold the memory of all of them (cuMemFree waits for the GPU).
  Status trim(size_t keep) override { return alloc_.trim(keep); }
  void begin_owned() override { owning_ = true; }
  // The blocks get() allocated since begin_owned(); the caller hands them to
  // release_owned() when the graph is dropped.
  std::vector<void*> end_owned() override {
    owning_ = false;
    std::vector<void*> out;
    out.swap(owned_);
    return out;
  }

  // The FERRITE_LOG=memory line.
  std::string describe(const char* when) const override {
    const DeviceMemoryStats m = stats();
    auto mib = [](int64_t b) { return static_cast<double>(b) / (1 << 20); };
    char line[320];
    std::snprintf(line, sizeof line,
                  "[memory] cuda %s: in use %.1f MiB (peak %.1f), reserved %.1f MiB (peak %.1f), "
                  "%lld driver allocations / %lld frees, %lld pooled requests (%lld cache hits)",
                  when, mib(m.in_use_bytes), mib(m.peak_in_use_bytes), mib(m.reserved_bytes),
                  mib(m.peak_reserved_bytes), static_cast<long long>(m.driver_allocs),
                  static_cast<long long>(m.driver_frees), static_cast<long long>(m.requests),
                  static_cast<long long>(m.cache_hits));
    return line;
  }

  DeviceMemoryStats stats() const override {
    const AllocatorStats& s = alloc_.stats();
    DeviceMemoryStats d;
    d.in_use_bytes = s.in_use_bytes;
    d.peak_in_use_bytes = s.peak_in_use_bytes;
    d.reserved_bytes = s.reserved_bytes;
    d.peak_reserved_bytes = s.peak_reserved_bytes;
    d.driver_allocs = s.source_allocs;
    d.driver_frees = s.source_releases;
    d.requests = s.requests;
    d.cache_hits = s.cache_hits;
    return d;
  }

 private:
  DriverBlocks source_;
  CachingAllocator alloc_;
  std::vector<void*> owned_;
  std::unordered_set<void*> live_owned_;
  bool owning_ = false;
};

}  // namespace ferrite::cuda
