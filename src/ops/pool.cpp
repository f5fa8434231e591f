// Pooling: MaxPool (with optional Indices), AveragePool, LpPool, the Global* pools and
// MaxUnpool, over any number of spatial dims.
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/conv_util.h"

namespace ferrite {

namespace {

enum class PoolKind { kMax, kAverage, kLp };

// For each spatial dim and output coordinate, the input coordinates its window covers that lie
// inside the input (padding taps are dropped here; AveragePool's count_include_pad divides by
// the full kernel volume instead).
struct PoolTaps {
  std::vector<std::vector<int64_t>> coords;  // per dim: concatenated tap lists
  std::vector<std::vector<int64_t>> begin;   // per dim: out[d] + 1 offsets into coords[d]
};

PoolTaps make_taps(const Window& w, const std::vector<int64_t>& in,
                   const std::vector<int64_t>& out) {
  PoolTaps t;
  t.coords.resize(w.rank);
  t.begin.resize(w.rank);
  for (size_t d = 0; d < w.rank; ++d) {
    t.begin[d].push_back(0);
    for (int64_t o = 0; o < out[d]; ++o) {
      for (int64_t k = 0; k < w.kernel[d]; ++k) {
        int64_t i = o * w.strides[d] - w.pad_begin(d) + k * w.dilations[d];
        if (i >= 0 && i < in[d]) t.coords[d].push_back(i);
      }
      t.begin[d].push_back(static_cast<int64_t>(t.coords[d].size()));
    }
  }
  return t;
}

// The row-major spatial offsets of the in-input taps of the window at output index `o`.
void window_offsets(const PoolTaps& t, const std::vector<int64_t>& in,
                    const std::vector<int64_t>& o, std::vector<int64_t>& offs,
                    std::vector<int64_t>& scratch) {
  offs.assign(1, 0);
  for (size_t d = 0; d < in.size(); ++d) {
    scratch.clear();
    int64_t b = t.begin[d][o[d]], e = t.begin[d][o[d] + 1];
    for (int64_t off : offs)
      for (int64_t k = b; k < e; ++k) scratch.push_back(off * in[d] + t.coords[d][k]);
    offs.swap(scratch);
  }
}

// Column-major (storage_order=1) version of a row-major spatial offset.
int64_t column_major(int64_t off, const std::vector<int64_t>& in) {
  int64_t result = 0, scale = 1;
  std::vector<int64_t> idx(in.size());
  for (size_t d = in.size(); d-- > 0;) {
    idx[d] = off % in[d];
    off /= in[d];
  }
  for (size_t d = 0; d < in.size(); ++d) {
    result += idx[d] * scale;
    scale *= in[d];
  }
  return result;
}

Status pool_kernel(KernelContext& ctx, PoolKind kind) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  if (x.rank() < 3)
    return ctx.error("input must have rank >= 3 (N, C, spatial...), got ", x.type_string());
  size_t n = x.rank() - 2;
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.size() != n)
    return ctx.error("kernel_shape has ", kernel.size(), " entries, input has ", n,
                     " spatial dims");
  FERRITE_ASSIGN_OR_RETURN(Window w, read_window(node, kernel));
  std::vector<int64_t> in(x.dims().begin() + 2, x.dims().end());
  FERRITE_ASSIGN_OR_RETURN(auto out, resolve_window(node, w, in));
  std::vector<int64_t> dims{x.dim(0), x.dim(1)};
  dims.insert(dims.end(), out.begin(), out.end());
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), dims));
  Tensor* ind = nullptr;
  if (kind == PoolKind::kMax && ctx.num_outputs() > 1 && ctx.has_output(1)) {
    FERRITE_ASSIGN_OR_RETURN(ind, ctx.allocate_output(1, DType::kI64, dims));
  }
  int64_t storage_order = node.attr_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1)
    return ctx.error("storage_order must be 0 or 1, got ", storage_order);
  bool include_pad = node.attr_int("count_include_pad", 0) != 0;
  int64_t p = node.attr_int("p", 2);
  if (kind == PoolKind::kLp && p <= 0) return ctx.error("p must be positive, got ", p);

  PoolTaps taps = make_taps(w, in, out);
  const int64_t planes = x.dim(0) * x.dim(1), in_size = product(in), out_size = product(out);
  double volume = 1;
  for (int64_t k : w.kernel) volume *= static_cast<double>(k);
  Status st;
  visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      st = ctx.error("bool is not supported");
    } else {
      const T* px = x.data<T>();
      T* py = y->data<T>();
      int64_t* pi = ind ? ind->data<int64_t>() : nullptr;
      std::vector<int64_t> o(n), offs, scratch;
      for (int64_t j = 0; j < out_size; ++j) {
        int64_t rem = j;
        for (size_t d = n; d-- > 0;) {
          o[d] = rem % out[d];
          rem /= out[d];
        }
        window_offsets(taps, in, o, offs, scratch);
        for (int64_t pl = 0; pl < planes; ++pl) {
          const T* xp = px + pl * in_size;
          T& dst = py[pl * out_size + j];
          if (kind == PoolKind::kMax) {
            using C = compute_t<T>;
            C best = std::numeric_limits<C>::lowest();
            int64_t arg = -1;
            for (int64_t off : offs) {
              C v = convert<C>(xp[off]);
              if (arg < 0 || v > best) {
                best = v;
                arg = off;
              }
            }
            dst = convert<T>(best);
            if (pi) {
              int64_t a = arg < 0 ? 0 : (storage_order ? column_major(arg, in) : arg);
              pi[pl * out_size + j] = pl * in_size + a;
            }
          } else if (kind == PoolKind::kAverage) {
            double sum = 0;
            for (int64_t off : offs) sum += convert<double>(xp[off]);
            double count = include_pad ? volume : static_cast<double>(offs.size());
            dst = convert<T>(count > 0 ? sum / count : 0.0);
          } else {
            double sum = 0;
            for (int64_t off : offs) {
              double v = std::fabs(convert<double>(xp[off]));
              sum += p == 1 ? v : p == 2 ? v * v : std::pow(v, static_cast<double>(p));
            }
            dst = convert<T>(p == 1 ? sum : p == 2 ? std::sqrt(sum) : std::pow(sum, 1.0 / p));
          }
        }
      }
    }
  });
  return st;
}

