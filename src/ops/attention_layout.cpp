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
    if (t[i] < kHeadsBeforeSequence || t[i] > kSequenceFirst)
      return err(attention.describe(),
                 ": transposed entries must be 0 ([B, H, S, D]), 1 ([B, S, H, D]) or 2 "
                 "([S, B, H, D]), got ",
                 t[i]);
    l.transposed[i] = static_cast<int>(t[i]);
  }
  return l;
}

std::array<int, 4> logical_perm(int code) {
  switch (code) {
    case kHeadsAfterSequence:
      return {0, 2, 1, 3};
    case kSequenceFirst:
      return {1, 2, 0, 3};
    default:
      return {0, 1, 2, 3};
  }
}

std::array<int, 4> stored_perm(int code) {
  const std::array<int, 4> p = logical_perm(code);
  std::array<int, 4> inv{};
  for (int i = 0; i < 4; ++i) inv[p[i]] = i;
  return inv;
}

Expected<Tensor> permute4(const Tensor& t, const std::array<int, 4>& perm) {
  if (t.rank() != 4) return err("permute4 needs rank 4, got ", t.type_string());
  std::vector<int64_t> dims(4);
  int64_t in_stride[4];
  int64_t run = 1;
  for (int d = 3; d >= 0; --d) {
    in_stride[d] = run;
    run *= t.dim(d);
  }
  int64_t st[4];
  for (int i = 0; i < 4; ++i) {
    dims[i] = t.dim(perm[i]);
    st[i] = in_stride[perm[i]];
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor out, Tensor::create(t.dtype(), dims));
  const size_t es = dtype_size(t.dtype());
  const auto* src = static_cast<const char*>(t.raw());
  auto* dst = static_cast<char*>(out.raw());
  // The innermost dim stays innermost in every layout code: rows move whole.
  const bool rows = perm[3] == 3;
  const size_t row = rows ? static_cast<size_t>(dims[3]) * es : es;
  size_t o = 0;
  for (int64_t a = 0; a < dims[0]; ++a)
    for (int64_t b = 0; b < dims[1]; ++b)
      for (int64_t c = 0; c < dims[2]; ++c) {
        const int64_t base = a * st[0] + b * st[1] + c * st[2];
        if (rows) {
          std::memcpy(dst + o, src + base * es, row);
          o += row;
          continue;
        }
        for (int64_t d = 0; d < dims[3]; ++d, o += es)
          std::memcpy(dst + o, src + (base + d * st[3]) * es, es);
      }
  return out;
}

}  // namespace ferrite
