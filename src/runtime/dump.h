// `ferrite run --dump DIR`: what a compiling device made of a graph, written for people.
//
//   kernels.cpp      the generated source, headed by a map from every step (generated kernel or
//                    library call) to the ONNX nodes and op types it runs
//   fusion_plan.txt  the steps in order: kind, nodes fused, iteration shape, buffers
//   memory_plan.txt  each arena buffer: size expression, live range, in-place partner; then, per
//                    input binding the model runs with, the offsets and peak vs. sum
//   graph.txt        the IR after the passes (the printer's form)
#pragma once

#include <filesystem>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "lower/lowering.h"
#include "memory/lowered_memory.h"

namespace ferrite {

class CompileDump {
 public:
  // Writes the four files (memory_plan.txt with the symbolic part only) into `dir`, creating it.
  static Expected<std::unique_ptr<CompileDump>> write(const std::filesystem::path& dir,
                                                      const Graph& g, const LoweredGraph& lg,
                                                      const std::string& source,
                                                      const LoweredMemory& memory);

  // After LoweredMemory::begin_run: appends this binding's concrete plan to memory_plan.txt the
  // first time the binding is seen (at most kMaxBindings). Write errors are ignored: a dump
  // never fails a run.
  void on_run(const LoweredMemory& memory, const std::vector<int64_t>& symbol_values);
  static constexpr size_t kMaxBindings = 8;

 private:
  CompileDump(std::filesystem::path dir, const LoweredGraph& lg) : dir_(std::move(dir)), lg_(lg) {}

  std::filesystem::path dir_;
  const LoweredGraph& lg_;
  std::set<std::vector<int64_t>> seen_;
};

// The step-to-node map, fusion plan and memory plan texts (exposed for tests).
std::string dump_step_map(const Graph& g, const LoweredGraph& lg);
std::string dump_fusion_plan(const Graph& g, const LoweredGraph& lg);
std::string dump_memory_requests(const LoweredGraph& lg, const LoweredMemory& memory);

}  // namespace ferrite