Status infer_pool(InferContext& ctx) {
  const Node& node = ctx.node();
  const Shape& x = ctx.input_shape(0);
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  size_t n = kernel.size();
  if (n == 0) return ctx.error("kernel_shape must not be empty");
  if (x.rank_known() && x.rank() != n + 2)
    return ctx.error("kernel_shape has ", n, " entries, but input ", x.to_string(), " has ",
                     static_cast<int64_t>(x.rank()) - 2, " spatial dims");
  FERRITE_ASSIGN_OR_RETURN(Window w, read_window(node, kernel));
  if (node.has_attr("storage_order")) {
    int64_t so = node.attr_int("storage_order");
    if (so != 0 && so != 1) return ctx.error("storage_order must be 0 or 1, got ", so);
  }
  if (node.has_attr("p") && node.attr_int("p") <= 0) return ctx.error("p must be positive");
  std::vector<Dim> out(n + 2);
  if (x.rank_known()) {
    out[0] = x[0];
    out[1] = x[1];
    for (size_t d = 0; d < n; ++d) {
      FERRITE_ASSIGN_OR_RETURN(out[d + 2], window_output_dim(node, w, d, x[d + 2]));
    }
  }
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kI64, Shape(out));
  return Status::ok();
}

Status infer_global_pool(InferContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  if (!x.rank_known()) {
    ctx.set_output(0, ctx.input_dtype(0), Shape::unknown_rank());
    return Status::ok();
  }
  if (x.rank() < 2) return ctx.error("input must have rank >= 2, got ", x.to_string());
  std::vector<Dim> out(x.rank(), Dim(1));
  out[0] = x[0];
  out[1] = x[1];
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
  return Status::ok();
}

