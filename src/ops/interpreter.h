// Runs a graph node by node with the op table's reference kernels. The `reference` device (the
// oracle) is this interpreter; the control-flow kernels (If, Loop, Scan) run their subgraphs
// through it too, on every device.
#pragma once

#include <functional>
#include <unordered_map>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace ferrite {

class GraphInterpreter {
 public:
  // Called around each node (by index) of a run: the reference device's trace.
  struct Hooks {
    std::function<void(size_t)> before;
    std::function<void(size_t, const Node&)> after;
  };

  // The graph must outlive the interpreter. Construction plans value slots and last uses once;
  // run() may be called any number of times, from several threads at once.
  explicit GraphInterpreter(const Graph& g);

  // `inputs` are the graph's inputs followed by its captures (Graph::captures), in order.
  // Intermediates are freed after their last use.
  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs,
                                    const Hooks* hooks = nullptr) const;

  // A kernel's result must agree with what inference promised (dtype, rank, static dims); a
  // disagreement is a bug in ferrite (or an input the model cannot take), reported as an error.
  static Status check_inferred(const Node& node, const Value& v, const Tensor& t);

 private:
  const Graph& graph_;
  std::unordered_map<const Value*, int> slots_;
  std::vector<int> last_use_;
};

}  // namespace ferrite
