#include "lower/view_ops.h"

#include <algorithm>

namespace ferrite::lower_impl {

namespace {

IndexMap transpose_map(const Node& n, size_t rank) {
  auto perm = n.attr_ints("perm");
  if (perm.empty())
    for (int64_t i = static_cast<int64_t>(rank) - 1; i >= 0; --i) perm.push_back(i);
  return [perm](const std::vector<SymExpr>& o) {
    std::vector<SymExpr> i(o.size());
    for (size_t k = 0; k < perm.size(); ++k) i[perm[k]] = o[k];
    return i;
  };
}

std::optional<IndexMap> expand_map(const std::vector<Dim>& idims, const std::vector<Dim>& odims) {
  if (odims.size() < idims.size()) return std::nullopt;
  size_t off = odims.size() - idims.size();
  for (size_t d = 0; d < idims.size(); ++d)
    if (idims[d] != odims[off + d] && idims[d].value() != 1) return std::nullopt;
  return [idims, odims, off](const std::vector<SymExpr>& o) {
    std::vector<SymExpr> i(idims.size());
    for (size_t d = 0; d < idims.size(); ++d)
      i[d] = idims[d] == odims[off + d] ? o[off + d] : SymExpr(0);
    return i;
  };
}

// Dims of size 1 come and go; the others keep their order.
std::optional<IndexMap> squeeze_map(const Node& n, const std::vector<Dim>& idims,
                                    const std::vector<Dim>& odims) {
  std::vector<int> keep_out;  // output dim for each non-1 input dim, in order
  size_t o = 0;
  for (size_t d = 0; d < idims.size(); ++d) {
    if (n.op_type == "Squeeze" && idims[d].value() == 1 && idims.size() != odims.size()) {
      keep_out.push_back(-1);
      continue;
    }
    while (o < odims.size() && odims[o] != idims[d]) ++o;
    if (o == odims.size()) return std::nullopt;
    keep_out.push_back(static_cast<int>(o++));
  }
  return [keep_out](const std::vector<SymExpr>& out_idx) {
    std::vector<SymExpr> i;
    for (int k : keep_out) i.push_back(k < 0 ? SymExpr(0) : out_idx[k]);
    return i;
  };
}

std::optional<IndexMap> slice_map(const Node& n, const std::vector<Dim>& idims,
                                  const ConstInts& const_ints) {
  auto starts = const_ints(n, 1), ends = const_ints(n, 2);
  bool has_axes = n.inputs.size() > 3 && n.inputs[3],
       has_steps = n.inputs.size() > 4 && n.inputs[4];
  auto axes = has_axes ? const_ints(n, 3) : std::nullopt;
  auto steps = has_steps ? const_ints(n, 4) : std::nullopt;
  if (!starts || !ends || (has_axes && !axes) || (has_steps && !steps)) return std::nullopt;
  if (starts->size() != ends->size() || (axes && axes->size() != starts->size()) ||
      (steps && steps->size() != starts->size()))
    return std::nullopt;
  std::vector<SymExpr> start(idims.size(), SymExpr(0)), step(idims.size(), SymExpr(1));
  const auto rank = static_cast<int64_t>(idims.size());
  for (size_t k = 0; k < starts->size(); ++k) {
    int64_t ax = axes ? (*axes)[k] : static_cast<int64_t>(k);
    if (ax < 0) ax += rank;
    if (ax < 0 || ax >= rank) return std::nullopt;
    int64_t st = steps ? (*steps)[k] : 1;
    int64_t s = (*starts)[k];
    auto dim = idims[ax].value();
    // Static dims only: clamping a start against a symbolic dim needs a run-time min/max.
    if (!dim || st == 0 || (st < 0 && *dim == 0)) return std::nullopt;
    if (s < 0) s += *dim;
    // A negative step walks down from the start (ONNX clamps it to [0, dim - 1]): the flipped
    // filters of a convolution's input gradient.
    s = st > 0 ? std::clamp<int64_t>(s, 0, *dim) : std::clamp<int64_t>(s, 0, *dim - 1);
    start[ax] = SymExpr(s);
    step[ax] = SymExpr(st);
  }
  return [start, step](const std::vector<SymExpr>& o) {
    std::vector<SymExpr> i(o.size());
    for (size_t d = 0; d < o.size(); ++d) i[d] = start[d] + o[d] * step[d];
    return i;
  };
}

// Gather of one constant index along `axis`: the axis is fixed (scalar index: it disappears;
// an index tensor of one element: it stays with size 1). Out-of-range indices stay with the
// library op, which reports them.
std::optional<IndexMap> gather_map(const Node& n, const std::vector<Dim>& idims,
                                   const ConstInts& const_ints) {
  const Value* ind = n.input(1);
  auto index = const_ints(n, 1);
  if (!ind || !index || index->size() != 1 || !ind->type.shape.rank_known()) return std::nullopt;
  const auto rank = static_cast<int64_t>(idims.size());
  int64_t axis = n.attr_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  auto dim = idims[axis].value();
  int64_t c = (*index)[0];
  if (!dim) return std::nullopt;
  if (c < 0) c += *dim;
  if (c < 0 || c >= *dim) return std::nullopt;
  const size_t ind_rank = ind->type.shape.rank();
  const auto ax = static_cast<size_t>(axis);
  return [ax, c, ind_rank](const std::vector<SymExpr>& o) {
    std::vector<SymExpr> i(o.begin(), o.begin() + static_cast<std::ptrdiff_t>(ax));
    i.push_back(SymExpr(c));
    i.insert(i.end(), o.begin() + static_cast<std::ptrdiff_t>(ax + ind_rank), o.end());
    return i;
  };
}

// The [start, end) that Slice `n` cuts from `axis` of its input (static dim `dim`, step 1), when
// that is the only axis it cuts; nullopt otherwise.
std::optional<std::pair<int64_t, int64_t>> single_axis_cut(const Node& n, int64_t axis, int64_t dim,
                                                           const ConstInts& const_ints) {
  if (!n.domain.empty() || n.op_type != "Slice" || n.inputs.size() < 3) return std::nullopt;
  const auto starts = const_ints(n, 1), ends = const_ints(n, 2);
  const bool has_axes = n.inputs.size() > 3 && n.inputs[3],
             has_steps = n.inputs.size() > 4 && n.inputs[4];
  const auto axes = has_axes ? const_ints(n, 3) : std::nullopt;
  const auto steps = has_steps ? const_ints(n, 4) : std::nullopt;
  if (!starts || !ends || starts->size() != 1 || ends->size() != 1 || (has_axes && !axes) ||
      (has_steps && (!steps || steps->size() != 1 || (*steps)[0] != 1)))
    return std::nullopt;
  const Shape& xs = n.inputs[0]->type.shape;
  if (!xs.rank_known()) return std::nullopt;
  int64_t ax = axes ? (axes->size() == 1 ? (*axes)[0] : -1 - static_cast<int64_t>(xs.rank())) : 0;
  if (ax < 0) ax += static_cast<int64_t>(xs.rank());
  if (ax != axis) return std::nullopt;
  auto clamp = [dim](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + dim : v, 0, dim); };
  return std::make_pair(clamp((*starts)[0]), clamp((*ends)[0]));
}

}  // namespace

