// Loop-level IR: what a generated kernel computes, independent of the device that runs it.
//
// A PointwiseKernel computes every element of one output buffer from a scalar expression DAG.
// Its iteration space is the output's (possibly symbolic) shape; loop variables are the
// symbols `__loop_0`, `__loop_1`, ... and every load addresses its input buffer with a SymExpr
// over loop variables and shape symbols. Broadcasts, transposes, slices and reshapes therefore
// cost no copies: they only change load addresses.
#pragma once

#include <string>
#include <vector>

#include "ir/shape.h"

namespace ferrite {

// Name of the loop variable for dim `i` of a kernel's iteration space.
std::string loop_var(size_t i);
bool is_loop_var(const std::string& symbol, size_t* index = nullptr);

enum class ScalarKind : uint8_t { kLoad, kConst, kUnary, kBinary, kSelect, kCast };

struct ScalarExpr {
  ScalarKind kind;
  DType dtype;        // result dtype
  std::string fn;     // kUnary / kBinary: "add", "exp", ... (see codegen's function table)
  std::vector<int> args;
  int input = -1;     // kLoad: kernel input slot
  SymExpr address;    // kLoad: element offset
  double value = 0;   // kConst
  std::vector<double> params;  // extra constants of parameterised functions (alpha, ...)
};

// A DAG of scalar expressions in creation order (arguments always precede their users).
class KernelBody {
 public:
  int load(int input, DType dtype, SymExpr address);
  int constant(DType dtype, double value);
  int unary(const std::string& fn, int a, DType dtype, std::vector<double> params = {});
  int binary(const std::string& fn, int a, int b, DType dtype);
  int select(int cond, int a, int b);
  int cast(int a, DType to);
  const std::vector<ScalarExpr>& exprs() const { return exprs_; }
  const ScalarExpr& at(int i) const { return exprs_[i]; }
  size_t size() const { return exprs_.size(); }

 private:
  int add(ScalarExpr e);
  std::vector<ScalarExpr> exprs_;
};

struct PointwiseKernel {
  std::string name;
  std::vector<Dim> shape;            // iteration space = output shape (every dim known)
  DType out_dtype = DType::kUndefined;
  KernelBody body;
  int root = -1;                     // the expression stored to the output
  std::vector<int> input_buffers;    // buffer id per input slot
  int output_buffer = -1;
  std::vector<std::string> source_nodes;  // the ONNX nodes fused into this kernel
  // Input slot whose storage the output may share (memory planning may run the kernel in place,
  // see memory/in_place.h), so code generators must not declare those two pointers non-aliasing.
  int in_place_slot = -1;
};

// Human-readable form for dumps and tests.
std::string print_kernel(const PointwiseKernel& k);

}  // namespace ferrite
