// Arena memory for the intermediate buffers of a LoweredGraph.
//
// Which buffers live in the arena: intermediates (not graph inputs, constants or outputs: outputs
// go back to the user and must own their memory) that exactly one generated kernel or library
// step writes and whose dims are known, symbolically at least. Everything else, and any planned
// buffer whose actual run-time size does not fit its planned slot, gets a fresh heap tensor as
// before. A generated kernel writes in place over an input that dies at its step when
// `pointwise_in_place_ok` allows it and `mark_in_place_candidates` marked that input before code
// generation.
//
// Library kernels keep allocating through KernelContext::allocate_output; the output allocator
// installed by `output_allocator` hands them their planned arena slot (zero-filled, as
// allocate_output promises). A library kernel may also return a view of one of its inputs
// (set_output); such an output would outlive the arena slot it points into, so `adopt_output`
// copies it out.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/tensor.h"
#include "lower/lowering.h"
#include "memory/planner.h"
#include "ops/context.h"
#include "runtime/device.h"

namespace ferrite {

// One 64-byte-aligned block, grown when a run needs more and kept across runs. Its contents are
// not preserved when it grows (nothing is live between runs).
class Arena {
 public:
  Status reserve(int64_t bytes);
  int64_t capacity() const { return capacity_; }
  // A tensor over [offset, offset + bytes of dims) of the arena; keeps this block alive.
  Expected<Tensor> view(int64_t offset, DType dtype, std::vector<int64_t> dims) const;
  bool contains(const void* p) const;
  const void* address(int64_t offset) const;

 private:
  std::shared_ptr<uint8_t[]> block_;
  int64_t capacity_ = 0;
};

// The planner's requests for a lowered graph: one per intermediate buffer that exactly one step
// writes and whose size is known (symbolically at least), with lifetimes and in-place hints.
// request_of_buffer[b] is b's request or -1; buffer_of_request is the inverse; `unplanned`
// counts the intermediates left out. Devices with memory of their own (cuda, plugins) plan their
// device arenas from the same requests.
std::vector<SymbolicRequest> arena_requests(const LoweredGraph& lg,
                                            const std::vector<int>& last_use,
                                            std::vector<int>& request_of_buffer,
                                            std::vector<int>& buffer_of_request, int& unplanned);

// Where the arena of a device with memory of its own comes from (runtime or pool blocks). Every
// arena slot keeps `alignment` (a power of two). `release` is called on the old block before a
// larger one is allocated (nothing is live between runs).
struct DeviceArenaSource {
  std::function<Expected<void*>(size_t bytes)> allocate;
  std::function<Status(void* block)> release;
  int64_t alignment = kArenaAlignment;
};

class LoweredMemory {
 public:
  // `last_use[b]`: the last step that reads buffer b (-1 when none reads it; graph outputs may
  // have any value since they are never planned). With `device`, the arena is device memory from
  // that source (device_address()); without, host memory (allocate(), output_allocator()).
  LoweredMemory(const LoweredGraph& lg, const std::vector<int>& last_use,
                std::optional<DeviceArenaSource> device = std::nullopt);
  ~LoweredMemory();
  LoweredMemory(const LoweredMemory&) = delete;
  LoweredMemory& operator=(const LoweredMemory&) = delete;

  // Device arenas: buffer b's planned slot when it has one this run and `bytes` fit, else null.
  void* device_address(int b, int64_t bytes) const;
  // The device arena block (changes when the arena grows: captured runs holding addresses in it
  // must be dropped).
  const void* device_block() const { return device_block_; }

  // Plans (or finds the cached plan) for this run's symbol values (in lg.symbols order) and, with
  // `reserve`, makes the arena large enough. Never fails: without a plan every buffer goes to the
  // heap.
  void begin_run(const std::vector<int64_t>& symbol_values, bool reserve = true);
  // Device arenas, after begin_run(values, false): either the kept arena made large enough for
  // this run's plan (reserve_plan), or a block of the caller's for this run alone (lend; at
  // least planned_bytes(), `alignment`-aligned), given back with lend(nullptr) after the run.
  Status reserve_plan();
  void lend(void* block) { lent_ = block; }
  // For this run no arena at all: device_address() answers null (the caller places each value).
  void no_arena() { no_arena_ = true; }
  int64_t planned_bytes() const { return plan_ ? plan_->arena_bytes : 0; }
  int64_t alignment() const { return device_ ? device_->alignment : kArenaAlignment; }

  // Storage for buffer `b` of (dtype, dims): its arena slot when planned and large enough, else a
  // fresh heap tensor. `zero` zero-fills either (library kernels that accumulate into their
  // output); generated kernels write every element, and an in-place slot still holds the input
  // they read.
  Expected<Tensor> allocate(int b, DType dtype, std::vector<int64_t> dims, bool zero);

  // The allocator for a library step's KernelContext (outputs in `step_outputs` order).
  KernelContext::OutputAllocator output_allocator(const std::vector<int>& step_outputs);

  // A library step's output `t` for buffer `b`: copied out when it points into the arena
  // anywhere but b's own slot (a view of an input, whose slot is reused once the input dies).
  // The copy is an allocation the size of the output: its failure is returned.
  Expected<Tensor> adopt_output(int b, Tensor t);

  // Whether buffer b has an arena slot.
  bool planned(int b) const { return request_of_buffer_[b] >= 0; }
  MemoryStats stats() const { return stats_; }
  size_t cached_plans() const { return planner_.cached_plans(); }
  // For dumps: the planner's requests (request r holds buffer `buffer_of_request(r)`) and this
  // run's plan (null when everything went to the heap).
  const std::vector<SymbolicRequest>& requests() const { return planner_.requests(); }
  int buffer_of_request(size_t r) const { return buffer_of_request_[r]; }
  const MemoryPlan* current_plan() const { return plan_; }

 private:
  std::string binding_text(const std::vector<int64_t>& values) const;
  Status reserve(int64_t bytes);

  const LoweredGraph& lg_;
  std::vector<int> request_of_buffer_;
  std::vector<int> buffer_of_request_;
  int unplanned_ = 0;
  SymbolicMemoryPlanner planner_;
  Arena arena_;
  std::optional<DeviceArenaSource> device_;
  void* device_block_ = nullptr;
  void* lent_ = nullptr;   // the caller's block for this run (lend)
  bool no_arena_ = false;  // this run places its values itself (no_arena)
  int64_t device_capacity_ = 0;
  bool disabled_ = false;             // FERRITE_MEMORY_PLAN=off
  const MemoryPlan* plan_ = nullptr;  // this run's; null: everything on the heap
  MemoryStats stats_;
};

}  // namespace ferrite
