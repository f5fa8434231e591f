// Lowering + fusion: turns a typed Graph into an ordered list of steps over buffers.
//
// Pointwise ops (arithmetic, activations, comparisons, Where, Cast, Clip...) become scalar
// expressions that are inlined into their consumer; view ops (Transpose, Expand, Slice,
// Unsqueeze, Squeeze, Reshape, Flatten) only remap load addresses. A value is *realized* into a
// buffer by a generated PointwiseKernel when it is a graph output, has several users, feeds an op
// without a lowering, or its expression grows too large. Softmax, LogSoftmax, LayerNormalization,
// Reduce* and GlobalAveragePool become row kernels (see kernel_ir.h): their input expression is
// inlined into every phase (pointwise prologues fuse), and a pointwise consumer that is their
// only user fuses into the store (epilogue). Ops without a lowering yet run their op-table kernel
// on realized, contiguous buffers (a "library" step), so every graph lowers.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/graph.h"
#include "lower/kernel_ir.h"

namespace ferrite {

struct Buffer {
  enum class Kind { kInput, kConstant, kIntermediate, kOutput } kind;
  DType dtype;
  Shape shape;                   // dims may be symbolic; unknown only after data-dependent ops
  const Value* value = nullptr;  // the graph value it holds (null for internal copies)
  std::string name;
};

struct Step {
  enum class Kind { kKernel, kLibrary } kind;
  Kernel kernel;               // kKernel
  const Node* node = nullptr;  // kLibrary: run node->schema->kernel
  std::vector<int> inputs;     // kLibrary: contiguous input buffers (-1 for omitted)
  // kLibrary: the dims each input is viewed with (a Reshape view shares its buffer); empty when
  // the dims are only known at run time (then the buffer's own dims apply).
  std::vector<std::optional<std::vector<Dim>>> input_dims;
  std::vector<int> outputs;  // kLibrary: output buffers (-1 for omitted)
};

struct LoweredGraph {
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  std::vector<int> inputs;   // buffer per graph input
  std::vector<int> outputs;  // buffer per graph output
  // Per graph output: the graph input whose memory the run writes it into (an optimizer step's
  // new parameter values, memory/in_place.h `plan_outputs_into_inputs`), or -1. Empty: none.
  std::vector<int> output_into_input;
  std::vector<std::string> symbols;  // shape symbols the kernels take, in argument order
  // Statistics for reports.
  int fused_nodes = 0;  // graph nodes folded into generated kernels
  int library_steps = 0;
  int kernels = 0;
  int row_kernels = 0;        // of `kernels`, those with reductions
  int horizontal_merges = 0;  // kernels merged into another by horizontal fusion
};

struct LoweringOptions {
  size_t max_inline_exprs = 96;  // realize an expression beyond this size
  // Merge independent pointwise kernels that share inputs (lower/horizontal_fusion.h); only for
  // devices whose dialect stores Kernel::extra_outputs.
  bool horizontal_fusion = false;
  // Lower MatMul / Gemm to generated row kernels (a K-reduction per output element, epilogues
  // fused) instead of library steps: for devices without a library GEMM (plugins).
  bool generate_matmul = false;
  // Generate kernels over bf16 / f16 buffers (loads convert to float, arithmetic is float, the
  // store rounds to the output's dtype); without it such values go to library steps. Only for
  // dialects whose prelude defines fe_bf16_to_float & co (cpu, cuda).
  bool low_precision_kernels = false;
  // The element types the device runs generated kernels over (DeviceProperties::dtypes of a
  // plugin); values of other types go to library steps. Empty: no restriction.
  std::vector<DType> kernel_dtypes;
  // Values fixed by the shape binding (computed from input dims and constants only: position
  // ids, causal masks, rotary tables built from Range) of any type stay library steps, which a
  // device-memory executor computes on the host once per binding and keeps on the device.
  // Without it only integer ones do (shape arithmetic); host devices run the others as kernels
  // on every run, which is as fast as the op table there.
  bool fixed_values_on_host = false;
};

Expected<LoweredGraph> lower_graph(const Graph& g, const LoweringOptions& opts = {});
// Ops whose result is not fixed by their inputs: random generators, and collectives (the other
// ranks' inputs count too). Never fixed by the binding (LoweringOptions::fixed_values_on_host).
bool nondeterministic(const Node& n);
std::string print_lowered(const LoweredGraph& lg);

}  // namespace ferrite
