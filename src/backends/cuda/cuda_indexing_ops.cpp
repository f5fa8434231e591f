// GatherElements, ScatterElements, ScatterND, GatherND, CumSum and integer Div / Mod on the GPU
// (kernels: cuda_indexing_source.inc). Training graphs are full of them (max-pool and embedding
// gradients, the loss's target gather), and a host fallback copies whole activations both ways.
// Each op checks the shapes here, where they are known, and declines what the reference kernel
// would refuse, so the reference reports it; indices are range-checked on the GPU through the
// step's error flag.
#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "backends/cuda/cuda_library.h"
#include "backends/cuda/cuda_native_ops.h"
#include "ir/tensor.h"

namespace ferrite::cuda {

namespace {

// Mirrors ElementsParams / ScatterNdParams of cuda_indexing_source.inc.
struct ElementsParams {
  int64_t ind_dims[kMaxRank];
  int64_t data_strides[kMaxRank];
  int64_t axis_len;
  int rank, axis;
};
struct ScatterNdParams {
  int64_t data_dims[kMaxRank];
  int64_t data_strides[kMaxRank];
  int64_t slice, m;
};
struct GatherNdParams {
  int64_t data_dims[kMaxRank];
  int64_t data_strides[kMaxRank];
  int64_t slice, m, tuples, batch_stride;
};

// The elements ops' parameters, or nullopt when the reference would refuse the shapes (indices
// of another rank, larger than data off the axis) or the rank is above the kernel's.
std::optional<ElementsParams> elements_params(const Node& node, const DevView& data,
                                              const DevView& idx) {
  const auto rank = static_cast<int64_t>(data.dims.size());
  if (rank == 0 || rank > kMaxRank || idx.dims.size() != data.dims.size()) return std::nullopt;
  if (idx.dtype != DType::kI64 && idx.dtype != DType::kI32) return std::nullopt;
  int64_t axis = node.attr_int("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return std::nullopt;
  ElementsParams p{};
  const auto strides = contiguous_strides(data.dims);
  for (int64_t d = 0; d < rank; ++d) {
    if (d != axis && idx.dims[d] > data.dims[d]) return std::nullopt;
    p.ind_dims[d] = idx.dims[d];
    p.data_strides[d] = strides[d];
  }
  p.axis_len = data.dims[axis];
  p.rank = static_cast<int>(rank);
  p.axis = static_cast<int>(axis);
  return p;
}

bool copyable(DType t) {
  const size_t e = dtype_size(t);
  return e == 1 || e == 2 || e == 4 || e == 8;
}

// The kernels' reduction code (0 none, 1 add, 2 mul, 3 max, 4 min) and float dtype code, or
// nullopt for a reduction over storage the kernels do not reduce (integers, f64).
std::optional<std::pair<int, int>> reduction_of(const Node& node, DType t) {
  const std::string r = node.attr_string("reduction", "none");
  const int red = r == "none"  ? 0
                  : r == "add" ? 1
                  : r == "mul" ? 2
                  : r == "max" ? 3
                  : r == "min" ? 4
                               : -1;
  if (red < 0) return std::nullopt;
  const int dt = t == DType::kF32 ? 0 : t == DType::kBF16 ? 1 : t == DType::kF16 ? 2 : -1;
  if (red != 0 && dt < 0) return std::nullopt;
  if (red == 0 && !copyable(t)) return std::nullopt;
  return std::make_pair(red, dt < 0 ? 0 : dt);
}

// out = a copy of data (the scatters write into it).
Expected<void*> copy_of_data(NativeIO& io, CudaBackend& be) {
  const DevView& data = *io.in[0];
  FERRITE_ASSIGN_OR_RETURN(void* out, io.output(0, data.dtype, data.dims));
  FERRITE_RETURN_IF_ERROR(be.rt()->copy_on_device(
      out, data.ptr, static_cast<size_t>(prod(data.dims)) * dtype_size(data.dtype)));
  return out;
}

}  // namespace

Expected<bool> run_gather_elements(const Node& node, NativeIO& io, CudaBackend& be) {
  if (io.in.size() < 2 || !io.in[0] || !io.in[1] || !io.error_flag) return false;
  const DevView &data = *io.in[0], &idx = *io.in[1];
  auto p = elements_params(node, data, idx);
  if (!p || !copyable(data.dtype)) return false;
  FERRITE_ASSIGN_OR_RETURN(void* out, io.output(0, data.dtype, idx.dims));
  int64_t total = prod(idx.dims);
  if (total == 0) return true;
  int idx64 = idx.dtype == DType::kI64 ? 1 : 0, esize = static_cast<int>(dtype_size(data.dtype)),
      tag = io.error_tag;
  const void *d = data.ptr, *i = idx.ptr;
  void* args[] = {&d, &i, &idx64, &out, &*p, &total, &esize, &io.error_flag, &tag};
  FERRITE_RETURN_IF_ERROR(be.lib->launch_named("fe_gather_elements", total, args));
  return true;
}

Expected<bool> run_scatter_elements(const Node& node, NativeIO& io, CudaBackend& be) {
  if (io.in.size() < 3 || !io.in[0] || !io.in[1] || !io.in[2] || !io.error_flag) return false;
  const DevView &data = *io.in[0], &idx = *io.in[1], &upd = *io.in[2];
  auto p = elements_params(node, data, idx);
  auto red = reduction_of(node, data.dtype);
  if (!p || !red || upd.dims != idx.dims || upd.dtype != data.dtype) return false;
  FERRITE_ASSIGN_OR_RETURN(void* out, copy_of_data(io, be));
  int64_t total = prod(idx.dims);
  if (total == 0) return true;
  int idx64 = idx.dtype == DType::kI64 ? 1 : 0, esize = static_cast<int>(dtype_size(data.dtype)),
      dt = red->second, code = red->first, tag = io.error_tag;
  const void *i = idx.ptr, *u = upd.ptr;
  void* args[] = {&out, &i, &idx64, &u, &*p, &total, &esize, &dt, &code, &io.error_flag, &tag};
  FERRITE_RETURN_IF_ERROR(be.lib->launch_named("fe_scatter_elements", total, args));
  return true;
}

Expected<bool> run_scatter_nd(const Node& node, NativeIO& io, CudaBackend& be) {
  if (io.in.size() < 3 || !io.in[0] || !io.in[1] || !io.in[2] || !io.error_flag) return false;
  const DevView &data = *io.in[0], &idx = *io.in[1], &upd = *io.in[2];
  auto red = reduction_of(node, data.dtype);
  const size_t r = data.dims.size();
  if (!red || idx.dtype != DType::kI64 || idx.dims.empty() || r > kMaxRank ||
      upd.dtype != data.dtype)
    return false;
  const int64_t m = idx.dims.back();
  if (m < 1 || m > static_cast<int64_t>(r)) return false;
  std::vector<int64_t> want(idx.dims.begin(), idx.dims.end() - 1);
  want.insert(want.end(), data.dims.begin() + m, data.dims.end());
  if (upd.dims != want) return false;
  ScatterNdParams p{};
  const auto strides = contiguous_strides(data.dims);
  for (size_t d = 0; d < r; ++d) p.data_dims[d] = data.dims[d], p.data_strides[d] = strides[d];
  p.slice = prod(data.dims, static_cast<size_t>(m));
  p.m = m;
  FERRITE_ASSIGN_OR_RETURN(void* out, copy_of_data(io, be));
  int64_t total = prod(upd.dims);
  if (total == 0) return true;
  int esize = static_cast<int>(dtype_size(data.dtype)), dt = red->second, code = red->first,
      tag = io.error_tag;
  const void *i = idx.ptr, *u = upd.ptr;
  void* args[] = {&out, &i, &u, &p, &total, &esize, &dt, &code, &io.error_flag, &tag};
  FERRITE_RETURN_IF_ERROR(be.lib->launch_named("fe_scatter_nd", total, args));
  return true;
}

// Shapes the reference accepts: int64 indices [batch dims..., tuples..., m] with the batch dims
// equal to data's, 1 <= m <= rank - batch_dims.
Expected<bool> run_gather_nd(const Node& node, NativeIO& io, CudaBackend& be) {
  if (io.in.size() < 2 || !io.in[0] || !io.in[1] || !io.error_flag) return false;
  const DevView &data = *io.in[0], &idx = *io.in[1];
  const auto r = static_cast<int64_t>(data.dims.size()), q = static_cast<int64_t>(idx.dims.size());
  const int64_t b = node.attr_int("batch_dims", 0);
  if (!copyable(data.dtype) || idx.dtype != DType::kI64 || q < 1 || b < 0 || b >= std::min(q, r))
    return false;
  const int64_t m = idx.dims.back();
  if (m < 1 || b + m > r || m > kMaxRank) return false;
  for (int64_t d = 0; d < b; ++d)
    if (idx.dims[d] != data.dims[d]) return false;
  std::vector<int64_t> out_dims(idx.dims.begin(), idx.dims.end() - 1);
  out_dims.insert(out_dims.end(), data.dims.begin() + b + m, data.dims.end());
  GatherNdParams p{};
  const auto strides = contiguous_strides(data.dims);
  for (int64_t k = 0; k < m; ++k)
    p.data_dims[k] = data.dims[b + k], p.data_strides[k] = strides[b + k];
  p.slice = prod(data.dims, static_cast<size_t>(b + m));
  p.m = m;
  p.tuples = prod(idx.dims, static_cast<size_t>(b), idx.dims.size() - 1);
  p.batch_stride = prod(data.dims, static_cast<size_t>(b));
  FERRITE_ASSIGN_OR_RETURN(void* out, io.output(0, data.dtype, out_dims));
  int64_t total = prod(out_dims);
  if (total == 0) return true;
  int esize = static_cast<int>(dtype_size(data.dtype)), tag = io.error_tag;
  const void *d = data.ptr, *i = idx.ptr;
  void* args[] = {&d, &i, &out, &p, &total, &esize, &io.error_flag, &tag};
  FERRITE_RETURN_IF_ERROR(be.lib->launch_named("fe_gather_nd", total, args));
  return true;
}

// The axis comes from a host constant (as exporters write it); f32, f64, int32 and int64.
Expected<bool> run_cumsum(const Node& node, NativeIO& io, CudaBackend& be) {
  if (io.in.size() < 2 || !io.in[0] || !io.in[1] || !io.in[1]->host) return false;
  const DevView& x = *io.in[0];
  const Tensor& axis_t = *io.in[1]->host;
  const int dt = x.dtype == DType::kF32   ? 0
                 : x.dtype == DType::kF64 ? 1
                 : x.dtype == DType::kI32 ? 2
                 : x.dtype == DType::kI64 ? 3
                                          : -1;
  if (dt < 0 || axis_t.numel() != 1 || !is_integer(axis_t.dtype())) return false;
  const auto rank = static_cast<int64_t>(x.dims.size());
  int64_t axis = axis_t.to_int_vector()[0];
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, x.dtype, x.dims));
  int64_t len = x.dims[axis], inner = prod(x.dims, static_cast<size_t>(axis + 1));
  int64_t lines = prod(x.dims) / std::max<int64_t>(len, 1);
  if (prod(x.dims) == 0) return true;
  int d = dt, excl = node.attr_int("exclusive", 0) != 0, rev = node.attr_int("reverse", 0) != 0;
  const void* px = x.ptr;
  void* args[] = {&px, &y, &lines, &len, &inner, &d, &excl, &rev};
  // Integers: a warp per line (lines * 32 threads); floats keep the reference's summation order.
  FERRITE_RETURN_IF_ERROR(dt >= 2 ? be.lib->launch_named("fe_cumsum_int", lines * 32, args)
                                  : be.lib->launch_named("fe_cumsum", lines, args));
  return true;
}

