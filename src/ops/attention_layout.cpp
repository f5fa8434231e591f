#include "ops/attention_layout.h"

#include <cstring>

namespace ferrite {

Expected<AttentionLayout> attention_layout(const Node& attention) {
  AttentionLayout l;
  if (!attention.has_attr("transposed")) return l;
  const std::vector<int64_t> t = attention.attr_ints("transposed");
  if (t.size() != 4)
    return err(attention.describe(), ": transposed must have 4 entries [q, k, v, y], got ",
               t.size());
  for (size_t i = 0; i < 4; ++i) {
    if (t[i] != 0 && t[i] != 1)
      return err(attention.describe(), ": transposed entries must be 0 or 1, got ", t[i]);
    l.transposed[i] = t[i] == 1;
  }
  return l;
}

Expected<Tensor> swap_axes_1_2(const Tensor& t) {
  if (t.rank() != 4) return err("swap_axes_1_2 needs rank 4, got ", t.type_string());
  const int64_t A = t.dim(0), B = t.dim(1), C = t.dim(2), D = t.dim(3);
  FERRITE_ASSIGN_OR_RETURN(Tensor out, Tensor::create(t.dtype(), {A, C, B, D}));
  const size_t row = static_cast<size_t>(D) * dtype_size(t.dtype());
  const auto* src = static_cast<const char*>(t.raw());
  auto* dst = static_cast<char*>(out.raw());
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c)
        std::memcpy(dst + (((a * C + c) * B + b) * row), src + (((a * B + b) * C + c) * row), row);
  return out;
}

}  // namespace ferrite
