#include "memory/in_place.h"

namespace ferrite {

bool pointwise_in_place_ok(const PointwiseKernel& k, int buffer) {
  // Row kernels read a row in several phases before storing it; only pointwise kernels qualify.
  if (k.is_row()) return false;
  // The store index: row-major position of the loop variables in the output.
  SymExpr store(0), stride(1);
  for (size_t d = k.shape.size(); d-- > 0;) {
    if (!k.shape[d].is_known()) return false;
    store = store + SymExpr::symbol(loop_var(d)) * stride;
    stride = stride * k.shape[d].expr();
  }
  bool loaded = false;
  for (const ScalarExpr& e : k.body.exprs()) {
    if (e.kind != ScalarKind::kLoad) continue;
    if (e.input < 0 || static_cast<size_t>(e.input) >= k.input_buffers.size()) return false;
    if (k.input_buffers[e.input] != buffer) continue;
    if (dtype_size(e.dtype) != dtype_size(k.out_dtype) || e.address != store) return false;
    loaded = true;
  }
  return loaded;
}

int mark_in_place_candidates(LoweredGraph& lg) {
  std::vector<int> last_read(lg.buffers.size(), -1);
  auto read = [&](int b, size_t step) {
    if (b >= 0 && static_cast<size_t>(b) < last_read.size()) last_read[b] = static_cast<int>(step);
  };
  for (size_t si = 0; si < lg.steps.size(); ++si) {
    const Step& s = lg.steps[si];
    if (s.kind == Step::Kind::kKernel)
      for (int b : s.kernel.input_buffers) read(b, si);
    else
      for (int b : s.inputs) read(b, si);
  }
  int marked = 0;
  for (size_t si = 0; si < lg.steps.size(); ++si) {
    Step& s = lg.steps[si];
    if (s.kind != Step::Kind::kKernel) continue;
    PointwiseKernel& k = s.kernel;
    k.in_place_slot = -1;
    if (!k.extra_outputs.empty()) continue;  // several outputs: keep every store separate
    for (size_t slot = 0; slot < k.input_buffers.size(); ++slot) {
      int b = k.input_buffers[slot];
      if (b < 0 || static_cast<size_t>(b) >= lg.buffers.size()) continue;
      if (lg.buffers[b].kind != Buffer::Kind::kIntermediate) continue;
      if (last_read[b] != static_cast<int>(si) || !pointwise_in_place_ok(k, b)) continue;
      k.in_place_slot = static_cast<int>(slot);
      marked++;
      break;
    }
  }
  return marked;
}

namespace {

// The kernel step that stores buffer b (main or horizontally fused output), or -1.
int kernel_writing(const LoweredGraph& lg, int b) {
  for (size_t si = 0; si < lg.steps.size(); ++si) {
    const Step& s = lg.steps[si];
    if (s.kind == Step::Kind::kLibrary) {
      for (int o : s.outputs)
        if (o == b) return -1;  // a library kernel allocates its own outputs
      continue;
    }
    if (s.kernel.output_buffer == b) return static_cast<int>(si);
    for (const auto& x : s.kernel.extra_outputs)
      if (x.buffer == b) return static_cast<int>(si);
  }
  return -1;
}

}  // namespace

int plan_outputs_into_inputs(LoweredGraph& lg, const std::vector<int>& requested) {
  lg.output_into_input.assign(lg.outputs.size(), -1);
  std::vector<int> last_read(lg.buffers.size(), -1);
  for (size_t si = 0; si < lg.steps.size(); ++si) {
    const Step& s = lg.steps[si];
    const std::vector<int>& ins = s.kind == Step::Kind::kKernel ? s.kernel.input_buffers : s.inputs;
    for (int b : ins)
      if (b >= 0 && static_cast<size_t>(b) < last_read.size()) last_read[b] = static_cast<int>(si);
  }
  // A buffer that is returned twice, or an input that is also returned, would be seen through
  // two names: those stay copies.
  std::vector<int> returned(lg.buffers.size(), 0);
  for (int b : lg.outputs)
    if (b >= 0) ++returned[b];
  std::vector<char> target(lg.inputs.size(), 0);
  int planned = 0;
  for (size_t j = 0; j < lg.outputs.size() && j < requested.size(); ++j) {
    const int i = requested[j];
    if (i < 0 || static_cast<size_t>(i) >= lg.inputs.size() || target[i]) continue;
    const int ob = lg.outputs[j], ib = lg.inputs[i];
    if (ob < 0 || ib < 0 || ob == ib || returned[ob] != 1 || returned[ib] != 0) continue;
    const Buffer& out = lg.buffers[ob];
    const Buffer& in = lg.buffers[ib];
    if (out.kind != Buffer::Kind::kOutput || out.dtype != in.dtype) continue;
    const int w = kernel_writing(lg, ob);
    if (w < 0) continue;
    Kernel& k = lg.steps[w].kernel;
    // Of a multi-tensor kernel, the segment storing the output; no other segment may read the
    // input (segments run in any order).
    const Kernel* seg = k.segments.empty() ? &k : nullptr;
    bool other_reads = false;
    for (const Kernel& s : k.segments) {
      bool stores = s.output_buffer == ob;
      for (const auto& x : s.extra_outputs) stores = stores || x.buffer == ob;
      if (stores) {
        seg = &s;
      } else {
        for (int b : s.input_buffers) other_reads = other_reads || b == ib;
      }
    }
    if (!seg || other_reads || seg->is_row() || last_read[ib] > w) continue;
    if (last_read[ib] == w && !pointwise_in_place_ok(*seg, ib)) continue;
    k.writes_input = true;
    lg.output_into_input[j] = i;
    target[i] = 1;
    ++planned;
  }
  return planned;
}

}  // namespace ferrite