Expected<bool> run_int_divmod(const Node& node, NativeIO& io, CudaBackend& be) {
  if (io.in.size() != 2 || !io.in[0] || !io.in[1] || !io.error_flag) return false;
  const DevView &a = *io.in[0], &b = *io.in[1];
  if ((a.dtype != DType::kI64 && a.dtype != DType::kI32) || b.dtype != a.dtype) return false;
  auto out = broadcast(a.dims, b.dims);
  BroadcastDims ab{}, bb{};
  if (!out || !broadcast_strides(a.dims, *out, &ab) || !broadcast_strides(b.dims, *out, &bb))
    return false;
  FERRITE_ASSIGN_OR_RETURN(void* y, io.output(0, a.dtype, *out));
  int64_t total = prod(*out);
  if (total == 0) return true;
  int i64 = a.dtype == DType::kI64 ? 1 : 0, op = node.op_type == "Mod" ? 1 : 0,
      fmod = node.attr_int("fmod", 0) != 0 ? 1 : 0, tag = io.error_tag;
  const void *pa = a.ptr, *pb = b.ptr;
  void* args[] = {&pa, &ab, &pb, &bb, &y, &total, &i64, &op, &fmod, &io.error_flag, &tag};
  FERRITE_RETURN_IF_ERROR(be.lib->launch_named("fe_int_divmod", total, args));
  return true;
}

}  // namespace ferrite::cuda
