// The backend conformance suite (`ferrite cts --device NAME`): every op of the op table and a set
// of fusion patterns, generated in memory, run on a device and on `reference`, and compared with
// per-dtype tolerances. See docs/cts.md.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <variant>
#include <vector>

#include "ir/attribute.h"
#include "ir/dtype.h"
#include "ir/tensor.h"
#include "support/status.h"

namespace ferrite::cts {

// How the values of an input are drawn (seeded per case, so every run of the suite is the same).
struct ValueGen {
  enum Kind { kUniform, kInt, kBool, kValues } kind = kUniform;
  double lo = -2, hi = 2;      // kUniform: [lo, hi); kInt: integers in [lo, hi]
  double away_from_zero = 0;   // kUniform: redraw values with |v| < this (Div, Reciprocal, ...)
  std::vector<double> values;  // kValues: the exact contents (cycled when shorter)
  static ValueGen uniform(double lo, double hi, double away = 0) {
    ValueGen g;
    g.lo = lo, g.hi = hi, g.away_from_zero = away;
    return g;
  }
  static ValueGen ints(int64_t lo, int64_t hi) {
    ValueGen g;
    g.kind = kInt, g.lo = static_cast<double>(lo), g.hi = static_cast<double>(hi);
    return g;
  }
  static ValueGen boolean() {
    ValueGen g;
    g.kind = kBool;
    return g;
  }
  static ValueGen exactly(std::vector<double> v) {
    ValueGen g;
    g.kind = kValues, g.values = std::move(v);
    return g;
  }
};

// A dim of a case tensor: a number or a symbol (bound per run, see Case::runs).
using DimSpec = std::variant<int64_t, std::string>;

struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<DimSpec> dims;
  ValueGen gen;
  // An initializer (a constant of the model, like axes or weights) rather than a graph input.
  // Constants must have static dims.
  bool constant = false;
};

struct NodeSpec {
  NodeSpec() = default;
  NodeSpec(std::string op_type, std::vector<std::string> ins, std::vector<std::string> outs,
           std::map<std::string, Attribute> attributes = {}, std::string dom = "")
      : op(std::move(op_type)),
        inputs(std::move(ins)),
        outputs(std::move(outs)),
        attrs(std::move(attributes)),
        domain(std::move(dom)) {}
  std::string op;
  std::vector<std::string> inputs;  // "" = omitted optional input
  std::vector<std::string> outputs;
  std::map<std::string, Attribute> attrs;
  std::string domain;  // "" = ai.onnx, "ferrite" for internal ops
};

struct Case {
  std::string group;  // summary row: the op name (or "fusion")
  std::string name;   // unique, "Add/f32/broadcast"
  std::vector<TensorSpec> tensors;
  std::vector<NodeSpec> nodes;
  std::vector<std::string> outputs;
  int opset = 0;  // 0: from the op's schema (op cases) or 17 (fusion patterns)
  // One entry per run under the same session: symbol -> size. Symbols not bound get 3.
  std::vector<std::map<std::string, int64_t>> runs = {{}};
  // Fusion patterns compile alone; op cases of one group share one session.
  bool standalone = false;
  // Multiplies the tolerance of this case's comparisons (documented where set).
  double tol_scale = 1;
};

// The cases of one op (or why there are none).
struct OpCases {
  std::string op;  // display name, "ferrite.Attention" for internal ops
  std::vector<Case> cases;
  std::string skipped;  // non-empty: no generator, with the reason
};

// Every op of the op table, in table order, with its cases; then the fusion patterns.
std::vector<OpCases> op_cases();
std::vector<Case> fusion_cases();

// Tolerance of one comparison: |a - e| <= atol * scale + rtol * |e|, where scale is
// max(1, max |expected|) of the output (so accumulated error of large sums is allowed for).
struct Tolerance {
  double atol = 0, rtol = 0;
};
Tolerance tolerance_for(DType t, const std::string& group);
// Why `group` has a looser tolerance than its dtype's default (empty: none).
std::string tolerance_note(const std::string& group);

// The per-device list of known unsupported cases: lines `PATTERN  reason`, glob patterns over
// case names (`*`, `?`), `#` comments.
struct KnownEntry {
  std::string pattern, reason;
};
Expected<std::vector<KnownEntry>> read_known_file(const std::string& path);
const KnownEntry* match_known(const std::vector<KnownEntry>& known, const std::string& case_name);
bool glob_match(const std::string& pattern, const std::string& text);

enum class Outcome { kPass, kFail, kUnsupported, kError, kSkipped };
const char* outcome_name(Outcome o);

struct CaseResult {
  std::string group, name;
  Outcome outcome = Outcome::kPass;
  std::string detail;  // failure numbers, the error, the known-list reason
  bool known = false;  // matched the known list
  double max_abs_error = 0, max_rel_error = 0;
  int64_t first_bad_index = -1;
  std::string bad_output;
};

struct RunConfig {
  std::string device;
  std::optional<std::regex> filter;  // on case names
  std::vector<KnownEntry> known;
  bool verbose = false;
  bool progress = true;  // a progress line on stderr
};

struct SuiteResult {
  std::vector<CaseResult> cases;
  std::vector<std::pair<std::string, std::string>> skipped_ops;  // op, reason
  int sessions = 0;                                              // device sessions compiled
  double seconds = 0;
};

// Runs the selected cases. Errors only for setup problems (unknown device).
Expected<SuiteResult> run_suite(const RunConfig& cfg);

// Compares one output; fills the numbers of `r` and returns false on a mismatch.
bool compare_output(const Tensor& actual, const Tensor& expected, const Tolerance& tol,
                    CaseResult& r);

}  // namespace ferrite::cts
