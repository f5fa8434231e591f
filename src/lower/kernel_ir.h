// Loop-level IR: what a generated kernel computes, independent of the device that runs it.
//
// A Kernel computes one output buffer from a scalar expression DAG. Its iteration space is a
// (possibly symbolic) shape; loop variables are the symbols `__loop_0`, `__loop_1`, ... and every
// load addresses its input buffer with a SymExpr over loop variables and shape symbols.
// Broadcasts, transposes, slices and reshapes therefore cost no copies: they only change load
// addresses.
//
// Two kinds share this form:
//  - pointwise (reduce_rank == 0): the root is stored at every point of the iteration space;
//  - row (reduce_rank > 0): the trailing `reduce_rank` dims form the *row* that kReduce
//    expressions reduce over; the leading dims enumerate rows. Each kReduce expression is one
//    phase: a pass over the row accumulating its argument, whose result is a per-row value that
//    later phases and the root may use (softmax: max, then sum(exp(x - max)), then the store
//    exp(x - max) / sum). The root is stored per element of the row, or once per row when
//    `per_row` (reductions such as ReduceMean).
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ir/shape.h"

namespace ferrite {

// Name of the loop variable for dim `i` of a kernel's iteration space.
std::string loop_var(size_t i);
bool is_loop_var(const std::string& symbol, size_t* index = nullptr);

enum class ScalarKind : uint8_t {
  kLoad,
  kConst,
  kUnary,
  kBinary,
  kSelect,
  kCast,
  kSymbol,  // the integer SymExpr `address` (shape symbols, loop variables) as a value
  kReduce,  // fn "sum" | "max" | "min" of args[0] over the row; max/min propagate NaN
};

struct ScalarExpr {
  ScalarKind kind;
  DType dtype;     // result dtype (kReduce: the accumulator's)
  std::string fn;  // kUnary / kBinary / kReduce: "add", "exp", "sum"... (see codegen)
  std::vector<int> args;
  int input = -1;              // kLoad: kernel input slot
  SymExpr address;             // kLoad: element offset; kSymbol: the value
  double value = 0;            // kConst
  std::vector<double> params;  // extra constants of parameterised functions (alpha, ...)
};

// A DAG of scalar expressions in creation order (arguments always precede their users).
// Expressions are pure, so an identical expression is shared rather than added twice: emitting
// the same value twice into a kernel (a row kernel's input in each phase, converging epilogue
// users) costs nothing.
class KernelBody {
 public:
  int load(int input, DType dtype, SymExpr address);
  int constant(DType dtype, double value);
  int symbol(DType dtype, SymExpr value);
  int unary(const std::string& fn, int a, DType dtype, std::vector<double> params = {});
  int binary(const std::string& fn, int a, int b, DType dtype);
  int select(int cond, int a, int b);
  int cast(int a, DType to);
  int reduce(const std::string& fn, int a);
  const std::vector<ScalarExpr>& exprs() const { return exprs_; }
  const ScalarExpr& at(int i) const { return exprs_[i]; }
  size_t size() const { return exprs_.size(); }
  // The same DAG, position for position, with every load address and symbol value mapped by `f`
  // (for emitting variants of a kernel; adding to the result does not merge equal expressions).
  KernelBody map_addresses(const std::function<SymExpr(const SymExpr&)>& f) const;

 private:
  int add(ScalarExpr e);
  std::vector<ScalarExpr> exprs_;
  std::unordered_map<std::string, int> index_;  // expression key -> position
};

struct Kernel {
  std::string name;
  std::vector<Dim> shape;  // iteration space (every dim known)
  size_t reduce_rank = 0;  // trailing dims of `shape` forming a row; 0: pointwise
  bool per_row = false;    // row kernels: root stored once per row
  DType out_dtype = DType::kUndefined;
  KernelBody body;
  int root = -1;                   // the expression stored to the output
  std::vector<int> input_buffers;  // buffer id per input slot
  int output_buffer = -1;
  // Horizontal fusion (lower/horizontal_fusion.h): further values of a pointwise kernel stored
  // at the same index as the root, each to its own buffer (bufs after the main output).
  struct ExtraOutput {
    int root = -1;
    int buffer = -1;
    DType dtype = DType::kUndefined;
  };
  std::vector<ExtraOutput> extra_outputs;
  std::vector<std::string> source_nodes;  // the ONNX nodes fused into this kernel

  bool is_row() const { return reduce_rank > 0; }
  // Leading dims that the runtime splits across threads ("rows"): all but the last for pointwise
  // kernels, all but the reduced dims for row kernels.
  size_t outer_rank() const {
    if (is_row()) return shape.size() - reduce_rank;
    return shape.empty() ? 0 : shape.size() - 1;
  }
  // Input slot whose storage the output may share (memory planning may run the kernel in place,
  // see memory/in_place.h), so code generators must not declare those two pointers non-aliasing.
  int in_place_slot = -1;
  // An output of this kernel is stored into the memory of one of its inputs (a graph output
  // written into a graph input, memory/in_place.h `plan_outputs_into_inputs`): no pointer of the
  // kernel may be declared non-aliasing.
  bool writes_input = false;
  // A multi-tensor kernel (lower/multi_tensor.h): independent pointwise kernels over different
  // iteration spaces run by one launch. Each segment is a whole pointwise kernel; this kernel's
  // rows are the segments' rows one after another (its shape is [rows, mean row length], which
  // only the launch heuristics read), its input_buffers are the segments' inputs in segment
  // order and its outputs (output_buffer, then extra_outputs) the segments' outputs in segment
  // order. Its own body is empty.
  std::vector<Kernel> segments;
};
using PointwiseKernel = Kernel;  // the name before row kernels existed

// Human-readable form for dumps and tests.
std::string print_kernel(const Kernel& k);

}  // namespace ferrite
