// Pooling library kernels for the cpu device. ferrite.Pool {channels_last}: max and average on
// [N, H, W, C] (below). MaxPool: 2-D, f32, without the Indices output, on NCHW
// planes spread over the thread pool. Results equal the reference kernel's bit for bit, NaNs
// included: each output is the first in-bounds tap (row-major tap order) replaced by every later
// tap that compares greater. Interior outputs (window inside the input) run that as a
// vectorisable select per tap; the thin border runs the same rule tap by tap.
#include <algorithm>
#include <limits>
#include <optional>
#include <vector>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/kernels/onednn_common.h"
#include "ops/conv_util.h"

namespace ferrite {

namespace {

struct PoolGeometry {
  int64_t H, W, OH, OW, KH, KW, sh, sw, dh, dw, pt, pl;
};

// The window of a 2-D pooling node over an H x W input, with its output size; nullopt when the
// attributes do not describe one (the reference kernel then reports why).
std::optional<PoolGeometry> pool_geometry(const Node& node, int64_t H, int64_t W) {
  const std::vector<int64_t> kernel = node.attr_ints("kernel_shape");
  if (kernel.size() != 2) return std::nullopt;
  auto win = read_window(node, kernel);
  if (!win) return std::nullopt;
  auto out = resolve_window(node, *win, {H, W});
  if (!out) return std::nullopt;
  return PoolGeometry{H,
                      W,
                      (*out)[0],
                      (*out)[1],
                      kernel[0],
                      kernel[1],
                      win->strides[0],
                      win->strides[1],
                      win->dilations[0],
                      win->dilations[1],
                      win->pad_begin(0),
                      win->pad_begin(1)};
}

// Outputs o whose window [o*s - p, o*s - p + extent) lies inside [0, n).
std::pair<int64_t, int64_t> interior(int64_t n, int64_t out, int64_t s, int64_t p, int64_t ext) {
  const int64_t lo = (p + s - 1) / s;
  const int64_t hi = n + p - ext < 0 ? 0 : (n + p - ext) / s + 1;
  return {std::min(lo, out), std::max(std::min(lo, out), std::min(hi, out))};
}

float border_max(const float* in, const PoolGeometry& g, int64_t oh, int64_t ow) {
  float best = std::numeric_limits<float>::lowest();
  bool seen = false;
  for (int64_t kh = 0; kh < g.KH; ++kh) {
    const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
    if (ih < 0 || ih >= g.H) continue;
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
      if (iw < 0 || iw >= g.W) continue;
      const float v = in[ih * g.W + iw];
      if (!seen || v > best) best = v;
      seen = true;
    }
  }
  return best;
}

FERRITE_TARGET_CLONES void max_pool_plane(const float* __restrict in, float* __restrict out,
                                          const PoolGeometry& g) {
  const auto [oh0, oh1] = interior(g.H, g.OH, g.sh, g.pt, (g.KH - 1) * g.dh + 1);
  const auto [ow0, ow1] = interior(g.W, g.OW, g.sw, g.pl, (g.KW - 1) * g.dw + 1);
  for (int64_t oh = 0; oh < g.OH; ++oh) {
    float* orow = out + oh * g.OW;
    if (oh < oh0 || oh >= oh1) {
      for (int64_t ow = 0; ow < g.OW; ++ow) orow[ow] = border_max(in, g, oh, ow);
      continue;
    }
    for (int64_t ow = 0; ow < ow0; ++ow) orow[ow] = border_max(in, g, oh, ow);
    for (int64_t ow = ow1; ow < g.OW; ++ow) orow[ow] = border_max(in, g, oh, ow);
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const float* irow = in + (oh * g.sh - g.pt + kh * g.dh) * g.W;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t off = kw * g.dw - g.pl;  // input column of output ow: ow * sw + off
        if (kh == 0 && kw == 0) {
          for (int64_t ow = ow0; ow < ow1; ++ow) orow[ow] = irow[ow * g.sw + off];
        } else if (g.sw == 2) {
          for (int64_t ow = ow0; ow < ow1; ++ow) {
            const float v = irow[2 * ow + off];
            orow[ow] = v > orow[ow] ? v : orow[ow];
          }
        } else {
          for (int64_t ow = ow0; ow < ow1; ++ow) {
            const float v = irow[ow * g.sw + off];
            orow[ow] = v > orow[ow] ? v : orow[ow];
          }
        }
      }
    }
  }
}

bool max_pool_accepts(const Node& node) {
  if (!onednn::input_is_f32(node, 0)) return false;
  if (node.outputs.size() > 1 && node.output(1)) return false;  // Indices: the reference
  const Value* x = node.input(0);
  return !x->type.shape.rank_known() || x->type.shape.rank() == 4;
}

Status max_pool_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& x = ctx.input(0);
  const Node& node = ctx.node();
  if (x.dtype() != DType::kF32 || x.rank() != 4 || (ctx.num_outputs() > 1 && ctx.has_output(1)))
    return onednn::run_reference(ctx);
  const auto geom = pool_geometry(node, x.dim(2), x.dim(3));
  if (!geom) return onednn::run_reference(ctx);
  const PoolGeometry& g = *geom;
  const int64_t storage_order = node.attr_int("storage_order", 0);
  if (storage_order != 0 && storage_order != 1) return onednn::run_reference(ctx);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output_uninitialized(
                                           0, DType::kF32, {x.dim(0), x.dim(1), g.OH, g.OW}));
  const int64_t planes = x.dim(0) * x.dim(1);
  if (planes == 0 || g.OH == 0 || g.OW == 0) return Status::ok();
  const float* px = x.data<float>();
  float* py = y->data<float>();
  const int64_t work = std::max<int64_t>(1, g.OH * g.OW * g.KH * g.KW);
  pool.parallel_for(planes, std::max<int64_t>(1, 32768 / work), [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) max_pool_plane(px + p * g.H * g.W, py + p * g.OH * g.OW, g);
  });
  return Status::ok();
}

