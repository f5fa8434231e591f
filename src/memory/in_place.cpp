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

}  // namespace ferrite