std::optional<RollView> roll_view(const Node& concat, const ConstInts& const_ints) {
  if (!concat.domain.empty() || concat.op_type != "Concat" || concat.inputs.size() != 2 ||
      !concat.inputs[0] || !concat.inputs[1])
    return std::nullopt;
  const Node* a = concat.inputs[0]->producer;
  const Node* b = concat.inputs[1]->producer;
  if (!a || !b || a->inputs.empty() || b->inputs.empty() || !a->inputs[0] ||
      a->inputs[0] != b->inputs[0])
    return std::nullopt;
  const Value* x = a->inputs[0];
  const Shape& xs = x->type.shape;
  if (!xs.rank_known()) return std::nullopt;
  const auto rank = static_cast<int64_t>(xs.rank());
  int64_t axis = concat.attr_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  const auto n = xs[static_cast<size_t>(axis)].value();
  if (!n || *n < 2) return std::nullopt;
  const auto first = single_axis_cut(*a, axis, *n, const_ints);
  const auto second = single_axis_cut(*b, axis, *n, const_ints);
  // [s, n) then [0, s): every element once, rotated by s.
  if (!first || !second || first->second != *n || second->first != 0 ||
      second->second != first->first || first->first <= 0 || first->first >= *n)
    return std::nullopt;
  const int64_t shift = first->first, len = *n;
  const auto ax = static_cast<size_t>(axis);
  return RollView{x, [ax, shift, len](const std::vector<SymExpr>& o) {
                    std::vector<SymExpr> i = o;
                    i[ax] = (o[ax] + SymExpr(shift)).mod(SymExpr(len));
                    return i;
                  }};
}

