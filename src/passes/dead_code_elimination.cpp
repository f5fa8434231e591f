// dead-code-elimination: removes nodes none of whose outputs reach a graph output, then drops
// unused initializers. One reverse sweep suffices because nodes are topologically ordered.
#include <unordered_set>

#include "passes/pass.h"

namespace ferrite {

namespace {
class DeadCodeElimination : public Pass {
 public:
  std::string name() const override { return "dead-code-elimination"; }
  Expected<bool> run(Graph& g) override {
    std::unordered_set<const Value*> live(g.outputs().begin(), g.outputs().end());
    std::vector<const Node*> dead;
    for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
      const Node& n = **it;
      bool needed = false;
      for (const Value* v : n.outputs) needed = needed || (v && live.count(v));
      if (!needed) {
        dead.push_back(&n);
        continue;
      }
      for (const Value* v : n.inputs)
        if (v) live.insert(v);
    }
    size_t before_inits = g.initializers().size();
    g.erase_nodes(dead);
    g.compact();
    return !dead.empty() || g.initializers().size() != before_inits;
  }
};
}  // namespace

FERRITE_REGISTER_PASSES(dead_code_elimination) {
  r.add({"dead-code-elimination",
         "remove nodes and initializers that no output depends on",
         [] { return std::make_unique<DeadCodeElimination>(); },
         {{Stage::kCleanup, 10}}});
}

}  // namespace ferrite
