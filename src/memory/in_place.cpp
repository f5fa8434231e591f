#include "memory/in_place.h"

namespace ferrite {

bool pointwise_in_place_ok(const PointwiseKernel& k, int buffer) {
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

}  // namespace ferrite