std::optional<IndexMap> affine_view_map(const Node& n, const std::vector<Dim>& idims,
                                        const std::vector<Dim>& odims,
                                        const ConstInts& const_ints) {
  if (!n.domain.empty()) return std::nullopt;
  const std::string& op = n.op_type;
  if (op == "Identity" || op == "Dropout")
    return IndexMap([](const std::vector<SymExpr>& o) { return o; });
  if (op == "Transpose") return transpose_map(n, idims.size());
  if (op == "Expand") return expand_map(idims, odims);
  if (op == "Unsqueeze" || op == "Squeeze") return squeeze_map(n, idims, odims);
  if (op == "Slice") return slice_map(n, idims, const_ints);
  if (op == "Gather") return gather_map(n, idims, const_ints);
  return std::nullopt;
}

std::optional<std::vector<ReshapeGroup>> reshape_groups(const std::vector<Dim>& idims,
                                                        const std::vector<Dim>& odims) {
  std::vector<ReshapeGroup> groups;
  size_t i = 0, o = 0;
  while (i < idims.size() || o < odims.size()) {
    ReshapeGroup g{i, i, o, o};
    SymExpr pi(1), po(1);
    // Take at least one dim from each side that still has dims, then grow the smaller product
    // until both agree. Symbolic products compare as expressions; dims of size 1 join a group.
    if (i < idims.size()) pi = pi * idims[i++].expr();
    if (o < odims.size()) po = po * odims[o++].expr();
    while (pi != po) {
      auto a = pi.constant(), b = po.constant();
      bool grow_in = i < idims.size() && (o == odims.size() || (a && b && *a < *b) || !a);
      if (!grow_in && o == odims.size()) return std::nullopt;
      if (grow_in)
        pi = pi * idims[i++].expr();
      else
        po = po * odims[o++].expr();
    }
    g.in_end = i;
    g.out_end = o;
    groups.push_back(g);
  }
  return groups;
}

IndexMap reshape_index_map(const std::vector<Dim>& idims, const std::vector<Dim>& odims,
                           const std::vector<ReshapeGroup>& groups) {
  return [idims, odims, groups](const std::vector<SymExpr>& o) {
    std::vector<SymExpr> in(idims.size());
    for (const ReshapeGroup& g : groups) {
      SymExpr linear(0);  // the group's linear index, row-major over its output dims
      for (size_t k = g.out_begin; k < g.out_end; ++k) linear = linear * odims[k].expr() + o[k];
      SymExpr stride(1);
      for (size_t d = g.in_end; d-- > g.in_begin;) {
        SymExpr q = linear.floordiv(stride);
        if (idims[d].value() == 1)
          q = SymExpr(0);
        else if (d != g.in_begin)
          q = q.mod(idims[d].expr());
        in[d] = q;
        stride = stride * idims[d].expr();
      }
    }
    return in;
  };
}

std::optional<std::vector<SymExpr>> reshape_view_strides(const std::vector<Dim>& idims,
                                                         const std::vector<SymExpr>& istrides,
                                                         const std::vector<Dim>& odims,
                                                         const std::vector<ReshapeGroup>& groups) {
  std::vector<SymExpr> out(odims.size(), SymExpr(0));
  for (const ReshapeGroup& g : groups) {
    // The group's innermost stride, and each outer non-1 dim's stride must be the product of the
    // inner ones (the group is one contiguous run of the buffer, at that step).
    std::optional<SymExpr> base;
    SymExpr inner(1);
    for (size_t d = g.in_end; d-- > g.in_begin;) {
      if (idims[d].value() == 1) continue;
      if (!base) {
        base = istrides[d];
      } else if (istrides[d] != *base * inner) {
        return std::nullopt;
      }
      inner = inner * idims[d].expr();
    }
    SymExpr s = base ? *base : SymExpr(0);
    for (size_t k = g.out_end; k-- > g.out_begin;) {
      out[k] = s;
      s = s * odims[k].expr();
    }
  }
  return out;
}

}  // namespace ferrite::lower_impl
