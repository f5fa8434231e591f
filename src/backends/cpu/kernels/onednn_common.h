// Shared plumbing of the oneDNN-backed library kernels: the CPU engine, per-thread streams, the
// thread count oneDNN's OpenMP runtime uses, caches of primitives (creating one JIT-compiles
// code, so it is done once per shape) and of constant weights reordered to blocked layouts.
#pragma once

#include <cstdint>
#include <dnnl.hpp>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ops/activation_epilogue.h"
#include "ops/context.h"

namespace ferrite::onednn {

using dnnl::memory;
using Dims = memory::dims;

dnnl::engine& engine();
// One stream per thread: kernels run concurrently from several sessions' threads.
dnnl::stream& stream();

// Makes oneDNN (and its sgemm) use `n` threads in the calling thread while the object lives.
// The kernels always ask for 1 and spread blocks of work over ferrite's own thread pool: the
// Debian oneDNN uses OpenMP, whose idle workers spin for milliseconds after every parallel
// region and would fight the pool's threads for the same cores (at --threads 2 that made runs
// several times slower). One pool also makes --threads N mean exactly N threads.
class ThreadScope {
 public:
  explicit ThreadScope(int n);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;

 private:
  int prev_;
};

// Cache key built from integers and short strings.
class Key {
 public:
  Key& add(int64_t v) {
    s_ += std::to_string(v);
    s_ += ',';
    return *this;
  }
  Key& add(const std::vector<int64_t>& v) {
    s_ += '[';
    for (int64_t x : v) add(x);
    s_ += ']';
    return *this;
  }
  Key& add(const std::string& v) {
    s_ += v;
    s_ += ';';
    return *this;
  }
  const std::string& str() const { return s_; }

 private:
  std::string s_;
};

// A thread-safe map from key to an immutable entry. `make` may return null (oneDNN cannot do
// this case; the caller falls back) and that answer is cached too. Entries are never evicted
// below `capacity`; past it the map starts over (shapes rarely vary that much).
template <class V>
class Cache {
 public:
  explicit Cache(size_t capacity = 4096) : capacity_(capacity) {}
  std::shared_ptr<const V> get(const std::string& key,
                               const std::function<std::shared_ptr<const V>()>& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) return it->second;
    }
    // Created outside the lock: creation can take milliseconds and other shapes need not wait.
    // Two threads may both create the same entry; the first stored wins.
    std::shared_ptr<const V> v = make();
    std::lock_guard<std::mutex> lock(mu_);
    if (map_.size() >= capacity_) map_.clear();
    return map_.emplace(key, std::move(v)).first->second;
  }

 private:
  size_t capacity_;
  std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const V>> map_;
};

// True when oneDNN picked its slow reference implementation; the kernels then prefer ferrite's.
bool is_reference_impl(const dnnl::primitive_desc_base& pd);

// Dense row-major f32 memory descriptor of `dims`.
memory::desc plain_desc(const Dims& dims);
// f32 memory descriptor of `dims` with explicit element strides.
memory::desc strided_desc(const Dims& dims, const Dims& strides);

// True when input `i` of `node` is a graph constant and `t` is its storage (not a copy).
bool is_constant_input(const Node& node, size_t i, const Tensor& t);
// Whether a GEMM may keep a reordered copy of its constant B: not when B is borrowed (a
// framework's parameter bound in place), whose copy would double the model's memory; oneDNN
// reads it in its stored layout instead.
bool packable_gemm_weight(const Node& node, size_t i, const Tensor& t);

// Scratch memory of layout `md` in this thread's buffer number `slot` (0..kScratchSlots-1), reused
// across calls: fresh allocations of activation-sized buffers cost page faults on every run. Valid
// until the next call with the same slot on this thread.
memory scratch(const memory::desc& md, int slot);
inline constexpr int kScratchSlots = 5;
// The slot for primitives' own scratchpads. Primitives are made with a user-managed scratchpad:
// oneDNN's default one is shared by all primitives, so concurrent calls from the pool's threads
// would corrupt each other's.
inline constexpr int kScratchpadSlot = 4;

// Attributes every primitive here is created with (user scratchpad).
dnnl::primitive_attr base_attr();

// Runs `prim` on this thread's stream with `args` plus a scratchpad of `scratchpad_md` (its
// primitive descriptor's scratchpad_desc()), and waits.
void execute(const dnnl::primitive& prim, const memory::desc& scratchpad_md,
             std::unordered_map<int, memory> args);

// The data at `ptr` (laid out as `have`) as a oneDNN memory in layout `want`. With `owner` (the
// graph constant `ptr` points into) the reordered copy is cached, keyed by the address; the cache
// keeps the owner's storage alive, so the address cannot be reused by another tensor. Otherwise
// the data is reordered into this thread's scratch buffer `slot`.
memory operand(const Tensor* owner, const void* ptr, const memory::desc& have,
               const memory::desc& want, int slot);

// Copies `src` into `dst` (same logical dims, any layouts) with a cached reorder primitive.
void reorder(const memory& src, const memory& dst);

// A memory object over existing data (no copy).
memory wrap(const memory::desc& md, const void* ptr);

// Runs the op table's reference kernel for the node (the fallback for cases the library kernels
// leave alone after `accepts`, e.g. shapes oneDNN rejects).
Status run_reference(KernelContext& ctx);

// Whether oneDNN's eltwise post-ops compute `a` as the op defines it, and appends them: the
// scalar-function table's oneDNN mapping (ScalarFunction::onednn). Exact up to rounding
// (hard_swish associates differently). Rows whose post-op turns NaN into a bound (relu, clip,
// hard_sigmoid: oneDNN's max / min) are never fused; the caller's loop (apply_epilogue) runs them,
// as it does rows whose own loop is the faster (ScalarFunction::epilogue_loop_faster: SiLU).
bool can_fuse_activation(const Activation& a);
void append_activation(dnnl::post_ops& po, const Activation& a);

// y[i] = act(y[i] + res[i]) (res may be null) for i < n: the epilogue steps a library call did
// not take, in the reference kernels' formulas.
void apply_epilogue(float* y, const float* res, int64_t n, const Activation& a);

// f32 dtype of input `i` of the node, when known.
bool input_is_f32(const Node& node, size_t i);

}  // namespace ferrite::onednn
