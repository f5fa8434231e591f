// Concat and Split for the cpu device: the op table's copies, spread over the thread pool and
// ordered by output row. In channels-last CNNs (the layout pass's NHWC values) both work on the
// channel axis, the last one: a row is one pixel, and every pixel copies a short run from each
// input (Concat) or into each output (Split). One thread copying them all left the other cores
// idle between two parallel convolutions (SqueezeNet's fire modules, ShuffleNet's channel split).
//
// Only what the kernel can check cheaply runs here: every other case (a split size given some
// other way, mismatched dims, an axis out of range) runs the op table's kernel, which computes
// the same result or reports the error.
#include <cstring>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/onednn_common.h"

namespace ferrite {

namespace {

// Below this many bytes a copy stays on the calling thread: a fork/join costs more.
constexpr int64_t kParallelBytes = 64 * 1024;

struct Rows {
  int64_t outer = 1;  // product of the dims before the axis
  int64_t inner = 1;  // product of the dims after it
};

Rows rows_around(const std::vector<int64_t>& dims, int64_t axis) {
  Rows r;
  for (int64_t d = 0; d < axis; ++d) r.outer *= dims[static_cast<size_t>(d)];
  for (size_t d = static_cast<size_t>(axis) + 1; d < dims.size(); ++d) r.inner *= dims[d];
  return r;
}

std::optional<int64_t> axis_of(const Node& node, const char* name, int64_t rank) {
  int64_t a = node.attr_int(name, 0);
  if (a < 0) a += rank;
  if (rank == 0 || a < 0 || a >= rank) return std::nullopt;
  return a;
}

// Copies `rows` rows, each made of `pieces`: piece i moves `bytes[i]` from src[i] + r * sstride[i]
// to dst[i] + r * dstride[i].
struct Pieces {
  std::vector<const uint8_t*> src;
  std::vector<uint8_t*> dst;
  std::vector<size_t> bytes, sstride, dstride;
};

void copy_rows(const Pieces& p, int64_t rows, int64_t row_bytes, ThreadPool& pool) {
  auto body = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      for (size_t i = 0; i < p.bytes.size(); ++i)
        if (p.bytes[i])
          std::memcpy(p.dst[i] + r * p.dstride[i], p.src[i] + r * p.sstride[i], p.bytes[i]);
  };
  if (rows * row_bytes < kParallelBytes || pool.size() < 2) return body(0, rows);
  pool.parallel_for(
      rows, std::max<int64_t>(1, kParallelBytes / 4 / std::max<int64_t>(row_bytes, 1)), body);
}

bool concat_accepts(const Node& node) {
  return node.outputs.size() == 1;
}

Status concat_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& x0 = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x0.rank());
  const auto axis = axis_of(ctx.node(), "axis", rank);
  if (!axis) return onednn::run_reference(ctx);
  std::vector<int64_t> out = x0.dims();
  out[static_cast<size_t>(*axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_input(i)) return onednn::run_reference(ctx);
    const Tensor& x = ctx.input(i);
    if (x.dtype() != x0.dtype() || static_cast<int64_t>(x.rank()) != rank)
      return onednn::run_reference(ctx);
    for (int64_t d = 0; d < rank; ++d)
      if (d != *axis && x.dim(d) != x0.dim(d)) return onednn::run_reference(ctx);
    out[static_cast<size_t>(*axis)] += x.dim(*axis);
  }
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(0, x0.dtype(), out));
  const Rows r = rows_around(out, *axis);
  const size_t el = dtype_size(x0.dtype());
  const size_t row = static_cast<size_t>(out[static_cast<size_t>(*axis)] * r.inner) * el;
  Pieces p;
  size_t offset = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& x = ctx.input(i);
    const size_t chunk = static_cast<size_t>(x.dim(*axis) * r.inner) * el;
    p.src.push_back(static_cast<const uint8_t*>(x.raw()));
    p.dst.push_back(static_cast<uint8_t*>(y->raw()) + offset);
    p.bytes.push_back(chunk);
    p.sstride.push_back(chunk);
    p.dstride.push_back(row);
    offset += chunk;
  }
  if (y->numel() > 0) copy_rows(p, r.outer, static_cast<int64_t>(row), pool);
  return Status::ok();
}

// The split sizes when the kernel can take them without the op table's rules: a `split` input
// with one size per output, or an even split into the outputs (num_outputs, where given, being
// their count); else none.
std::optional<std::vector<int64_t>> split_sizes(const KernelContext& ctx, int64_t len) {
  const size_t n = ctx.num_outputs();
  std::vector<int64_t> sizes;
  if (ctx.has_input(1)) {
    const Tensor& s = ctx.input(1);
    if (s.rank() != 1 || static_cast<size_t>(s.numel()) != n) return std::nullopt;
    sizes = s.to_int_vector();
  } else {
    const Node& node = ctx.node();
    if (n == 0 || len % static_cast<int64_t>(n) != 0 ||
        (node.has_attr("num_outputs") && node.attr_int("num_outputs") != static_cast<int64_t>(n)))
      return std::nullopt;
    sizes.assign(n, len / static_cast<int64_t>(n));
  }
  int64_t sum = 0;
  for (int64_t v : sizes) {
    if (v < 0) return std::nullopt;
    sum += v;
  }
  if (sum != len) return std::nullopt;
  return sizes;
}

bool split_accepts(const Node& node) {
  return !node.outputs.empty();
}

Status split_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const auto axis = axis_of(ctx.node(), "axis", rank);
  if (!axis) return onednn::run_reference(ctx);
  const auto sizes = split_sizes(ctx, x.dim(*axis));
  if (!sizes) return onednn::run_reference(ctx);
  const Rows r = rows_around(x.dims(), *axis);
  const size_t el = dtype_size(x.dtype());
  const size_t row = static_cast<size_t>(x.dim(*axis) * r.inner) * el;
  Pieces p;
  size_t offset = 0;
  for (size_t i = 0; i < sizes->size(); ++i) {
    const size_t chunk = static_cast<size_t>((*sizes)[i] * r.inner) * el;
    if (ctx.has_output(i)) {
      std::vector<int64_t> dims = x.dims();
      dims[static_cast<size_t>(*axis)] = (*sizes)[i];
      FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(i, x.dtype(), dims));
      p.src.push_back(static_cast<const uint8_t*>(x.raw()) + offset);
      p.dst.push_back(static_cast<uint8_t*>(y->raw()));
      p.bytes.push_back(chunk);
      p.sstride.push_back(row);
      p.dstride.push_back(chunk);
    }
    offset += chunk;
  }
  if (x.numel() > 0) copy_rows(p, r.outer, static_cast<int64_t>(row), pool);
  return Status::ok();
}

}  // namespace

void register_cpu_concat_split_kernels(CpuKernelRegistry& r) {
  r.add("", "Concat", {concat_accepts, concat_run});
  r.add("", "Split", {split_accepts, split_run});
}

}  // namespace ferrite
