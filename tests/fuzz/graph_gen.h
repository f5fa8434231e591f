// Decodes fuzzer bytes into a small, valid ONNX model for the cpu_differential target: a few
// elementwise, reduction, softmax, normalization, MatMul and layout ops over float32 values with
// small static shapes (optionally declared symbolically), so that almost every input imports and
// runs, and byte mutations move through the space of fusions instead of parse errors.
#pragma once

#include <onnx/onnx_pb.h>

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "runtime/session.h"

class FuzzedDataProvider;

namespace ferrite::fuzz {

struct GeneratedGraph {
  std::string model;                        // ModelProto bytes
  std::vector<Session::NamedInput> inputs;  // one concrete binding
  std::set<std::string> ops;                // op types used (they pick the tolerance)
};

// Caps that keep one execution cheap: the cpu device compiles every new graph with the host
// C++ compiler, and the reference interprets it.
inline constexpr int kMaxOps = 6;
inline constexpr int64_t kMaxElements = 1024;  // per value

// Reads the structure from `fdp` and fills the inputs from a seed it also reads.
GeneratedGraph generate_graph(FuzzedDataProvider& fdp);

}  // namespace ferrite::fuzz
