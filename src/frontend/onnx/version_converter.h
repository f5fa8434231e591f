// The opset version converter: models that import the default ONNX domain below opset 13 are
// upgraded at import to the opset-13 semantics the op table implements.
//
// Every op the converter accepts has its ONNX version history up to 13 written out in one table
// (version_converter.cpp); each version step is either compatible (types widened, or an optional
// attribute/input added whose default is the old behaviour) or has an adapter that rewrites the
// node (attributes that became inputs, legacy broadcasting, Softmax's 2-D coercion, ...). An op
// without a table entry, or a node an adapter cannot express, is refused as unsupported rather
// than run with the wrong semantics.
#pragma once

#include <string>
#include <vector>

#include "ir/graph.h"
#include "support/status.h"

namespace ferrite {

inline constexpr int kMinConvertibleOpset = 1;
inline constexpr int kConvertTargetOpset = 13;

// Ok when `op` (default domain) has a path from `from_opset` to the target; otherwise an
// unsupported status saying which version step is missing.
Status check_upgradable(const std::string& op, int from_opset);

// Runs over the nodes in order: each default-domain node below the target opset is adapted,
// given its schema at the target opset and inferred (adapters see the inferred types of their
// inputs), other nodes are only inferred. Afterwards the graph imports the target opset.
Status upgrade_and_infer(Graph& g);

// Ops with a table entry (for tests and documentation).
std::vector<std::string> upgradable_ops();

}  // namespace ferrite
