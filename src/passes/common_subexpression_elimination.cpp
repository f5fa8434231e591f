// common-subexpression-elimination: merges nodes that compute the same op with the same attributes
// on the same inputs, and initializers with identical contents (so that their users can merge).
// Values a subgraph reads are inputs of its node (captures), so merging their producers is safe.
#include <cstring>
#include <map>

#include "passes/pass.h"

namespace ferrite {

namespace {

std::string tensor_key(const Tensor& t) {
  std::string k = t.type_string() + ":";
  k.append(static_cast<const char*>(t.raw()), t.nbytes());
  return k;
}

std::string node_key(const Node& n) {
  std::string k = n.domain + "." + n.op_type + "@" + std::to_string(n.opset) + "(";
  for (const Value* v : n.inputs)
    k += (v ? std::to_string(reinterpret_cast<uintptr_t>(v)) : "_") + ",";
  k += ")" + std::to_string(n.outputs.size()) + "{";
  for (const auto& [name, a] : n.attrs)
    k += name + "=" + (a.type() == AttrType::kTensor ? tensor_key(a.t()) : a.to_string()) + ";";
  return k + "}";
}

class CommonSubexpressionElimination : public Pass {
 public:
  std::string name() const override { return "common-subexpression-elimination"; }
  Expected<bool> run(Graph& g) override {
    bool changed = false;
    // Identical small initializers first (large ones are rarely duplicated and costly to hash).
    std::map<std::string, Value*> inits;
    for (Value* v : std::vector<Value*>(g.initializers())) {
      if (v->constant->nbytes() > (1 << 16)) continue;
      auto [it, inserted] = inits.emplace(tensor_key(*v->constant), v);
      if (!inserted && g.replace_all_uses(v, it->second)) changed = true;
    }
    std::map<std::string, Node*> seen;
    std::vector<const Node*> dead;
    for (auto& n : g.nodes()) {
      // Subgraph bodies are left alone: two control-flow nodes merge only if their bodies are
      // the same, which the attributes' one-line form does not show.
      if (n->outputs.empty() || !n->subgraphs().empty()) continue;
      auto [it, inserted] = seen.emplace(node_key(*n), n.get());
      if (inserted) continue;
      Node* keep = it->second;
      bool all = true;
      for (size_t i = 0; i < n->outputs.size(); ++i) {
        Value* a = n->outputs[i];
        Value* b = keep->outputs[i];
        if (!a) continue;
        if (b && g.replace_all_uses(a, b))
          changed = true;
        else
          all = false;
      }
      if (all) dead.push_back(n.get());
    }
    g.erase_nodes(dead);
    g.compact();
    return changed;
  }
};
}  // namespace

FERRITE_REGISTER_PASSES(common_subexpression_elimination) {
  r.add({"common-subexpression-elimination",
         "merge nodes computing the same op on the same inputs, and duplicate constants",
         [] { return std::make_unique<CommonSubexpressionElimination>(); },
         {{Stage::kSimplify, 40}}});
}

}  // namespace ferrite
