// Helpers of the shard-tensor-parallel pass (shard_tensor_parallel.cpp): slicing constants into a
// rank's part, and following a split dim through views and elementwise ops.
#include "passes/shard_util.h"

#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "ops/scalar_functions.h"
#include "passes/shard_tensor_parallel.h"

namespace ferrite::shard {

// Dims of `t` with `axis` cut into `sections` parts of which this rank keeps chunk `rank` of
// `size` each. Where the chunk is one aligned run of bytes (a row-parallel weight, a
// vocab-parallel table), it is a view of `t`'s storage: a model's mapped weights are then never
// copied on the host, and a 200 GB model splits in seconds.
Expected<Tensor> slice_chunk(const Tensor& t, size_t axis, int rank, int size, int sections) {
  std::vector<int64_t> dims = t.dims();
  const int64_t len = dims[axis], part = len / sections, chunk = part / size;
  int64_t outer = 1, inner = 1;
  for (size_t k = 0; k < axis; ++k) outer *= dims[k];
  for (size_t k = axis + 1; k < dims.size(); ++k) inner *= dims[k];
  dims[axis] = chunk * sections;
  const size_t el = dtype_size(t.dtype());
  const auto* src = static_cast<const uint8_t*>(t.raw());
  const size_t run = static_cast<size_t>(chunk * inner) * el;
  if (outer * sections == 1) {
    const size_t offset = static_cast<size_t>(rank * chunk * inner) * el;
    // 64-byte aligned, as kernels that read constants in place may assume of their start
    if (src && (reinterpret_cast<uintptr_t>(src) + offset) % 64 == 0) {
      auto keep = std::make_shared<const Tensor>(t);  // the view holds the whole tensor alive
      std::shared_ptr<uint8_t[]> view(keep, const_cast<uint8_t*>(src) + offset);
      return Tensor::over_storage(t.dtype(), std::move(dims), std::move(view));
    }
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor out, Tensor::create_uninitialized(t.dtype(), std::move(dims)));
  auto* dst = static_cast<uint8_t*>(out.raw());
  for (int64_t o = 0; o < outer; ++o)
    for (int s = 0; s < sections; ++s) {
      int64_t from = (o * len + s * part + rank * chunk) * inner;
      int64_t to = (o * chunk * sections + s * chunk) * inner;
      std::memcpy(dst + static_cast<size_t>(to) * el, src + static_cast<size_t>(from) * el, run);
    }
  return out;
}

Expected<Tensor> vocab_rows(const Tensor& table, int rank, int size) {
  const int64_t vocab = table.dim(0), rows = (vocab + size - 1) / size;
  if (vocab % size == 0) return slice_chunk(table, 0, rank, size, 1);
  const size_t row_bytes = static_cast<size_t>(table.dim(1)) * dtype_size(table.dtype());
  const int64_t first = rank * rows, have = std::max<int64_t>(0, std::min(rows, vocab - first));
  FERRITE_ASSIGN_OR_RETURN(Tensor local, Tensor::create(table.dtype(), {rows, table.dim(1)}));
  std::memcpy(local.raw(), static_cast<const uint8_t*>(table.raw()) + first * row_bytes,
              static_cast<size_t>(have) * row_bytes);
  return local;
}

Expected<Tensor> padded(const Tensor& t, size_t axis, int64_t to) {
  std::vector<int64_t> dims = t.dims();
  dims[axis] = to;
  FERRITE_ASSIGN_OR_RETURN(Tensor out, Tensor::create(t.dtype(), std::move(dims)));
  copy_columns(t, out, axis);
  return out;
}

// `dst` (larger along `axis`) gets `src` at its start along `axis`.
void copy_columns(const Tensor& src, Tensor& dst, size_t axis) {
  const size_t el = dtype_size(src.dtype());
  int64_t outer = 1;
  for (size_t k = 0; k < axis; ++k) outer *= src.dim(k);
  int64_t inner_src = 1, inner_dst = 1;
  for (size_t k = axis; k < src.rank(); ++k) {
    inner_src *= src.dim(k);
    inner_dst *= dst.dim(k);
  }
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(static_cast<uint8_t*>(dst.raw()) + static_cast<size_t>(o * inner_dst) * el,
                static_cast<const uint8_t*>(src.raw()) + static_cast<size_t>(o * inner_src) * el,
                static_cast<size_t>(inner_src) * el);
}

bool divisible(const Dim& d, int64_t by) {
  auto v = d.value();
  return v && *v > 0 && *v % by == 0;
}

static SymExpr prefix_product(const Shape& s, size_t end) {
  SymExpr p(int64_t{1});
  for (size_t k = 0; k < end; ++k) p = p * s[k].expr();
  return p;
}

static bool all_known(const Shape& s) {
  if (!s.rank_known()) return false;
  for (const Dim& d : s.dims())
    if (!d.is_known()) return false;
  return true;
}

// Where dim `d` of `in` lands in `out` for a view that keeps the element order (Reshape,
// Flatten, (Un)Squeeze): the out dim with the same prefix product whose extent is in[d]'s, or
// (sections 1) a merge of in[d] with the dims after it, or in[d] split with its head divisible.
std::optional<int> view_dim(const Shape& in, const Shape& out, int d, const Split& sp, int size) {
  if (!all_known(in) || !all_known(out)) return std::nullopt;
  const SymExpr before = prefix_product(in, static_cast<size_t>(d));
  for (size_t e = 0; e < out.rank(); ++e) {
    if (!(prefix_product(out, e) == before)) continue;
    // A unit dim in front (a decoding step's one token: [b, 1, h*d] -> [b, 1, h, d]): the split
    // dim is further on (a split dim is never 1: N divides it).
    if (out[e].value() == 1) continue;
    if (out[e] == in[static_cast<size_t>(d)]) return static_cast<int>(e);
    if (sp.sections != 1) return std::nullopt;
    // in[d] merged with the dims after it (d outermost: each rank's rows stay contiguous).
    SymExpr merged = in[static_cast<size_t>(d)].expr();
    for (size_t k = static_cast<size_t>(d) + 1; k < in.rank(); ++k) {
      if (merged == out[e].expr()) break;
      merged = merged * in[k].expr();
    }
    if (merged == out[e].expr()) return static_cast<int>(e);
    // in[d] split into out[e] x ... : the outer factor must divide among the ranks.
    SymExpr split = out[e].expr();
    for (size_t k = e + 1; k < out.rank() && !(split == in[static_cast<size_t>(d)].expr()); ++k)
      split = split * out[k].expr();
    if (split == in[static_cast<size_t>(d)].expr() && divisible(out[e], size))
      return static_cast<int>(e);
    return std::nullopt;
  }
  return std::nullopt;
}

bool is_pointwise(const Node& n) {
  static const std::unordered_set<std::string> extra = {"Where", "Cast",     "Identity",
                                                        "Clip",  "CastLike", "Dropout"};
  if (!n.domain.empty()) return false;
  return scalar_function_of(n) != nullptr || extra.count(n.op_type) != 0;
}

int64_t used_constant_bytes(const Graph& g) {
  std::unordered_set<const Value*> used;
  for (const auto& n : g.nodes())
    for (const Value* v : n->inputs)
      if (v && v->constant) used.insert(v);
  int64_t bytes = 0;
  for (const Value* v : used) bytes += static_cast<int64_t>(v->constant->nbytes());
  return bytes;
}

namespace {

Expected<int> int_option(const PassOptions& o, const char* key) {
  auto it = o.find(key);
  if (it == o.end()) return err("shard-tensor-parallel: missing option '", key, "'");
  const std::string& v = it->second;
  if (v.empty() || v.size() > 4 || v.find_first_not_of("0123456789") != std::string::npos)
    return err("shard-tensor-parallel: option ", key, " expects a small integer, got '", v, "'");
  return std::stoi(v);
}

}  // namespace

Expected<std::pair<int, int>> rank_and_size(const PassOptions& o) {
  for (const auto& [k, v] : o)
    if (k != "rank" && k != "size")
      return err("shard-tensor-parallel: unknown option '", k, "' (rank, size)");
  FERRITE_ASSIGN_OR_RETURN(int rank, int_option(o, "rank"));
  FERRITE_ASSIGN_OR_RETURN(int size, int_option(o, "size"));
  if (size < 1 || rank >= size)
    return err("shard-tensor-parallel: rank ", rank, " is not in a group of ", size);
  return std::make_pair(rank, size);
}

}  // namespace ferrite::shard

namespace ferrite {

std::string ShardReport::summary() const {
  return str_cat("tensor-parallel ", size, ": ", column_parallel, " column-parallel, ",
                 row_parallel, " row-parallel and ", vocab_parallel, " vocab-parallel weights (",
                 row_parallel + vocab_parallel, " AllReduce, ", all_gathers,
                 " AllGather); constants per rank ", weight_bytes_after / 1000000, " MB of ",
                 weight_bytes_before / 1000000, " MB");
}

}  // namespace ferrite