// Vectors stay local (never passed or returned): the ABI does not depend on each target clone.
typedef float v16 __attribute__((vector_size(64)));

// ferrite.Pool {channels_last} on [N, H, W, C]: per output pixel, the in-bounds taps (row-major
// tap order) reduced 16 channels at a time in registers (the reduction was a pass over the
// output pixel's channels per tap, a load and a store of the output for every tap: SqueezeNet's
// first max pool took 150 us at one thread). Max keeps the reference's rule (first tap, then
// every later tap that compares greater: NaN as the reference has it); average sums in tap
// order and divides by the taps in bounds, or by the whole window where count_include_pad says
// so (only without ceil_mode, whose extra outputs count differently). `offs`: room for KH * KW.
FERRITE_TARGET_CLONES void pool_nhwc_row(const float* __restrict in, float* __restrict out,
                                         const PoolGeometry& g, int64_t C, int64_t oh, bool max,
                                         bool include_pad, int64_t* __restrict offs) {
  for (int64_t ow = 0; ow < g.OW; ++ow) {
    int64_t taps = 0;
    for (int64_t kh = 0; kh < g.KH; ++kh) {
      const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
      if (ih < 0 || ih >= g.H) continue;
      for (int64_t kw = 0; kw < g.KW; ++kw) {
        const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
        if (iw >= 0 && iw < g.W) offs[taps++] = (ih * g.W + iw) * C;
      }
    }
    if (taps == 0) continue;  // no tap in bounds (not from a valid window): left as it was
    float* o = out + ow * C;
    const float d = static_cast<float>(include_pad ? g.KH * g.KW : taps);
    // 16-channel blocks; a channel count off the width ends with the block that ends at C
    // (overlapping the one before: the same values written twice), under 16 channels scalar.
    auto block = [&](int64_t c) {
      v16 acc;
      __builtin_memcpy(&acc, in + offs[0] + c, sizeof acc);
      for (int64_t t = 1; t < taps; ++t) {
        v16 x;
        __builtin_memcpy(&x, in + offs[t] + c, sizeof x);
        acc = max ? (x > acc ? x : acc) : acc + x;
      }
      if (!max) acc = acc / d;
      __builtin_memcpy(o + c, &acc, sizeof acc);
    };
    int64_t c = 0;
    for (; c + 16 <= C; c += 16) block(c);
    if (c < C && C >= 16) {
      block(C - 16);
      continue;
    }
    for (; c < C; ++c) {
      float acc = in[offs[0] + c];
      for (int64_t t = 1; t < taps; ++t) {
        const float v = in[offs[t] + c];
        acc = max ? (v > acc ? v : acc) : acc + v;
      }
      o[c] = max ? acc : acc / d;
    }
  }
}

bool pool_nhwc_accepts(const Node& node) {
  return onednn::input_is_f32(node, 0) && node.attr_int("channels_last", 1) != 0;
}

Status pool_nhwc_run(KernelContext& ctx, ThreadPool& pool) {
  const Tensor& x = ctx.input(0);
  const Node& node = ctx.node();
  const bool max = node.attr_string("mode") == "max";
  const bool include_pad = !max && node.attr_int("count_include_pad", 0) != 0;
  if (x.dtype() != DType::kF32 || x.rank() != 4 || node.attr_int("channels_last", 1) == 0 ||
      (include_pad && node.attr_int("ceil_mode", 0) != 0))
    return onednn::run_reference(ctx);
  const auto geom = pool_geometry(node, x.dim(1), x.dim(2));
  if (!geom) return onednn::run_reference(ctx);
  const PoolGeometry& g = *geom;
  const int64_t N = x.dim(0), C = x.dim(3);
  FERRITE_ASSIGN_OR_RETURN(Tensor * y,
                           ctx.allocate_output_uninitialized(0, DType::kF32, {N, g.OH, g.OW, C}));
  const int64_t rows = N * g.OH;
  if (rows == 0 || g.OW == 0 || C == 0) return Status::ok();
  const float* px = x.data<float>();
  float* py = y->data<float>();
  const int64_t work = std::max<int64_t>(1, g.OW * g.KH * g.KW * C);
  pool.parallel_for(rows, std::max<int64_t>(1, 32768 / work), [&](int64_t r0, int64_t r1) {
    std::vector<int64_t> offs(static_cast<size_t>(g.KH * g.KW));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / g.OH, oh = r % g.OH;
      pool_nhwc_row(px + n * g.H * g.W * C, py + r * g.OW * C, g, C, oh, max, include_pad,
                    offs.data());
    }
  });
  return Status::ok();
}

}  // namespace

void register_cpu_pool_kernels(CpuKernelRegistry& r) {
  r.add("", "MaxPool", {max_pool_accepts, max_pool_run});
  r.add("ferrite", "Pool", {pool_nhwc_accepts, pool_nhwc_run});
}

}  // namespace ferrite
