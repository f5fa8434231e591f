// Guards: what a compiled variant of a model assumes about its inputs, checked on every call.
//
// A Session compiles a graph under facts that the inputs must keep: the declared dtypes, ranks
// and static dims, consistent values of each shape symbol, the concrete sizes it specialised
// dims to (dims the model leaves unknown), and the relations shape inference assumed without
// proving them (a symbol broadcast against a static 8 must be 1 or 8). A GuardSet holds them as
// a flat vector of small structs, so a check is a few integer compares per input dim.
//
// A failed guard is one of three kinds: a violation of the declared model (an error, whatever
// was compiled), a specialised size that differs (the Session recompiles), or a violated
// assumption (an error naming the input dim; the compiled code would be wrong for it).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "ir/shape.h"

namespace ferrite {

struct Guard {
  enum class Kind : uint8_t {
    kDType,        // input's dtype == value
    kRank,         // input's rank == value
    kDim,          // input dim == value, declared by the model
    kSpecialised,  // input dim == value, chosen by the Session for a dim the model leaves unknown
    kSymbol,       // input dim binds shape symbol `slot`; every binding of it must agree
    kAssumption,   // assumptions[slot].expr is 1 or assumptions[slot].value
  };
  Kind kind;
  int input = -1;
  int dim = -1;
  int64_t value = 0;
  int slot = -1;
};

struct GuardFailure {
  enum class Action { kError, kRecompile } action;
  int guard = -1;  // index into GuardSet::guards
  std::string message;
};

class GuardSet {
 public:
  // Declared facts of the graph inputs: dtype, rank, static dims, symbol consistency. Dims the
  // model leaves unknown get no guard here; `add_specialised` / `add_symbol` cover them.
  static GuardSet for_inputs(const Graph& g);

  void add_specialised(int input, int dim, int64_t size);
  // Binds `symbol` at (input, dim).
  void add_symbol(int input, int dim, const std::string& symbol);
  // Keeps the assumptions whose symbols are all bound by input dims; returns how many.
  size_t add_assumptions(const std::vector<ShapeAssumption>& assumptions);

  // The first failure, preferring declared-model errors over recompiles over violated
  // assumptions (a recompile may drop the assumption). Inputs are in graph-input order, defined.
  std::optional<GuardFailure> check(const std::vector<Tensor>& inputs) const;

  // "input 'x' dim 1 == 37".
  std::string describe(const Guard& g) const;
  // One guard per line, for logs and dumps.
  std::string to_string() const;

  const std::vector<Guard>& guards() const { return guards_; }
  const std::vector<std::string>& input_names() const { return names_; }

 private:
  int symbol_slot(const std::string& name);

  std::vector<Guard> guards_;
  std::vector<std::string> names_;     // per input
  std::vector<std::string> declared_;  // per input: its declared type, for messages
  std::vector<std::string> symbols_;   // per slot
  std::vector<ShapeAssumption> assumptions_;
};

// A deep copy of the graph structure (constants share their immutable storage).
std::unique_ptr<Graph> copy_graph(const Graph& g);

}  // namespace ferrite