Status global_pool_kernel(KernelContext& ctx, PoolKind kind) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 2) return ctx.error("input must have rank >= 2, got ", x.type_string());
  std::vector<int64_t> dims(x.rank(), 1);
  dims[0] = x.dim(0);
  dims[1] = x.dim(1);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), dims));
  const int64_t planes = x.dim(0) * x.dim(1);
  const int64_t size = planes == 0 ? 0 : x.numel() / planes;
  const double p = static_cast<double>(ctx.node().attr_int("p", 2));
  if (kind == PoolKind::kLp && p <= 0) return ctx.error("p must be positive");
  bool ok = visit_dtype(x.dtype(), [&]<class T>() {
    if constexpr (is_float_v<T>) {
      const T* px = x.data<T>();
      T* py = y->data<T>();
      for (int64_t pl = 0; pl < planes; ++pl) {
        const T* xp = px + pl * size;
        double acc = kind == PoolKind::kMax ? -std::numeric_limits<double>::infinity() : 0.0;
        for (int64_t i = 0; i < size; ++i) {
          double v = convert<double>(xp[i]);
          if (kind == PoolKind::kMax)
            acc = (i == 0 || v > acc) ? v : acc;
          else if (kind == PoolKind::kAverage)
            acc += v;
          else
            acc += std::pow(std::fabs(v), p);
        }
        if (kind == PoolKind::kAverage) acc = size > 0 ? acc / static_cast<double>(size) : 0.0;
        if (kind == PoolKind::kLp) acc = std::pow(acc, 1.0 / p);
        py[pl] = convert<T>(acc);
      }
    }
  });
  if (!ok || !is_float(x.dtype()))
    return ctx.error("dtype ", dtype_name(x.dtype()), " is not supported");
  return Status::ok();
}

// MaxUnpool's natural output spatial size for input size `in` along dim d.
int64_t unpool_size(const Window& w, size_t d, int64_t in) {
  return (in - 1) * w.strides[d] - w.pad_begin(d) - w.pad_end(d) + w.kernel[d];
}

Status infer_max_unpool(InferContext& ctx) {
  const Node& node = ctx.node();
  const Shape& x = ctx.input_shape(0);
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  size_t n = kernel.size();
  if (n == 0) return ctx.error("kernel_shape must not be empty");
  if (x.rank_known() && x.rank() != n + 2)
    return ctx.error("kernel_shape has ", n, " entries, but input ", x.to_string(), " has ",
                     static_cast<int64_t>(x.rank()) - 2, " spatial dims");
  FERRITE_ASSIGN_OR_RETURN(Window w, read_window(node, kernel));
  std::vector<Dim> out(n + 2);
  if (ctx.num_inputs() > 2 && ctx.has_input(2)) {
    if (auto v = ctx.input_dims_value(2)) {
      if (v->size() != n + 2) return ctx.error("output_shape must have ", n + 2, " entries");
      out = *v;
    }
  } else if (x.rank_known()) {
    out[0] = x[0];
    out[1] = x[1];
    for (size_t d = 0; d < n; ++d)
      out[d + 2] = x[d + 2] * Dim(w.strides[d]) +
                   Dim(w.kernel[d] - w.strides[d] - w.pad_begin(d) - w.pad_end(d));
  }
  ctx.set_output(0, ctx.input_dtype(0), Shape(out));
  return Status::ok();
}

Status max_unpool_kernel(KernelContext& ctx) {
  const Node& node = ctx.node();
  const Tensor& x = ctx.input(0);
  const Tensor& idx = ctx.input(1);
  if (x.rank() < 3) return ctx.error("input must have rank >= 3, got ", x.type_string());
  if (idx.dims() != x.dims())
    return ctx.error("indices ", idx.type_string(), " must have the input's shape ",
                     x.type_string());
  size_t n = x.rank() - 2;
  std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.size() != n)
    return ctx.error("kernel_shape has ", kernel.size(), " entries, input has ", n,
                     " spatial dims");
  FERRITE_ASSIGN_OR_RETURN(Window w, read_window(node, kernel));
  // Indices address a tensor of the natural unpooled shape; an explicit output_shape only
  // pads that at the end of each dim (as the ONNX reference does).
  std::vector<int64_t> natural{x.dim(0), x.dim(1)};
  for (size_t d = 0; d < n; ++d) {
    natural.push_back(unpool_size(w, d, x.dim(d + 2)));
    if (natural.back() <= 0)
      return ctx.error("output spatial dim ", d, " would be ", natural.back());
  }
  std::vector<int64_t> dims = natural;
  if (ctx.has_input(2)) {
    dims = ctx.input(2).to_int_vector();
    if (dims.size() != natural.size())
      return ctx.error("output_shape must have ", natural.size(), " entries");
    for (size_t d = 0; d < dims.size(); ++d)
      if (dims[d] < natural[d])
        return ctx.error("output_shape ", dims_to_string(dims), " is smaller than the unpooled ",
                         dims_to_string(natural));
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dtype(), dims));
  const int64_t total = product(natural);
  const int64_t* pi = idx.data<int64_t>();
  for (int64_t i = 0; i < idx.numel(); ++i)
    if (pi[i] < 0 || pi[i] >= total)
      return ctx.error("index ", pi[i], " is out of range for unpooled shape ",
                       dims_to_string(natural));
  std::vector<int64_t> nat_strides = contiguous_strides(natural),
                       out_strides = contiguous_strides(dims);
  visit_dtype(x.dtype(), [&]<class T>() {
    const T* px = x.data<T>();
    T* py = y->data<T>();
    for (int64_t i = 0; i < x.numel(); ++i) {
      int64_t rem = pi[i], off = 0;
      for (size_t d = 0; d < natural.size(); ++d) {
        off += rem / nat_strides[d] * out_strides[d];
        rem %= nat_strides[d];
      }
      py[off] = px[i];
    }
  });
  return Status::ok();
}

