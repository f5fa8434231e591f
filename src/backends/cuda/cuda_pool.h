// Device blocks reused across runs (cuMemAlloc/cuMemFree synchronise and cost microseconds).
// Blocks are handed out in stream order, so reuse within a run is safe: every GPU access of a
// model is on its one stream. While a CUDA graph is captured, blocks are "owned": allocated
// fresh and never handed out again, because the graph keeps their addresses.
#pragma once

#include <map>
#include <vector>

#include "backends/cuda/cuda_runtime.h"

namespace ferrite::cuda {

class DevicePool {
 public:
  explicit DevicePool(CudaRuntime& rt) : rt_(rt) {}
  ~DevicePool() {
    for (auto& [size, p] : free_) rt_.free(p);
    for (auto& [p, size] : used_) rt_.free(p);
    for (void* p : owned_) rt_.free(p);
  }
  Expected<void*> get(size_t bytes) {
    bytes = (std::max<size_t>(bytes, 1) + 255) / 256 * 256;
    if (owning_) {
      FERRITE_ASSIGN_OR_RETURN(void* p, rt_.allocate(bytes, 256));
      owned_.push_back(p);
      return p;
    }
    auto it = free_.lower_bound(bytes);
    if (it != free_.end() && it->first <= 2 * bytes) {
      void* p = it->second;
      used_[p] = it->first;
      free_.erase(it);
      return p;
    }
    FERRITE_ASSIGN_OR_RETURN(void* p, rt_.allocate(bytes, 256));
    used_[p] = bytes;
    return p;
  }
  // Returns a block handed out by get() (owned blocks and other pointers are ignored).
  void put(void* p) {
    auto it = used_.find(p);
    if (it == used_.end()) return;
    free_.emplace(it->second, p);
    used_.erase(it);
  }
  // Frees the idle blocks when they exceed `keep` bytes, so that a model served with many
  // different shapes does not hold the memory of all of them (cuMemFree waits for the GPU).
  void trim(size_t keep) {
    size_t idle = 0;
    for (auto& [size, p] : free_) idle += size;
    if (idle <= keep) return;
    for (auto& [size, p] : free_) rt_.free(p);
    free_.clear();
  }
  void begin_owned() { owning_ = true; }
  // The blocks allocated since begin_owned(); the caller frees them (rt.free) when done.
  std::vector<void*> end_owned() {
    owning_ = false;
    std::vector<void*> out;
    out.swap(owned_);
    return out;
  }

 private:
  CudaRuntime& rt_;
  std::multimap<size_t, void*> free_;
  std::map<void*, size_t> used_;
  std::vector<void*> owned_;
  bool owning_ = false;
};

}  // namespace ferrite::cuda