OpSchemaBuilder pool_common(const char* name, DTypeSet types) {
  OpSchemaBuilder b(name);
  b.versions(13)
      .inputs(1)
      .outputs(1)
      .attr("auto_pad", AttrType::kString, "NOTSET")
      .attr("ceil_mode", AttrType::kInt, 0)
      .optional_attr("dilations", AttrType::kInts)
      .required_attr("kernel_shape", AttrType::kInts)
      .optional_attr("pads", AttrType::kInts)
      .optional_attr("strides", AttrType::kInts)
      .types("T", {0}, types)
      .infer(infer_pool);
  return b;
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  using namespace dtypes;
  r.add(pool_common("MaxPool", kFloat | DTypeSet{DType::kI8, DType::kU8})
            .outputs(1, 2)
            .attr("storage_order", AttrType::kInt, 0)
            .kernel([](KernelContext& ctx) { return pool_kernel(ctx, PoolKind::kMax); }));
  // dilations is new in AveragePool-19; declared for all versions as the union.
  r.add(pool_common("AveragePool", kFloat)
            .attr("count_include_pad", AttrType::kInt, 0)
            .kernel([](KernelContext& ctx) { return pool_kernel(ctx, PoolKind::kAverage); }));
  // ceil_mode and dilations are new in LpPool-18.
  r.add(pool_common("LpPool", kFloat).attr("p", AttrType::kInt, 2).kernel([](KernelContext& ctx) {
    return pool_kernel(ctx, PoolKind::kLp);
  }));
  r.add(
      OpSchemaBuilder("GlobalAveragePool")
          .versions(13)
          .inputs(1)
          .outputs(1)
          .types("T", {0}, kFloat)
          .infer(infer_global_pool)
          .kernel([](KernelContext& ctx) { return global_pool_kernel(ctx, PoolKind::kAverage); }));
  r.add(OpSchemaBuilder("GlobalMaxPool")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .types("T", {0}, kFloat)
            .infer(infer_global_pool)
            .kernel([](KernelContext& ctx) { return global_pool_kernel(ctx, PoolKind::kMax); }));
  r.add(OpSchemaBuilder("GlobalLpPool")
            .versions(13)
            .inputs(1)
            .outputs(1)
            .attr("p", AttrType::kInt, 2)
            .types("T", {0}, kFloat)
            .infer(infer_global_pool)
            .kernel([](KernelContext& ctx) { return global_pool_kernel(ctx, PoolKind::kLp); }));
  r.add(OpSchemaBuilder("MaxUnpool")
            .versions(13)
            .inputs(2, 3)
            .outputs(1)
            .required_attr("kernel_shape", AttrType::kInts)
            .optional_attr("pads", AttrType::kInts)
            .optional_attr("strides", AttrType::kInts)
            .types("T1", {0}, kFloat)
            .types("T2", {1, 2}, DTypeSet{DType::kI64})
            .infer(infer_max_unpool)
            .kernel(max_unpool_kernel));
}

}  // namespace ferrite
